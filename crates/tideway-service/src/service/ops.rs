//! Operations: a user's counters and activity, store-wide stats, health,
//! the inactive-reader sweep, the state a snapshot carries, the delivery rate.

use super::node::{NODE_STALE, Node, NodeIdLost};
use crate::error::Result;
use crate::error::ServiceError;
use crate::health::Health;
use crate::view::*;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tideway_core::{Key, Millis, UserId};
use tideway_store::{Backend, NodeClaim, WorkerId, rules};

/// The node's own operations: its id claimed and beaten for, the engine
/// probes and readiness, a user's counters, store-wide stats and the
/// delivery rate, the inactive-reader sweep, the state a snapshot carries
/// (`snapshot.rs`). Holds the backend, the node, what the probes found and
/// the delivery counters.
pub struct OpsService {
    pub(crate) backend: Arc<dyn Backend>,
    node: Arc<Node>,
    /// What the engine probes last found ([`crate::health`]).
    health: Health,
    delivered_total: AtomicU64,
    /// Deliveries per wall-clock second, the last 16 seconds (second, count).
    delivery_rate: Mutex<[(u64, u64); 16]>,
    node_id: u16,
    active_window_ms: i64,
    hot_followers: u64,
}

impl OpsService {
    pub(crate) fn new(backend: Arc<dyn Backend>, node: Arc<Node>, opts: &super::ServiceOptions) -> Self {
        Self {
            backend,
            node,
            health: Health::new(opts.durable_engine, opts.shared_engine),
            delivered_total: AtomicU64::new(0),
            delivery_rate: Mutex::new([(0, 0); 16]),
            node_id: opts.node_id,
            active_window_ms: opts.active_window_ms,
            hot_followers: opts.hot_followers,
        }
    }

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
    pub(crate) fn deliveries_per_sec(&self) -> u64 {
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
        let stale = self.backend.inactive_before(Millis(now.0.saturating_sub(self.active_window_ms))).await?;
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
            hot: c.followers >= self.hot_followers,
            active: last.is_some_and(|t| now.0 - t.0 <= self.active_window_ms),
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

impl OpsService {
    /// Claims `server.node_id` for this process in the durable store. A
    /// holder whose heartbeat is fresh may be a dead run of this node (a
    /// `kill -9` a moment ago) or a live other node: wait until the beat
    /// would be stale and ask again; still held means a live node has the id,
    /// and this one must not start. Returns the start epoch.
    pub async fn claim_node(&self) -> Result<u32> {
        let node = self.node_id;
        let stale_ms = NODE_STALE.as_millis() as i64;
        let mut waited = false;
        loop {
            match self.backend.claim_node(node, self.node.state.instance, stale_ms).await? {
                NodeClaim::Claimed { epoch } => {
                    self.node.state.worker.store(rules::worker_id(node, epoch), Ordering::Relaxed);
                    self.node.state.claimed.store(true, Ordering::Relaxed);
                    tracing::info!(node_id = node, epoch, "node id claimed");
                    return Ok(epoch);
                }
                NodeClaim::Held { age_ms } if !waited => {
                    tracing::info!(
                        node_id = node,
                        heartbeat_age_ms = age_ms,
                        "node id held by a run that beat recently (a restart after a crash?): waiting for its heartbeat to go stale"
                    );
                    waited = true;
                    let wait = (stale_ms - age_ms).max(0) as u64 + 100;
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                NodeClaim::Held { age_ms } => {
                    let unset =
                        if node == 0 { " (server.node_id is not set: every node left at 0 claims 0)" } else { "" };
                    return Err(ServiceError::Invalid(tideway_core::DomainError::invalid(
                        "server.node_id",
                        format!(
                            "{node} is held by another running node (its heartbeat is {age_ms} ms old){unset}: give each node its own server.node_id"
                        ),
                    )));
                }
            }
        }
    }

    /// Gives the node id up (clean shutdown): a restart need not wait for
    /// the heartbeat to go stale.
    pub async fn release_node(&self) -> Result<()> {
        if self.node.state.claimed.swap(false, Ordering::Relaxed) {
            self.backend.release_node(self.node_id, self.node.state.instance).await?;
        }
        Ok(())
    }

    /// The fan-out worker's id in job leases.
    pub fn worker_id(&self) -> WorkerId {
        self.node.state.worker.load(Ordering::Relaxed)
    }

    /// Set when another instance claimed this node's id: the node must stop.
    pub fn node_id_lost(&self) -> Option<NodeIdLost> {
        self.node.state.lost.load(Ordering::Relaxed).then(|| {
            NodeIdLost(format!(
                "server.node_id {} was claimed by another node while this one ran (its heartbeats were late): \
                 two nodes must not share an id",
                self.node_id
            ))
        })
    }

    /// The durable engine's probe, the one readiness counts: reads the
    /// store's clock (one trivial statement, on a session of its own on
    /// remote engines, so a busy pool cannot delay it) and measures this
    /// node's offset from it.
    pub(crate) async fn probe_durable(&self) -> tideway_store::Result<()> {
        self.measure_clock().await
    }

    /// Records the heartbeat of a claimed node id (beside the probe, on
    /// the shared pool: a late beat makes no node unready, and only a beat
    /// another instance's claim refused stops this one).
    pub(crate) async fn beat(&self) -> tideway_store::Result<()> {
        if self.node.state.claimed.load(Ordering::Relaxed)
            && !self.backend.beat(self.node_id, self.node.state.instance).await?
            && !self.node.state.lost.swap(true, Ordering::Relaxed)
        {
            tracing::error!(node_id = self.node_id, "this node's id was claimed by another node: stopping");
        }
        Ok(())
    }

    /// Reads the store's clock and records this node's offset from it (the
    /// midpoint of the read by this node's clock).
    pub(crate) async fn measure_clock(&self) -> tideway_store::Result<()> {
        let before = self.node.clock.now();
        let Some(store) = self.backend.clock().await? else {
            metrics::gauge!("tideway_clock_offset_seconds").set(0.0);
            return Ok(());
        };
        if !self.node.clock.is_real() {
            return Ok(());
        }
        let after = self.node.clock.now();
        let mid = before.0 + (after.0 - before.0) / 2;
        let offset = store.0 - mid;
        self.node.state.offset_ms.store(offset, Ordering::Relaxed);
        // Positive: this node is ahead.
        metrics::gauge!("tideway_clock_offset_seconds").set(-offset as f64 / 1000.0);
        let ok = offset.abs() <= self.node.max_clock_offset_ms;
        let was = self.node.state.clock_ok.swap(ok, Ordering::Relaxed);
        if was && !ok {
            tracing::error!(
                offset_ms = -offset,
                max_ms = self.node.max_clock_offset_ms,
                "{}; writes are refused until it is corrected",
                self.node.clock_message(offset)
            );
        } else if !was && ok {
            tracing::info!(offset_ms = -offset, "this node's clock agrees with the database's again: writes resume");
        }
        Ok(())
    }

    /// Starts the id allocator above the newest stored key, unless that key
    /// is from beyond the tolerance ahead of the deployment's clock (written
    /// by a node whose clock was ahead): continuing from it would date every
    /// new item that far ahead too.
    pub(crate) fn observe_stored(&self, max_key: Key) {
        let newest = tideway_core::ids::key_time(max_key);
        let now = self.node.shared_now().0;
        if newest.0 <= now.saturating_add(self.node.max_clock_offset_ms) {
            self.node.ids.observe(max_key);
        } else {
            tracing::warn!(
                newest_id_ahead_ms = newest.0 - now,
                "the newest stored id is dated ahead of the database's clock (a node's clock was ahead): \
                 new ids continue from the clock, not from it"
            );
        }
    }
}
