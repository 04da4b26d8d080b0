//! A page's reads in one statement ([`Pages::page_facts`]): the entry rule's
//! reposts and insertions, the viewer's relations, the counts and marks read
//! ahead, and the check of the records a node holds a copy of, as the
//! branches of one `UNION ALL`. One statement is one snapshot: a held
//! record found current is current with the counts beside it, and the page
//! pays one round trip and one statement's overhead instead of five. On
//! PostgreSQL it is one fixed text ([`PG_PAGE`]), planned once per
//! connection.
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
use tideway_core::{ItemId, Millis, Relation, UserId};
use tideway_store::{PageFacts, PageQuery, Pages, Promotion, Result, StoreError};

/// The page's statement on PostgreSQL: one text for every page, so each
/// connection prepares it once, and written so that one plan suits every
/// list length (each branch an index probe driven by its list or by the
/// viewer), because the connections that run it plan it once, generically
/// (see `SqlStore::connect`): a custom plan of this many branches cost
/// ~0.6-1 ms per page, most of the page's time in the database.
///
/// `$1` originals, `$2` reposters, `$3` whose insertions (or NULL), `$4`
/// the viewer (or NULL: the viewer's branches find nothing), `$5` related
/// users, `$6` the items read ahead, `$7` the held copies, `$8` whose
/// followee-set version (or NULL), `$9` the time of the running promotions
/// (or NULL); lists are one text of comma-separated ids (`''`: none).
const PG_PAGE: &str = "\
WITH rp AS MATERIALIZED (\
  SELECT i.repost_of, i.author, i.id FROM unnest(string_to_array($1, ',')::bigint[]) o(id) \
  JOIN tw_items i ON i.repost_of = o.id \
  WHERE i.author = ANY(string_to_array($2, ',')::bigint[]) AND i.live = 1), \
who AS MATERIALIZED (\
  SELECT unnest(string_to_array($5, ',')::bigint[]) AS u UNION SELECT author FROM rp) \
SELECT 'r', repost_of, author, id, '' FROM rp \
UNION ALL SELECT 'i', item, MIN(k), MIN(k), '' FROM tw_inserts \
  WHERE user_id = $3 AND item = ANY(string_to_array($1, ',')::bigint[]) GROUP BY item \
UNION ALL SELECT 'k', target, target, target, '' FROM tw_blocks \
  WHERE user_id = $4 AND target IN (SELECT u FROM who) \
UNION ALL SELECT 'K', user_id, user_id, user_id, '' FROM tw_blocks \
  WHERE target = $4 AND user_id IN (SELECT u FROM who) \
UNION ALL SELECT 'u', target, target, target, '' FROM tw_mutes \
  WHERE user_id = $4 AND target IN (SELECT u FROM who) \
UNION ALL SELECT 'c', item, n, n, what FROM tw_item_counts \
  WHERE item = ANY(string_to_array($6, ',')::bigint[]) AND n > 0 \
UNION ALL SELECT 'v', repost_of, COUNT(*), COUNT(*), '' FROM tw_items \
  WHERE author = $4 AND repost_of = ANY(string_to_array($6, ',')::bigint[]) AND live = 1 GROUP BY repost_of \
UNION ALL SELECT 'm', item, COUNT(*), COUNT(*), kind FROM tw_reactions \
  WHERE user_id = $4 AND item = ANY(string_to_array($6, ',')::bigint[]) GROUP BY item, kind \
UNION ALL SELECT 'x', id, rev, rev, '' FROM tw_items WHERE id = ANY(string_to_array($7, ',')::bigint[]) \
UNION ALL SELECT 'g', grev, grev, grev, '' FROM tw_users WHERE id = $8 \
UNION ALL SELECT 'p', id, item, every, starts_at::text || ',' || ends_at::text FROM tw_promotions \
  WHERE starts_at <= $9 AND ends_at > $9";

/// The follows of the viewer ([`PG_PAGE`]'s branches beside the blocks and
/// mutes, on the partitioned graph tables), asked unless the query says the
/// caller knows them (`follows_known`: a home page, which walks `F(u)`).
const PG_FOLLOWS: &str = "\
UNION ALL SELECT 'f', followee, followee, followee, '' FROM tw_follows \
  WHERE follower = $4 AND followee IN (SELECT u FROM who) \
UNION ALL SELECT 'b', follower, follower, follower, '' FROM tw_followers \
  WHERE followee = $4 AND follower IN (SELECT u FROM who)";

/// [`PG_PAGE`], and [`PG_PAGE`] with [`PG_FOLLOWS`]: the two texts a page
/// runs (each prepared and planned once per connection).
static PG_TEXTS: std::sync::LazyLock<[String; 2]> =
    std::sync::LazyLock::new(|| [PG_PAGE.to_owned(), format!("{PG_PAGE} {PG_FOLLOWS}")]);

/// A list of ids as the statement's text value.
fn list(ids: impl Iterator<Item = i64>) -> String {
    let mut out = String::new();
    for id in ids {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&id.to_string());
    }
    out
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
        let reposts = !q.originals.is_empty() && !q.reposters.is_empty();
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
        let mut by_original: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        let mut inserted: HashMap<u64, u64> = HashMap::new();
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        let mut hydration = HydrationRows::default();
        let mut current: HashMap<u64, i64> = HashMap::new();
        let mut version = None;
        let mut promotions = Vec::new();
        let nothing = q.originals.is_empty()
            && q.related.is_empty()
            && q.hydrate.is_empty()
            && q.held.is_empty()
            && q.followees_of.is_none()
            && q.promotions_at.is_none();
        let rows = if nothing {
            vec![]
        } else {
            sqlx::query(&PG_TEXTS[usize::from(!q.follows_known)])
                .bind(list(q.originals.iter().map(|i| k(i.0))))
                .bind(if reposts { list(q.reposters.iter().map(|u| k(u.0))) } else { String::new() })
                .bind(inserts.map(|u| k(u.0)))
                .bind(q.viewer.map(|v| k(v.0)))
                .bind(list(q.related.iter().map(|u| k(u.0))))
                .bind(list(q.hydrate.iter().map(|i| k(i.0))))
                .bind(list(q.held.iter().map(|(i, _)| k(i.0))))
                .bind(q.followees_of.map(|u| k(u.0)))
                .bind(q.promotions_at.map(|t| t.0))
                .fetch_all(&self.pages)
                .await
                .map_err(self.err())?
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
                "g" => version = Some(a),
                "p" => {
                    let span = text(row, 4)?;
                    let (starts, ends) = span.split_once(',').unwrap_or_default();
                    let at = |t: &str| {
                        t.parse::<i64>().map(Millis).map_err(|e| StoreError::corrupt_by("a promotion's times", e))
                    };
                    promotions.push(Promotion {
                        id: a,
                        item: ItemId(int(row, 2)? as u64),
                        every: u32::try_from(int(row, 3)?).unwrap_or(u32::MAX),
                        starts_at: at(starts)?,
                        ends_at: at(ends)?,
                    });
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
            // (no row: a user never seen, at version 0)
            followees_version: q.followees_of.map(|_| version.unwrap_or(0)),
            promotions: q.promotions_at.map(|_| {
                promotions.sort_unstable_by_key(|p| p.id);
                promotions
            }),
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
