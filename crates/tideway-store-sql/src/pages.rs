//! A page's reads in one statement ([`Pages::page_facts`]): the entry rule's
//! reposts and insertions, the viewer's relations, the counts and marks read
//! ahead, and the check of the records a node holds a copy of, as the
//! branches of one `UNION ALL`. One statement is one snapshot: a held
//! record found current is current with the counts beside it, and the page
//! pays one round trip and one statement's overhead instead of five. On
//! PostgreSQL it is one fixed text ([`PG_PAGE`]), planned once per
//! connection.
//!
//! On MySQL and MariaDB the same branches go as one `UNION ALL` text with
//! its lists written in, and the viewer's blocks and mutes are read whole
//! (a range each) instead of probed per user.
//!
//! Every branch yields `(what, a, b, c, name)`: a tag, three integers and a
//! text (only counts and reactions use it). The tags: `r` a repost, `i` an
//! insertion, `f` `b` `k` `K` `u` the relations (`u` a mute, as `m` is the
//! viewer's reaction), `c` `v` `m` the counts and marks, `x` a held copy's
//! row.

use crate::graph::mark_relation;
use crate::reactions::HydrationRows;
use crate::rows::{int, k, text};
use crate::{Dialect, SqlStore};
use async_trait::async_trait;
use sqlx::any::AnyRow;
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

/// A list of ids, comma-separated: PostgreSQL's statement binds it as a
/// text value, MySQL's writes it in as literals (integers only: nothing
/// to escape).
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

/// The most rows of a viewer's blocks, of those blocking it, or of its
/// mutes that MySQL's page statement reads (each a range of the viewer's
/// own rows); a viewer with more gets its relations by lists after.
const MY_RELATION_ROWS: usize = 1000;

impl SqlStore {
    /// The page's rows on PostgreSQL: [`PG_PAGE`], one fixed text.
    async fn pg_page_rows(&self, q: &PageQuery<'_>) -> Result<Vec<AnyRow>> {
        let nothing = q.originals.is_empty()
            && q.related.is_empty()
            && q.hydrate.is_empty()
            && q.held.is_empty()
            && q.followees_of.is_none()
            && q.promotions_at.is_none();
        if nothing {
            return Ok(vec![]);
        }
        let reposts = !q.originals.is_empty() && !q.reposters.is_empty();
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
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
            .map_err(self.err())
    }

    /// The page's rows on MySQL: the branches of [`PG_PAGE`] as one
    /// `UNION ALL` sent as text (its lists written in as literals: every
    /// page's text differs, and MariaDB optimizes every execution of a
    /// prepared statement anyway), one round trip and one statement where
    /// the parts side by side were seven. The viewer's blocks, blockers and
    /// mutes are read whole (a range each, usually a few rows, up to
    /// [`MY_RELATION_ROWS`]) rather than probed per related user, so they
    /// cover the reposters found too.
    async fn my_page_rows(&self, q: &PageQuery<'_>) -> Result<Vec<AnyRow>> {
        let mut parts: Vec<String> = Vec::new();
        let originals = list(q.originals.iter().map(|i| k(i.0)));
        if !q.originals.is_empty() && !q.reposters.is_empty() {
            // The reposters are a filter, not ranges (see `reposts_by`).
            parts.push(format!(
                "SELECT 'r', repost_of, author, id, '' FROM tw_items WHERE repost_of IN ({originals}) \
                 AND (author + 0) IN ({}) AND live = 1",
                list(q.reposters.iter().map(|u| k(u.0)))
            ));
        }
        if let Some(u) = q.inserts_of.filter(|_| !q.originals.is_empty()) {
            parts.push(format!(
                "SELECT 'i', item, MIN(k), MIN(k), '' FROM tw_inserts WHERE user_id = {} AND item IN ({originals}) \
                 GROUP BY item",
                k(u.0)
            ));
        }
        if let Some(v) = q.viewer.map(|v| k(v.0)) {
            let cap = MY_RELATION_ROWS + 1;
            parts
                .push(format!("SELECT 'k', target, target, target, '' FROM tw_blocks WHERE user_id = {v} LIMIT {cap}"));
            parts.push(format!(
                "SELECT 'K', user_id, user_id, user_id, '' FROM tw_blocks WHERE target = {v} LIMIT {cap}"
            ));
            parts.push(format!("SELECT 'u', target, target, target, '' FROM tw_mutes WHERE user_id = {v} LIMIT {cap}"));
            if !q.follows_known {
                let mut who: Vec<i64> = q.related.iter().chain(q.reposters).map(|u| k(u.0)).collect();
                who.sort_unstable();
                who.dedup();
                if !who.is_empty() {
                    let who = list(who.into_iter());
                    parts.push(format!(
                        "SELECT 'f', followee, followee, followee, '' FROM tw_follows WHERE follower = {v} AND followee IN ({who})"
                    ));
                    parts.push(format!(
                        "SELECT 'b', follower, follower, follower, '' FROM tw_followers \
                         WHERE followee = {v} AND follower IN ({who})"
                    ));
                }
            }
        }
        if !q.hydrate.is_empty() {
            let h = list(q.hydrate.iter().map(|i| k(i.0)));
            parts.push(format!("SELECT 'c', item, n, n, what FROM tw_item_counts WHERE item IN ({h}) AND n > 0"));
            if let Some(v) = q.viewer.map(|v| k(v.0)) {
                parts.push(format!(
                    "SELECT 'v', repost_of, COUNT(*), COUNT(*), '' FROM tw_items \
                     WHERE author = {v} AND repost_of IN ({h}) AND live = 1 GROUP BY repost_of"
                ));
                parts.push(format!(
                    "SELECT 'm', item, COUNT(*), COUNT(*), kind FROM tw_reactions \
                     WHERE user_id = {v} AND item IN ({h}) GROUP BY item, kind"
                ));
            }
        }
        if !q.held.is_empty() {
            // The held copies by their `rev` alone (not the records whole).
            let x = list(q.held.iter().map(|(i, _)| k(i.0)));
            parts.push(format!("SELECT 'x', id, rev, rev, '' FROM tw_items WHERE id IN ({x})"));
        }
        if let Some(u) = q.followees_of {
            parts.push(format!("SELECT 'g', grev, grev, grev, '' FROM tw_users WHERE id = {}", k(u.0)));
        }
        if let Some(t) = q.promotions_at {
            parts.push(format!(
                "SELECT 'p', id, item, every, CONCAT(starts_at, ',', ends_at) FROM tw_promotions \
                 WHERE starts_at <= {t} AND ends_at > {t}",
                t = t.0
            ));
        }
        if parts.is_empty() {
            return Ok(vec![]);
        }
        let sql = format!("({})", parts.join(") UNION ALL ("));
        sqlx::raw_sql(&sql).fetch_all(&self.pool).await.map_err(self.err())
    }
}

#[async_trait]
impl Pages for SqlStore {
    async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        let mysql = self.dialect == Dialect::MySql;
        let rows = if mysql { self.my_page_rows(q).await? } else { self.pg_page_rows(q).await? };
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
        let mut by_original: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        let mut inserted: HashMap<u64, u64> = HashMap::new();
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        // Rows of the viewer's blocks, blockers and mutes (MySQL caps each).
        let mut relation_rows = [0usize; 3];
        let mut hydration = HydrationRows::default();
        let mut current: HashMap<u64, i64> = HashMap::new();
        let mut version = None;
        let mut promotions = Vec::new();
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
                tag => {
                    if let Some(i) = ["k", "K", "u"].iter().position(|t| *t == tag) {
                        relation_rows[i] += 1;
                    }
                    mark_relation(rel.entry(a).or_default(), tag)
                }
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
                let who: Vec<UserId> = q.related.iter().chain(&extra).copied().collect();
                if mysql && relation_rows.iter().any(|n| *n > MY_RELATION_ROWS) {
                    // More blocks or mutes than the statement reads: by lists.
                    let rels = if q.follows_known {
                        tideway_store::Graph::relations_unfollowed(self, v, &who).await?
                    } else {
                        tideway_store::Graph::relations(self, v, &who).await?
                    };
                    who.into_iter().zip(rels).collect()
                } else {
                    who.into_iter().map(|u| (u, rel.get(&u.0).copied().unwrap_or_default())).collect()
                }
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

/// The held copies that are not current: a copy is current when its row
/// has the copy's rev (a deleted item's rev moved with its delete).
fn stale(held: &[(ItemId, u32)], current: &HashMap<u64, i64>) -> Vec<ItemId> {
    held.iter()
        .filter(|(id, rev)| current.get(&id.0).is_none_or(|&r| r != i64::from(*rev)))
        .map(|(id, _)| *id)
        .collect()
}
