//! In-process implementations of the shared components of the seam: reader
//! activity, hot authors' unpushed keys, fan-out job leases, the event
//! hub and live feed snapshots. One process
//! is the whole deployment here; the scaled-out backends keep the same
//! state in shared engines behind the same traits.

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tideway_core::{ItemId, Key, Millis, UserId};

use crate::traits::{HubEvent, Removal, Removed, Signal, Subscription, WorkerId};

/// The newest value recorded per user: a reader's last home read (activity)
/// and a hot author's newest unpushed key are both this.
#[derive(Debug)]
pub struct NewestPerUser<T> {
    /// Why a mutex: one write per home read or hot post; the batch reads and
    /// the minute's sweep are short. Sharding is not needed at these rates.
    newest: Mutex<FxHashMap<UserId, T>>,
}

impl<T> Default for NewestPerUser<T> {
    fn default() -> Self {
        Self { newest: Mutex::new(FxHashMap::default()) }
    }
}

impl<T> NewestPerUser<T> {
    /// Forgets every user's value; how many there were.
    pub fn clear(&self) -> usize {
        std::mem::take(&mut *self.newest.lock()).len()
    }
}

impl<T: Copy + Ord> NewestPerUser<T> {
    /// Records `value` for `user`; a smaller one than recorded changes nothing.
    pub fn record(&self, user: UserId, value: T) {
        let mut m = self.newest.lock();
        let e = m.entry(user).or_insert(value);
        *e = (*e).max(value);
    }

    /// The value of each user, in order.
    pub fn get(&self, users: &[UserId]) -> Vec<Option<T>> {
        let m = self.newest.lock();
        users.iter().map(|u| m.get(u).copied()).collect()
    }

    /// Users whose value satisfies `keep` (a scan of every recorded user).
    pub fn users_where(&self, keep: impl Fn(T) -> bool) -> Vec<UserId> {
        self.newest.lock().iter().filter(|(_, v)| keep(**v)).map(|(u, _)| *u).collect()
    }

    /// Everything, sorted by user (for a snapshot).
    pub fn export(&self) -> Vec<(UserId, T)> {
        let mut v: Vec<(UserId, T)> = self.newest.lock().iter().map(|(u, t)| (*u, *t)).collect();
        v.sort();
        v
    }

    pub fn import(&self, entries: &[(UserId, T)]) {
        for (u, v) in entries {
            self.record(*u, *v);
        }
    }

    pub fn len(&self) -> usize {
        self.newest.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Fact tokens in one process (`tideway_store::FactTokens`): one
/// generation for every key, moved by every change that ends, and the
/// keys with a change in flight. Coarser than a token per key (a change
/// makes every copy read again), and it holds nothing per key but the
/// changes in flight; the in-process engines read their facts in process
/// anyway. The generation starts at the clock, so a process that starts
/// again does not give the tokens of the one before.
#[derive(Debug)]
pub struct MemoryFactTokens {
    state: Mutex<(u64, FxHashMap<crate::FactKey, u32>)>,
}

impl Default for MemoryFactTokens {
    fn default() -> Self {
        let start =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        Self { state: Mutex::new((start, FxHashMap::default())) }
    }
}

impl MemoryFactTokens {
    pub fn tokens(&self, keys: &[crate::FactKey]) -> Vec<Option<u64>> {
        let s = self.state.lock();
        keys.iter().map(|i| (!s.1.contains_key(i)).then_some(s.0)).collect()
    }

    pub fn begin(&self, keys: &[crate::FactKey]) {
        let mut s = self.state.lock();
        for &i in keys {
            *s.1.entry(i).or_default() += 1;
        }
    }

    /// Forgets every token and change in flight (a lost shared half):
    /// the generation moves, so no copy is taken again.
    pub fn forget(&self) {
        let mut s = self.state.lock();
        s.1.clear();
        s.0 += 1;
    }

    pub fn end(&self, keys: &[crate::FactKey]) {
        let mut s = self.state.lock();
        for i in keys {
            if let Some(n) = s.1.get_mut(i) {
                *n -= 1;
                if *n == 0 {
                    s.1.remove(i);
                }
            }
        }
        s.0 += 1;
    }
}

/// What made entries leave homes, per author (items) and per user (others
/// lost); see `tideway_store::Removals`. Each owner's notes are pruned to
/// the window when it gets a new one, idle owners when the map grows.
#[derive(Debug, Default)]
pub struct MemoryRemovals {
    notes: Mutex<FxHashMap<Owner, Vec<(Millis, Noted)>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Owner {
    Author(UserId),
    User(UserId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Noted {
    Item(ItemId, Option<Key>),
    Other(UserId),
}

/// Owners kept before the idle ones are pruned.
const REMOVALS_PRUNED_AT: usize = 4096;

impl MemoryRemovals {
    pub fn clear(&self) -> usize {
        std::mem::take(&mut *self.notes.lock()).len()
    }

    pub fn note(&self, notes: &[Removal], at: Millis, keep_ms: i64) {
        let cutoff = Millis(at.0.saturating_sub(keep_ms));
        let mut m = self.notes.lock();
        for n in notes {
            let (owner, noted) = match *n {
                Removal::Item { author, item, key } => (Owner::Author(author), Noted::Item(item, key)),
                Removal::Relation { user, other } => (Owner::User(user), Noted::Other(other)),
            };
            let list = m.entry(owner).or_default();
            list.retain(|(t, x)| *t >= cutoff && *x != noted);
            list.push((at, noted));
        }
        if m.len() > REMOVALS_PRUNED_AT {
            m.retain(|_, list| {
                list.retain(|(t, _)| *t >= cutoff);
                !list.is_empty()
            });
        }
    }

    pub fn since(&self, user: UserId, authors: &[UserId], since: Millis) -> Removed {
        let m = self.notes.lock();
        let mut out = Removed::default();
        let owners = authors.iter().map(|a| Owner::Author(*a)).chain([Owner::User(user)]);
        for owner in owners {
            for (t, noted) in m.get(&owner).map(Vec::as_slice).unwrap_or_default() {
                if *t < since {
                    continue;
                }
                match *noted {
                    Noted::Item(item, key) => out.items.push((item, key)),
                    Noted::Other(other) => out.others.push(other),
                }
            }
        }
        out
    }
}

/// When each reader last read their home.
pub type MemoryActivity = NewestPerUser<Millis>;

/// Each hot author's newest unpushed key.
pub type MemoryHotAuthors = NewestPerUser<Key>;

/// Leases of fan-out jobs: which worker holds a job, until when. Not
/// durable: after a restart of the only process no lease is live anyway.
#[derive(Debug, Default)]
pub struct JobLeases {
    held: Mutex<FxHashMap<Key, (WorkerId, Millis)>>,
}

impl JobLeases {
    /// Leases `job` to `worker` until `until` unless another worker holds a
    /// live lease on it at `now`; returns whether `worker` holds it now.
    pub fn try_take(&self, job: Key, worker: WorkerId, now: Millis, until: Millis) -> bool {
        let mut m = self.held.lock();
        match m.get(&job) {
            Some((w, exp)) if *w != worker && *exp > now && !crate::rules::supersedes(worker, *w) => false,
            _ => {
                m.insert(job, (worker, until));
                true
            }
        }
    }

    /// Whether `worker` may record progress of `job`: it holds the lease
    /// (even an expired one nobody took over), or no one does.
    pub fn may_advance(&self, job: Key, worker: WorkerId) -> bool {
        self.held.lock().get(&job).is_none_or(|(w, _)| *w == worker)
    }

    /// Whether a worker holds a live lease on `job` at `now`.
    pub fn held_at(&self, job: Key, now: Millis) -> bool {
        self.held.lock().get(&job).is_some_and(|(_, exp)| *exp > now)
    }

    pub fn release(&self, job: Key) {
        self.held.lock().remove(&job);
    }
}

/// Node id claims of a store that lives in one process (see
/// [`Jobs::claim_node`](crate::Jobs::claim_node)): only that process's
/// instances meet here, by the wall clock.
#[derive(Debug, Default)]
pub struct LocalNodes {
    held: Mutex<FxHashMap<u16, NodeHold>>,
    /// The record of trust in a shared half (`trust.rs`): kept here too,
    /// though nothing in process ever misses it.
    trust: Mutex<Option<crate::SharedTrust>>,
}

/// A node id's claim: the holding instance (`None`: released), its epoch,
/// its last heartbeat.
type NodeHold = (Option<u64>, u32, Millis);

impl LocalNodes {
    pub fn claim(&self, node: u16, instance: u64, stale_ms: i64) -> crate::NodeClaim {
        let now = Millis::now();
        let mut m = self.held.lock();
        let (holder, epoch, beat) = m.get(&node).copied().unwrap_or((None, 0, Millis(0)));
        match holder {
            Some(h) if h != instance && now.0 - beat.0 < stale_ms => crate::NodeClaim::Held { age_ms: now.0 - beat.0 },
            _ => {
                let epoch = epoch + 1;
                m.insert(node, (Some(instance), epoch, now));
                crate::NodeClaim::Claimed { epoch }
            }
        }
    }

    pub fn beat(&self, node: u16, instance: u64) -> bool {
        match self.held.lock().get_mut(&node) {
            Some((Some(h), _, beat)) if *h == instance => {
                *beat = Millis::now();
                true
            }
            _ => false,
        }
    }

    /// [`crate::Jobs::shared_trust`] by the wall clock.
    pub fn shared_trust(&self, change: crate::TrustChange) -> crate::SharedTrust {
        let mut t = self.trust.lock();
        let next = t.unwrap_or(crate::SharedTrust::FIRST).apply(change, Millis::now());
        *t = Some(next);
        next
    }

    pub fn release(&self, node: u16, instance: u64) {
        if let Some((h, ..)) = self.held.lock().get_mut(&node)
            && *h == Some(instance)
        {
            *h = None;
        }
    }
}

/// Signals a subscriber may fall behind by before it receives `Lagged`.
pub const HUB_CAPACITY: usize = 4096;

/// The event hub of one process: a broadcast channel.
#[derive(Debug)]
pub struct MemoryHub {
    tx: tokio::sync::broadcast::Sender<HubEvent>,
}

impl Default for MemoryHub {
    fn default() -> Self {
        Self { tx: tokio::sync::broadcast::channel(HUB_CAPACITY).0 }
    }
}

impl MemoryHub {
    pub fn publish(&self, signals: &[Signal]) {
        for s in signals {
            // No subscription open: nobody to tell.
            let _ = self.tx.send(HubEvent::Signal(*s));
        }
    }

    pub fn subscribe(&self) -> Subscription {
        Subscription::new(self.tx.subscribe())
    }
}

/// Bytes of live feed snapshots one process keeps at most (the oldest go
/// first beyond it: their walks start over, `410 cursor_expired`).
pub const SNAPSHOT_BUDGET: usize = 64 << 20;

/// Live feed snapshots of one process, each kept until its expiry, within
/// [`SNAPSHOT_BUDGET`] bytes. Expiry is by the monotonic clock (the service
/// also refuses a cursor older than the TTL by its own clock).
#[derive(Debug, Default)]
pub struct MemorySnapshots {
    inner: Mutex<SnapshotSet>,
}

#[derive(Debug, Default)]
struct SnapshotSet {
    by_id: FxHashMap<u64, (std::time::Instant, std::sync::Arc<[u8]>)>,
    /// Ids in the order they were put, to drop the oldest and the expired.
    order: std::collections::VecDeque<u64>,
    bytes: usize,
}

impl SnapshotSet {
    fn drop_oldest(&mut self) -> bool {
        let Some(id) = self.order.pop_front() else { return false };
        if let Some((_, b)) = self.by_id.remove(&id) {
            self.bytes -= b.len();
        }
        true
    }
}

impl MemorySnapshots {
    pub fn put(&self, id: u64, bytes: &[u8], ttl: std::time::Duration) {
        let now = std::time::Instant::now();
        let mut set = self.inner.lock();
        // Expired ones at the front go (ttls are one setting, so the order
        // of puts is nearly the order of expiry), then the oldest while
        // over the budget.
        while let Some(front) = set.order.front() {
            let expired = set.by_id.get(front).is_none_or(|(until, _)| *until <= now);
            if !(expired || set.bytes + bytes.len() > SNAPSHOT_BUDGET) || !set.drop_oldest() {
                break;
            }
        }
        let until = now + ttl;
        if let Some((_, old)) = set.by_id.insert(id, (until, bytes.into())) {
            set.bytes -= old.len();
            set.order.retain(|i| *i != id);
        }
        set.bytes += bytes.len();
        set.order.push_back(id);
    }

    pub fn get(&self, id: u64) -> Option<Vec<u8>> {
        let set = self.inner.lock();
        let (until, b) = set.by_id.get(&id)?;
        (*until > std::time::Instant::now()).then(|| b.to_vec())
    }

    /// Bytes held (for tests and metrics).
    pub fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn snapshots_expire_and_the_oldest_go_first_past_the_budget() {
        let s = MemorySnapshots::default();
        s.put(1, &[1, 2, 3], Duration::from_millis(30));
        s.put(2, &[4], Duration::from_secs(60));
        assert_eq!((s.get(1), s.get(2), s.get(3)), (Some(vec![1, 2, 3]), Some(vec![4]), None));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(s.get(1), None, "expired");
        // The next put drops the expired one at the front.
        s.put(3, &[5, 6], Duration::from_secs(60));
        assert_eq!(s.bytes(), 3);
        // Past the budget the oldest go, whatever their expiry.
        let big = vec![0u8; SNAPSHOT_BUDGET / 2 + 1];
        s.put(4, &big, Duration::from_secs(60));
        s.put(5, &big, Duration::from_secs(60));
        assert_eq!((s.get(2), s.get(3), s.get(4)), (None, None, None), "dropped for room");
        assert_eq!(s.get(5).map(|b| b.len()), Some(big.len()));
        assert!(s.bytes() <= SNAPSHOT_BUDGET);
    }
}
