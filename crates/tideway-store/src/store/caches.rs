//! The bounded cache of a lazy store: item records read back from the
//! journal or settled by a write, whole (with their bodies) where the store
//! has the body at hand, weighed by their stored size.
//!
//! One cache for records and bodies, so one lookup finds both and the bytes
//! go where the reads are: a record is read for every entry a page
//! considers, a body only for those it shows. A record read from disk comes
//! without its body (stripped); a page that shows it reads the body and
//! makes the cached record whole.
//!
//! A value read from disk is cached only if no item was updated since the
//! read began ([`Caches::updates`]): a read that started before an update
//! was applied may return the version before it, and must not be cached
//! over (or after) the update's settled record.

use crate::change::Record;
use std::sync::atomic::{AtomicU64, Ordering};
use tideway_core::Key;

/// Weighs cached values by their stored size (plus the entry's own cost).
#[derive(Clone)]
pub(super) struct StoredWeight;

impl<K, T> quick_cache::Weighter<K, (T, usize)> for StoredWeight {
    fn weight(&self, _: &K, v: &(T, usize)) -> u64 {
        v.1 as u64 + 64
    }
}

type ItemCache = quick_cache::sync::Cache<Key, (Record, usize), StoredWeight>;

/// Bytes cached by default (records and bodies).
pub const DEFAULT_BODY_CACHE: u64 = 64 << 20;

pub(super) struct Caches {
    /// Records by key, whole or stripped, with their stored size (the
    /// body's included when whole).
    pub(super) items: ItemCache,
    /// Item updates applied so far (moved under the index's write lock,
    /// before the update is journaled).
    updates: AtomicU64,
}

impl Caches {
    pub(super) fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        // The estimate (~512 B an entry) only sizes the cache's own index;
        // the weights bound it.
        let n = usize::try_from(bytes / 512).unwrap_or(usize::MAX).max(16);
        Caches { items: ItemCache::with_weighter(n, bytes, StoredWeight), updates: AtomicU64::new(0) }
    }

    /// Notes an item update about to be applied (under the write lock).
    pub(super) fn updated(&self) {
        self.updates.fetch_add(1, Ordering::AcqRel);
    }

    /// Where a disk read starts from: pass it to [`Caches::fresh`].
    pub(super) fn epoch(&self) -> u64 {
        self.updates.load(Ordering::Acquire)
    }

    /// Whether what a read begun at `epoch` found may be cached: no item
    /// was updated since. Ask under the index's read lock (a settle, under
    /// the write lock, cannot run meanwhile).
    pub(super) fn fresh(&self, epoch: u64) -> bool {
        self.updates.load(Ordering::Acquire) == epoch
    }
}
