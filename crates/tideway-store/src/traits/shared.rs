//! The shared half's state: activity, hot-author marks, removals, fact tokens, inboxes.

#[allow(unused_imports)]
use super::*;

/// When each reader last read their home: who is active and gets pushes.
/// Shared by every node of a deployment (it decides which inboxes exist).
#[async_trait]
pub trait Activity: Send + Sync {
    /// Records a read of `user`'s home at `at` (never moves back).
    async fn touch(&self, user: UserId, at: Millis) -> Result<()>;
    /// The last read of each user, in order.
    async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>>;
    /// Users whose last read is before `cutoff`.
    async fn inactive_before(&self, cutoff: Millis) -> Result<Vec<UserId>>;
    /// Everything, for a snapshot; and back.
    async fn export_activity(&self) -> Result<Vec<(UserId, Millis)>>;
    async fn import_activity(&self, entries: &[(UserId, Millis)]) -> Result<()>;
}

/// Hot authors' items that were not pushed: each hot author's newest
/// unpushed key. A home page pulls, above the reader's inbox floor, the
/// outboxes of the followed authors listed here. Shared by every node.
#[async_trait]
pub trait HotAuthors: Send + Sync {
    /// Records that `author`'s item `key` was not pushed (keeps the newest).
    async fn mark_unpushed(&self, author: UserId, key: Key) -> Result<()>;
    /// Of `authors`, those with an unpushed key above `floor`, in order.
    async fn unpushed_above(&self, authors: &[UserId], floor: Key) -> Result<Vec<UserId>>;
    /// Each author's newest unpushed key (`None`: none), in order: what a
    /// page asks beside its inbox read when it knows `F(u)` before the
    /// inbox's floor (a node's copy of the list), then filters by the floor
    /// itself ([`unpushed_above_floor`]): one round trip fewer.
    async fn unpushed_keys(&self, authors: &[UserId]) -> Result<Vec<Option<Key>>>;
    /// Everything, for a snapshot (sorted by author); and back.
    async fn export_unpushed(&self) -> Result<Vec<(UserId, Key)>>;
    async fn import_unpushed(&self, entries: &[(UserId, Key)]) -> Result<()>;
}

/// What made entries leave homes, kept for the home stream's replay window,
/// so that a stream resuming from an id can name the entries its client
/// holds that left meanwhile (`delete` events). Shared by every node.
///
/// Contract (the `removals` conformance suite): every note is found by
/// [`Removals::removed_since`] for its owner (an author among those asked,
/// or the user asked) when noted at or after `since`, once per item or
/// other user; notes older than `keep_ms` before the newest may be forgotten.
#[async_trait]
pub trait Removals: Send + Sync {
    async fn note_removals(&self, notes: &[Removal], at: Millis, keep_ms: i64) -> Result<()>;
    /// Everything noted at or after `since` for `user` (the others their
    /// graph lost) or any of `authors` (their items that changed).
    async fn removed_since(&self, user: UserId, authors: &[UserId], since: Millis) -> Result<Removed>;
}

/// What a fact token covers: facts a page reads that a node keeps a copy
/// of ([`FactTokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FactKey {
    /// An item's counts, the reposts of it and the viewers' marks on it.
    Item(ItemId),
    /// A user's followee set and own relations (its version:
    /// [`Graph::followees_version`]).
    Followees(UserId),
    /// Every item record: a patch or a delete of any item (the item epoch,
    /// [`PageFacts::items_epoch`]).
    Records,
    /// The promotions.
    Promotions,
}

/// Tokens that tell a node whether its copy of facts a page reads (an
/// item's counts and marks, a followee set's version, the item epoch, the
/// promotions: [`FactKey`]) is current, so that a page can take them from
/// the copy instead of the durable half. Shared by every node.
///
/// Every write that changes such facts calls
/// [`FactTokens::begin_fact_change`] for their keys before it writes, and
/// [`FactTokens::end_fact_change`] after (also when the write failed). A
/// node keeps a copy with the token it read *before* reading the facts,
/// and takes it only while the token is still that one.
///
/// Contract (the `fact_tokens` conformance suite):
/// - a key without a token (`None`) gets one from
///   [`FactTokens::mint_fact_tokens`];
/// - a key's token (`Some`) is the same on every call and every node
///   until a change of its facts begins;
/// - while any change begun for a key has not ended its token is `None`
///   (read the facts, keep no copy);
/// - each end gives the key a token never given before, unless another
///   change begun for it is still in flight (then it stays `None`).
///
/// A shared engine may let a change in flight lapse after a while (a node
/// that died between the two calls) and forget tokens (then minted anew):
/// both only cost reads.
#[async_trait]
pub trait FactTokens: Send + Sync {
    /// Each key's token, in order (`None`: a change is in flight, or the
    /// key has no token yet).
    async fn fact_tokens(&self, keys: &[FactKey]) -> Result<Vec<Option<u64>>>;
    /// Gives each of `keys` that has no token one never given before (a
    /// key whose change is in flight is left so). A reader that found no
    /// token mints one beside its read of the facts, and keeps them from
    /// the next read on.
    async fn mint_fact_tokens(&self, keys: &[FactKey]) -> Result<()>;
    /// A change of these keys' facts is about to be written.
    async fn begin_fact_change(&self, keys: &[FactKey]) -> Result<()>;
    /// A change begun by [`FactTokens::begin_fact_change`] was written, or
    /// failed.
    async fn end_fact_change(&self, keys: &[FactKey]) -> Result<()>;
}

/// One reason entries may have left homes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Removal {
    /// An item of `author` was deleted or hidden: the entry of `item` (the
    /// original it shows) may have left the homes of `author`'s followers.
    /// `key` is the appearance that went (the deleted item's or repost's
    /// key); `None` for a change that may hide every appearance.
    Item { author: UserId, item: ItemId, key: Option<Key> },
    /// `user`'s home lost `other` (an unfollow, a block or a mute, by either
    /// side): `other`'s items and reposts may have left it.
    Relation { user: UserId, other: UserId },
}

/// What [`Removals::removed_since`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removed {
    /// Items that changed (and the appearance that went), in no order.
    pub items: Vec<(ItemId, Option<Key>)>,
    /// Users the home lost, in no order.
    pub others: Vec<UserId>,
}

impl Removed {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.others.is_empty()
    }
}

/// Materialised home inboxes (an optimisation: everything in them can be
/// rebuilt from the outboxes). Each inbox is complete for keys above its
/// floor, holds at most `timeline.max_len` keys, and may be absent. Every
/// call may fail (a remote engine is down): losing an inbox loses no data.
#[async_trait]
pub trait Inboxes: Send + Sync {
    /// Adds `key` to the present inboxes of `users`; returns how many took it.
    async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize>;
    /// Several deliveries at once (a fan-out step's chunks): the same as
    /// [`Inboxes::deliver`] of each in turn; returns how many inboxes took a
    /// key, summed. A store may group them by inbox and give each inbox its
    /// keys in ascending order (read and written once), so which keys an
    /// inbox past its cap keeps may differ from the batch's order then.
    async fn deliver_many(&self, batch: &[(Key, &[UserId])]) -> Result<usize> {
        let mut took = 0;
        for &(key, users) in batch {
            took += self.deliver(key, users).await?;
        }
        Ok(took)
    }
    /// Keys of `user`'s inbox in `range` above its floor; `None` if absent.
    async fn read_inbox(
        &self,
        user: UserId,
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Option<InboxRead>>;
    /// Starts a rebuild: the inbox becomes present-but-building and records
    /// deliveries, so none is lost while the outboxes are read.
    async fn begin_rebuild(&self, user: UserId) -> Result<()>;
    /// Finishes a rebuild with the keys read (newest first) and their floor.
    async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()>;
    /// Merges keys (a follow's backfill) into a present inbox, first raising
    /// its floor to at least `floor` (the backfill is complete only above it).
    async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()>;
    /// The floor of a present inbox.
    async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>>;
    async fn drop_inbox(&self, user: UserId) -> Result<()>;
    async fn inbox_stats(&self) -> Result<InboxStats>;
    /// Every present inbox as (user, floor, keys ascending): for a snapshot.
    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>>;
    /// Installs an inbox from a snapshot.
    async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()>;
}
