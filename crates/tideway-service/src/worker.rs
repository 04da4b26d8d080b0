//! The fan-out worker: delivers each new item to its author's followers.
//!
//! Jobs are durable (written with the item, atomically), processed a chunk
//! of followers at a time in follower-id order, and checkpointed after each
//! chunk, so a restart resumes where it stopped. Delivery is idempotent (an
//! inbox ignores a key it holds), so the chunk in flight at a crash is simply
//! delivered again. Each step advances every one of the oldest `LANES` jobs
//! by one chunk, so a small job never waits behind a huge one.

use crate::error::Result;
use crate::service::FeedService;
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tideway_core::UserId;
use tideway_store::{FollowerPos, JobProgress, Received, Signal, Subscription, WorkerId};
use tokio_util::sync::CancellationToken;

/// Jobs advanced side by side in one step (and recorded in one durable write).
pub const LANES: usize = 64;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOutcome {
    /// No job was pending.
    Idle,
    /// Chunks were delivered.
    Progress { deliveries: usize, completed: usize },
}

/// Drives fan-out jobs of one service.
#[derive(Clone)]
pub struct FanoutWorker {
    svc: Arc<FeedService>,
    /// This worker's id in job leases: its node's claimed id and start
    /// epoch ([`FeedService::worker_id`]).
    id: WorkerId,
    /// How long an idle worker waits for a wake-up from the event hub
    /// before it looks for work anyway (a lost signal costs at most this).
    poll: Duration,
}

impl FanoutWorker {
    pub fn new(svc: Arc<FeedService>) -> Self {
        Self { id: svc.ops.worker_id(), svc, poll: Duration::from_secs(1) }
    }

    /// A worker with a chosen id (tests of leases between workers).
    pub fn with_id(svc: Arc<FeedService>, id: WorkerId) -> Self {
        Self { id, ..Self::new(svc) }
    }

    /// Sets how long an idle worker waits before it looks for work without
    /// a wake-up (default 1 s).
    pub fn poll_every(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Advances each of the oldest jobs no other worker holds by one chunk.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn step(&self) -> Result<StepOutcome> {
        let b = &self.svc.backend;
        let now = self.svc.node().shared_now();
        let jobs = b.claim_jobs(self.id, now, self.svc.opts.lease_ms, LANES).await?;
        if jobs.is_empty() {
            return Ok(StepOutcome::Idle);
        }
        let chunk = self.svc.opts.chunk_size;
        let authors_of: Vec<UserId> = jobs.iter().map(|j| j.author).collect();
        // The jobs' followers are read side by side, `chunks_in_flight` at
        // a time (on a remote engine each is a round trip; `buffered` keeps
        // the jobs' order), then delivered in one call: a store groups the
        // step's keys by inbox, so that an inbox given several of them is
        // read and written once, its keys in order (on Redis one script
        // run per node, where a run per job met the inboxes again and again
        // and most keys arrived below one delivered just before).
        let starts: Vec<(UserId, Option<FollowerPos>)> = jobs.iter().map(|j| (j.author, j.cursor)).collect();
        let read: Vec<Result<Vec<FollowerPos>>> = futures_util::stream::iter(starts)
            .map(|(author, cursor)| async move { Ok(b.followers_chunk(author, cursor, chunk).await?) })
            .buffered(self.svc.opts.chunks_in_flight.max(1))
            .collect()
            .await;
        // A failed read fails the step before anything is delivered or
        // recorded; a failed delivery fails it before any progress is
        // recorded: the chunks delivered are delivered again, and ignored.
        let followers = read.into_iter().collect::<Result<Vec<_>>>()?;
        let users: Vec<Vec<UserId>> = followers.iter().map(|f| f.iter().map(|f| f.1).collect()).collect();
        let batch: Vec<(tideway_core::Key, &[UserId])> =
            jobs.iter().zip(&users).map(|(job, users)| (job.key, users.as_slice())).collect();
        // Beside the deliveries, the next jobs' reads are brought in (a
        // hint: a lazy index loads them on the other core meanwhile; a
        // failure here is met again, and answered, by the step that needs
        // them). This step's jobs are leased beyond `now`, so they are not
        // among those read.
        let (deliveries, prepared) = tokio::join!(b.deliver_many(&batch), b.prepare_jobs(now, LANES));
        if let Err(e) = prepared {
            tracing::debug!(error = %e, "reading the next jobs ahead failed");
        }
        let deliveries = deliveries?;
        let mut completed = 0;
        let progress: Vec<JobProgress> = jobs
            .iter()
            .zip(&followers)
            .map(|(job, followers)| match followers.last() {
                Some(&last) if followers.len() == chunk => JobProgress::Checkpoint(job.key, last),
                _ => {
                    completed += 1;
                    JobProgress::Complete(job.key)
                }
            })
            .collect();
        // One durable write for the whole step: a crash before it re-delivers
        // these chunks, which inboxes ignore. Progress of a job another worker
        // took over (our lease expired) is not recorded; its chunk is simply
        // delivered twice, which inboxes ignore too.
        let recorded = b.advance(self.id, &progress).await?;
        // Home streams of the authors' followers read their homes again.
        let mut authors: Vec<UserId> = authors_of.into_iter().collect();
        authors.sort_unstable();
        authors.dedup();
        self.svc.effects.signal(authors.into_iter().map(tideway_store::Signal::Author).collect()).await;
        let lost = recorded.iter().filter(|r| !**r).count();
        if lost > 0 {
            tracing::debug!(lost, "progress of jobs held by another worker was not recorded");
        }
        self.svc.ops.record_deliveries(deliveries);
        metrics::counter!("tideway_fanout_delivered_total").increment(deliveries as u64);
        Ok(StepOutcome::Progress { deliveries, completed })
    }

    /// Steps until no job is pending (tests and benchmarks).
    pub async fn drain(&self) -> Result<usize> {
        let mut total = 0;
        while let StepOutcome::Progress { deliveries, .. } = self.step().await? {
            total += deliveries;
        }
        Ok(total)
    }

    /// Runs until cancelled: steps while there is work (a step awaits its
    /// durable checkpoint; the embedded store syncs on the blocking pool),
    /// sleeps until the event hub says there is work, on any node, or its
    /// poll interval (a second) passes, when there is none.
    pub async fn run(self, cancel: CancellationToken) {
        let mut last_sweep = std::time::Instant::now();
        let mut hub: Option<Subscription> = None;
        loop {
            if hub.is_none() {
                hub = match self.svc.backend.subscribe().await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(error = %e, "the fan-out worker cannot hear the event hub; it polls");
                        None
                    }
                };
            }
            // Once a minute, drop the inboxes of readers who went inactive.
            if last_sweep.elapsed() >= Duration::from_secs(60) {
                last_sweep = std::time::Instant::now();
                match self.svc.ops.sweep_inactive().await {
                    Ok(n) if n > 0 => tracing::info!(dropped = n, "dropped the inboxes of inactive readers"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "inactive-reader sweep failed; retrying in a minute"),
                }
            }
            // A step awaits storage (a durable checkpoint, a remote engine):
            // it never blocks a runtime worker.
            let idle = match self.step().await {
                Ok(StepOutcome::Idle) => true,
                Ok(StepOutcome::Progress { .. }) => false,
                Err(e) => {
                    if let crate::ServiceError::Store(se) = &e {
                        crate::health::count_error(se);
                    }
                    tracing::error!(error = %e, "fan-out step failed; retrying in 1s");
                    true
                }
            };
            if cancel.is_cancelled() {
                break;
            }
            if idle {
                let woken = async {
                    match hub.as_mut() {
                        Some(sub) => loop {
                            match sub.recv().await {
                                Received::Signal(Signal::Work) | Received::Lagged => return true,
                                Received::Signal(_) => {}
                                Received::Closed => return false,
                            }
                        },
                        None => std::future::pending().await,
                    }
                };
                let closed = tokio::select! {
                    _ = cancel.cancelled() => break,
                    open = woken => !open,
                    _ = tokio::time::sleep(self.poll) => false,
                };
                if closed {
                    hub = None;
                }
            }
        }
        tracing::info!("fan-out worker stopped");
    }
}
