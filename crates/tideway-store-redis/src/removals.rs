//! When entries last left homes ([`Removals`]): two sets of sorted-set
//! shards, by author and by user (member the id, score the time), written
//! with `ZADD GT` and pruned to the replay window by score on each write.

use crate::RedisShared;
use crate::cluster::Batch;
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_core::{Millis, UserId};
use tideway_store::{Removals, Result};

/// Shards of each set; enough to spread over a cluster.
const SHARDS: u64 = 16;

impl RedisShared {
    /// `kind` `r`: by author; `q`: by user.
    fn removals_key(&self, kind: char, shard: u64) -> String {
        format!("{}{kind}{{{kind}{shard}}}", self.prefix)
    }
}

#[async_trait]
impl Removals for RedisShared {
    async fn note_removals(&self, authors: &[UserId], users: &[UserId], at: Millis, keep_ms: i64) -> Result<()> {
        let mut by: HashMap<(char, u64), Vec<UserId>> = HashMap::new();
        for (kind, list) in [('r', authors), ('q', users)] {
            for u in list {
                by.entry((kind, u.0 % SHARDS)).or_default().push(*u);
            }
        }
        if by.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::default();
        for ((kind, shard), ids) in by {
            let key = self.removals_key(kind, shard);
            let mut add = redis::cmd("ZADD");
            add.arg(&key).arg("GT");
            for u in ids {
                add.arg(at.0).arg(u.0);
            }
            batch.add(key.clone(), add);
            let cutoff = format!("({}", at.0.saturating_sub(keep_ms));
            batch.add(key.clone(), redis::cmd("ZREMRANGEBYSCORE").arg(&key).arg("-inf").arg(cutoff).clone());
        }
        self.run(&batch).await?;
        Ok(())
    }

    async fn last_removal(&self, user: UserId, authors: &[UserId]) -> Result<Option<Millis>> {
        let mut groups: HashMap<u64, Vec<UserId>> = HashMap::new();
        for a in authors {
            groups.entry(a.0 % SHARDS).or_default().push(*a);
        }
        let order: Vec<u64> = groups.keys().copied().collect();
        let mut batch = Batch::default();
        for s in &order {
            let key = self.removals_key('r', *s);
            let mut cmd = redis::cmd("ZMSCORE");
            cmd.arg(&key);
            for a in &groups[s] {
                cmd.arg(a.0);
            }
            batch.add(key, cmd);
        }
        let key = self.removals_key('q', user.0 % SHARDS);
        batch.add(key.clone(), redis::cmd("ZMSCORE").arg(&key).arg(user.0).clone());
        let found: Vec<Vec<Option<f64>>> = self.run_as(&batch).await?;
        Ok(found.into_iter().flatten().flatten().map(|t| Millis(t as i64)).max())
    }
}
