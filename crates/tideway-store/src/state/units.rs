//! Loading units: which writes skipped an unloaded unit, and installing what a load read.

use super::*;

impl State {
    /// Whether a load of `unit` that read the disk at the durable watermark
    /// `watermark` may be installed: `Some(ticket)` when a write skipped the
    /// unit after that (the load waits for `ticket` and reads again).
    pub fn skipped_since(&self, unit: Unit, watermark: Ticket) -> Option<Ticket> {
        // (writes skip an outbox as `Outbox`, whichever load reads it)
        let unit = if let Unit::OutboxAll(u) = unit { Unit::Outbox(u) } else { unit };
        let skips = self.skips.lock();
        let t = skips.at.get(&unit).copied().unwrap_or(0).max(skips.pruned);
        (t > watermark).then_some(t)
    }

    /// Notes the units a write at `ticket` skipped; prunes the skips of
    /// writes at or below `durable` when there are many.
    pub fn note_skips(&self, units: &[Unit], ticket: Ticket, durable: Ticket) {
        if units.is_empty() {
            return;
        }
        let mut skips = self.skips.lock();
        for u in units {
            let t = skips.at.entry(*u).or_insert(ticket);
            *t = (*t).max(ticket);
        }
        if skips.at.len() > SKIPS_KEPT {
            skips.at.retain(|_, t| *t > durable);
            skips.pruned = skips.pruned.max(durable);
        }
    }

    /// Notes every unit as skipped at `ticket` (everything was let go): no
    /// load that read the disk before `ticket` was durable installs.
    pub fn note_all_skipped(&self, ticket: Ticket) {
        let mut skips = self.skips.lock();
        skips.pruned = skips.pruned.max(ticket);
    }

    /// Installs a unit read from the journal (unless it is here already).
    /// Its holder comes under the budget (see [`State::evict_over_budget`]).
    pub fn install(&mut self, unit: Unit, data: UnitData) {
        if self.loaded(unit) {
            return;
        }
        if let (Unit::Item(id), UnitData::Item { reposts, replies, reactions }) = (unit, &data) {
            self.fresh.seen(id);
            for &(user, repost) in reposts {
                self.repost_by.insert((user, id), repost);
            }
            if !reposts.is_empty() {
                self.reposts.insert(id, reposts.clone());
            }
            if *replies > 0 {
                self.replies.insert(id, *replies);
            }
            for (user, kind) in reactions {
                self.reactions.set(id, *user, kind, true);
            }
            let bytes = self.item_bytes(id);
            self.items_loaded.insert(id, Held::new(true, bytes));
            self.residency.admit(Holder::Item(id), bytes);
            return;
        }
        if let (Unit::Live(u), UnitData::Live(sessions)) = (unit, &data) {
            for s in sessions {
                self.session_anchor.insert(s.id, u);
            }
            let bytes = LIVE_BASE + sessions.len() * SESSION_BYTES;
            self.live.insert(u, AnchorSessions::from_sessions(sessions.iter().cloned()));
            self.live_loaded.insert(u, Held::new(true, bytes));
            self.residency.admit(Holder::Live(u), bytes);
            return;
        }
        if let (Unit::Notify(u), UnitData::Notify { marks, groups, events }) = (unit, &data) {
            let book = Book::from_rows(*marks, groups.iter().cloned(), events.iter().cloned());
            let bytes = book.approx_bytes();
            self.notify.insert(u, book);
            self.notify_loaded.insert(u, Held::new(true, bytes));
            self.residency.admit(Holder::Notify(u), bytes);
            return;
        }
        let Some((u, bit)) = user_bit(unit) else { return };
        let is_new = !self.users.contains_key(&u);
        let s = self.users.entry(u).or_default();
        let was_loaded = s.loaded;
        s.loaded |= bit;
        match data {
            UnitData::Head(Some(head)) => {
                s.known = true;
                s.head = head;
            }
            // A user never named has nothing stored, and nothing written
            // since: every change touching a user's units loads their head
            // first, and it was not loaded. All their units are empty, so a
            // new user costs one load, not one per unit.
            UnitData::Head(None) => s.loaded = ALL,
            UnitData::Out { following, blocking, muting } => {
                let mut by_time: Vec<(Millis, UserId)> = following.iter().map(|&(t, since)| (since, t)).collect();
                by_time.sort_unstable();
                for e in following {
                    s.following.insert(e);
                }
                for e in by_time {
                    s.following_by_time.insert(e);
                }
                s.blocking = blocking.into_iter().collect();
                s.muting = muting.into_iter().collect();
            }
            UnitData::Followers(list) => {
                for e in list {
                    s.followers.insert(e);
                }
            }
            UnitData::BlockedBy(list) => s.blocked_by = list.into_iter().collect(),
            // The rest of an outbox whose tail is here: the tail has every
            // write since it loaded, the disk every key before the read
            // began, and no key leaves an outbox, so both together are all.
            UnitData::Outbox { keys, from: 0 } if s.outbox_from != 0 && was_loaded & OUTBOX != 0 => {
                s.outbox = merge_sorted(&[&s.outbox, &keys], KeyRange::ALL, Direction::Newer, usize::MAX);
                s.outbox_from = 0;
            }
            UnitData::Outbox { keys, from } => {
                s.outbox = keys;
                s.outbox_from = from;
            }
            UnitData::Inserts(list) => {
                s.inserts = list.iter().map(|(k, _)| *k).collect();
                for (key, item) in list {
                    self.records.insert(key, Record::Insert { key, user: u, item });
                    let first = self.first_insert.entry((u, item)).or_insert(key);
                    *first = (*first).min(key);
                }
            }
            UnitData::Item { .. } | UnitData::Notify { .. } | UnitData::Live(_) => {}
        }
        let s = self.users.get_mut(&u).expect("the user was just loaded");
        // Counters stored before the newest key was kept learn it once both
        // they and the outbox are here (written with them at their next change).
        if s.loaded & (HEAD | OUTBOX) == HEAD | OUTBOX {
            if s.head.newest == Head::NEWEST_UNKNOWN {
                s.head.newest = s.outbox.last().copied().unwrap_or(0);
            }
            // (a tail holds more than the newest `Head::RECENT` keys)
            s.head.learn_recent(&s.outbox);
        }
        let (was, now) = (s.held.counted, s.bytes());
        s.held = Held::new(true, now);
        if is_new {
            self.residency.admit(Holder::User(u), now);
        } else {
            self.residency.recount(was, now);
        }
    }
}
