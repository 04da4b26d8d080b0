//! A page's reads in one statement ([`Pages::page_facts`]): the entry rule's
//! reposts and insertions, the viewer's relations, the counts and marks read
//! ahead, and the check of the records a node holds a copy of, as the
//! branches of one `UNION ALL`. One statement is one snapshot: a held
//! record found current is current with the counts beside it, and the page
//! pays one round trip and one statement's overhead instead of five. On
//! PostgreSQL it is one fixed text ([`PG_PAGE`]), planned once per
//! connection.
//!
//! Most of a page's items have no reposts, reactions or insertions, and
//! their copies are current: the statement probes each item once, for its
//! counts, and drives the rest from what is there. An original counted as
//! reposted is looked up for its reposts, an item counted as reposted or
//! reacted to for the viewer's marks, and a viewer's insertions only if
//! the viewer inserted anything at all (one probe). The held copies are
//! checked one by one only once the item epoch moved from the one they
//! were current at (`tw_epoch`: every patch and delete moves it in its own
//! transaction). On PostgreSQL a warm 50-key batch's statement so touches
//! ~110 buffers where it touched ~640 (EXPLAIN ANALYZE: 0.44 ms, was 1.09). MariaDB spends a page's
//! statement mostly parsing and planning it (its lists are literals), so
//! there the held copies' check is left out, and the reposts found and the
//! viewer's marks are looked up beside each count there is, as subqueries
//! of the counts' branch (one branch and one list for all three: joins
//! driven by the counts planned slower than the probes they save); the
//! viewer's own repost is then found among the reposts gathered.
//!
//! The viewer's blocks, blockers and mutes are read whole (a range each of
//! the viewer's own rows, usually none, up to [`RELATION_ROWS`]) rather
//! than probed once per user of the page, so they cover the reposters found
//! too; a viewer with more gets its relations by lists after. A home page
//! whose node holds the viewer's own relations (read with the followee
//! list under its version, `Graph::followees_versioned`, and checked by
//! the version this statement reads) reads none (`relations_known`), and
//! looks for the viewer's insertions only if the copy says there are any:
//! on MariaDB three branches and a list of the batch's ids fewer to parse
//! and plan.
//!
//! On MySQL and MariaDB the same branches go as one `UNION ALL` text with
//! its lists written in. Its sessions estimate the lists from index
//! statistics rather than one index dive per value.
//!
//! Every branch yields `(what, a, b, c, name)`: a tag, three integers and a
//! text (only counts and reactions use it). The tags: `r` a repost, `i` an
//! insertion, `f` `b` `k` `K` `u` the relations (`u` a mute, as `m` is the
//! viewer's reaction), `c` `v` `m` the counts and marks (on MySQL with a
//! viewer `C`: a count and the viewer's share of it), `x` a held copy's
//! row, `e` the item epoch (on MySQL with the followee-set version asked in
//! its third column), `g` that version (PostgreSQL), `p` a promotion.

use crate::graph::mark_relation;
use crate::reactions::HydrationRows;
use crate::rows::{int, k, text};
use crate::tx::OrUnavailable;
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
/// followee-set version (or NULL), `$9` the time from which the promotions
/// not yet ended are read (or NULL: none read), `$10` the item epoch the held copies were current at (or
/// NULL: checked whatever the epoch), `$11` the viewer whose blocks and
/// mutes are read (NULL: the caller holds them, `relations_known`); lists
/// are one text of comma-separated ids (`''`: none).
const PG_PAGE: &str = "\
WITH cnt AS MATERIALIZED (\
  SELECT item, what, n FROM tw_item_counts \
  WHERE item = ANY(string_to_array($1, ',')::bigint[] || string_to_array($6, ',')::bigint[]) AND n > 0), \
rp AS MATERIALIZED (\
  SELECT i.repost_of, i.author, i.id FROM cnt JOIN tw_items i ON i.repost_of = cnt.item \
  WHERE cnt.what = 'p' AND cnt.item = ANY(string_to_array($1, ',')::bigint[]) \
  AND i.author = ANY(string_to_array($2, ',')::bigint[]) AND i.live = 1), \
who AS MATERIALIZED (\
  SELECT unnest(string_to_array($5, ',')::bigint[]) AS u UNION SELECT author FROM rp) \
SELECT 'r', repost_of, author, id, '' FROM rp \
UNION ALL SELECT 'i', item, MIN(k), MIN(k), '' FROM tw_inserts \
  WHERE user_id = $3 AND item = ANY(string_to_array($1, ',')::bigint[]) \
  AND EXISTS (SELECT 1 FROM tw_inserts WHERE user_id = $3) GROUP BY item \
UNION ALL (SELECT 'k', target, target, target, '' FROM tw_blocks WHERE user_id = $11 LIMIT {cap}) \
UNION ALL (SELECT 'K', user_id, user_id, user_id, '' FROM tw_blocks WHERE target = $11 LIMIT {cap}) \
UNION ALL (SELECT 'u', target, target, target, '' FROM tw_mutes WHERE user_id = $11 LIMIT {cap}) \
UNION ALL SELECT 'c', item, n, n, what FROM cnt WHERE item = ANY(string_to_array($6, ',')::bigint[]) \
UNION ALL SELECT 'v', c.item, v.n, v.n, '' FROM cnt c, LATERAL (SELECT COUNT(*) AS n FROM tw_items i \
  WHERE i.author = $4 AND i.repost_of = c.item AND i.live = 1) v \
  WHERE c.what = 'p' AND c.item = ANY(string_to_array($6, ',')::bigint[]) AND v.n > 0 \
UNION ALL SELECT 'm', c.item, m.n, m.n, substr(c.what, 3) FROM cnt c, LATERAL (SELECT COUNT(*) AS n FROM tw_reactions r \
  WHERE r.user_id = $4 AND r.item = c.item AND r.kind = substr(c.what, 3)) m \
  WHERE c.what LIKE 'k:%' AND c.item = ANY(string_to_array($6, ',')::bigint[]) AND m.n > 0 \
UNION ALL SELECT 'e', n, n, pv, '' FROM tw_epoch WHERE id = 1 \
UNION ALL SELECT 'x', id, rev, rev, '' FROM tw_items WHERE id = ANY(string_to_array($7, ',')::bigint[]) \
  AND $10::bigint IS DISTINCT FROM (SELECT n FROM tw_epoch WHERE id = 1) \
UNION ALL SELECT 'g', grev, grev, grev, '' FROM tw_users WHERE id = $8 \
UNION ALL SELECT 'p', id, item, every, starts_at::text || ',' || ends_at::text FROM tw_promotions \
  WHERE ends_at > $9";

/// The follows of the viewer ([`PG_PAGE`]'s branches beside the blocks and
/// mutes, on the partitioned graph tables) probed for the related users
/// and the reposters found (`who`), asked unless the query says the caller
/// knows them (`follows_known`: a home page, which walks `F(u)`).
const PG_FOLLOWS: &str = "\
UNION ALL SELECT 'f', followee, followee, followee, '' FROM tw_follows \
  WHERE follower = $4 AND followee IN (SELECT u FROM who) \
UNION ALL SELECT 'b', follower, follower, follower, '' FROM tw_followers \
  WHERE followee = $4 AND follower IN (SELECT u FROM who)";

/// [`PG_PAGE`], and [`PG_PAGE`] with [`PG_FOLLOWS`]: the two texts a page
/// runs (each prepared and planned once per connection).
static PG_TEXTS: std::sync::LazyLock<[String; 2]> = std::sync::LazyLock::new(|| {
    let page = PG_PAGE.replace("{cap}", &(RELATION_ROWS + 1).to_string());
    [page.clone(), format!("{page} {PG_FOLLOWS}")]
});

/// A list of ids, comma-separated: PostgreSQL's statement binds it as a
/// text value, MySQL's writes it in as literals (integers only: nothing
/// to escape).
fn list(ids: impl Iterator<Item = i64>) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(20 * ids.size_hint().0);
    for id in ids {
        if !out.is_empty() {
            out.push(',');
        }
        let _ = write!(out, "{id}");
    }
    out
}

/// The most rows of a viewer's blocks, of those blocking it, or of its
/// mutes that the page's statement reads (each a range of the viewer's own
/// rows, `{cap}` in [`PG_PAGE`] is one more); a viewer with more gets its
/// relations by lists after.
const RELATION_ROWS: usize = 1000;

impl SqlStore {
    /// The page's rows on PostgreSQL: [`PG_PAGE`], one fixed text.
    async fn pg_page_rows(&self, q: &PageQuery<'_>, promotions: Option<Millis>) -> Result<Vec<AnyRow>> {
        if q.asks_nothing() {
            return Ok(vec![]);
        }
        let reposts = !q.originals.is_empty() && !q.reposters.is_empty();
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
        let (originals, related) = (list(q.originals.iter().map(|i| k(i.0))), list(q.related.iter().map(|u| k(u.0))));
        let reposters = if reposts { list(q.reposters.iter().map(|u| k(u.0))) } else { String::new() };
        let hydrate = list(q.hydrate.iter().map(|i| k(i.0)));
        let held = list(q.held.iter().map(|(i, _)| k(i.0)));
        let text = &PG_TEXTS[usize::from(!q.follows_known)];
        self.pages
            .fetch_all(|| {
                sqlx::query(text)
                    .bind(originals.as_str())
                    .bind(reposters.as_str())
                    .bind(inserts.map(|u| k(u.0)))
                    .bind(q.viewer.map(|v| k(v.0)))
                    .bind(related.as_str())
                    .bind(hydrate.as_str())
                    .bind(held.as_str())
                    .bind(q.followees_of.map(|u| k(u.0)))
                    .bind(promotions.map(|t| t.0))
                    .bind(q.held_at.map(|e| e as i64))
                    .bind(q.viewer.filter(|_| !q.relations_known).map(|v| k(v.0)))
            })
            .await
            .or_unavailable(self)
    }

    /// The page's rows on MySQL: the branches of [`PG_PAGE`] as one
    /// `UNION ALL` sent as text (its lists written in as literals: every
    /// page's text differs, and MariaDB optimizes every execution of a
    /// prepared statement anyway), one round trip and one statement where
    /// the parts side by side were seven.
    async fn my_page_rows(&self, q: &PageQuery<'_>, promotions: Option<Millis>) -> Result<Vec<AnyRow>> {
        match my_page_text(q, promotions) {
            Some(sql) => self.pages.fetch_all(|| sqlx::raw_sql(&sql)).await.or_unavailable(self),
            None => Ok(vec![]),
        }
    }
}

/// MySQL's statement of the held copies' `rev`s.
fn my_held_text(held: &[(ItemId, u32)]) -> String {
    format!("SELECT 'x', id, rev, rev, '' FROM tw_items WHERE id IN ({})", list(held.iter().map(|(i, _)| k(i.0))))
}

/// Longest text a page's statement gathers the reposts of one original
/// into (the sessions' `group_concat_max_len`; a longer list is cut there,
/// and then read by `Items::reposts_by` after the statement). Small in this
/// crate's tests, so that they take that way.
#[cfg(not(test))]
pub(crate) const REPOSTS_TEXT_MAX: usize = 1 << 20;
#[cfg(test)]
pub(crate) const REPOSTS_TEXT_MAX: usize = 24;

/// The most reposts of one original a MySQL page gathers in a row's text
/// (all of them, whoever reposted; the node keeps the reposters'): an
/// original counted with more is read after the statement, by the
/// reposters (`Items::reposts_by`).
const REPOSTS_GATHERED_MAX: u64 = 64;

/// MySQL's branch of the counts of the items read ahead, and beside each
/// count the lookups it makes worth it: beside a count of reposts, its
/// reposts (`R` rows: `count;author:id.,…` gathered in the text column, up
/// to [`REPOSTS_GATHERED_MAX`]) and whether the viewer reposted; beside a count of a
/// reaction kind, whether the viewer reacted so (`C` rows; the viewer's
/// share in the fourth column). MariaDB parses and plans every listed
/// value once per branch, and most items have no count: one list where
/// there were four, and a probe only where a count says there is
/// something. Without a viewer or reposts to find, the plain counts (`c`).
fn my_counts_branch(q: &PageQuery<'_>) -> Option<String> {
    let reposts = my_gathers_reposts(q);
    let mut ids: Vec<i64> = q.hydrate.iter().map(|i| k(i.0)).collect();
    if reposts {
        ids.extend(q.originals.iter().map(|i| k(i.0)));
        ids.sort_unstable();
        ids.dedup();
    }
    if ids.is_empty() {
        return None;
    }
    let ids = list(ids.into_iter());
    if q.viewer.is_none() && !reposts {
        return Some(format!("SELECT 'c', item, n, n, what FROM tw_item_counts WHERE item IN ({ids}) AND n > 0"));
    }
    let reaction = |v: i64| {
        format!(
            "WHEN c.what LIKE 'k:%' THEN (SELECT COUNT(*) FROM tw_reactions \
             WHERE tw_reactions.user_id = {v} AND tw_reactions.item = c.item \
             AND tw_reactions.kind = SUBSTR(c.what, 3))"
        )
    };
    let own = match q.viewer.map(|v| k(v.0)) {
        // The viewer's own repost is found among the reposts gathered
        // (`page_facts`): a subquery for it cost MariaDB 10-20 us of
        // planning on every page.
        Some(v) if reposts => format!("CASE {} ELSE 0 END", reaction(v)),
        Some(v) => format!(
            "CASE WHEN c.what = 'p' THEN (SELECT COUNT(*) FROM tw_items FORCE INDEX (tw_items_reposts) \
             WHERE tw_items.repost_of = c.item AND tw_items.author = {v} AND tw_items.live = 1) \
             {} ELSE 0 END",
            reaction(v)
        ),
        None => "0".to_owned(),
    };
    let found = if reposts {
        // Every live repost, filtered by the reposters in the node
        // (`page_facts`): a list of them in the text cost MariaDB ~40 us of
        // parsing and planning a page, for reposts most pages do not have.
        // An original counted with more reposts than are worth gathering
        // gets its count alone, so is read after by the reposters.
        format!(
            "IF(c.n > {REPOSTS_GATHERED_MAX}, CONCAT(c.n, ';'), \
             (SELECT CONCAT(COUNT(*), ';', IFNULL(GROUP_CONCAT(author, ':', id, '.'), '')) \
             FROM tw_items FORCE INDEX (tw_items_reposts) WHERE repost_of = c.item AND live = 1))"
        )
    } else {
        "''".to_owned()
    };
    Some(format!(
        "SELECT IF(c.what = 'p', 'R', 'C'), c.item, c.n, {own}, IF(c.what = 'p', {found}, c.what) \
         FROM tw_item_counts c WHERE c.item IN ({ids}) AND c.n > 0"
    ))
}

/// Whether MySQL's page gathers the reposts of every original counted as
/// reposted (`R` rows); with a viewer, its own repost is then found among
/// them rather than by a subquery of its own.
fn my_gathers_reposts(q: &PageQuery<'_>) -> bool {
    !q.originals.is_empty() && !q.reposters.is_empty()
}

/// The reposts in an `R` row's text (`count;author:id.,…`); `None` when the
/// list was cut short (fewer whole pairs than counted).
fn gathered_reposts(text: &str) -> Result<Option<Vec<(UserId, ItemId)>>> {
    let bad = |e: std::num::ParseIntError| StoreError::corrupt_by("a page's gathered reposts", e);
    let Some((count, pairs)) = text.split_once(';') else {
        return Ok(if text.is_empty() { Some(vec![]) } else { None });
    };
    let count: usize = count.parse().map_err(bad)?;
    let mut out = Vec::with_capacity(count);
    for pair in pairs.split(',').filter(|p| !p.is_empty()) {
        // (each pair ends in `.`: one cut inside a number is seen)
        let Some((author, id)) = pair.strip_suffix('.').and_then(|p| p.split_once(':')) else { return Ok(None) };
        let (Ok(author), Ok(id)) = (author.parse(), id.parse()) else { return Ok(None) };
        out.push((UserId(author), ItemId(id)));
    }
    Ok((out.len() == count).then_some(out))
}

/// The text of MySQL's page statement ([`SqlStore::my_page_rows`]), which
/// reads the promotions not ended at `promotions` when given; `None` when
/// the query asks nothing. Its connections estimate the `IN` lists
/// from index statistics (`SqlStore::connect`), so the lookups on
/// `tw_items_reposts` force that index: its statistics count the items that
/// are no repost, and seen through them it looks worse than a scan.
fn my_page_text(q: &PageQuery<'_>, promotions: Option<Millis>) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let originals = list(q.originals.iter().map(|i| k(i.0)));
    if let Some(counted) = my_counts_branch(q) {
        parts.push(counted);
    }
    if let Some(u) = q.inserts_of.filter(|_| !q.originals.is_empty()) {
        parts.push(format!(
            "SELECT 'i', item, MIN(k), MIN(k), '' FROM tw_inserts WHERE user_id = {} AND item IN ({originals}) \
             GROUP BY item",
            k(u.0)
        ));
    }
    if let Some(v) = q.viewer.map(|v| k(v.0)).filter(|_| !q.relations_known) {
        let cap = RELATION_ROWS + 1;
        parts.push(format!("SELECT 'k', target, target, target, '' FROM tw_blocks WHERE user_id = {v} LIMIT {cap}"));
        parts.push(format!("SELECT 'K', user_id, user_id, user_id, '' FROM tw_blocks WHERE target = {v} LIMIT {cap}"));
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
    if !q.held.is_empty() && q.held_at.is_none() {
        // The held copies by their `rev` alone (not the records whole).
        // With the epoch they were current at, none: the statement's `e`
        // row tells whether it moved, and only then are they read, after
        // (in `page_facts`), so that the usual page parses no list it does
        // not need.
        parts.push(my_held_text(q.held));
    }
    if let Some(t) = promotions {
        parts.push(format!(
            "SELECT 'p', id, item, every, CONCAT(starts_at, ',', ends_at) FROM tw_promotions WHERE ends_at > {}",
            t.0
        ));
    }
    if parts.is_empty() && q.held.is_empty() && q.followees_of.is_none() && q.promotions_at.is_none() {
        return None;
    }
    // The epoch's row carries the followee-set version asked (one branch
    // fewer to plan; no user row: version 0) and the promotions' version.
    let version = match q.followees_of {
        Some(u) => format!("IFNULL((SELECT grev FROM tw_users WHERE id = {}), 0)", k(u.0)),
        None => "n".to_owned(),
    };
    parts.push(format!("SELECT 'e', n, {version}, pv, '' FROM tw_epoch WHERE id = 1"));
    Some(format!("({})", parts.join(") UNION ALL (")))
}

#[async_trait]
impl Pages for SqlStore {
    async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        let mysql = self.dialect == Dialect::MySql;
        // The promotions not yet ended, when asked, are read by the
        // statement (a node keeps its copy of them before the store, under
        // the shared half's token: `tideway_store::copies`).
        let rows = if mysql {
            self.my_page_rows(q, q.promotions_at).await?
        } else {
            self.pg_page_rows(q, q.promotions_at).await?
        };
        let inserts = q.inserts_of.filter(|_| !q.originals.is_empty());
        let mut by_original: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        // The reposters, to keep theirs of the reposts gathered (MySQL).
        let mut reposters: Option<std::collections::HashSet<UserId>> = None;
        // Originals whose gathered reposts were cut short (MySQL).
        let mut cut: Vec<ItemId> = Vec::new();
        // Whether the viewer's own repost is found among the gathered ones
        // (MySQL), and the originals where it could not be (cut short).
        let own_in_gathered = mysql && q.viewer.is_some() && my_gathers_reposts(q);
        let mut own_unknown: Vec<ItemId> = Vec::new();
        let mut inserted: HashMap<u64, u64> = HashMap::new();
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        // Rows of the viewer's blocks, blockers and mutes (each capped).
        let mut relation_rows = [0usize; 3];
        let mut hydration = HydrationRows::default();
        let mut current: HashMap<u64, i64> = HashMap::new();
        let mut version = None;
        let mut epoch = None;
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
                "e" => {
                    epoch = Some(a);
                    if mysql && q.followees_of.is_some() {
                        version = Some(int(row, 2)? as u64);
                    }
                }
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
                "C" => hydration.take_with_own(a, int(row, 2)?, int(row, 3)?, &text(row, 4)?),
                "R" => {
                    let gathered = gathered_reposts(&text(row, 4)?)?;
                    let own = match (q.viewer, &gathered) {
                        // (with gathering the statement leaves the viewer's
                        // own repost to be found here: see my_counts_branch)
                        (Some(v), Some(found)) if own_in_gathered => {
                            found.iter().filter(|(u, _)| *u == v).count() as i64
                        }
                        (Some(_), None) if own_in_gathered => {
                            own_unknown.push(ItemId(a));
                            0
                        }
                        _ => int(row, 3)?,
                    };
                    hydration.take_with_own(a, int(row, 2)?, own, "p");
                    match gathered {
                        Some(found) => {
                            if !found.is_empty() {
                                let theirs = reposters.get_or_insert_with(|| q.reposters.iter().copied().collect());
                                let kept = found.into_iter().filter(|(u, _)| theirs.contains(u));
                                by_original.entry(a).or_default().extend(kept)
                            }
                        }
                        None => cut.push(ItemId(a)),
                    }
                }
                tag => {
                    if let Some(i) = ["k", "K", "u"].iter().position(|t| *t == tag) {
                        relation_rows[i] += 1;
                    }
                    mark_relation(rel.entry(a).or_default(), tag)
                }
            }
        }
        if !cut.is_empty() {
            // Reposts too many to gather in a row's text: read as rows.
            let found = tideway_store::Items::reposts_by(self, &cut, q.reposters).await?;
            for (original, reposts) in cut.iter().zip(found) {
                by_original.insert(original.0, reposts);
            }
        }
        if let (Some(v), false) = (q.viewer, own_unknown.is_empty()) {
            // The viewer's own repost of an original whose reposts were cut.
            let found = tideway_store::Items::reposts_by(self, &own_unknown, &[v]).await?;
            for (original, own) in own_unknown.iter().zip(found) {
                if !own.is_empty() {
                    hydration.reposted(original.0);
                }
            }
        }
        // The held copies are checked unless the epoch they were current
        // at still stands; on MySQL, which leaves them out of the page's
        // statement when it has that epoch, read after it then.
        let stale_copies = match (q.held_at, epoch) {
            (Some(at), Some(now)) if at == now => vec![],
            _ if q.held.is_empty() => vec![],
            (Some(_), _) if mysql => {
                let sql = my_held_text(q.held);
                for row in self.pages.fetch_all(|| sqlx::raw_sql(&sql)).await.or_unavailable(self)? {
                    current.insert(int(&row, 1)? as u64, int(&row, 2)?);
                }
                stale(q.held, &current)
            }
            _ => stale(q.held, &current),
        };
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
            Some(v) if !q.relations_known => {
                let extra = tideway_store::reposters_beyond(&reposts, q.related, v);
                let who: Vec<UserId> = q.related.iter().chain(&extra).copied().collect();
                if relation_rows.iter().any(|n| *n > RELATION_ROWS) {
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
            _ => vec![],
        };
        Ok(PageFacts {
            reposts,
            inserted: match inserts {
                Some(_) => q.originals.iter().map(|o| inserted.get(&o.0).copied()).collect(),
                None => vec![],
            },
            relations,
            hydrated: hydration.finish(q.hydrate, q.viewer),
            stale: stale_copies,
            items_epoch: epoch,
            // (no row: a user never seen, at version 0)
            followees_version: q.followees_of.map(|_| version.unwrap_or(0)),
            promotions: q.promotions_at.map(|t| Promotion::running(&promotions, t)),
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

#[cfg(test)]
mod tests;
