//! Store-wide counts (`/v1/stats`, the gauges) and health (readiness).

use crate::SqlStore;
use crate::rows::{int, oint};
use std::time::{Duration, Instant};
use tideway_core::Millis;
use tideway_store::{Result, StoreError, StoreStats};

/// How long `stats` reuses its counts (they count whole tables).
const STATS_TTL: Duration = Duration::from_secs(10);

impl SqlStore {
    /// [`Graph::stats`](tideway_store::Graph::stats).
    pub(crate) async fn read_stats(&self) -> Result<StoreStats> {
        // Readiness: the database answers now, whatever the counts' age.
        self.check_health().await?;
        // Pending jobs are read every time (the table holds only what is
        // still to deliver: small), so `pending` is 0 exactly when every
        // accepted write is delivered; the store-wide counts are COUNT(*)s
        // of whole tables, reused for `STATS_TTL`.
        let jobs = self.fetch("SELECT COUNT(*), MIN(created) FROM tw_jobs", &[]).await?;
        let (pending_jobs, oldest_job) = match jobs.first() {
            Some(r) => (int(r, 0)?.max(0) as u64, oint(r, 1)?.map(Millis)),
            None => (0, None),
        };
        let mut cached = self.stats.lock().await;
        if let Some((at, s)) = *cached
            && at.elapsed() < STATS_TTL
        {
            return Ok(StoreStats { pending_jobs, oldest_job, ..s });
        }
        let max = |sql: &'static str| async move {
            let rows = self.fetch(sql, &[]).await?;
            Ok::<u64, StoreError>(match rows.first() {
                Some(r) => oint(r, 0)?.unwrap_or(0).max(0) as u64,
                None => 0,
            })
        };
        let s = StoreStats {
            users: self.count("SELECT COUNT(*) FROM tw_users", &[]).await?,
            items: self.count("SELECT COUNT(*) FROM tw_items WHERE live = 1", &[]).await?,
            follows: self.count("SELECT COUNT(*) FROM tw_follows", &[]).await?,
            pending_jobs,
            oldest_job,
            max_key: max("SELECT MAX(id) FROM tw_items")
                .await?
                .max(max("SELECT MAX(k) FROM tw_inserts").await?)
                .max(max("SELECT MAX(id) FROM tw_promotions").await?),
            index: None,
        };
        *cached = Some((Instant::now(), s));
        Ok(s)
    }

    /// [`Graph::health`](tideway_store::Graph::health): the database answers.
    pub(crate) async fn check_health(&self) -> Result<()> {
        self.fetch("SELECT 1", &[]).await.map(|_| ())
    }
}
