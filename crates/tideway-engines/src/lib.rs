//! The one place a backend is opened from the settings: the server, every
//! benchmark binary and the tests call [`open`], so the engines are wired
//! the same way everywhere.
//!
//! | `storage.backend` | engines | [`Opened`] |
//! |---|---|---|
//! | `memory` | the in-memory index, nothing durable | [`Opened::Memory`] |
//! | `embedded` | the same index, lazy, over fjall in `storage.data_dir` | [`Opened::Embedded`] |
//! | `postgres`, `mysql` | [`SqlStore`] at `storage.url` (the durable half) and [`RedisShared`] at `redis.urls` (the shared half), as a [`Split`] | [`Opened::Shared`] |
//!
//! What the service needs to know of the backend it gets (whether calls are
//! round trips) the engines report themselves
//! ([`Profiled`](tideway_store::Profiled)); nothing here
//! or in the service decides it from the setting's name.

pub mod allocator;
pub mod testing;

use std::sync::Arc;
use std::time::Instant;
use tideway_config::Config;
use tideway_config::{BackendKind, SyncKind};
use tideway_store::{Backend, NoJournal, Split, Store, StoreError};
use tideway_store_fjall::{FjallJournal, SyncMode};
use tideway_store_redis::{RedisOptions, RedisShared};
use tideway_store_sql::SqlStore;

/// An opened backend, with its engines at hand for what only they do
/// (benchmarks read the index's memory; tests purge Redis, close the pool).
#[derive(Clone)]
pub enum Opened {
    /// Everything in memory, nothing durable (tests, demos).
    Memory(Arc<Store<NoJournal>>),
    /// The embedded default: the lazy index over fjall.
    Embedded(Arc<Store<FjallJournal>>),
    /// A scaled-out node: SQL for the durable half, Redis for the shared one.
    Shared { sql: Arc<SqlStore>, redis: Arc<RedisShared> },
}

impl Opened {
    /// The backend the service runs on.
    pub fn backend(&self) -> Arc<dyn Backend> {
        match self {
            Opened::Memory(s) => s.clone(),
            Opened::Embedded(s) => s.clone(),
            Opened::Shared { sql, redis } => Arc::new(Split::new(sql.clone(), redis.clone())),
        }
    }

    /// Closes the engines' connections (the SQL pool; the others close when
    /// dropped).
    pub async fn close(&self) {
        if let Opened::Shared { sql, .. } = self {
            sql.close().await;
        }
    }
}

/// The embedded store of `cfg` (`storage.data_dir`, `storage.sync`,
/// `storage.cache_size`, `storage.index_size`, `timeline.max_len`).
pub fn open_embedded(cfg: &Config) -> Result<Store<FjallJournal>, StoreError> {
    let sync = match cfg.storage.sync {
        SyncKind::Fsync => SyncMode::Fsync,
        SyncKind::Buffer => SyncMode::Buffer,
    };
    Ok(tideway_store_fjall::open_cached(&cfg.storage.data_dir, sync, cfg.timeline.max_len, cfg.storage.cache_size.0)?
        .with_index_budget(cfg.storage.index_size.0)
        .with_job_window(tideway_store::job_window::window_for(cfg.storage.index_size.0)))
}

/// The SQL + Redis engines of `cfg` (`storage.url`, `redis.urls`,
/// `redis.prefix`, `timeline.max_len`).
pub async fn open_shared(cfg: &Config) -> Result<(SqlStore, RedisShared), StoreError> {
    let url = cfg
        .storage
        .url
        .as_deref()
        .ok_or_else(|| StoreError::config("storage.url (TIDEWAY_STORAGE__URL)", "is not set"))?;
    let sql = SqlStore::connect(url).await?;
    let mut opts = RedisOptions::new(cfg.redis.urls.clone(), cfg.timeline.max_len);
    opts.prefix = cfg.redis.prefix.clone();
    match RedisShared::connect(opts).await {
        Ok(redis) => Ok((sql, redis)),
        Err(e) => {
            sql.close().await;
            Err(e)
        }
    }
}

/// Opens the backend `cfg` names, logging what it opened and how long it
/// took. Errors name the setting to fix.
pub async fn open(cfg: &Config) -> Result<Opened, StoreError> {
    let started = Instant::now();
    let opened = match cfg.storage.backend {
        BackendKind::Memory => {
            tracing::warn!("storage.backend = memory: nothing is written to disk");
            Opened::Memory(Arc::new(Store::in_memory(cfg.timeline.max_len)))
        }
        BackendKind::Embedded => {
            let store = open_embedded(cfg)?;
            tracing::info!(
                data_dir = %cfg.storage.data_dir.display(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "embedded store opened"
            );
            Opened::Embedded(Arc::new(store))
        }
        BackendKind::Postgres | BackendKind::Mysql => {
            let (sql, redis) = open_shared(cfg).await?;
            tracing::info!(
                database = %tideway_config::redact_url(cfg.storage.url.as_deref().unwrap_or_default()),
                redis_nodes = cfg.redis.urls.len(),
                node_id = cfg.server.node_id,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "connected to the shared engines"
            );
            Opened::Shared { sql: Arc::new(sql), redis: Arc::new(redis) }
        }
    };
    tracing::debug!(profile = ?opened.backend().profile(), "backend profile");
    Ok(opened)
}
