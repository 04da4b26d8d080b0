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

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub timeline: TimelineConfig,
    pub fanout: FanoutConfig,
    pub graph: GraphConfig,
    pub auth: AuthConfig,
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
    /// How long shutdown waits for requests in flight and the fan-out worker.
    pub shutdown_grace: HumanDuration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            node_id: 0,
            request_timeout: HumanDuration(Duration::from_secs(10)),
            shutdown_grace: HumanDuration(Duration::from_secs(10)),
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
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self { backend: BackendKind::Embedded, data_dir: PathBuf::from("./data"), sync: SyncKind::Fsync }
    }
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
}

impl Default for FanoutConfig {
    fn default() -> Self {
        Self {
            hot_followers: 10_000,
            active_window: HumanDuration(Duration::from_secs(14 * 24 * 3600)),
            chunk_size: 1000,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Server keys: a bearer token equal to one may do anything.
    pub server_keys: Vec<String>,
    /// HS256 secret of user tokens (JWT with `sub` = user id and `exp`).
    pub jwt_secret: Option<String>,
}

impl AuthConfig {
    /// No key of any kind: the server is open (and must stay on loopback).
    pub fn is_open(&self) -> bool {
        self.server_keys.is_empty() && self.jwt_secret.is_none()
    }
}

impl Config {
    /// Checks what serde cannot: ranges and combinations.
    pub fn check(&self) -> Result<(), String> {
        if self.timeline.max_len == 0 {
            return Err("timeline.max_len must be at least 1".into());
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
        if self.auth.server_keys.iter().any(|k| k.len() < 16) {
            return Err("auth.server_keys must be at least 16 characters each".into());
        }
        if self.auth.jwt_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err("auth.jwt_secret must be at least 16 characters".into());
        }
        Ok(())
    }
}
