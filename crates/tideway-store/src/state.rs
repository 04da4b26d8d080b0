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
use crate::change::{Change, Counters, EdgeKind, Head, Promotion, Record};
use crate::job_window::JobWindow;
use crate::notebook::{Book, Event, GroupHead, Row};
use crate::reactions::ReactionIndex;
use crate::residency::{Held, Holder, LOOKS_PER_PASS, Residency};
use crate::sessions::AnchorSessions;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::sync::Arc;
use tideway_core::live::Session;
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::notify::Verb;
use tideway_core::{Item, ItemId, Key, Millis, Relation, UserId};

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

    fn recount_holder(&mut self, h: Holder) {
        let Some(was) = self.held_of(h).map(|held| held.counted) else { return };
        let now = self.holder_bytes(h);
        if now != was {
            if let Some(held) = self.held_mut(h) {
                held.counted = now;
            }
            self.residency.recount(was, now);
        }
    }

    fn held_of(&self, h: Holder) -> Option<&Held> {
        match h {
            Holder::User(u) => self.users.get(&u).map(|s| &s.held),
            Holder::Item(i) => self.items_loaded.get(&i),
            Holder::Notify(u) => self.notify_loaded.get(&u),
            Holder::Live(u) => self.live_loaded.get(&u),
        }
    }

    fn held_mut(&mut self, h: Holder) -> Option<&mut Held> {
        match h {
            Holder::User(u) => self.users.get_mut(&u).map(|s| &mut s.held),
            Holder::Item(i) => self.items_loaded.get_mut(&i),
            Holder::Notify(u) => self.notify_loaded.get_mut(&u),
            Holder::Live(u) => self.live_loaded.get_mut(&u),
        }
    }

    /// Bytes a holder's units take now (an estimate).
    fn holder_bytes(&self, h: Holder) -> usize {
        match h {
            Holder::User(u) => self.users.get(&u).map_or(0, |s| s.bytes()),
            Holder::Item(i) => self.item_bytes(i),
            Holder::Notify(u) => self.notify.get(&u).map_or(NOTIFY_BASE, Book::approx_bytes),
            Holder::Live(u) => self.live.get(&u).map_or(LIVE_BASE, |a| LIVE_BASE + a.len() * SESSION_BYTES),
        }
    }

    fn item_bytes(&self, id: ItemId) -> usize {
        ITEM_BASE
            + self.reposts.get(&id).map_or(0, |r| r.capacity() * 16 + r.len() * MAP_ENTRY_32)
            + if self.replies.contains_key(&id) { MAP_ENTRY_32 } else { 0 }
            + self.reactions.approx_bytes(id)
    }

    /// Drops a holder's units from the index, noting them in `gone` (and an
    /// item, whose reactions go in one pass for all, in `items`).
    fn evict(&mut self, h: Holder, gone: &mut Vec<Unit>, items: &mut Vec<ItemId>) {
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

    /// The user's state for changing `unit`: `None` (and the unit noted as
    /// skipped) when lazy and it is not loaded.
    fn unit_mut(&mut self, unit: Unit, ap: &mut Applied) -> Option<&mut UserState> {
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
    fn head_mut(&mut self, u: UserId, ap: &mut Applied) -> &mut UserState {
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
    fn bump_max(&mut self, key: Key, ap: &mut Applied) {
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
    fn put_item(&mut self, item: Arc<Item>, prev_live: Option<bool>, ap: &mut Applied) {
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
    fn count_item(&mut self, item: &Item, delta: i64, ap: &mut Applied) {
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

    fn put_edge(&mut self, kind: EdgeKind, from: UserId, to: UserId, since: Millis, ap: &mut Applied) {
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

    fn del_edge(&mut self, kind: EdgeKind, from: UserId, to: UserId, ap: &mut Applied) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Most users block, mute and are blocked by no one: each of those sets
    /// is a word until it holds someone, and is freed when emptied.
    #[test]
    fn relation_sets_take_a_word_until_they_hold_someone() {
        assert_eq!(std::mem::size_of::<IdSet>(), 8);
        let mut set = IdSet::default();
        assert!(!set.contains(&UserId(1)) && set.is_empty() && set.heap_bytes() == 0);
        assert!(set.insert(UserId(1)) && !set.insert(UserId(1)), "a second insert is no change");
        assert!(set.insert(UserId(2)));
        assert!(set.contains(&UserId(1)) && set.contains(&UserId(2)) && !set.contains(&UserId(3)));
        assert_eq!(set.len(), 2);
        assert!(set.heap_bytes() > 0);
        assert!(!set.remove(&UserId(3)));
        assert!(set.remove(&UserId(1)) && set.contains(&UserId(2)));
        assert!(set.remove(&UserId(2)) && !set.remove(&UserId(2)));
        assert!(set.0.is_none() && set.heap_bytes() == 0, "the last one out frees the set");
        let loaded: IdSet = [UserId(4), UserId(5), UserId(4)].into_iter().collect();
        assert!(loaded.len() == 2 && loaded.contains(&UserId(5)));
        let none: IdSet = std::iter::empty().collect();
        assert!(none.0.is_none());
        // A user's state stays in the allocator's 320-byte class (it was 376
        // bytes, in the 384 class, with three empty hash sets).
        assert!(std::mem::size_of::<UserState>() <= 320, "{}", std::mem::size_of::<UserState>());
    }

    #[test]
    fn an_outbox_tail_answers_only_what_it_holds() {
        let union = |a: &[Key], b: &[Key]| merge_sorted(&[a, b], KeyRange::ALL, Direction::Newer, usize::MAX);
        assert_eq!(union(&[1, 3, 5, 9], &[2, 3, 6]), vec![1, 2, 3, 5, 6, 9]);
        assert_eq!(union(&[], &[4]), vec![4]);
        // Every key from 10 on is held (and one older, written meanwhile).
        let u = UserState { outbox: vec![2, 10, 12, 14, 16], outbox_from: 10, ..UserState::default() };
        let older =
            |below: Option<Key>, limit| u.outbox_answers(KeyRange { above: None, below }, Direction::Older, limit);
        assert!(older(None, 4) && !older(None, 5), "four keys from 10 on answer four, not five");
        assert!(older(Some(14), 2) && !older(Some(14), 3));
        assert!(!older(Some(10), 1), "below the tail nothing is known");
        let above = |a: Key, dir| u.outbox_answers(KeyRange { above: Some(a), below: None }, dir, 100);
        assert!(above(9, Direction::Newer) && above(9, Direction::Older), "every key above 9 is held");
        assert!(!above(8, Direction::Newer), "a key 9 may be missing");
        let whole = UserState { outbox: vec![1], ..UserState::default() };
        assert!(whole.outbox_answers(KeyRange::ALL, Direction::Newer, 100));
    }
    use tideway_core::{ItemKind, Visibility};

    #[test]
    fn fresh_items_are_the_latest_above_the_floor() {
        let mut f = FreshItems::above(10);
        f.created(ItemId(10));
        assert!(!f.contains(ItemId(10)), "at the floor: its unit may be on disk");
        let n = 2 * FRESH_KEPT as u64 + 100;
        for i in 11..=n {
            f.created(ItemId(i));
        }
        assert!(f.contains(ItemId(n)) && f.contains(ItemId(n + 1 - FRESH_KEPT as u64)), "the latest generation");
        assert!(!f.contains(ItemId(11)), "the oldest are forgotten");
        assert!(f.ids.len() + f.older.len() <= 2 * FRESH_KEPT);
        f.seen(ItemId(n + 5));
        assert!(f.contains(ItemId(n)), "another item's unit seen: this one is still empty");
        f.seen(ItemId(n));
        assert!(!f.contains(ItemId(n)), "its own unit seen");
        f.created(ItemId(n + 3));
        assert!(!f.contains(ItemId(n + 3)), "below the risen floor");
        f.created(ItemId(n + 6));
        assert!(f.contains(ItemId(n + 6)));
    }

    fn item(id: u64, author: u64, repost_of: Option<u64>) -> Arc<Item> {
        Arc::new(Item {
            id: ItemId(id),
            author: UserId(author),
            kind: if repost_of.is_some() { ItemKind::Repost } else { ItemKind::Post },
            body: tideway_core::Body::default(),
            visibility: Visibility::Public,
            tags: vec![],
            mentions: vec![],
            object: None,
            repost_of: repost_of.map(ItemId),
            reply_to: None,
            reply_to_author: None,
            idempotency_key: None,
            deleted: false,
            rev: 0,
        })
    }

    fn apply(s: &mut State, c: Change) -> Applied {
        let mut ap = Applied::default();
        s.apply(c, &mut ap);
        ap
    }

    #[test]
    fn applying_twice_is_the_same_as_once() {
        let changes = vec![
            Change::PutItem(item(1, 1, None)),
            Change::PutItem(item(2, 2, Some(1))),
            Change::PutEdge { kind: EdgeKind::Follow, from: UserId(3), to: UserId(1), since: Millis(5) },
        ];
        let mut once = State::eager();
        let mut twice = State::eager();
        for c in &changes {
            apply(&mut once, c.clone());
            apply(&mut twice, c.clone());
            apply(&mut twice, c.clone());
        }
        assert_eq!(once.counters, twice.counters);
        assert_eq!(twice.counters.items_live, 2);
        assert_eq!(twice.counters.users, 3);
        let mut recent = [0; Head::RECENT];
        recent[0] = 1;
        assert_eq!(
            twice.users[&UserId(1)].head,
            Head { following: 0, followers: 1, items: 1, newest: 1, recent, recent_len: 1 }
        );
        assert_eq!(twice.reposts.get(&ItemId(1)).map(Vec::len), Some(1));
        assert_eq!(twice.users[&UserId(1)].outbox, vec![1]);
    }

    #[test]
    fn deleting_a_repost_removes_it_from_the_index() {
        let mut s = State::eager();
        apply(&mut s, Change::PutItem(item(1, 1, None)));
        apply(&mut s, Change::PutItem(item(2, 2, Some(1))));
        let mut gone = (*item(2, 2, Some(1))).clone();
        gone.deleted = true;
        apply(&mut s, Change::PutItem(Arc::new(gone)));
        assert!(!s.reposts.contains_key(&ItemId(1)));
        assert!(!s.repost_by.contains_key(&(UserId(2), ItemId(1))));
        assert_eq!(s.counters.items_live, 1);
        assert_eq!(s.users[&UserId(2)].outbox, vec![2], "a tombstone keeps its outbox place");
    }

    #[test]
    fn a_lazy_index_skips_what_is_not_loaded_and_notes_it() {
        let mut s = State::lazy(Counters { users: 2, ..Counters::default() }, JobWindow::default(), vec![]);
        for u in [1, 3] {
            s.install(Unit::Head(UserId(u)), UnitData::Head(Some(Head::default())));
        }
        s.install(Unit::Out(UserId(3)), UnitData::Out { following: vec![], blocking: vec![], muting: vec![] });
        let follow = Change::PutEdge { kind: EdgeKind::Follow, from: UserId(3), to: UserId(1), since: Millis(5) };
        let mut need = Vec::new();
        s.required(std::slice::from_ref(&follow), &mut need);
        assert!(need.is_empty(), "{need:?}");
        let ap = apply(&mut s, follow);
        assert_eq!(ap.skipped, vec![Unit::Followers(UserId(1))], "the followee's followers are not loaded");
        assert_eq!(s.users[&UserId(1)].head.followers, 1, "its counters are");
        assert_eq!(s.counters.users, 2, "both were known");
        let derived = s.derived(&ap);
        assert!(derived.contains(&Change::PutHead(UserId(1), Head { followers: 1, ..Head::default() })));
        assert!(derived.contains(&Change::PutCounters(s.counters)));

        s.note_skips(&ap.skipped, 7, 6);
        assert_eq!(s.skipped_since(Unit::Followers(UserId(1)), 6), Some(7), "a load that read before 7 retries");
        assert_eq!(s.skipped_since(Unit::Followers(UserId(1)), 7), None, "one that read after installs");
        assert_eq!(s.skipped_since(Unit::Followers(UserId(2)), 0), None);
        let mut need = Vec::new();
        assert!(s.user_or_need(Unit::Followers(UserId(1)), &mut need).is_none());
        assert_eq!(need, vec![Unit::Followers(UserId(1))]);
    }

    #[test]
    fn a_user_never_named_has_every_unit_loaded_with_their_head() {
        let mut s = State::lazy(Counters::default(), JobWindow::default(), vec![]);
        s.install(Unit::Head(UserId(9)), UnitData::Head(None));
        for unit in
            [Unit::Out(UserId(9)), Unit::Followers(UserId(9)), Unit::Outbox(UserId(9)), Unit::Inserts(UserId(9))]
        {
            assert!(s.loaded(unit), "{unit:?}");
        }
        assert!(!s.users[&UserId(9)].known, "not counted until a change names them");
        let ap =
            apply(&mut s, Change::PutEdge { kind: EdgeKind::Mute, from: UserId(9), to: UserId(9), since: Millis(1) });
        assert!(ap.skipped.is_empty());
        assert_eq!(s.counters.users, 1);
    }

    #[test]
    fn over_the_budget_what_was_not_used_since_the_last_pass_goes() {
        let mut s = State::lazy(Counters::default(), JobWindow::default(), vec![]);
        s.set_budget(1);
        let users: Vec<UserId> = (1..=10).map(UserId).collect();
        for &u in &users {
            s.install(Unit::Head(u), UnitData::Head(Some(Head::default())));
            s.install(Unit::Outbox(u), UnitData::Outbox { keys: vec![u.0 << 22], from: 0 });
        }
        let with_item = ItemId(77);
        s.install(
            Unit::Item(with_item),
            UnitData::Item {
                reposts: vec![(UserId(5), ItemId(78))],
                replies: 2,
                reactions: vec![(UserId(6), "like".into())],
            },
        );
        let (bytes, holders, _) = s.residency();
        assert_eq!(holders, 11);
        assert!(bytes > 11 * 48, "{bytes}");
        // What a call loaded itself is never let go by that call.
        assert!(s.evict_over_budget(0).is_empty());
        // Everything was just loaded (marked): the first pass only unmarks.
        let mark = s.residency_mark();
        assert!(s.evict_over_budget(mark).is_empty());
        // A read uses user 3 and the item; the next pass lets the rest go.
        let mut need = Vec::new();
        assert!(s.user_or_need(Unit::Outbox(UserId(3)), &mut need).is_some());
        assert!(s.item_or_need(with_item, &mut need) && need.is_empty());
        let mark = s.residency_mark();
        let gone = s.evict_over_budget(mark);
        assert_eq!(gone.len(), 9 * 2, "head and outbox of nine users: {gone:?}");
        assert!(gone.contains(&Unit::Outbox(UserId(1))) && !gone.contains(&Unit::Outbox(UserId(3))));
        assert!(s.loaded(Unit::Outbox(UserId(3))) && !s.loaded(Unit::Head(UserId(4))));
        // Not used again: the pass after lets the item go, with its reposts,
        // replies and reactions.
        let mark = s.residency_mark();
        let gone = s.evict_over_budget(mark);
        let mark = s.residency_mark();
        let gone: Vec<Unit> = gone.into_iter().chain(s.evict_over_budget(mark)).collect();
        assert!(gone.contains(&Unit::Item(with_item)), "{gone:?}");
        assert!(s.reposts.is_empty() && s.repost_by.is_empty() && s.replies.is_empty());
        assert!(s.reactions.counts(with_item).is_empty());
        assert_eq!(s.residency().1, 0, "nothing left");
        assert_eq!(s.residency().0, 0, "and no bytes counted");
        assert_eq!(s.residency().2, 11, "eleven holders let go");
    }

    #[test]
    fn pruned_skips_make_older_loads_retry() {
        let s = State::lazy(Counters::default(), JobWindow::default(), vec![]);
        let units: Vec<Unit> = (0..=SKIPS_KEPT as u64).map(|u| Unit::Outbox(UserId(u))).collect();
        s.note_skips(&units, 10, 10);
        assert_eq!(s.skipped_since(Unit::Outbox(UserId(1)), 9), Some(10), "pruned, but a load from before retries");
        assert_eq!(s.skipped_since(Unit::Outbox(UserId(1)), 10), None);
    }
}
