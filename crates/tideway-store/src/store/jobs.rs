//! [`Jobs`] on a [`Store`]: fan-out jobs, their leases and their progress.
//! What progress records is decided by [`rules::progress`].

use super::journal::{Journal, disk};
use super::{Committed, PROGRESS_SYNC, Store};
use crate::change::Change;
use crate::error::{Engine, StoreError};
use crate::rules::{self, JobState, ProgressEffect};
use crate::traits::Job;
use crate::traits::*;
use async_trait::async_trait;
use std::sync::atomic::Ordering;
use tideway_core::Millis;

impl<J: Journal> Store<J> {
    /// Reads spilled jobs back from disk once the window has drained to
    /// half (`crate::job_window` says why each job read is a spilled one).
    /// The read runs on the blocking pool while workers go on with the jobs
    /// held (half a window: a read of them is done long before they are);
    /// a later claim takes what it read. Only a claim that finds nothing
    /// held waits for it. One refill at a time. (An unbounded window, the
    /// memory backend's, never wants any.)
    async fn refill_jobs(&self) -> Result<()> {
        let running = {
            let mut slot = self.refill.lock();
            if slot.is_none() {
                let (held, ticket, want) = {
                    let st = self.state.read();
                    let want = st.jobs.wants();
                    if want == 0 {
                        return Ok(());
                    }
                    (st.jobs.held_keys(), self.last_ticket.load(Ordering::Acquire), want)
                };
                let journal = self.journal.clone();
                // Every job done before the held keys were noted is gone
                // from disk once that ticket is durable.
                *slot = Some(tokio::task::spawn_blocking(move || {
                    journal.sync(ticket).map_err(RefillError::Sync)?;
                    disk(&*journal).and_then(|d| d.pending_jobs(&held, want)).map_err(RefillError::Read)
                }));
            }
            // Taken once read, or waited for when nothing else is held.
            let take = slot.as_ref().is_some_and(|r| r.is_finished()) || self.state.read().jobs.held().next().is_none();
            match slot.take() {
                Some(read) if take => read,
                read => {
                    *slot = read;
                    return Ok(());
                }
            }
        };
        let read = match running.await {
            Ok(Ok(jobs)) => jobs,
            Ok(Err(RefillError::Read(e))) => return Err(e),
            Ok(Err(RefillError::Sync(e))) => {
                self.fail(&e);
                return Err(e);
            }
            Err(e) => return Err(StoreError::unavailable(Engine::Embedded, e)),
        };
        self.state.write().jobs.refill(read);
        Ok(())
    }
}

/// A refill's read on the blocking pool.
pub(super) type RefillRead = tokio::task::JoinHandle<std::result::Result<Vec<Job>, RefillError>>;

/// How a refill's read failed: its sync (the store can no longer vouch for
/// its index) or the read itself (met again by the next claim).
pub(super) enum RefillError {
    Sync(StoreError),
    Read(StoreError),
}

#[async_trait]
impl<J: Journal> Jobs for Store<J> {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let st = self.state.read();
        Ok(st.jobs.held().take(limit).cloned().collect())
    }

    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        self.refill_jobs().await?;
        let jobs: Vec<Job> = {
            let st = self.state.read();
            let until = Millis(now.0.saturating_add(lease_ms));
            st.jobs.held().filter(|j| self.leases.try_take(j.key, worker, now, until)).take(limit).cloned().collect()
        };
        self.prefetch_followers(&jobs).await?;
        Ok(jobs)
    }

    /// Loads the next jobs' authors' counters and follower lists (those a
    /// step reads whole) while the worker delivers the step before: on a
    /// lazy index a step otherwise waited for them, one core idle (the
    /// Twitter graph's drain: ~30% of its time).
    async fn prepare_jobs(&self, now: Millis, limit: usize) -> Result<()> {
        let next: Vec<Job> = {
            let st = self.state.read();
            if !st.lazy {
                // (an eager index holds every unit: nothing to read)
                return Ok(());
            }
            st.jobs.held().filter(|j| !self.leases.held_at(j.key, now)).take(limit).cloned().collect()
        };
        self.prefetch_followers(&next).await
    }

    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        let committed = self
            .write(|st, _| {
                let mut recorded = Vec::with_capacity(progress.len());
                let mut changes = Vec::new();
                for p in progress {
                    let key = match *p {
                        JobProgress::Checkpoint(k, _) | JobProgress::Complete(k) => k,
                    };
                    let job = st.jobs.get(key);
                    let state = job
                        .map(|j| JobState { held_by_other: !self.leases.may_advance(key, worker), cursor: j.cursor });
                    let change = match (rules::progress(state, *p), job) {
                        (Some(ProgressEffect::Advance(pos)), Some(j)) => {
                            Some(Change::PutJob(Job { cursor: Some(pos), ..j.clone() }))
                        }
                        (Some(ProgressEffect::Complete), _) => Some(Change::DelJob(key)),
                        _ => None,
                    };
                    recorded.push(change.is_some());
                    changes.extend(change);
                }
                Ok((recorded, changes))
            })
            .await?;
        let recorded = match committed {
            Committed::Nothing(r) => r,
            Committed::Written { out, ticket, .. } => {
                // Made durable at most every PROGRESS_SYNC, not waited for
                // (see there).
                let due = self.progress_synced.lock().is_none_or(|t| t.elapsed() >= PROGRESS_SYNC);
                if due {
                    self.sync_soon(ticket)?;
                    *self.progress_synced.lock() = Some(std::time::Instant::now());
                }
                out
            }
        };
        // Only a completion that was recorded ends the lease: a worker that
        // lost the job must not free it under its new holder.
        for (p, done) in progress.iter().zip(&recorded) {
            if let (JobProgress::Complete(k), true) = (p, done) {
                self.leases.release(*k);
            }
        }
        Ok(recorded)
    }

    async fn claim_node(&self, node: u16, instance: u64, stale_ms: i64) -> Result<NodeClaim> {
        Ok(self.nodes.claim(node, instance, stale_ms))
    }

    async fn beat(&self, node: u16, instance: u64) -> Result<bool> {
        Ok(self.nodes.beat(node, instance))
    }

    async fn release_node(&self, node: u16, instance: u64) -> Result<()> {
        self.nodes.release(node, instance);
        Ok(())
    }

    /// No clock but this process's; fails as [`Graph::health`] does.
    async fn clock(&self) -> Result<Option<Millis>> {
        self.health().await?;
        Ok(None)
    }

    async fn shared_trust(&self, change: TrustChange) -> Result<SharedTrust> {
        Ok(self.nodes.shared_trust(change))
    }
}
