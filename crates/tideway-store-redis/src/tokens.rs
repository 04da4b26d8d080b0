//! Fact tokens ([`FactTokens`]): one string key per [`FactKey`], in
//! sixteen slots (`t{t<shard>}:<id>` an item, `:u<id>` a user's followee
//! set, `:e` the records, `:p` the promotions, the last two in shard 0),
//! so a page's keys are one `MGET` per shard, pipelined. A clean token is
//! a random number, kept an hour; a key without one (new, or forgotten) is
//! minted by `SET … NX` beside the read of its facts, which that page
//! does not keep (the next does). A change in flight is `d<n>`, `n` the
//! changes begun and not ended, lapsing [`LAPSE_MS`] after the last began,
//! so a node that died between the two calls costs those keys' reads for
//! that long and no more. An end with none in flight (it lapsed first)
//! still sets a new token.
//!
//! A flush, or the probe's drop of every key after a failover, forgets
//! every token: copies kept under them are never taken again (tokens are
//! random, so a new one does not repeat an old one).

use crate::RedisShared;
use crate::cluster::{Batch, bad_reply};
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_store::{FactKey, FactTokens, Result};

/// Token shards (slots): enough to spread over a cluster.
const SHARDS: u64 = 16;

/// How long a change in flight lasts at most (a node that died between
/// its begin and its end): longer than any write takes.
pub(crate) const LAPSE_MS: u64 = 30_000;

/// How long a clean token is kept (s).
const KEEP_S: u64 = 3_600;

/// A token as stored: `None` for a change in flight.
fn parse(v: &[u8]) -> Result<Option<u64>> {
    if v.first() == Some(&b'd') {
        return Ok(None);
    }
    let s = std::str::from_utf8(v).map_err(bad_reply)?;
    s.parse().map(Some).map_err(bad_reply)
}

/// A new clean token (never `d…`).
fn fresh() -> String {
    rand::random::<u64>().to_string()
}

impl RedisShared {
    fn token_key(&self, key: FactKey) -> String {
        let p = &self.prefix;
        match key {
            FactKey::Item(i) => format!("{p}t{{t{}}}:{}", i.0 % SHARDS, i.0),
            FactKey::Followees(u) => format!("{p}t{{t{}}}:u{}", u.0 % SHARDS, u.0),
            FactKey::Records => format!("{p}t{{t0}}:e"),
            FactKey::Promotions => format!("{p}t{{t0}}:p"),
        }
    }

    fn token_shard(key: FactKey) -> u64 {
        match key {
            FactKey::Item(i) => i.0 % SHARDS,
            FactKey::Followees(u) => u.0 % SHARDS,
            FactKey::Records | FactKey::Promotions => 0,
        }
    }

    /// One script call per key, pipelined.
    async fn each_key(&self, keys: &[FactKey], script: &redis::Script, args: impl Fn() -> Vec<String>) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut batch = Batch::default();
        for &i in keys {
            let key = self.token_key(i);
            let mut cmd = self.evalsha(script, &key);
            for a in args() {
                cmd.arg(a);
            }
            batch.add(key, cmd);
        }
        self.run(&batch).await?;
        Ok(())
    }
}

#[async_trait]
impl FactTokens for RedisShared {
    async fn fact_tokens(&self, keys: &[FactKey]) -> Result<Vec<Option<u64>>> {
        if keys.is_empty() {
            return Ok(vec![]);
        }
        let mut by_shard: HashMap<u64, Vec<usize>> = HashMap::new();
        for (p, &k) in keys.iter().enumerate() {
            by_shard.entry(Self::token_shard(k)).or_default().push(p);
        }
        let mut batch = Batch::default();
        let mut order: Vec<&Vec<usize>> = Vec::with_capacity(by_shard.len());
        for at in by_shard.values() {
            let mut cmd = redis::cmd("MGET");
            for &p in at {
                cmd.arg(self.token_key(keys[p]));
            }
            batch.add(self.token_key(keys[at[0]]), cmd);
            order.push(at);
        }
        let mut out: Vec<Option<u64>> = vec![None; keys.len()];
        for (at, reply) in order.into_iter().zip(self.run_as::<Vec<Option<Vec<u8>>>>(&batch).await?) {
            if reply.len() != at.len() {
                return Err(bad_reply("an MGET of fact tokens answered another number of values"));
            }
            for (&p, v) in at.iter().zip(reply) {
                if let Some(v) = v {
                    out[p] = parse(&v)?;
                }
            }
        }
        Ok(out)
    }

    async fn mint_fact_tokens(&self, keys: &[FactKey]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        // One node's wins; a change in flight (`d<n>`) is left so.
        let mut batch = Batch::default();
        for &k in keys {
            let key = self.token_key(k);
            let mut cmd = redis::cmd("SET");
            cmd.arg(&key).arg(fresh()).arg("NX").arg("EX").arg(KEEP_S);
            batch.add(key, cmd);
        }
        self.run(&batch).await?;
        Ok(())
    }

    async fn begin_fact_change(&self, keys: &[FactKey]) -> Result<()> {
        self.each_key(keys, &self.scripts.begin_facts, || vec![LAPSE_MS.to_string()]).await
    }

    async fn end_fact_change(&self, keys: &[FactKey]) -> Result<()> {
        self.each_key(keys, &self.scripts.end_facts, || vec![fresh(), KEEP_S.to_string()]).await
    }
}
