//! Fan-out jobs on SQL: rows written in the same transaction as their item,
//! claimed with a lease (`FOR UPDATE SKIP LOCKED`: workers never wait on
//! each other), advanced by `tideway_store::rules::progress`.

use crate::SqlStore;
use crate::rows::{job_of, k, marks, oint, w};
use async_trait::async_trait;
use tideway_core::{Millis, UserId};
use tideway_store::rules::{self, JobState, ProgressEffect};
use tideway_store::{Job, JobProgress, Jobs, Result, WorkerId};

#[async_trait]
impl Jobs for SqlStore {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let rows = self
            .fetch(
                &format!("SELECT k, author, cur_since, cur_user, created FROM tw_jobs ORDER BY k LIMIT {limit}"),
                &[],
            )
            .await?;
        rows.iter().map(job_of).collect()
    }

    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        self.retrying(|| async move {
                let mut tx = self.begin().await?;
                // Jobs another worker is claiming right now are skipped, not waited on.
                let sql = self.q(&format!(
                    "SELECT k, author, cur_since, cur_user, created FROM tw_jobs \
                     WHERE holder IS NULL OR holder = ? OR lease_until <= ? ORDER BY k LIMIT {limit} FOR UPDATE SKIP LOCKED"
                ));
                let rows = sqlx::query(&sql).bind(w(worker)).bind(now.0).fetch_all(&mut *tx).await.map_err(self.err())?;
                let jobs: Vec<Job> = rows.iter().map(job_of).collect::<Result<_>>()?;
                if !jobs.is_empty() {
                    let sql =
                        self.q(&format!("UPDATE tw_jobs SET holder = ?, lease_until = ? WHERE k IN ({})", marks(jobs.len())));
                    let mut q = sqlx::query(&sql).bind(w(worker)).bind(now.0.saturating_add(lease_ms));
                    for j in &jobs {
                        q = q.bind(k(j.key));
                    }
                    q.execute(&mut *tx).await.map_err(self.err())?;
                }
                self.commit(tx).await?;
                Ok(jobs)
        })
        .await
    }

    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            let mut recorded = Vec::with_capacity(progress.len());
            for p in progress {
                let key = match *p {
                    JobProgress::Checkpoint(key, _) | JobProgress::Complete(key) => key,
                };
                let row =
                    sqlx::query(&self.q("SELECT cur_since, cur_user, holder FROM tw_jobs WHERE k = ? FOR UPDATE"))
                        .bind(k(key))
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(self.err())?;
                let Some(row) = row else {
                    recorded.push(false);
                    continue;
                };
                let cursor = match (oint(&row, 0)?, oint(&row, 1)?) {
                    (Some(s), Some(u)) => Some((Millis(s), UserId(u as u64))),
                    _ => None,
                };
                let held_by_other = oint(&row, 2)?.is_some_and(|h| h != w(worker));
                let done = match rules::progress(Some(JobState { held_by_other, cursor }), *p) {
                    Some(ProgressEffect::Advance(pos)) => {
                        sqlx::query(&self.q("UPDATE tw_jobs SET cur_since = ?, cur_user = ? WHERE k = ?"))
                            .bind(pos.0.0)
                            .bind(k(pos.1.0))
                            .bind(k(key))
                            .execute(&mut *tx)
                            .await
                            .map_err(self.err())?;
                        true
                    }
                    Some(ProgressEffect::Complete) => {
                        sqlx::query(&self.q("DELETE FROM tw_jobs WHERE k = ?"))
                            .bind(k(key))
                            .execute(&mut *tx)
                            .await
                            .map_err(self.err())?;
                        true
                    }
                    None => false,
                };
                recorded.push(done);
            }
            self.commit(tx).await?;
            Ok(recorded)
        })
        .await
    }
}
