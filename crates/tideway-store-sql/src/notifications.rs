//! Notifications on SQL (schema 8): per user a row of marks and counts
//! (`tw_notify_users`), groups (`tw_notify_groups`) and standing events
//! (`tw_notify_events`), with the same results as the embedded engines'
//! `tideway_store::notebook::Book`: where an event goes is decided by
//! `tideway_core::notify::place` from what the write reads, not in SQL.
//!
//! - **Serialised per user**: every write of a user's notifications first
//!   locks their row (`SELECT … FOR UPDATE`, made on first use), so two nodes
//!   placing events of one key at once read each other's group and make one;
//!   the figures read after the lock are the figures written over.
//! - **Kept, not aggregated**: a group's row keeps what a page shows of it
//!   (`cnt` visible events, `latest_at` the newest one's time, NULL when none
//!   is visible) and the user's row the counts of shown groups above each
//!   mark, changed by the same writes as the events (as `Book::reorder`). An
//!   event joining a group of a million is a few index probes; when the
//!   newest visible event leaves, the next is one probe of the group's index.
//! - **A page** is two statements: the user's row with the page of groups
//!   (one range of `(usr, latest_at, id)`), then the 5 newest visible actors
//!   of each of them (a `UNION ALL` of one `LIMIT 5` range a group: MariaDB
//!   has no `LATERAL`) with their figures again, to see a write between.

use crate::SqlStore;
use crate::rows::{in_list, int, k, oint, text};
use crate::tx::Tx;
use async_trait::async_trait;
use sqlx::any::AnyRow;
use std::collections::{BTreeMap, HashSet};
use tideway_core::notify::{Mark, NEVER, NewestGroup, Notice, Op, Placement, SHOWN_ACTORS, Verb, place};
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::{GroupView, Notifications, NotifyPage, Result, StoreError};

/// Reads of a page before it is returned as read: a write between its two
/// statements (seen in a group's figures) makes it read again.
const PAGE_READS: usize = 3;

/// A bind of these statements: a BIGINT, a nullable one, or a verb's key.
#[derive(Clone, Copy)]
enum Arg<'a> {
    Int(i64),
    Opt(Option<i64>),
    Text(&'a str),
}

use Arg::{Int, Opt, Text};

/// A user's row: the marks, and how many shown groups are above each.
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
    /// the counts above the marks follow, as `Book::reorder` keeps them.
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
    /// Applies `ops` in `tx`, grouped by the user notified (each user's
    /// marks read once, written once if they moved).
    pub(crate) async fn notify_in(&self, tx: &mut Tx, ops: &[Op]) -> Result<()> {
        let mut by_user: BTreeMap<UserId, Vec<&Op>> = BTreeMap::new();
        for op in ops {
            by_user.entry(op.user()).or_default().push(op);
        }
        for (user, ops) in &by_user {
            let before = self.own_marks(tx, *user).await?;
            let mut marks = before;
            for op in ops {
                self.apply(tx, op, &mut marks).await?;
            }
            if marks != before {
                self.exec_in(
                    tx,
                    "UPDATE tw_notify_users SET unseen = ?, unread = ? WHERE usr = ?",
                    &[Int(marks.unseen), Int(marks.unread), Int(k(user.0))],
                )
                .await?;
            }
        }
        Ok(())
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

    /// Locks `user`'s row within `tx`, making it on their first notification.
    /// Locked first and made only when missing, so the usual write takes the
    /// lock in one statement; writers racing to make it wait on each other's
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

    /// [`Op::Stand`]: one statement reads every fact the placement needs
    /// (whether the event stands, the newest group of its key, the group it
    /// would open, whether the graph hides its actor), then the event and
    /// its group are written.
    async fn stand(&self, tx: &mut Tx, notice: &Notice, open: u64, marks: &mut Marks) -> Result<()> {
        let (user, actor) = (k(notice.user.0), k(notice.actor.0));
        let key = key_of(&notice.verb)?;
        let mut sql = "SELECT 'e', grp, at, actor FROM tw_notify_events WHERE usr = ? AND vkey = ? AND actor = ? \
             UNION ALL SELECT 'o', id, latest_at, cnt FROM tw_notify_groups WHERE usr = ? AND id = ? \
             UNION ALL SELECT 'h', user_id, target, since FROM tw_blocks WHERE user_id = ? AND target = ? \
             UNION ALL SELECT 'h', user_id, target, since FROM tw_blocks WHERE user_id = ? AND target = ? \
             UNION ALL SELECT 'h', user_id, target, since FROM tw_mutes WHERE user_id = ? AND target = ?"
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
        ];
        if notice.verb.gathers() {
            sql.push_str(
                " UNION ALL SELECT 'n', id, latest_at, cnt FROM \
                 (SELECT id, latest_at, cnt FROM tw_notify_groups WHERE usr = ? AND vkey = ? ORDER BY id DESC LIMIT 1) n",
            );
            args.extend([Int(user), Text(&key)]);
        }
        let (mut newest, mut opened, mut hidden) = (None, None, false);
        for row in self.rows_in(tx, &sql, &args).await? {
            match text(&row, 0)?.as_str() {
                // Standing already: applying twice is applying once.
                "e" => return Ok(()),
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
        let (id, figures) = match place(&notice.verb, found, Millis(marks.read)) {
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
                marks.reorder(None, f.latest);
            }
            Some(old) if !hidden => {
                let new = old.with(at);
                self.put_figures(tx, notice.user, id, new).await?;
                marks.reorder(old.latest, new.latest);
            }
            // A hidden event changes no figure.
            Some(_) => {}
        }
        Ok(())
    }

    /// [`Op::Fall`]: the event (with its group's figures) is read, deleted
    /// if it stands from `until` or before, and its group's figures follow.
    async fn fall(
        &self,
        tx: &mut Tx,
        user: UserId,
        verb: &Verb,
        actor: UserId,
        until: Millis,
        marks: &mut Marks,
    ) -> Result<()> {
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
        let Some(row) = rows.first() else { return Ok(()) };
        let (id, at, hidden, old) = (int(row, 0)? as u64, int(row, 1)?, int(row, 2)? != 0, Figures::of(row, 3)?);
        if at > until.0 {
            return Ok(());
        }
        self.exec_in(tx, "DELETE FROM tw_notify_events WHERE usr = ? AND vkey = ? AND actor = ?", &args).await?;
        if !hidden {
            let new = self.without(tx, user, id, old, at).await?;
            self.put_figures(tx, user, id, new).await?;
            marks.reorder(old.latest, new.latest);
        }
        Ok(())
    }

    /// [`Op::Forget`]: every event of the user's groups about `item` falls
    /// (the groups stay, emptied).
    async fn forget(&self, tx: &mut Tx, user: UserId, item: ItemId, marks: &mut Marks) -> Result<()> {
        let rows = self
            .rows_in(
                tx,
                "SELECT id, latest_at FROM tw_notify_groups WHERE usr = ? AND about = ?",
                &[Int(k(user.0)), Int(k(item.0))],
            )
            .await?;
        if rows.is_empty() {
            return Ok(());
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
        for (_, latest) in groups {
            marks.reorder(latest, None);
        }
        Ok(())
    }

    /// [`Op::Hide`]: the actor's events of the other visibility change in one
    /// statement, then each of their groups' figures follow.
    async fn hide(&self, tx: &mut Tx, user: UserId, actor: UserId, hidden: bool, marks: &mut Marks) -> Result<()> {
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
            return Ok(());
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
        for (id, (old, new)) in groups {
            self.put_figures(tx, user, id, new).await?;
            marks.reorder(old.latest, new.latest);
        }
        Ok(())
    }

    /// One op of the user whose row `tx` holds.
    async fn apply(&self, tx: &mut Tx, op: &Op, marks: &mut Marks) -> Result<()> {
        match op {
            Op::Stand { notice, open } => self.stand(tx, notice, *open, marks).await,
            Op::Fall { user, verb, actor, at } => self.fall(tx, *user, verb, *actor, *at, marks).await,
            Op::Forget { user, item } => self.forget(tx, *user, *item, marks).await,
            Op::Hide { user, actor, hidden } => self.hide(tx, *user, *actor, *hidden, marks).await,
        }
    }

    /// One read of a page (see the module docs); `false` with it when a
    /// write came between its two statements.
    async fn read_page(&self, user: UserId, before: Option<(Millis, u64)>, limit: usize) -> Result<(NotifyPage, bool)> {
        let u = k(user.0);
        let mut sql = "SELECT 'u', seen, rd, unseen, unread, '' FROM tw_notify_users WHERE usr = ? \
             UNION ALL SELECT 'g', id, latest_at, cnt, id, vkey FROM \
             (SELECT id, latest_at, cnt, vkey FROM tw_notify_groups WHERE usr = ? AND latest_at IS NOT NULL"
            .to_owned();
        let mut binds = vec![u, u];
        if let Some((at, id)) = before {
            sql.push_str(" AND (latest_at < ? OR (latest_at = ? AND id < ?))");
            binds.extend([at.0, at.0, k(id)]);
        }
        // The limit is spelled, not bound (as `range_keys` says why).
        sql.push_str(&format!(" ORDER BY latest_at DESC, id DESC LIMIT {limit}) g"));
        let mut marks = Marks::NONE;
        let mut groups: Vec<(u64, Figures, String)> = Vec::new();
        for row in self.fetch(&sql, &binds).await? {
            if text(&row, 0)? == "u" {
                marks = Marks::of(&row, 1)?;
            } else {
                groups.push((int(&row, 1)? as u64, Figures::of(&row, 2)?, text(&row, 5)?));
            }
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
        Ok((page, whole))
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
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            self.notify_in(&mut tx, ops).await?;
            self.commit(tx).await
        })
        .await
    }

    async fn notifications(&self, user: UserId, before: Option<(Millis, u64)>, limit: usize) -> Result<NotifyPage> {
        let mut reads = 1;
        loop {
            let (page, whole) = self.read_page(user, before, limit).await?;
            if whole || reads == PAGE_READS {
                return Ok(page);
            }
            reads += 1;
        }
    }

    /// Under the user's lock: the target and the shown groups it passes are
    /// one statement (an index range count, each group passed once), then
    /// the mark and its count are written.
    async fn mark_notifications(&self, user: UserId, mark: Mark, up_to: Option<u64>) -> Result<bool> {
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            // No row: no group, so nothing to move to (and `up_to` is not theirs).
            let Some(marks) = self.lock_marks(&mut tx, user).await? else { return Ok(up_to.is_none()) };
            let u = k(user.0);
            let from = match mark {
                Mark::Seen => marks.seen,
                Mark::Read => marks.read,
            };
            let (target, mut args) = match up_to {
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
            let sql = format!(
                "SELECT x.t, (SELECT COUNT(*) FROM tw_notify_groups g \
                 WHERE g.usr = ? AND g.latest_at > ? AND g.latest_at <= x.t) FROM ({target}) x"
            );
            args.splice(0..0, [Int(u), Int(from)]);
            let rows = self.rows_in(&mut tx, &sql, &args).await?;
            let Some(row) = rows.first() else { return Ok(up_to.is_none()) };
            let (to, passed) = (int(row, 0)?, int(row, 1)?);
            if to <= from {
                return Ok(true);
            }
            let (set, counter, count) = match mark {
                Mark::Seen => ("seen", "unseen", marks.unseen - passed),
                Mark::Read => ("rd", "unread", marks.unread - passed),
            };
            self.exec_in(
                &mut tx,
                &format!("UPDATE tw_notify_users SET {set} = ?, {counter} = ? WHERE usr = ?"),
                &[Int(to), Int(count), Int(u)],
            )
            .await?;
            self.commit(tx).await?;
            Ok(true)
        })
        .await
    }
}
