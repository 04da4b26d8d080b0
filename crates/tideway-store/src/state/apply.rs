//! Applying changes to the index, and the changes they derive.

use super::*;

impl State {
    /// The user's state for changing `unit`: `None` (and the unit noted as
    /// skipped) when lazy and it is not loaded.
    pub(super) fn unit_mut(&mut self, unit: Unit, ap: &mut Applied) -> Option<&mut UserState> {
        let (u, bit) = user_bit(unit)?;
        if !self.lazy {
            return Some(
                self.users.entry(u).or_insert_with(|| Box::new(UserState { loaded: ALL, ..UserState::default() })),
            );
        }
        match self.users.get_mut(&u) {
            Some(s) if s.loaded & bit != 0 => Some(s),
            _ => {
                ap.skipped.push(unit);
                None
            }
        }
    }

    /// The user's counters, to change them. When lazy they are loaded
    /// ([`State::required`] made sure); the user becomes known.
    pub(super) fn head_mut(&mut self, u: UserId, ap: &mut Applied) -> &mut UserState {
        let lazy = self.lazy;
        let s = self
            .users
            .entry(u)
            .or_insert_with(|| Box::new(UserState { loaded: if lazy { 0 } else { ALL }, ..UserState::default() }));
        debug_assert!(s.loaded & HEAD != 0, "the counters of user {u} are changed without being loaded");
        if !s.known {
            s.known = true;
            self.counters.users += 1;
            ap.counters = true;
        }
        ap.heads.push(u);
        s
    }

    /// Whether the store-wide counters or the item's own keep `key`.
    pub(super) fn bump_max(&mut self, key: Key, ap: &mut Applied) {
        if key > self.counters.max_key {
            self.counters.max_key = key;
            ap.counters = true;
        }
    }

    /// Applies one change. Changes are idempotent (applying one twice
    /// leaves the same state).
    pub fn apply(&mut self, change: Change, ap: &mut Applied) {
        match change {
            Change::PutItem(item) => {
                let prev = self.records.insert(item.id.0, Record::Item(item.clone()));
                let prev_live = match prev {
                    Some(Record::Item(p)) if !self.lazy => Some(!p.deleted),
                    _ => None,
                };
                // Lazy: a new item's (empty) reposts, replies and reactions
                // are not loaded as it is written: a holder per item written
                // would fill the budget with units few items ever need; the
                // first reaction or repost reads them (from the memtable).
                if !self.lazy {
                    for feed in crate::rules::postings(&item) {
                        insert_sorted(self.postings.entry(feed).or_default(), item.id.0);
                    }
                } else if !self.items_loaded.contains_key(&item.id) {
                    // ... nor read: above the floor, they are none.
                    self.fresh.created(item.id);
                }
                self.put_item(item, prev_live, ap);
            }
            Change::UpdateItem(item) => {
                let prev = self.records.insert(item.id.0, Record::Item(item.clone()));
                let prev_live = match prev {
                    Some(Record::Item(p)) => !p.deleted,
                    // Only a live item is ever updated.
                    _ => true,
                };
                self.put_item(item, Some(prev_live), ap);
            }
            Change::PutInsert { key, user, item } => {
                self.bump_max(key, ap);
                self.head_mut(user, ap);
                self.records.insert(key, Record::Insert { key, user, item });
                if let Some(s) = self.unit_mut(Unit::Inserts(user), ap) {
                    insert_sorted(&mut s.inserts, key);
                    let first = self.first_insert.entry((user, item)).or_insert(key);
                    *first = (*first).min(key);
                }
            }
            Change::PutEdge { kind, from, to, since } => self.put_edge(kind, from, to, since, ap),
            Change::DelEdge { kind, from, to, .. } => self.del_edge(kind, from, to, ap),
            Change::PutJob(job) => self.jobs.put(job),
            Change::DelJob(key) => self.jobs.remove(key),
            Change::SetReaction { item, user, kind, on } => {
                self.hold_fresh(item);
                self.reactions.set(item, user, &kind, on);
            }
            Change::PutPromotion(p) => {
                self.bump_max(p.id, ap);
                self.promotions.insert(p.id, p);
            }
            Change::Notify(op) => {
                let user = op.user();
                if self.lazy && !self.notify_loaded.contains_key(&user) {
                    ap.skipped.push(Unit::Notify(user));
                    return;
                }
                let s = self.users.get(&user);
                let hidden = |a: UserId| {
                    s.is_some_and(|s| s.blocking.contains(&a) || s.muting.contains(&a) || s.blocked_by.contains(&a))
                };
                self.notify.entry(user).or_default().apply(&op, hidden, &mut ap.notes);
            }
            Change::NotifyMark { user, mark, to } => {
                if self.lazy && !self.notify_loaded.contains_key(&user) {
                    ap.skipped.push(Unit::Notify(user));
                    return;
                }
                self.notify.entry(user).or_default().mark(user, mark, to, &mut ap.notes);
            }
            Change::PutSession(session) => {
                let anchor = session.anchor;
                if self.lazy && !self.live_loaded.contains_key(&anchor) {
                    ap.skipped.push(Unit::Live(anchor));
                    return;
                }
                self.bump_max(session.id, ap);
                self.session_anchor.insert(session.id, anchor);
                self.live.entry(anchor).or_default().put(session);
            }
            // Derived from the others: persisted, nothing to index.
            Change::PutHead(..) | Change::PutCounters(_) | Change::NoteRow(_) => {}
        }
    }

    /// Indexes an item already placed in `records`; `prev_live` says whether
    /// the record it replaced was live (`None`: there was none).
    pub(super) fn put_item(&mut self, item: Arc<Item>, prev_live: Option<bool>, ap: &mut Applied) {
        self.bump_max(item.id.0, ap);
        let was_live = prev_live.unwrap_or(false);
        let is_live = !item.deleted;
        if prev_live.is_none() {
            let head = &mut self.head_mut(item.author, ap).head;
            head.note_key(item.id.0);
            if let Some(s) = self.unit_mut(Unit::Outbox(item.author), ap) {
                insert_sorted(&mut s.outbox, item.id.0);
            }
            if let Some(k) = &item.idempotency_key {
                self.idempotency.insert((item.author, k.clone()), item.id);
            }
        }
        if was_live == is_live {
            return;
        }
        let delta: i64 = if is_live { 1 } else { -1 };
        self.count_item(&item, delta, ap);
    }

    /// Counts an item in or out (`delta` ±1): live items, reposts, replies.
    pub(super) fn count_item(&mut self, item: &Item, delta: i64, ap: &mut Applied) {
        let is_live = delta > 0;
        self.counters.items_live = self.counters.items_live.saturating_add_signed(delta);
        ap.counters = true;
        let u = self.head_mut(item.author, ap);
        u.head.items = u.head.items.saturating_add_signed(delta);
        if let Some(orig) = item.repost_of {
            self.hold_fresh(orig);
            if self.loaded(Unit::Item(orig)) {
                let list = self.reposts.entry(orig).or_default();
                if is_live {
                    list.push((item.author, item.id));
                    self.repost_by.insert((item.author, orig), item.id);
                } else {
                    list.retain(|(_, r)| *r != item.id);
                    if list.is_empty() {
                        self.reposts.remove(&orig);
                    }
                    if self.repost_by.get(&(item.author, orig)) == Some(&item.id) {
                        self.repost_by.remove(&(item.author, orig));
                    }
                }
            } else {
                self.fresh.seen(orig);
                ap.skipped.push(Unit::Item(orig));
            }
        }
        if let Some(parent) = item.reply_to {
            self.hold_fresh(parent);
            if self.loaded(Unit::Item(parent)) {
                let n = self.replies.entry(parent).or_default();
                *n = n.saturating_add_signed(delta);
                if *n == 0 {
                    self.replies.remove(&parent);
                }
            } else {
                self.fresh.seen(parent);
                ap.skipped.push(Unit::Item(parent));
            }
        }
    }

    pub(super) fn put_edge(&mut self, kind: EdgeKind, from: UserId, to: UserId, since: Millis, ap: &mut Applied) {
        self.head_mut(from, ap);
        self.head_mut(to, ap);
        match kind {
            EdgeKind::Follow => {
                let Some(f) = self.unit_mut(Unit::Out(from), ap) else { return };
                let old = f.unfollow(to);
                f.following.insert((to, since));
                f.following_by_time.insert((since, to));
                if old.is_none() {
                    f.head.following += 1;
                    self.counters.follows += 1;
                    ap.counters = true;
                    let t = self.head_mut(to, ap);
                    t.head.followers += 1;
                }
                if let Some(t) = self.unit_mut(Unit::Followers(to), ap) {
                    if let Some(old) = old {
                        t.followers.remove(&(old, from));
                    }
                    t.followers.insert((since, from));
                }
            }
            EdgeKind::Block => {
                if let Some(f) = self.unit_mut(Unit::Out(from), ap) {
                    f.blocking.insert(to);
                }
                if let Some(t) = self.unit_mut(Unit::BlockedBy(to), ap) {
                    t.blocked_by.insert(from);
                }
            }
            EdgeKind::Mute => {
                if let Some(f) = self.unit_mut(Unit::Out(from), ap) {
                    f.muting.insert(to);
                }
            }
        }
    }

    pub(super) fn del_edge(&mut self, kind: EdgeKind, from: UserId, to: UserId, ap: &mut Applied) {
        match kind {
            EdgeKind::Follow => {
                let Some(f) = self.unit_mut(Unit::Out(from), ap) else { return };
                let Some(old) = f.unfollow(to) else { return };
                f.head.following = f.head.following.saturating_sub(1);
                ap.heads.push(from);
                self.counters.follows = self.counters.follows.saturating_sub(1);
                ap.counters = true;
                let t = self.head_mut(to, ap);
                t.head.followers = t.head.followers.saturating_sub(1);
                if let Some(t) = self.unit_mut(Unit::Followers(to), ap) {
                    t.followers.remove(&(old, from));
                }
            }
            EdgeKind::Block => {
                if let Some(f) = self.unit_mut(Unit::Out(from), ap) {
                    f.blocking.remove(&to);
                }
                if let Some(t) = self.unit_mut(Unit::BlockedBy(to), ap) {
                    t.blocked_by.remove(&from);
                }
            }
            EdgeKind::Mute => {
                if let Some(f) = self.unit_mut(Unit::Out(from), ap) {
                    f.muting.remove(&to);
                }
            }
        }
    }

    /// The changes that persist what `ap` says changed: the users'
    /// counters and the store-wide ones (lazy journals keep them so that
    /// start-up reads them instead of counting).
    pub fn derived(&self, ap: &Applied) -> Vec<Change> {
        if !self.lazy {
            return Vec::new();
        }
        let mut heads = ap.heads.clone();
        heads.sort_unstable();
        heads.dedup();
        let mut out: Vec<Change> =
            heads.into_iter().filter_map(|u| self.users.get(&u).map(|s| Change::PutHead(u, s.head))).collect();
        if ap.counters {
            out.push(Change::PutCounters(self.counters));
        }
        out.extend(ap.notes.iter().cloned().map(Change::NoteRow));
        out
    }
}
