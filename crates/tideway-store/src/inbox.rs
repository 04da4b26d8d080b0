//! Home inboxes in memory: sharded, capped, each complete above its floor.
//!
//! An inbox is a sorted deque of keys (8 bytes an entry). It is an
//! optimisation over the outboxes: the service reads keys above the floor
//! from here and everything at or below the floor by merging outboxes, and
//! checks every key against the current graph and items on read, so a stale
//! key (unfollowed author, deleted item) costs a skip, never a wrong page.

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Key, UserId};

/// Number of lock shards: enough that two cores delivering and readers
/// reading rarely wait on one another.
pub const SHARDS: usize = 64;

/// Inboxes whose cache lines a delivery loads together (see `deliver`).
const TOUCH_BATCH: usize = 32;

#[derive(Debug, Default)]
struct Inbox {
    /// Ascending keys, all above `floor`.
    keys: VecDeque<Key>,
    /// The newest key held (`keys.back()`; meaningless while `keys` is
    /// empty). Kept beside the deque's header, in the map's slot, so that
    /// the usual delivery (a key newer than all) decides where it goes
    /// without loading the deque's buffer: its write to the tail then
    /// waits in the store buffer instead of stalling on a cache miss.
    newest: Key,
    /// Every appearance with a key above `floor` is here (once delivered).
    floor: Key,
    /// A rebuild is reading the outboxes; deliveries are recorded but reads
    /// treat the inbox as absent.
    building: bool,
}

impl Inbox {
    fn add(&mut self, key: Key, cap: usize) -> bool {
        if key <= self.floor {
            return false;
        }
        let mut pos = if self.keys.is_empty() || key > self.newest {
            self.keys.len()
        } else {
            match self.position_from_back(key) {
                Some(pos) => pos,
                None => return false,
            }
        };
        if self.keys.len() >= cap {
            if pos == 0 {
                // Older than everything in a full inbox: it is trimmed at
                // once, and the outboxes serve it below the raised floor.
                self.floor = self.floor.max(key);
                return true;
            }
            // Make room first, so a full inbox never grows its buffer.
            if let Some(k) = self.keys.pop_front() {
                self.floor = self.floor.max(k);
            }
            pos -= 1;
        }
        if self.keys.len() == self.keys.capacity() {
            // Grow by a quarter up to the cap: a doubled buffer would leave up
            // to half of a full inbox's memory unused.
            let want = (self.keys.capacity() + (self.keys.capacity() / 4).max(4)).min(cap.max(1));
            self.keys.reserve_exact(want.saturating_sub(self.keys.len()).max(1));
        }
        if pos == self.keys.len() {
            // The usual delivery: a plain push (an insert at the end goes
            // through the deque's general placement, 6% of a fan-out).
            self.keys.push_back(key);
            self.newest = key;
        } else {
            self.keys.insert(pos, key);
        }
        // (trimming takes the oldest: the newest stays, cap >= 1)
        self.trim(cap);
        true
    }

    /// Where `key` goes, searching from the newest end (`None` if present).
    /// Keys that arrive out of order are mostly a little older than the
    /// newest (lanes deliver older jobs' chunks after newer ones), so an
    /// exponential search from the back touches a few cache lines where a
    /// binary search over the whole deque would miss on most of its steps.
    /// Needs a non-empty deque whose last key is `>= key`.
    fn position_from_back(&self, key: Key) -> Option<usize> {
        let len = self.keys.len();
        // keys[hi] >= key; every index below `lo` holds a key < key.
        let (mut lo, mut hi, mut step) = (0, len - 1, 1);
        while step <= hi {
            let probe = hi - step;
            if self.keys[probe] < key {
                lo = probe + 1;
                break;
            }
            hi = probe;
            step *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.keys[mid] < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (self.keys[lo] != key).then_some(lo)
    }

    /// Everything at or below `floor` is now read from the outboxes.
    fn raise_floor(&mut self, floor: Key) {
        if floor > self.floor {
            self.floor = floor;
            while self.keys.front().is_some_and(|&k| k <= floor) {
                self.keys.pop_front();
            }
        }
    }

    fn trim(&mut self, cap: usize) {
        while self.keys.len() > cap {
            if let Some(k) = self.keys.pop_front() {
                self.floor = self.floor.max(k);
            }
        }
    }
}

/// What a read of a present inbox returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxRead {
    pub keys: Vec<Key>,
    pub floor: Key,
}

/// Size figures of all inboxes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InboxStats {
    pub inboxes: u64,
    pub entries: u64,
    /// Bytes held by the key deques (capacity, not length).
    pub bytes: u64,
}

/// Deliveries grouped by the shard of their inbox (a counting sort into one
/// buffer), each shard's in the order of the batch, so that an inbox given
/// several keys takes them in the batch's order.
///
/// A shard's lock is taken once for all of its deliveries: taken once per
/// key and shard, with a chunk of ~175 followers spread over 64 shards,
/// every unlock (a locked instruction, which waits for the stores before
/// it) stalled on the two or three deliveries just made.
#[derive(Debug)]
pub struct Grouped {
    pairs: Vec<(UserId, Key)>,
    /// `pairs[ends[s - 1]..ends[s]]` fall in shard `s`.
    ends: [usize; SHARDS],
}

impl Grouped {
    pub fn new(set: &InboxSet, batch: &[(Key, &[UserId])]) -> Self {
        let mut ends = [0usize; SHARDS];
        let mut total = 0;
        for (_, users) in batch {
            total += users.len();
            for &u in *users {
                ends[set.shard(u)] += 1;
            }
        }
        let mut at = 0;
        for e in &mut ends {
            at += *e;
            *e = at;
        }
        let mut next = ends;
        let mut pairs = vec![(UserId(0), 0); total];
        for &(key, users) in batch.iter().rev() {
            for &u in users.iter().rev() {
                let s = set.shard(u);
                next[s] -= 1;
                pairs[next[s]] = (u, key);
            }
        }
        Self { pairs, ends }
    }

    /// How many deliveries fall in `shard`.
    pub fn in_shard(&self, shard: usize) -> usize {
        self.ends[shard] - if shard == 0 { 0 } else { self.ends[shard - 1] }
    }
}

/// Asks the CPU to bring the cache line holding `*at` in, without waiting
/// for it (a no-op on targets other than x86_64).
#[inline(always)]
fn prefetch<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: a prefetch is a hint: it reads nothing architecturally and
    // never faults, and `at` is a live reference besides.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(std::ptr::from_ref(at).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// All inboxes, sharded by user id.
#[derive(Debug)]
pub struct InboxSet {
    shards: Vec<Mutex<FxHashMap<UserId, Inbox>>>,
    cap: usize,
}

impl InboxSet {
    pub fn new(cap: usize) -> Self {
        Self { shards: (0..SHARDS).map(|_| Mutex::new(FxHashMap::default())).collect(), cap: cap.max(1) }
    }

    fn shard(&self, u: UserId) -> usize {
        // Fibonacci hashing spreads sequential ids across shards.
        (u.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
    }

    pub fn deliver(&self, key: Key, users: &[UserId]) -> usize {
        self.deliver_many(&[(key, users)])
    }

    /// Delivers every key of `batch` to its users, each shard's lock taken
    /// once for the whole batch ([`Grouped`]).
    pub fn deliver_many(&self, batch: &[(Key, &[UserId])]) -> usize {
        let grouped = Grouped::new(self, batch);
        (0..SHARDS).map(|shard| self.deliver_grouped(&grouped, shard)).sum()
    }

    /// Delivers the deliveries of `grouped` that fall in `shard` (`0..SHARDS`),
    /// under one take of its lock; returns how many inboxes took a key.
    pub fn deliver_grouped(&self, grouped: &Grouped, shard: usize) -> usize {
        let start = if shard == 0 { 0 } else { grouped.ends[shard - 1] };
        let pairs = &grouped.pairs[start..grouped.ends[shard]];
        if pairs.is_empty() {
            return 0;
        }
        let mut n = 0;
        let mut inboxes = self.shards[shard].lock();
        for batch in pairs.chunks(TOUCH_BATCH) {
            // Read each inbox's slot first (its newest key is there).
            // These reads do not depend on one another, so the CPU
            // overlaps their cache misses; the writes below then find
            // the slots in cache instead of missing one inbox at a
            // time, and their stores to the deques' tails wait in the
            // store buffer rather than stalling the loop.
            // Each slot's newest key is read, and the line of the deque's
            // tail asked for ahead (a hint that never waits), so that
            // both of a delivery's misses are in flight together.
            let touched = batch
                .iter()
                .filter_map(|(u, _)| {
                    inboxes.get(u).map(|ib| {
                        if let Some(tail) = ib.keys.back() {
                            prefetch(tail);
                        }
                        ib.newest
                    })
                })
                .fold(0u64, |a, k| a ^ k);
            std::hint::black_box(touched);
            for (u, key) in batch {
                if let Some(ib) = inboxes.get_mut(u)
                    && ib.add(*key, self.cap)
                {
                    n += 1;
                }
            }
        }
        n
    }

    pub fn read(&self, u: UserId, range: KeyRange, dir: Direction, limit: usize) -> Option<InboxRead> {
        let shard = self.shards[self.shard(u)].lock();
        let ib = shard.get(&u).filter(|ib| !ib.building)?;
        let range = KeyRange { above: Some(range.above.map_or(ib.floor, |a| a.max(ib.floor))), below: range.below };
        let lo = ib.keys.partition_point(|&k| range.above.is_some_and(|a| k <= a));
        let hi = range.below.map_or(ib.keys.len(), |b| ib.keys.partition_point(|&k| k < b));
        let keys: Vec<Key> = if lo >= hi {
            Vec::new()
        } else {
            match dir {
                Direction::Older => ib.keys.range(lo..hi).rev().take(limit).copied().collect(),
                Direction::Newer => ib.keys.range(lo..hi).take(limit).copied().collect(),
            }
        };
        Some(InboxRead { keys, floor: ib.floor })
    }

    pub fn begin_rebuild(&self, u: UserId) {
        let mut shard = self.shards[self.shard(u)].lock();
        shard.entry(u).or_insert_with(|| Inbox { building: true, ..Inbox::default() });
    }

    pub fn finish_rebuild(&self, u: UserId, keys: &[Key], floor: Key) {
        let mut shard = self.shards[self.shard(u)].lock();
        let ib = shard.entry(u).or_default();
        ib.raise_floor(floor);
        for &k in keys {
            ib.add(k, self.cap);
        }
        ib.building = false;
    }

    pub fn merge(&self, u: UserId, keys: &[Key], floor: Key) {
        let mut shard = self.shards[self.shard(u)].lock();
        if let Some(ib) = shard.get_mut(&u) {
            ib.raise_floor(floor);
            for &k in keys {
                ib.add(k, self.cap);
            }
        }
    }

    pub fn floor(&self, u: UserId) -> Option<Key> {
        let shard = self.shards[self.shard(u)].lock();
        shard.get(&u).filter(|ib| !ib.building).map(|ib| ib.floor)
    }

    /// Drops every inbox; how many there were.
    pub fn clear(&self) -> usize {
        self.shards.iter().map(|s| std::mem::take(&mut *s.lock()).len()).sum()
    }

    pub fn drop_inbox(&self, u: UserId) {
        self.shards[self.shard(u)].lock().remove(&u);
    }

    /// Every present inbox: (user, floor, keys ascending).
    pub fn export(&self) -> Vec<(UserId, Key, Vec<Key>)> {
        let mut out = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock();
            out.extend(
                shard
                    .iter()
                    .filter(|(_, ib)| !ib.building)
                    .map(|(u, ib)| (*u, ib.floor, ib.keys.iter().copied().collect())),
            );
        }
        out
    }

    /// Installs an inbox (from a snapshot), trimmed to the cap.
    pub fn import(&self, u: UserId, floor: Key, keys: &[Key]) {
        let mut ib =
            Inbox { keys: keys.iter().copied().filter(|&k| k > floor).collect(), newest: 0, floor, building: false };
        ib.keys.make_contiguous().sort_unstable();
        ib.newest = ib.keys.back().copied().unwrap_or(0);
        ib.trim(self.cap);
        self.shards[self.shard(u)].lock().insert(u, ib);
    }

    pub fn stats(&self) -> InboxStats {
        let mut s = InboxStats::default();
        for shard in &self.shards {
            let shard = shard.lock();
            s.inboxes += shard.len() as u64;
            for ib in shard.values() {
                s.entries += ib.keys.len() as u64;
                s.bytes += (ib.keys.capacity() * std::mem::size_of::<Key>()) as u64;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_delivered_at_once_equals_its_keys_one_by_one() {
        use rand::{Rng, SeedableRng, rngs::StdRng};
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let cap = rng.random_range(1..30);
            let (one, many) = (InboxSet::new(cap), InboxSet::new(cap));
            let users: Vec<UserId> = (0..300).map(UserId).collect();
            let floors: Vec<Key> = (0..250).map(|_| rng.random_range(0..50)).collect();
            for set in [&one, &many] {
                for (&u, &floor) in users.iter().zip(&floors) {
                    set.begin_rebuild(u);
                    set.finish_rebuild(u, &[], floor);
                }
            }
            let (mut took_one, mut took_many) = (0, 0);
            for _ in 0..40 {
                // Keys of a step, mostly ascending, some older; each to
                // some of the users (a few without an inbox).
                let batch: Vec<(Key, Vec<UserId>)> = (0..rng.random_range(1..70))
                    .map(|_| {
                        let key = rng.random_range(1..5_000);
                        let mut to: Vec<UserId> =
                            (0..rng.random_range(0..120)).map(|_| users[rng.random_range(0..300)]).collect();
                        to.sort_unstable();
                        to.dedup();
                        (key, to)
                    })
                    .collect();
                for (key, to) in &batch {
                    took_one += one.deliver(*key, to);
                }
                let refs: Vec<(Key, &[UserId])> = batch.iter().map(|(k, to)| (*k, to.as_slice())).collect();
                took_many += many.deliver_many(&refs);
            }
            assert_eq!(took_one, took_many, "seed {seed}");
            for &u in &users {
                assert_eq!(
                    one.read(u, KeyRange::ALL, Direction::Older, 100),
                    many.read(u, KeyRange::ALL, Direction::Older, 100),
                    "seed {seed}, user {u:?}"
                );
            }
        }
    }

    #[test]
    fn cap_raises_the_floor_and_old_keys_are_refused() {
        let set = InboxSet::new(3);
        let u = UserId(1);
        assert_eq!(set.deliver(5, &[u]), 0, "absent inbox takes nothing");
        set.begin_rebuild(u);
        set.finish_rebuild(u, &[], 0);
        for k in [10, 30, 20, 40, 20] {
            set.deliver(k, &[u]);
        }
        let r = set.read(u, KeyRange::ALL, Direction::Older, 10).expect("present");
        assert_eq!(r, InboxRead { keys: vec![40, 30, 20], floor: 10 });
        assert_eq!(set.deliver(5, &[u]), 0, "at or below the floor");
        let r = set.read(u, KeyRange { above: Some(20), below: None }, Direction::Newer, 10).expect("present");
        assert_eq!(r.keys, vec![30, 40]);
    }

    #[test]
    fn adds_in_any_order_match_a_sorted_set_model() {
        use rand::{Rng, SeedableRng, rngs::StdRng};
        use std::collections::BTreeSet;
        for seed in 0..50 {
            let mut rng = StdRng::seed_from_u64(seed);
            let cap = rng.random_range(1..40);
            let (mut ib, mut keys, mut floor) = (Inbox::default(), BTreeSet::new(), 0u64);
            for step in 0..2_000u64 {
                if rng.random_bool(0.02) {
                    // A merge's floor: sometimes above every key held.
                    let raised = floor + rng.random_range(0..=step * 4 + 100 - floor.min(step * 4));
                    ib.raise_floor(raised);
                    floor = floor.max(raised);
                    keys.retain(|&k| k > floor);
                }
                // Mostly a little older than the newest, sometimes anywhere.
                let key = if rng.random_bool(0.7) {
                    (step * 4).saturating_sub(rng.random_range(0..60))
                } else {
                    rng.random_range(0..=step * 4)
                };
                let want = key > floor && !keys.contains(&key);
                if want {
                    keys.insert(key);
                    while keys.len() > cap {
                        floor = floor.max(keys.pop_first().unwrap_or(0));
                    }
                }
                assert_eq!(ib.add(key, cap), want, "seed {seed} step {step} key {key}");
                assert!(ib.keys.iter().copied().eq(keys.iter().copied()), "seed {seed} step {step}");
                assert_eq!(ib.floor, floor);
                if let Some(&last) = ib.keys.back() {
                    assert_eq!(ib.newest, last, "seed {seed} step {step}: the newest key kept beside the deque");
                }
            }
        }
    }

    #[test]
    fn a_full_inbox_keeps_its_newest_keys_without_growing() {
        let set = InboxSet::new(800);
        let u = UserId(9);
        set.begin_rebuild(u);
        set.finish_rebuild(u, &[], 0);
        // In order, out of order, and older than everything once full.
        for k in (1..=3000u64).map(|k| k * 10) {
            set.deliver(k, &[u]);
            set.deliver(k - 5, &[u]);
        }
        set.deliver(3, &[u]);
        let r = set.read(u, KeyRange::ALL, Direction::Older, 1000).expect("present");
        let want: Vec<Key> = (0..800u64).map(|i| 30_000 - 5 * i).collect();
        assert_eq!(r.keys, want);
        assert_eq!(r.floor, 30_000 - 5 * 800);
        let s = set.stats();
        assert_eq!(s.entries, 800);
        assert!(s.bytes <= 800 * 8, "{} bytes for 800 keys", s.bytes);
    }

    #[test]
    fn an_imported_inbox_takes_newer_keys_at_its_end_and_older_in_place() {
        let set = InboxSet::new(4);
        let u = UserId(4);
        set.import(u, 5, &[30, 10, 20, 3]);
        set.deliver(25, &[u]);
        set.deliver(40, &[u]);
        let r = set.read(u, KeyRange::ALL, Direction::Older, 10).expect("present");
        assert_eq!(r, InboxRead { keys: vec![40, 30, 25, 20], floor: 10 });
        // A floor above everything held empties it; the next key is its first.
        set.merge(u, &[], 50);
        set.deliver(45, &[u]);
        set.deliver(60, &[u]);
        set.deliver(55, &[u]);
        let r = set.read(u, KeyRange::ALL, Direction::Older, 10).expect("present");
        assert_eq!(r, InboxRead { keys: vec![60, 55], floor: 50 });
    }

    #[test]
    fn deliveries_during_a_rebuild_are_kept() {
        let set = InboxSet::new(10);
        let u = UserId(2);
        set.begin_rebuild(u);
        assert!(set.read(u, KeyRange::ALL, Direction::Older, 10).is_none());
        set.deliver(99, &[u]);
        set.finish_rebuild(u, &[50, 40], 0);
        assert_eq!(set.read(u, KeyRange::ALL, Direction::Older, 10).expect("present").keys, vec![99, 50, 40]);
    }

    #[test]
    fn a_truncated_merge_raises_the_floor() {
        let set = InboxSet::new(3);
        let u = UserId(3);
        set.begin_rebuild(u);
        set.finish_rebuild(u, &[10], 0);
        // A backfill that took only the newest keys of a longer outbox is
        // complete only above its last key: the floor must follow.
        set.merge(u, &[50, 40, 30], 29);
        let r = set.read(u, KeyRange::ALL, Direction::Older, 10).expect("present");
        assert_eq!(r, InboxRead { keys: vec![50, 40, 30], floor: 29 });
    }
}
