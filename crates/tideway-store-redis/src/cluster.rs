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

/// Runs of one batch at most, through redirections and a cluster that is
/// reconfiguring (see [`RedisShared::run`]).
const ATTEMPTS: u32 = 6;

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
    StoreError::Unavailable { engine: Engine::Redis, retryable: retryable(&e), source: Box::new(e) }
}

/// Whether Redis answered that the command was not run and may be run again.
fn retryable(e: &RedisError) -> bool {
    use redis::RetryMethod;
    matches!(
        e.retry_method(),
        RetryMethod::WaitAndRetry
            | RetryMethod::MovedRedirect
            | RetryMethod::AskRedirect
            | RetryMethod::RefreshSlotsAndRetry
    )
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

    /// Fails at once while the last probe found Redis down (see `down`).
    fn check_up(&self) -> Result<()> {
        match self.down.lock().as_deref() {
            None => Ok(()),
            Some(why) => Err(StoreError::unavailable_because(
                Engine::Redis,
                format!("Redis is down ({why}); not asked again until a probe finds it back"),
            )),
        }
    }

    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        self.check_up()?;
        self.query_anyway(cmd).await
    }

    /// A command sent even while Redis is known to be down (the probe's).
    async fn query_anyway<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        cmd.query_async(&mut self.conn.clone()).await.map_err(err)
    }

    /// Asks the cluster about itself (`CLUSTER SLOTS`, `CLUSTER INFO`) on a
    /// node that answers: the primaries of the slot map first, then the
    /// configured nodes, each within a second. (Left to the client's own
    /// routing it goes to a random node it knows, which after a failover
    /// may be the dead primary.)
    async fn ask_cluster<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        let Conn::Cluster(c) = &self.conn else { return self.query_anyway(cmd).await };
        let mut candidates: Vec<Node> = Vec::new();
        for node in self.slots.read().iter().map(|r| r.2.clone()).chain(self.seeds.iter().cloned()) {
            if !candidates.contains(&node) {
                candidates.push(node);
            }
        }
        let mut last = None;
        for (host, port) in candidates {
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host: host.clone(), port });
            let mut conn = c.clone();
            let asked =
                tokio::time::timeout(std::time::Duration::from_secs(1), conn.route_command(cmd.clone(), routing));
            match asked.await {
                Ok(Ok(v)) => return T::from_redis_value(v).map_err(bad_reply),
                Ok(Err(e)) => last = Some(format!("{host}:{port}: {e}")),
                Err(_) => last = Some(format!("{host}:{port}: no answer within 1 s")),
            }
        }
        Err(StoreError::unavailable_because(
            Engine::Redis,
            format!("no cluster node answered ({})", last.unwrap_or_else(|| "none known".into())),
        ))
    }

    /// Reads a cluster's slot map.
    pub(crate) async fn refresh_slots(&self) -> Result<()> {
        let slots: Vec<Vec<Value>> = self.ask_cluster(&redis::cmd("CLUSTER").arg("SLOTS").clone()).await?;
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
    /// replies in order. Every command sent this way is idempotent, so the
    /// commands that failed (those of a pipeline that failed whole, or that
    /// answered an error) are run again after a failure a topology change
    /// explains; those that answered keep their replies (a delivery's count
    /// is not taken again as 0 by a second run):
    /// - a server that lost its scripts (a restart, a flush, a new cluster, a
    ///   promoted replica): the scripts' text is sent with `EVAL` instead,
    ///   to whichever server answers for the keys (which keeps them);
    /// - a redirection, `TRYAGAIN`, `CLUSTERDOWN` or `LOADING` (a reshard, a
    ///   failover): the slot map is read again after a growing pause, up to
    ///   [`ATTEMPTS`] runs (about a third of a second in all);
    /// - a lost connection on a cluster (a primary died): once, after the
    ///   slot map is read again.
    pub(crate) async fn run(&self, batch: &Batch) -> Result<Vec<Value>> {
        self.check_up()?;
        self.run_anyway(batch).await
    }

    /// [`Self::run`] even while Redis is known to be down (the probe's purge).
    async fn run_anyway(&self, batch: &Batch) -> Result<Vec<Value>> {
        let mut replies: Vec<Option<Value>> = vec![None; batch.cmds.len()];
        let mut eval = false;
        let mut lost_connection = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The commands still without a reply (all, at first).
            let pending: Vec<usize> = (0..replies.len()).filter(|&i| replies[i].is_none()).collect();
            let mut run = Batch::default();
            for &i in &pending {
                let (key, cmd) = &batch.cmds[i];
                let cmd = if eval { self.scripts.as_eval(cmd).unwrap_or_else(|| cmd.clone()) } else { cmd.clone() };
                run.add(key.clone(), cmd);
            }
            let (got, failed) = self.run_once(&run).await;
            for (i, v) in pending.into_iter().zip(got) {
                replies[i] = v;
            }
            let Some(e) = failed else {
                return Ok(replies.into_iter().map(|v| v.unwrap_or(Value::Nil)).collect());
            };
            if attempt >= ATTEMPTS {
                return Err(err(e));
            }
            if is_noscript(&e) && !eval {
                eval = true;
                continue;
            }
            let topology = retryable(&e);
            let connection = self.is_cluster() && !lost_connection && (e.is_io_error() || e.is_connection_dropped());
            if !(topology || connection) {
                return Err(err(e));
            }
            lost_connection |= connection;
            if topology {
                tokio::time::sleep(std::time::Duration::from_millis(10 << attempt)).await;
            }
            if self.is_cluster() {
                self.refresh_slots().await?;
            }
        }
    }

    /// One run of `batch`: each command's reply (`None`: it failed, alone
    /// or with its node's pipeline), and the first failure.
    async fn run_once(&self, batch: &Batch) -> (Vec<Option<Value>>, Option<RedisError>) {
        let mut out: Vec<Option<Value>> = vec![None; batch.cmds.len()];
        let mut failed: Option<RedisError> = None;
        let mut take = |i: usize, v: Value, failed: &mut Option<RedisError>| match v {
            Value::ServerError(e) => {
                failed.get_or_insert_with(|| RedisError::from(e));
            }
            v => out[i] = Some(v),
        };
        let Conn::Cluster(conn) = &self.conn else {
            let mut p = redis::pipe();
            for (_, c) in &batch.cmds {
                p.add_command(c.clone());
            }
            match p.query_async::<Vec<Value>>(&mut self.conn.clone()).await {
                Ok(vals) => {
                    for (i, v) in vals.into_iter().enumerate() {
                        take(i, v, &mut failed);
                    }
                }
                Err(e) => failed = Some(e),
            }
            return (out, failed);
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
                (idx, conn.route_pipeline(p, 0, n, route).await)
            }
        });
        for (idx, vals) in futures_util::future::join_all(runs).await {
            match vals {
                Ok(vals) => {
                    for (i, v) in idx.into_iter().zip(vals) {
                        take(i, v, &mut failed);
                    }
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        (out, failed)
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

    /// The health probe: `PING` to the single server, or to every primary of
    /// a cluster (its slot map read again first) and the cluster's state
    /// (`CLUSTER INFO`: `fail` refuses every command). Its answer opens or
    /// closes the breaker every other call checks first.
    ///
    /// A primary that was not one at the last successful probe (a replica
    /// promoted by a failover: replication is asynchronous, so it may lack
    /// the last writes of the primary it replaced; or a primary added for a
    /// reshard) makes the probe drop every key of this deployment once,
    /// with the breaker still open: an inbox missing a delivery would serve
    /// pages without it, an absent one is rebuilt from the database.
    pub(crate) async fn ping_every_server(&self) -> Result<()> {
        let found = match self.probe_servers().await {
            Ok(primaries) => self.after_topology(primaries).await,
            Err(e) => Err(e),
        };
        *self.down.lock() = found.as_ref().err().map(|e| e.to_string());
        found
    }

    /// Drops every key when `primaries` has one the last probe did not see.
    async fn after_topology(&self, mut primaries: Vec<Node>) -> Result<()> {
        primaries.sort();
        let new: Vec<Node> = {
            let seen = self.primaries_seen.lock();
            if seen.is_empty() { Vec::new() } else { primaries.iter().filter(|p| !seen.contains(p)).cloned().collect() }
        };
        if !new.is_empty() {
            tracing::warn!(
                new_primaries = ?new,
                "a Redis node became a primary (a failover or a reshard): it may lack the last writes of the one \
                 it replaced, so every inbox, mark and note is dropped once and rebuilt from the database"
            );
            *self.down.lock() = Some("a new primary: dropping what it may have lost".into());
            let dropped = self.purge_anyway().await?;
            tracing::info!(dropped, "shared state dropped after the topology change");
        }
        *self.primaries_seen.lock() = primaries;
        Ok(())
    }

    /// The primaries (every one answering `PING`), or why not.
    async fn probe_servers(&self) -> Result<Vec<Node>> {
        let Conn::Cluster(c) = &self.conn else {
            let _: String = self.query_anyway(&redis::cmd("PING")).await?;
            return Ok(Vec::new());
        };
        let info: String = self.ask_cluster(&redis::cmd("CLUSTER").arg("INFO").clone()).await?;
        if let Some(state) = info.lines().find_map(|l| l.trim().strip_prefix("cluster_state:"))
            && state != "ok"
        {
            return Err(StoreError::unavailable_because(Engine::Redis, format!("the cluster's state is {state}")));
        }
        let primaries = self.primaries().await?;
        let pings = primaries.clone().into_iter().map(|(host, port)| {
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
        Ok(primaries)
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
                    _ => self.query_anyway(&cmd).await?,
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
        self.check_up()?;
        self.purge_anyway().await
    }

    pub(crate) async fn purge_anyway(&self) -> Result<usize> {
        let keys = self.scan(&format!("{}*", self.prefix)).await?;
        for chunk in keys.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for k in chunk {
                batch.add(k.clone(), redis::cmd("UNLINK").arg(k).clone());
            }
            self.run_anyway(&batch).await?;
        }
        Ok(keys.len())
    }
}
