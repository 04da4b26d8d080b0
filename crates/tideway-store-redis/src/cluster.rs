//! Talking to one Redis or a Redis Cluster: the connection, the cluster's
//! slot map and routing, keyed batches run as one pipeline per node (with
//! the retry after a lost script cache or a resharding), and scans.

use crate::RedisShared;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, FromRedisValue, Pipeline, RedisError, RedisFuture, Value};
use std::collections::HashMap;
use tideway_store::{Engine, Result, StoreError};

/// Keys per SCAN step and per pipeline of reads.
pub(crate) const SCAN_BATCH: usize = 1000;

/// A connection to a single Redis or to a Redis Cluster (both multiplex and
/// reconnect by themselves; clones share them).
#[derive(Clone)]
pub(crate) enum Conn {
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

/// A Redis error as a store error. `retryable` when Redis answered that the
/// command was not run and may be run again (a redirection, `TRYAGAIN`,
/// `CLUSTERDOWN`, `LOADING`: read from the error's kind, never its text).
pub(crate) fn err(e: RedisError) -> StoreError {
    use redis::RetryMethod;
    let retryable = matches!(
        e.retry_method(),
        RetryMethod::WaitAndRetry
            | RetryMethod::MovedRedirect
            | RetryMethod::AskRedirect
            | RetryMethod::RefreshSlotsAndRetry
    );
    StoreError::Unavailable { engine: Engine::Redis, retryable, source: Box::new(e) }
}

/// A reply of another shape than the command's.
pub(crate) fn bad_reply(e: impl std::fmt::Display) -> StoreError {
    StoreError::unavailable_because(Engine::Redis, format!("unexpected reply: {e}"))
}

/// Whether Redis did not know a script (a restart, a flush, a failover):
/// by the error's kind, for one command or any command of a pipeline.
fn is_noscript(e: &RedisError) -> bool {
    let noscript = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);
    e.kind() == noscript
        || e.clone()
            .into_server_errors()
            .is_some_and(|errs| errs.iter().any(|(_, s)| s.kind() == Some(redis::ServerErrorKind::NoScript)))
}

/// A Redis node's address.
pub(crate) type Node = (String, u16);

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
pub(crate) struct Batch {
    cmds: Vec<(String, Cmd)>,
}

impl Batch {
    pub(crate) fn add(&mut self, key: String, cmd: Cmd) {
        self.cmds.push((key, cmd));
    }
}

impl RedisShared {
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    pub(crate) async fn load_scripts(&self) -> Result<()> {
        for s in self.scripts.all() {
            s.load_async(&mut self.conn.clone()).await.map_err(err)?;
        }
        Ok(())
    }

    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        cmd.query_async(&mut self.conn.clone()).await.map_err(err)
    }

    /// Reads a cluster's slot map.
    pub(crate) async fn refresh_slots(&self) -> Result<()> {
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
    pub(crate) fn node_of(&self, key: &str) -> Option<Node> {
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
    pub(crate) async fn run(&self, batch: &Batch) -> Result<Vec<Value>> {
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
    pub(crate) async fn run_as<T: FromRedisValue>(&self, batch: &Batch) -> Result<Vec<T>> {
        self.run(batch).await?.into_iter().map(|v| T::from_redis_value(v).map_err(bad_reply)).collect()
    }

    pub(crate) fn evalsha(&self, script: &redis::Script, key: &str) -> Cmd {
        let mut c = redis::cmd("EVALSHA");
        c.arg(script.get_hash()).arg(1).arg(key);
        c
    }

    /// `PING` to the single server, or to every primary of a cluster (its
    /// slot map read again first): the health probe.
    pub(crate) async fn ping_every_server(&self) -> Result<()> {
        let Conn::Cluster(c) = &self.conn else {
            let _: String = self.query(&redis::cmd("PING")).await?;
            return Ok(());
        };
        let pings = self.primaries().await?.into_iter().map(|(host, port)| {
            let mut c = c.clone();
            async move {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host: host.clone(), port });
                c.route_command(redis::cmd("PING"), routing)
                    .await
                    .map(|_| ())
                    .map_err(|e| StoreError::unavailable_because(Engine::Redis, format!("primary {host}:{port}: {e}")))
            }
        });
        futures_util::future::try_join_all(pings).await?;
        Ok(())
    }

    /// Every key matching `pattern` (on every primary of a cluster).
    pub(crate) async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
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
}
