//! A node's copies: everything a node keeps of what the store holds, in
//! one place, as one backend that wraps another ([`NodeCopies`]), the way
//! a cache or a rate limit wraps any store. The service runs on it when its
//! engines are a round trip away (and tests run it on any backend); every
//! write that changes a copied fact goes through it, so it forgets what a
//! write changed on this node and tells the others through the shared
//! half. Each kind of copy has one validity rule:
//!
//! | copies | of | taken while | file |
//! |---|---|---|---|
//! | facts | items' counts and marks, followee-set versions, the item epoch, the promotions not ended | the shared half's token of the fact is the one read before the read that filled the copy | `facts.rs` |
//! | records | item and insertion records | the store's item epoch is the one the copy was current at, or the page's call finds its `rev` stored | `records.rs` |
//! | followee lists | a user's followee list and own relations | the page's call finds the set's version unchanged | `followees.rs` |
//!
//! A page that takes a record or a list asks its one call (`Pages::page_facts`)
//! to check it, and begins again with the copy forgotten when the call
//! finds it moved: no page shows a fact as it was before a change
//! acknowledged before the page began, on any node.

mod facts;
mod followees;
mod records;

pub use facts::{FACT_COPIES_BYTES, FactCopies};
pub use followees::{FolloweeCopies, FolloweeCopy};
pub use records::RecordCopies;

use crate::Promotion;
use crate::forward::forward_backend;
use crate::profile::{Profile, Profiled};
use crate::traits::*;
use std::future::Future;
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Millis, UserId};

/// A backend that keeps a node's copies before another (see the module's
/// text). Cloning shares the copies.
#[derive(Clone)]
pub struct NodeCopies(Arc<Copies>);

/// The copies and the backend they stand before.
pub struct Copies {
    inner: Arc<dyn Backend>,
    facts: FactCopies,
    records: Arc<RecordCopies>,
    followees: FolloweeCopies,
}

impl NodeCopies {
    /// Copies of about `bytes` before `inner` (three quarters for records,
    /// a quarter for followee lists; the facts' copies [`FACT_COPIES_BYTES`]).
    pub fn new(inner: Arc<dyn Backend>, bytes: u64) -> Self {
        NodeCopies(Arc::new(Copies {
            inner,
            facts: FactCopies::new(FACT_COPIES_BYTES),
            records: Arc::new(RecordCopies::new(bytes / 4 * 3)),
            followees: FolloweeCopies::new(bytes / 4),
        }))
    }

    /// The backend the copies stand before.
    pub fn inner(&self) -> &Arc<dyn Backend> {
        &self.0.inner
    }

    /// The copies of item records.
    pub fn records(&self) -> &RecordCopies {
        &self.0.records
    }

    /// The copies of followee lists.
    pub fn followees(&self) -> &FolloweeCopies {
        &self.0.followees
    }

    /// How many items' facts this node holds copies of.
    pub fn fact_copies(&self) -> usize {
        self.0.facts.copies()
    }

    /// Forgets copies as the hub tells of changes made on other nodes,
    /// until the copies are dropped (`records.rs`).
    pub fn spawn_listener(&self) {
        self.0.records.spawn_listener(&self.0.inner);
    }
}

impl Copies {
    /// Runs `write` as a change of `keys`' facts: begun before (when the
    /// shared half is away, the write goes on without it: `trust.rs`),
    /// ended after whatever it answered (a failure there leaves the change
    /// in flight until it lapses: pages read those facts meanwhile, so the
    /// write stands). This node's copies of the followee lists the write
    /// changes are forgotten after it, whatever it answered (its next page
    /// reads them anew, without walking first).
    async fn changing<T>(&self, keys: &[FactKey], write: impl Future<Output = Result<T>>) -> Result<T> {
        let out = self.begin_and_end(keys, write).await;
        for key in keys {
            if let FactKey::Followees(u) = key {
                self.followees.forget(*u);
            }
        }
        out
    }

    async fn begin_and_end<T>(&self, keys: &[FactKey], write: impl Future<Output = Result<T>>) -> Result<T> {
        if keys.is_empty() {
            return write.await;
        }
        match self.inner.begin_fact_change(keys).await {
            Ok(()) => {}
            // The shared half is away: the write goes on without it, which
            // then no node trusts until it is dropped (`trust.rs`).
            Err(e) if e.is_unavailable() => {
                tracing::debug!(error = %e, ?keys, "a change of facts goes on without the shared half");
                return crate::trust::without_shared(self.inner.as_ref(), write).await;
            }
            Err(e) => return Err(e),
        }
        let out = write.await;
        if let Err(e) = self.inner.end_fact_change(keys).await {
            tracing::warn!(error = %e, ?keys, "a change of facts pages read could not be ended; it lapses");
        }
        out
    }
    /// The items whose facts `item`'s creation or delete changes.
    fn parents(item: &Item) -> impl Iterator<Item = FactKey> {
        [item.reply_to, item.repost_of].into_iter().flatten().map(FactKey::Item)
    }

    pub async fn create_item_notifying(
        &self,
        item: Item,
        fan_out: bool,
        now: Millis,
        notify: &[tideway_core::notify::Op],
    ) -> Result<CreateOutcome> {
        let parents: Vec<FactKey> = Self::parents(&item).collect();
        self.changing(&parents, self.inner.create_item_notifying(item, fan_out, now, notify)).await
    }

    pub async fn update_item_notifying(
        &self,
        id: ItemId,
        change: &ItemChange,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Option<Arc<Item>>> {
        // Every patch and delete moves the item epoch; a delete the
        // counts of the item and of its parents.
        let mut keys = vec![FactKey::Records];
        if matches!(change, ItemChange::Delete) {
            keys.push(FactKey::Item(id));
            if let Some(Some(crate::Record::Item(i))) = self.inner.records(&[id.0]).await?.pop() {
                keys.extend(Self::parents(&i));
            }
        }
        let out = self.changing(&keys, self.inner.update_item_notifying(id, change, notify)).await;
        // (the record changed: other nodes forget theirs at the hub's
        // `Item` signal, and pages check every copy either way)
        self.records.forget(id);
        out
    }

    pub async fn set_reaction(
        &self,
        item: ItemId,
        user: UserId,
        kind: &str,
        on: bool,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool> {
        self.changing(&[FactKey::Item(item)], self.inner.set_reaction(item, user, kind, on, notify)).await
    }

    pub async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.changing(&[FactKey::Promotions], self.inner.create_promotion(p)).await
    }

    pub async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.changing(&[FactKey::Followees(user)], self.inner.insert_home(user, item, key)).await
    }

    pub async fn follow_many_notifying(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Vec<FollowStatus>> {
        let write = self.inner.follow_many_notifying(user, targets, at, max_following, notify);
        self.changing(&[FactKey::Followees(user)], write).await
    }

    pub async fn unfollow_notifying(
        &self,
        user: UserId,
        target: UserId,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool> {
        self.changing(&[FactKey::Followees(user)], self.inner.unfollow_notifying(user, target, notify)).await
    }

    pub async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        let keys = [FactKey::Followees(user), FactKey::Followees(target)];
        self.changing(&keys, self.inner.set_block(user, target, on, at)).await
    }

    pub async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.changing(&[FactKey::Followees(user)], self.inner.set_mute(user, target, on, at)).await
    }

    pub async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        self.facts.page_facts(self.inner.as_ref(), q).await
    }
}

impl Profiled for NodeCopies {
    fn profile(&self) -> Profile {
        self.0.inner.profile()
    }
}

forward_backend!(NodeCopies, s => durable: s.0.inner, facts: s.0, shared: s.0.inner);

#[cfg(test)]
mod tests;
