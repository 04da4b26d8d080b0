//! The bounded caches of a lazy store: item records and bodies read back
//! from the journal, weighed by their stored size.

use crate::change::Record;
use tideway_core::{Body, ItemId, Key};

/// Weighs cached values by their stored size (plus the entry's own cost).
#[derive(Clone)]
pub(super) struct StoredWeight;

impl<K, T> quick_cache::Weighter<K, (T, usize)> for StoredWeight {
    fn weight(&self, _: &K, v: &(T, usize)) -> u64 {
        v.1 as u64 + 64
    }
}

type BodyCache = quick_cache::sync::Cache<ItemId, (Body, usize), StoredWeight>;
type RecordCache = quick_cache::sync::Cache<Key, (Record, usize), StoredWeight>;

/// Bytes cached by default (records and bodies).
pub const DEFAULT_BODY_CACHE: u64 = 64 << 20;

/// The caches of a lazy journal: a quarter of the bytes for
/// records (what pages filter on: small, read for every entry considered),
/// the rest for bodies (read only for the entries a page shows).
pub(super) struct Caches {
    pub(super) records: RecordCache,
    pub(super) bodies: BodyCache,
}

impl Caches {
    pub(super) fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        let (rec, body) = (bytes / 4, bytes - bytes / 4);
        // The estimates (~256 B a record, ~1 KB a body) only size the
        // caches' own indexes; the weights bound them.
        let n = |b: u64, each: u64| usize::try_from(b / each).unwrap_or(usize::MAX).max(16);
        Caches {
            records: RecordCache::with_weighter(n(rec, 256), rec, StoredWeight),
            bodies: BodyCache::with_weighter(n(body, 1024), body, StoredWeight),
        }
    }
}
