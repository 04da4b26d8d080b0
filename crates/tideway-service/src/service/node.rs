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
//!   fan-out lag) follow the database's clock ([`Node::shared_now`]),
//!   so a skewed node cannot hold a job for minutes or drop inboxes as
//!   inactive;
//! - the id floor a node starts from ignores stored ids from beyond the
//!   tolerance ahead of the database's clock: a future id written by a
//!   skewed node never becomes the floor a correct node continues from.
//!
//! On a store that lives in this process (memory, embedded) there is no
//! other clock: the offset is 0 and claims only meet this process's
//! instances.

use crate::clock::Clock;
use crate::error::{Result, ServiceError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;
use tideway_core::IdGenerator;
use tideway_core::Millis;

/// A heartbeat older than this (by the store's clock) means its node is
/// dead: a node starting under the same id takes the id over. The probe
/// beats every second, so this is three missed beats.
pub const NODE_STALE: Duration = Duration::from_secs(3);

/// What this node knows of itself among the others.
#[derive(Debug)]
pub struct NodeState {
    /// This process's run (random at start): who holds the node id.
    pub(crate) instance: u64,
    /// The fan-out worker's id: random until the node id is claimed, then
    /// [`tideway_store::rules::worker_id`] of the id and the claim's epoch.
    pub(crate) worker: AtomicU64,
    pub(crate) claimed: AtomicBool,
    /// The store's clock minus this node's, in ms (0 until measured, and
    /// always on a store without a clock of its own).
    pub(crate) offset_ms: AtomicI64,
    /// Whether the last measurement found the offset within tolerance
    /// (starts true: a store without a clock never measures one).
    pub(crate) clock_ok: AtomicBool,
    /// Another instance claimed this node's id while it ran.
    pub(crate) lost: AtomicBool,
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
    pub(crate) state: NodeState,
    pub(crate) max_clock_offset_ms: i64,
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

    pub(crate) fn clock_message(&self, offset: i64) -> String {
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
