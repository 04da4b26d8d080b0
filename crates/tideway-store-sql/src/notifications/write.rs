//! The write path: locking the rows ops need, placing events, keeping the counts.

use super::*;

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
    pub(super) async fn lock_for(&self, tx: &mut Tx, user: UserId, ops: &[&Op]) -> Result<()> {
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
    pub(super) async fn lock_rows(
        &self,
        tx: &mut Tx,
        user: UserId,
        actors: &BTreeSet<String>,
        keys: &BTreeSet<String>,
    ) -> Result<()> {
        // On PostgreSQL an actor is locked with a transaction-scoped
        // advisory lock (no row to make: every new liker made one), before
        // any key as with rows, so the order every writer takes is kept.
        let actors_as_rows = if self.dialect == crate::Dialect::Postgres {
            // One statement, the locks in the order of their numbers (the
            // order every writer takes them), as the VALUES list is read.
            let mut locks: Vec<i64> = actors.iter().map(|a| actor_lock(user, a)).collect();
            locks.sort_unstable();
            locks.dedup();
            if !locks.is_empty() {
                let values = vec!["(?)"; locks.len()].join(", ");
                let sql = format!("SELECT count(pg_advisory_xact_lock(v.x)) FROM (VALUES {values}) AS v(x)");
                let args: Vec<crate::rows::Bind<'_>> = locks.into_iter().map(Int).collect();
                self.rows_in(tx, &sql, &args).await?;
            }
            &BTreeSet::new()
        } else {
            actors
        };
        let want: Vec<(i64, &str)> =
            actors_as_rows.iter().map(|a| (ACTOR, a.as_str())).chain(keys.iter().map(|k| (KEY, k.as_str()))).collect();
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
    pub(super) async fn lock_existing(
        &self,
        tx: &mut Tx,
        user: UserId,
        want: &[(i64, &str)],
    ) -> Result<HashSet<(i64, String)>> {
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

    /// Locks `user`'s row within `tx` and reads it (`None`: no row yet).
    pub(super) async fn lock_marks(&self, tx: &mut Tx, user: UserId) -> Result<Option<Marks>> {
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
    pub(super) async fn own_marks(&self, tx: &mut Tx, user: UserId) -> Result<Marks> {
        if let Some(m) = self.lock_marks(tx, user).await? {
            return Ok(m);
        }
        let sql = self.insert_or_keep("tw_notify_users (usr, seen, rd, unseen, unread)", "(?, ?, ?, 0, 0)", "usr");
        self.exec_in(tx, &sql, &[Int(k(user.0)), Int(NEVER.0), Int(NEVER.0)]).await?;
        self.lock_marks(tx, user).await?.ok_or_else(|| StoreError::corrupt("a notification user's row, just made"))
    }

    /// Writes group `id`'s figures; its `last_at` follows its `latest_at`
    /// whenever it has one (and keeps it when emptied).
    pub(super) async fn put_figures(&self, tx: &mut Tx, user: UserId, id: u64, f: Figures) -> Result<()> {
        self.exec_in(
            tx,
            "UPDATE tw_notify_groups SET cnt = ?, latest_at = ?, last_at = COALESCE(?, last_at) WHERE usr = ? AND id = ?",
            &[Int(f.cnt), Opt(f.latest), Opt(f.latest), Int(k(user.0)), Int(k(id))],
        )
        .await?;
        Ok(())
    }

    /// Group `id`'s figures once its visible event at `at` is gone (already
    /// written): when it was the newest, the next newest is one probe of the
    /// group's index.
    pub(super) async fn without(&self, tx: &mut Tx, user: UserId, id: u64, f: Figures, at: i64) -> Result<Figures> {
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
    pub(super) async fn record_moves(
        &self,
        tx: &mut Tx,
        user: UserId,
        moves: &[(Option<i64>, Option<i64>)],
    ) -> Result<bool> {
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
    pub(super) async fn stand(&self, tx: &mut Tx, notice: &Notice, open: u64) -> Result<bool> {
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
    pub(super) async fn fall(
        &self,
        tx: &mut Tx,
        user: UserId,
        verb: &Verb,
        actor: UserId,
        until: Millis,
    ) -> Result<bool> {
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
    pub(super) async fn forget(&self, tx: &mut Tx, user: UserId, item: ItemId) -> Result<bool> {
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
    pub(super) async fn hide(&self, tx: &mut Tx, user: UserId, actor: UserId, hidden: bool) -> Result<bool> {
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
    pub(super) async fn apply(&self, tx: &mut Tx, op: &Op) -> Result<bool> {
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
    pub(super) async fn read_page(
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

/// The advisory lock naming `user`'s `actor` (FNV-1a of both, the same on
/// every node; a collision only makes two unrelated writes wait for each
/// other).
fn actor_lock(user: UserId, actor: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in b"tw_notify_actor".iter().chain(&user.0.to_le_bytes()).chain(actor.as_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}
