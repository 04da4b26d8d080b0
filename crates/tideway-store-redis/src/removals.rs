//! What made entries leave homes ([`Removals`]). Each owner's notes are a
//! sorted set (member the item, `item:key`, or the other user; score the
//! time) that expires with the window; beside them, two sets of sorted-set
//! shards hold each author's and each user's newest note, so a resume asks
//! all of a user's followees in one round and reads the notes of only
//! those that have any since.

use crate::RedisShared;
use crate::cluster::Batch;
use async_trait::async_trait;
use std::collections::HashMap;
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::{Removal, Removals, Removed, Result, StoreError};

/// Shards of each set of newest notes; enough to spread over a cluster.
const SHARDS: u64 = 16;

impl RedisShared {
    /// `kind` `r`: newest by author; `q`: newest by user.
    fn removals_key(&self, kind: char, shard: u64) -> String {
        format!("{}{kind}{{{kind}{shard}}}", self.prefix)
    }

    /// An owner's notes: `kind` `r` an author's items, `q` a user's others.
    fn removal_notes_key(&self, kind: char, owner: UserId) -> String {
        format!("{}n{kind}{{{}}}", self.prefix, owner.0)
    }
}

fn member(n: &Removal) -> (char, UserId, String) {
    match *n {
        Removal::Item { author, item, key: Some(k) } => ('r', author, format!("{}:{k}", item.0)),
        Removal::Item { author, item, key: None } => ('r', author, item.0.to_string()),
        Removal::Relation { user, other } => ('q', user, other.0.to_string()),
    }
}

fn parse_item(m: &str) -> Option<(ItemId, Option<u64>)> {
    match m.split_once(':') {
        Some((i, k)) => Some((ItemId(i.parse().ok()?), Some(k.parse().ok()?))),
        None => Some((ItemId(m.parse().ok()?), None)),
    }
}

#[async_trait]
impl Removals for RedisShared {
    async fn note_removals(&self, notes: &[Removal], at: Millis, keep_ms: i64) -> Result<()> {
        if notes.is_empty() {
            return Ok(());
        }
        let cutoff = format!("({}", at.0.saturating_sub(keep_ms));
        let mut newest: HashMap<(char, u64), Vec<UserId>> = HashMap::new();
        let mut own: HashMap<(char, UserId), Vec<String>> = HashMap::new();
        for n in notes {
            let (kind, owner, m) = member(n);
            newest.entry((kind, owner.0 % SHARDS)).or_default().push(owner);
            own.entry((kind, owner)).or_default().push(m);
        }
        let mut batch = Batch::default();
        for ((kind, owner), members) in own {
            let key = self.removal_notes_key(kind, owner);
            let mut add = redis::cmd("ZADD");
            add.arg(&key).arg("GT");
            for m in members {
                add.arg(at.0).arg(m);
            }
            batch.add(key.clone(), add);
            batch.add(key.clone(), redis::cmd("ZREMRANGEBYSCORE").arg(&key).arg("-inf").arg(&cutoff).clone());
            batch.add(key.clone(), redis::cmd("PEXPIRE").arg(&key).arg(keep_ms.max(1)).clone());
        }
        for ((kind, shard), owners) in newest {
            let key = self.removals_key(kind, shard);
            let mut add = redis::cmd("ZADD");
            add.arg(&key).arg("GT");
            for u in owners {
                add.arg(at.0).arg(u.0);
            }
            batch.add(key.clone(), add);
            batch.add(key.clone(), redis::cmd("ZREMRANGEBYSCORE").arg(&key).arg("-inf").arg(&cutoff).clone());
        }
        self.run(&batch).await?;
        Ok(())
    }

    async fn removed_since(&self, user: UserId, authors: &[UserId], since: Millis) -> Result<Removed> {
        // Round one: who has a note since then.
        let mut groups: HashMap<u64, Vec<UserId>> = HashMap::new();
        for a in authors {
            groups.entry(a.0 % SHARDS).or_default().push(*a);
        }
        let mut asked: Vec<(char, UserId)> = Vec::with_capacity(authors.len() + 1);
        let mut batch = Batch::default();
        for (shard, owners) in &groups {
            let key = self.removals_key('r', *shard);
            let mut cmd = redis::cmd("ZMSCORE");
            cmd.arg(&key);
            for a in owners {
                cmd.arg(a.0);
                asked.push(('r', *a));
            }
            batch.add(key, cmd);
        }
        let key = self.removals_key('q', user.0 % SHARDS);
        batch.add(key.clone(), redis::cmd("ZMSCORE").arg(&key).arg(user.0).clone());
        asked.push(('q', user));
        let found: Vec<Vec<Option<f64>>> = self.run_as(&batch).await?;
        let noted: Vec<(char, UserId)> = asked
            .into_iter()
            .zip(found.into_iter().flatten())
            .filter(|(_, t)| t.is_some_and(|t| t as i64 >= since.0))
            .map(|(o, _)| o)
            .collect();
        if noted.is_empty() {
            return Ok(Removed::default());
        }
        // Round two: their notes since then.
        let mut batch = Batch::default();
        for (kind, owner) in &noted {
            let key = self.removal_notes_key(*kind, *owner);
            batch.add(key.clone(), redis::cmd("ZRANGEBYSCORE").arg(&key).arg(since.0).arg("+inf").clone());
        }
        let lists: Vec<Vec<String>> = self.run_as(&batch).await?;
        let mut out = Removed::default();
        for ((kind, _), members) in noted.into_iter().zip(lists) {
            for m in members {
                let bad = || StoreError::corrupt("a removal note");
                if kind == 'r' {
                    out.items.push(parse_item(&m).ok_or_else(bad)?);
                } else {
                    out.others.push(UserId(m.parse().map_err(|_| bad())?));
                }
            }
        }
        Ok(out)
    }
}
