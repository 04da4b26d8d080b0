//! [`FeedService`]: one method per API operation, over a storage backend,
//! one room per concern:
//! * `items.rs`: items, hydration, reactions, promotions;
//! * `feeds.rs`: home and profile pages, home insertions, inbox rebuilds;
//! * `postings.rs`: the mention, tag and object feeds;
//! * `notifications.rs`: notification groups, their marks, and the ops
//!   every other write sends them;
//! * `graph.rs`: follows, blocks, mutes, lists, relationships;
//! * `ops.rs`: users, stats, health, the inactive sweep, snapshot state.

mod feeds;
mod graph;
mod items;
pub mod live;
pub mod node;
pub mod notifications;
pub use notifications::Backfilled;
mod ops;
mod postings;
pub mod reader;
pub mod stream;

use crate::clock::Clock;
use crate::config::{BackendKind, Config};
use crate::error::{Result, ServiceError};
use crate::view::*;
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use tideway_core::Key;
use tideway_core::cursor::{Cursor, FeedScope};
use tideway_core::limits::page_limit;
use tideway_core::merge::Direction;
use tideway_store::{Backend, Profile};

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
    /// none; three quarters for records, a quarter for lists), checked by
    /// every page that uses them ([`crate::item_cache`]): on engines a round
    /// trip away, `storage.cache_size`; in process the store's own caches
    /// serve.
    pub item_cache_bytes: u64,
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
            item_cache_bytes: if profile.round_trips { c.storage.cache_size.0 } else { 0 },
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
    pub(crate) delivered_total: AtomicU64,
    /// Deliveries per wall-clock second, the last 16 seconds (second, count).
    pub(crate) delivery_rate: Mutex<[(u64, u64); 16]>,
    /// This node's open home streams, woken by the hub (listening from the
    /// first stream on).
    pub(crate) wakes: Arc<crate::wakes::Wakes>,
    pub(crate) wakes_listening: std::sync::atomic::AtomicBool,
    /// What the engine probes last found ([`crate::health`]).
    pub(crate) health: crate::health::Health,
    /// This node's copies of item records (engines a round trip away).
    pub(crate) item_cache: Option<Arc<crate::item_cache::ItemCache>>,
    /// This node's copies of followee lists (with the records' budget).
    pub(crate) followee_copies: Option<crate::item_cache::FolloweeCopies>,
    /// Whom this node marked active lately (`touch_every_ms` > 0).
    pub(crate) touches: Option<crate::item_cache::RecentTouches>,
    /// Authors' hot decisions and when this node made them
    /// (`hot_decision_ms` > 0).
    pub(crate) hot_decisions: Option<quick_cache::sync::Cache<tideway_core::UserId, (bool, i64)>>,
    /// Signals waiting to be sent in the background, merged.
    pub(crate) signals: Arc<crate::signals::SignalOutbox>,
    /// Items and what a page shows beside them, read.
    pub(crate) reader: Arc<reader::ItemReader>,
    /// Notifications (SPEC section 2).
    pub notifications: notifications::NotificationService,
    /// The live feed (SPEC section 5).
    pub live: live::LiveService,
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
    /// After a durable write that the shared half missed (an inbox that
    /// could be neither told nor dropped): no node trusts the shared half
    /// from the answer on. Fails when the durable half cannot record it.
    async fn distrust_after(&self) -> Result<()> {
        let d = self.backend.distrust_shared().await?;
        d.wait().await;
        Ok(())
    }
}

/// The parsed direction and bound of a page request.
struct PageSpec {
    pub(super) limit: usize,
    pub(super) dir: Direction,
    pub(super) cursor: Option<Key>,
    /// The organic position (1 = top) of the cursor's entry, as the cursor
    /// carries it: promotions are placed "after every N organic entries,
    /// counted from the top" across pages. 0 without a cursor.
    pub(super) index: i64,
}

/// A cursor's key and organic position.
fn cursor_of(s: &str, scope: &FeedScope<'_>) -> Result<(Option<Key>, i64)> {
    let c = Cursor::decode(s, scope)?;
    Ok((Some(c.key), c.aux as i64))
}

fn page_spec(req: &PageRequest, scope: &FeedScope<'_>) -> Result<PageSpec> {
    let limit = page_limit(req.limit)?;
    let (dir, (cursor, index)) = match (&req.before, &req.after) {
        (Some(_), Some(_)) => return Err(ServiceError::invalid("before", "give before or after, not both")),
        (Some(b), None) => (Direction::Older, cursor_of(b, scope)?),
        (None, Some(a)) => (Direction::Newer, cursor_of(a, scope)?),
        (None, None) => (Direction::Older, (None, 0)),
    };
    Ok(PageSpec { limit, dir, cursor, index })
}

impl FeedService {
    pub async fn new(backend: Arc<dyn Backend>, opts: ServiceOptions, clock: Arc<dyn Clock>) -> Result<Self> {
        let node = Arc::new(node::Node::new(clock, opts.node_id, opts.max_clock_offset_ms)?);
        let reader = Arc::new(reader::ItemReader::new(backend.clone()));
        let max_key = backend.stats().await?.max_key;
        let svc = Self {
            backend: backend.clone(),
            node: node.clone(),
            delivered_total: AtomicU64::new(0),
            delivery_rate: Mutex::new([(0, 0); 16]),
            wakes: Arc::default(),
            wakes_listening: std::sync::atomic::AtomicBool::new(false),
            health: crate::health::Health::new(opts.durable_engine, opts.shared_engine),
            item_cache: (opts.item_cache_bytes > 0)
                .then(|| Arc::new(crate::item_cache::ItemCache::new(opts.item_cache_bytes / 4 * 3))),
            followee_copies: (opts.item_cache_bytes > 0)
                .then(|| crate::item_cache::FolloweeCopies::new(opts.item_cache_bytes / 4)),
            touches: (opts.touch_every_ms > 0).then(|| crate::item_cache::RecentTouches::new(opts.touch_every_ms)),
            hot_decisions: (opts.hot_decision_ms > 0).then(|| quick_cache::sync::Cache::new(1 << 16)),
            signals: Arc::default(),
            live: live::LiveService::new(backend.clone(), node.clone(), opts.snapshot_ttl_ms),
            notifications: notifications::NotificationService::new(backend.clone(), node.clone(), reader.clone()),
            reader,
            opts,
        };
        if let Some(cache) = &svc.item_cache {
            cache.spawn_listener(&svc.backend);
        }
        svc.measure_clock().await?;
        svc.observe_stored(max_key);
        Ok(svc)
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// This node's copies of item records, when it keeps them.
    pub fn item_cache(&self) -> Option<&crate::item_cache::ItemCache> {
        self.item_cache.as_deref()
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
        svc.record_deliveries(1000);
        svc.record_deliveries(500);
        // The current second is not full yet: it counts once it has passed.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(svc.deliveries_per_sec(), 150);
        assert_eq!(svc.stats().await.expect("stats").delivered_total, 1500);
    }
}
