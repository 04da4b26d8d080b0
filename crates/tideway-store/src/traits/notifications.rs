//! Notifications: pages, groups, the stored causes a backfill reads.

#[allow(unused_imports)]
use super::*;

/// A notification group as a page shows it (SPEC section 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub id: u64,
    /// Its key: what happened, and to which item.
    pub verb: tideway_core::notify::Verb,
    /// The newest visible actors whose event stands, newest first (at most 5).
    pub actors: Vec<UserId>,
    /// Distinct visible actors whose event stands.
    pub actor_count: u64,
    /// The time of the newest of their events.
    pub latest_at: Millis,
}

/// A page of a user's notifications, with the marks and the exact counts
/// of groups above them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyPage {
    pub groups: Vec<GroupView>,
    pub seen: Millis,
    pub read: Millis,
    pub unseen: u64,
    pub unread: u64,
}

/// Where a scan of [`Notifications::stored_causes`] is: the kind it reads,
/// and the last one it read of that kind (`None`: from the start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CausePos {
    Items(Option<ItemId>),
    /// `(follower, followee)`.
    Follows(Option<(UserId, UserId)>),
    /// `(item, user, kind)`.
    Reactions(Option<(ItemId, UserId, String)>),
}

/// One stored thing that notifies someone (read by a backfill).
#[derive(Debug, Clone, PartialEq)]
pub enum StoredCause {
    /// An item (deleted ones too), without its body.
    Item(Arc<Item>),
    Follow {
        from: UserId,
        to: UserId,
        since: Millis,
    },
    /// A reaction: engines keep no time for one.
    Reaction {
        item: ItemId,
        user: UserId,
        kind: String,
    },
}

impl StoredCause {
    /// Its position, for the next page of its kind.
    pub fn pos(&self) -> CausePos {
        match self {
            StoredCause::Item(i) => CausePos::Items(Some(i.id)),
            StoredCause::Follow { from, to, .. } => CausePos::Follows(Some((*from, *to))),
            StoredCause::Reaction { item, user, kind } => CausePos::Reactions(Some((*item, *user, kind.clone()))),
        }
    }
}

/// Notifications: per user, groups of events, two marks and the counts of
/// groups above them.
///
/// Contract (the `notifications` conformance suite): [`Notifications::notify`]
/// applies its ops (`tideway_core::notify::Op`) atomically per user, in
/// order, deciding each event's group by `tideway_core::notify::place` from
/// what is stored, so that two nodes placing events of one key at once make
/// one group; an event whose actor is hidden from the user when it starts
/// (a block either way, the user's mute, as the graph says in that write)
/// is kept hidden; applying an op twice is applying it once. A page lists
/// the groups with a visible standing event by (`latest_at`, id), newest
/// first, below an optional `(latest_at, id)` cursor, each whole. Marks only
/// move forward; `unseen` and `unread` are exact and read without a scan.
#[async_trait]
pub trait Notifications: Send + Sync {
    /// Applies notification changes (one atomic write per user).
    async fn notify(&self, ops: &[tideway_core::notify::Op]) -> Result<()>;
    /// A page of `user`'s groups below `before`, newest first.
    async fn notifications(&self, user: UserId, before: Option<(Millis, u64)>, limit: usize) -> Result<NotifyPage>;
    /// A page of what is stored that notifies (for a backfill of
    /// notifications: what was stored before they existed, or imported):
    /// of the kind `after` names, those after its position, in the
    /// engine's order of that kind, at most `limit`. Items come with
    /// deleted ones and without their bodies; an empty page ends the kind.
    async fn stored_causes(&self, after: &CausePos, limit: usize) -> Result<Vec<StoredCause>>;
    /// Moves `user`'s mark to group `up_to`'s `latest_at`, or to the newest
    /// group's; `false` when `up_to` is not a group of `user`'s.
    async fn mark_notifications(
        &self,
        user: UserId,
        mark: tideway_core::notify::Mark,
        up_to: Option<u64>,
    ) -> Result<bool>;
}
