//! The follow graph on SQL: follows stored both ways (`tw_follows` by
//! follower, `tw_followers` by followee and follow time), blocks, mutes,
//! lists, fan-out chunks, relations, and the per-user counters (`tw_users`)
//! that change in the same transaction as the rows they count. Follow
//! statuses are decided by `tideway_store::rules::follow`.

use crate::SqlStore;
use crate::rows::Bind::{self, Int};
use crate::rows::{in_list, int, k, marks, text};
use crate::tx::Tx;
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use tideway_core::notify::Op;
use tideway_core::{Millis, Relation, UserId};
use tideway_store::rules::{self, FollowFact};
use tideway_store::{
    FollowStatus, Followees, FollowerPos, Graph, ListKind, OwnRelations, Result, StoreError, StoreStats, UserCounts,
};

impl SqlStore {
    /// Deletes the follow `from → to` in both tables, within `tx`; whether
    /// there was one.
    async fn delete_follow(&self, tx: &mut Tx, from: UserId, to: UserId) -> Result<bool> {
        let (f, t) = (Int(k(from.0)), Int(k(to.0)));
        let rows = self
            .rows_in(tx, "SELECT since FROM tw_follows WHERE follower = ? AND followee = ? FOR UPDATE", &[f, t])
            .await?;
        let Some(row) = rows.first() else { return Ok(false) };
        let since = int(row, 0)?;
        self.exec_in(tx, "DELETE FROM tw_follows WHERE follower = ? AND followee = ?", &[f, t]).await?;
        self.exec_in(
            tx,
            "DELETE FROM tw_followers WHERE followee = ? AND since = ? AND follower = ?",
            &[t, Int(since), f],
        )
        .await?;
        self.bump(tx, "following", -1, &[from]).await?;
        self.bump(tx, "followers", -1, &[to]).await?;
        Ok(true)
    }

    /// Adds `by` to a counter of `users` (rows that exist), within `tx`.
    pub(crate) async fn bump(&self, tx: &mut Tx, counter: &str, by: i64, users: &[UserId]) -> Result<()> {
        if users.is_empty() || by == 0 {
            return Ok(());
        }
        // A change of whom a user follows moves the version of the set
        // (`followees_versioned`) with the count.
        let version = if counter == "following" { ", grev = grev + 1" } else { "" };
        let sql =
            format!("UPDATE tw_users SET {counter} = {counter} + ?{version} WHERE id IN ({})", marks(users.len()));
        let binds: Vec<Bind<'_>> = std::iter::once(by).chain(users.iter().map(|u| k(u.0))).map(Int).collect();
        self.exec_in(tx, &sql, &binds).await?;
        Ok(())
    }

    /// Moves the version of `users`' followee sets and own relations
    /// (`followees_versioned`), within `tx`, making their rows: a node's
    /// copy read before is then found moved by the next page's call.
    pub(crate) async fn move_versions(&self, tx: &mut Tx, users: &[UserId]) -> Result<()> {
        self.add_users(tx, users).await?;
        self.bump(tx, "grev", 1, users).await
    }

    /// Makes the rows of `users` (a follow or an insertion may be a user's
    /// first write), within `tx`.
    pub(crate) async fn add_users(&self, tx: &mut Tx, users: &[UserId]) -> Result<()> {
        if users.is_empty() {
            return Ok(());
        }
        let sql = self.insert_ignore("tw_users (id)", &vec!["(?)"; users.len()].join(", "));
        let binds: Vec<Bind<'_>> = users.iter().map(|u| Int(k(u.0))).collect();
        self.exec_in(tx, &sql, &binds).await?;
        Ok(())
    }
}

#[async_trait]
impl Graph for SqlStore {
    async fn follow_many_notifying(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
        notify: &[Op],
    ) -> Result<Vec<FollowStatus>> {
        let (statuses, fold) = self
            .retrying(|| async move {
                let mut tx = self.begin().await?;
                // The follower's row serialises their concurrent follows (the limit).
                self.add_users(&mut tx, &[user]).await?;
                let u = Int(k(user.0));
                self.rows_in(&mut tx, "SELECT id FROM tw_users WHERE id = ? FOR UPDATE", &[u]).await?;
                let count: usize = {
                    let rows =
                        self.rows_in(&mut tx, "SELECT COUNT(*) FROM tw_follows WHERE follower = ?", &[u]).await?;
                    let row = rows.first().ok_or_else(|| StoreError::corrupt("a count answered no row"))?;
                    int(row, 0)?.max(0) as usize
                };
                let (m, ts) = in_list(targets.iter().map(|t| k(t.0)));
                let mut existing: HashMap<u64, i64> = HashMap::new();
                let mut blocked: HashSet<u64> = HashSet::new();
                if !ts.is_empty() {
                    let targets = ts.iter().map(|t| Int(*t));
                    let binds: Vec<Bind<'_>> = std::iter::once(u).chain(targets.clone()).collect();
                    let sql =
                        format!("SELECT followee, since FROM tw_follows WHERE follower = ? AND followee IN ({m})");
                    for row in self.rows_in(&mut tx, &sql, &binds).await? {
                        existing.insert(int(&row, 0)? as u64, int(&row, 1)?);
                    }
                    let sql = format!(
                        "SELECT target FROM tw_blocks WHERE user_id = ? AND target IN ({m}) \
                         UNION SELECT user_id FROM tw_blocks WHERE target = ? AND user_id IN ({m})"
                    );
                    let binds: Vec<Bind<'_>> = binds.iter().copied().chain(std::iter::once(u)).chain(targets).collect();
                    for row in self.rows_in(&mut tx, &sql, &binds).await? {
                        blocked.insert(int(&row, 0)? as u64);
                    }
                }
                let decided = rules::follow(targets, at, count, max_following, |t| match existing.get(&t.0) {
                    Some(since) => FollowFact::Following(Millis(*since)),
                    None if blocked.contains(&t.0) => FollowFact::Blocked,
                    None => FollowFact::Free,
                });
                let new = decided.new;
                if !new.is_empty() {
                    let rows = vec!["(?, ?, ?)"; new.len()].join(", ");
                    let sql = format!("INSERT INTO tw_follows (follower, followee, since) VALUES {rows}");
                    let binds: Vec<Bind<'_>> = new.iter().flat_map(|t| [u, Int(k(t.0)), Int(at.0)]).collect();
                    self.exec_in(&mut tx, &sql, &binds).await?;
                    let sql = format!("INSERT INTO tw_followers (followee, since, follower) VALUES {rows}");
                    let binds: Vec<Bind<'_>> = new.iter().flat_map(|t| [Int(k(t.0)), Int(at.0), u]).collect();
                    self.exec_in(&mut tx, &sql, &binds).await?;
                    self.add_users(&mut tx, &new).await?;
                    self.bump(&mut tx, "following", new.len() as i64, &[user]).await?;
                    self.bump(&mut tx, "followers", 1, &new).await?;
                }
                // The new follows' notifications, in the same transaction.
                let ops: Vec<Op> = rules::notify_of_new(notify, &new).collect();
                let fold = self.notify_in(&mut tx, &ops).await?;
                self.commit(tx).await?;
                Ok((decided.statuses, fold))
            })
            .await?;
        self.fold_after(&fold).await;
        Ok(statuses)
    }

    async fn unfollow_notifying(&self, user: UserId, target: UserId, notify: &[Op]) -> Result<bool> {
        let (removed, fold) = self
            .retrying(|| async move {
                let mut tx = self.begin().await?;
                let removed = self.delete_follow(&mut tx, user, target).await?;
                let fold = if removed { self.notify_in(&mut tx, notify).await? } else { vec![] };
                self.commit(tx).await?;
                Ok((removed, fold))
            })
            .await?;
        self.fold_after(&fold).await;
        Ok(removed)
    }

    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            let (u, t) = (Int(k(user.0)), Int(k(target.0)));
            if on {
                let sql = self.insert_ignore("tw_blocks (user_id, target, since)", "(?, ?, ?)");
                self.exec_in(&mut tx, &sql, &[u, t, Int(at.0)]).await?;
                self.delete_follow(&mut tx, user, target).await?;
                self.delete_follow(&mut tx, target, user).await?;
            } else {
                self.exec_in(&mut tx, "DELETE FROM tw_blocks WHERE user_id = ? AND target = ?", &[u, t]).await?;
            }
            // (the blocker's blocks and the target's blockers both changed)
            self.move_versions(&mut tx, &[user, target]).await?;
            self.commit(tx).await?;
            Ok(())
        })
        .await
    }

    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        let put = self.insert_ignore("tw_mutes (user_id, target, since)", "(?, ?, ?)");
        let (u, t) = (Int(k(user.0)), Int(k(target.0)));
        self.retrying(|| async {
            let mut tx = self.begin().await?;
            if on {
                self.exec_in(&mut tx, &put, &[u, t, Int(at.0)]).await?;
            } else {
                self.exec_in(&mut tx, "DELETE FROM tw_mutes WHERE user_id = ? AND target = ?", &[u, t]).await?;
            }
            self.move_versions(&mut tx, &[user]).await?;
            self.commit(tx).await?;
            Ok(())
        })
        .await
    }

    async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
        let rows =
            self.fetch("SELECT followee FROM tw_follows WHERE follower = ? ORDER BY followee", &[k(user.0)]).await?;
        rows.iter().map(|r| Ok(UserId(int(r, 0)? as u64))).collect()
    }

    async fn followees_versioned(&self, user: UserId) -> Result<Followees> {
        // One statement, one snapshot: the list and the own relations are
        // those of that version (no user row: an unknown user, who follows
        // no one, at version 0; every change of them makes the row).
        let cap = OwnRelations::MAX_EACH + 1;
        let rows = self
            .fetch(
                &format!(
                    "SELECT 'f', f.followee, u.grev FROM tw_users u LEFT JOIN tw_follows f ON f.follower = u.id \
                     WHERE u.id = ? \
                     UNION ALL (SELECT 'k', target, 0 FROM tw_blocks WHERE user_id = ? LIMIT {cap}) \
                     UNION ALL (SELECT 'K', user_id, 0 FROM tw_blocks WHERE target = ? LIMIT {cap}) \
                     UNION ALL (SELECT 'u', target, 0 FROM tw_mutes WHERE user_id = ? LIMIT {cap}) \
                     UNION ALL (SELECT 'i', user_id, 0 FROM tw_inserts WHERE user_id = ? LIMIT 1)"
                ),
                &[k(user.0); 5],
            )
            .await?;
        let mut version = 0;
        let mut list = Vec::with_capacity(rows.len());
        let mut own = OwnRelations::default();
        for r in &rows {
            let what = text(r, 0)?;
            let id = crate::rows::oint(r, 1)?.map(|u| UserId(u as u64));
            match (what.as_str(), id) {
                ("f", id) => {
                    version = int(r, 2)? as u64;
                    list.extend(id);
                }
                ("k", Some(u)) => own.blocks.push(u),
                ("K", Some(u)) => own.blocked_by.push(u),
                ("u", Some(u)) => own.mutes.push(u),
                ("i", _) => own.inserts = true,
                _ => {}
            }
        }
        list.sort_unstable();
        let kept = [&own.blocks, &own.blocked_by, &own.mutes].iter().all(|l| l.len() <= OwnRelations::MAX_EACH);
        Ok(Followees { list, version: Some(version), own: kept.then(|| own.sorted()) })
    }

    async fn followees_version(&self, user: UserId) -> Result<Option<u64>> {
        let rows = self.fetch("SELECT grev FROM tw_users WHERE id = ?", &[k(user.0)]).await?;
        Ok(Some(match rows.first() {
            Some(r) => int(r, 0)? as u64,
            None => 0,
        }))
    }

    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>> {
        let (table, owner, other) = match which {
            ListKind::Following => ("tw_follows", "follower", "followee"),
            ListKind::Followers => ("tw_followers", "followee", "follower"),
        };
        let mut sql = format!("SELECT {other}, since FROM {table} WHERE {owner} = ?");
        let mut binds = vec![k(user.0)];
        if let Some((since, id)) = after {
            sql.push_str(&format!(" AND (since < ? OR (since = ? AND {other} < ?))"));
            binds.extend([since.0, since.0, k(id.0)]);
        }
        sql.push_str(&format!(" ORDER BY since DESC, {other} DESC LIMIT {limit}"));
        let rows = self.fetch(&sql, &binds).await?;
        rows.iter().map(|r| Ok((UserId(int(r, 0)? as u64), Millis(int(r, 1)?)))).collect()
    }

    async fn followers_chunk(
        &self,
        user: UserId,
        after: Option<FollowerPos>,
        limit: usize,
    ) -> Result<Vec<FollowerPos>> {
        let mut sql = "SELECT since, follower FROM tw_followers WHERE followee = ?".to_owned();
        let mut binds = vec![k(user.0)];
        if let Some((since, id)) = after {
            sql.push_str(" AND (since > ? OR (since = ? AND follower > ?))");
            binds.extend([since.0, since.0, k(id.0)]);
        }
        sql.push_str(&format!(" ORDER BY since, follower LIMIT {limit}"));
        let rows = self.fetch(&sql, &binds).await?;
        rows.iter().map(|r| Ok((Millis(int(r, 0)?), UserId(int(r, 1)? as u64)))).collect()
    }

    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        if others.is_empty() {
            return Ok(vec![]);
        }
        // One round trip: each edge kind as rows (what, other).
        let (m, os) = in_list(others.iter().map(|o| k(o.0)));
        let sql = format!(
            "SELECT 'f', followee FROM tw_follows WHERE follower = ? AND followee IN ({m}) \
             UNION ALL SELECT 'b', follower FROM tw_followers WHERE followee = ? AND follower IN ({m}) \
             UNION ALL SELECT 'k', target FROM tw_blocks WHERE user_id = ? AND target IN ({m}) \
             UNION ALL SELECT 'K', user_id FROM tw_blocks WHERE target = ? AND user_id IN ({m}) \
             UNION ALL SELECT 'm', target FROM tw_mutes WHERE user_id = ? AND target IN ({m})"
        );
        let mut binds = Vec::with_capacity(5 * (os.len() + 1));
        for _ in 0..5 {
            binds.push(k(user.0));
            binds.extend_from_slice(&os);
        }
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        for row in self.fetch(&sql, &binds).await? {
            mark_relation(rel.entry(int(&row, 1)? as u64).or_default(), &text(&row, 0)?);
        }
        Ok(others.iter().map(|o| rel.get(&o.0).copied().unwrap_or_default()).collect())
    }

    async fn counts(&self, user: UserId) -> Result<UserCounts> {
        let rows = self.fetch("SELECT following, followers, items FROM tw_users WHERE id = ?", &[k(user.0)]).await?;
        let Some(r) = crate::rows::decoded::<CountsRow>(&rows)?.pop() else { return Ok(UserCounts::default()) };
        let n = |v: i64| v.max(0) as u64;
        Ok(UserCounts { following: n(r.following), followers: n(r.followers), items: n(r.items) })
    }

    async fn stats(&self) -> Result<StoreStats> {
        self.read_stats().await
    }

    async fn health(&self) -> Result<()> {
        self.check_health().await
    }
}

/// The edge a relation row names: `f` the user follows the other, `b` the
/// other follows the user, `k`/`K` a block either way, `m` a mute.
pub(crate) fn mark_relation(r: &mut Relation, what: &str) {
    match what {
        "f" => r.following = true,
        "b" => r.followed_by = true,
        "k" => r.blocking = true,
        "K" => r.blocked_by = true,
        _ => r.muting = true,
    }
}

crate::rows::int_row!(
    /// A user's counts (`SELECT following, followers, items FROM tw_users`).
    CountsRow { following: i64, followers: i64, items: i64 }
);
