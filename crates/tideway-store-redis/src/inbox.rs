//! Inboxes: the packed value (see the crate docs for its layout), its keys,
//! and the [`Inboxes`] impl.

use crate::RedisShared;
use crate::cluster::{Batch, Node, SCAN_BATCH};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Key, UserId};
use tideway_store::{InboxRead, InboxStats, Inboxes, Result, StoreError};

/// How long `inbox_stats` reuses a count (it scans every inbox key).
const STATS_TTL: Duration = Duration::from_secs(10);
/// Inboxes per delivery script run (each given its keys: 1-15 µs of Redis,
/// the most when they are merged below the newest held), so that a run
/// blocks its Redis for a few milliseconds at most.
const DELIVER_SLICE: usize = 256;

pub(crate) fn be(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The key of a user's inbox: the user id is its hash tag.
fn inbox_key(prefix: &str, u: UserId) -> String {
    format!("{prefix}i{{{}}}", u.0)
}

/// The user of an inbox key.
fn user_of(prefix: &str, key: &str) -> Option<UserId> {
    key.strip_prefix(prefix)?.strip_prefix("i{")?.strip_suffix('}')?.parse().ok().map(UserId)
}

/// A parsed inbox value.
struct Parsed {
    floor: Key,
    building: bool,
    /// The newest `cap` keys, ascending.
    keys: Vec<Key>,
}

/// The building flag in an inbox's slots word.
const BUILDING: u32 = 1 << 31;

/// Header size of an inbox value.
const HEADER: usize = 24;

fn parse(v: &[u8], cap: usize) -> Result<Parsed> {
    let bad = || StoreError::corrupt(format!("an inbox value of {} bytes", v.len()));
    if v.len() < HEADER || !(v.len() - HEADER).is_multiple_of(8) {
        return Err(bad());
    }
    let flags = u32::from_be_bytes([v[8], v[9], v[10], v[11]]);
    let count = u32::from_be_bytes([v[12], v[13], v[14], v[15]]) as usize;
    let slots = (flags & !BUILDING) as usize;
    if count > slots || slots != (v.len() - HEADER) / 8 {
        return Err(bad());
    }
    let all = &v[HEADER..HEADER + count * 8];
    let skip = count.saturating_sub(cap);
    let mut floor = be(&v[0..8]);
    if skip > 0 {
        floor = floor.max(be(&all[(skip - 1) * 8..]));
    }
    let keys = all[skip * 8..].chunks_exact(8).map(be).collect();
    Ok(Parsed { floor, building: flags & BUILDING != 0, keys })
}

/// Packs keys ascending, deduplicated.
fn pack_sorted(keys: &[Key]) -> Vec<u8> {
    let mut ks = keys.to_vec();
    ks.sort_unstable();
    ks.dedup();
    ks.iter().flat_map(|k| k.to_be_bytes()).collect()
}

impl RedisShared {
    fn inbox_key(&self, u: UserId) -> String {
        inbox_key(&self.prefix, u)
    }

    async fn merge(&self, user: UserId, keys: &[Key], floor: Key, mode: &str) -> Result<()> {
        let key = self.inbox_key(user);
        let mut cmd = self.evalsha(&self.scripts.merge, &key);
        cmd.arg(&floor.to_be_bytes()[..]).arg(pack_sorted(keys)).arg(self.cap).arg(self.slack).arg(mode);
        let mut batch = Batch::default();
        batch.add(key, cmd);
        self.run(&batch).await.map(|_| ())
    }

    async fn read(&self, user: UserId) -> Result<Option<Parsed>> {
        let v: Option<Vec<u8>> = self.query(redis::cmd("GET").arg(self.inbox_key(user))).await?;
        v.map(|v| parse(&v, self.cap)).transpose()
    }

    /// Bytes of the value holding `user`'s inbox (0: absent): what an inbox
    /// costs Redis beyond its key, for tests and benchmarks.
    pub async fn inbox_value_len(&self, user: UserId) -> Result<usize> {
        self.query(redis::cmd("STRLEN").arg(self.inbox_key(user))).await
    }

    async fn scan_inboxes(&self) -> Result<Vec<(UserId, Vec<u8>)>> {
        let keys = self.scan(&format!("{}i{{*}}", self.prefix)).await?;
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(SCAN_BATCH) {
            let mut batch = Batch::default();
            for k in chunk {
                batch.add(k.clone(), redis::cmd("GET").arg(k).clone());
            }
            let vals: Vec<Option<Vec<u8>>> = self.run_as(&batch).await?;
            for (k, v) in chunk.iter().zip(vals) {
                if let (Some(u), Some(v)) = (user_of(&self.prefix, k), v) {
                    out.push((u, v));
                }
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl Inboxes for RedisShared {
    async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize> {
        self.deliver_many(&[(key, users)]).await
    }

    async fn deliver_many(&self, batch: &[(Key, &[UserId])]) -> Result<usize> {
        // The keys of each inbox, ascending and distinct.
        let mut by_user: HashMap<UserId, Vec<Key>> = HashMap::new();
        for &(key, users) in batch {
            for &u in users {
                by_user.entry(u).or_default().push(key);
            }
        }
        if by_user.is_empty() {
            return Ok(0);
        }
        // One script run per node (per slice of its inboxes), each inbox
        // with its keys packed: most go in as one block.
        let mut by_node: HashMap<Option<Node>, Vec<(String, Vec<u8>)>> = HashMap::new();
        for (u, mut keys) in by_user {
            keys.sort_unstable();
            keys.dedup();
            let key = self.inbox_key(u);
            let node = if self.is_cluster() { self.node_of(&key) } else { None };
            by_node.entry(node).or_default().push((key, keys.iter().flat_map(|k| k.to_be_bytes()).collect()));
        }
        let mut batch = Batch::default();
        for inboxes in by_node.values() {
            for slice in inboxes.chunks(DELIVER_SLICE) {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(self.scripts.deliver.get_hash()).arg(0).arg(self.cap).arg(self.slack);
                for (k, keys) in slice {
                    cmd.arg(k).arg(&keys[..]);
                }
                batch.add(slice[0].0.clone(), cmd);
            }
        }
        let took: Vec<i64> = self.run_as(&batch).await?;
        Ok(took.iter().sum::<i64>() as usize)
    }

    async fn read_inbox(
        &self,
        user: UserId,
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Option<InboxRead>> {
        let Some(ib) = self.read(user).await?.filter(|p| !p.building) else {
            return Ok(None);
        };
        let above = range.above.map_or(ib.floor, |a| a.max(ib.floor));
        let lo = ib.keys.partition_point(|&k| k <= above);
        let hi = range.below.map_or(ib.keys.len(), |b| ib.keys.partition_point(|&k| k < b));
        let keys = if lo >= hi {
            Vec::new()
        } else {
            match dir {
                Direction::Older => ib.keys[lo..hi].iter().rev().take(limit).copied().collect(),
                Direction::Newer => ib.keys[lo..hi].iter().take(limit).copied().collect(),
            }
        };
        Ok(Some(InboxRead { keys, floor: ib.floor }))
    }

    async fn begin_rebuild(&self, user: UserId) -> Result<()> {
        let mut header = vec![0u8; HEADER];
        header[8..12].copy_from_slice(&BUILDING.to_be_bytes());
        // NX: an inbox that exists (ready or building) stays as it is.
        self.query::<Option<String>>(redis::cmd("SET").arg(self.inbox_key(user)).arg(header).arg("NX")).await?;
        Ok(())
    }

    async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.merge(user, keys, floor, "f").await
    }

    async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.merge(user, keys, floor, "m").await
    }

    async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>> {
        Ok(self.read(user).await?.filter(|p| !p.building).map(|p| p.floor))
    }

    async fn drop_inbox(&self, user: UserId) -> Result<()> {
        self.query::<i64>(redis::cmd("UNLINK").arg(self.inbox_key(user))).await?;
        Ok(())
    }

    async fn inbox_stats(&self) -> Result<InboxStats> {
        let mut cached = self.stats.lock().await;
        if let Some((at, s)) = *cached
            && at.elapsed() < STATS_TTL
        {
            return Ok(s);
        }
        let mut s = InboxStats::default();
        for (_, v) in self.scan_inboxes().await? {
            let p = parse(&v, self.cap)?;
            s.inboxes += 1;
            s.entries += p.keys.len() as u64;
            s.bytes += v.len() as u64;
        }
        *cached = Some((Instant::now(), s));
        Ok(s)
    }

    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
        let mut out = Vec::new();
        for (u, v) in self.scan_inboxes().await? {
            let p = parse(&v, self.cap)?;
            if !p.building {
                out.push((u, p.floor, p.keys));
            }
        }
        out.sort_unstable_by_key(|(u, ..)| *u);
        Ok(out)
    }

    async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()> {
        self.query::<i64>(redis::cmd("UNLINK").arg(self.inbox_key(user))).await?;
        self.merge(user, keys, floor, "f").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_applies_the_cap_and_raises_the_floor() {
        let mut v = vec![0u8; HEADER];
        v[..8].copy_from_slice(&5u64.to_be_bytes());
        v[8..12].copy_from_slice(&5u32.to_be_bytes());
        v[12..16].copy_from_slice(&4u32.to_be_bytes());
        v[16..24].copy_from_slice(&40u64.to_be_bytes());
        for k in [10u64, 20, 30, 40, 0] {
            v.extend_from_slice(&k.to_be_bytes());
        }
        let p = parse(&v, 3).expect("parse");
        assert_eq!((p.floor, p.keys, p.building), (10, vec![20, 30, 40], false), "one spare slot, one trimmed");
        let p = parse(&v, 10).expect("parse");
        assert_eq!((p.floor, p.keys.len()), (5, 4));
        assert!(parse(&v[..28], 3).is_err(), "a torn value");
        v[8..12].copy_from_slice(&(5u32 | BUILDING).to_be_bytes());
        assert!(parse(&v, 3).expect("parse").building);
        v[12..16].copy_from_slice(&9u32.to_be_bytes());
        assert!(parse(&v, 3).is_err(), "a count beyond the slots");
    }

    #[test]
    fn inbox_keys_carry_the_users_hash_tag_and_read_back() {
        let key = inbox_key("t1:", UserId(42));
        assert_eq!(key, "t1:i{42}");
        assert_eq!(user_of("t1:", &key), Some(UserId(42)));
        assert_eq!(user_of("t2:", &key), None, "another prefix");
        assert_eq!(user_of("t1:", "t1:a{a3}"), None, "not an inbox");
    }
}
