//! The shared half of a scaled-out deployment on Redis: home inboxes, reader
//! activity and hot-author marks ([`Inboxes`], [`Activity`], [`HotAuthors`]),
//! against one Redis or a Redis Cluster. Everything here can be lost: the
//! durable engine rebuilds inboxes on read, and a lost mark or activity only
//! changes who gets pushes, never what a page shows (see ARCHITECTURE.md).
//!
//! # Keys (all under a prefix, `tw:` by default)
//!
//! | key                | type   | holds |
//! |--------------------|--------|-------|
//! | `{p}i{<user>}`     | string | the user's inbox (layout below) |
//! | `{p}a{a<shard>}`   | zset   | activity: member user id, score last read (ms) |
//! | `{p}h{h<shard>}`   | hash   | hot authors: field author id, value newest unpushed key (8 bytes) |
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
//! place (no copy of the inbox, no reallocation). About 9 bytes an entry for
//! a full inbox.
//!
//! One script run delivers a key to every inbox of a fan-out chunk that one
//! node serves: the inbox keys are passed as arguments, not declared keys
//! (a cluster refuses declared keys of several slots in one call), and each
//! call goes to the node that serves them by this crate's copy of the
//! cluster's slot map. A script that reaches a key its node no longer serves
//! (a resharding moved the slot) fails; the batch is then sent again after
//! the slot map is read again (deliveries are idempotent).
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

mod scripts;

use async_trait::async_trait;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue, Pipeline, RedisError, RedisFuture, Value};
use scripts::Scripts;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Key, Millis, UserId};
use tideway_store::{
    Activity, HotAuthors, Hub, HubEvent, InboxRead, InboxStats, Inboxes, Result, Signal, StoreError, Subscription,
};

/// Activity and hot-author shards (keys); enough to spread over a cluster.
const SHARDS: u64 = 16;
/// How long `inbox_stats` reuses a count (it scans every inbox key).
const STATS_TTL: Duration = Duration::from_secs(10);
/// Inboxes per delivery script run (a run blocks its Redis: ~1 µs each).
const DELIVER_SLICE: usize = 1000;
/// Keys per SCAN step and per pipeline of reads.
const SCAN_BATCH: usize = 1000;

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

/// A connection to a single Redis or to a Redis Cluster (both multiplex and
/// reconnect by themselves; clones share them).
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

fn err(e: RedisError) -> StoreError {
    StoreError::Io(format!("redis: {e}"))
}

fn bad_reply(e: impl std::fmt::Display) -> StoreError {
    StoreError::Io(format!("redis: unexpected reply: {e}"))
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) || e.to_string().contains("NOSCRIPT")
}

fn be(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The key of a user's inbox: the user id is its hash tag.
fn inbox_key(prefix: &str, u: UserId) -> String {
    format!("{prefix}i{{{}}}", u.0)
}

/// The user of an inbox key.
fn user_of(prefix: &str, key: &str) -> Option<UserId> {
    key.strip_prefix(prefix)?.strip_prefix("i{")?.strip_suffix('}')?.parse().ok().map(UserId)
}

/// A parsed inbox value.
struct Parsed {
    floor: Key,
    building: bool,
    /// The newest `cap` keys, ascending.
    keys: Vec<Key>,
}

/// The building flag in an inbox's slots word.
const BUILDING: u32 = 1 << 31;

/// Header size of an inbox value.
const HEADER: usize = 24;

fn parse(v: &[u8], cap: usize) -> Result<Parsed> {
    let bad = || StoreError::Corrupt(format!("an inbox value of {} bytes", v.len()));
    if v.len() < HEADER || !(v.len() - HEADER).is_multiple_of(8) {
        return Err(bad());
    }
    let flags = u32::from_be_bytes([v[8], v[9], v[10], v[11]]);
    let count = u32::from_be_bytes([v[12], v[13], v[14], v[15]]) as usize;
    let slots = (flags & !BUILDING) as usize;
    if count > slots || slots != (v.len() - HEADER) / 8 {
        return Err(bad());
    }
    let all = &v[HEADER..HEADER + count * 8];
    let skip = count.saturating_sub(cap);
    let mut floor = be(&v[0..8]);
    if skip > 0 {
        floor = floor.max(be(&all[(skip - 1) * 8..]));
    }
    let keys = all[skip * 8..].chunks_exact(8).map(be).collect();
    Ok(Parsed { floor, building: flags & BUILDING != 0, keys })
}

/// Packs keys ascending, deduplicated.
fn pack_sorted(keys: &[Key]) -> Vec<u8> {
    let mut ks = keys.to_vec();
    ks.sort_unstable();
    ks.dedup();
    ks.iter().flat_map(|k| k.to_be_bytes()).collect()
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
}

/// The event hub's side of a node: where signals are published, and the
/// listener that passes them to this node's subscriptions.
struct RedisHub {
    urls: Vec<String>,
    channel: String,
    timeout: Duration,
    tx: tokio::sync::broadcast::Sender<HubEvent>,
    /// The listener task, once started; it reports when it is subscribed.
    listener: tokio::sync::Mutex<Option<(tokio::task::JoinHandle<()>, tokio::sync::watch::Receiver<bool>)>>,
}

impl Drop for RedisHub {
    fn drop(&mut self) {
        if let Some((task, _)) = self.listener.get_mut().take() {
            task.abort();
        }
    }
}

/// A message of the hub's channel: its signals, comma-separated.
fn encode_signals(signals: &[Signal]) -> String {
    let parts: Vec<String> = signals
        .iter()
        .filter_map(|s| match s {
            Signal::Work => Some("w".to_owned()),
            Signal::Home(u) => Some(format!("h{}", u.0)),
            // A signal this build cannot send to other nodes.
            _ => None,
        })
        .collect();
    parts.join(",")
}

/// The signals of a message (unknown ones, from a newer node, are skipped).
fn decode_signals(msg: &str) -> impl Iterator<Item = Signal> + '_ {
    msg.split(',').filter_map(|part| match part.as_bytes().first() {
        Some(b'w') if part.len() == 1 => Some(Signal::Work),
        Some(b'h') => part[1..].parse().ok().map(|u| Signal::Home(UserId(u))),
        _ => None,
    })
}

impl RedisHub {
    /// Subscribes on one of the URLs after another until one answers, then
    /// passes messages on until the connection is lost; forever.
    async fn listen(
        urls: Vec<String>,
        channel: String,
        timeout: Duration,
        tx: tokio::sync::broadcast::Sender<HubEvent>,
        ready: tokio::sync::watch::Sender<bool>,
    ) {
        use futures_util::StreamExt;
        let mut backoff = Duration::from_millis(50);
        let mut first = true;
        for url in urls.iter().cycle() {
            let subscribed = async {
                let client = redis::Client::open(url.as_str())?;
                let mut ps = tokio::time::timeout(timeout, client.get_async_pubsub())
                    .await
                    .map_err(|_| RedisError::from((redis::ErrorKind::Io, "timed out connecting")))??;
                ps.subscribe(&channel).await?;
                Ok::<_, RedisError>(ps)
            }
            .await;
            match subscribed {
                Ok(ps) => {
                    backoff = Duration::from_millis(50);
                    // Whatever was published while no connection listened
                    // is lost: subscriptions hear of it.
                    if !first {
                        let _ = tx.send(HubEvent::Gap);
                    }
                    first = false;
                    let _ = ready.send(true);
                    let mut messages = ps.into_on_message();
                    while let Some(msg) = messages.next().await {
                        if let Ok(text) = msg.get_payload::<String>() {
                            for s in decode_signals(&text) {
                                let _ = tx.send(HubEvent::Signal(s));
                            }
                        }
                    }
                    let _ = ready.send(false);
                    tracing::warn!(url, "the event hub's connection to Redis was lost; subscribing again");
                }
                Err(e) => tracing::warn!(url, error = %e, "the event hub could not subscribe to Redis; retrying"),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}

/// A Redis node's address.
type Node = (String, u16);

/// The hash slot of a key (CRC16 of its hash tag, as Redis Cluster computes it).
fn slot_of(key: &[u8]) -> u16 {
    let tag = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16::State::<crc16::XMODEM>::calculate(tag) % 16384
}

/// Commands of a pipeline with the key that routes each.
#[derive(Default)]
struct Batch {
    cmds: Vec<(String, Cmd)>,
}

impl Batch {
    fn add(&mut self, key: String, cmd: Cmd) {
        self.cmds.push((key, cmd));
    }
}

impl RedisShared {
    /// Connects, checks the server answers and loads the scripts. Errors
    /// name the setting to fix.
    pub async fn connect(opts: RedisOptions) -> Result<Self> {
        if opts.prefix.contains(['{', '}']) {
            return Err(StoreError::Io(format!("redis prefix {:?} must not contain braces", opts.prefix)));
        }
        let named =
            |e: RedisError| StoreError::Io(format!("redis.urls (TIDEWAY_REDIS__URLS) {}: {e}", opts.urls.join(",")));
        let conn = match opts.urls.as_slice() {
            [] => return Err(StoreError::Io("redis.urls (TIDEWAY_REDIS__URLS) is empty".into())),
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
        };
        let _: String = redis::cmd("PING").query_async(&mut me.conn.clone()).await.map_err(named)?;
        me.load_scripts().await.map_err(|e| StoreError::Io(format!("redis.urls (TIDEWAY_REDIS__URLS): {e}")))?;
        if me.is_cluster() {
            me.refresh_slots().await?;
        }
        Ok(me)
    }

    fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    async fn load_scripts(&self) -> Result<()> {
        for s in self.scripts.all() {
            s.load_async(&mut self.conn.clone()).await.map_err(err)?;
        }
        Ok(())
    }

    fn inbox_key(&self, u: UserId) -> String {
        inbox_key(&self.prefix, u)
    }

    fn activity_key(&self, shard: u64) -> String {
        format!("{}a{{a{shard}}}", self.prefix)
    }

    fn hot_key(&self, shard: u64) -> String {
        format!("{}h{{h{shard}}}", self.prefix)
    }

    async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        cmd.query_async(&mut self.conn.clone()).await.map_err(err)
    }

    async fn merge(&self, user: UserId, keys: &[Key], floor: Key, mode: &str) -> Result<()> {
        let key = self.inbox_key(user);
        let mut cmd = self.evalsha(&self.scripts.merge, &key);
        cmd.arg(&floor.to_be_bytes()[..]).arg(pack_sorted(keys)).arg(self.cap).arg(self.slack).arg(mode);
        let mut batch = Batch::default();
        batch.add(key, cmd);
        self.run(&batch).await.map(|_| ())
    }

    async fn read(&self, user: UserId) -> Result<Option<Parsed>> {
        let v: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(self.inbox_key(user))).await?;
        v.map(|v| parse(&v, self.cap)).transpose()
    }

    /// Bytes of the value holding `user`'s inbox (0: absent): what an inbox
    /// costs Redis beyond its key, for tests and benchmarks.
    pub async fn inbox_value_len(&self, user: UserId) -> Result<usize> {
        self.query(redis::cmd("STRLEN").arg(self.inbox_key(user))).await
    }

    /// Reads a cluster's slot map.
    async fn refresh_slots(&self) -> Result<()> {
        let slots: Vec<Vec<Value>> = self.query(&redis::cmd("CLUSTER").arg("SLOTS").clone()).await?;
        let mut map = Vec::new();
        for range in slots {
            let num = |i: usize| range.get(i).map(u16::from_redis_value_ref).transpose().map_err(bad_reply);
            let (Some(start), Some(end)) = (num(0)?, num(1)?) else { continue };
            if let Some(Value::Array(node)) = range.get(2) {
                let host: String =
                    node.first().map(String::from_redis_value_ref).transpose().map_err(bad_reply)?.unwrap_or_default();
                let port: u16 = node.get(1).map(u16::from_redis_value_ref).transpose().map_err(bad_reply)?.unwrap_or(0);
                map.push((start, end, (host, port)));
            }
        }
        map.sort_unstable_by_key(|r| r.0);
        *self.slots.write() = map;
        Ok(())
    }

    /// The primary serving `key` in a cluster.
    fn node_of(&self, key: &str) -> Option<Node> {
        let slot = slot_of(key.as_bytes());
        let map = self.slots.read();
        let i = map.partition_point(|r| r.0 <= slot).checked_sub(1)?;
        (map[i].1 >= slot).then(|| map[i].2.clone())
    }

    /// Addresses of the nodes that hold keys: the primaries of a cluster.
    async fn primaries(&self) -> Result<Vec<Node>> {
        self.refresh_slots().await?;
        let mut out: Vec<Node> = Vec::new();
        for (_, _, node) in self.slots.read().iter() {
            if !out.contains(node) {
                out.push(node.clone());
            }
        }
        Ok(out)
    }

    /// Runs keyed commands as pipelines, one per node, concurrently; the
    /// replies in order. After a failure (a server lost its scripts, a
    /// resharding moved a slot) it reloads what it needs and runs the whole
    /// batch again once: every command sent this way is idempotent.
    async fn run(&self, batch: &Batch) -> Result<Vec<Value>> {
        match self.run_once(batch).await {
            Ok(v) => Ok(v),
            Err(e) => {
                if is_noscript(&e) {
                    self.load_scripts().await?;
                } else if self.is_cluster() {
                    self.refresh_slots().await?;
                } else {
                    return Err(err(e));
                }
                self.run_once(batch).await.map_err(err)
            }
        }
    }

    async fn run_once(&self, batch: &Batch) -> std::result::Result<Vec<Value>, RedisError> {
        let Conn::Cluster(conn) = &self.conn else {
            let mut p = redis::pipe();
            for (_, c) in &batch.cmds {
                p.add_command(c.clone());
            }
            let vals: Vec<Value> = p.query_async(&mut self.conn.clone()).await?;
            if let Some(Value::ServerError(e)) = vals.iter().find(|v| matches!(v, Value::ServerError(_))) {
                return Err(RedisError::from(e.clone()));
            }
            return Ok(vals);
        };
        let mut by_node: HashMap<Option<Node>, Vec<usize>> = HashMap::new();
        for (i, (key, _)) in batch.cmds.iter().enumerate() {
            by_node.entry(self.node_of(key)).or_default().push(i);
        }
        let runs = by_node.into_iter().map(|(node, idx)| {
            let mut conn = conn.clone();
            let mut p = redis::pipe();
            for &i in &idx {
                p.add_command(batch.cmds[i].1.clone());
            }
            let n = idx.len();
            async move {
                let route = match node {
                    Some((host, port)) => SingleNodeRoutingInfo::ByAddress { host, port },
                    None => SingleNodeRoutingInfo::SpecificNode(redis::cluster_routing::Route::new(
                        slot_of(batch.cmds[idx[0]].0.as_bytes()),
                        redis::cluster_routing::SlotAddr::Master,
                    )),
                };
                let vals = conn.route_pipeline(p, 0, n, route).await?;
                Ok::<_, RedisError>((idx, vals))
            }
        });
        let mut out = vec![Value::Nil; batch.cmds.len()];
        for (idx, vals) in futures_util::future::try_join_all(runs).await? {
            for (i, v) in idx.into_iter().zip(vals) {
                if let Value::ServerError(e) = &v {
                    return Err(RedisError::from(e.clone()));
                }
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Runs a batch and converts its replies.
    async fn run_as<T: FromRedisValue>(&self, batch: &Batch) -> Result<Vec<T>> {
        self.run(batch).await?.into_iter().map(|v| T::from_redis_value(v).map_err(bad_reply)).collect()
    }

    fn evalsha(&self, script: &redis::Script, key: &str) -> Cmd {
        let mut c = redis::cmd("EVALSHA");
        c.arg(script.get_hash()).arg(1).arg(key);
        c
    }

    /// Every key matching `pattern` (on every primary of a cluster).
    async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let nodes =
            if self.is_cluster() { self.primaries().await?.into_iter().map(Some).collect() } else { vec![None] };
        for node in nodes {
            let mut cursor = 0u64;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(SCAN_BATCH);
                let (next, batch): (u64, Vec<String>) = match (&node, &self.conn) {
                    (Some((host, port)), Conn::Cluster(c)) => {
                        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                            host: host.clone(),
                            port: *port,
                        });
                        let v = c.clone().route_command(cmd, routing).await.map_err(err)?;
                        FromRedisValue::from_redis_value(v).map_err(bad_reply)?
                    }
                    _ => self.query(&cmd).await?,
                };
                keys.extend(batch);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(keys)
    }

    /// Deletes every key under this prefix (tests, and `tideway` tools that
    /// reset a deployment's shared state). Returns how many were deleted.
    pub async fn purge(&self) -> Result<usize> {
        let keys = self.scan(&format!("{}*", self.prefix)).await?;
        for chunk in keys.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for k in chunk {
                batch.add(k.clone(), redis::cmd("UNLINK").arg(k).clone());
            }
            self.run(&batch).await?;
        }
        Ok(keys.len())
    }

    async fn scan_inboxes(&self) -> Result<Vec<(UserId, Vec<u8>)>> {
        let keys = self.scan(&format!("{}i{{*}}", self.prefix)).await?;
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for k in chunk {
                batch.add(k.clone(), redis::cmd("GET").arg(k).clone());
            }
            let vals: Vec<Option<Vec<u8>>> = self.run_as(&batch).await?;
            for (k, v) in chunk.iter().zip(vals) {
                if let (Some(u), Some(v)) = (user_of(&self.prefix, k), v) {
                    out.push((u, v));
                }
            }
        }
        Ok(out)
    }

    fn group<T: Copy>(items: impl Iterator<Item = (UserId, T)>) -> HashMap<u64, Vec<(UserId, T)>> {
        let mut by: HashMap<u64, Vec<(UserId, T)>> = HashMap::new();
        for (u, t) in items {
            by.entry(u.0 % SHARDS).or_default().push((u, t));
        }
        by
    }
}

#[async_trait]
impl Inboxes for RedisShared {
    async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize> {
        if users.is_empty() {
            return Ok(0);
        }
        let kb = key.to_be_bytes();
        // One script run per node (per slice of a big chunk), the inboxes it
        // serves as arguments.
        let mut by_node: HashMap<Option<Node>, Vec<String>> = HashMap::new();
        for &u in users {
            let key = self.inbox_key(u);
            let node = if self.is_cluster() { self.node_of(&key) } else { None };
            by_node.entry(node).or_default().push(key);
        }
        let mut batch = Batch::default();
        for keys in by_node.values() {
            for slice in keys.chunks(DELIVER_SLICE) {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(self.scripts.deliver.get_hash()).arg(0).arg(&kb[..]).arg(self.cap).arg(self.slack);
                for k in slice {
                    cmd.arg(k);
                }
                batch.add(slice[0].clone(), cmd);
            }
        }
        let took: Vec<i64> = self.run_as(&batch).await?;
        Ok(took.iter().sum::<i64>() as usize)
    }

    async fn read_inbox(
        &self,
        user: UserId,
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Option<InboxRead>> {
        let Some(ib) = self.read(user).await?.filter(|p| !p.building) else {
            return Ok(None);
        };
        let above = range.above.map_or(ib.floor, |a| a.max(ib.floor));
        let lo = ib.keys.partition_point(|&k| k <= above);
        let hi = range.below.map_or(ib.keys.len(), |b| ib.keys.partition_point(|&k| k < b));
        let keys = if lo >= hi {
            Vec::new()
        } else {
            match dir {
                Direction::Older => ib.keys[lo..hi].iter().rev().take(limit).copied().collect(),
                Direction::Newer => ib.keys[lo..hi].iter().take(limit).copied().collect(),
            }
        };
        Ok(Some(InboxRead { keys, floor: ib.floor }))
    }

    async fn begin_rebuild(&self, user: UserId) -> Result<()> {
        let mut header = vec![0u8; HEADER];
        header[8..12].copy_from_slice(&BUILDING.to_be_bytes());
        // NX: an inbox that exists (ready or building) stays as it is.
        self.query::<Option<String>>(redis::cmd("SET").arg(self.inbox_key(user)).arg(header).arg("NX")).await?;
        Ok(())
    }

    async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.merge(user, keys, floor, "f").await
    }

    async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.merge(user, keys, floor, "m").await
    }

    async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>> {
        Ok(self.read(user).await?.filter(|p| !p.building).map(|p| p.floor))
    }

    async fn drop_inbox(&self, user: UserId) -> Result<()> {
        self.query::<i64>(redis::cmd("UNLINK").arg(self.inbox_key(user))).await?;
        Ok(())
    }

    async fn inbox_stats(&self) -> Result<InboxStats> {
        let mut cached = self.stats.lock().await;
        if let Some((at, s)) = *cached
            && at.elapsed() < STATS_TTL
        {
            return Ok(s);
        }
        let mut s = InboxStats::default();
        for (_, v) in self.scan_inboxes().await? {
            let p = parse(&v, self.cap)?;
            s.inboxes += 1;
            s.entries += p.keys.len() as u64;
            s.bytes += v.len() as u64;
        }
        *cached = Some((Instant::now(), s));
        Ok(s)
    }

    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
        let mut out = Vec::new();
        for (u, v) in self.scan_inboxes().await? {
            let p = parse(&v, self.cap)?;
            if !p.building {
                out.push((u, p.floor, p.keys));
            }
        }
        out.sort_unstable_by_key(|(u, ..)| *u);
        Ok(out)
    }

    async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()> {
        self.query::<i64>(redis::cmd("UNLINK").arg(self.inbox_key(user))).await?;
        self.merge(user, keys, floor, "f").await
    }
}

#[async_trait]
impl Activity for RedisShared {
    async fn touch(&self, user: UserId, at: Millis) -> Result<()> {
        let key = self.activity_key(user.0 % SHARDS);
        self.query::<i64>(redis::cmd("ZADD").arg(key).arg("GT").arg(at.0).arg(user.0)).await?;
        Ok(())
    }

    async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>> {
        let groups = Self::group(users.iter().map(|&u| (u, ())));
        let mut batch = Batch::default();
        let order: Vec<u64> = groups.keys().copied().collect();
        for s in &order {
            let key = self.activity_key(*s);
            let mut cmd = redis::cmd("ZMSCORE");
            cmd.arg(&key);
            for (u, _) in &groups[s] {
                cmd.arg(u.0);
            }
            batch.add(key, cmd);
        }
        let scores: Vec<Vec<Option<f64>>> = self.run_as(&batch).await?;
        let mut found: HashMap<UserId, Millis> = HashMap::new();
        for (s, got) in order.iter().zip(scores) {
            for ((u, _), score) in groups[s].iter().zip(got) {
                if let Some(ms) = score {
                    found.insert(*u, Millis(ms as i64));
                }
            }
        }
        Ok(users.iter().map(|u| found.get(u).copied()).collect())
    }

    async fn inactive_before(&self, cutoff: Millis) -> Result<Vec<UserId>> {
        let mut batch = Batch::default();
        for s in 0..SHARDS {
            let key = self.activity_key(s);
            batch.add(
                key.clone(),
                redis::cmd("ZRANGE").arg(key).arg("-inf").arg(format!("({}", cutoff.0)).arg("BYSCORE").clone(),
            );
        }
        let found: Vec<Vec<u64>> = self.run_as(&batch).await?;
        let mut out: Vec<UserId> = found.into_iter().flatten().map(UserId).collect();
        out.sort_unstable();
        Ok(out)
    }

    async fn export_activity(&self) -> Result<Vec<(UserId, Millis)>> {
        let mut batch = Batch::default();
        for s in 0..SHARDS {
            let key = self.activity_key(s);
            batch.add(key.clone(), redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").clone());
        }
        let found: Vec<Vec<(u64, f64)>> = self.run_as(&batch).await?;
        let mut out: Vec<(UserId, Millis)> =
            found.into_iter().flatten().map(|(u, ms)| (UserId(u), Millis(ms as i64))).collect();
        out.sort_unstable();
        Ok(out)
    }

    async fn import_activity(&self, entries: &[(UserId, Millis)]) -> Result<()> {
        for chunk in entries.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for (s, group) in Self::group(chunk.iter().copied()) {
                let key = self.activity_key(s);
                let mut cmd = redis::cmd("ZADD");
                cmd.arg(&key).arg("GT");
                for (u, at) in group {
                    cmd.arg(at.0).arg(u.0);
                }
                batch.add(key, cmd);
            }
            self.run(&batch).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl HotAuthors for RedisShared {
    async fn mark_unpushed(&self, author: UserId, key: Key) -> Result<()> {
        self.import_unpushed(&[(author, key)]).await
    }

    async fn unpushed_above(&self, authors: &[UserId], floor: Key) -> Result<Vec<UserId>> {
        if authors.is_empty() {
            return Ok(Vec::new());
        }
        let groups = Self::group(authors.iter().map(|&u| (u, ())));
        let order: Vec<u64> = groups.keys().copied().collect();
        let mut batch = Batch::default();
        for s in &order {
            let key = self.hot_key(*s);
            let mut cmd = redis::cmd("HMGET");
            cmd.arg(&key);
            for (u, _) in &groups[s] {
                cmd.arg(u.0);
            }
            batch.add(key, cmd);
        }
        let got: Vec<Vec<Option<Vec<u8>>>> = self.run_as(&batch).await?;
        let mut above: HashMap<UserId, bool> = HashMap::new();
        for (s, vals) in order.iter().zip(got) {
            for ((u, _), v) in groups[s].iter().zip(vals) {
                above.insert(*u, v.is_some_and(|v| v.len() == 8 && be(&v) > floor));
            }
        }
        Ok(authors.iter().copied().filter(|u| above.get(u).copied().unwrap_or(false)).collect())
    }

    async fn export_unpushed(&self) -> Result<Vec<(UserId, Key)>> {
        let mut batch = Batch::default();
        for s in 0..SHARDS {
            let key = self.hot_key(s);
            batch.add(key.clone(), redis::cmd("HGETALL").arg(key).clone());
        }
        let found: Vec<HashMap<u64, Vec<u8>>> = self.run_as(&batch).await?;
        let mut out: Vec<(UserId, Key)> =
            found.into_iter().flatten().filter(|(_, v)| v.len() == 8).map(|(u, v)| (UserId(u), be(&v))).collect();
        out.sort_unstable();
        Ok(out)
    }

    async fn import_unpushed(&self, entries: &[(UserId, Key)]) -> Result<()> {
        for chunk in entries.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for (u, k) in chunk {
                let key = self.hot_key(u.0 % SHARDS);
                let mut cmd = self.evalsha(&self.scripts.mark, &key);
                cmd.arg(u.0).arg(&k.to_be_bytes()[..]);
                batch.add(key, cmd);
            }
            self.run(&batch).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Hub for RedisShared {
    async fn publish(&self, signals: &[Signal]) -> Result<()> {
        let msg = encode_signals(signals);
        if msg.is_empty() {
            return Ok(());
        }
        let _: i64 = self.query(redis::cmd("PUBLISH").arg(&self.hub.channel).arg(msg)).await?;
        Ok(())
    }

    /// The first call starts this node's listener and waits (at most the
    /// command timeout) until the server confirmed its subscription.
    async fn subscribe(&self) -> Result<Subscription> {
        let h = &self.hub;
        let mut ready = {
            let mut listener = h.listener.lock().await;
            let (_, ready) = listener.get_or_insert_with(|| {
                let (tx_ready, rx_ready) = tokio::sync::watch::channel(false);
                let task = tokio::spawn(RedisHub::listen(
                    h.urls.clone(),
                    h.channel.clone(),
                    h.timeout,
                    h.tx.clone(),
                    tx_ready,
                ));
                (task, rx_ready)
            });
            ready.clone()
        };
        // Subscribed before this returns: what is published next is heard.
        let sub = Subscription::new(h.tx.subscribe());
        tokio::time::timeout(h.timeout, ready.wait_for(|up| *up))
            .await
            .map_err(|_| StoreError::Io("redis: the event hub could not subscribe in time".into()))?
            .map_err(|_| StoreError::Io("redis: the event hub's listener stopped".into()))?;
        Ok(sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_applies_the_cap_and_raises_the_floor() {
        let mut v = vec![0u8; HEADER];
        v[..8].copy_from_slice(&5u64.to_be_bytes());
        v[8..12].copy_from_slice(&5u32.to_be_bytes());
        v[12..16].copy_from_slice(&4u32.to_be_bytes());
        v[16..24].copy_from_slice(&40u64.to_be_bytes());
        for k in [10u64, 20, 30, 40, 0] {
            v.extend_from_slice(&k.to_be_bytes());
        }
        let p = parse(&v, 3).expect("parse");
        assert_eq!((p.floor, p.keys, p.building), (10, vec![20, 30, 40], false), "one spare slot, one trimmed");
        let p = parse(&v, 10).expect("parse");
        assert_eq!((p.floor, p.keys.len()), (5, 4));
        assert!(parse(&v[..28], 3).is_err(), "a torn value");
        v[8..12].copy_from_slice(&(5u32 | BUILDING).to_be_bytes());
        assert!(parse(&v, 3).expect("parse").building);
        v[12..16].copy_from_slice(&9u32.to_be_bytes());
        assert!(parse(&v, 3).is_err(), "a count beyond the slots");
    }

    #[test]
    fn inbox_keys_carry_the_users_hash_tag_and_read_back() {
        let key = inbox_key("t1:", UserId(42));
        assert_eq!(key, "t1:i{42}");
        assert_eq!(user_of("t1:", &key), Some(UserId(42)));
        assert_eq!(user_of("t2:", &key), None, "another prefix");
        assert_eq!(user_of("t1:", "t1:a{a3}"), None, "not an inbox");
    }

    #[test]
    fn hub_messages_round_trip_and_skip_what_they_do_not_know() {
        use tideway_store::Signal;
        let signals = [Signal::Work, Signal::Home(UserId(7)), Signal::Home(UserId(u64::MAX >> 1))];
        let msg = encode_signals(&signals);
        assert_eq!(msg, format!("w,h7,h{}", u64::MAX >> 1));
        assert_eq!(decode_signals(&msg).collect::<Vec<_>>(), signals);
        assert_eq!(decode_signals("x9,w,h,hx,wz,h3").collect::<Vec<_>>(), vec![Signal::Work, Signal::Home(UserId(3))]);
        assert_eq!(encode_signals(&[]), "");
    }
}
