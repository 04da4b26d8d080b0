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
//!   of theirs). A forget locks the keys of the groups about its item. Two
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

/// A bind of these statements: a BIGINT, a nullable one, or a verb's key.
#[derive(Clone, Copy)]
enum Arg<'a> {
    Int(i64),
    Opt(Option<i64>),
    Text(&'a str),
}

use Arg::{Int, Opt, Text};

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

impl SqlStore {
    /// Applies `ops` in `tx`, grouped by the user notified, each user's
    /// lock rows taken first (see the module docs). Returns the users whose
    /// moves a fold should take in after the commit (one write in
    /// [`FOLD_EVERY`] that moved a group).
    pub(crate) async fn notify_in(&self, tx: &mut Tx, ops: &[Op]) -> Result<Vec<UserId>> {
        let mut by_user: BTreeMap<UserId, Vec<&Op>> = BTreeMap::new();
        for op in ops {
            by_user.entry(op.user()).or_default().push(op);
        }
        let mut fold = Vec::new();
        for (user, ops) in &by_user {
            self.lock_for(tx, *user, ops).await?;
            let mut moved = false;
            for op in ops {
                moved |= self.apply(tx, op).await?;
            }
            if moved && self.moves_written.fetch_add(1, Ordering::Relaxed).is_multiple_of(FOLD_EVERY) {
                fold.push(*user);
            }
        }
        Ok(fold)
    }

    /// Folds the moves of `users` (after a commit that wrote them), each in
    /// a transaction of its own that waits on no lock; a failure only
    /// leaves the moves for the next fold.
    pub(crate) async fn fold_after(&self, users: &[UserId]) {
        for user in users {
            if let Err(e) = self.fold_now(*user).await {
                tracing::debug!(user = user.0, error = %e, "a notification fold was left for later");
            }
        }
    }

    /// Takes the lock rows `ops` of `user` need, in the one order every
    /// writer takes them (actors, then group keys, each by name): a
    /// stand's actor and key, a fall's key; a hide's actor and then the
    /// keys of that actor's events, a forget's keys of the groups about its
    /// item, both found once the actors are held.
    async fn lock_for(&self, tx: &mut Tx, user: UserId, ops: &[&Op]) -> Result<()> {
        let (mut actors, mut keys, mut find) = (BTreeSet::new(), BTreeSet::new(), false);
        for op in ops {
            match op {
                Op::Stand { notice, .. } => {
                    actors.insert(notice.actor.0.to_string());
                    keys.insert(key_of(&notice.verb)?);
                }
                Op::Fall { verb, .. } => {
                    keys.insert(key_of(verb)?);
                }
                Op::Forget { .. } => find = true,
                Op::Hide { actor, .. } => {
                    actors.insert(actor.0.to_string());
                    find = true;
                }
            }
        }
        if !find {
            return self.lock_rows(tx, user, &actors, &keys).await;
        }
        self.lock_rows(tx, user, &actors, &BTreeSet::new()).await?;
        let u = k(user.0);
        for op in ops {
            // An actor's events are made only under their lock, a group
            // about an item only under its key's (which a group about it
            // already standing names): these reads see every one there is.
            let rows = match op {
                Op::Forget { item, .. } => {
                    self.rows_in(
                        tx,
                        "SELECT DISTINCT vkey FROM tw_notify_groups WHERE usr = ? AND about = ?",
                        &[Int(u), Int(k(item.0))],
                    )
                    .await?
                }
                Op::Hide { actor, .. } => {
                    self.rows_in(
                        tx,
                        "SELECT DISTINCT vkey FROM tw_notify_events WHERE usr = ? AND actor = ?",
                        &[Int(u), Int(k(actor.0))],
                    )
                    .await?
                }
                _ => continue,
            };
            for r in &rows {
                keys.insert(text(r, 0)?);
            }
        }
        self.lock_rows(tx, user, &BTreeSet::new(), &keys).await
    }

    /// Locks `user`'s lock rows of `actors` and `keys` within `tx` (in
    /// the order of (class, name): one statement when they all exist),
    /// making those missing (writers racing to make one wait on each
    /// other's insert).
    async fn lock_rows(
        &self,
        tx: &mut Tx,
        user: UserId,
        actors: &BTreeSet<String>,
        keys: &BTreeSet<String>,
    ) -> Result<()> {
        let want: Vec<(i64, &str)> =
            actors.iter().map(|a| (ACTOR, a.as_str())).chain(keys.iter().map(|k| (KEY, k.as_str()))).collect();
        if want.is_empty() {
            return Ok(());
        }
        let got = self.lock_existing(tx, user, &want).await?;
        let missing: Vec<(i64, &str)> =
            want.iter().filter(|w| !got.contains(&(w.0, w.1.to_owned()))).copied().collect();
        if missing.is_empty() {
            return Ok(());
        }
        let values = vec!["(?, ?, ?)"; missing.len()].join(", ");
        let sql = self.insert_or_keep("tw_notify_locks (usr, cls, lk)", &values, "usr");
        let mut args = Vec::with_capacity(missing.len() * 3);
        for (cls, name) in &missing {
            args.extend([Int(k(user.0)), Int(*cls), Text(name)]);
        }
        self.exec_in(tx, &sql, &args).await?;
        let got = self.lock_existing(tx, user, &missing).await?;
        if got.len() == missing.len() { Ok(()) } else { Err(StoreError::corrupt("a notification lock row, just made")) }
    }

    /// Locks those of `want` that exist, in (class, name) order; the set
    /// locked. PostgreSQL locks only the rows its statement returns: one
    /// statement. InnoDB locks every row its plan reads before it filters
    /// them (on a small table the plan reads all the user's rows): one
    /// primary-key probe a row, which reads that row only.
    async fn lock_existing(&self, tx: &mut Tx, user: UserId, want: &[(i64, &str)]) -> Result<HashSet<(i64, String)>> {
        let mut got = HashSet::new();
        if self.dialect == crate::Dialect::MySql {
            let mut sorted = want.to_vec();
            sorted.sort_unstable();
            for (cls, name) in sorted {
                let rows = self
                    .rows_in(
                        tx,
                        "SELECT cls FROM tw_notify_locks WHERE usr = ? AND cls = ? AND lk = ? FOR UPDATE",
                        &[Int(k(user.0)), Int(cls), Text(name)],
                    )
                    .await?;
                if !rows.is_empty() {
                    got.insert((cls, name.to_owned()));
                }
            }
            return Ok(got);
        }
        let classes: BTreeSet<i64> = want.iter().map(|w| w.0).collect();
        let names: BTreeSet<&str> = want.iter().map(|w| w.1).collect();
        // Actor names are digits, key names JSON: the cross product of the
        // two lists names no other row.
        let sql = format!(
            "SELECT cls, lk FROM tw_notify_locks WHERE usr = ? AND cls IN ({}) AND lk IN ({}) ORDER BY cls, lk FOR UPDATE",
            crate::rows::marks(classes.len()),
            crate::rows::marks(names.len())
        );
        let mut args = vec![Int(k(user.0))];
        args.extend(classes.iter().map(|c| Int(*c)));
        args.extend(names.iter().map(|n| Text(n)));
        for r in self.rows_in(tx, &sql, &args).await? {
            got.insert((int(&r, 0)?, text(&r, 1)?));
        }
        Ok(got)
    }

    /// `sql` (already in this dialect) bound to `args`.
    fn bound<'q>(
        &self,
        sql: &'q str,
        args: &[Arg<'q>],
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        let mut q = sqlx::query(sql);
        for a in args {
            q = match *a {
                Int(v) => q.bind(v),
                Opt(v) => q.bind(v),
                Text(v) => q.bind(v),
            };
        }
        q
    }

    /// The rows of `sql` (with `?` placeholders) within `tx`.
    async fn rows_in(&self, tx: &mut Tx, sql: &str, args: &[Arg<'_>]) -> Result<Vec<AnyRow>> {
        let sql = self.q(sql);
        self.bound(&sql, args).fetch_all(&mut **tx).await.map_err(self.err())
    }

    /// Runs `sql` (with `?` placeholders) within `tx`.
    async fn exec_in(&self, tx: &mut Tx, sql: &str, args: &[Arg<'_>]) -> Result<()> {
        let sql = self.q(sql);
        self.bound(&sql, args).execute(&mut **tx).await.map_err(self.err())?;
        Ok(())
    }

    /// Locks `user`'s row within `tx` and reads it (`None`: no row yet).
    async fn lock_marks(&self, tx: &mut Tx, user: UserId) -> Result<Option<Marks>> {
        let rows = self
            .rows_in(
                tx,
                "SELECT seen, rd, unseen, unread FROM tw_notify_users WHERE usr = ? FOR UPDATE",
                &[Int(k(user.0))],
            )
            .await?;
        rows.first().map(|r| Marks::of(r, 0)).transpose()
    }

    /// Locks `user`'s row within `tx`, making it on their first mark or
    /// fold. Locked first and made only when missing, so the usual mark takes
    /// the lock in one statement; writers racing to make it wait on each other's
    /// insert (`insert_or_keep`: on InnoDB an insert-or-ignore would leave
    /// them all a shared lock to raise, and deadlock).
    async fn own_marks(&self, tx: &mut Tx, user: UserId) -> Result<Marks> {
        if let Some(m) = self.lock_marks(tx, user).await? {
            return Ok(m);
        }
        let sql = self.insert_or_keep("tw_notify_users (usr, seen, rd, unseen, unread)", "(?, ?, ?, 0, 0)", "usr");
        self.exec_in(tx, &sql, &[Int(k(user.0)), Int(NEVER.0), Int(NEVER.0)]).await?;
        self.lock_marks(tx, user).await?.ok_or_else(|| StoreError::corrupt("a notification user's row, just made"))
    }

    /// Writes group `id`'s figures; its `last_at` follows its `latest_at`
    /// whenever it has one (and keeps it when emptied).
    async fn put_figures(&self, tx: &mut Tx, user: UserId, id: u64, f: Figures) -> Result<()> {
        self.exec_in(
            tx,
            "UPDATE tw_notify_groups SET cnt = ?, latest_at = ?, last_at = COALESCE(?, last_at) WHERE usr = ? AND id = ?",
            &[Int(f.cnt), Opt(f.latest), Opt(f.latest), Int(k(user.0)), Int(k(id))],
        )
        .await
    }

    /// Group `id`'s figures once its visible event at `at` is gone (already
    /// written): when it was the newest, the next newest is one probe of the
    /// group's index.
    async fn without(&self, tx: &mut Tx, user: UserId, id: u64, f: Figures, at: i64) -> Result<Figures> {
        let cnt = f.cnt - 1;
        let latest = if cnt <= 0 {
            None
        } else if f.latest == Some(at) {
            let rows = self
                .rows_in(
                    tx,
                    "SELECT at FROM tw_notify_events WHERE usr = ? AND grp = ? AND hidden = 0 ORDER BY at DESC LIMIT 1",
                    &[Int(k(user.0)), Int(k(id))],
                )
                .await?;
            rows.first().map(|r| int(r, 0)).transpose()?
        } else {
            f.latest
        };
        Ok(Figures { latest, cnt: cnt.max(0) })
    }

    /// Records that groups' `latest_at` moved (`(was, now)` each, `None`:
    /// not shown): the rows the user's counts are folded from (see the
    /// module docs). `false` when nothing moved.
    async fn record_moves(&self, tx: &mut Tx, user: UserId, moves: &[(Option<i64>, Option<i64>)]) -> Result<bool> {
        let moves: Vec<_> = moves.iter().filter(|(was, now)| was != now).collect();
        if moves.is_empty() {
            return Ok(false);
        }
        for chunk in moves.chunks(MOVES_A_STATEMENT) {
            let sql = format!(
                "INSERT INTO tw_notify_moves (usr, old_at, new_at) VALUES {}",
                vec!["(?, ?, ?)"; chunk.len()].join(", ")
            );
            let mut args = Vec::with_capacity(chunk.len() * 3);
            for (was, now) in chunk {
                args.extend([Int(k(user.0)), Opt(*was), Opt(*now)]);
            }
            self.exec_in(tx, &sql, &args).await?;
        }
        Ok(true)
    }

    /// [`Op::Stand`]: one statement reads every fact the placement needs
    /// (whether the event stands, the newest group of its key, the group it
    /// would open, whether the graph hides its actor, the user's read
    /// mark), then the event, its group and the group's move are written.
    async fn stand(&self, tx: &mut Tx, notice: &Notice, open: u64) -> Result<bool> {
        let (user, actor) = (k(notice.user.0), k(notice.actor.0));
        let key = key_of(&notice.verb)?;
        let mut sql = "SELECT 'e', grp, at, actor FROM tw_notify_events WHERE usr = ? AND vkey = ? AND actor = ? \
             UNION ALL SELECT 'o', id, latest_at, cnt FROM tw_notify_groups WHERE usr = ? AND id = ? \
             UNION ALL SELECT 'h', user_id, target, since FROM tw_blocks WHERE user_id = ? AND target = ? \
             UNION ALL SELECT 'h', user_id, target, since FROM tw_blocks WHERE user_id = ? AND target = ? \
             UNION ALL SELECT 'h', user_id, target, since FROM tw_mutes WHERE user_id = ? AND target = ? \
             UNION ALL SELECT 'r', usr, rd, rd FROM tw_notify_users WHERE usr = ?"
            .to_owned();
        let mut args = vec![
            Int(user),
            Text(&key),
            Int(actor),
            Int(user),
            Int(k(open)),
            Int(user),
            Int(actor),
            Int(actor),
            Int(user),
            Int(user),
            Int(actor),
            Int(user),
        ];
        if notice.verb.gathers() {
            sql.push_str(
                " UNION ALL SELECT 'n', id, latest_at, cnt FROM \
                 (SELECT id, latest_at, cnt FROM tw_notify_groups WHERE usr = ? AND vkey = ? ORDER BY id DESC LIMIT 1) n",
            );
            args.extend([Int(user), Text(&key)]);
        }
        let (mut newest, mut opened, mut hidden, mut read) = (None, None, false, NEVER.0);
        for row in self.rows_in(tx, &sql, &args).await? {
            match text(&row, 0)?.as_str() {
                // Standing already: applying twice is applying once.
                "e" => return Ok(false),
                "r" => read = int(&row, 2)?,
                "o" => opened = Some(Figures::of(&row, 2)?),
                "n" => newest = Some((int(&row, 1)? as u64, Figures::of(&row, 2)?)),
                _ => hidden = true,
            }
        }
        let found = newest.map(|(id, f)| NewestGroup {
            id,
            latest_at: f.latest.map_or(NEVER, Millis),
            standing: f.cnt.max(0) as u64,
        });
        let (id, figures) = match place(&notice.verb, found, Millis(read)) {
            Placement::Join(id) => (id, newest.map(|n| n.1)),
            Placement::Open => (open, opened),
        };
        let at = notice.at.0;
        self.exec_in(
            tx,
            "INSERT INTO tw_notify_events (usr, vkey, actor, grp, at, hidden) VALUES (?, ?, ?, ?, ?, ?)",
            &[Int(user), Text(&key), Int(actor), Int(k(id)), Int(at), Int(i64::from(hidden))],
        )
        .await?;
        match figures {
            // A new group, with the event in its figures.
            None => {
                let f = if hidden { Figures { latest: None, cnt: 0 } } else { Figures { latest: Some(at), cnt: 1 } };
                self.exec_in(
                    tx,
                    "INSERT INTO tw_notify_groups (usr, id, vkey, about, last_at, latest_at, cnt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    &[
                        Int(user),
                        Int(k(id)),
                        Text(&key),
                        Opt(notice.about.map(|i| k(i.0))),
                        Int(at),
                        Opt(f.latest),
                        Int(f.cnt),
                    ],
                )
                .await?;
                self.record_moves(tx, notice.user, &[(None, f.latest)]).await
            }
            Some(old) if !hidden => {
                let new = old.with(at);
                self.put_figures(tx, notice.user, id, new).await?;
                self.record_moves(tx, notice.user, &[(old.latest, new.latest)]).await
            }
            // A hidden event changes no figure.
            Some(_) => Ok(false),
        }
    }

    /// [`Op::Fall`]: the event (with its group's figures) is read, deleted
    /// if it stands from `until` or before, and its group's figures follow.
    async fn fall(&self, tx: &mut Tx, user: UserId, verb: &Verb, actor: UserId, until: Millis) -> Result<bool> {
        let key = key_of(verb)?;
        let args = [Int(k(user.0)), Text(&key), Int(k(actor.0))];
        let rows = self
            .rows_in(
                tx,
                "SELECT e.grp, e.at, e.hidden, g.latest_at, g.cnt FROM tw_notify_events e \
                 JOIN tw_notify_groups g ON g.usr = e.usr AND g.id = e.grp \
                 WHERE e.usr = ? AND e.vkey = ? AND e.actor = ?",
                &args,
            )
            .await?;
        let Some(row) = rows.first() else { return Ok(false) };
        let (id, at, hidden, old) = (int(row, 0)? as u64, int(row, 1)?, int(row, 2)? != 0, Figures::of(row, 3)?);
        if at > until.0 {
            return Ok(false);
        }
        self.exec_in(tx, "DELETE FROM tw_notify_events WHERE usr = ? AND vkey = ? AND actor = ?", &args).await?;
        if !hidden {
            let new = self.without(tx, user, id, old, at).await?;
            self.put_figures(tx, user, id, new).await?;
            return self.record_moves(tx, user, &[(old.latest, new.latest)]).await;
        }
        Ok(false)
    }

    /// [`Op::Forget`]: every event of the user's groups about `item` falls
    /// (the groups stay, emptied).
    async fn forget(&self, tx: &mut Tx, user: UserId, item: ItemId) -> Result<bool> {
        let rows = self
            .rows_in(
                tx,
                "SELECT id, latest_at FROM tw_notify_groups WHERE usr = ? AND about = ?",
                &[Int(k(user.0)), Int(k(item.0))],
            )
            .await?;
        if rows.is_empty() {
            return Ok(false);
        }
        let mut groups = Vec::with_capacity(rows.len());
        for r in &rows {
            groups.push((int(r, 0)? as u64, oint(r, 1)?));
        }
        let (m, ids) = in_list(groups.iter().map(|g| k(g.0)));
        let mut args = vec![Int(k(user.0))];
        args.extend(ids.iter().map(|i| Int(*i)));
        self.exec_in(tx, &format!("DELETE FROM tw_notify_events WHERE usr = ? AND grp IN ({m})"), &args).await?;
        self.exec_in(
            tx,
            &format!("UPDATE tw_notify_groups SET cnt = 0, latest_at = NULL WHERE usr = ? AND id IN ({m})"),
            &args,
        )
        .await?;
        let moves: Vec<_> = groups.iter().map(|g| (g.1, None)).collect();
        self.record_moves(tx, user, &moves).await
    }

    /// [`Op::Hide`]: the actor's events of the other visibility change in one
    /// statement, then each of their groups' figures follow.
    async fn hide(&self, tx: &mut Tx, user: UserId, actor: UserId, hidden: bool) -> Result<bool> {
        let (u, a, from, to) = (k(user.0), k(actor.0), i64::from(!hidden), i64::from(hidden));
        let rows = self
            .rows_in(
                tx,
                "SELECT e.grp, e.at, g.latest_at, g.cnt FROM tw_notify_events e \
                 JOIN tw_notify_groups g ON g.usr = e.usr AND g.id = e.grp \
                 WHERE e.usr = ? AND e.actor = ? AND e.hidden = ?",
                &[Int(u), Int(a), Int(from)],
            )
            .await?;
        if rows.is_empty() {
            return Ok(false);
        }
        self.exec_in(
            tx,
            "UPDATE tw_notify_events SET hidden = ? WHERE usr = ? AND actor = ? AND hidden = ?",
            &[Int(to), Int(u), Int(a), Int(from)],
        )
        .await?;
        // Each group before and after (an actor has one event a group, but
        // the figures stay right with more).
        let mut groups: BTreeMap<u64, (Figures, Figures)> = BTreeMap::new();
        for r in &rows {
            let (id, at) = (int(r, 0)? as u64, int(r, 1)?);
            let (old, cur) = match groups.get(&id) {
                Some(g) => *g,
                None => {
                    let f = Figures::of(r, 2)?;
                    (f, f)
                }
            };
            let new = if hidden { self.without(tx, user, id, cur, at).await? } else { cur.with(at) };
            groups.insert(id, (old, new));
        }
        let mut moves = Vec::with_capacity(groups.len());
        for (id, (old, new)) in groups {
            self.put_figures(tx, user, id, new).await?;
            moves.push((old.latest, new.latest));
        }
        self.record_moves(tx, user, &moves).await
    }

    /// One op of a user whose lock rows `tx` holds; whether a group moved.
    async fn apply(&self, tx: &mut Tx, op: &Op) -> Result<bool> {
        match op {
            Op::Stand { notice, open } => self.stand(tx, notice, *open).await,
            Op::Fall { user, verb, actor, at } => self.fall(tx, *user, verb, *actor, *at).await,
            Op::Forget { user, item } => self.forget(tx, *user, *item).await,
            Op::Hide { user, actor, hidden } => self.hide(tx, *user, *actor, *hidden).await,
        }
    }

    /// One read of a page (see the module docs); `false` with it when a
    /// write came between its two statements.
    /// Also how many moves it counted (a fold is due above [`FOLD_AT`]).
    async fn read_page(
        &self,
        user: UserId,
        before: Option<(Millis, u64)>,
        limit: usize,
    ) -> Result<(NotifyPage, bool, usize)> {
        let u = k(user.0);
        let mut sql = "SELECT 'u', seen, rd, unseen, unread, '' FROM tw_notify_users WHERE usr = ? \
             UNION ALL SELECT 'm', seq, old_at, new_at, seq, '' FROM tw_notify_moves WHERE usr = ? \
             UNION ALL SELECT 'g', id, latest_at, cnt, id, vkey FROM \
             (SELECT id, latest_at, cnt, vkey FROM tw_notify_groups WHERE usr = ? AND latest_at IS NOT NULL"
            .to_owned();
        let mut binds = vec![u, u, u];
        if let Some((at, id)) = before {
            sql.push_str(" AND (latest_at < ? OR (latest_at = ? AND id < ?))");
            binds.extend([at.0, at.0, k(id)]);
        }
        // The limit is spelled, not bound (as `range_keys` says why).
        sql.push_str(&format!(" ORDER BY latest_at DESC, id DESC LIMIT {limit}) g"));
        let mut marks = Marks::NONE;
        let mut moves = Vec::new();
        let mut groups: Vec<(u64, Figures, String)> = Vec::new();
        for row in self.fetch(&sql, &binds).await? {
            match text(&row, 0)?.as_str() {
                "u" => marks = Marks::of(&row, 1)?,
                "m" => moves.push((oint(&row, 2)?, oint(&row, 3)?)),
                _ => groups.push((int(&row, 1)? as u64, Figures::of(&row, 2)?, text(&row, 5)?)),
            }
        }
        // The counts as of the moves the statement saw, at its marks.
        for (was, now) in &moves {
            marks.reorder(*was, *now);
        }
        groups.sort_by_key(|g| std::cmp::Reverse((g.1.latest, g.0)));
        let mut whole = true;
        let mut views = Vec::with_capacity(groups.len());
        if !groups.is_empty() {
            // The groups' actors, and their figures as the same statement
            // sees them. Padded to a power of two by repeating the last group
            // (a few statement texts, each prepared once a connection): the
            // repeated rows are read once.
            let (m, ids) = in_list(groups.iter().map(|g| k(g.0)));
            let one = format!(
                "(SELECT 'a', grp, actor, at FROM tw_notify_events WHERE usr = ? AND grp = ? AND hidden = 0 \
                 ORDER BY at DESC, actor DESC LIMIT {SHOWN_ACTORS})"
            );
            let mut sql = vec![one; ids.len()].join(" UNION ALL ");
            sql.push_str(&format!(
                " UNION ALL SELECT 'g', id, latest_at, cnt FROM tw_notify_groups WHERE usr = ? AND id IN ({m})"
            ));
            let mut binds: Vec<i64> = ids.iter().flat_map(|id| [u, *id]).collect();
            binds.push(u);
            binds.extend(&ids);
            let mut actors: BTreeMap<u64, Vec<(i64, u64)>> = BTreeMap::new();
            let mut now: BTreeMap<u64, Figures> = BTreeMap::new();
            let mut read_once = HashSet::new();
            for row in self.fetch(&sql, &binds).await? {
                let id = int(&row, 1)? as u64;
                if text(&row, 0)? == "g" {
                    now.insert(id, Figures::of(&row, 2)?);
                } else {
                    let actor = int(&row, 2)? as u64;
                    if read_once.insert((id, actor)) {
                        actors.entry(id).or_default().push((int(&row, 3)?, actor));
                    }
                }
            }
            for (id, f, key) in groups {
                let f = match now.get(&id) {
                    Some(n) if *n == f => f,
                    // Written since: shown as this statement saw it.
                    Some(n) => {
                        whole = false;
                        *n
                    }
                    None => {
                        whole = false;
                        continue;
                    }
                };
                let Some(latest) = f.latest else { continue };
                let mut shown = actors.remove(&id).unwrap_or_default();
                shown.sort_by(|a, b| b.cmp(a));
                views.push(GroupView {
                    id,
                    verb: verb_of(&key)?,
                    actors: shown.into_iter().take(SHOWN_ACTORS).map(|a| UserId(a.1)).collect(),
                    actor_count: f.cnt.max(0) as u64,
                    latest_at: Millis(latest),
                });
            }
        }
        let page = NotifyPage {
            groups: views,
            seen: Millis(marks.seen),
            read: Millis(marks.read),
            unseen: marks.unseen.max(0) as u64,
            unread: marks.unread.max(0) as u64,
        };
        Ok((page, whole, moves.len()))
    }
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
                let sql = self.q(&format!(
                    "SELECT item, user_id, kind FROM tw_reactions WHERE (item, user_id, kind) > (?, ?, ?) \
                     ORDER BY item, user_id, kind LIMIT {limit}"
                ));
                let rows = sqlx::query(&sql)
                    .bind(item)
                    .bind(user)
                    .bind(kind)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(self.err())?;
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

impl SqlStore {
    /// Folds `user`'s moves into their row's counts in a transaction that
    /// waits on no lock: a row held by a mark or another fold is left to
    /// them.
    async fn fold_now(&self, user: UserId) -> Result<()> {
        let mut tx = self.begin().await?;
        let u = k(user.0);
        let row_sql = "SELECT seen, rd, unseen, unread FROM tw_notify_users WHERE usr = ? FOR UPDATE SKIP LOCKED";
        let mut row = self.rows_in(&mut tx, row_sql, &[Int(u)]).await?;
        if row.is_empty() {
            // Held by another (nothing to do), or not made yet.
            if !self.rows_in(&mut tx, "SELECT usr FROM tw_notify_users WHERE usr = ?", &[Int(u)]).await?.is_empty() {
                return Ok(());
            }
            let sql = self.insert_or_keep("tw_notify_users (usr, seen, rd, unseen, unread)", "(?, ?, ?, 0, 0)", "usr");
            self.exec_in(&mut tx, &sql, &[Int(u), Int(NEVER.0), Int(NEVER.0)]).await?;
            row = self.rows_in(&mut tx, row_sql, &[Int(u)]).await?;
        }
        let Some(row) = row.first() else { return Ok(()) };
        let mut marks = Marks::of(row, 0)?;
        let mut moves = Vec::new();
        for r in
            self.rows_in(&mut tx, "SELECT seq, old_at, new_at FROM tw_notify_moves WHERE usr = ?", &[Int(u)]).await?
        {
            moves.push((int(&r, 0)?, oint(&r, 1)?, oint(&r, 2)?));
        }
        if moves.is_empty() {
            return Ok(());
        }
        for (_, was, now) in &moves {
            marks.reorder(*was, *now);
        }
        self.write_fold(&mut tx, user, marks, &moves).await?;
        self.commit(tx).await
    }

    /// Writes `user`'s row (marks and counts, which take in `moves`) and
    /// deletes those moves, within `tx`, which holds the row.
    async fn write_fold(
        &self,
        tx: &mut Tx,
        user: UserId,
        marks: Marks,
        moves: &[(i64, Option<i64>, Option<i64>)],
    ) -> Result<()> {
        let u = k(user.0);
        self.exec_in(
            tx,
            "UPDATE tw_notify_users SET seen = ?, rd = ?, unseen = ?, unread = ? WHERE usr = ?",
            &[Int(marks.seen), Int(marks.read), Int(marks.unseen), Int(marks.unread), Int(u)],
        )
        .await?;
        for chunk in moves.chunks(MOVES_A_STATEMENT) {
            let (m, seqs) = in_list(chunk.iter().map(|m| m.0));
            let mut args = vec![Int(u)];
            args.extend(seqs.into_iter().map(Int));
            self.exec_in(tx, &format!("DELETE FROM tw_notify_moves WHERE usr = ? AND seq IN ({m})"), &args).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The lock per group key on real servers: a transaction left open
    //! holding one key's notification (as a node cut off mid-write leaves
    //! it) holds no other key of that user, nor their marks; and the counts
    //! stay exact through writes and marks at once from two nodes.

    use crate::SqlStore;
    use crate::testing::FreshDatabase;
    use std::time::Duration;
    use tideway_core::notify::{Mark, Notice, Op, Verb};
    use tideway_core::{ItemId, Millis, UserId};
    use tideway_store::Notifications;

    /// Far below the lock wait (`session::LOCK_WAIT`, 5 s): a write that
    /// took longer waited on the held lock.
    const PROMPT: Duration = Duration::from_secs(2);

    /// `call`'s answer, which came well within the lock wait.
    async fn prompt<T>(what: &str, call: impl std::future::Future<Output = tideway_store::Result<T>>) -> T {
        match tokio::time::timeout(PROMPT, call).await {
            Ok(answer) => answer.unwrap_or_else(|e| panic!("{what}: {e}")),
            Err(_) => panic!("{what} waited on the held key"),
        }
    }

    fn like(user: u64, item: u64, actor: u64, at: i64, open: u64) -> Op {
        let notice = Notice {
            user: UserId(user),
            verb: Verb::Reaction { item: ItemId(item), kind: "like".into() },
            actor: UserId(actor),
            at: Millis(at),
            stands: true,
            about: Some(ItemId(item)),
        };
        Op::Stand { notice, open }
    }

    async fn a_held_key_holds_only_itself(var: &str) {
        let db = FreshDatabase::from_env(var).await;
        let (cut, healthy) =
            (SqlStore::connect(&db.url).await.expect("connect"), SqlStore::connect(&db.url).await.expect("connect"));
        let owner = UserId(1);
        // The cut node's like of item 9 (key A): written, not committed.
        let mut held = cut.begin().await.expect("begin");
        cut.notify_in(&mut held, &[like(1, 9, 10, 300, 100)]).await.expect("a like, held");

        // The healthy node's like of item 8 (key B) of the same owner, its
        // page and both marks answer at once.
        if std::env::var("DEBUG_LOCKS").is_ok() {
            let url = db.url.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(1000)).await;
                use sqlx::{Connection, Row};
                let mut c = sqlx::AnyConnection::connect(&url).await.expect("c");
                let r = sqlx::query("SHOW ENGINE INNODB STATUS").fetch_one(&mut c).await.expect("st");
                let st: String = r.try_get(2).expect("s");
                eprintln!("{st}");
            });
        }
        prompt("a like of another key", healthy.notify(&[like(1, 8, 11, 200, 101)])).await;
        let page = prompt("a page", healthy.notifications(owner, None, 10)).await;
        assert_eq!((page.groups.len(), page.unseen, page.unread), (1, 1, 1), "{page:?}");
        assert!(prompt("a seen mark", healthy.mark_notifications(owner, Mark::Seen, None)).await);

        // A like of the held key waits for it (the lock is real) …
        let same = {
            let url = db.url.clone();
            tokio::spawn(async move {
                let node = SqlStore::connect(&url).await.expect("connect");
                let r = node.notify(&[like(1, 9, 12, 310, 102)]).await;
                node.close().await;
                r
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!same.is_finished(), "a like of the held key went past its lock");
        // … and joins the held like's group once it commits.
        cut.commit(held).await.expect("commit the held like");
        same.await.expect("task").expect("the like of the held key");

        let page = healthy.notifications(owner, None, 10).await.expect("page");
        let shown: Vec<(u64, Vec<UserId>, Millis)> =
            page.groups.iter().map(|g| (g.actor_count, g.actors.clone(), g.latest_at)).collect();
        assert_eq!(
            shown,
            [(2, vec![UserId(12), UserId(10)], Millis(310)), (1, vec![UserId(11)], Millis(200))],
            "{page:?}"
        );
        // Seen up to 200: the group at 310 is unseen; nothing is read.
        assert_eq!((page.seen, page.unseen, page.unread), (Millis(200), 1, 2), "{page:?}");
        assert!(healthy.mark_notifications(owner, Mark::Read, None).await.expect("read"));
        let page = cut.notifications(owner, None, 10).await.expect("page");
        assert_eq!((page.read, page.unseen, page.unread), (Millis(310), 1, 0), "{page:?}");
        cut.close().await;
        healthy.close().await;
        db.drop().await.expect("drop the database");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_held_notification_key_holds_only_itself() {
        a_held_key_holds_only_itself("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_a_held_notification_key_holds_only_itself() {
        a_held_key_holds_only_itself("TIDEWAY_TEST_MYSQL_URL").await;
    }

    /// Writers on two nodes like and unlike items of one owner while marks
    /// move: once they are done, each count is the number of shown groups
    /// above its mark.
    async fn counts_stay_exact_at_once(var: &str) {
        let db = FreshDatabase::from_env(var).await;
        let nodes = [
            std::sync::Arc::new(SqlStore::connect(&db.url).await.expect("connect")),
            std::sync::Arc::new(SqlStore::connect(&db.url).await.expect("connect")),
        ];
        let owner = UserId(1);
        let mut writers = tokio::task::JoinSet::new();
        for w in 0..4u64 {
            let node = nodes[w as usize % 2].clone();
            writers.spawn(async move {
                for n in 0..60u64 {
                    let (item, actor, at) = (1 + (n * 7 + w) % 6, 10 + (n + w * 3) % 8, (w * 1000 + n * 10) as i64);
                    let op = match (n + w) % 5 {
                        0 => Op::Fall {
                            user: owner,
                            verb: Verb::Reaction { item: ItemId(item), kind: "like".into() },
                            actor: UserId(actor),
                            at: Millis(i64::MAX),
                        },
                        _ => like(1, item, actor, at, 10_000 * (w + 1) + n),
                    };
                    node.notify(&[op]).await.expect("notify");
                    if n % 9 == 4 {
                        let mark = if w % 2 == 0 { Mark::Seen } else { Mark::Read };
                        node.mark_notifications(owner, mark, None).await.expect("mark");
                    }
                }
            });
        }
        while let Some(done) = writers.join_next().await {
            done.expect("writer");
        }
        for node in &nodes {
            let page = node.notifications(owner, None, 1000).await.expect("page");
            let above = |mark: Millis| page.groups.iter().filter(|g| g.latest_at > mark).count() as u64;
            assert_eq!((page.unseen, page.unread), (above(page.seen), above(page.read)), "{page:?}");
            assert!(page.seen > Millis(0) && page.read > Millis(0), "the marks moved: {page:?}");
        }
        for node in nodes {
            node.close().await;
        }
        db.drop().await.expect("drop the database");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_notification_counts_stay_exact_at_once() {
        counts_stay_exact_at_once("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_notification_counts_stay_exact_at_once() {
        counts_stay_exact_at_once("TIDEWAY_TEST_MYSQL_URL").await;
    }
}
