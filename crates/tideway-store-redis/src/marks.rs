//! Reader activity and hot-author marks: [`Activity`] and [`HotAuthors`],
//! each over a few sharded keys.
//!
//! A home page asks for the marks of everyone the reader follows; few of
//! them are hot. Each node keeps a copy of which authors have a mark
//! ([`HotCopy`]) with the generation of that set it was read at (`{p}hg`, a
//! random token), and a page reads the generation and the marks of only
//! the followed authors in the copy: one `GET` and usually no `HMGET`,
//! where it was one `HMGET` per shard (16) of every followed author. When
//! the generation moved, the copy is read again (the generation first,
//! then the marks: a copy never holds a generation newer than its marks).
//!
//! The generation moves after every first mark of an author and before the
//! post that made it is acknowledged, so a page that began after the post
//! sees a generation its copy does not have. A first mark is written with
//! a ninth byte until its generation was moved (`scripts::MARK`): a node
//! that failed between the two (the post then failed) moves it at the
//! author's next mark. Marks only grow; a flush drops the generation with
//! them, and every copy then differs from the generation read.

use crate::RedisShared;
use crate::cluster::{Batch, SCAN_BATCH, bad_reply};
use crate::inbox::be;
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
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

    fn hot_generation_key(&self) -> String {
        format!("{}hg", self.prefix)
    }

    /// Reads the set of marked authors again (its generation first), keeps
    /// it as this node's copy, and returns every mark.
    async fn read_hot_copy(&self) -> Result<HashMap<UserId, Key>> {
        let key = self.hot_generation_key();
        let mut generation: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(&key)).await?;
        if generation.is_none() {
            // (none yet, or flushed: one node's token wins)
            let _: Option<String> =
                self.query(redis::cmd("SET").arg(&key).arg(&rand::random::<[u8; 16]>()[..]).arg("NX")).await?;
            generation = self.query(redis::cmd("GET").arg(&key)).await?;
        }
        let marks = self.export_unpushed().await?;
        if let Some(generation) = generation {
            let authors = marks.iter().map(|(u, _)| u.0).collect();
            *self.hot_copy.write() = Some(Arc::new(HotCopy { generation, authors }));
        }
        Ok(marks.into_iter().collect())
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

/// A node's copy of which authors have a mark, and the generation of that
/// set it was read at.
pub(crate) struct HotCopy {
    generation: Vec<u8>,
    authors: HashSet<u64>,
}

/// A mark's key (its first 8 bytes; a ninth says it is not announced yet).
fn mark_key(v: Option<Vec<u8>>) -> Option<Key> {
    v.filter(|v| v.len() >= 8).map(|v| be(&v))
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

    /// The generation of the set of marked authors and, in the same batch,
    /// one `HMGET` per shard of the authors in this node's copy of it
    /// (usually none); the whole set read again when the generation moved.
    async fn unpushed_keys(&self, authors: &[UserId]) -> Result<Vec<Option<Key>>> {
        if authors.is_empty() {
            return Ok(Vec::new());
        }
        let copy = self.hot_copy.read().clone();
        if let Some(copy) = copy {
            let hot = authors.iter().filter(|u| copy.authors.contains(&u.0)).map(|&u| (u, ()));
            let groups = Self::group(hot);
            let order: Vec<u64> = groups.keys().copied().collect();
            let mut batch = Batch::default();
            let key = self.hot_generation_key();
            batch.add(key.clone(), redis::cmd("GET").arg(key).clone());
            for s in &order {
                let key = self.hot_key(*s);
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(&key);
                for (u, _) in &groups[s] {
                    cmd.arg(u.0);
                }
                batch.add(key, cmd);
            }
            let mut got = self.run(&batch).await?.into_iter();
            let generation: Option<Vec<u8>> =
                got.next().map(redis::FromRedisValue::from_redis_value).transpose().map_err(bad_reply)?.flatten();
            if generation.as_deref() == Some(&copy.generation[..]) {
                let mut keys: HashMap<UserId, Key> = HashMap::new();
                for (s, vals) in order.iter().zip(got) {
                    let vals: Vec<Option<Vec<u8>>> =
                        redis::FromRedisValue::from_redis_value(vals).map_err(bad_reply)?;
                    for ((u, _), v) in groups[s].iter().zip(vals) {
                        if let Some(k) = mark_key(v) {
                            keys.insert(*u, k);
                        }
                    }
                }
                return Ok(authors.iter().map(|u| keys.get(u).copied()).collect());
            }
        }
        let keys = self.read_hot_copy().await?;
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
            found.into_iter().flatten().filter_map(|(u, v)| Some((UserId(u), mark_key(Some(v))?))).collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Each mark, then for the authors marked for the first time (or whose
    /// first mark was not announced) a new generation, then their marks
    /// announced.
    async fn import_unpushed(&self, entries: &[(UserId, Key)]) -> Result<()> {
        for chunk in entries.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for (u, k) in chunk {
                let key = self.hot_key(u.0 % SHARDS);
                let mut cmd = self.evalsha(&self.scripts.mark, &key);
                cmd.arg(u.0).arg(&k.to_be_bytes()[..]);
                batch.add(key, cmd);
            }
            let fresh: Vec<i64> = self.run_as(&batch).await?;
            let new: Vec<UserId> = chunk.iter().zip(fresh).filter(|(_, f)| *f == 1).map(|((u, _), _)| *u).collect();
            if new.is_empty() {
                continue;
            }
            let _: () = self
                .query(redis::cmd("SET").arg(self.hot_generation_key()).arg(&rand::random::<[u8; 16]>()[..]))
                .await?;
            let mut batch = Batch::default();
            for u in new {
                let key = self.hot_key(u.0 % SHARDS);
                let mut cmd = self.evalsha(&self.scripts.announced, &key);
                cmd.arg(u.0);
                batch.add(key, cmd);
            }
            self.run(&batch).await?;
        }
        Ok(())
    }
}
