//! Reader activity and hot-author marks: [`Activity`] and [`HotAuthors`],
//! each over a few sharded keys.

use crate::RedisShared;
use crate::cluster::{Batch, SCAN_BATCH};
use crate::inbox::be;
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_core::{Key, Millis, UserId};
use tideway_store::{Activity, HotAuthors, Result};

/// Activity and hot-author shards (keys); enough to spread over a cluster.
const SHARDS: u64 = 16;

impl RedisShared {
    fn activity_key(&self, shard: u64) -> String {
        format!("{}a{{a{shard}}}", self.prefix)
    }

    fn hot_key(&self, shard: u64) -> String {
        format!("{}h{{h{shard}}}", self.prefix)
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
        let keys = self.unpushed_keys(authors).await?;
        Ok(tideway_store::unpushed_above_floor(authors, &keys, floor))
    }

    /// One `HMGET` per shard of marks, in one batch.
    async fn unpushed_keys(&self, authors: &[UserId]) -> Result<Vec<Option<Key>>> {
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
        let mut keys: HashMap<UserId, Key> = HashMap::new();
        for (s, vals) in order.iter().zip(got) {
            for ((u, _), v) in groups[s].iter().zip(vals) {
                if let Some(v) = v.filter(|v| v.len() == 8) {
                    keys.insert(*u, be(&v));
                }
            }
        }
        Ok(authors.iter().map(|u| keys.get(u).copied()).collect())
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
