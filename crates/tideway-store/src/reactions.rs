//! Reactions: who reacted to what, and the counts, without one lock per item.
//!
//! Membership (item, user) → kinds is sharded by the pair, so thousands of
//! users liking one hot item spread over every shard. Counts are atomics per
//! (item, kind), found under a shared read lock and bumped with `fetch_add`,
//! so concurrent likes of one item never wait on each other here; they share
//! only the journal (one engine log, fsyncs grouped across writers).

use parking_lot::{Mutex, MutexGuard, RwLock};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use tideway_core::{ItemId, UserId};

const SHARDS: usize = 64;

/// The counters of one item, one per kind ever used on it.
#[derive(Debug, Default)]
struct ItemCounters {
    kinds: RwLock<Vec<(String, AtomicI64)>>,
}

impl ItemCounters {
    fn add(&self, kind: &str, delta: i64) {
        {
            let kinds = self.kinds.read();
            if let Some((_, c)) = kinds.iter().find(|(k, _)| k == kind) {
                c.fetch_add(delta, Ordering::Relaxed);
                return;
            }
        }
        let mut kinds = self.kinds.write();
        match kinds.iter().find(|(k, _)| k == kind) {
            Some((_, c)) => {
                c.fetch_add(delta, Ordering::Relaxed);
            }
            None => kinds.push((kind.to_owned(), AtomicI64::new(delta))),
        }
    }

    fn snapshot(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .kinds
            .read()
            .iter()
            .map(|(k, c)| (k.clone(), u64::try_from(c.load(Ordering::Relaxed)).unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        v.sort();
        v
    }
}

/// One shard of memberships: (item, user) → the kinds used.
type Members = FxHashMap<(ItemId, UserId), Vec<String>>;

/// Every reaction.
#[derive(Debug)]
pub struct ReactionIndex {
    members: Vec<Mutex<Members>>,
    counters: Vec<RwLock<FxHashMap<ItemId, Arc<ItemCounters>>>>,
}

impl Default for ReactionIndex {
    fn default() -> Self {
        Self {
            members: (0..SHARDS).map(|_| Mutex::new(FxHashMap::default())).collect(),
            counters: (0..SHARDS).map(|_| RwLock::new(FxHashMap::default())).collect(),
        }
    }
}

fn mix(x: u64) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
}

/// The lock on one (item, user) pair while a change to it is decided,
/// journaled and applied.
pub struct PairGuard<'a> {
    guard: MutexGuard<'a, Members>,
    key: (ItemId, UserId),
}

impl PairGuard<'_> {
    pub fn has(&self, kind: &str) -> bool {
        self.guard.get(&self.key).is_some_and(|ks| ks.iter().any(|k| k == kind))
    }
}

impl ReactionIndex {
    fn counters_of(&self, item: ItemId) -> Arc<ItemCounters> {
        let shard = &self.counters[mix(item.0)];
        if let Some(c) = shard.read().get(&item) {
            return c.clone();
        }
        shard.write().entry(item).or_default().clone()
    }

    /// Locks the pair (item, user).
    pub fn lock(&self, item: ItemId, user: UserId) -> PairGuard<'_> {
        let shard = mix(item.0 ^ user.0.rotate_left(29));
        PairGuard { guard: self.members[shard].lock(), key: (item, user) }
    }

    /// Applies a change to a locked pair; returns whether anything changed.
    pub fn set_locked(&self, g: &mut PairGuard<'_>, kind: &str, on: bool) -> bool {
        let kinds = g.guard.entry(g.key).or_default();
        let present = kinds.iter().any(|k| k == kind);
        let changed = match (on, present) {
            (true, false) => {
                kinds.push(kind.to_owned());
                true
            }
            (false, true) => {
                kinds.retain(|k| k != kind);
                true
            }
            _ => false,
        };
        if kinds.is_empty() {
            g.guard.remove(&g.key);
        }
        if changed {
            self.counters_of(g.key.0).add(kind, if on { 1 } else { -1 });
        }
        changed
    }

    /// Applies a change (journal replay).
    pub fn set(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> bool {
        let mut g = self.lock(item, user);
        self.set_locked(&mut g, kind, on)
    }

    /// Counts per kind (positive only, sorted by kind).
    pub fn counts(&self, item: ItemId) -> Vec<(String, u64)> {
        self.counters[mix(item.0)].read().get(&item).map(|c| c.snapshot()).unwrap_or_default()
    }

    /// Bytes an item's reactions take here (an estimate: its counters and
    /// one membership per reaction).
    pub fn approx_bytes(&self, item: ItemId) -> usize {
        self.counters[mix(item.0)].read().get(&item).map_or(0, |c| {
            let kinds = c.kinds.read();
            let members: i64 = kinds.iter().map(|(_, n)| n.load(Ordering::Relaxed).max(0)).sum();
            64 + kinds.len() * 48 + usize::try_from(members).unwrap_or(0) * 80
        })
    }

    /// Drops what is held of these items (a lazy index letting them go; it
    /// loads them again from disk). One pass over the memberships for all.
    pub fn forget(&self, items: &[ItemId]) {
        let mut any = false;
        for i in items {
            any |= self.counters[mix(i.0)].write().remove(i).is_some();
        }
        if !any {
            return;
        }
        let items: rustc_hash::FxHashSet<ItemId> = items.iter().copied().collect();
        for shard in &self.members {
            shard.lock().retain(|(i, _), _| !items.contains(i));
        }
    }

    /// The kinds `user` reacted with on `item`, sorted.
    /// Every reaction after `after` by (item, user, kind), at most `limit`
    /// (a scan of all of them: for a backfill of the memory backend).
    pub fn after(&self, after: Option<&(ItemId, UserId, String)>, limit: usize) -> Vec<(ItemId, UserId, String)> {
        let mut all: Vec<(ItemId, UserId, String)> = Vec::new();
        for shard in &self.members {
            for ((item, user), kinds) in shard.lock().iter() {
                for kind in kinds {
                    let r = (*item, *user, kind.clone());
                    if after.is_none_or(|a| &r > a) {
                        all.push(r);
                    }
                }
            }
        }
        all.sort_unstable();
        all.truncate(limit);
        all
    }

    pub fn of_user(&self, item: ItemId, user: UserId) -> Vec<String> {
        let g = self.lock(item, user);
        let mut v = g.guard.get(&g.key).cloned().unwrap_or_default();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exact_under_concurrent_writers() {
        let idx = Arc::new(ReactionIndex::default());
        let item = ItemId(7);
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let idx = idx.clone();
                std::thread::spawn(move || {
                    for u in 0..2000u64 {
                        let user = UserId(u % 1000 + 1);
                        idx.set(item, user, "like", (u + t) % 3 != 0);
                        idx.set(item, UserId(1_000_000 + t * 10_000 + u), "like", true);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        // Whatever the interleaving, the count equals the members holding "like".
        let members: u64 = idx
            .members
            .iter()
            .map(|s| s.lock().iter().filter(|((i, _), ks)| *i == item && ks.iter().any(|k| k == "like")).count() as u64)
            .sum();
        assert_eq!(idx.counts(item), vec![("like".to_owned(), members)]);
        assert!(members >= 8000);
    }

    #[test]
    fn set_is_idempotent_per_kind() {
        let idx = ReactionIndex::default();
        let (i, u) = (ItemId(1), UserId(2));
        assert!(idx.set(i, u, "like", true));
        assert!(!idx.set(i, u, "like", true));
        assert!(idx.set(i, u, "wow", true));
        assert_eq!(idx.counts(i), vec![("like".into(), 1), ("wow".into(), 1)]);
        assert_eq!(idx.of_user(i, u), vec!["like".to_owned(), "wow".to_owned()]);
        assert!(idx.set(i, u, "like", false));
        assert!(!idx.set(i, u, "like", false));
        assert_eq!(idx.counts(i), vec![("wow".into(), 1)]);
    }
}
