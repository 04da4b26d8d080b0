//! Fan-out jobs on SQL: rows written in the same transaction as their item,
//! claimed with a lease (`FOR UPDATE SKIP LOCKED`: workers never wait on
//! each other), advanced by `tideway_store::rules::progress`.

use crate::SqlStore;
use crate::rows::Bind::{self, Int};
use crate::rows::{in_list, int, jobs_of, k, marks, oint, w};
use crate::tx::OrUnavailable;
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_core::{Millis, UserId};
use tideway_store::rules::{self, JobState, ProgressEffect};
use tideway_store::{Job, JobProgress, Jobs, NodeClaim, Result, SharedTrust, TrustChange, WorkerId};

#[async_trait]
impl Jobs for SqlStore {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let rows = self
            .fetch(
                &format!("SELECT k, author, cur_since, cur_user, created FROM tw_jobs ORDER BY k LIMIT {limit}"),
                &[],
            )
            .await?;
        jobs_of(&rows)
    }

    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            // Jobs another worker is claiming right now are skipped, not waited on.
            // A job held by an earlier run of this node (`rules::supersedes`:
            // same node bits, lower epoch) is taken at once.
            let sql = format!(
                "SELECT k, author, cur_since, cur_user, created FROM tw_jobs \
                     WHERE holder IS NULL OR holder = ? OR lease_until <= ? OR (holder >= ? AND holder < ?) \
                     ORDER BY k LIMIT {limit} FOR UPDATE SKIP LOCKED"
            );
            let base = w(worker >> 32 << 32);
            let rows = self.rows_in(&mut tx, &sql, &[Int(w(worker)), Int(now.0), Int(base), Int(w(worker))]).await?;
            let jobs: Vec<Job> = jobs_of(&rows)?;
            if !jobs.is_empty() {
                let sql = format!("UPDATE tw_jobs SET holder = ?, lease_until = ? WHERE k IN ({})", marks(jobs.len()));
                let lease = [w(worker), now.0.saturating_add(lease_ms)];
                let binds: Vec<Bind<'_>> = lease.into_iter().chain(jobs.iter().map(|j| k(j.key))).map(Int).collect();
                self.exec_in(&mut tx, &sql, &binds).await?;
            }
            self.commit(tx).await?;
            Ok(jobs)
        })
        .await
    }

    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        let key_of = |p: &JobProgress| match *p {
            JobProgress::Checkpoint(key, _) | JobProgress::Complete(key) => key,
        };
        if progress.is_empty() {
            return Ok(vec![]);
        }
        // The jobs' rows locked in one statement, the progress decided in
        // order against them (a later entry sees an earlier one's effect),
        // then one delete of the completed and an update per moved cursor.
        let (m, binds) = in_list(progress.iter().map(|p| k(key_of(p))));
        let read = format!("SELECT k, cur_since, cur_user, holder FROM tw_jobs WHERE k IN ({m}) ORDER BY k FOR UPDATE");
        let binds: Vec<Bind<'_>> = binds.into_iter().map(Int).collect();
        self.retrying(|| async {
            let mut tx = self.begin().await?;
            let mut jobs: HashMap<u64, JobState> = HashMap::new();
            for row in self.rows_in(&mut tx, &read, &binds).await? {
                let cursor = match (oint(&row, 1)?, oint(&row, 2)?) {
                    (Some(s), Some(u)) => Some((Millis(s), UserId(u as u64))),
                    _ => None,
                };
                let held_by_other = oint(&row, 3)?.is_some_and(|h| h != w(worker));
                jobs.insert(int(&row, 0)? as u64, JobState { held_by_other, cursor });
            }
            let mut moved: HashMap<u64, (Millis, UserId)> = HashMap::new();
            let mut completed = Vec::new();
            let mut recorded = Vec::with_capacity(progress.len());
            for p in progress {
                let key = key_of(p);
                let done = match rules::progress(jobs.get(&key).copied(), *p) {
                    Some(ProgressEffect::Advance(pos)) => {
                        if let Some(j) = jobs.get_mut(&key) {
                            j.cursor = Some(pos);
                        }
                        moved.insert(key, pos);
                        true
                    }
                    Some(ProgressEffect::Complete) => {
                        jobs.remove(&key);
                        moved.remove(&key);
                        completed.push(key);
                        true
                    }
                    None => false,
                };
                recorded.push(done);
            }
            if !completed.is_empty() {
                let (m, binds) = in_list(completed.iter().map(|c| k(*c)));
                let binds: Vec<Bind<'_>> = binds.into_iter().map(Int).collect();
                self.exec_in(&mut tx, &format!("DELETE FROM tw_jobs WHERE k IN ({m})"), &binds).await?;
            }
            let mut moved: Vec<_> = moved.into_iter().collect();
            moved.sort_unstable_by_key(|(key, _)| *key);
            for (key, pos) in moved {
                self.exec_in(
                    &mut tx,
                    "UPDATE tw_jobs SET cur_since = ?, cur_user = ? WHERE k = ?",
                    &[Int(pos.0.0), Int(k(pos.1.0)), Int(k(key))],
                )
                .await?;
            }
            self.commit(tx).await?;
            Ok(recorded)
        })
        .await
    }

    async fn claim_node(&self, node: u16, instance: u64, stale_ms: i64) -> Result<NodeClaim> {
        let now_ms = self.dialect.now_ms();
        // Two nodes claiming a new id at once: one insert wins, the other
        // finds its row on the next attempt.
        for _ in 0..3 {
            let attempt = self
                .retrying(|| async move {
                    let mut tx = self.begin().await?;
                    let now: i64 = sqlx::query_scalar(&format!("SELECT {now_ms}"))
                        .fetch_one(&mut *tx)
                        .await
                        .or_unavailable(self)?;
                    let rows = self
                        .rows_in(
                            &mut tx,
                            "SELECT instance, epoch, beat FROM tw_nodes WHERE node = ? FOR UPDATE",
                            &[Int(i64::from(node))],
                        )
                        .await?;
                    let claim = match crate::rows::decoded::<ClaimRow>(&rows)?.first() {
                        None => {
                            let inserted = sqlx::query(&self.q(
                                "INSERT INTO tw_nodes (node, instance, epoch, beat, beats) VALUES (?, ?, 1, ?, 0)",
                            ))
                            .bind(i64::from(node))
                            .bind(w(instance))
                            .bind(now)
                            .execute(&mut *tx)
                            .await;
                            match inserted {
                                Ok(_) => Some(NodeClaim::Claimed { epoch: 1 }),
                                Err(e) if crate::tx::is_unique_violation(&e) => None,
                                Err(e) => return Err(e).or_unavailable(self),
                            }
                        }
                        Some(&ClaimRow { instance: holder, epoch, beat }) => {
                            if holder.is_some_and(|h| h != w(instance)) && now - beat < stale_ms {
                                Some(NodeClaim::Held { age_ms: now - beat })
                            } else {
                                let epoch = u32::try_from(epoch + 1).unwrap_or(1);
                                self.exec_in(
                                    &mut tx,
                                    "UPDATE tw_nodes SET instance = ?, epoch = ?, beat = ?, beats = beats + 1 WHERE node = ?",
                                    &[Int(w(instance)), Int(i64::from(epoch)), Int(now), Int(i64::from(node))],
                                )
                                .await?;
                                Some(NodeClaim::Claimed { epoch })
                            }
                        }
                    };
                    self.commit(tx).await?;
                    Ok(claim)
                })
                .await?;
            if let Some(claim) = attempt {
                return Ok(claim);
            }
        }
        Err(tideway_store::StoreError::unavailable_because(
            self.dialect.engine(),
            format!("node id {node}: the claim raced with other nodes' three times"),
        ))
    }

    async fn beat(&self, node: u16, instance: u64) -> Result<bool> {
        let sql = format!(
            "UPDATE tw_nodes SET beat = {}, beats = beats + 1 WHERE node = ? AND instance = ?",
            self.dialect.now_ms()
        );
        Ok(self.exec(&sql, &[Int(i64::from(node)), Int(w(instance))]).await? == 1)
    }

    async fn release_node(&self, node: u16, instance: u64) -> Result<()> {
        self.exec(
            "UPDATE tw_nodes SET instance = NULL WHERE node = ? AND instance = ?",
            &[Int(i64::from(node)), Int(w(instance))],
        )
        .await?;
        Ok(())
    }

    /// `SharedTrust::apply`'s rule as one `UPDATE` at the clock read first
    /// in its transaction (assignments in an order MySQL, which reads each
    /// column as already assigned, agrees with), then the row.
    async fn shared_trust(&self, change: TrustChange) -> Result<SharedTrust> {
        // (each with the clock as its first argument)
        let (sql, args): (Option<&str>, Vec<i64>) = match change {
            TrustChange::Read => (None, vec![]),
            TrustChange::Distrust { hold_ms } => (
                Some(
                    "UPDATE tw_trust SET gen = CASE WHEN trusted = 1 THEN gen + 1 ELSE gen END, \
                     since = CASE WHEN trusted = 1 THEN ? ELSE since END, missed = missed + 1, \
                     hold_until = GREATEST(hold_until, ? + ?), trusted = 0 WHERE id = 1",
                ),
                vec![hold_ms],
            ),
            TrustChange::Restore { generation, missed } => (
                Some(
                    "UPDATE tw_trust SET trusted = 1 \
                     WHERE ? >= hold_until AND id = 1 AND trusted = 0 AND gen = ? AND missed = ?",
                ),
                vec![generation as i64, missed as i64],
            ),
        };
        let clock = format!("SELECT {}", self.dialect.now_ms());
        let (sql, args, clock) = (sql.map(|s| self.q(s)), &args, &clock);
        let sql = &sql;
        let (row, now) = self
            .retrying(|| async move {
                let mut tx = self.begin().await?;
                let now: i64 = sqlx::query_scalar(clock).fetch_one(&mut *tx).await.or_unavailable(self)?;
                if let Some(sql) = sql {
                    let mut q = sqlx::query(sql).bind(now);
                    if matches!(change, TrustChange::Distrust { .. }) {
                        q = q.bind(now);
                    }
                    for a in args {
                        q = q.bind(*a);
                    }
                    q.execute(&mut *tx).await.or_unavailable(self)?;
                }
                let row = sqlx::query("SELECT gen, missed, trusted, since, hold_until FROM tw_trust WHERE id = 1")
                    .fetch_optional(&mut *tx)
                    .await
                    .or_unavailable(self)?;
                self.commit(tx).await?;
                Ok((row, now))
            })
            .await?;
        let row = row.ok_or_else(|| tideway_store::StoreError::corrupt("tw_trust has no row"))?;
        let n = |i: usize| int(&row, i).map(|v| u64::try_from(v).unwrap_or(0));
        Ok(SharedTrust {
            generation: n(0)?,
            missed: n(1)?,
            trusted: int(&row, 2)? == 1,
            since: Millis(int(&row, 3)?),
            hold_until: Millis(int(&row, 4)?),
            now: Millis(now),
        })
    }

    /// On the probe's own session: readiness asks this once a second.
    async fn clock(&self) -> Result<Option<Millis>> {
        let sql = format!("SELECT {}", self.dialect.now_ms());
        let rows = self.probe.fetch_all(|| sqlx::query(&sql)).await.or_unavailable(self)?;
        let row = rows.first().ok_or_else(|| tideway_store::StoreError::corrupt("the clock's read answered no row"))?;
        Ok(Some(Millis(int(row, 0)?)))
    }
}

crate::rows::int_row!(
    /// A node id's claim (`SELECT instance, epoch, beat FROM tw_nodes`).
    ClaimRow { instance: Option<i64>, epoch: i64, beat: i64 }
);
