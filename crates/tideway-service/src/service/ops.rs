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
        let now = self.clock.now();
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
        let now = self.clock.now();
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

    /// Fails when storage cannot take writes until the process restarts
    /// (after a write failed to reach the disk): the liveness probe.
    pub async fn health(&self) -> Result<()> {
        Ok(self.backend.health().await?)
    }

    pub async fn stats(&self) -> Result<StatsView> {
        let s = self.backend.stats().await?;
        let ib = self.backend.inbox_stats().await?;
        let now = self.clock.now();
        Ok(StatsView {
            users: s.users,
            items: s.items,
            follows: s.follows,
            pending: s.pending_jobs,
            delivered_total: self.delivered_total.load(Ordering::Relaxed),
            deliveries_per_sec: self.deliveries_per_sec(),
            oldest_pending_ms: s.oldest_job.map_or(0, |t| u64::try_from(now.0 - t.0).unwrap_or(0)),
            inboxes: ib.inboxes,
            inbox_entries: ib.entries,
            inbox_bytes: ib.bytes,
        })
    }
}
