//! This node among the others of a deployment: its node id, claimed in the
//! durable store with a heartbeat (two running nodes never share one), the
//! start epoch of that claim (its fan-out worker's id, so a restarted node
//! takes back at once the jobs its dead predecessor held), and its clock's
//! offset from the durable store's (measured every second by the probe).
//!
//! Which clock decides what:
//! - ids and the times stored with writes come from this node's clock,
//!   and writes are refused (503) while it is more than
//!   `server.max_clock_offset` from the database's, so no stored time is
//!   further off than that;
//! - deadlines that other nodes share (job leases, activity windows, the
//!   fan-out lag) follow the database's clock ([`FeedService::shared_now`]),
//!   so a skewed node cannot hold a job for minutes or drop inboxes as
//!   inactive;
//! - the id floor a node starts from ignores stored ids from beyond the
//!   tolerance ahead of the database's clock: a future id written by a
//!   skewed node never becomes the floor a correct node continues from.
//!
//! On a store that lives in this process (memory, embedded) there is no
//! other clock: the offset is 0 and claims only meet this process's
//! instances.

use super::FeedService;
use crate::clock::Clock;
use crate::error::{Result, ServiceError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;
use tideway_core::IdGenerator;
use tideway_core::{Key, Millis};
use tideway_store::{NodeClaim, WorkerId, rules};

/// A heartbeat older than this (by the store's clock) means its node is
/// dead: a node starting under the same id takes the id over. The probe
/// beats every second, so this is three missed beats.
pub const NODE_STALE: Duration = Duration::from_secs(3);

/// What this node knows of itself among the others.
#[derive(Debug)]
pub struct NodeState {
    /// This process's run (random at start): who holds the node id.
    instance: u64,
    /// The fan-out worker's id: random until the node id is claimed, then
    /// [`rules::worker_id`] of the id and the claim's epoch.
    worker: AtomicU64,
    claimed: AtomicBool,
    /// The store's clock minus this node's, in ms (0 until measured, and
    /// always on a store without a clock of its own).
    offset_ms: AtomicI64,
    /// Whether the last measurement found the offset within tolerance
    /// (starts true: a store without a clock never measures one).
    clock_ok: AtomicBool,
    /// Another instance claimed this node's id while it ran.
    lost: AtomicBool,
}

impl NodeState {
    pub fn new() -> Self {
        // Ids of unclaimed workers (tests, tools) are random: a node base of
        // their own, never superseding another's.
        Self {
            instance: rand::random(),
            worker: AtomicU64::new(rand::random()),
            claimed: AtomicBool::new(false),
            offset_ms: AtomicI64::new(0),
            clock_ok: AtomicBool::new(true),
            lost: AtomicBool::new(false),
        }
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

impl Default for NodeState {
    fn default() -> Self {
        Self::new()
    }
}

/// This node's clock, its item id generator and its standing among the
/// others: what every concern's service shares (each holds an `Arc` of it
/// beside the backend and its own options).
pub struct Node {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) ids: IdGenerator,
    state: NodeState,
    max_clock_offset_ms: i64,
}

impl Node {
    pub(crate) fn new(clock: Arc<dyn Clock>, node_id: u16, max_clock_offset_ms: i64) -> Result<Self> {
        Ok(Self { clock, ids: IdGenerator::new(node_id)?, state: NodeState::new(), max_clock_offset_ms })
    }

    /// This node's clock: item ids and the times stored with writes (which
    /// are refused while it is too far from the durable store's, see
    /// [`Self::check_clock`]).
    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    /// The deployment's clock (the durable store's, as this node estimates
    /// it): for deadlines other nodes share (job leases, activity windows,
    /// the fan-out lag).
    pub fn shared_now(&self) -> Millis {
        Millis(self.clock.now().0.saturating_add(self.state.offset_ms()))
    }

    /// `Err` (503) while this node's clock is further from the database's
    /// than `server.max_clock_offset`: every write checks it first.
    pub fn check_clock(&self) -> Result<()> {
        self.clock_answer()
            .map_err(|why| ServiceError::NodeUnavailable(format!("{why}; writes are refused on this node until then")))
    }

    /// This node's clock for a write: its ids and stored times (`503` while
    /// the clock is too far from the database's, see [`Self::check_clock`]).
    pub(crate) fn write_now(&self) -> Result<Millis> {
        self.check_clock()?;
        Ok(self.clock.now())
    }

    /// Whether the clock check passes (for readiness).
    pub(crate) fn clock_answer(&self) -> std::result::Result<(), String> {
        if self.state.clock_ok.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err(self.clock_message(self.state.offset_ms()))
        }
    }

    fn clock_message(&self, offset: i64) -> String {
        let (dir, by) = if offset < 0 { ("ahead of", -offset) } else { ("behind", offset) };
        format!(
            "this node's clock is {:.1} s {dir} the database's, beyond server.max_clock_offset ({} ms): fix its time synchronisation (NTP)",
            by as f64 / 1000.0,
            self.max_clock_offset_ms
        )
    }
}

/// Why a probe found this node must stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdLost(pub String);

impl FeedService {
    /// Claims `server.node_id` for this process in the durable store. A
    /// holder whose heartbeat is fresh may be a dead run of this node (a
    /// `kill -9` a moment ago) or a live other node: wait until the beat
    /// would be stale and ask again; still held means a live node has the id,
    /// and this one must not start. Returns the start epoch.
    pub async fn claim_node(&self) -> Result<u32> {
        let node = self.opts.node_id;
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
            self.backend.release_node(self.opts.node_id, self.node.state.instance).await?;
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
                self.opts.node_id
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
            && !self.backend.beat(self.opts.node_id, self.node.state.instance).await?
            && !self.node.state.lost.swap(true, Ordering::Relaxed)
        {
            tracing::error!(node_id = self.opts.node_id, "this node's id was claimed by another node: stopping");
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
        let ok = offset.abs() <= self.opts.max_clock_offset_ms;
        let was = self.node.state.clock_ok.swap(ok, Ordering::Relaxed);
        if was && !ok {
            tracing::error!(
                offset_ms = -offset,
                max_ms = self.opts.max_clock_offset_ms,
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
        if newest.0 <= now.saturating_add(self.opts.max_clock_offset_ms) {
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
