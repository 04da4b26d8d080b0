//! A page's reads in one statement ([`Pages::page_facts`]): the entry rule's
//! reposts and insertions, the viewer's relations, the counts and marks read
//! ahead, and the check of the records a node holds a copy of, as the
//! branches of one `UNION ALL`. One statement is one snapshot: a held
//! record found current is current with the counts beside it, and the page
//! pays one round trip and one statement's overhead instead of five.
//!
//! Every branch yields `(what, a, b, c, name)`: a tag, three integers and a
//! text (only counts and reactions use it). The tags: `r` a repost, `i` an
//! insertion, `f` `b` `k` `K` `u` the relations (`u` a mute, as `m` is the
//! viewer's reaction), `c` `v` `m` the counts and marks, `x` a held copy's
//! row.

use crate::SqlStore;
use crate::graph::mark_relation;
use crate::reactions::HydrationRows;
use crate::rows::{int, k, marks, text};
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_core::{ItemId, Relation, UserId};
use tideway_store::{PageFacts, PageQuery, Pages, Result};

/// An `IN` list of `vals` padded to `len` by repeating the last value (as
/// [`crate::rows::in_list`] does), so that the lists of one kind share a
/// length and a page's statement texts stay few (each text is prepared once
/// per connection).
fn padded(vals: impl IntoIterator<Item = i64>, len: usize, binds: &mut Vec<i64>) -> String {
    let start = binds.len();
    binds.extend(vals);
    if let Some(&last) = binds[start..].last() {
        binds.resize(start + len, last);
    }
    marks(len)
}

/// The power of two at or above the longest of `lens`.
fn common_len(lens: &[usize]) -> usize {
    lens.iter().copied().max().unwrap_or(0).next_power_of_two()
}

#[async_trait]
impl Pages for SqlStore {
    async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        let originals = q.originals.iter().map(|i| k(i.0));
        let held_ids = q.held.iter().map(|(i, _)| k(i.0));
        // The item lists share one length, the user lists theirs.
        let items_len = common_len(&[q.originals.len(), q.hydrate.len(), q.held.len()]);
        let mut parts: Vec<String> = Vec::new();
        let mut binds: Vec<i64> = Vec::new();
        // The reposts, named `rp` for the reposters' relations below.
        let reposts = !q.originals.is_empty() && !q.reposters.is_empty();
        let mut with = String::new();
        if reposts {
            let mo = padded(originals.clone(), items_len, &mut binds);
            let mr = padded(q.reposters.iter().map(|u| k(u.0)), q.reposters.len().next_power_of_two(), &mut binds);
            with = format!(
                "WITH rp AS (SELECT repost_of, author, id FROM tw_items \
                 WHERE repost_of IN ({mo}) AND author IN ({mr}) AND live = 1) "
            );
            parts.push("SELECT 'r', repost_of, author, id, '' FROM rp".to_owned());
        }
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
        if let Some(u) = inserts {
            binds.push(k(u.0));
            let mo = padded(originals, items_len, &mut binds);
            parts.push(format!(
                "SELECT 'i', item, MIN(k), MIN(k), '' FROM tw_inserts WHERE user_id = ? AND item IN ({mo}) GROUP BY item"
            ));
        }
        // The viewer's relations to the related users, and to the reposters
        // found (from `rp`: the entry rule asks of both).
        if let Some(v) = q.viewer {
            let len = q.related.len().next_power_of_two();
            for (tag, table, own, other) in [
                ("f", "tw_follows", "follower", "followee"),
                ("b", "tw_followers", "followee", "follower"),
                ("k", "tw_blocks", "user_id", "target"),
                ("K", "tw_blocks", "target", "user_id"),
                ("u", "tw_mutes", "user_id", "target"),
            ] {
                let branch = |set: &str| {
                    format!(
                        "SELECT '{tag}', {other}, {other}, {other}, '' FROM {table} WHERE {own} = ? AND {other} IN ({set})"
                    )
                };
                if !q.related.is_empty() {
                    binds.push(k(v.0));
                    let m = padded(q.related.iter().map(|u| k(u.0)), len, &mut binds);
                    parts.push(branch(&m));
                }
                if reposts {
                    binds.push(k(v.0));
                    parts.push(branch("SELECT author FROM rp"));
                }
            }
        }
        if !q.hydrate.is_empty() {
            let ids = || q.hydrate.iter().map(|i| k(i.0));
            let m = padded(ids(), items_len, &mut binds);
            parts.push(format!("SELECT 'c', item, n, n, what FROM tw_item_counts WHERE item IN ({m}) AND n > 0"));
            if let Some(v) = q.viewer {
                binds.push(k(v.0));
                let m = padded(ids(), items_len, &mut binds);
                parts.push(format!(
                    "SELECT 'v', repost_of, COUNT(*), COUNT(*), '' FROM tw_items \
                     WHERE author = ? AND repost_of IN ({m}) AND live = 1 GROUP BY repost_of"
                ));
                binds.push(k(v.0));
                let m = padded(ids(), items_len, &mut binds);
                parts.push(format!(
                    "SELECT 'm', item, COUNT(*), COUNT(*), kind FROM tw_reactions \
                     WHERE user_id = ? AND item IN ({m}) GROUP BY item, kind"
                ));
            }
        }
        if !q.held.is_empty() {
            let m = padded(held_ids, items_len, &mut binds);
            parts.push(format!("SELECT 'x', id, rev, rev, '' FROM tw_items WHERE id IN ({m})"));
        }
        let mut by_original: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        let mut inserted: HashMap<u64, u64> = HashMap::new();
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        let mut hydration = HydrationRows::default();
        let mut current: HashMap<u64, i64> = HashMap::new();
        let rows = if parts.is_empty() {
            vec![]
        } else {
            self.fetch(&format!("{with}{}", parts.join(" UNION ALL ")), &binds).await?
        };
        for row in &rows {
            let what = text(row, 0)?;
            let a = int(row, 1)? as u64;
            match what.as_str() {
                "r" => {
                    by_original.entry(a).or_default().push((UserId(int(row, 2)? as u64), ItemId(int(row, 3)? as u64)))
                }
                "i" => {
                    inserted.insert(a, int(row, 2)? as u64);
                }
                "x" => {
                    current.insert(a, int(row, 2)?);
                }
                "c" | "v" | "m" => hydration.take(&what, a, int(row, 2)?, row, 4)?,
                tag => mark_relation(rel.entry(a).or_default(), tag),
            }
        }
        let reposts: Vec<Vec<(UserId, ItemId)>> = q
            .originals
            .iter()
            .map(|o| {
                let mut r = by_original.remove(&o.0).unwrap_or_default();
                r.sort_unstable_by_key(|(_, id)| *id);
                r
            })
            .collect();
        let relations = match q.viewer {
            Some(v) => {
                let extra = tideway_store::reposters_beyond(&reposts, q.related, v);
                q.related.iter().chain(&extra).map(|u| (*u, rel.get(&u.0).copied().unwrap_or_default())).collect()
            }
            None => vec![],
        };
        Ok(PageFacts {
            reposts,
            inserted: match inserts {
                Some(_) => q.originals.iter().map(|o| inserted.get(&o.0).copied()).collect(),
                None => vec![],
            },
            relations,
            hydrated: hydration.finish(q.hydrate, q.viewer),
            // A held copy is current when its row has the copy's rev (a
            // deleted item's rev moved with its delete).
            stale: q
                .held
                .iter()
                .filter(|(id, rev)| current.get(&id.0).is_none_or(|&r| r != i64::from(*rev)))
                .map(|(id, _)| *id)
                .collect(),
        })
    }
}
