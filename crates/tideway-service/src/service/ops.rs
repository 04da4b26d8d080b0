//! Operations: a user's counters and activity, store-wide stats, health,
//! the inactive-reader sweep, the state a snapshot carries, the delivery rate.

use super::FeedService;
use crate::error::Result;
use crate::view::*;
use std::sync::atomic::Ordering;
use tideway_core::{Key, Millis, UserId};

impl FeedService {
    /// Counts deliveries for the rate shown in `/v1/stats`.
    pub(crate) fn record_deliveries(&self, n: usize) {
        self.delivered_total.fetch_add(n as u64, Ordering::Relaxed);
        let sec = (Millis::now().0 / 1000) as u64;
        let mut r = self.delivery_rate.lock();
        let slot = &mut r[(sec % 16) as usize];
        if slot.0 != sec {
            *slot = (sec, 0);
        }
        slot.1 += n as u64;
    }

    /// Deliveries per second over the last 10 full seconds.
    pub(super) fn deliveries_per_sec(&self) -> u64 {
        let sec = (Millis::now().0 / 1000) as u64;
        let r = self.delivery_rate.lock();
        r.iter().filter(|(s, _)| *s < sec && *s + 10 >= sec).map(|(_, n)| n).sum::<u64>() / 10
    }

    /// Hot authors' newest unpushed keys (for the snapshot).
    pub async fn unpushed_snapshot(&self) -> Result<Vec<(UserId, Key)>> {
        Ok(self.backend.export_unpushed().await?)
    }

    /// Readers' last activity (for the snapshot).
    pub async fn activity_snapshot(&self) -> Result<Vec<(UserId, Millis)>> {
        Ok(self.backend.export_activity().await?)
    }

    /// Restores the shared state a snapshot carried.
    pub(crate) async fn restore_memory(
        &self,
        unpushed: Vec<(UserId, Key)>,
        active: Vec<(UserId, Millis)>,
    ) -> Result<()> {
        self.backend.import_unpushed(&unpushed).await?;
        self.backend.import_activity(&active).await?;
        Ok(())
    }

    /// Drops the inboxes of readers inactive for longer than
    /// `fanout.active_window`: they stop receiving pushes, and their next read
    /// rebuilds the inbox. Returns how many were dropped.
    pub async fn sweep_inactive(&self) -> Result<usize> {
        let now = self.node.shared_now();
        let stale = self.backend.inactive_before(Millis(now.0.saturating_sub(self.opts.active_window_ms))).await?;
        let mut dropped = 0;
        for u in stale {
            if self.backend.inbox_floor(u).await?.is_some() {
                self.backend.drop_inbox(u).await?;
                dropped += 1;
            }
        }
        if dropped > 0 {
            metrics::counter!("tideway_inboxes_dropped_total").increment(dropped as u64);
        }
        Ok(dropped)
    }

    pub async fn user(&self, user: UserId) -> Result<UserView> {
        let c = self.backend.counts(user).await?;
        let last = self.backend.last_active(&[user]).await?.pop().flatten();
        let now = self.node.shared_now();
        Ok(UserView {
            id: user,
            following: c.following,
            followers: c.followers,
            items: c.items,
            hot: c.followers >= self.opts.hot_followers,
            active: last.is_some_and(|t| now.0 - t.0 <= self.opts.active_window_ms),
            last_active_at: last,
        })
    }

    /// The liveness probe: fails only when storage cannot serve until this
    /// process restarts (an in-process store whose write failed to reach
    /// the disk). A remote engine that is away is not this process's
    /// failure, and a restart would not cure it: it is not asked.
    pub async fn liveness(&self) -> Result<()> {
        if !self.backend.profile().round_trips {
            self.backend.health().await?;
        }
        Ok(())
    }

    /// The readiness probe, from what the engine probes last found (no
    /// engine is asked here): ready when the durable engine answered the
    /// last probe, a few seconds ago at most. The shared engine does not
    /// count (pages are pulled from the durable one while it is away).
    pub fn readiness(&self) -> std::result::Result<(), String> {
        self.health.durable.answering()?;
        self.node.clock_answer()
    }

    /// Whether the shared engine answered its last probe (for `/v1/stats`
    /// and logs; readiness does not depend on it).
    pub fn shared_answering(&self) -> std::result::Result<(), String> {
        self.health.shared.answering()
    }

    /// Asks both engines whether they answer, each within
    /// [`crate::health::PROBE_TIMEOUT`], and records the answers: run every
    /// [`crate::health::PROBE_EVERY`] by the server, and once before it
    /// listens.
    pub async fn probe_engines(&self) {
        use crate::health::PROBE_TIMEOUT;
        let timed = |r: std::result::Result<tideway_store::Result<()>, tokio::time::error::Elapsed>| match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.chain()),
            Err(_) => Err(format!("no answer within {} ms", PROBE_TIMEOUT.as_millis())),
        };
        let (d, s, beat) = tokio::join!(
            tokio::time::timeout(PROBE_TIMEOUT, self.probe_durable()),
            tokio::time::timeout(PROBE_TIMEOUT, self.backend.ping()),
            tokio::time::timeout(PROBE_TIMEOUT, self.beat())
        );
        self.health.durable.record(timed(d));
        self.health.shared.record(timed(s));
        if let Err(e) = timed(beat) {
            tracing::debug!(error = %e, "this node's heartbeat was not recorded");
            metrics::counter!("tideway_node_beats_missed_total").increment(1);
        }
    }

    /// Store-wide figures from the durable engine (fails when it does), and
    /// the inboxes' from the shared one when it answers (`None` when not:
    /// the fan-out figures stay readable through a Redis fault).
    pub async fn stats(&self) -> Result<StatsView> {
        let (s, ib) = tokio::join!(self.backend.stats(), self.backend.inbox_stats());
        let s = s?;
        let ib = ib.inspect_err(crate::health::count_error).ok();
        let now = self.node.shared_now();
        Ok(StatsView {
            users: s.users,
            items: s.items,
            follows: s.follows,
            pending: s.pending_jobs,
            delivered_total: self.delivered_total.load(Ordering::Relaxed),
            deliveries_per_sec: self.deliveries_per_sec(),
            oldest_pending_ms: s.oldest_job.map_or(0, |t| u64::try_from(now.0 - t.0).unwrap_or(0)),
            inboxes: ib,
            index: s.index,
        })
    }
}
