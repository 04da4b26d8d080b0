//! [`Split`]: one [`Backend`] made of two engines, the durable half (items,
//! graph, jobs: the source of truth) and the shared half (inboxes, reader
//! activity, hot-author marks: state every node shares, rebuilt from the
//! durable half when lost). This is how a deployment puts the traits on
//! different engines, e.g. SQL for the first and Redis for the second.

use crate::change::{Job, Promotion, Record};
use crate::inbox::{InboxRead, InboxStats};
use crate::traits::*;
use async_trait::async_trait;
use std::sync::Arc;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Body, ItemId, Key, Millis, Relation, UserId};

/// The source of truth: items, graph, fan-out jobs.
pub trait Durable: Items + Graph + Jobs {}
impl<T: Items + Graph + Jobs> Durable for T {}

/// State shared by every node that only speeds pages up or decides who gets
/// pushes: inboxes, activity, hot-author marks; and the event hub between
/// the nodes.
pub trait Shared: Inboxes + Activity + HotAuthors + Hub {}
impl<T: Inboxes + Activity + HotAuthors + Hub> Shared for T {}

/// A backend whose durable and shared halves are separate engines.
#[derive(Clone)]
pub struct Split {
    pub durable: Arc<dyn Durable>,
    pub shared: Arc<dyn Shared>,
}

impl Split {
    pub fn new(durable: Arc<dyn Durable>, shared: Arc<dyn Shared>) -> Self {
        Self { durable, shared }
    }
}

#[async_trait]
impl Items for Split {
    async fn create_item(&self, item: tideway_core::Item, fan_out: bool, now: Millis) -> Result<CreateOutcome> {
        self.durable.create_item(item, fan_out, now).await
    }
    async fn update_item(&self, id: ItemId, change: &ItemChange) -> Result<Option<Arc<tideway_core::Item>>> {
        self.durable.update_item(id, change).await
    }
    async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
        self.durable.records(keys).await
    }
    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
        self.durable.bodies(ids).await
    }
    async fn outbox_merge(
        &self,
        authors: &[UserId],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        self.durable.outbox_merge(authors, range, dir, limit).await
    }
    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>> {
        self.durable.reposts_by(originals, reposters).await
    }
    async fn hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        self.durable.hydration(ids, viewer).await
    }
    async fn set_reaction(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> Result<bool> {
        self.durable.set_reaction(item, user, kind, on).await
    }
    async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.durable.create_promotion(p).await
    }
    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        self.durable.active_promotions(now).await
    }
    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.durable.insert_home(user, item, key).await
    }
    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        self.durable.inserts(user, range, dir, limit).await
    }
    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
        self.durable.inserted_keys(user, items).await
    }
}

#[async_trait]
impl Graph for Split {
    async fn follow_many(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
    ) -> Result<Vec<FollowStatus>> {
        self.durable.follow_many(user, targets, at, max_following).await
    }
    async fn unfollow(&self, user: UserId, target: UserId) -> Result<bool> {
        self.durable.unfollow(user, target).await
    }
    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.durable.set_block(user, target, on, at).await
    }
    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.durable.set_mute(user, target, on, at).await
    }
    async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
        self.durable.followees(user).await
    }
    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>> {
        self.durable.list(user, which, after, limit).await
    }
    async fn followers_chunk(
        &self,
        user: UserId,
        after: Option<FollowerPos>,
        limit: usize,
    ) -> Result<Vec<FollowerPos>> {
        self.durable.followers_chunk(user, after, limit).await
    }
    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        self.durable.relations(user, others).await
    }
    async fn counts(&self, user: UserId) -> Result<UserCounts> {
        self.durable.counts(user).await
    }
    async fn stats(&self) -> Result<StoreStats> {
        self.durable.stats().await
    }
    async fn health(&self) -> Result<()> {
        self.durable.health().await
    }
}

#[async_trait]
impl Jobs for Split {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        self.durable.pending_jobs(limit).await
    }
    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        self.durable.claim_jobs(worker, now, lease_ms, limit).await
    }
    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        self.durable.advance(worker, progress).await
    }
}

#[async_trait]
impl Activity for Split {
    async fn touch(&self, user: UserId, at: Millis) -> Result<()> {
        self.shared.touch(user, at).await
    }
    async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>> {
        self.shared.last_active(users).await
    }
    async fn inactive_before(&self, cutoff: Millis) -> Result<Vec<UserId>> {
        self.shared.inactive_before(cutoff).await
    }
    async fn export_activity(&self) -> Result<Vec<(UserId, Millis)>> {
        self.shared.export_activity().await
    }
    async fn import_activity(&self, entries: &[(UserId, Millis)]) -> Result<()> {
        self.shared.import_activity(entries).await
    }
}

#[async_trait]
impl HotAuthors for Split {
    async fn mark_unpushed(&self, author: UserId, key: Key) -> Result<()> {
        self.shared.mark_unpushed(author, key).await
    }
    async fn unpushed_above(&self, authors: &[UserId], floor: Key) -> Result<Vec<UserId>> {
        self.shared.unpushed_above(authors, floor).await
    }
    async fn export_unpushed(&self) -> Result<Vec<(UserId, Key)>> {
        self.shared.export_unpushed().await
    }
    async fn import_unpushed(&self, entries: &[(UserId, Key)]) -> Result<()> {
        self.shared.import_unpushed(entries).await
    }
}

#[async_trait]
impl Inboxes for Split {
    async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize> {
        self.shared.deliver(key, users).await
    }
    async fn read_inbox(
        &self,
        user: UserId,
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Option<InboxRead>> {
        self.shared.read_inbox(user, range, dir, limit).await
    }
    async fn begin_rebuild(&self, user: UserId) -> Result<()> {
        self.shared.begin_rebuild(user).await
    }
    async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.shared.finish_rebuild(user, keys, floor).await
    }
    async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.shared.merge_inbox(user, keys, floor).await
    }
    async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>> {
        self.shared.inbox_floor(user).await
    }
    async fn drop_inbox(&self, user: UserId) -> Result<()> {
        self.shared.drop_inbox(user).await
    }
    async fn inbox_stats(&self) -> Result<InboxStats> {
        self.shared.inbox_stats().await
    }
    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
        self.shared.export_inboxes().await
    }
    async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()> {
        self.shared.import_inbox(user, floor, keys).await
    }
}

#[async_trait]
impl Hub for Split {
    async fn publish(&self, signals: &[Signal]) -> Result<()> {
        self.shared.publish(signals).await
    }
    async fn subscribe(&self) -> Result<Subscription> {
        self.shared.subscribe().await
    }
}
