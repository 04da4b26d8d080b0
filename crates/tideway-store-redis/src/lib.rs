//! The shared half of a scaled-out deployment on Redis: home inboxes, reader
//! activity and hot-author marks ([`Inboxes`], [`Activity`], [`HotAuthors`]),
//! against one Redis or a Redis Cluster. Everything here can be lost: the
//! durable engine rebuilds inboxes on read, and a lost mark or activity only
//! changes who gets pushes, never what a page shows (see ARCHITECTURE.md).
//!
//! [`Inboxes`]: tideway_store::Inboxes
//! [`Activity`]: tideway_store::Activity
//! [`HotAuthors`]: tideway_store::HotAuthors
//!
//! # Keys (all under a prefix, `tw:` by default)
//!
//! | key                | type   | holds |
//! |--------------------|--------|-------|
//! | `{p}i{<user>}`     | string | the user's inbox (layout below) |
//! | `{p}a{a<shard>}`   | zset   | activity: member user id, score last read (ms) |
//! | `{p}h{h<shard>}`   | hash   | hot authors: field author id, value newest unpushed key (8 bytes; a ninth, `n`, until the author's first mark was announced) |
//! | `{p}hg`            | string | the generation of the set of marked authors: a new random token whenever an author is marked for the first time |
//! | `{p}s{<id>}`       | string | a live feed snapshot (9 bytes a session), with its expiry |
//! | `{p}r{r<shard>}`, `{p}q{q<shard>}` | zset | when entries last left homes, by author and by user (score: ms), pruned to the replay window |
//! | `{p}hub`           | channel | the event hub: signals, `w` (work) or `h<user>` (a home), comma-separated |
//!
//! The braces are Redis Cluster hash tags: every key of one user carries
//! `{<user>}`, so it lives in that user's slot, and the 16 activity and hot
//! shards spread over the cluster's nodes.
//!
//! # Inbox layout
//!
//! `floor: u64 | slots: u32 (top bit: building) | count: u32 | newest: u64 |
//! slots × key: u64`, all big-endian, keys ascending, the first `count`
//! slots used. A full inbox holds up to `cap + cap/10` keys before a script
//! trims it to `cap`; readers see only the newest `cap` (the floor rises to
//! the newest key beyond them), so the contract's cap holds at every moment
//! while a delivery in order reads the 24-byte header and writes 20 bytes in
//! place (no copy of the inbox, no reallocation). A key a little out of
//! order (posts fanned out side by side), among the newest 32 held, is put
//! in place too, moving the keys after it; only an older one, or one into
//! a full inbox, reads and writes the inbox whole. About 9 bytes an entry
//! for a full inbox.
//!
//! One script run delivers a fan-out step (up to 64 jobs' chunks) to every
//! inbox of it that one node serves (`deliver_many`, up to 256 inboxes a
//! run): the step's keys grouped by inbox, ascending, so that an inbox given
//! several keys reads its header once and takes them as one block (above
//! its newest) or merged with its last 32 (a little below it), where a run
//! per job met each inbox once per key, most keys below the one just
//! delivered by another job. The inbox keys are passed as arguments, not
//! declared keys (a cluster refuses declared keys of several slots in one
//! call), and each call goes to the node that serves them by this crate's
//! copy of the cluster's slot map. A script that reaches a key its node no
//! longer serves (a resharding moved the slot) fails; the commands that
//! failed are then sent again after the slot map is read again (deliveries
//! are idempotent), and those that answered keep their replies.
//!
//! # The event hub
//!
//! A `publish` is one `PUBLISH` of all its signals. Each node keeps one
//! subscribed connection (a plain one, to one of the URLs: a cluster
//! forwards `PUBLISH` to every node), started by the first `subscribe`, which
//! waits until the server confirmed the subscription. Its messages are
//! passed to the node's subscriptions through a broadcast channel; when the
//! connection is lost, it subscribes again (on the next URL) and the
//! subscriptions receive `Lagged`: signals may have been lost meanwhile.

mod cluster;
mod hub;
mod inbox;
mod marks;
mod removals;
mod scripts;
mod snapshots;
mod tokens;

use cluster::{Conn, Node};
use hub::RedisHub;
use redis::RedisError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use scripts::Scripts;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tideway_store::{InboxStats, Result, StoreError};

/// The setting that names the Redis nodes.
const URLS: &str = "redis.urls (TIDEWAY_REDIS__URLS)";

/// Where and how to connect.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// One URL: a single Redis. Several: the seed nodes of a Redis Cluster.
    pub urls: Vec<String>,
    /// Prefix of every key (no braces): several deployments, or tests, can
    /// share one Redis.
    pub prefix: String,
    /// `timeline.max_len`: the inbox cap.
    pub inbox_cap: usize,
    /// How long one command may take before it fails (the engine is then
    /// treated as down for that request).
    pub timeout: Duration,
}

impl RedisOptions {
    pub fn new(urls: Vec<String>, inbox_cap: usize) -> Self {
        Self { urls, prefix: "tw:".into(), inbox_cap, timeout: Duration::from_secs(2) }
    }
}

/// Inboxes, activity and hot-author marks on Redis.
pub struct RedisShared {
    conn: Conn,
    prefix: String,
    cap: usize,
    slack: usize,
    scripts: Scripts,
    stats: tokio::sync::Mutex<Option<(Instant, InboxStats)>>,
    /// A cluster's slot ranges and the primary serving each (from CLUSTER
    /// SLOTS; refreshed when a pipeline fails, e.g. after a resharding).
    slots: parking_lot::RwLock<Vec<(u16, u16, Node)>>,
    hub: RedisHub,
    /// Why the last health probe found Redis down (`None`: up, or not
    /// probed): while set, calls fail at once instead of waiting on a
    /// server that is away or a cluster that refuses every command.
    down: parking_lot::Mutex<Option<String>>,
    /// The primaries of a cluster that did not answer the last probe (and
    /// why), while the cluster itself serves (`cluster_state:ok`): calls
    /// for their slots fail at once, the others go through.
    down_primaries: parking_lot::RwLock<HashMap<Node, String>>,
    /// The primaries the last successful probe found: a new one (a replica
    /// promoted by a failover) may lack the last writes of the one it
    /// replaced, so every key is dropped once (see `ping_every_server`).
    primaries_seen: parking_lot::Mutex<Vec<Node>>,
    /// The configured nodes' addresses: where the cluster's own view is
    /// asked when the slot map's primaries do not answer.
    seeds: Vec<Node>,
    /// This node's copy of which authors have a hot-author mark, at the
    /// set's generation it was read at (`marks.rs`).
    hot_copy: parking_lot::RwLock<Option<std::sync::Arc<marks::HotCopy>>>,
}

/// Every call is a round trip to Redis.
impl tideway_store::Profiled for RedisShared {
    fn profile(&self) -> tideway_store::Profile {
        tideway_store::Profile::REMOTE
    }
}

impl RedisShared {
    /// Connects, checks the server answers and loads the scripts. Errors
    /// name the setting to fix.
    pub async fn connect(opts: RedisOptions) -> Result<Self> {
        if opts.prefix.contains(['{', '}']) {
            return Err(StoreError::config(
                "redis.prefix (TIDEWAY_REDIS__PREFIX)",
                format!("{:?} must not contain braces", opts.prefix),
            ));
        }
        let shown: Vec<String> = opts.urls.iter().map(|u| tideway_store::redact_url(u)).collect();
        let named = |e: RedisError| StoreError::Config {
            setting: URLS,
            message: format!("{}: {e}{}", shown.join(","), cluster_hint(&e)),
            source: Some(Box::new(e)),
        };
        let conn = match opts.urls.as_slice() {
            [] => return Err(StoreError::config(URLS, "is empty")),
            [one] => {
                let client = redis::Client::open(one.as_str()).map_err(named)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(opts.timeout))
                    .set_response_timeout(Some(opts.timeout))
                    .set_number_of_retries(1);
                Conn::Single(ConnectionManager::new_with_config(client, config).await.map_err(named)?)
            }
            many => {
                let client = redis::cluster::ClusterClient::builder(many.to_vec())
                    .connection_timeout(opts.timeout)
                    .response_timeout(opts.timeout)
                    .retries(1)
                    .build()
                    .map_err(named)?;
                Conn::Cluster(client.get_async_connection().await.map_err(named)?)
            }
        };
        let cap = opts.inbox_cap.max(1);
        let hub = RedisHub {
            urls: opts.urls.clone(),
            channel: format!("{}hub", opts.prefix),
            timeout: opts.timeout,
            tx: tokio::sync::broadcast::channel(tideway_store::components::HUB_CAPACITY).0,
            listener: tokio::sync::Mutex::new(None),
        };
        let me = Self {
            conn,
            hub,
            prefix: opts.prefix,
            cap,
            slack: (cap / 10).max(4),
            scripts: Scripts::new(),
            stats: tokio::sync::Mutex::new(None),
            slots: parking_lot::RwLock::new(Vec::new()),
            down: parking_lot::Mutex::new(None),
            down_primaries: parking_lot::RwLock::new(HashMap::new()),
            primaries_seen: parking_lot::Mutex::new(Vec::new()),
            hot_copy: parking_lot::RwLock::new(None),
            seeds: opts
                .urls
                .iter()
                .filter_map(|u| match redis::IntoConnectionInfo::into_connection_info(u.as_str()).ok()?.addr() {
                    redis::ConnectionAddr::Tcp(h, p) | redis::ConnectionAddr::TcpTls { host: h, port: p, .. } => {
                        Some((h.clone(), *p))
                    }
                    _ => None,
                })
                .collect(),
        };
        let _: String = redis::cmd("PING").query_async(&mut me.conn.clone()).await.map_err(named)?;
        me.load_scripts().await.map_err(|e| StoreError::Config {
            setting: URLS,
            message: format!("cannot load the scripts: {e}"),
            source: Some(Box::new(e)),
        })?;
        if me.is_cluster() {
            me.refresh_slots().await?;
        }
        Ok(me)
    }
}

/// What to do when several URLs name servers without cluster mode.
fn cluster_hint(e: &RedisError) -> &'static str {
    if e.to_string().contains("cluster support disabled") {
        " (several URLs name a Redis Cluster's nodes: for one Redis without cluster mode give its URL alone)"
    } else {
        ""
    }
}
