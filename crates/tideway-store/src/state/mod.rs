//! The in-memory index: edges, jobs and the per-item keys and counters the
//! feeds read, organised for those reads. It changes only through
//! [`State::apply`] (every write) and [`State::install`] (a unit loaded from
//! a lazy journal).
//!
//! **Eager** (the in-memory backend): everything is here, item records
//! whole, and every [`Unit`] counts as loaded.
//!
//! **Lazy** (a journal that keeps everything, the embedded store): the index
//! starts empty but for a few store-wide counters, the pending fan-out jobs
//! and the promotions, and loads each [`Unit`] — a user's counters, out
//! edges, followers, blockers, outbox or insertions; an item's reposts,
//! replies and reactions — the first time a read or a write needs it, so
//! start-up does not grow with the data. An item record is held only from
//! its write until it is durable; then the journal and a bounded cache
//! serve it.
//!
//! **Loads never miss a write.** A write applies to the units that are
//! loaded and *skips* the others, noting the journal ticket of the write
//! (`skips`); the disk will have the change once that ticket is durable. A
//! load reads the disk, then installs its unit under the write lock only if
//! no change to the unit was skipped after the durable watermark it read
//! under; otherwise it waits for that ticket and reads again. Writes never
//! skip what their own rules read, nor the counters of the users they
//! touch ([`Unit::Head`]): a write first loads those units
//! ([`State::required`]).

use crate::blocks::SortedBlocks;
use crate::change::{Change, Counters, EdgeKind, Head};
use crate::job_window::JobWindow;
use crate::notebook::{Book, Event, GroupHead, Row};
use crate::reactions::ReactionIndex;
use crate::residency::{Held, Holder, LOOKS_PER_PASS, Residency};
use crate::sessions::AnchorSessions;
use crate::traits::{Promotion, Record};
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::sync::Arc;
use tideway_core::live::Session;
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::notify::Verb;
use tideway_core::{Item, ItemId, Key, Millis, Relation, UserId};

mod apply;
mod budget;
mod units;

/// A position in the journal: what a write must wait for to be durable.
pub type Ticket = u64;

/// A part of the index that a lazy backend loads on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    /// A user's counters (following, followers, live items) and whether the
    /// user is known at all.
    Head(UserId),
    /// Whom a user follows (by id and by time), blocks and mutes.
    Out(UserId),
    /// A user's followers, by time of follow.
    Followers(UserId),
    /// Who blocks a user.
    BlockedBy(UserId),
    /// The keys a user authored: the newest [`OUTBOX_TAIL`] of them, or all
    /// when there are no more (what a first page or a rebuild reads).
    Outbox(UserId),
    /// All the keys a user authored (a read deeper than the tail held). It
    /// is the same unit as [`Unit::Outbox`] to writes, skips and evictions.
    OutboxAll(UserId),
    /// Insertions into a user's home.
    Inserts(UserId),
    /// An item's live reposts, live replies and reactions.
    Item(ItemId),
    /// A user's notifications (their [`Book`]).
    Notify(UserId),
    /// An anchor's live sessions.
    Live(UserId),
}

/// A unit as read from the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum UnitData {
    /// `None`: the user was never named.
    Head(Option<Head>),
    Out {
        following: Vec<(UserId, Millis)>,
        blocking: Vec<UserId>,
        muting: Vec<UserId>,
    },
    /// Ascending by (since, id).
    Followers(Vec<(Millis, UserId)>),
    BlockedBy(Vec<UserId>),
    /// Ascending: every key of the outbox from `from` on (0: all of them).
    Outbox {
        keys: Vec<Key>,
        from: Key,
    },
    /// (insertion key, item), ascending by key.
    Inserts(Vec<(Key, ItemId)>),
    Item {
        reposts: Vec<(UserId, ItemId)>,
        replies: u64,
        reactions: Vec<(UserId, String)>,
    },
    /// A book's rows: the marks (if ever moved), groups and events.
    Notify {
        marks: Option<(Millis, Millis)>,
        groups: Vec<(u64, GroupHead)>,
        events: Vec<(Verb, UserId, Event)>,
    },
    /// An anchor's sessions, any order.
    Live(Vec<Session>),
}

impl UnitData {
    /// The unit of a user or item that has nothing stored.
    pub fn empty(unit: Unit) -> Self {
        match unit {
            Unit::Head(_) => UnitData::Head(None),
            Unit::Out(_) => UnitData::Out { following: vec![], blocking: vec![], muting: vec![] },
            Unit::Followers(_) => UnitData::Followers(vec![]),
            Unit::BlockedBy(_) => UnitData::BlockedBy(vec![]),
            Unit::Outbox(_) | Unit::OutboxAll(_) => UnitData::Outbox { keys: vec![], from: 0 },
            Unit::Inserts(_) => UnitData::Inserts(vec![]),
            Unit::Item(_) => UnitData::Item { reposts: vec![], replies: 0, reactions: vec![] },
            Unit::Notify(_) => UnitData::Notify { marks: None, groups: vec![], events: vec![] },
            Unit::Live(_) => UnitData::Live(vec![]),
        }
    }
}

/// The newest keys of an outbox that [`Unit::Outbox`] loads: more than a
/// rebuild (100) or a page (at most 100) takes, so those never read past
/// them. An outbox of the Twitter graph's most followed author holds
/// ~19,000 keys at 10M items, and a first page loaded them all; a tail of
/// 256 was read at twice the cost of this one for the same pages.
pub const OUTBOX_TAIL: usize = 128;

/// Followers a user may have for the set to be loaded whole; a bigger one
/// stays on disk and is read a page (a list page, a fan-out chunk) at a time.
pub const FOLLOWERS_LOADED_WHOLE: u64 = 100_000;

const HEAD: u8 = 1;
const OUT: u8 = 2;
const FOLLOWERS: u8 = 4;
const BLOCKED_BY: u8 = 8;
const OUTBOX: u8 = 16;
const INSERTS: u8 = 32;
const ALL: u8 = 63;

fn user_bit(unit: Unit) -> Option<(UserId, u8)> {
    match unit {
        Unit::Head(u) => Some((u, HEAD)),
        Unit::Out(u) => Some((u, OUT)),
        Unit::Followers(u) => Some((u, FOLLOWERS)),
        Unit::BlockedBy(u) => Some((u, BLOCKED_BY)),
        Unit::Outbox(u) | Unit::OutboxAll(u) => Some((u, OUTBOX)),
        Unit::Inserts(u) => Some((u, INSERTS)),
        Unit::Item(_) | Unit::Notify(_) | Unit::Live(_) => None,
    }
}

/// Estimated bytes of what the index holds (for the budget: map slots,
/// the structs, the elements of their collections).
const MAP_ENTRY_32: usize = 40;
const ITEM_BASE: usize = 48;
const NOTIFY_BASE: usize = 256;
const LIVE_BASE: usize = 128;
const SESSION_BYTES: usize = std::mem::size_of::<Session>() + 64;
/// An insertion: its key in the user's list, its record and its first-
/// insert entry.
const INSERT_BYTES: usize = 8 + std::mem::size_of::<(Key, Record)>() + 8 + MAP_ENTRY_32;

/// Everything known about one user (the loaded parts of it, when lazy).
#[derive(Debug, Default)]
pub struct UserState {
    /// Which units of this user are here (all of them when eager).
    loaded: u8,
    /// Named by some change (counted in the store's users).
    pub known: bool,
    /// Following, followers and live items authored.
    pub head: Head,
    /// Whom this user follows, by id, with the time of each follow.
    pub following: SortedBlocks<(UserId, Millis)>,
    /// The same follows ordered by time, for the following list.
    pub following_by_time: SortedBlocks<(Millis, UserId)>,
    /// Followers ordered by time of follow: the followers list pages it
    /// newest first and fan-out chunks walk it oldest first with a
    /// resumable `(since, id)` cursor. Whether `other` follows this user is
    /// answered by `other`'s `following`, so no id-ordered copy is kept.
    pub followers: SortedBlocks<(Millis, UserId)>,
    pub blocking: IdSet,
    pub blocked_by: IdSet,
    pub muting: IdSet,
    /// Keys of the items this user authored (reposts included), ascending:
    /// every one from `outbox_from` on (0: all; see [`UserState::outbox_answers`]).
    pub outbox: Vec<Key>,
    pub outbox_from: Key,
    /// Insertion keys into this user's home, ascending.
    pub inserts: Vec<Key>,
    /// Lazy: this user's mark and counted bytes under the index's budget.
    held: Held,
}

/// A set of users that is usually empty (whom a user blocks or mutes, who
/// blocks them): one word until it holds someone, against the 32 bytes of
/// an empty hash set, for each of the three sets of every user loaded.
#[derive(Debug, Default)]
pub struct IdSet(Option<Box<FxHashSet<UserId>>>);

impl IdSet {
    pub fn contains(&self, id: &UserId) -> bool {
        self.0.as_ref().is_some_and(|s| s.contains(id))
    }

    pub fn insert(&mut self, id: UserId) -> bool {
        self.0.get_or_insert_default().insert(id)
    }

    /// Removes `id`; the last one out frees the set.
    pub fn remove(&mut self, id: &UserId) -> bool {
        let Some(set) = &mut self.0 else { return false };
        let removed = set.remove(id);
        if set.is_empty() {
            self.0 = None;
        }
        removed
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.len())
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes it takes (an estimate: the box, and a slot and a control
    /// byte per entry of capacity).
    pub fn heap_bytes(&self) -> usize {
        self.0.as_ref().map_or(0, |s| std::mem::size_of::<FxHashSet<UserId>>() + s.capacity() * 9)
    }
}

impl FromIterator<UserId> for IdSet {
    fn from_iter<I: IntoIterator<Item = UserId>>(iter: I) -> Self {
        let set: FxHashSet<UserId> = iter.into_iter().collect();
        Self((!set.is_empty()).then(|| Box::new(set)))
    }
}

/// What applying a batch of changes did beside the index itself: the users
/// whose counters changed and the units it skipped (lazy), so the store can
/// persist the counters and note the skips.
#[derive(Debug, Default)]
pub struct Applied {
    pub heads: Vec<UserId>,
    pub counters: bool,
    pub skipped: Vec<Unit>,
    /// What notification changes wrote (a lazy journal keeps them).
    pub notes: Vec<Row>,
}

/// The whole in-memory index.
#[derive(Debug, Default)]
pub struct State {
    /// Units are loaded on first use from a journal that keeps everything
    /// (see the module docs); item records stay in the journal.
    pub lazy: bool,
    /// Home insertions, and items (all of them, or, when lazy, only those
    /// not yet durable).
    pub records: FxHashMap<Key, Record>,
    /// Boxed: a user's state is a few hundred bytes, and the map grows by
    /// doubling under the write lock, where a rehash moves every slot (and
    /// the kernel zeroes the new table's pages); 16 bytes a slot keep that
    /// stall short whatever the number of users loaded.
    pub users: FxHashMap<UserId, Box<UserState>>,
    /// Non-deleted reposts of each original.
    pub reposts: FxHashMap<ItemId, Vec<(UserId, ItemId)>>,
    /// The non-deleted repost of an original by a user.
    pub repost_by: FxHashMap<(UserId, ItemId), ItemId>,
    /// Non-deleted replies to each item.
    pub replies: FxHashMap<ItemId, u64>,
    /// Items whose reposts, replies and reactions are loaded (lazy only).
    pub items_loaded: FxHashMap<ItemId, Held>,
    /// Idempotency keys (eager: all; lazy: those not yet durable).
    pub idempotency: FxHashMap<(UserId, String), ItemId>,
    /// The earliest insertion key of an item into a user's home.
    pub first_insert: FxHashMap<(UserId, ItemId), Key>,
    /// Pending fan-out jobs (lazy: a window of them, the rest on disk).
    pub jobs: JobWindow,
    /// Store-wide counters.
    pub counters: Counters,
    /// Reactions, with their own sharded locks (changed under a read lock of
    /// the state, so a hot item does not serialise on the state lock).
    pub reactions: ReactionIndex,
    pub promotions: BTreeMap<Key, Promotion>,
    /// Postings by feed id, ascending (eager only: a lazy index reads them
    /// from the journal's disk by range, as feeds can be very long).
    pub postings: FxHashMap<u64, Vec<Key>>,
    /// Each user's notifications (lazy: those loaded, in `notify_loaded`).
    pub notify: FxHashMap<UserId, Book>,
    pub notify_loaded: FxHashMap<UserId, Held>,
    /// Each anchor's live sessions (lazy: those loaded, in `live_loaded`),
    /// and the anchor of every session held.
    pub live: FxHashMap<UserId, AnchorSessions>,
    pub live_loaded: FxHashMap<UserId, Held>,
    pub session_anchor: FxHashMap<u64, UserId>,
    /// Lazy: the ticket of the latest write that skipped each unit because
    /// it was not loaded (a mutex: reactions write under the read lock).
    skips: Mutex<Skips>,
    /// Lazy: the holders of loaded units, under a byte budget.
    residency: Residency,
    /// Lazy: items written by this process whose units are empty.
    fresh: FreshItems,
}

/// Items created by this process whose reposts, replies and reactions are
/// known to be none without reading the disk (a lazy index). An item created
/// above `floor` starts with none; `floor` is at least the highest item id
/// with any of them stored when the process opened the disk, and rises to
/// every item id whose unit this process loads, skips or lets go, so an id
/// is taken as fresh only when nothing of its unit can be anywhere but in
/// the index. The first write to a fresh item's unit makes it a loaded unit
/// like any other (a holder under the budget). The latest [`FRESH_KEPT`] to
/// twice that many ids are kept (two generations, about 2.5 MiB at most);
/// older ones are forgotten, and load as before.
#[derive(Debug)]
pub struct FreshItems {
    floor: u64,
    ids: FxHashSet<ItemId>,
    older: FxHashSet<ItemId>,
}

/// Fresh item ids of one generation.
pub const FRESH_KEPT: usize = 1 << 16;

impl Default for FreshItems {
    /// Knows of none until the disk's floor is set.
    fn default() -> Self {
        Self::above(u64::MAX)
    }
}

impl FreshItems {
    fn above(floor: u64) -> Self {
        Self { floor, ids: Default::default(), older: Default::default() }
    }

    fn created(&mut self, id: ItemId) {
        if id.0 > self.floor {
            if self.ids.len() >= FRESH_KEPT {
                self.older = std::mem::take(&mut self.ids);
            }
            self.ids.insert(id);
        }
    }

    fn contains(&self, id: ItemId) -> bool {
        self.ids.contains(&id) || self.older.contains(&id)
    }

    /// Forgets `id`; whether it was fresh.
    fn remove(&mut self, id: ItemId) -> bool {
        self.ids.remove(&id) | self.older.remove(&id)
    }

    fn clear(&mut self) {
        self.ids.clear();
        self.older.clear();
    }

    /// `id`'s unit is being read, skipped or let go: it may be on disk.
    fn seen(&mut self, id: ItemId) {
        self.floor = self.floor.max(id.0);
        self.remove(id);
    }
}

/// Skipped units, pruned once their writes are durable.
#[derive(Debug, Default)]
struct Skips {
    at: FxHashMap<Unit, Ticket>,
    /// Entries at or below this ticket were pruned.
    pruned: Ticket,
}

/// Skips kept before pruning the durable ones.
const SKIPS_KEPT: usize = 4096;

fn insert_sorted(v: &mut Vec<Key>, k: Key) {
    match v.last() {
        Some(&last) if k > last => v.push(k),
        None => v.push(k),
        _ => {
            if let Err(pos) = v.binary_search(&k) {
                v.insert(pos, k);
            }
        }
    }
}

impl UserState {
    /// When this user followed `other`, if they do.
    pub fn follows(&self, other: UserId) -> Option<Millis> {
        self.following.get_by(|e| e.0.cmp(&other)).map(|e| e.1)
    }

    /// Drops the follow of `other` from this user's side; its time if any.
    fn unfollow(&mut self, other: UserId) -> Option<Millis> {
        let (_, since) = self.following.remove_by(|e| e.0.cmp(&other))?;
        self.following_by_time.remove(&(since, other));
        Some(since)
    }

    /// Heap bytes of this user's follow edges (both directions).
    pub fn graph_bytes(&self) -> usize {
        self.following.heap_bytes() + self.following_by_time.heap_bytes() + self.followers.heap_bytes()
    }

    /// Bytes this user's loaded units take (an estimate).
    fn bytes(&self) -> usize {
        // (the boxed state, as the allocator rounds it, and the map's slot:
        // key and box)
        std::mem::size_of::<Self>().next_multiple_of(64)
            + 16
            + self.graph_bytes()
            + self.blocking.heap_bytes()
            + self.blocked_by.heap_bytes()
            + self.muting.heap_bytes()
            + self.outbox.capacity() * 8
            + self.inserts.capacity() * INSERT_BYTES
    }

    /// Whether a unit of this user is here.
    pub fn has(&self, unit: Unit) -> bool {
        user_bit(unit).is_some_and(|(_, bit)| self.holds(unit, bit))
    }

    /// Whether `unit`, of bit `bit`, is here: the whole outbox is
    /// [`Unit::OutboxAll`], its tail is not.
    fn holds(&self, unit: Unit, bit: u8) -> bool {
        self.loaded & bit != 0 && !(matches!(unit, Unit::OutboxAll(_)) && self.outbox_from != 0)
    }

    /// Whether the outbox held answers a merge's `range`, `dir` and `limit`
    /// as the whole outbox would: all of it is here, or every key of the
    /// range is, or (newest first) `limit` keys of the range from
    /// `outbox_from` on are (an older key never comes before them).
    pub fn outbox_answers(&self, range: KeyRange, dir: Direction, limit: usize) -> bool {
        let from = self.outbox_from;
        from == 0
            || range.above.is_some_and(|a| a.saturating_add(1) >= from)
            || (dir == Direction::Older && {
                let held = range.slice_of(&self.outbox);
                held.len() - held.partition_point(|&k| k < from) >= limit
            })
    }
}

impl State {
    /// An empty eager index (the in-memory backend).
    pub fn eager() -> Self {
        Self::default()
    }

    /// A lazy index that starts from the store-wide counters, a window of
    /// the pending jobs and the promotions (everything else loads on first
    /// use).
    pub fn lazy(counters: Counters, jobs: JobWindow, promotions: Vec<Promotion>) -> Self {
        Self {
            lazy: true,
            counters,
            jobs,
            promotions: promotions.into_iter().map(|p| (p.id, p)).collect(),
            ..Self::default()
        }
    }

    /// Heap bytes of the follow graph (walks every user: for reports, not
    /// for hot paths).
    pub fn graph_bytes(&self) -> usize {
        self.users.values().map(|s| s.graph_bytes()).sum()
    }

    /// Whether `unit` is here (always, when eager).
    pub fn loaded(&self, unit: Unit) -> bool {
        if !self.lazy {
            return true;
        }
        let held = match unit {
            Unit::Item(i) if self.fresh.contains(i) => return true,
            Unit::Item(i) => self.items_loaded.get(&i),
            Unit::Notify(u) => self.notify_loaded.get(&u),
            Unit::Live(u) => self.live_loaded.get(&u),
            _ => {
                return user_bit(unit).is_some_and(|(u, bit)| {
                    self.users.get(&u).is_some_and(|s| {
                        s.held.touch();
                        s.holds(unit, bit)
                    })
                });
            }
        };
        held.inspect(|h| h.touch()).is_some()
    }

    /// Sets the highest item id with reposts, replies or reactions stored
    /// ([`FreshItems`]; the disk's `item_units_floor` at open).
    pub fn set_fresh_floor(&mut self, floor: u64) {
        self.fresh = FreshItems::above(floor);
    }

    /// Whether `id` is a fresh item ([`FreshItems`]): its unit is empty and
    /// not yet a holder; a write to it calls [`State::hold_fresh`] first.
    pub fn is_fresh(&self, id: ItemId) -> bool {
        self.fresh.contains(id)
    }

    /// Makes a fresh item's (empty) unit a loaded one, under the budget.
    pub fn hold_fresh(&mut self, id: ItemId) {
        if self.fresh.remove(id) && !self.items_loaded.contains_key(&id) {
            let bytes = self.item_bytes(id);
            self.items_loaded.insert(id, Held::new(true, bytes));
            self.residency.admit(Holder::Item(id), bytes);
        }
    }

    /// `u`'s state for reading `unit`: `Ok(None)` when it is loaded and
    /// empty; `Err(unit)` when it must be loaded first.
    pub fn user_for(&self, unit: Unit) -> Result<Option<&UserState>, Unit> {
        let Some((u, bit)) = user_bit(unit) else { return Err(unit) };
        match self.users.get(&u) {
            Some(s) if !self.lazy => Ok(Some(s)),
            Some(s) if s.holds(unit, bit) => {
                s.held.touch();
                Ok(Some(s))
            }
            None if !self.lazy => Ok(None),
            _ => Err(unit),
        }
    }

    /// Like [`State::user_for`], noting a missing unit in `need`.
    pub fn user_or_need(&self, unit: Unit, need: &mut Vec<Unit>) -> Option<&UserState> {
        self.user_for(unit).unwrap_or_else(|u| {
            need.push(u);
            None
        })
    }

    /// Whether an item's reposts, replies and reactions are here, noting it
    /// in `need` when not.
    pub fn item_or_need(&self, id: ItemId, need: &mut Vec<Unit>) -> bool {
        let here = self.loaded(Unit::Item(id));
        if !here {
            need.push(Unit::Item(id));
        }
        here
    }

    pub fn item(&self, id: ItemId) -> Option<&Arc<Item>> {
        match self.records.get(&id.0) {
            Some(Record::Item(i)) => Some(i),
            _ => None,
        }
    }

    /// Whether an edge exists, as `from`'s out edges say (noting them in
    /// `need` when they are not loaded).
    pub fn has_edge(&self, kind: EdgeKind, from: UserId, to: UserId, need: &mut Vec<Unit>) -> bool {
        self.user_or_need(Unit::Out(from), need).is_some_and(|s| match kind {
            EdgeKind::Follow => s.follows(to).is_some(),
            EdgeKind::Block => s.blocking.contains(&to),
            EdgeKind::Mute => s.muting.contains(&to),
        })
    }

    pub fn follow_since(&self, from: UserId, to: UserId, need: &mut Vec<Unit>) -> Option<Millis> {
        self.user_or_need(Unit::Out(from), need).and_then(|s| s.follows(to))
    }

    /// `u`'s relation to `other`, all but `followed_by` (which is `other`'s
    /// side: see [`State::followed_by`]).
    pub fn relation_of(&self, u: UserId, other: UserId, need: &mut Vec<Unit>) -> Relation {
        let out = self.user_or_need(Unit::Out(u), need);
        let blocked_by = self.user_or_need(Unit::BlockedBy(u), need).is_some_and(|s| s.blocked_by.contains(&other));
        Relation {
            following: out.is_some_and(|s| s.follows(other).is_some()),
            followed_by: false,
            blocking: out.is_some_and(|s| s.blocking.contains(&other)),
            blocked_by,
            muting: out.is_some_and(|s| s.muting.contains(&other)),
        }
    }

    /// Whether `other` follows `u`: `Err` when `other`'s out edges are not
    /// loaded (a lazy store then reads that one edge from disk).
    pub fn followed_by(&self, u: UserId, other: UserId) -> Result<bool, Unit> {
        self.user_for(Unit::Out(other)).map(|s| s.is_some_and(|s| s.follows(u).is_some()))
    }

    /// The units a batch of changes must find loaded before it is applied:
    /// the counters of every user it names, and the out edges a follow
    /// change counts from.
    pub fn required(&self, changes: &[Change], need: &mut Vec<Unit>) {
        if !self.lazy {
            return;
        }
        let mut want = |unit: Unit| {
            if !self.loaded(unit) {
                need.push(unit);
            }
        };
        for c in changes {
            match c {
                Change::PutItem(i) | Change::UpdateItem(i) => want(Unit::Head(i.author)),
                Change::PutInsert { user, .. } => want(Unit::Head(*user)),
                // A book, and what says who is hidden from its user.
                Change::Notify(op) => {
                    let u = op.user();
                    want(Unit::Notify(u));
                    want(Unit::Out(u));
                    want(Unit::BlockedBy(u));
                }
                Change::NotifyMark { user, .. } => want(Unit::Notify(*user)),
                Change::PutSession(s) => want(Unit::Live(s.anchor)),
                Change::PutEdge { kind, from, to, .. } | Change::DelEdge { kind, from, to, .. } => {
                    want(Unit::Head(*from));
                    want(Unit::Head(*to));
                    if *kind == EdgeKind::Follow {
                        want(Unit::Out(*from));
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
