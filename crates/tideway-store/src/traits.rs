//! The traits the service uses. Each is batch-shaped: one call serves a page
//! or a fan-out chunk.
//!
//! # Adding a storage concern
//!
//! What a new concern (postings, notifications, live sessions) touches, in
//! order (ARCHITECTURE.md, "Adding a storage concern", says more):
//!
//! 1. its domain types and read-time rules in `tideway-core`;
//! 2. the decisions every engine must agree on, as pure functions in
//!    [`crate::rules`];
//! 3. a trait here (batch-shaped, async, fallible, its contract in its doc),
//!    added to [`Backend`] and to `Durable` or `Shared` in [`crate::split`];
//! 4. its methods spelled once in `forward_backend!` (`forward.rs`), so
//!    [`crate::Split`] and [`crate::Counted`] forward them;
//! 5. a conformance suite in `tideway-conformance/src/suites/`, named in its `suites!` list;
//! 6. the memory and embedded index: `Change` variants, `State` and its
//!    `Unit`s (or a range read on `Disk` for what is too long to load
//!    whole), and a file `store/<concern>.rs` deciding by the rule; state
//!    whose changes are decided where they apply (notifications' grouping)
//!    is a structure of its own (`notebook.rs`) that reports the rows it
//!    wrote, which `State::derived` hands the journal; a new kind of loaded
//!    unit is a `Holder` of the index's budget (`residency.rs`: admitted at
//!    install, its bytes estimated, let go in `State::evict`);
//! 7. the embedded disk (`tideway-store-fjall`): keyspace and codec, encoding,
//!    loading, a migration of existing directories;
//! 8. SQL (`tideway-store-sql`): a migration and a file `<concern>.rs`,
//!    dialect differences in `dialect.rs` only;
//! 9. Redis (`tideway-store-redis`) for shared state only;
//! 10. the service, the HTTP edge, the model test's reference, black-box
//!     tests and the docs.

use crate::change::{Job, Promotion, Record};
use crate::error::StoreError;
use crate::inbox::{InboxRead, InboxStats};
use async_trait::async_trait;
use std::sync::Arc;
use tideway_core::live::{Move, Session};
use tideway_core::merge::{Direction, KeyRange};
pub use tideway_core::{FollowStatus, ListKind};
use tideway_core::{Item, ItemId, Key, Millis, Relation, UserId, Visibility};

pub type Result<T> = std::result::Result<T, StoreError>;

/// What `create_item` did.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    Created(Arc<Item>),
    /// The author's idempotency key was seen before: the earlier item.
    Existing(Arc<Item>),
    /// The author reposted this original before (and has not deleted it).
    AlreadyReposted(Arc<Item>),
}

/// Counters of one user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UserCounts {
    pub following: u64,
    pub followers: u64,
    pub items: u64,
}

/// Counters of the whole store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub users: u64,
    pub items: u64,
    pub follows: u64,
    pub pending_jobs: u64,
    pub oldest_job: Option<Millis>,
    /// The largest key stored (the id generator starts above it).
    pub max_key: Key,
    /// The embedded index's residency (`None`: an engine that keeps no
    /// index under a budget).
    pub index: Option<IndexStats>,
}

/// What a lazy index holds under its budget, and how reads found it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexStats {
    /// Bytes of loaded units (an estimate, weighed against the budget).
    pub bytes: u64,
    /// The budget (`storage.index_size`).
    pub budget: u64,
    /// Holders of loaded units (users, items, books, anchors).
    pub holders: u64,
    /// Reads that found every unit they needed, and reads that loaded some.
    pub hits: u64,
    pub misses: u64,
    /// Units loaded from disk.
    pub loads: u64,
    /// Holders let go to stay within the budget.
    pub evictions: u64,
    /// Bytes the disk keeps in memory for the data it holds, outside this
    /// budget and the caches ([`Disk::pinned_bytes`](crate::Disk::pinned_bytes)).
    pub disk_pinned: u64,
    /// Bytes of recent writes the disk holds in memory until they are
    /// written out ([`Disk::buffered_bytes`](crate::Disk::buffered_bytes)).
    pub disk_buffered: u64,
}

/// Per-item counts kept by the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemCounts {
    pub replies: u64,
    pub reposts: u64,
    /// Reactions per kind (positive counts only, sorted by kind).
    pub reactions: Vec<(String, u64)>,
}

impl ItemCounts {
    pub fn of_kind(&self, kind: &str) -> u64 {
        self.reactions.iter().find(|(k, _)| k == kind).map_or(0, |(_, n)| *n)
    }
}

/// The viewer's own marks on an item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ViewerMarks {
    pub reposted: bool,
    /// Kinds the viewer reacted with, sorted.
    pub reactions: Vec<String>,
}

/// A change to a stored item.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemChange {
    /// Replaces the body and/or the visibility (`None`: unchanged).
    Patch { body: Option<tideway_core::Body>, visibility: Option<Visibility> },
    /// Soft delete: the id stays as a tombstone.
    Delete,
}

impl ItemChange {
    /// The item after this change.
    pub fn apply(&self, item: &Item) -> Item {
        match self {
            ItemChange::Patch { body, visibility } => Item {
                body: body.clone().unwrap_or_else(|| item.body.clone()),
                visibility: visibility.unwrap_or(item.visibility),
                rev: item.rev.wrapping_add(1),
                ..item.clone()
            },
            ItemChange::Delete => Item { deleted: true, rev: item.rev.wrapping_add(1), ..item.clone() },
        }
    }
}

/// Items, their outboxes, reposts and home insertions.
#[async_trait]
pub trait Items: Send + Sync {
    /// Stores a new item atomically with its fan-out job (when `fan_out`)
    /// and, when it is stored (`Created`), with `notify` (its notification
    /// ops, as [`Notifications::notify`] applies them): one atomic write,
    /// so no crash leaves the item without its notifications. Idempotency
    /// keys and repeated reposts return the existing item, and apply
    /// nothing (it was stored with its own).
    async fn create_item_notifying(
        &self,
        item: Item,
        fan_out: bool,
        now: Millis,
        notify: &[tideway_core::notify::Op],
    ) -> Result<CreateOutcome>;
    /// [`Items::create_item_notifying`] with no notifications (imports, tests).
    async fn create_item(&self, item: Item, fan_out: bool, now: Millis) -> Result<CreateOutcome> {
        self.create_item_notifying(item, fan_out, now, &[]).await
    }
    /// Changes an existing, non-deleted item (a patch or a soft delete), as
    /// data a remote engine can apply in one statement, and applies
    /// `notify` in the same atomic write when it changed it. Returns the
    /// item as changed, or `None` (nothing applied) when it is unknown or
    /// already deleted.
    async fn update_item_notifying(
        &self,
        id: ItemId,
        change: &ItemChange,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Option<Arc<Item>>>;
    /// [`Items::update_item_notifying`] with no notifications (a patch).
    async fn update_item(&self, id: ItemId, change: &ItemChange) -> Result<Option<Arc<Item>>> {
        self.update_item_notifying(id, change, &[]).await
    }
    /// The records named by `keys`, in order. An item's `body` may be left
    /// out (the store keeps bodies on disk): [`Items::bodies`] reads them.
    async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>>;
    /// The bodies of items, in order (`None`: unknown item): one call for a
    /// page, served from a bounded cache or the disk.
    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<tideway_core::Body>>>;
    /// Keys authored by any of `authors` in `range`, in `dir` order, at most `limit`.
    async fn outbox_merge(&self, authors: &[UserId], range: KeyRange, dir: Direction, limit: usize)
    -> Result<Vec<Key>>;
    /// For each original, its non-deleted reposts by any of `reposters`.
    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>>;
    /// Everything a page shows beside the items, in one call: for each item
    /// its counts and, with a viewer, the viewer's own marks.
    async fn hydration(&self, ids: &[ItemId], viewer: Option<UserId>)
    -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>>;
    /// Sets or clears one reaction, then applies `notify` (the reaction's
    /// notification ops, as [`Notifications::notify`] applies them) whether
    /// or not the reaction changed, so a repeat completes a call that failed
    /// between the two; returns whether the reaction changed. It returns
    /// once both are durable: the embedded store journals them together and
    /// waits for one sync, where two calls would wait for two; SQL writes
    /// them in one transaction (one commit).
    async fn set_reaction(
        &self,
        item: ItemId,
        user: UserId,
        kind: &str,
        on: bool,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool>;
    /// Stores a promotion.
    async fn create_promotion(&self, p: Promotion) -> Result<()>;
    /// Promotions running at `now`.
    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>>;
    /// Every promotion not ended at `from` (running then or later), by id:
    /// what a node keeps a copy of.
    async fn promotions_not_ended(&self, from: Millis) -> Result<Vec<Promotion>>;
    /// Records an insertion of `item` into `user`'s home at `key`.
    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()>;
    /// Insertion keys of `user`'s home in `range`.
    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>>;
    /// For each item, the earliest key at which it was inserted into `user`'s home.
    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>>;
}

/// The mention, tag and object feeds' postings: item keys by feed.
///
/// Contract (the `postings` conformance suite): `create_item` posts a new
/// item to every feed of [`crate::rules::postings`] in the same atomic write;
/// postings are never removed (a deleted or re-scoped item is filtered by
/// the page that reads it); [`Postings::postings`] reads one feed's keys in
/// an open key range, in `dir` order, at most `limit`, with no scan: a feed
/// of ten million items pages as fast as a profile.
#[async_trait]
pub trait Postings: Send + Sync {
    /// Keys of the items posted to `feed` (a `PostingFeed::id`) in `range`.
    async fn postings(&self, feed: u64, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>>;
}

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

/// What [`Live::move_session`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Moved {
    /// The session after the step.
    Done(Session),
    /// The step is not the session's next one (it is as shown): nothing changed.
    Wrong(Session),
    Unknown,
}

/// Anchors' live sessions (SPEC section 5), durable.
///
/// Contract (the `live` conformance suite): a session's steps are decided by
/// [`Session::moved`] atomically (two nodes starting one session at once:
/// one succeeds, the other gets `Wrong`); an anchor never has more than
/// `max_open` sessions upcoming or live; [`Live::open_sessions`] reads the
/// open sessions of a viewer's anchors in one call, and
/// [`Live::ended_sessions`] their ended ones by (end, id), newest first,
/// below a position, with no scan of an anchor's history: ending a session
/// writes nothing per follower (the replay part is pulled).
#[async_trait]
pub trait Live: Send + Sync {
    /// Stores a new session (upcoming; an import may store one live or
    /// ended); `false` (nothing stored) when it is open and its anchor has
    /// `max_open` sessions upcoming or live already.
    async fn create_session(&self, session: Session, max_open: usize) -> Result<bool>;
    /// Takes session `id` one step (started or ended at `at`).
    async fn move_session(&self, id: u64, step: Move, at: Millis) -> Result<Moved>;
    /// Sessions by id, in order (`None`: unknown).
    async fn sessions(&self, ids: &[u64]) -> Result<Vec<Option<Session>>>;
    /// Every upcoming or live session of any of `anchors` (any order).
    async fn open_sessions(&self, anchors: &[UserId]) -> Result<Vec<Session>>;
    /// Ended sessions of any of `anchors` whose (end, id) is below `below`,
    /// the latest first, at most `limit`.
    async fn ended_sessions(&self, anchors: &[UserId], below: (Millis, u64), limit: usize) -> Result<Vec<Session>>;
}

/// Live feed snapshots ([`tideway_core::live::Snapshot`], encoded), kept a
/// while under the id their cursors carry. Shared by every node, so a walk
/// that one node started continues on any other. Losing one (expiry, a
/// flush) only makes its walk start over (`410 cursor_expired`).
#[async_trait]
pub trait Snapshots: Send + Sync {
    /// Keeps `bytes` under `id` for at least `ttl_ms` (unless memory runs
    /// short: then the oldest go first).
    async fn put_snapshot(&self, id: u64, bytes: &[u8], ttl_ms: u64) -> Result<()>;
    /// The bytes kept under `id`, until they expire.
    async fn snapshot(&self, id: u64) -> Result<Option<Vec<u8>>>;
}

/// The follow graph, blocks and mutes.
#[async_trait]
pub trait Graph: Send + Sync {
    /// Follows every target in one storage round, and applies, in the same
    /// atomic write, the ops of `notify` whose user ([`Op::user`]) is a
    /// target it newly follows (`Followed`): a follow that stood already
    /// was stored with its own.
    ///
    /// [`Op::user`]: tideway_core::notify::Op::user
    async fn follow_many_notifying(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Vec<FollowStatus>>;
    /// [`Graph::follow_many_notifying`] with no notifications.
    async fn follow_many(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
    ) -> Result<Vec<FollowStatus>> {
        self.follow_many_notifying(user, targets, at, max_following, &[]).await
    }
    /// Removes the follow, with `notify` in the same atomic write when
    /// there was one to remove. Returns whether an edge was removed.
    async fn unfollow_notifying(
        &self,
        user: UserId,
        target: UserId,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool>;
    /// [`Graph::unfollow_notifying`] with no notifications.
    async fn unfollow(&self, user: UserId, target: UserId) -> Result<bool> {
        self.unfollow_notifying(user, target, &[]).await
    }
    /// Blocks (removing follows both ways) or unblocks.
    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()>;
    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()>;
    /// Everyone `user` follows (at most `graph.max_following`).
    async fn followees(&self, user: UserId) -> Result<Vec<UserId>>;
    /// [`Graph::followees`] and the version of that set, read together,
    /// when the engine keeps one: it moves at every change of the set, so
    /// a node may keep a copy of the list and check it with
    /// [`PageQuery::followees_of`]. The version covers the user's own
    /// relations too ([`OwnRelations`]: blocks both ways, mutes, whether
    /// anything was inserted into their home), read with the list where
    /// they are few enough to keep. No version (the provided answer, and
    /// the in-process engines', which keep no copies): keep no copy.
    async fn followees_versioned(&self, user: UserId) -> Result<Followees> {
        Ok(Followees { list: self.followees(user).await?, version: None, own: None })
    }
    /// The version of `user`'s followee set and own relations (see
    /// [`Graph::followees_versioned`]), when the engine keeps one.
    async fn followees_version(&self, _user: UserId) -> Result<Option<u64>> {
        Ok(None)
    }
    /// A page of a list, newest first, after the `(since, id)` position.
    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>>;
    /// Followers in order of follow after the position `after`: the chunks
    /// of a fan-out job.
    async fn followers_chunk(&self, user: UserId, after: Option<FollowerPos>, limit: usize)
    -> Result<Vec<FollowerPos>>;
    /// The relation of `user` to each of `others`.
    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>>;
    /// [`Graph::relations`] without the follows: the blocks both ways and
    /// the mutes, `following` and `followed_by` false. What a home page asks
    /// (it walks `F(user)` and knows whom the viewer follows); an engine in
    /// process answers it without reading the others' follow lists.
    async fn relations_unfollowed(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        let mut rels = self.relations(user, others).await?;
        for r in &mut rels {
            (r.following, r.followed_by) = (false, false);
        }
        Ok(rels)
    }
    async fn counts(&self, user: UserId) -> Result<UserCounts>;
    /// Store-wide counters; fails when storage cannot take writes (readiness).
    async fn stats(&self) -> Result<StoreStats>;
    /// Fails when storage cannot take writes and will not recover without a
    /// restart (liveness).
    async fn health(&self) -> Result<()>;
}

pub use crate::change::FollowerPos;

/// How far a fan-out job got in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobProgress {
    /// Every follower up to and including this position has the job's key.
    Checkpoint(Key, FollowerPos),
    /// Every follower has it: the job is done.
    Complete(Key),
}

/// Who works on fan-out jobs, so leases tell workers apart: a node's worker
/// is [`rules::worker_id`]`(node, epoch)`, its node id and the start epoch
/// its claim of that id got ([`Jobs::claim_node`]), so a restarted node
/// knows which leases its dead predecessor held.
///
/// [`rules::worker_id`]: crate::rules::worker_id
pub type WorkerId = u64;

pub use crate::trust::{Distrusted, SharedTrust, TrustChange};

/// What a claim of a node id found ([`Jobs::claim_node`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeClaim {
    /// The id is this instance's, in this start epoch (1 for the first
    /// claim of the id, one more for each later one).
    Claimed { epoch: u32 },
    /// Another instance holds it: its last heartbeat was `age_ms` ago (by
    /// the store's clock), less than the claim's `stale_ms`.
    Held { age_ms: i64 },
}

/// Durable fan-out jobs, claimed with leases.
///
/// Contract (the conformance suite checks it on every backend):
/// - `claim_jobs` returns up to `limit` pending jobs, oldest first, that no
///   *other* worker holds a live lease on, and leases them to `worker` until
///   `now + lease_ms` (renewing the jobs it already holds); a store may
///   hold only a window of its oldest pending jobs in memory (the embedded
///   store, [`crate::job_window`]): `claim_jobs` and `pending_jobs` then
///   see the window, which refills from disk as it drains;
/// - a worker whose lease expired may lose the job to another worker's
///   claim; its later `advance` of that job is then not recorded;
/// - a checkpoint never moves back: progress behind the recorded cursor is
///   ignored, so a slow worker cannot undo a faster one's work;
/// - `Complete` removes the job;
/// - a worker of a later epoch of the same node
///   ([`rules::supersedes`](crate::rules::supersedes)) takes the jobs an
///   earlier epoch holds at once, live lease or not: that run is dead.
///
/// Node ids are claimed, not assumed (shared by every node of a
/// deployment, so two running nodes never use one id):
/// - `claim_node` gives the id to `instance` when no other instance holds
///   it, or the holder released it, or the holder's heartbeat is at least
///   `stale_ms` old by the store's clock; each claim starts a new epoch;
/// - `beat` records `instance`'s heartbeat; `false` when the id is no longer
///   `instance`'s (another instance claimed it: this one must stop);
/// - `release_node` gives the id up at a clean stop (a later claim need not
///   wait for the heartbeat to go stale);
/// - `clock` is the store's own clock (a database's), which cross-node
///   deadlines follow; `None` when the store lives in this process and has
///   no clock but the node's.
#[async_trait]
pub trait Jobs: Send + Sync {
    /// Up to `limit` pending jobs, oldest first, whoever holds them.
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>>;
    /// Claims jobs for `worker` (see the trait's contract).
    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>>;
    /// Brings in ahead what claiming and stepping the oldest `limit`
    /// pending jobs that no worker holds at `now` will read: a hint, with
    /// no effect on any answer, which a worker runs beside its step's
    /// deliveries. A store that reads nothing ahead does nothing (the
    /// default); the embedded store loads their authors' counters and
    /// follower lists, which a step would otherwise wait for.
    async fn prepare_jobs(&self, now: Millis, limit: usize) -> Result<()> {
        let _ = (now, limit);
        Ok(())
    }
    /// Records the progress of many jobs in one write; for each, whether it
    /// was recorded (false: the job is held by another worker, gone, or the
    /// checkpoint would move back). Progress only saves repeating
    /// deliveries (inboxes ignore keys they hold), so a backend may make it
    /// durable a little later (the embedded store: within 50 ms).
    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>>;
    /// Claims node id `node` for `instance` (see the trait's contract).
    async fn claim_node(&self, node: u16, instance: u64, stale_ms: i64) -> Result<NodeClaim>;
    /// Records `instance`'s heartbeat on `node`; whether it still holds it.
    async fn beat(&self, node: u16, instance: u64) -> Result<bool>;
    /// Gives `node` up if `instance` holds it.
    async fn release_node(&self, node: u16, instance: u64) -> Result<()>;
    /// The store's clock, read now (`None`: the store has no other clock
    /// than this process's). Fails when the store does not answer.
    async fn clock(&self) -> Result<Option<Millis>>;
    /// Reads or changes the record of whether nodes may trust the shared
    /// half ([`SharedTrust`], `trust.rs`): `change` applied by
    /// [`SharedTrust::apply`] at the store's clock, atomically, and the
    /// record as it then stands. A store with no shared half beside it
    /// keeps the record all the same (the conformance suite checks it).
    async fn shared_trust(&self, change: TrustChange) -> Result<SharedTrust>;
}

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

/// A signal of the event hub: what one part of a deployment tells all the
/// others. Delivered at most once, to the subscriptions open when it is
/// published: a lost signal costs latency, never correctness (whoever acts
/// on one also polls, or re-reads the feed it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Signal {
    /// Fan-out jobs were created: workers claim them now, not at their next
    /// poll.
    Work,
    /// The top of a user's home may have changed (a follow, block, mute or
    /// insertion of theirs): a home stream of that user reads it again.
    Home(UserId),
    /// An item of this author was written, or a chunk of its fan-out was
    /// delivered: home streams of its followers read the top of their home
    /// again.
    Author(UserId),
    /// An item of this author was deleted or changed: home streams of its
    /// followers also check whether what they sent is still there.
    Gone(UserId),
    /// This item was patched or deleted: nodes forget their copy of its
    /// record (a copy is checked before it is shown whatever arrives: this
    /// only spares that check a miss).
    Item(ItemId),
}

/// What a [`Subscription`] receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Signal(Signal),
    /// Signals may have been lost (the subscriber fell behind, or the
    /// engine's connection was lost and made again): act as if anything had
    /// happened.
    Lagged,
    /// The hub is gone; subscribe again.
    Closed,
}

/// What a hub's implementations pass to their subscriptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubEvent {
    Signal(Signal),
    /// Signals may have been lost (shown as [`Received::Lagged`]).
    Gap,
}

/// An open subscription of the event hub: every signal published after it
/// opened, from any node, in the order one publisher sent them.
pub struct Subscription {
    rx: tokio::sync::broadcast::Receiver<HubEvent>,
}

impl Subscription {
    /// A subscription fed by an implementation's broadcast channel.
    pub fn new(rx: tokio::sync::broadcast::Receiver<HubEvent>) -> Self {
        Self { rx }
    }

    /// The next signal (waits for it).
    pub async fn recv(&mut self) -> Received {
        use tokio::sync::broadcast::error::RecvError;
        match self.rx.recv().await {
            Ok(HubEvent::Signal(s)) => Received::Signal(s),
            Ok(HubEvent::Gap) | Err(RecvError::Lagged(_)) => Received::Lagged,
            Err(RecvError::Closed) => Received::Closed,
        }
    }
}

/// The event hub: signals between the parts of a deployment (one process,
/// or every node on a shared engine). Wake-ups of fan-out workers go
/// through it, and so will the real-time home stream.
///
/// Contract (the conformance suite checks it on every backend): every
/// subscription open when `publish` is called receives its signals, in
/// order; one opened later does not; publishing with no subscription
/// succeeds; a subscriber that falls behind receives `Lagged`, and memory
/// stays bounded.
#[async_trait]
pub trait Hub: Send + Sync {
    /// Sends `signals` to every subscription open now, on every node.
    async fn publish(&self, signals: &[Signal]) -> Result<()>;
    /// Opens a subscription (fails when the engine cannot be reached).
    async fn subscribe(&self) -> Result<Subscription>;
    /// Whether every server of the shared engine answers now (the health
    /// probe; a cluster asks each primary). Cheap: no data is read.
    async fn ping(&self) -> Result<()>;
    /// Drops everything this deployment keeps in the shared engine
    /// (inboxes, marks, activity, notes, tokens, snapshots), as if it had
    /// lost its data; returns how many keys went. Asked even while the
    /// engine's breaker is open, by the probe that found it answering.
    async fn forget_all(&self) -> Result<usize>;
    /// A write could not reach the shared half: makes it untrusted for
    /// every node (in the durable half, `trust.rs`) before the write goes
    /// on, and says by when this node must have acknowledged it, at the
    /// earliest, so that no node trusts the shared half by then
    /// ([`Distrusted`]). A backend whose shared half cannot be away from
    /// its durable one (one engine, in process) has nothing to do.
    async fn distrust_shared(&self) -> Result<Distrusted> {
        Ok(Distrusted::default())
    }
}

/// Everything a backend provides: its durable half and its shared half
/// ([`Durable`](crate::Durable), [`Shared`](crate::Shared)), and what it is
/// like ([`Profiled`](crate::Profiled)).
/// What [`Graph::followees_versioned`] reads of a user at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followees {
    /// Everyone the user follows.
    pub list: Vec<UserId>,
    /// The version of the list and of `own` (`None`: the engine keeps
    /// none, and a node keeps no copy).
    pub version: Option<u64>,
    /// The user's own relations, at the same version; `None` when the
    /// engine keeps no version or the user has more of them than it reads
    /// at once (a page's call then reads them, as without a copy).
    pub own: Option<OwnRelations>,
}

/// A user's own side of the relations a home page asks of every author and
/// reposter it shows, and whether the page must look for insertions: what
/// a node keeps beside its copy of the user's followee list, under the
/// same version ([`Graph::followees_versioned`]), so that a page's call
/// need not read them ([`PageQuery::relations_known`]). Every change of
/// them moves the version: a block or unblock both users', a mute or
/// unmute the muter's, an insertion its owner's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnRelations {
    /// Whom the user blocks, by id.
    pub blocks: Vec<UserId>,
    /// Who blocks the user, by id.
    pub blocked_by: Vec<UserId>,
    /// Whom the user mutes, by id.
    pub mutes: Vec<UserId>,
    /// Anything was ever inserted into the user's home.
    pub inserts: bool,
}

impl OwnRelations {
    /// The most users of each list an engine reads into a copy (a user with
    /// more keeps none: their pages read their relations each time).
    pub const MAX_EACH: usize = 1000;

    /// The user's relation to `other` as [`Graph::relations_unfollowed`]
    /// answers it (follows false: the page walks the followee list).
    pub fn relation(&self, other: UserId) -> Relation {
        let has = |list: &[UserId]| list.binary_search(&other).is_ok();
        Relation {
            following: false,
            followed_by: false,
            blocking: has(&self.blocks),
            blocked_by: has(&self.blocked_by),
            muting: has(&self.mutes),
        }
    }

    /// Puts each list in id order (as [`OwnRelations::relation`] reads
    /// them), without repeats.
    pub fn sorted(mut self) -> Self {
        for list in [&mut self.blocks, &mut self.blocked_by, &mut self.mutes] {
            list.sort_unstable();
            list.dedup();
        }
        self
    }
}

/// What a page needs to know of a batch of records beside the records
/// themselves (the entry rule's reads, the counts and marks read ahead),
/// asked at once: see [`Pages::page_facts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PageQuery<'a> {
    /// The originals of the batch: their reposts by `reposters`, and with
    /// `inserts_of` that user's insertions of them.
    pub originals: &'a [ItemId],
    pub reposters: &'a [UserId],
    pub inserts_of: Option<UserId>,
    /// The viewer: `related` (and the reposters found) are read as
    /// relations of it, `hydrate` with its marks (none without a viewer).
    pub viewer: Option<UserId>,
    pub related: &'a [UserId],
    /// The caller knows whom the viewer follows (a home page walks `F(u)`):
    /// the relations then need not say `following` or `followed_by`, and
    /// say `false` there (blocks and mutes as always).
    pub follows_known: bool,
    /// The caller holds the viewer's [`OwnRelations`] (checked by this
    /// page's `followees_of`): the engine reads no relations, and
    /// [`PageFacts::relations`] is empty.
    pub relations_known: bool,
    /// Items whose counts (and the viewer's marks) are read.
    pub hydrate: &'a [ItemId],
    /// Item records a node holds a copy of, with the `rev` of its copy:
    /// each one whose stored `rev` is another (it was patched or deleted
    /// since the copy was taken) or that is unknown is named in
    /// [`PageFacts::stale`].
    pub held: &'a [(ItemId, u32)],
    /// Every held copy was current at this item epoch of the store
    /// ([`PageFacts::items_epoch`], or later): an engine that keeps the
    /// epoch checks them only if it moved since (a patch or delete moves
    /// it in its own transaction, so a copy current then is current still).
    /// `None`: check them.
    pub held_at: Option<u64>,
    /// With a user: [`PageFacts::followees_version`] is the version of that
    /// user's followee set ([`Graph::followees_version`]), so a node's copy
    /// of the list is checked by the page's one call.
    pub followees_of: Option<UserId>,
    /// With a time: [`PageFacts::promotions`] are the promotions running
    /// then ([`Items::active_promotions`]).
    pub promotions_at: Option<Millis>,
}

impl PageQuery<'_> {
    /// Whether the query asks nothing an engine reads (no list, no
    /// version, no promotions): its answer is the empty one.
    pub fn asks_nothing(&self) -> bool {
        self.originals.is_empty()
            && self.related.is_empty()
            && self.hydrate.is_empty()
            && self.held.is_empty()
            && self.followees_of.is_none()
            && self.promotions_at.is_none()
    }
}

/// The answers to a [`PageQuery`], each in the order of its list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageFacts {
    /// Per original, its non-deleted reposts by the reposters (id order).
    pub reposts: Vec<Vec<(UserId, ItemId)>>,
    /// Per original, the earliest key of its insertion (empty without
    /// `inserts_of`).
    pub inserted: Vec<Option<Key>>,
    /// With a viewer, its relation to each related user, in order, then to
    /// each reposter found (in `reposts`) that is neither related nor the
    /// viewer, by id: the entry rule asks of both. Empty without a viewer.
    pub relations: Vec<(UserId, Relation)>,
    pub hydrated: Vec<(ItemCounts, Option<ViewerMarks>)>,
    /// The held records that are not current, in the order held.
    pub stale: Vec<ItemId>,
    /// With `followees_of`, the version of that user's followee set (`None`
    /// also when the engine keeps none).
    pub followees_version: Option<u64>,
    /// With `promotions_at`, the promotions running then (`None` without).
    pub promotions: Option<Vec<Promotion>>,
    /// The store's item epoch as of this answer, where the engine keeps one
    /// (SQL; in-process engines hold no copies and keep none): a count of
    /// every patch and delete, moved in the change's own transaction. The
    /// held copies not named stale are current at it.
    pub items_epoch: Option<u64>,
}

/// A page's reads in one call. The provided method asks the other traits,
/// side by side (what an engine in process answers at once); an engine
/// behind a round trip answers all of it in one (one SQL statement).
#[async_trait]
pub trait Pages: Items + Graph {
    /// Everything `q` asks, as of one moment of the store (on SQL: one
    /// statement's snapshot, so a held record found current is current
    /// with the counts read beside it).
    async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        facts_by_parts(self, q).await
    }
}

/// [`Pages::page_facts`] from the other traits' methods, side by side.
pub async fn facts_by_parts<P: Items + Graph + ?Sized>(p: &P, q: &PageQuery<'_>) -> Result<PageFacts> {
    // (without the follows when the caller knows them)
    let relations_of = async |v: UserId, others: &[UserId]| {
        if q.follows_known { p.relations_unfollowed(v, others).await } else { p.relations(v, others).await }
    };
    let held_ids: Vec<Key> = q.held.iter().map(|(i, _)| i.0).collect();
    let (reposts, inserted, relations, hydrated, held, followees_version, promotions) = tokio::try_join!(
        async {
            if q.originals.is_empty() || q.reposters.is_empty() {
                Ok(vec![Vec::new(); q.originals.len()])
            } else {
                p.reposts_by(q.originals, q.reposters).await
            }
        },
        async {
            match q.inserts_of {
                Some(u) if !q.originals.is_empty() => p.inserted_keys(u, q.originals).await,
                _ => Ok(vec![]),
            }
        },
        async {
            match q.viewer {
                Some(v) if !q.related.is_empty() && !q.relations_known => relations_of(v, q.related).await,
                _ => Ok(vec![]),
            }
        },
        async { if q.hydrate.is_empty() { Ok(vec![]) } else { p.hydration(q.hydrate, q.viewer).await } },
        async { if held_ids.is_empty() { Ok(vec![]) } else { p.records(&held_ids).await } },
        async {
            match q.followees_of {
                Some(u) => p.followees_version(u).await,
                None => Ok(None),
            }
        },
        async {
            match q.promotions_at {
                Some(now) => p.active_promotions(now).await.map(Some),
                None => Ok(None),
            }
        },
    )?;
    let stale = q
        .held
        .iter()
        .zip(held)
        .filter(|((_, rev), rec)| !matches!(rec, Some(Record::Item(i)) if i.rev == *rev))
        .map(|((id, _), _)| *id)
        .collect();
    let mut relations: Vec<(UserId, Relation)> = q.related.iter().copied().zip(relations).collect();
    if let Some(v) = q.viewer.filter(|_| !q.relations_known) {
        let extra = reposters_beyond(&reposts, q.related, v);
        if !extra.is_empty() {
            relations.extend(extra.iter().copied().zip(relations_of(v, &extra).await?));
        }
    }
    Ok(PageFacts { reposts, inserted, relations, hydrated, stale, followees_version, promotions, items_epoch: None })
}

/// Of `authors`, those whose key of [`HotAuthors::unpushed_keys`] is above
/// `floor`, in order: what [`HotAuthors::unpushed_above`] answers.
pub fn unpushed_above_floor(authors: &[UserId], keys: &[Option<Key>], floor: Key) -> Vec<UserId> {
    authors.iter().zip(keys).filter(|(_, k)| k.is_some_and(|k| k > floor)).map(|(a, _)| *a).collect()
}

/// The reposters in `reposts` that are neither in `related` nor `viewer`,
/// by id (the relations [`PageFacts`] adds after the related users').
pub fn reposters_beyond(reposts: &[Vec<(UserId, ItemId)>], related: &[UserId], viewer: UserId) -> Vec<UserId> {
    let mut extra: Vec<UserId> =
        reposts.iter().flatten().map(|(u, _)| *u).filter(|u| *u != viewer && !related.contains(u)).collect();
    extra.sort_unstable();
    extra.dedup();
    extra
}

pub trait Backend: crate::Durable + crate::Shared {}
impl<T: crate::Durable + crate::Shared> Backend for T {}
