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

/// How long the probe waits for a primary's `PING` before it counts that
/// primary down.
const PING_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Why calls for a primary's slots fail at once.
fn down_message(node: &Node, why: &str) -> String {
    format!(
        "Redis primary {}:{} is down ({why}); its slots are not asked again until a probe finds it back",
        node.0, node.1
    )
}

/// `PING`s each of `nodes` (within [`PING_WITHIN`]): those that did not
/// answer, and why.
async fn ping_all(c: &ClusterConnection, nodes: &[Node]) -> HashMap<Node, String> {
    let pings = nodes.iter().cloned().map(|(host, port)| {
        let mut c = c.clone();
        async move {
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host: host.clone(), port });
            let pinged = tokio::time::timeout(PING_WITHIN, c.route_command(redis::cmd("PING"), routing)).await;
            let why = match pinged {
                Ok(Ok(_)) => return None,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer within {} ms", PING_WITHIN.as_millis()),
            };
            Some(((host, port), why))
        }
    });
    futures_util::future::join_all(pings).await.into_iter().flatten().collect()
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

/// The key a command reads or writes (`None`: one any node takes, such as
/// `PUBLISH`): its first argument, or a script's first declared key.
fn key_of(cmd: &Cmd) -> Option<Vec<u8>> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(b) => Some(b),
        _ => None,
    });
    let name = args.next()??.to_ascii_uppercase();
    match name.as_slice() {
        b"PUBLISH" | b"PING" => None,
        b"EVAL" | b"EVALSHA" => {
            let keys: usize = std::str::from_utf8(args.nth(1)??).ok()?.parse().ok()?;
            (keys > 0).then(|| args.next()).flatten().flatten().map(<[u8]>::to_vec)
        }
        _ => args.next().flatten().map(<[u8]>::to_vec),
    }
}

/// What a batch run found: each command's reply, `None` for those left
/// unsent because the primary serving their slot is down (`down` says
/// which and why).
pub(crate) struct Replies {
    pub(crate) values: Vec<Option<Value>>,
    pub(crate) down: Option<String>,
}

impl Replies {
    /// Every reply, or a fast failure naming the primary that is down.
    fn all(self) -> Result<Vec<Value>> {
        match self.down {
            None => Ok(self.values.into_iter().map(|v| v.unwrap_or(Value::Nil)).collect()),
            Some(why) => Err(StoreError::unavailable_because(Engine::Redis, why)),
        }
    }
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

    /// Fails at once when the primary serving `slot` did not answer the
    /// last probe (a cluster whose other primaries answer).
    fn check_slot(&self, slot: u16) -> Result<()> {
        let down = self.down_primaries.read();
        if down.is_empty() {
            return Ok(());
        }
        match self.node_of_slot(slot) {
            Some(node) => match down.get(&node) {
                Some(why) => Err(StoreError::unavailable_because(Engine::Redis, down_message(&node, why))),
                None => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// Whether the last probe found `node` down.
    fn is_down(&self, node: &Node) -> bool {
        self.down_primaries.read().contains_key(node)
    }

    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &Cmd) -> Result<T> {
        self.check_up()?;
        if let Conn::Cluster(c) = &self.conn
            && !self.down_primaries.read().is_empty()
        {
            match key_of(cmd) {
                Some(key) => self.check_slot(slot_of(&key))?,
                None => {
                    // One any node takes (`PUBLISH`): to a primary that
                    // answers, not to whichever the client would pick.
                    let nodes: Vec<Node> = self.slots.read().iter().map(|r| r.2.clone()).collect();
                    if let Some((host, port)) = nodes.into_iter().find(|n| !self.is_down(n)) {
                        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
                        let v = c.clone().route_command(cmd.clone(), routing).await.map_err(err)?;
                        return T::from_redis_value(v).map_err(bad_reply);
                    }
                }
            }
        }
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
        // The primaries the last probe found down are asked last.
        candidates.sort_by_key(|n| self.is_down(n));
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
        self.node_of_slot(slot_of(key.as_bytes()))
    }

    /// The primary serving `slot` in a cluster, by this node's slot map.
    fn node_of_slot(&self, slot: u16) -> Option<Node> {
        let map = self.slots.read();
        let i = map.partition_point(|r| r.0 <= slot).checked_sub(1)?;
        (map[i].1 >= slot).then(|| map[i].2.clone())
    }

    /// Addresses of the nodes that hold keys: the primaries of a cluster.
    async fn primaries(&self) -> Result<Vec<Node>> {
        self.refresh_slots().await?;
        Ok(self.mapped_primaries())
    }

    /// The primaries of this node's slot map, as it is.
    fn mapped_primaries(&self) -> Vec<Node> {
        let mut out: Vec<Node> = Vec::new();
        for (_, _, node) in self.slots.read().iter() {
            if !out.contains(node) {
                out.push(node.clone());
            }
        }
        out
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
    ///
    /// The commands for the slots of a primary the last probe found down
    /// are not sent: the batch then fails at once for them, after the
    /// others ran (see [`Self::run_replies`] for their replies).
    pub(crate) async fn run(&self, batch: &Batch) -> Result<Vec<Value>> {
        self.run_replies(batch).await?.all()
    }

    /// [`Self::run`] with the replies of the commands that ran when some
    /// were not sent (their primary is down).
    pub(crate) async fn run_replies(&self, batch: &Batch) -> Result<Replies> {
        self.check_up()?;
        self.run_anyway(batch).await
    }

    /// [`Self::run_replies`] even while Redis is known to be down (the
    /// probe's purge).
    async fn run_anyway(&self, batch: &Batch) -> Result<Replies> {
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
            let (got, failed, down) = self.run_once(&run).await;
            for (i, v) in pending.into_iter().zip(got) {
                replies[i] = v;
            }
            let Some(e) = failed else {
                return Ok(Replies { values: replies, down });
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
    /// or with its node's pipeline, or was not sent), the first failure,
    /// and why commands were not sent (their primary is down).
    async fn run_once(&self, batch: &Batch) -> (Vec<Option<Value>>, Option<RedisError>, Option<String>) {
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
            return (out, failed, None);
        };
        let mut by_node: HashMap<Option<Node>, Vec<usize>> = HashMap::new();
        for (i, (key, _)) in batch.cmds.iter().enumerate() {
            by_node.entry(self.node_of(key)).or_default().push(i);
        }
        let mut down = None;
        {
            let away = self.down_primaries.read();
            by_node.retain(|node, _| match node.as_ref().and_then(|n| away.get(n).map(|why| (n, why))) {
                Some((n, why)) => {
                    down.get_or_insert_with(|| down_message(n, why));
                    false
                }
                None => true,
            });
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
        (out, failed, down)
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
    /// closes the breaker every other call checks first: the whole of it for
    /// one Redis, a cluster that is not `ok` or one whose nodes do not
    /// answer; only the slots of the primaries that did not answer their
    /// `PING` (within a second) when the cluster is `ok` otherwise (as it
    /// stays with `cluster-require-full-coverage no`, docs/deploy.md). The
    /// probe fails while any primary is down all the same: the shared half
    /// is not whole.
    ///
    /// A primary that was not one at the last successful probe (a replica
    /// promoted by a failover: replication is asynchronous, so it may lack
    /// the last writes of the primary it replaced; or a primary added for a
    /// reshard) makes the probe drop every key of this deployment once,
    /// with the breaker still open: an inbox missing a delivery would serve
    /// pages without it, an absent one is rebuilt from the database.
    pub(crate) async fn ping_every_server(&self) -> Result<()> {
        let found = match self.probe_servers().await {
            Ok((primaries, away)) => self.after_topology(primaries).await.map(|()| away),
            Err(e) => Err(e),
        };
        match found {
            Ok(away) => {
                let mut named: Vec<String> = away.iter().map(|(n, why)| down_message(n, why)).collect();
                named.sort();
                *self.down_primaries.write() = away;
                *self.down.lock() = None;
                if named.is_empty() {
                    Ok(())
                } else {
                    Err(StoreError::unavailable_because(Engine::Redis, named.join("; ")))
                }
            }
            Err(e) => {
                *self.down.lock() = Some(e.to_string());
                self.down_primaries.write().clear();
                Err(e)
            }
        }
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

    /// The primaries, and those of them that did not answer `PING` (with
    /// why), or why the whole is down.
    ///
    /// The primaries of the slot map are pinged first, and those that do
    /// not answer marked down at once: the cluster's own view is then asked
    /// of the others (not after a second's wait on each silent one), and
    /// calls for their slots fail at once even when the caller's timeout
    /// cuts this probe short. A primary the slot map read then adds is
    /// pinged after.
    async fn probe_servers(&self) -> Result<(Vec<Node>, HashMap<Node, String>)> {
        let Conn::Cluster(c) = &self.conn else {
            let _: String = self.query_anyway(&redis::cmd("PING")).await?;
            return Ok((Vec::new(), HashMap::new()));
        };
        let known = self.mapped_primaries();
        let mut away = ping_all(c, &known).await;
        *self.down_primaries.write() = away.clone();
        let info: String = self.ask_cluster(&redis::cmd("CLUSTER").arg("INFO").clone()).await?;
        if let Some(state) = info.lines().find_map(|l| l.trim().strip_prefix("cluster_state:"))
            && state != "ok"
        {
            return Err(StoreError::unavailable_because(Engine::Redis, format!("the cluster's state is {state}")));
        }
        let primaries = self.primaries().await?;
        let unpinged: Vec<Node> = primaries.iter().filter(|p| !known.contains(p)).cloned().collect();
        away.extend(ping_all(c, &unpinged).await);
        away.retain(|n, _| primaries.contains(n));
        Ok((primaries, away))
    }

    /// Every key matching `pattern` (on every primary of a cluster).
    pub(crate) async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let nodes: Vec<Option<Node>> =
            if self.is_cluster() { self.primaries().await?.into_iter().map(Some).collect() } else { vec![None] };
        // Every primary is asked: one that is down fails the scan at once.
        for node in nodes.iter().flatten() {
            if let Some(why) = self.down_primaries.read().get(node) {
                return Err(StoreError::unavailable_because(Engine::Redis, down_message(node, why)));
            }
        }
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
            self.run_anyway(&batch).await?.all()?;
        }
        Ok(keys.len())
    }
}
