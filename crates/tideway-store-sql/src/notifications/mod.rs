//! Notifications on SQL (schemas 8, 18): per user a row of marks and counts
//! (`tw_notify_users`), groups (`tw_notify_groups`), standing events
//! (`tw_notify_events`), lock rows (`tw_notify_locks`) and moves not yet
//! counted (`tw_notify_moves`), with the same results as the embedded
//! engines' `tideway_store::notebook::Book`: where an event goes is decided
//! by `tideway_core::notify::place` from what the write reads, not in SQL.
//!
//! - **Locked per group key**: a write of a user's notifications first locks
//!   the lock rows its ops need (`SELECT … FOR UPDATE`, made on first use),
//!   in one order — actors, then group keys, each by name: an event's key
//!   (so two nodes placing events of one key at once read each other's
//!   group and make one; the figures read after the lock are the figures
//!   written over) and, for a standing event, its actor (so a hide, which
//!   locks the actor and then the keys of their events, sees every event
//!   of theirs). On PostgreSQL an actor is a transaction-scoped advisory
//!   lock (`pg_advisory_xact_lock`, all of a write's in one statement, in
//!   the order of their numbers, before any key) rather than a row: a row
//!   per new liker made every like insert one, ×5 slower on a hot item. A forget locks the keys of the groups about its item. Two
//!   writes of one user on different keys never wait on each other: a node
//!   cut off mid-transaction holds only its keys (until the server ends its
//!   session, `session.rs`).
//! - **Kept, not aggregated**: a group's row keeps what a page shows of it
//!   (`cnt` visible events, `latest_at` the newest one's time, NULL when none
//!   is visible). An event joining a group of a million is a few index
//!   probes; when the newest visible event leaves, the next is one probe of
//!   the group's index.
//! - **Counts by moves**: the user's row keeps the marks and the counts of
//!   shown groups above each as of the moves folded into it; every write
//!   that moves a group's `latest_at` inserts a move (`old_at` → `new_at`),
//!   locking nothing of the user's. A page reads the row and the moves in
//!   one statement and counts each move at the marks it read (as
//!   `Book::reorder` does), so its counts are exact. A mark locks the row,
//!   reads the moves, the target and the groups it passes in one statement
//!   (one snapshot: the counts over the groups it saw, then less those
//!   passed), writes the row and deletes those moves; a fold does the same
//!   without a mark, skipping a row already held (`SKIP LOCKED`): after one
//!   write in [`FOLD_EVERY`], and after a page that counted more than
//!   [`FOLD_AT`]. A stand reads the read mark without a lock; a read mark
//!   first locks the keys whose groups it passes, so an event placed by the
//!   old mark is placed before it moves.
//! - **A page** is two statements: the user's row and moves with the page of
//!   groups (one range of `(usr, latest_at, id)`), then the 5 newest visible
//!   actors of each of them (a `UNION ALL` of one `LIMIT 5` range a group:
//!   MariaDB has no `LATERAL`) with their figures again, to see a write
//!   between.

use crate::SqlStore;
use crate::rows::{in_list, int, item_of, k, oint, text};
use crate::tx::Tx;
use async_trait::async_trait;
use sqlx::any::AnyRow;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use tideway_core::notify::{Mark, NEVER, NewestGroup, Notice, Op, Placement, SHOWN_ACTORS, Verb, place};
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::{CausePos, GroupView, Notifications, NotifyPage, Result, StoreError, StoredCause};

/// Reads of a page before it is returned as read: a write between its two
/// statements (seen in a group's figures) makes it read again.
const PAGE_READS: usize = 3;

/// The class of a lock row naming an actor (whose events' visibility a
/// hide changes): taken before any group key's.
const ACTOR: i64 = 0;
/// The class of a lock row naming a group key (the JSON of its verb).
const KEY: i64 = 1;

/// One write in this many that moves a group folds its user's moves after
/// its commit (so a user who never reads keeps few).
const FOLD_EVERY: u64 = 32;
/// A page that counted more moves than this folds them after it is read.
const FOLD_AT: usize = 64;
/// Moves written or deleted a statement.
const MOVES_A_STATEMENT: usize = 256;
/// Times a read mark looks again for groups it passes of keys not yet held.
const MARK_LOCK_ROUNDS: usize = 3;

use crate::rows::Bind::{Int, Opt, Text};

mod fold;
mod write;

/// A user's row: the marks, and how many shown groups are above each (as
/// of the moves folded into it; with those not yet folded, as a page or a
/// mark counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Marks {
    seen: i64,
    read: i64,
    unseen: i64,
    unread: i64,
}

impl Marks {
    /// A user with no row: nothing marked, nothing shown.
    const NONE: Marks = Marks { seen: NEVER.0, read: NEVER.0, unseen: 0, unread: 0 };

    /// From the columns `seen, rd, unseen, unread` at `from`.
    fn of(row: &AnyRow, from: usize) -> Result<Self> {
        Ok(Marks {
            seen: int(row, from)?,
            read: int(row, from + 1)?,
            unseen: int(row, from + 2)?,
            unread: int(row, from + 3)?,
        })
    }

    /// A group's `latest_at` moved from `old` to `new` (`None`: not shown):
    /// the counts above the marks follow, as `Book::reorder` keeps them
    /// (a move counted at the marks it is read with).
    fn reorder(&mut self, old: Option<i64>, new: Option<i64>) {
        if old == new {
            return;
        }
        if let Some(at) = old {
            self.unseen -= i64::from(at > self.seen);
            self.unread -= i64::from(at > self.read);
        }
        if let Some(at) = new {
            self.unseen += i64::from(at > self.seen);
            self.unread += i64::from(at > self.read);
        }
    }
}

/// A group's figures as its row keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Figures {
    /// The newest visible event's time; `None`: nothing visible, not shown.
    latest: Option<i64>,
    /// Visible standing events.
    cnt: i64,
}

impl Figures {
    /// From the columns `latest_at, cnt` at `from`.
    fn of(row: &AnyRow, from: usize) -> Result<Self> {
        Ok(Figures { latest: oint(row, from)?, cnt: int(row, from + 1)? })
    }

    /// A visible event at `at` joined.
    fn with(self, at: i64) -> Self {
        Figures { latest: Some(self.latest.map_or(at, |l| l.max(at))), cnt: self.cnt + 1 }
    }
}

/// A verb as its groups' and events' key (its JSON: what `verb_of` reads).
fn key_of(verb: &Verb) -> Result<String> {
    serde_json::to_string(verb).map_err(|e| StoreError::corrupt_by("encoding a notification verb", e))
}

fn verb_of(key: &str) -> Result<Verb> {
    serde_json::from_str(key).map_err(|e| StoreError::corrupt_by("a notification group's verb", e))
}

#[async_trait]
impl Notifications for SqlStore {
    /// One transaction for the whole call: each user's ops in order, users
    /// locked in ascending order (two calls for the same users never wait on
    /// each other crosswise), and each user's counts written once at the end.
    async fn notify(&self, ops: &[Op]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let fold = self
            .retrying(|| async move {
                let mut tx = self.begin().await?;
                let fold = self.notify_in(&mut tx, ops).await?;
                self.commit(tx).await?;
                Ok(fold)
            })
            .await?;
        self.fold_after(&fold).await;
        Ok(())
    }

    /// Keyset pages of `tw_items`, `tw_follows` and `tw_reactions` by
    /// their primary keys.
    async fn stored_causes(&self, after: &CausePos, limit: usize) -> Result<Vec<StoredCause>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        Ok(match after {
            CausePos::Items(a) => {
                let sql = format!("SELECT id, record FROM tw_items WHERE id > ? ORDER BY id LIMIT {limit}");
                let rows = self.fetch(&sql, &[a.map_or(i64::MIN, |a| k(a.0))]).await?;
                rows.iter().map(|r| Ok(StoredCause::Item(item_of(&text(r, 1)?, None)?))).collect::<Result<_>>()?
            }
            CausePos::Follows(a) => {
                let (from, to) = a.map_or((i64::MIN, i64::MIN), |(f, t)| (k(f.0), k(t.0)));
                let sql = format!(
                    "SELECT follower, followee, since FROM tw_follows WHERE (follower, followee) > (?, ?) \
                     ORDER BY follower, followee LIMIT {limit}"
                );
                let rows = self.fetch(&sql, &[from, to]).await?;
                rows.iter()
                    .map(|r| {
                        Ok(StoredCause::Follow {
                            from: UserId(int(r, 0)? as u64),
                            to: UserId(int(r, 1)? as u64),
                            since: Millis(int(r, 2)?),
                        })
                    })
                    .collect::<Result<_>>()?
            }
            CausePos::Reactions(a) => {
                let (item, user, kind) = match a {
                    Some((i, u, kind)) => (k(i.0), k(u.0), kind.clone()),
                    None => (i64::MIN, i64::MIN, String::new()),
                };
                let sql = format!(
                    "SELECT item, user_id, kind FROM tw_reactions WHERE (item, user_id, kind) > (?, ?, ?) \
                     ORDER BY item, user_id, kind LIMIT {limit}"
                );
                let rows = self.rows(&sql, &[Int(item), Int(user), Text(&kind)]).await?;
                rows.iter()
                    .map(|r| {
                        Ok(StoredCause::Reaction {
                            item: ItemId(int(r, 0)? as u64),
                            user: UserId(int(r, 1)? as u64),
                            kind: text(r, 2)?,
                        })
                    })
                    .collect::<Result<_>>()?
            }
        })
    }

    async fn notifications(&self, user: UserId, before: Option<(Millis, u64)>, limit: usize) -> Result<NotifyPage> {
        let mut reads = 1;
        loop {
            let (page, whole, moves) = self.read_page(user, before, limit).await?;
            if whole || reads == PAGE_READS {
                if moves > FOLD_AT {
                    self.fold_after(&[user]).await;
                }
                return Ok(page);
            }
            reads += 1;
        }
    }

    /// Under the user's row's lock: for `read`, the lock rows of the
    /// gathering keys whose groups the mark passes (a stand placing an event
    /// by the old read mark is waited for); then the target, the shown
    /// groups it passes (an index range count, each group passed once) and
    /// the moves not yet folded are one statement, and the mark, the counts
    /// and the folded moves are written.
    async fn mark_notifications(&self, user: UserId, mark: Mark, up_to: Option<u64>) -> Result<bool> {
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            let mut marks = self.own_marks(&mut tx, user).await?;
            let u = k(user.0);
            let from = match mark {
                Mark::Seen => marks.seen,
                Mark::Read => marks.read,
            };
            let (target, target_args) = match up_to {
                // A group with nothing shown moves the mark to its last time.
                Some(id) => (
                    "SELECT COALESCE(latest_at, last_at) AS t FROM tw_notify_groups WHERE usr = ? AND id = ?",
                    vec![Int(u), Int(k(id))],
                ),
                None => (
                    "SELECT latest_at AS t FROM tw_notify_groups WHERE usr = ? AND latest_at IS NOT NULL \
                     ORDER BY latest_at DESC, id DESC LIMIT 1",
                    vec![Int(u)],
                ),
            };
            if mark == Mark::Read {
                let sql = format!(
                    "SELECT DISTINCT g.vkey FROM tw_notify_groups g, ({target}) x \
                     WHERE g.usr = ? AND g.latest_at > ? AND g.latest_at <= x.t"
                );
                let mut locked = BTreeSet::new();
                // Until the groups passed are of keys already held (a stand
                // that committed meanwhile may have made one).
                for _ in 0..MARK_LOCK_ROUNDS {
                    let mut args = target_args.clone();
                    args.extend([Int(u), Int(from)]);
                    let mut keys = BTreeSet::new();
                    for r in self.rows_in(&mut tx, &sql, &args).await? {
                        let key = text(&r, 0)?;
                        if !locked.contains(&key) && verb_of(&key)?.gathers() {
                            keys.insert(key);
                        }
                    }
                    if keys.is_empty() {
                        break;
                    }
                    self.lock_rows(&mut tx, user, &BTreeSet::new(), &keys).await?;
                    locked.extend(keys);
                }
            }
            let sql = format!(
                "SELECT 't', x.t, (SELECT COUNT(*) FROM tw_notify_groups g \
                 WHERE g.usr = ? AND g.latest_at > ? AND g.latest_at <= x.t), 0 FROM ({target}) x \
                 UNION ALL SELECT 'm', seq, old_at, new_at FROM tw_notify_moves WHERE usr = ?"
            );
            let mut args = vec![Int(u), Int(from)];
            args.extend(target_args);
            args.push(Int(u));
            let (mut to, mut passed, mut moves) = (None, 0, Vec::new());
            for r in self.rows_in(&mut tx, &sql, &args).await? {
                if text(&r, 0)? == "t" {
                    (to, passed) = (Some(int(&r, 1)?), int(&r, 2)?);
                } else {
                    moves.push((int(&r, 1)?, oint(&r, 2)?, oint(&r, 3)?));
                }
            }
            // (No target: no group, or `up_to` is not theirs: nothing written.)
            let Some(to) = to else { return Ok(up_to.is_none()) };
            // The counts at the old marks over the groups as this statement
            // saw them; then at the new one, less the groups it passes.
            for (_, was, now) in &moves {
                marks.reorder(*was, *now);
            }
            if to > from {
                match mark {
                    Mark::Seen => (marks.seen, marks.unseen) = (to, marks.unseen - passed),
                    Mark::Read => (marks.read, marks.unread) = (to, marks.unread - passed),
                }
            } else if moves.is_empty() {
                return Ok(true);
            }
            self.write_fold(&mut tx, user, marks, &moves).await?;
            self.commit(tx).await?;
            Ok(true)
        })
        .await
    }
}

#[cfg(test)]
mod tests;
