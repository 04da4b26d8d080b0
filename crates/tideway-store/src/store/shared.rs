//! The shared components on a [`Store`]: [`Activity`], [`HotAuthors`],
//! [`Inboxes`], [`Hub`], [`Snapshots`], [`Removals`] and [`FactTokens`], forwarded to the in-process components and the
//! inbox set; and its [`Profiled`](crate::Profiled) answer.

use super::Store;
use super::journal::Journal;
use crate::inbox::{InboxRead, InboxStats};
use crate::traits::*;
use async_trait::async_trait;
use std::collections::HashSet;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Key, Millis, UserId};

/// Answered in process (the memory backend, the embedded store).
impl<J: Journal> crate::Profiled for Store<J> {
    fn profile(&self) -> crate::Profile {
        crate::Profile::IN_PROCESS
    }
}

#[async_trait]
impl<J: Journal> Activity for Store<J> {
    async fn touch(&self, user: UserId, at: Millis) -> Result<()> {
        self.activity.record(user, at);
        Ok(())
    }
    async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>> {
        Ok(self.activity.get(users))
    }
    async fn inactive_before(&self, cutoff: Millis) -> Result<Vec<UserId>> {
        Ok(self.activity.users_where(|t| t < cutoff))
    }
    async fn export_activity(&self) -> Result<Vec<(UserId, Millis)>> {
        Ok(self.activity.export())
    }
    async fn import_activity(&self, entries: &[(UserId, Millis)]) -> Result<()> {
        self.activity.import(entries);
        Ok(())
    }
}

#[async_trait]
impl<J: Journal> HotAuthors for Store<J> {
    async fn mark_unpushed(&self, author: UserId, key: Key) -> Result<()> {
        self.hot.record(author, key);
        Ok(())
    }
    async fn unpushed_above(&self, authors: &[UserId], floor: Key) -> Result<Vec<UserId>> {
        // Hot authors are few and a reader follows up to 2,000: scan the
        // few, then keep the reader's order, rather than look up every
        // followee on every home page.
        let hot = self.hot.users_where(|k| k > floor);
        if hot.is_empty() {
            return Ok(Vec::new());
        }
        if hot.len() <= 16 {
            return Ok(authors.iter().filter(|a| hot.contains(a)).copied().collect());
        }
        let hot: HashSet<UserId> = hot.into_iter().collect();
        Ok(authors.iter().filter(|a| hot.contains(a)).copied().collect())
    }
    async fn unpushed_keys(&self, authors: &[UserId]) -> Result<Vec<Option<Key>>> {
        Ok(self.hot.get(authors))
    }
    async fn export_unpushed(&self) -> Result<Vec<(UserId, Key)>> {
        Ok(self.hot.export())
    }
    async fn import_unpushed(&self, entries: &[(UserId, Key)]) -> Result<()> {
        self.hot.import(entries);
        Ok(())
    }
}

#[async_trait]
impl<J: Journal> Inboxes for Store<J> {
    async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize> {
        Ok(self.inboxes.deliver(key, users))
    }
    async fn deliver_many(&self, batch: &[(Key, &[UserId])]) -> Result<usize> {
        // In process a delivery is CPU on the caller's runtime worker
        // (~0.1 us): the step's deliveries go a shard at a time (one lock
        // each for the whole step), and the requests queued on that worker
        // run after each ~1,000 deliveries rather than behind the whole step.
        const YIELD_EVERY: usize = 1000;
        let grouped = crate::inbox::Grouped::new(&self.inboxes, batch);
        let (mut took, mut since) = (0, 0);
        for shard in 0..crate::inbox::SHARDS {
            took += self.inboxes.deliver_grouped(&grouped, shard);
            since += grouped.in_shard(shard);
            if since >= YIELD_EVERY {
                since = 0;
                tokio::task::yield_now().await;
            }
        }
        Ok(took)
    }
    async fn read_inbox(
        &self,
        user: UserId,
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Option<InboxRead>> {
        Ok(self.inboxes.read(user, range, dir, limit))
    }
    async fn begin_rebuild(&self, user: UserId) -> Result<()> {
        self.inboxes.begin_rebuild(user);
        Ok(())
    }
    async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.inboxes.finish_rebuild(user, keys, floor);
        Ok(())
    }
    async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.inboxes.merge(user, keys, floor);
        Ok(())
    }
    async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>> {
        Ok(self.inboxes.floor(user))
    }
    async fn drop_inbox(&self, user: UserId) -> Result<()> {
        self.inboxes.drop_inbox(user);
        Ok(())
    }
    async fn inbox_stats(&self) -> Result<InboxStats> {
        Ok(self.inboxes.stats())
    }
    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
        Ok(self.inboxes.export())
    }
    async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()> {
        self.inboxes.import(user, floor, keys);
        Ok(())
    }
}

#[async_trait]
impl<J: Journal> Hub for Store<J> {
    async fn publish(&self, signals: &[Signal]) -> Result<()> {
        self.hub.publish(signals);
        Ok(())
    }
    async fn subscribe(&self) -> Result<Subscription> {
        Ok(self.hub.subscribe())
    }
    async fn ping(&self) -> Result<()> {
        Ok(())
    }
    async fn forget_all(&self) -> Result<usize> {
        self.fact_tokens.forget();
        Ok(self.inboxes.clear() + self.hot.clear() + self.activity.clear() + self.removals.clear())
    }
}

#[async_trait]
impl<J: Journal> Snapshots for Store<J> {
    async fn put_snapshot(&self, id: u64, bytes: &[u8], ttl_ms: u64) -> Result<()> {
        self.snapshots.put(id, bytes, std::time::Duration::from_millis(ttl_ms));
        Ok(())
    }
    async fn snapshot(&self, id: u64) -> Result<Option<Vec<u8>>> {
        Ok(self.snapshots.get(id))
    }
}

#[async_trait]
impl<J: Journal> Removals for Store<J> {
    async fn note_removals(&self, notes: &[Removal], at: Millis, keep_ms: i64) -> Result<()> {
        self.removals.note(notes, at, keep_ms);
        Ok(())
    }
    async fn removed_since(&self, user: UserId, authors: &[UserId], since: Millis) -> Result<Removed> {
        Ok(self.removals.since(user, authors, since))
    }
}

#[async_trait]
impl<J: Journal> FactTokens for Store<J> {
    async fn fact_tokens(&self, keys: &[FactKey]) -> Result<Vec<Option<u64>>> {
        Ok(self.fact_tokens.tokens(keys))
    }
    async fn mint_fact_tokens(&self, _keys: &[FactKey]) -> Result<()> {
        // (every key has the one generation)
        Ok(())
    }
    async fn begin_fact_change(&self, keys: &[FactKey]) -> Result<()> {
        self.fact_tokens.begin(keys);
        Ok(())
    }
    async fn end_fact_change(&self, keys: &[FactKey]) -> Result<()> {
        self.fact_tokens.end(keys);
        Ok(())
    }
}
