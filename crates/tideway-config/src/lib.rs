//! Typed configuration. Defaults live here in code; the binary layers a TOML
//! file and `TIDEWAY_<SECTION>__<KEY>` environment variables on top, once,
//! at start-up. Unknown keys are rejected so that a typo is an error, not a
//! silently ignored setting.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A duration written like `30s`, `15m`, `14d`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s)
            .map(HumanDuration)
            .map_err(|e| serde::de::Error::custom(format!("{s:?} is not a duration like 30s, 15m or 14d: {e}")))
    }
}

/// A size in bytes written like `64MiB`, `1GiB`, `500MB` or `1048576`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size like 64MiB, 1GiB or 1048576"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kib" => 1 << 10,
            "mib" => 1 << 20,
            "gib" => 1 << 30,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            other => return Err(format!("{s:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, KB, MB or GB)")),
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("{s:?} is too large"))
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (n, unit) = match self.0 {
            b if b >= 1 << 30 && b % (1 << 30) == 0 => (b >> 30, "GiB"),
            b if b >= 1 << 20 && b % (1 << 20) == 0 => (b >> 20, "MiB"),
            b if b >= 1 << 10 && b % (1 << 10) == 0 => (b >> 10, "KiB"),
            b => (b, "B"),
        };
        s.serialize_str(&format!("{n}{unit}"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ByteSize::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub timeline: TimelineConfig,
    pub fanout: FanoutConfig,
    pub graph: GraphConfig,
    pub items: ItemsConfig,
    pub auth: AuthConfig,
    pub rate_limit: RateLimitConfig,
    pub redis: RedisConfig,
    pub live: LiveConfig,
    pub stream: StreamConfig,
    pub getstream: GetstreamConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Node id (0..=1023) written into every item id; give each node of a
    /// cluster its own.
    pub node_id: u16,
    /// Longest a request may take before it is answered 503.
    pub request_timeout: HumanDuration,
    /// How long shutdown waits for requests in flight and the fan-out worker;
    /// connections still open after it are closed.
    pub shutdown_grace: HumanDuration,
    /// Longest a client may take to send a request's headers, counted from
    /// the connection's start or the end of its previous response (so it is
    /// also the keep-alive idle timeout: keep it above a load balancer's).
    pub header_read_timeout: HumanDuration,
    /// Connections served at once; a few more are served one request each,
    /// and beyond that a connection is answered 503. Lowered at start to
    /// fit the process's file-descriptor limit.
    pub max_connections: usize,
    /// Logs one line per request (target `tideway::access`, level info).
    pub access_log: bool,
    /// How far this node's clock may be from the database's (measured every
    /// second) before the node refuses writes (503) and is not ready.
    pub max_clock_offset: HumanDuration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            node_id: 0,
            request_timeout: HumanDuration(Duration::from_secs(10)),
            shutdown_grace: HumanDuration(Duration::from_secs(10)),
            header_read_timeout: HumanDuration(Duration::from_secs(30)),
            max_connections: 10_000,
            access_log: false,
            max_clock_offset: HumanDuration(Duration::from_secs(2)),
        }
    }
}

/// Which backend stores the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// fjall in `data_dir` (the default): durable, no other server needed.
    Embedded,
    /// Nothing on disk: for tests and demos.
    Memory,
    /// PostgreSQL at `storage.url`, with Redis at `redis.urls`: one of
    /// several identical nodes.
    Postgres,
    /// MySQL or MariaDB at `storage.url`, with Redis at `redis.urls`.
    Mysql,
}

impl BackendKind {
    /// The engine's name in health reports and metrics.
    pub fn engine_name(self) -> &'static str {
        match self {
            BackendKind::Embedded => "embedded",
            BackendKind::Memory => "memory",
            BackendKind::Postgres => "postgres",
            BackendKind::Mysql => "mysql",
        }
    }

    /// Whether this backend is shared by several nodes (SQL + Redis).
    pub fn is_shared(self) -> bool {
        matches!(self, BackendKind::Postgres | BackendKind::Mysql)
    }
}

/// How hard an acknowledged write is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncKind {
    /// fdatasync before every acknowledgement: survives power loss.
    Fsync,
    /// Hand to the OS: survives a process crash, not a power loss.
    Buffer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    pub backend: BackendKind,
    pub data_dir: PathBuf,
    pub sync: SyncKind,
    /// Memory for the embedded store's caches, in all: the engine's blocks,
    /// and the recent and hot item records and bodies (every item is on disk).
    /// On postgres and mysql: each node's copies of item records, checked
    /// against the database by every page that uses them.
    pub cache_size: ByteSize,
    /// Memory for the embedded store's index of loaded users, items,
    /// notifications and live sessions (what pages and writes read besides
    /// item records): beyond it, what was not used lately is let go and
    /// loaded again from disk when needed.
    pub index_size: ByteSize,
    /// The database of the `postgres` and `mysql` backends
    /// (`postgres://user@host/db`, `mysql://user@host/db`).
    pub url: Option<String>,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            backend: BackendKind::Embedded,
            data_dir: PathBuf::from("./data"),
            sync: SyncKind::Fsync,
            cache_size: ByteSize(tideway_store::DEFAULT_CACHE_SIZE),
            index_size: ByteSize(default_index_size()),
            url: None,
        }
    }
}

/// Redis, for the shared state of the `postgres` and `mysql` backends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// One URL: a single Redis; several: the nodes of a Redis Cluster. In the
    /// environment, comma-separated (`TIDEWAY_REDIS__URLS=redis://a:7101,redis://b:7102`).
    #[serde(deserialize_with = "list_or_commas")]
    pub urls: Vec<String>,
    /// Prefix of every key, so several deployments can share a Redis.
    pub prefix: String,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self { urls: Vec::new(), prefix: "tw:".into() }
    }
}

/// A list, or one string of comma-separated values (as the environment gives).
fn list_or_commas<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Urls {
        List(Vec<String>),
        One(String),
    }
    Ok(match Urls::deserialize(d)? {
        Urls::List(v) => v,
        Urls::One(s) => s.split(',').map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned).collect(),
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimelineConfig {
    /// Most entries kept in one home inbox; older pages are pulled.
    pub max_len: usize,
}

impl Default for TimelineConfig {
    fn default() -> Self {
        Self { max_len: 800 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FanoutConfig {
    /// Followers at which an author counts as hot (shown in `GET /v1/users/{u}`).
    pub hot_followers: u64,
    /// Readers active within this window count as active.
    pub active_window: HumanDuration,
    /// Followers delivered per fan-out step (and per checkpoint).
    pub chunk_size: usize,
    /// How long a worker holds a fan-out job it claimed: a worker that dies
    /// loses its jobs after this, and another resumes them from their
    /// checkpoints. Renewed at every step (steps take milliseconds).
    pub lease: HumanDuration,
}

impl Default for FanoutConfig {
    fn default() -> Self {
        Self {
            hot_followers: 10_000,
            active_window: HumanDuration(Duration::from_secs(14 * 24 * 3600)),
            chunk_size: 1000,
            lease: HumanDuration(Duration::from_secs(30)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraphConfig {
    /// Most users one user may follow.
    pub max_following: usize,
}

impl Default for GraphConfig {
    fn default() -> Self {
        Self { max_following: 2000 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ItemsConfig {
    /// How far ahead of the server clock an imported `created_at` may be:
    /// within it the item is taken as created now, beyond it refused (400).
    pub max_clock_skew: HumanDuration,
}

impl Default for ItemsConfig {
    fn default() -> Self {
        Self { max_clock_skew: HumanDuration(Duration::from_secs(10)) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LiveConfig {
    /// How long a live feed's snapshot (taken by its first page) serves
    /// the later pages; after it a cursor of that walk is `410
    /// cursor_expired`.
    pub snapshot_ttl: HumanDuration,
}

impl Default for LiveConfig {
    fn default() -> Self {
        Self { snapshot_ttl: HumanDuration(Duration::from_secs(30 * 60)) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StreamConfig {
    /// How old an event id a home stream resumes from; an older one gets
    /// `reset` (the client reloads the first page).
    pub replay_window: HumanDuration,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self { replay_window: HumanDuration(Duration::from_secs(10 * 60)) }
    }
}

/// What a GetStream feed group is (GetStream's feed types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedGroupKind {
    Flat,
    Aggregated,
    Notification,
}

/// The GetStream-compatible API (API.md, "The GetStream-compatible
/// API"): on when both the key and the secret are set.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GetstreamConfig {
    /// The app's API key, as clients send it in `api_key`.
    pub api_key: Option<String>,
    /// The app's API secret, which signs its tokens (HS256).
    pub api_secret: Option<String>,
    /// The feed groups and their kinds; a feed of another group is
    /// GetStream's `FeedConfigException`.
    pub feed_groups: std::collections::BTreeMap<String, FeedGroupKind>,
}

impl GetstreamConfig {
    /// Whether the API is served (a key and a secret are set).
    pub fn enabled(&self) -> bool {
        self.api_key.is_some() && self.api_secret.is_some()
    }

    fn check(&self) -> Result<(), String> {
        match (&self.api_key, &self.api_secret) {
            (Some(k), Some(s)) => {
                if k.is_empty() || s.is_empty() {
                    return Err("getstream.api_key and getstream.api_secret must not be empty".into());
                }
            }
            (None, None) => {}
            _ => {
                return Err(
                    "getstream.api_key and getstream.api_secret are set together (TIDEWAY_GETSTREAM__API_KEY, \
                     TIDEWAY_GETSTREAM__API_SECRET), or neither"
                        .into(),
                );
            }
        }
        for name in self.feed_groups.keys() {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "getstream.feed_groups: {name:?} is not a feed group name (letters, digits and _ only)"
                ));
            }
        }
        Ok(())
    }
}

impl Default for GetstreamConfig {
    fn default() -> Self {
        use FeedGroupKind::*;
        let groups = [
            ("user", Flat),
            ("timeline", Flat),
            ("flat", Flat),
            ("topic", Flat),
            ("aggregated", Aggregated),
            ("timeline_aggregated", Aggregated),
            ("notification", Notification),
        ];
        Self {
            api_key: None,
            api_secret: None,
            feed_groups: groups.into_iter().map(|(n, k)| (n.to_owned(), k)).collect(),
        }
    }
}

impl std::fmt::Debug for GetstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GetstreamConfig")
            .field("api_key", &self.api_key)
            .field("api_secret", &self.api_secret.as_ref().map(|_| REDACTED))
            .field("feed_groups", &self.feed_groups)
            .finish()
    }
}

#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Server keys: a bearer token equal to one may do anything.
    pub server_keys: Vec<String>,
    /// HS256 secret of user tokens (JWT with `sub` = user id and `exp`).
    pub jwt_secret: Option<String>,
    /// Clock skew allowed when checking a user token's `exp` and `nbf`.
    pub jwt_leeway: HumanDuration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { server_keys: Vec::new(), jwt_secret: None, jwt_leeway: HumanDuration(Duration::from_secs(5)) }
    }
}

/// Token buckets: `burst` requests at once, refilled at `per_second`.
/// A `burst` of 0 turns that limit off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitConfig {
    /// Per user token (on by default).
    pub user_burst: u32,
    pub user_per_second: u32,
    /// Per client address, for user tokens and unauthenticated requests
    /// (off by default; behind a proxy every client shares its address).
    pub address_burst: u32,
    pub address_per_second: u32,
    /// One bucket shared by server keys and the open (no keys) mode:
    /// unlimited by default.
    pub server_burst: u32,
    pub server_per_second: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            user_burst: 300,
            user_per_second: 50,
            address_burst: 0,
            address_per_second: 100,
            server_burst: 0,
            server_per_second: 10_000,
        }
    }
}

/// A URL with its password (if any) replaced by [`REDACTED`].
pub use tideway_store::redact_url;

/// What replaces a secret wherever the configuration is shown.
pub const REDACTED: &str = "<redacted>";

/// The least `storage.index_size` taken: below it, a unit mistake (`256`
/// for `256MiB`) is more likely than a wish.
pub const MIN_INDEX_SIZE: u64 = 64 << 10;

/// The default `storage.index_size`: an eighth of the memory this process
/// may use (the machine's, or its cgroup's limit when that is lower),
/// between 256 MiB and 4 GiB; 256 MiB when neither can be read. The index
/// is what keeps pages warm: a fixed 256 MiB let a million users who each
/// followed one account push the Twitter graph's readers out on a 24 GiB
/// machine (docs/benchmarks.md, 2026-12-04).
pub fn default_index_size() -> u64 {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    index_size_for(
        read("/proc/meminfo").as_deref().and_then(mem_total),
        // cgroup v2, then v1 (whose "no limit" is a huge number).
        read("/sys/fs/cgroup/memory.max")
            .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
            .as_deref()
            .and_then(|v| v.trim().parse::<u64>().ok()),
    )
}

/// [`default_index_size`] given the machine's memory and a cgroup limit.
fn index_size_for(total: Option<u64>, limit: Option<u64>) -> u64 {
    const LEAST: u64 = 256 << 20;
    match total.into_iter().chain(limit).min() {
        Some(mem) => (mem / 8).clamp(LEAST, 4 << 30),
        None => LEAST,
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Secrets never print: not in logs, not in `tideway config`.
impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.redacted();
        f.debug_struct("AuthConfig")
            .field("server_keys", &c.server_keys)
            .field("jwt_secret", &c.jwt_secret)
            .field("jwt_leeway", &c.jwt_leeway)
            .finish()
    }
}

impl AuthConfig {
    /// A copy with every secret replaced by [`REDACTED`] (what is set stays
    /// visible as set; what is not stays absent).
    pub fn redacted(&self) -> Self {
        Self {
            server_keys: self.server_keys.iter().map(|_| REDACTED.to_owned()).collect(),
            jwt_secret: self.jwt_secret.as_ref().map(|_| REDACTED.to_owned()),
            jwt_leeway: self.jwt_leeway,
        }
    }

    /// No key of any kind: the server is open (and must stay on loopback).
    pub fn is_open(&self) -> bool {
        self.server_keys.is_empty() && self.jwt_secret.is_none()
    }
}

impl Config {
    /// The configuration as it may be shown: secrets redacted.
    pub fn redacted(&self) -> Self {
        let storage = StorageConfig { url: self.storage.url.as_deref().map(redact_url), ..self.storage.clone() };
        let redis = RedisConfig { urls: self.redis.urls.iter().map(|u| redact_url(u)).collect(), ..self.redis.clone() };
        let getstream = GetstreamConfig {
            api_secret: self.getstream.api_secret.as_ref().map(|_| REDACTED.to_owned()),
            ..self.getstream.clone()
        };
        Self { auth: self.auth.redacted(), storage, redis, getstream, ..self.clone() }
    }

    /// Checks what serde cannot: ranges and combinations.
    pub fn check(&self) -> Result<(), String> {
        self.getstream.check()?;
        if self.timeline.max_len == 0 {
            return Err("timeline.max_len must be at least 1".into());
        }
        if self.storage.index_size.0 < MIN_INDEX_SIZE {
            return Err(format!(
                "storage.index_size must be at least 64KiB (it is {} bytes): the index needs room for a page's users",
                self.storage.index_size.0
            ));
        }
        if self.fanout.chunk_size == 0 {
            return Err("fanout.chunk_size must be at least 1".into());
        }
        if self.graph.max_following == 0 {
            return Err("graph.max_following must be at least 1".into());
        }
        if self.server.node_id > tideway_core::ids::MAX_NODE {
            return Err(format!("server.node_id must be at most {}", tideway_core::ids::MAX_NODE));
        }
        if self.auth.is_open() && !self.server.listen.ip().is_loopback() {
            return Err(format!(
                "no auth.server_keys or auth.jwt_secret is configured, so the server is open and may only listen on \
                 loopback, not {}; configure a key or listen on 127.0.0.1",
                self.server.listen
            ));
        }
        for (name, burst, rate) in [
            ("user", self.rate_limit.user_burst, self.rate_limit.user_per_second),
            ("address", self.rate_limit.address_burst, self.rate_limit.address_per_second),
            ("server", self.rate_limit.server_burst, self.rate_limit.server_per_second),
        ] {
            if burst > 0 && rate == 0 {
                return Err(format!(
                    "rate_limit.{name}_per_second must be at least 1 when rate_limit.{name}_burst is set"
                ));
            }
        }
        if self.server.max_connections == 0 {
            return Err("server.max_connections must be at least 1".into());
        }
        if self.server.header_read_timeout.0.is_zero() {
            return Err("server.header_read_timeout must be longer than 0s".into());
        }
        if self.auth.server_keys.iter().any(|k| k.len() < 16) {
            return Err("auth.server_keys must be at least 16 characters each".into());
        }
        if self.auth.jwt_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err("auth.jwt_secret must be at least 16 characters".into());
        }
        let backend = self.storage.backend;
        if backend.is_shared() {
            let scheme_ok = |u: &str| match backend {
                BackendKind::Postgres => u.starts_with("postgres://") || u.starts_with("postgresql://"),
                _ => u.starts_with("mysql://") || u.starts_with("mariadb://"),
            };
            match &self.storage.url {
                None => {
                    return Err(format!(
                        "storage.backend = {} needs storage.url (TIDEWAY_STORAGE__URL), e.g. {}",
                        format!("{backend:?}").to_lowercase(),
                        if backend == BackendKind::Postgres {
                            "postgres://tideway@127.0.0.1/tideway"
                        } else {
                            "mysql://tideway@127.0.0.1/tideway"
                        }
                    ));
                }
                Some(u) if !scheme_ok(u) => {
                    return Err(format!(
                        "storage.url (TIDEWAY_STORAGE__URL) must be a {} URL for storage.backend = {}",
                        if backend == BackendKind::Postgres { "postgres://" } else { "mysql://" },
                        format!("{backend:?}").to_lowercase()
                    ));
                }
                Some(_) => {}
            }
            if self.redis.urls.is_empty() {
                return Err(format!(
                    "storage.backend = {} needs redis.urls (TIDEWAY_REDIS__URLS): one redis:// URL, or the nodes of a \
                     Redis Cluster separated by commas",
                    format!("{backend:?}").to_lowercase()
                ));
            }
        } else if !self.redis.urls.is_empty() || self.storage.url.is_some() {
            return Err("redis.urls and storage.url are used by storage.backend = postgres or mysql only; \
                        the embedded and memory backends keep everything in one process"
                .into());
        }
        if self.redis.prefix.contains(['{', '}']) {
            return Err("redis.prefix must not contain braces (they are Redis Cluster hash tags)".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_index_is_an_eighth_of_memory_within_bounds() {
        let gib = 1u64 << 30;
        assert_eq!(mem_total("MemTotal:       24683792 kB\nMemFree: 1 kB\n"), Some(24_683_792 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        // 24 GiB: 3 GiB; a cgroup's lower limit wins; the bounds hold.
        assert_eq!(index_size_for(Some(24 * gib), None), 3 * gib);
        assert_eq!(index_size_for(Some(24 * gib), Some(4 * gib)), gib / 2);
        assert_eq!(index_size_for(Some(24 * gib), Some(u64::MAX / 2)), 3 * gib);
        assert_eq!(index_size_for(Some(gib), None), 256 << 20);
        assert_eq!(index_size_for(Some(512 * gib), None), 4 * gib);
        assert_eq!(index_size_for(None, None), 256 << 20);
        // What the machine gives is within the bounds.
        assert!((256 << 20..=4 * gib).contains(&default_index_size()));
    }

    #[test]
    fn the_getstream_key_and_secret_come_together_and_the_secret_is_redacted() {
        let mut c = Config::default();
        assert!(!c.getstream.enabled() && c.check().is_ok(), "off by default");
        assert_eq!(c.getstream.feed_groups.get("notification"), Some(&FeedGroupKind::Notification));
        c.getstream.api_key = Some("key".into());
        assert!(c.check().expect_err("a key alone").contains("getstream.api_secret"));
        c.getstream.api_secret = Some("s3cret".into());
        assert!(c.check().is_ok() && c.getstream.enabled());
        let shown = c.redacted().getstream;
        assert_eq!(shown.api_secret.as_deref(), Some(REDACTED));
        assert!(!format!("{:?}", c.getstream).contains("s3cret"));
        c.getstream.feed_groups.insert("bad group".into(), FeedGroupKind::Flat);
        assert!(c.check().expect_err("a bad group name").contains("bad group"));
    }

    #[test]
    fn urls_show_without_their_passwords() {
        assert_eq!(redact_url("postgres://tw:s3cret@db:5432/tw"), "postgres://tw:<redacted>@db:5432/tw");
        assert_eq!(redact_url("redis://:pw@127.0.0.1:6379"), "redis://:<redacted>@127.0.0.1:6379");
        assert_eq!(redact_url("mysql://root@127.0.0.1/test"), "mysql://root@127.0.0.1/test");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn a_shared_backend_needs_its_engines() {
        let mut c = Config::default();
        c.storage.backend = BackendKind::Postgres;
        assert!(c.check().is_err_and(|e| e.contains("TIDEWAY_STORAGE__URL")));
        c.storage.url = Some("mysql://root@h/db".into());
        assert!(c.check().is_err_and(|e| e.contains("postgres://")), "the wrong scheme");
        c.storage.url = Some("postgres://tw@h/db".into());
        assert!(c.check().is_err_and(|e| e.contains("TIDEWAY_REDIS__URLS")));
        c.redis.urls = vec!["redis://127.0.0.1:6379".into()];
        assert_eq!(c.check(), Ok(()));
        let embedded = Config { redis: c.redis.clone(), ..Config::default() };
        assert!(embedded.check().is_err(), "redis.urls with the embedded store is a mistake, not ignored");
    }

    #[test]
    fn sizes_parse_and_print_back() {
        for (text, bytes) in
            [("64MiB", 64 << 20), ("1GiB", 1 << 30), ("500MB", 500_000_000), ("4096", 4096), ("2 kib", 2048)]
        {
            assert_eq!(ByteSize::parse(text), Ok(ByteSize(bytes)), "{text}");
        }
        for bad in ["", "MiB", "12XB", "-1", "99999999999999GiB"] {
            assert!(ByteSize::parse(bad).is_err(), "{bad}");
        }
        let printed = serde_json::to_string(&StorageConfig::default().cache_size).unwrap_or_default();
        assert_eq!(printed, "\"128MiB\"");
    }
}
