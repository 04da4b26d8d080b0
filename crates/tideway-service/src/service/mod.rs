//! [`FeedService`]: the services of one node, one per concern, composed
//! here; each holds only what it uses:
//! * `items.rs`: [`items::ItemService`], items, reactions, promotions;
//! * `graph.rs`: [`graph::GraphService`], follows, blocks, mutes, lists,
//!   relationships;
//! * `notifications.rs`: [`notifications::NotificationService`], groups,
//!   their marks, and the ops every other write sends them;
//! * `live.rs`: [`live::LiveService`], the live feed;
//! * `node.rs`: [`node::Node`], the clock, ids and standing;
//! * `reader.rs`: [`reader::ItemReader`], items read and hydrated, access;
//! * `effects.rs`: what a write does once stored (signals, copies
//!   forgotten, removal notes, distrust of the shared half);
//! * `feeds.rs` and `postings.rs`: [`feeds::FeedsService`], home and
//!   profile pages, the mention, tag and object feeds, home insertions,
//!   inbox rebuilds;
//! * `stream.rs`: [`stream::StreamService`], the home stream;
//! * `ops.rs`: [`ops::OpsService`], the node's own operations: its id
//!   claimed, the engine probes and readiness, users, stats, the inactive
//!   sweep, snapshot state (`crate::snapshot`).

mod effects;
pub mod feeds;
pub mod graph;
pub mod items;
pub mod live;
pub mod node;
pub mod notifications;
pub use notifications::Backfilled;
pub mod ops;
mod postings;
pub mod reader;
pub mod stream;

use crate::clock::Clock;
use crate::error::Result;
use std::sync::Arc;
use tideway_config::{BackendKind, Config};
use tideway_store::{Backend, NodeCopies, Profile};

/// Ids tried for one new item before giving up (a collision only happens
/// for imported times; each one makes the allocator jump further).
const MAX_ID_ATTEMPTS: u32 = 1024;

/// Settings the service needs (a subset of [`Config`]).
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    pub max_len: usize,
    pub max_following: usize,
    pub hot_followers: u64,
    pub active_window_ms: i64,
    pub chunk_size: usize,
    pub node_id: u16,
    /// How far ahead of the server clock an imported `created_at` may be.
    pub max_clock_skew_ms: i64,
    /// How long a fan-out worker holds a job it claimed without progress.
    pub lease_ms: i64,
    /// Chunks of a worker step in flight at once
    /// ([`Profile::chunks_in_flight`]).
    pub chunks_in_flight: usize,
    /// Whether pages read ahead: the counts and marks of the items they will
    /// likely show beside the reads that filter them ([`Profile::reads_ahead`]).
    pub read_ahead: bool,
    /// Whether a post wakes the fan-out workers from a task of its own
    /// instead of before it answers ([`Profile::background_signals`]).
    pub background_signals: bool,
    /// How long a live feed snapshot serves its walk (`live.snapshot_ttl`).
    pub snapshot_ttl_ms: i64,
    /// How old an event id a home stream resumes from (`stream.replay_window`).
    pub replay_window_ms: i64,
    /// How long a home stream waits before it sends an entry, for writes
    /// that took an id earlier to be stored ([`Profile::settle_ms`]).
    pub settle_ms: i64,
    /// How far this node's clock may be from the durable store's before it
    /// refuses writes (`server.max_clock_offset`).
    pub max_clock_offset_ms: i64,
    /// Bytes of this node's copies of item records and followee lists (0:
    /// no copies; three quarters for records, a quarter for lists; the
    /// facts' copies besides), checked by every page that uses them
    /// ([`tideway_store::copies`]): on engines a round trip away,
    /// `storage.cache_size`; in process the store's own caches serve.
    pub copies_bytes: u64,
    /// How long after marking a reader active (`Activity::touch`) this node
    /// skips marking them again (0: every page marks): on engines a round
    /// trip away, a thousandth of `fanout.active_window`, at most a minute.
    pub touch_every_ms: i64,
    /// How long this node reuses its decision whether an author is hot
    /// (fanned out or pulled), sparing a post the read of the follower count
    /// (0: read at every post): on engines a round trip away, 10 s.
    pub hot_decision_ms: i64,
    /// The engines behind the two halves, as health and metrics name them.
    pub durable_engine: &'static str,
    pub shared_engine: &'static str,
}

impl ServiceOptions {
    /// The options of `c` for a backend of this [`Profile`] (what the
    /// backend's engines report: `backend.profile()`).
    pub fn new(c: &Config, profile: Profile) -> Self {
        Self {
            max_len: c.timeline.max_len,
            max_following: c.graph.max_following,
            hot_followers: c.fanout.hot_followers,
            active_window_ms: i64::try_from(c.fanout.active_window.0.as_millis()).unwrap_or(i64::MAX),
            chunk_size: c.fanout.chunk_size,
            node_id: c.server.node_id,
            max_clock_skew_ms: i64::try_from(c.items.max_clock_skew.0.as_millis()).unwrap_or(i64::MAX),
            lease_ms: i64::try_from(c.fanout.lease.0.as_millis()).unwrap_or(i64::MAX),
            chunks_in_flight: profile.chunks_in_flight(),
            read_ahead: profile.reads_ahead(),
            background_signals: profile.background_signals(),
            copies_bytes: if profile.round_trips { c.storage.cache_size.0 } else { 0 },
            hot_decision_ms: if profile.round_trips { 10_000 } else { 0 },
            touch_every_ms: if profile.round_trips {
                i64::try_from(c.fanout.active_window.0.as_millis() / 1000).unwrap_or(i64::MAX).min(60_000)
            } else {
                0
            },
            snapshot_ttl_ms: i64::try_from(c.live.snapshot_ttl.0.as_millis()).unwrap_or(i64::MAX),
            replay_window_ms: i64::try_from(c.stream.replay_window.0.as_millis()).unwrap_or(i64::MAX),
            settle_ms: profile.settle_ms(),
            max_clock_offset_ms: i64::try_from(c.server.max_clock_offset.0.as_millis()).unwrap_or(i64::MAX),
            durable_engine: c.storage.backend.engine_name(),
            shared_engine: match c.storage.backend {
                BackendKind::Postgres | BackendKind::Mysql => "redis",
                other => other.engine_name(),
            },
        }
    }
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self::new(&Config::default(), Profile::IN_PROCESS)
    }
}

/// The feed service.
pub struct FeedService {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) opts: ServiceOptions,
    /// This node's clock, ids and standing ([`node::Node`]).
    pub(crate) node: Arc<node::Node>,
    /// This node's copies (engines a round trip away), standing before
    /// the backend the service was given: `backend` is them when kept.
    pub(crate) copies: Option<NodeCopies>,
    /// What writes do once stored: signals, removal notes, distrust of the
    /// shared half.
    pub(crate) effects: Arc<effects::Effects>,
    /// Notifications (SPEC section 2).
    pub notifications: notifications::NotificationService,
    /// The live feed (SPEC section 5).
    pub live: live::LiveService,
    /// Home, profile, mention, tag and object pages; home insertions.
    pub feeds: Arc<feeds::FeedsService>,
    /// The home stream.
    pub stream: Arc<stream::StreamService>,
    /// The node's own operations: claims, probes, stats, the sweep.
    pub ops: ops::OpsService,
    /// Items, reactions, promotions.
    pub items: items::ItemService,
    /// Follows, blocks, mutes, lists, relationships.
    pub graph: graph::GraphService,
}

/// Whether a call to the shared half failed because it is away (`true`: the
/// write goes on without it, `tideway_store::trust`); other errors as they are.
fn shared_away(r: tideway_store::Result<()>) -> Result<bool> {
    match r {
        Ok(()) => Ok(false),
        Err(e) if e.is_unavailable() => Ok(true),
        Err(e) => Err(e.into()),
    }
}

impl FeedService {
    /// The service over `backend`, with this node's copies before it when
    /// `opts.copies_bytes` is not 0.
    pub async fn new(backend: Arc<dyn Backend>, opts: ServiceOptions, clock: Arc<dyn Clock>) -> Result<Self> {
        let copies = (opts.copies_bytes > 0).then(|| NodeCopies::new(backend.clone(), opts.copies_bytes));
        let backend: Arc<dyn Backend> = match &copies {
            Some(c) => Arc::new(c.clone()),
            None => backend,
        };
        let node = Arc::new(node::Node::new(clock, opts.node_id, opts.max_clock_offset_ms)?);
        let reader = Arc::new(reader::ItemReader::new(backend.clone()));
        let max_key = backend.stats().await?.max_key;
        let effects = Arc::new(effects::Effects::new(backend.clone(), node.clone(), &opts));
        let notifications = notifications::NotificationService::new(backend.clone(), node.clone(), reader.clone());
        let feeds = Arc::new(feeds::FeedsService::new(
            backend.clone(),
            node.clone(),
            reader.clone(),
            effects.clone(),
            copies.clone(),
            &opts,
        ));
        let svc = Self {
            backend: backend.clone(),
            node: node.clone(),
            ops: ops::OpsService::new(backend.clone(), node.clone(), &opts),
            copies,
            stream: Arc::new(stream::StreamService::new(backend.clone(), node.clone(), feeds.clone(), &opts)),
            feeds,
            live: live::LiveService::new(backend.clone(), node.clone(), opts.snapshot_ttl_ms),
            items: items::ItemService::new(
                backend.clone(),
                node.clone(),
                reader.clone(),
                notifications.clone(),
                effects.clone(),
                &opts,
            ),
            graph: graph::GraphService::new(
                backend.clone(),
                node.clone(),
                notifications.clone(),
                effects.clone(),
                &opts,
            ),
            notifications,
            effects,
            opts,
        };
        if let Some(copies) = &svc.copies {
            copies.spawn_listener();
        }
        svc.ops.measure_clock().await?;
        svc.ops.observe_stored(max_key);
        Ok(svc)
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// This node's copies, when it keeps them (the backend it runs on
    /// stands behind them).
    pub fn copies(&self) -> Option<&NodeCopies> {
        self.copies.as_ref()
    }

    pub fn options(&self) -> &ServiceOptions {
        &self.opts
    }

    /// This node's clock, ids and standing among the others.
    pub fn node(&self) -> &node::Node {
        &self.node
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use tideway_store::Store;

    #[tokio::test]
    async fn the_delivery_rate_counts_the_last_ten_full_seconds() {
        let svc = FeedService::new(Arc::new(Store::in_memory(10)), ServiceOptions::default(), Arc::new(SystemClock))
            .await
            .expect("service");
        svc.ops.record_deliveries(1000);
        svc.ops.record_deliveries(500);
        // The current second is not full yet: it counts once it has passed.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(svc.ops.deliveries_per_sec(), 150);
        assert_eq!(svc.ops.stats().await.expect("stats").delivered_total, 1500);
    }
}
