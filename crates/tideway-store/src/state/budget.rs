//! The budget of loaded units: weighing holders, letting the coldest go.

use super::*;

impl State {
    /// Bounds the bytes of loaded units (lazy only; `usize::MAX`: no bound).
    pub fn set_budget(&mut self, bytes: usize) {
        self.residency.budget = bytes;
    }

    /// The budget of loaded units, in bytes.
    pub fn budget(&self) -> usize {
        self.residency.budget
    }

    /// What the budget holds now: (bytes counted, holders, holders let go).
    pub fn residency(&self) -> (usize, usize, u64) {
        (self.residency.bytes, self.residency.len(), self.residency.evictions)
    }

    /// A mark to pass to [`State::evict_over_budget`]: what is loaded after
    /// it is not let go by that call.
    pub fn residency_mark(&self) -> u64 {
        self.residency.mark()
    }

    /// Lets go of holders not used since the queue last passed them, while
    /// the budget is exceeded: at most [`LOOKS_PER_PASS`] looks, never a
    /// holder queued at or after `protect` (what the caller just loaded, so
    /// a read whose units outgrow the budget still gets them). Returns the
    /// units let go: the caller notes them as skipped at its last journal
    /// ticket (a change to them may not be durable yet, so a load that read
    /// the disk before it must read again, as for any skipped write).
    pub fn evict_over_budget(&mut self, protect: u64) -> Vec<Unit> {
        let mut gone = Vec::new();
        if !self.lazy || !self.residency.over() {
            return gone;
        }
        let mut items = Vec::new();
        for _ in 0..LOOKS_PER_PASS {
            if !self.residency.over() {
                break;
            }
            let Some(h) = self.residency.next(protect) else { break };
            let Some((used, was)) = self.held_of(h).map(|held| (held.take_used(), held.counted)) else {
                // Not expected (every holder is queued once); nothing to let go.
                continue;
            };
            if used {
                let now = self.holder_bytes(h);
                if let Some(held) = self.held_mut(h) {
                    held.counted = now;
                }
                self.residency.again(h, was, now);
            } else {
                self.evict(h, &mut gone, &mut items);
                self.residency.gone(was, true);
            }
        }
        self.reactions.forget(&items);
        gone
    }

    /// Counts anew the holders whose units these (applied) changes grew or
    /// shrank: without it, what writes add to a loaded unit between two
    /// passes of the queue would go uncounted, and a budget never reached
    /// by the counts would never let anything go.
    pub fn recount(&mut self, changes: &[Change]) {
        if !self.lazy {
            return;
        }
        for c in changes {
            match c {
                Change::PutItem(i) | Change::UpdateItem(i) => {
                    self.recount_holder(Holder::User(i.author));
                    for original in [i.repost_of, i.reply_to].into_iter().flatten() {
                        self.recount_holder(Holder::Item(original));
                    }
                }
                Change::PutInsert { user, .. } => self.recount_holder(Holder::User(*user)),
                Change::PutEdge { from, to, .. } | Change::DelEdge { from, to, .. } => {
                    self.recount_holder(Holder::User(*from));
                    self.recount_holder(Holder::User(*to));
                }
                Change::SetReaction { item, .. } => self.recount_holder(Holder::Item(*item)),
                Change::Notify(op) => self.recount_holder(Holder::Notify(op.user())),
                Change::NotifyMark { user, .. } => self.recount_holder(Holder::Notify(*user)),
                Change::PutSession(s) => self.recount_holder(Holder::Live(s.anchor)),
                _ => {}
            }
        }
    }

    pub(super) fn recount_holder(&mut self, h: Holder) {
        let Some(was) = self.held_of(h).map(|held| held.counted) else { return };
        let now = self.holder_bytes(h);
        if now != was {
            if let Some(held) = self.held_mut(h) {
                held.counted = now;
            }
            self.residency.recount(was, now);
        }
    }

    pub(super) fn held_of(&self, h: Holder) -> Option<&Held> {
        match h {
            Holder::User(u) => self.users.get(&u).map(|s| &s.held),
            Holder::Item(i) => self.items_loaded.get(&i),
            Holder::Notify(u) => self.notify_loaded.get(&u),
            Holder::Live(u) => self.live_loaded.get(&u),
        }
    }

    pub(super) fn held_mut(&mut self, h: Holder) -> Option<&mut Held> {
        match h {
            Holder::User(u) => self.users.get_mut(&u).map(|s| &mut s.held),
            Holder::Item(i) => self.items_loaded.get_mut(&i),
            Holder::Notify(u) => self.notify_loaded.get_mut(&u),
            Holder::Live(u) => self.live_loaded.get_mut(&u),
        }
    }

    /// Bytes a holder's units take now (an estimate).
    pub(super) fn holder_bytes(&self, h: Holder) -> usize {
        match h {
            Holder::User(u) => self.users.get(&u).map_or(0, |s| s.bytes()),
            Holder::Item(i) => self.item_bytes(i),
            Holder::Notify(u) => self.notify.get(&u).map_or(NOTIFY_BASE, Book::approx_bytes),
            Holder::Live(u) => self.live.get(&u).map_or(LIVE_BASE, |a| LIVE_BASE + a.len() * SESSION_BYTES),
        }
    }

    pub(super) fn item_bytes(&self, id: ItemId) -> usize {
        ITEM_BASE
            + self.reposts.get(&id).map_or(0, |r| r.capacity() * 16 + r.len() * MAP_ENTRY_32)
            + if self.replies.contains_key(&id) { MAP_ENTRY_32 } else { 0 }
            + self.reactions.approx_bytes(id)
    }

    /// Drops a holder's units from the index, noting them in `gone` (and an
    /// item, whose reactions go in one pass for all, in `items`).
    pub(super) fn evict(&mut self, h: Holder, gone: &mut Vec<Unit>, items: &mut Vec<ItemId>) {
        match h {
            Holder::User(u) => {
                let Some(s) = self.users.remove(&u) else { return };
                for key in &s.inserts {
                    if let Some(Record::Insert { item, .. }) = self.records.remove(key) {
                        self.first_insert.remove(&(u, item));
                    }
                }
                for unit in [Unit::Head(u), Unit::Out(u), Unit::Followers(u), Unit::BlockedBy(u), Unit::Outbox(u)] {
                    if s.has(unit) {
                        gone.push(unit);
                    }
                }
                if s.has(Unit::Inserts(u)) {
                    gone.push(Unit::Inserts(u));
                }
            }
            Holder::Item(id) => {
                self.fresh.seen(id);
                self.items_loaded.remove(&id);
                if let Some(list) = self.reposts.remove(&id) {
                    for (user, _) in list {
                        self.repost_by.remove(&(user, id));
                    }
                }
                self.replies.remove(&id);
                items.push(id);
                gone.push(Unit::Item(id));
            }
            Holder::Notify(u) => {
                self.notify.remove(&u);
                self.notify_loaded.remove(&u);
                gone.push(Unit::Notify(u));
            }
            Holder::Live(u) => {
                if let Some(a) = self.live.remove(&u) {
                    for id in a.ids() {
                        self.session_anchor.remove(&id);
                    }
                }
                self.live_loaded.remove(&u);
                gone.push(Unit::Live(u));
            }
        }
    }

    /// Drops every loaded unit (lazy only; the caller made every write
    /// durable first, so the disk has all of them): the next reads load
    /// them again. Kept: the counters, jobs, promotions and the records and
    /// idempotency keys of writes not yet settled.
    pub fn evict_all(&mut self) {
        if !self.lazy {
            return;
        }
        self.users.clear();
        self.reposts.clear();
        self.repost_by.clear();
        self.replies.clear();
        self.items_loaded.clear();
        self.fresh.clear();
        self.first_insert.clear();
        self.records.retain(|_, r| matches!(r, Record::Item(_)));
        self.reactions = ReactionIndex::default();
        self.notify.clear();
        self.notify_loaded.clear();
        self.live.clear();
        self.live_loaded.clear();
        self.session_anchor.clear();
        self.residency.clear();
    }
}
