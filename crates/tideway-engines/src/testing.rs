//! Scaled-out nodes for tests: a fresh database on the test server and a
//! Redis key prefix of its own, opened as `tideway serve` opens them, and
//! removed again ([`FreshNode::close`]).

use crate::Opened;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tideway_config::BackendKind;
use tideway_config::Config;
use tideway_store::Backend;
use tideway_store_sql::testing::FreshDatabase;

/// The value of a test engine's variable (`scripts/services.sh up` sets
/// them), or a panic saying how to set it.
pub fn var(v: &str) -> String {
    std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set: run `eval \"$(scripts/services.sh up)\"`"))
}

/// A node's engines on a database of its own and a Redis prefix of its own.
pub struct FreshNode {
    pub opened: Opened,
    db: FreshDatabase,
}

impl FreshNode {
    /// `kind` (`Postgres` or `Mysql`) on the server named by `url_var`,
    /// with the Redis of `TIDEWAY_TEST_REDIS_URL`; keys under a prefix that
    /// starts with `prefix`.
    pub async fn open(kind: BackendKind, url_var: &str, prefix: &str) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let db = FreshDatabase::create(&var(url_var)).await.expect("a fresh database");
        let mut cfg = Config::default();
        cfg.storage.backend = kind;
        cfg.storage.url = Some(db.url.clone());
        cfg.redis.urls = vec![var("TIDEWAY_TEST_REDIS_URL")];
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        cfg.redis.prefix = format!("{prefix}{}x{nanos}x{}:", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let opened = crate::open(&cfg).await.expect("open the engines");
        FreshNode { opened, db }
    }

    pub fn backend(&self) -> Arc<dyn Backend> {
        self.opened.backend()
    }

    /// Purges the prefix's keys, closes the pool, drops the database.
    pub async fn close(self) {
        if let Opened::Shared { redis, .. } = &self.opened {
            redis.purge().await.expect("purge");
        }
        self.opened.close().await;
        self.db.drop().await.expect("drop the database");
    }
}
