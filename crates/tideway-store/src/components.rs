//! In-process implementations of the shared components of the seam: reader
//! activity, hot authors' unpushed keys and fan-out job leases. One process
//! is the whole deployment here; the scaled-out backends keep the same
//! state in shared engines behind the same traits.

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tideway_core::{Key, Millis, UserId};

use crate::traits::WorkerId;

/// When each reader last read their home.
#[derive(Debug, Default)]
pub struct MemoryActivity {
    /// Why a mutex: a home read writes one entry; reads of many users and
    /// the minute's sweep are rare. Sharding is not needed at these rates.
    last: Mutex<FxHashMap<UserId, Millis>>,
}

impl MemoryActivity {
    pub fn touch(&self, user: UserId, at: Millis) {
        let mut m = self.last.lock();
        let e = m.entry(user).or_insert(at);
        *e = (*e).max(at);
    }

    pub fn last_active(&self, users: &[UserId]) -> Vec<Option<Millis>> {
        let m = self.last.lock();
        users.iter().map(|u| m.get(u).copied()).collect()
    }

    pub fn inactive_before(&self, cutoff: Millis) -> Vec<UserId> {
        self.last.lock().iter().filter(|(_, t)| **t < cutoff).map(|(u, _)| *u).collect()
    }

    pub fn export(&self) -> Vec<(UserId, Millis)> {
        let mut v: Vec<(UserId, Millis)> = self.last.lock().iter().map(|(u, t)| (*u, *t)).collect();
        v.sort();
        v
    }

    pub fn import(&self, entries: &[(UserId, Millis)]) {
        for (u, t) in entries {
            self.touch(*u, *t);
        }
    }
}

/// Each hot author's newest unpushed key.
#[derive(Debug, Default)]
pub struct MemoryHotAuthors {
    /// A mutex: written once per hot author's post, read once per home page.
    newest: Mutex<FxHashMap<UserId, Key>>,
}

impl MemoryHotAuthors {
    pub fn mark(&self, author: UserId, key: Key) {
        let mut m = self.newest.lock();
        let e = m.entry(author).or_insert(key);
        *e = (*e).max(key);
    }

    pub fn above(&self, authors: &[UserId], floor: Key) -> Vec<UserId> {
        let m = self.newest.lock();
        authors.iter().filter(|a| m.get(a).is_some_and(|k| *k > floor)).copied().collect()
    }

    pub fn export(&self) -> Vec<(UserId, Key)> {
        let mut v: Vec<(UserId, Key)> = self.newest.lock().iter().map(|(u, k)| (*u, *k)).collect();
        v.sort();
        v
    }

    pub fn import(&self, entries: &[(UserId, Key)]) {
        for (u, k) in entries {
            self.mark(*u, *k);
        }
    }
}

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
            Some((w, exp)) if *w != worker && *exp > now => false,
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

    pub fn release(&self, job: Key) {
        self.held.lock().remove(&job);
    }
}
