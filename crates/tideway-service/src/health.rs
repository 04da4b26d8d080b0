//! What this node knows of its engines: a probe asks each one once a second
//! (the durable engine `SELECT 1` or its failure flag, the shared engine a
//! `PING` to every server) and keeps the answer, so `/readyz` answers from
//! memory in bounded time and `/metrics` shows each engine's state during a
//! fault. The probes mean one thing each:
//!
//! - **liveness**: only a failure this process cannot recover from without a
//!   restart (the embedded store after a write failed to reach the disk; a
//!   wedged runtime does not answer at all). An engine that is away is not
//!   one: a restart would not bring it back.
//! - **readiness**: this node can serve pages now, which needs its durable
//!   engine (the source of truth every page can be pulled from). The shared
//!   engine (Redis) partly or wholly away is not unready: pages are pulled
//!   from the database meanwhile.

use parking_lot::Mutex;
use std::time::{Duration, Instant};
use tideway_store::StoreError;

/// How often the probe asks each engine.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long one probe waits for an engine before it counts as down.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// A durable engine not heard from for this long makes the node unready
/// (the probe itself is stuck).
pub const STALE_AFTER: Duration = Duration::from_secs(5);

/// Which half of the backend an engine serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The source of truth (embedded store, PostgreSQL, MariaDB).
    Durable,
    /// Shared state that can be rebuilt (Redis; in process on one node).
    Shared,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Durable => "durable",
            Role::Shared => "shared",
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Whether the last probe succeeded; `None` before the first.
    up: Option<bool>,
    checked: Option<Instant>,
    last_error: Option<String>,
}

/// One engine's last known health.
#[derive(Debug)]
pub struct EngineHealth {
    role: Role,
    engine: &'static str,
    state: Mutex<State>,
}

impl EngineHealth {
    fn new(role: Role, engine: &'static str) -> Self {
        Self { role, engine, state: Mutex::new(State::default()) }
    }

    pub fn engine(&self) -> &'static str {
        self.engine
    }

    /// Records a probe's answer (and sets the engine's gauges).
    pub fn record(&self, outcome: std::result::Result<(), String>) {
        let labels = [("engine", self.engine), ("role", self.role.name())];
        let mut s = self.state.lock();
        s.checked = Some(Instant::now());
        match outcome {
            Ok(()) => {
                if s.up == Some(false) {
                    tracing::info!(engine = self.engine, role = self.role.name(), "engine answers again");
                }
                s.up = Some(true);
                s.last_error = None;
                metrics::gauge!("tideway_engine_up", &labels).set(1.0);
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                metrics::gauge!("tideway_engine_last_success_timestamp_seconds", &labels).set(now.as_secs_f64());
            }
            Err(e) => {
                if s.up != Some(false) {
                    tracing::warn!(engine = self.engine, role = self.role.name(), error = %e, "engine does not answer");
                }
                s.up = Some(false);
                s.last_error = Some(e);
                metrics::gauge!("tideway_engine_up", &labels).set(0.0);
            }
        }
    }

    /// `Ok` when the last probe, recent enough, succeeded; else why not.
    pub fn answering(&self) -> std::result::Result<(), String> {
        let s = self.state.lock();
        match (s.up, s.checked) {
            (Some(true), Some(at)) if at.elapsed() <= STALE_AFTER => Ok(()),
            (Some(true), Some(at)) => {
                Err(format!("{} has not been probed for {} ms", self.engine, at.elapsed().as_millis()))
            }
            (Some(false), _) => Err(format!(
                "{} does not answer: {}",
                self.engine,
                s.last_error.as_deref().unwrap_or("no reason given")
            )),
            _ => Err(format!("{} has not been probed yet", self.engine)),
        }
    }
}

/// The health of both halves of the backend.
#[derive(Debug)]
pub struct Health {
    pub durable: EngineHealth,
    pub shared: EngineHealth,
}

impl Health {
    pub fn new(durable: &'static str, shared: &'static str) -> Self {
        let h = Self {
            durable: EngineHealth::new(Role::Durable, durable),
            shared: EngineHealth::new(Role::Shared, shared),
        };
        for e in [&h.durable, &h.shared] {
            let labels = [("engine", e.engine), ("role", e.role.name())];
            metrics::gauge!("tideway_engine_up", &labels).set(f64::NAN);
            metrics::gauge!("tideway_engine_last_success_timestamp_seconds", &labels).set(f64::NAN);
            for kind in ERROR_KINDS {
                metrics::counter!("tideway_engine_errors_total", "engine" => e.engine, "kind" => *kind).absolute(0);
            }
        }
        h
    }
}

/// Creates, at 0, the service's counters (so an alert on a rate sees 0,
/// not "no data", before the first event).
pub fn register_series() {
    for name in [
        "tideway_fanout_delivered_total",
        "tideway_inbox_rebuilds_total",
        "tideway_inboxes_dropped_total",
        "tideway_inbox_backfill_lost_total",
        "tideway_home_pulled_on_error_total",
        "tideway_followee_copies_stale_total",
        "tideway_items_created_total",
        "tideway_items_pulled_total",
        "tideway_reactions_total",
        "tideway_stream_removals_lost_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
}

/// The kinds [`StoreError::kind`] names (every series exists from start).
const ERROR_KINDS: &[&str] = &["unavailable", "retryable", "corrupt"];

/// Counts an error a storage call met (`tideway_engine_errors_total`, by the
/// engine that failed and the kind of failure).
pub fn count_error(e: &StoreError) {
    let engine = e.engine().map_or("store", |e| e.name());
    metrics::counter!("tideway_engine_errors_total", "engine" => engine, "kind" => e.kind()).increment(1);
}
