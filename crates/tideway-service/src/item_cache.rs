//! A node's copies of item records, for nodes whose store is a round trip
//! away (SQL): a page takes the records it finds here and has them checked
//! by the call that reads its counts (`Pages::page_facts`: on PostgreSQL
//! the same statement), so it pays no round trip for them and never shows
//! a copy the store no longer has.
//!
//! What is guaranteed: a page never shows an item as it was before a
//! change (patch, delete) acknowledged before the page began, on any node.
//! Every change moves the item's `rev`, and the store's item epoch in the
//! same transaction (`PageFacts::items_epoch`). Each copy is kept with an
//! epoch it was current at: the epoch its statement answered when a page
//! checked it, or, for a record read anew, the newest epoch this node had
//! seen before the read (epochs only grow, so the record read is current
//! at that one or later). A page sends the oldest epoch of the copies it
//! takes (`PageQuery::held_at`); while the store's epoch is still that one,
//! no change was made since and the statement checks nothing; once it
//! moved, the statement names every copy whose `rev` is not the stored
//! one, and the page reads those again before it shows anything. The hub's
//! `Item` signal (sent by the node that made the change; every node forgets
//! its copy when it arrives, and every copy when signals may have been
//! lost) only makes that rare; nothing depends on it arriving. Insertion
//! records never change and need no check.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tideway_core::{ItemId, Key, UserId};
use tideway_store::{Backend, CACHE_ENTRY_BYTES, OwnRelations, Received, Record, Signal};

/// Weighs a cached record by an estimate of its memory.
#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<Key, (Record, u64)> for Weight {
    fn weight(&self, _: &Key, (r, _): &(Record, u64)) -> u64 {
        match r {
            Record::Item(_) => (CACHE_ENTRY_BYTES + r.heap_bytes()) as u64,
            Record::Insert { .. } => 64,
        }
    }
}

/// Item and insertion records by key, each with an item epoch it was
/// current at, weighed, bounded.
pub struct ItemCache {
    records: quick_cache::sync::Cache<Key, (Record, u64), Weight>,
    /// The newest item epoch a page's statement answered on this node (0:
    /// none yet).
    epoch: AtomicU64,
}

impl ItemCache {
    /// A cache of about `bytes` (at least 64 KiB).
    pub fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        let items = usize::try_from(bytes / 512).unwrap_or(usize::MAX).max(16);
        ItemCache { records: quick_cache::sync::Cache::with_weighter(items, bytes, Weight), epoch: AtomicU64::new(0) }
    }

    /// The copy of `key`'s record, if this node holds one, with the epoch
    /// it was current at.
    pub fn get(&self, key: Key) -> Option<(Record, u64)> {
        self.records.get(&key)
    }

    /// The epoch to keep records read from now on with: the newest seen.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Keeps a copy of a record read from the store after this node had
    /// seen item epoch `at` ([`Self::epoch`], taken before the read).
    pub fn put(&self, key: Key, record: &Record, at: u64) {
        self.records.insert(key, (record.clone(), at));
    }

    /// A page's statement answered item epoch `now`, having checked
    /// `copies` (each with the epoch it was kept with) and found them
    /// current: they are kept as current at `now`.
    pub fn checked(&self, now: u64, copies: &[(ItemId, u32, u64)]) {
        self.epoch.fetch_max(now, Ordering::AcqRel);
        for (id, rev, at) in copies {
            if *at < now
                && let Some((record, _)) = self.records.get(&id.0)
                && matches!(&record, Record::Item(i) if i.rev == *rev)
            {
                self.records.insert(id.0, (record, now));
            }
        }
    }

    /// Forgets the copy of an item (it changed, or may have).
    pub fn forget(&self, id: ItemId) {
        self.records.remove(&id.0);
    }

    /// Forgets every copy (changes may have been missed).
    pub fn clear(&self) {
        self.records.clear();
    }

    /// Forgets copies as the hub tells of changes, until the cache is
    /// dropped: an `Item` signal forgets that item; a lost subscription, or
    /// signals lost on the way (`Lagged`), forget everything.
    /// It holds neither the cache nor the backend (a store must close when
    /// its service goes).
    pub fn spawn_listener(self: &Arc<Self>, backend: &Arc<dyn Backend>) {
        let cache = Arc::downgrade(self);
        let backend = Arc::downgrade(backend);
        tokio::spawn(async move {
            loop {
                let Some(b) = backend.upgrade() else { return };
                let sub = b.subscribe().await;
                drop(b);
                let Some(c) = cache.upgrade() else { return };
                c.clear();
                drop(c);
                match sub {
                    Ok(mut sub) => loop {
                        let r = sub.recv().await;
                        let Some(c) = cache.upgrade() else { return };
                        match r {
                            Received::Signal(Signal::Item(id)) => c.forget(id),
                            Received::Signal(_) => {}
                            Received::Lagged => c.clear(),
                            Received::Closed => break,
                        }
                    },
                    Err(e) => {
                        tracing::debug!(error = %e, "item cache: the hub cannot be reached; pages check every copy")
                    }
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }
}

/// A node's copy of a user's followee list and own relations, at the
/// version they were read at.
#[derive(Clone)]
pub struct FolloweeCopy {
    pub version: u64,
    /// `F(u)`: whom the user follows, and the user, by id.
    pub list: Arc<[UserId]>,
    /// `None` when the engine reads none with the list (too many).
    pub own: Option<Arc<OwnRelations>>,
}

/// Weighs a copy by its ids and the slot.
#[derive(Clone)]
struct ListWeight;

impl quick_cache::Weighter<UserId, FolloweeCopy> for ListWeight {
    fn weight(&self, _: &UserId, c: &FolloweeCopy) -> u64 {
        let own = c.own.as_ref().map_or(0, |o| 64 + (o.blocks.len() + o.blocked_by.len() + o.mutes.len()) * 8);
        (96 + c.list.len() * 8 + own) as u64
    }
}

/// A node's copies of followee lists and own relations (blocks both ways,
/// mutes, whether the user has insertions), each with the version of the
/// set it was read at (`Graph::followees_versioned`), for engines that keep
/// one.
///
/// What is guaranteed: a home page never walks a followee list, nor
/// filters by own relations, older than a change of them acknowledged
/// before the page began, on any node. The page
/// takes its viewer's list here and has its version checked by the page's
/// one call (`PageQuery::followees_of`); when the version moved, the page
/// forgets the copy and begins again with the list read anew. A page that
/// writes from the list (an absent inbox rebuilt from the outboxes of
/// everyone in it) reads it anew first: a write is not undone by beginning
/// again. A follow change on this node forgets the copy at once (no second
/// walk then).
pub struct FolloweeCopies {
    lists: quick_cache::sync::Cache<UserId, FolloweeCopy, ListWeight>,
}

impl FolloweeCopies {
    /// Copies of about `bytes` (at least 64 KiB).
    pub fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        let lists = usize::try_from(bytes / 1024).unwrap_or(usize::MAX).max(16);
        FolloweeCopies { lists: quick_cache::sync::Cache::with_weighter(lists, bytes, ListWeight) }
    }

    /// The copy of `user`'s list and own relations.
    pub fn get(&self, user: UserId) -> Option<FolloweeCopy> {
        self.lists.get(&user)
    }

    pub fn put(&self, user: UserId, copy: FolloweeCopy) {
        self.lists.insert(user, copy);
    }

    /// Forgets `user`'s copy (the list changed, or may have).
    pub fn forget(&self, user: UserId) {
        self.lists.remove(&user);
    }
}

/// When this node last marked a user active (`Activity::touch`), so that a
/// page pays the mark at most once per `every` milliseconds per user (on
/// engines a round trip away). Bounded: users share slots by hash, and a
/// slot another user took only means one more mark.
pub struct RecentTouches {
    slots: Box<[parking_lot::Mutex<(UserId, i64)>]>,
    every: i64,
}

impl RecentTouches {
    const SLOTS: usize = 1 << 14;

    pub fn new(every_ms: i64) -> Self {
        RecentTouches {
            slots: (0..Self::SLOTS).map(|_| parking_lot::Mutex::new((UserId(0), i64::MIN))).collect(),
            every: every_ms.max(0),
        }
    }

    fn slot(&self, user: UserId) -> &parking_lot::Mutex<(UserId, i64)> {
        let h = user.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50;
        &self.slots[h as usize % Self::SLOTS]
    }

    /// Whether this node marked `user` within `every` before `now` (a clock
    /// gone back counts as not recent).
    pub fn recent(&self, user: UserId, now: i64) -> bool {
        let (who, at) = *self.slot(user).lock();
        who == user && now >= at && now.saturating_sub(at) < self.every
    }

    /// Notes that this node marked `user` at `now`.
    pub fn note(&self, user: UserId, now: i64) {
        *self.slot(user).lock() = (user, now);
    }
}
