//! [`JobWindow`]: the pending fan-out jobs an index holds, at most a window
//! of them when a journal keeps the rest.
//!
//! Every job is written to the journal with its item, so the index need not
//! hold them all: under a load the worker cannot follow, the backlog would
//! otherwise grow the resident memory with every post (a 14-minute soak:
//! 4.5M pending jobs, about 400 MiB). With a window, jobs beyond it are
//! *spilled*: on disk only, counted, and read back in key order as the
//! window drains ([`JobWindow::wants`]).
//!
//! **No job is lost or run twice by a spill.** While any job is spilled,
//! every new job is spilled too (it joins the disk's, in key order, rather
//! than jumping them), and a spilled job is never claimed, advanced or
//! deleted, since only held jobs are handed to workers. So the disk's
//! pending jobs are exactly the held ones, those deleted by writes not yet
//! on disk, and the spilled ones. A refill (one at a time) notes the held
//! keys and the latest ticket under one lock, waits until that ticket is
//! durable (so every job deleted before it is gone from the disk), and
//! reads the disk's jobs that are not among the noted keys: each is a
//! spilled one, as nothing else can join the held set while it runs.

use crate::traits::Job;
use std::collections::BTreeMap;
use tideway_core::{Key, Millis};

/// Jobs an embedded index holds at most (about 100 bytes each): the
/// window of the default `storage.index_size`, 256 MiB.
pub const JOB_WINDOW: usize = 1 << 16;

/// The window of an index budget: a job per 4 KiB of it (2–3% of the
/// budget), at least one, at most [`JOB_WINDOW`].
pub fn window_for(index_budget: u64) -> usize {
    usize::try_from(index_budget / 4096).unwrap_or(usize::MAX).clamp(1, JOB_WINDOW)
}

/// The pending jobs held, and how many more are only on disk.
#[derive(Debug, Default)]
pub struct JobWindow {
    held: BTreeMap<Key, Job>,
    /// At most this many held (`None`: all of them; the memory backend,
    /// whose index is the only copy).
    cap: Option<usize>,
    /// Pending jobs on disk only.
    spilled: u64,
}

impl JobWindow {
    /// A window of at most `cap` jobs, starting from `held` (the disk's
    /// first jobs) and `spilled` more on disk.
    pub fn bounded(cap: usize, held: Vec<Job>, spilled: u64) -> Self {
        let mut w = Self { held: held.into_iter().map(|j| (j.key, j)).collect(), cap: Some(cap.max(1)), spilled };
        w.trim();
        w
    }

    /// Bounds the window at `cap` jobs; held jobs beyond it (the newest)
    /// count as spilled. Only before the store serves: a job let go here
    /// must not be held by a worker.
    pub fn set_cap(&mut self, cap: usize) {
        self.cap = Some(cap.max(1));
        self.trim();
    }

    fn trim(&mut self) {
        let Some(cap) = self.cap else { return };
        while self.held.len() > cap {
            self.held.pop_last();
            self.spilled += 1;
        }
    }

    /// Every pending job: held and spilled.
    pub fn len(&self) -> u64 {
        self.held.len() as u64 + self.spilled
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pending jobs only on disk.
    pub fn spilled(&self) -> u64 {
        self.spilled
    }

    /// The held jobs, oldest key first.
    pub fn held(&self) -> impl Iterator<Item = &Job> {
        self.held.values()
    }

    pub fn get(&self, key: Key) -> Option<&Job> {
        self.held.get(&key)
    }

    /// When the oldest held job was created.
    pub fn oldest(&self) -> Option<Millis> {
        self.held.values().map(|j| j.created).min()
    }

    /// A job written: replaces the held one, or joins the held jobs while
    /// nothing is spilled and there is room; otherwise it is spilled.
    pub fn put(&mut self, job: Job) {
        if let Some(held) = self.held.get_mut(&job.key) {
            *held = job;
        } else if self.spilled > 0 || self.cap.is_some_and(|c| self.held.len() >= c) {
            self.spilled += 1;
        } else {
            self.held.insert(job.key, job);
        }
    }

    /// A job done (only held jobs are ever done).
    pub fn remove(&mut self, key: Key) {
        self.held.remove(&key);
    }

    /// How many spilled jobs a refill should read back now: none while the
    /// window is more than half full.
    pub fn wants(&self) -> usize {
        match self.cap {
            Some(cap) if self.spilled > 0 && self.held.len() <= cap / 2 => {
                usize::try_from(self.spilled).unwrap_or(usize::MAX).min(cap - self.held.len())
            }
            _ => 0,
        }
    }

    /// The held keys, ascending (what a refill must not read back).
    pub fn held_keys(&self) -> Vec<Key> {
        self.held.keys().copied().collect()
    }

    /// Spilled jobs read back from disk (see the module docs for why each
    /// is a spilled one).
    pub fn refill(&mut self, jobs: Vec<Job>) {
        for job in jobs {
            if self.spilled == 0 {
                tracing::warn!(job = job.key, "a refill read more jobs than were spilled; ignoring the rest");
                break;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = self.held.entry(job.key) {
                e.insert(job);
                self.spilled -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::UserId;

    fn job(key: Key) -> Job {
        Job { key, author: UserId(1), cursor: None, created: Millis(key as i64) }
    }

    #[test]
    fn a_full_window_spills_every_later_job_until_refilled() {
        let mut w = JobWindow::bounded(4, vec![job(1), job(2)], 0);
        for k in 3..=6 {
            w.put(job(k));
        }
        assert_eq!(w.held_keys(), vec![1, 2, 3, 4]);
        assert_eq!((w.len(), w.spilled()), (6, 2));
        // Room again, but a new job queues behind the spilled ones.
        w.remove(1);
        w.put(job(7));
        assert_eq!(w.held_keys(), vec![2, 3, 4]);
        assert_eq!(w.wants(), 0, "three of four held: more than half");
        w.remove(2);
        assert_eq!(w.wants(), 2, "two held: room for two of the three spilled");
        w.remove(3);
        assert_eq!(w.wants(), 3);
        w.refill(vec![job(5), job(6), job(7)]);
        assert_eq!(w.held_keys(), vec![4, 5, 6, 7]);
        assert_eq!((w.len(), w.spilled(), w.wants()), (4, 0, 0));
        // Nothing spilled: new jobs are held while there is room.
        w.remove(4);
        w.put(job(8));
        assert_eq!(w.held_keys(), vec![5, 6, 7, 8]);
        // An update of a held job replaces it.
        w.put(Job { cursor: Some((Millis(1), UserId(9))), ..job(8) });
        assert_eq!(w.get(8).and_then(|j| j.cursor), Some((Millis(1), UserId(9))));
    }

    #[test]
    fn the_window_is_a_share_of_the_index_budget() {
        assert_eq!(window_for(256 << 20), JOB_WINDOW);
        assert_eq!(window_for(64 << 10), 16);
        assert_eq!(window_for(1), 1);
        assert_eq!(window_for(u64::MAX), JOB_WINDOW);
    }

    #[test]
    fn an_unbounded_window_holds_everything() {
        let mut w = JobWindow::default();
        for k in 0..1000 {
            w.put(job(k));
        }
        assert_eq!((w.len(), w.spilled(), w.wants()), (1000, 0, 0));
    }

    #[test]
    fn a_smaller_cap_spills_the_newest() {
        let mut w = JobWindow::bounded(10, (0..8).map(job).collect(), 5);
        w.set_cap(3);
        assert_eq!(w.held_keys(), vec![0, 1, 2]);
        assert_eq!(w.spilled(), 10);
        w.refill(vec![job(3)]);
        assert_eq!(w.spilled(), 9);
        w.refill(vec![job(3)]);
        assert_eq!(w.spilled(), 9, "a job already held is not counted twice");
    }
}
