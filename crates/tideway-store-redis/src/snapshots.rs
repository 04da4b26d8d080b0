//! Live feed snapshots ([`Snapshots`]): one string key each, written with
//! its expiry (`SET … PX`), so any node continues a walk another node
//! started and Redis forgets it on its own. A lost snapshot (expiry, a
//! flush, eviction under `maxmemory`) only makes its walk start over.

use crate::RedisShared;
use async_trait::async_trait;
use tideway_store::{Result, Snapshots};

impl RedisShared {
    fn snapshot_key(&self, id: u64) -> String {
        format!("{}s{{{id}}}", self.prefix)
    }
}

#[async_trait]
impl Snapshots for RedisShared {
    async fn put_snapshot(&self, id: u64, bytes: &[u8], ttl_ms: u64) -> Result<()> {
        let key = self.snapshot_key(id);
        self.query::<()>(redis::cmd("SET").arg(key).arg(bytes).arg("PX").arg(ttl_ms.max(1))).await
    }

    async fn snapshot(&self, id: u64) -> Result<Option<Vec<u8>>> {
        self.query(redis::cmd("GET").arg(self.snapshot_key(id))).await
    }
}
