//! Tideway opened for a benchmark as `tideway serve` opens it: the engines
//! a [`Config`] names, and service options derived from their profile.

use std::path::Path;
use std::sync::Arc;
use tideway_config::{BackendKind, SyncKind};
use tideway_service::{Config, FeedService, ServiceOptions, SystemClock};

/// The embedded store in `dir`, synced as `sync` says.
pub fn embedded(dir: &Path, sync: SyncKind) -> Config {
    let mut cfg = Config::default();
    cfg.storage.data_dir = dir.to_owned();
    cfg.storage.sync = sync;
    cfg
}

/// PostgreSQL at `url` with Redis at `redis`, its keys under `prefix`.
pub fn postgres(url: &str, redis: &str, prefix: String) -> Config {
    let mut cfg = Config::default();
    cfg.storage.backend = BackendKind::Postgres;
    cfg.storage.url = Some(url.to_owned());
    cfg.redis.urls = vec![redis.to_owned()];
    cfg.redis.prefix = prefix;
    cfg
}

/// A service (node 1) on `cfg`'s engines.
pub async fn service(cfg: &Config) -> Result<Arc<FeedService>, String> {
    let backend = tideway_engines::open(cfg).await.map_err(|e| e.chain())?.backend();
    let opts = ServiceOptions { node_id: 1, ..ServiceOptions::new(cfg, backend.profile()) };
    Ok(Arc::new(FeedService::new(backend, opts, Arc::new(SystemClock)).await.map_err(|e| e.to_string())?))
}
