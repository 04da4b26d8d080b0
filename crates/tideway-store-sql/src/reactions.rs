//! Reactions and the counts kept per item (`tw_item_counts`: replies,
//! reposts, reactions per kind, changed in the same transaction as the row
//! they count), a page's hydration (counts and the viewer's marks in one
//! round trip), and promotions.

use crate::dialect::PG_ADD_TO_COUNT;
use crate::rows::Bind::{Int, Text};
use crate::rows::{in_list, int, k, text};
use crate::tx::Tx;
use crate::{Dialect, SqlStore};
use sqlx::any::AnyRow;
use std::collections::HashMap;
use tideway_core::{Item, ItemId, Millis, UserId};
use tideway_store::{ItemCounts, Promotion, Result, ViewerMarks};

/// A page's counts and the viewer's marks, gathered from rows `(what, item,
/// …)`: `c` a kept count (its name in a text column), `v` the viewer
/// reposted the item, `m` a reaction of the viewer (its kind in a text
/// column); or a count with the viewer's share of it
/// ([`HydrationRows::take_with_own`]).
#[derive(Default)]
pub(crate) struct HydrationRows {
    counts: HashMap<u64, ItemCounts>,
    own: HashMap<u64, ViewerMarks>,
}

impl HydrationRows {
    /// One row: `what` and `item`, the count `n`, the text column `name_at`.
    pub(crate) fn take(&mut self, what: &str, item: u64, n: i64, row: &AnyRow, name_at: usize) -> Result<()> {
        let n = n.max(0) as u64;
        match what {
            "c" => self.count(item, &text(row, name_at)?, n),
            "v" => self.own.entry(item).or_default().reposted = true,
            _ => self.own.entry(item).or_default().reactions.push(text(row, name_at)?),
        }
        Ok(())
    }

    /// One count of `item` (`what` as the `c` rows name it, `n` of them)
    /// with the viewer's share of it: `own` > 0 marks the viewer's repost
    /// (of `p`) or reaction (of `k:<kind>`).
    pub(crate) fn take_with_own(&mut self, item: u64, n: i64, own: i64, what: &str) {
        self.count(item, what, n.max(0) as u64);
        if own > 0 {
            match (what, what.strip_prefix("k:")) {
                ("p", _) => self.own.entry(item).or_default().reposted = true,
                (_, Some(kind)) => self.own.entry(item).or_default().reactions.push(kind.to_owned()),
                _ => {}
            }
        }
    }

    /// The viewer reposted `item` (found after the rows).
    pub(crate) fn reposted(&mut self, item: u64) {
        self.own.entry(item).or_default().reposted = true;
    }

    fn count(&mut self, item: u64, what: &str, n: u64) {
        let c = self.counts.entry(item).or_default();
        match (what, what.strip_prefix("k:")) {
            ("r", _) => c.replies = n,
            ("p", _) => c.reposts = n,
            (_, Some(kind)) => c.reactions.push((kind.to_owned(), n)),
            _ => {}
        }
    }

    /// The counts and marks of `ids`, in order (marks only with a viewer).
    pub(crate) fn finish(self, ids: &[ItemId], viewer: Option<UserId>) -> Vec<(ItemCounts, Option<ViewerMarks>)> {
        ids.iter()
            .map(|id| {
                let mut c = self.counts.get(&id.0).cloned().unwrap_or_default();
                c.reactions.sort();
                let marks = viewer.map(|_| {
                    let mut m = self.own.get(&id.0).cloned().unwrap_or_default();
                    m.reactions.sort();
                    m
                });
                (c, marks)
            })
            .collect()
    }
}

impl SqlStore {
    /// Adds `by` to the counts a live `item` adds to others (its parent's
    /// replies, its original's reposts), within `tx`.
    pub(crate) async fn bump_parents(&self, tx: &mut Tx, item: &Item, by: i64) -> Result<()> {
        for (parent, what) in [(item.reply_to, "r"), (item.repost_of, "p")] {
            if let Some(p) = parent {
                self.exec_in(tx, &self.count_upsert(), &[Int(k(p.0)), Text(what), Int(by)]).await?;
            }
        }
        Ok(())
    }

    /// [`Items::hydration`](tideway_store::Items::hydration).
    pub(crate) async fn read_hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        // One round trip: the kept counts (`c`, by key: no rows counted) and
        // the viewer's own marks, as rows (what, item, count name or
        // reaction kind, count).
        let (m, ids_b) = in_list(ids.iter().map(|i| k(i.0)));
        let mut sql = format!("SELECT 'c', item, what, n FROM tw_item_counts WHERE item IN ({m}) AND n > 0");
        let mut binds = ids_b.clone();
        if let Some(v) = viewer {
            sql.push_str(&format!(
                " UNION ALL SELECT 'v', repost_of, '', COUNT(*) FROM tw_items WHERE author = ? AND repost_of IN ({m}) AND live = 1 GROUP BY repost_of \
                 UNION ALL SELECT 'm', item, kind, COUNT(*) FROM tw_reactions WHERE user_id = ? AND item IN ({m}) GROUP BY item, kind"
            ));
            binds.push(k(v.0));
            binds.extend_from_slice(&ids_b);
            binds.push(k(v.0));
            binds.extend_from_slice(&ids_b);
        }
        let mut rows = HydrationRows::default();
        for row in self.fetch(&sql, &binds).await? {
            rows.take(&text(&row, 0)?, int(&row, 1)? as u64, int(&row, 3)?, &row, 2)?;
        }
        Ok(rows.finish(ids, viewer))
    }

    /// Sets or clears one reaction in `tx`, its count with it (the count
    /// moves only when the reaction did): whether it changed.
    /// [`Items::set_reaction`](tideway_store::Items::set_reaction) runs it
    /// with the reaction's notifications, in one transaction.
    pub(crate) async fn write_reaction(
        &self,
        tx: &mut Tx,
        item: ItemId,
        user: UserId,
        kind: &str,
        on: bool,
    ) -> Result<bool> {
        let what = format!("k:{kind}");
        let by: i64 = if on { 1 } else { -1 };
        if self.dialect == Dialect::Postgres {
            // One statement: the count moves only when the reaction did.
            let change = if on {
                "INSERT INTO tw_reactions (item, user_id, kind) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING item"
            } else {
                "DELETE FROM tw_reactions WHERE item = ? AND user_id = ? AND kind = ? RETURNING item"
            };
            let sql = format!(
                "WITH r AS ({change}) INSERT INTO tw_item_counts (item, what, n) SELECT item, ?, ? FROM r {PG_ADD_TO_COUNT}"
            );
            let binds = [Int(k(item.0)), Int(k(user.0)), Text(kind), Text(&what), Int(by)];
            return Ok(self.exec_in(tx, &sql, &binds).await? > 0);
        }
        let change = if on {
            self.insert_ignore("tw_reactions (item, user_id, kind)", "(?, ?, ?)")
        } else {
            "DELETE FROM tw_reactions WHERE item = ? AND user_id = ? AND kind = ?".to_owned()
        };
        if self.exec_in(tx, &change, &[Int(k(item.0)), Int(k(user.0)), Text(kind)]).await? == 0 {
            return Ok(false);
        }
        self.exec_in(tx, &self.count_upsert(), &[Int(k(item.0)), Text(&what), Int(by)]).await?;
        Ok(true)
    }

    /// Stores a promotion and moves the promotions' version with it, in
    /// one transaction: a node's copy of the promotions is checked by that
    /// version (`pages.rs`).
    pub(crate) async fn put_promotion(&self, p: Promotion) -> Result<()> {
        let insert = "INSERT INTO tw_promotions (id, item, every, starts_at, ends_at) VALUES (?, ?, ?, ?, ?)";
        let binds = [Int(k(p.id)), Int(k(p.item.0)), Int(i64::from(p.every)), Int(p.starts_at.0), Int(p.ends_at.0)];
        self.retrying(|| async {
            let mut tx = self.begin().await?;
            self.exec_in(&mut tx, insert, &binds).await?;
            self.exec_in(&mut tx, "UPDATE tw_epoch SET pv = pv + 1 WHERE id = 1", &[]).await?;
            self.commit(tx).await
        })
        .await
    }

    /// The promotions not ended at `from` and the promotions' version, as
    /// of one statement: what a node keeps a copy of (`pages.rs`).
    pub(crate) async fn promotions_from(&self, from: Millis) -> Result<(i64, Vec<Promotion>)> {
        let rows = self
            .fetch(
                "SELECT 'p', id, item, every, starts_at, ends_at FROM tw_promotions WHERE ends_at > ? \
                 UNION ALL SELECT 'e', pv, 0, 0, 0, 0 FROM tw_epoch WHERE id = 1",
                &[from.0],
            )
            .await?;
        let mut version = 0;
        let mut list = Vec::with_capacity(rows.len());
        for r in &rows {
            if text(r, 0)? == "e" {
                version = int(r, 1)?;
                continue;
            }
            list.push(promotion_at(r, 1)?);
        }
        Ok((version, list))
    }

    pub(crate) async fn read_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        let rows = self
            .fetch(
                "SELECT id, item, every, starts_at, ends_at FROM tw_promotions WHERE starts_at <= ? AND ends_at > ? ORDER BY id",
                &[now.0, now.0],
            )
            .await?;
        rows.iter().map(|r| promotion_at(r, 0)).collect()
    }
}

/// The promotion in a row's columns from `at` on: id, item, every, start, end.
fn promotion_at(r: &AnyRow, at: usize) -> Result<Promotion> {
    Ok(Promotion {
        id: int(r, at)? as u64,
        item: ItemId(int(r, at + 1)? as u64),
        every: u32::try_from(int(r, at + 2)?).unwrap_or(u32::MAX),
        starts_at: Millis(int(r, at + 3)?),
        ends_at: Millis(int(r, at + 4)?),
    })
}
