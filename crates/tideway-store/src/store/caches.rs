//! The bounded cache of a lazy store: item records read back from the
//! journal or settled by a write, whole (with their bodies) where the store
//! has the body at hand, weighed by the memory they hold.
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

use crate::traits::{CACHE_ENTRY_BYTES, Record};
use std::sync::atomic::{AtomicU64, Ordering};
use tideway_core::Key;

/// Weighs a cached record by the memory it holds ([`resident_bytes`]), so
/// that the cache's budget is what it takes.
#[derive(Clone)]
pub(super) struct ResidentWeight;

impl quick_cache::Weighter<Key, Record> for ResidentWeight {
    fn weight(&self, _: &Key, r: &Record) -> u64 {
        resident_bytes(r) as u64
    }
}

/// The memory a cached record holds: its entry ([`CACHE_ENTRY_BYTES`])
/// and [`Record::heap_bytes`].
pub(super) fn resident_bytes(r: &Record) -> usize {
    CACHE_ENTRY_BYTES + r.heap_bytes()
}

type ItemCache = quick_cache::sync::Cache<Key, Record, ResidentWeight>;

/// The embedded store's caches by default, in all (`storage.cache_size`):
/// a quarter for the engine's blocks, the rest for records and bodies.
pub const DEFAULT_CACHE_SIZE: u64 = 128 << 20;

/// Bytes of records and bodies cached by default (the share of
/// [`DEFAULT_CACHE_SIZE`] that is not the engine's).
pub const DEFAULT_BODY_CACHE: u64 = DEFAULT_CACHE_SIZE - DEFAULT_CACHE_SIZE / 4;

pub(super) struct Caches {
    /// Records by key, whole or stripped.
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
        // (a sixteenth left to the cache's own table, and to the keys of
        // evicted records it remembers, which the weights do not count)
        let weighed = bytes - bytes / 16;
        Caches { items: ItemCache::with_weighter(n, weighed, ResidentWeight), updates: AtomicU64::new(0) }
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

#[cfg(test)]
mod tests {
    //! The weights against the allocations themselves: this test binary
    //! counts every allocation of the thread that makes it, rounded to the
    //! size class the server's allocator would give it.

    use super::*;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::Arc;
    use tideway_core::{Body, Item, ItemId, ItemKind, UserId};

    struct Counting;

    thread_local! {
        static HELD: Cell<isize> = const { Cell::new(0) };
    }

    fn note(bytes: usize, sign: isize) {
        // (`try_with`: a thread's last frees come after its locals are gone)
        let _ = HELD.try_with(|h| h.set(h.get() + sign * tideway_core::body::allocated(bytes) as isize));
    }

    // SAFETY: every call is passed on to the system allocator unchanged;
    // the counting touches only a thread-local cell.
    #[allow(unsafe_code)]
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            note(l.size(), 1);
            // SAFETY: as the caller's contract.
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            note(l.size(), -1);
            // SAFETY: as the caller's contract.
            unsafe { System.dealloc(p, l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            note(l.size(), -1);
            note(new, 1);
            // SAFETY: as the caller's contract.
            unsafe { System.realloc(p, l, new) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn held() -> isize {
        HELD.with(Cell::get)
    }

    /// A record as a page meets it: read back from its stored JSON, and
    /// made whole with its body (every third one left stripped, every
    /// seventh an insertion).
    fn record(n: u64) -> Record {
        if n.is_multiple_of(7) {
            return Record::Insert { key: n, user: UserId(n), item: ItemId(n / 2) };
        }
        let mut item = Item::new(ItemId(n), UserId(n % 1000), ItemKind::Post);
        item.tags = (0..n % 3).map(|t| format!("tag{t}")).collect();
        item.mentions = (0..n % 4).map(UserId).collect();
        let stored = serde_json::to_vec(&Item { body: crate::stripped_body(), ..item }).expect("json");
        let mut read: Item = serde_json::from_slice(&stored).expect("read");
        read.body = if n.is_multiple_of(3) {
            crate::stripped_body()
        } else {
            let text = format!(r#"{{"lang":"en","text":"{}"}}"#, "x".repeat(200 + (n % 400) as usize));
            Body::from_json(text.as_bytes()).expect("body")
        };
        Record::Item(Arc::new(read))
    }

    #[test]
    fn the_record_cache_holds_what_it_weighs() {
        const BUDGET: u64 = 8 << 20;
        let _ = crate::stripped_body(); // (allocated once, before counting)
        let before = held();
        let caches = Caches::new(BUDGET);
        for n in 0..60_000u64 {
            caches.items.insert(n, record(n));
        }
        let taken = (held() - before) as f64;
        let weighed = caches.items.weight() as f64;
        assert!(weighed <= BUDGET as f64, "weighed {weighed} over the budget");
        assert!(caches.items.len() < 60_000, "the budget let records go");
        let ratio = taken / BUDGET as f64;
        assert!((0.9..=1.1).contains(&ratio), "the cache took {taken} bytes for a budget of {BUDGET} (×{ratio:.2})");
        drop(caches);
        assert!(held() - before < 1 << 10, "what the cache took went back when it went");
    }
}
