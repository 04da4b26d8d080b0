//! A page's reads in one statement ([`Pages::page_facts`]): the entry rule's
//! reposts and insertions, the viewer's relations, the counts and marks read
//! ahead, and the check of the records a node holds a copy of, as the
//! branches of one `UNION ALL`. One statement is one snapshot: a held
//! record found current is current with the counts beside it, and the page
//! pays one round trip and one statement's overhead instead of five.
//!
//! On MySQL and MariaDB the parts go as separate statements side by side
//! (the one statement measured slower there), with the held copies checked
//! by a statement of their own.
//!
//! Every branch yields `(what, a, b, c, name)`: a tag, three integers and a
//! text (only counts and reactions use it). The tags: `r` a repost, `i` an
//! insertion, `f` `b` `k` `K` `u` the relations (`u` a mute, as `m` is the
//! viewer's reaction), `c` `v` `m` the counts and marks, `x` a held copy's
//! row.

use crate::graph::mark_relation;
use crate::reactions::HydrationRows;
use crate::rows::{in_list, int, k, text};
use crate::{Dialect, SqlStore};
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_core::{ItemId, Relation, UserId};
use tideway_store::{PageFacts, PageQuery, Pages, Result};

/// A bound value: an id, or a list of ids as text.
enum Bind {
    Int(i64),
    Text(String),
}

/// The statement being written and its binds, in order.
#[derive(Default)]
struct Stmt {
    binds: Vec<Bind>,
}

impl Stmt {
    fn int(&mut self, v: i64) {
        self.binds.push(Bind::Int(v));
    }

    /// The condition "`col` is one of `vals`" (`vals` not empty).
    ///
    /// A list is one text value made an array (`= ANY`: still an index
    /// scan), so the statement's text is the same for every page and is
    /// prepared once per connection. PostgreSQL still plans it at each
    /// execution (a custom plan, ~0.6-1 ms of the page's ~1 ms in the
    /// database): its generic plan, forced on connections of their own,
    /// cut that to 0.03 ms and the in-process page ×1.6-1.9, but served half
    /// the requests/s over HTTP on a larger graph (docs/benchmarks.md), so
    /// the default stays.
    fn one_of(&mut self, col: &str, vals: impl Iterator<Item = i64>) -> String {
        let list: Vec<String> = vals.map(|v| v.to_string()).collect();
        self.binds.push(Bind::Text(list.join(",")));
        format!("{col} = ANY(string_to_array(?, ',')::bigint[])")
    }
}

#[async_trait]
impl Pages for SqlStore {
    async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        if self.dialect == Dialect::MySql {
            // MariaDB ran the one statement ×2 slower than its parts side
            // by side (`bench-nodes`, warm home p50 5.2 ms against 2.4):
            // there the parts go as separate statements, at once, and the
            // held copies are checked by their `rev` alone (the parts' own
            // check would read every held record whole, bodies included).
            let parts = PageQuery { held: &[], ..*q };
            let (mut facts, current) =
                tokio::try_join!(tideway_store::facts_by_parts(self, &parts), self.revs(q.held))?;
            facts.stale = stale(q.held, &current);
            return Ok(facts);
        }
        let originals = q.originals.iter().map(|i| k(i.0));
        let mut parts: Vec<String> = Vec::new();
        let mut st = Stmt::default();
        // The reposts, named `rp` for the reposters' relations below.
        let reposts = !q.originals.is_empty() && !q.reposters.is_empty();
        let mut with = String::new();
        if reposts {
            let of = st.one_of("repost_of", originals.clone());
            let by = st.one_of("author", q.reposters.iter().map(|u| k(u.0)));
            with = format!("WITH rp AS (SELECT repost_of, author, id FROM tw_items WHERE {of} AND {by} AND live = 1) ");
            parts.push("SELECT 'r', repost_of, author, id, '' FROM rp".to_owned());
        }
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
        if let Some(u) = inserts {
            st.int(k(u.0));
            let of = st.one_of("item", originals);
            parts.push(format!(
                "SELECT 'i', item, MIN(k), MIN(k), '' FROM tw_inserts WHERE user_id = ? AND {of} GROUP BY item"
            ));
        }
        // The viewer's relations to the related users, and to the reposters
        // found (from `rp`: the entry rule asks of both).
        if let Some(v) = q.viewer {
            for (tag, table, own, other) in [
                ("f", "tw_follows", "follower", "followee"),
                ("b", "tw_followers", "followee", "follower"),
                ("k", "tw_blocks", "user_id", "target"),
                ("K", "tw_blocks", "target", "user_id"),
                ("u", "tw_mutes", "user_id", "target"),
            ] {
                let branch = |cond: &str| {
                    format!("SELECT '{tag}', {other}, {other}, {other}, '' FROM {table} WHERE {own} = ? AND {cond}")
                };
                if !q.related.is_empty() {
                    st.int(k(v.0));
                    let among = st.one_of(other, q.related.iter().map(|u| k(u.0)));
                    parts.push(branch(&among));
                }
                if reposts {
                    st.int(k(v.0));
                    parts.push(branch(&format!("{other} IN (SELECT author FROM rp)")));
                }
            }
        }
        if !q.hydrate.is_empty() {
            let ids = || q.hydrate.iter().map(|i| k(i.0));
            let of = st.one_of("item", ids());
            parts.push(format!("SELECT 'c', item, n, n, what FROM tw_item_counts WHERE {of} AND n > 0"));
            if let Some(v) = q.viewer {
                st.int(k(v.0));
                let of = st.one_of("repost_of", ids());
                parts.push(format!(
                    "SELECT 'v', repost_of, COUNT(*), COUNT(*), '' FROM tw_items \
                     WHERE author = ? AND {of} AND live = 1 GROUP BY repost_of"
                ));
                st.int(k(v.0));
                let of = st.one_of("item", ids());
                parts.push(format!(
                    "SELECT 'm', item, COUNT(*), COUNT(*), kind FROM tw_reactions \
                     WHERE user_id = ? AND {of} GROUP BY item, kind"
                ));
            }
        }
        if !q.held.is_empty() {
            let of = st.one_of("id", q.held.iter().map(|(i, _)| k(i.0)));
            parts.push(format!("SELECT 'x', id, rev, rev, '' FROM tw_items WHERE {of}"));
        }
        let mut by_original: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        let mut inserted: HashMap<u64, u64> = HashMap::new();
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        let mut hydration = HydrationRows::default();
        let mut current: HashMap<u64, i64> = HashMap::new();
        let rows = if parts.is_empty() {
            vec![]
        } else {
            let sql = self.q(&format!("{with}{}", parts.join(" UNION ALL ")));
            let mut query = sqlx::query(&sql);
            for b in st.binds {
                query = match b {
                    Bind::Int(v) => query.bind(v),
                    Bind::Text(t) => query.bind(t),
                };
            }
            query.fetch_all(&self.pool).await.map_err(self.err())?
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
            stale: stale(q.held, &current),
        })
    }
}

impl SqlStore {
    /// The stored `rev` of each of the held items found (by id).
    async fn revs(&self, held: &[(ItemId, u32)]) -> Result<HashMap<u64, i64>> {
        if held.is_empty() {
            return Ok(HashMap::new());
        }
        let (m, binds) = in_list(held.iter().map(|(i, _)| k(i.0)));
        let rows = self.fetch(&format!("SELECT id, rev FROM tw_items WHERE id IN ({m})"), &binds).await?;
        rows.iter().map(|r| Ok((int(r, 0)? as u64, int(r, 1)?))).collect()
    }
}

/// The held copies that are not current: a copy is current when its row
/// has the copy's rev (a deleted item's rev moved with its delete).
fn stale(held: &[(ItemId, u32)], current: &HashMap<u64, i64>) -> Vec<ItemId> {
    held.iter()
        .filter(|(id, rev)| current.get(&id.0).is_none_or(|&r| r != i64::from(*rev)))
        .map(|(id, _)| *id)
        .collect()
}
