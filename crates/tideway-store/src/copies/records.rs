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

use crate::{Backend, CACHE_ENTRY_BYTES, Received, Record, Signal};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tideway_core::{ItemId, Key};

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
pub struct RecordCopies {
    records: quick_cache::sync::Cache<Key, (Record, u64), Weight>,
    /// The newest item epoch a page's statement answered on this node (0:
    /// none yet).
    epoch: AtomicU64,
}

impl RecordCopies {
    /// A cache of about `bytes` (at least 64 KiB).
    pub fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        let items = usize::try_from(bytes / 512).unwrap_or(usize::MAX).max(16);
        RecordCopies {
            records: quick_cache::sync::Cache::with_weighter(items, bytes, Weight),
            epoch: AtomicU64::new(0),
        }
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
                        tracing::debug!(error = %e, "record copies: the hub cannot be reached; pages check every copy")
                    }
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }
}
