//! Items, their changes, counts and marks; postings.

#[allow(unused_imports)]
use super::*;
use serde::{Deserialize, Serialize};

/// What `create_item` did.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    Created(Arc<Item>),
    /// The author's idempotency key was seen before: the earlier item.
    Existing(Arc<Item>),
    /// The author reposted this original before (and has not deleted it).
    AlreadyReposted(Arc<Item>),
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

/// A stored record: an item, or the insertion of an item into one home.
/// Both are named by a key from the same id generator, so a feed position
/// resolves to exactly one record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Item(Arc<Item>),
    Insert { key: Key, user: UserId, item: ItemId },
}

/// A record cache's own cost of an entry, beside [`Record::heap_bytes`]:
/// its slot (key, value, links and state), its share of the hash table, and
/// the key it remembers once evicted (an estimate the embedded store's
/// allocation test checks). The store's cache and a node's copies both
/// weigh by it.
pub const CACHE_ENTRY_BYTES: usize = 112;

impl Record {
    /// The memory this record holds beside the cache slot it sits in: the
    /// item's shared allocation and what it points to, each allocation as
    /// the allocator sizes it (a stripped body is shared by all and counted
    /// by none). What every cache of records weighs by.
    pub fn heap_bytes(&self) -> usize {
        match self {
            Record::Item(i) => {
                let stripped = if is_stripped(&i.body) { i.body.heap_bytes() } else { 0 };
                let arc = 2 * std::mem::size_of::<usize>() + std::mem::size_of::<Item>();
                tideway_core::body::allocated(arc) + i.heap_bytes() - stripped
            }
            Record::Insert { .. } => 0,
        }
    }
}

/// The body of an item whose body the index does not hold (shared: one
/// allocation for all of them, recognised by address).
pub fn stripped_body() -> tideway_core::Body {
    static STRIPPED: std::sync::LazyLock<tideway_core::Body> = std::sync::LazyLock::new(tideway_core::Body::default);
    STRIPPED.clone()
}

/// Whether an item's body was left on disk.
pub fn is_stripped(body: &tideway_core::Body) -> bool {
    static STRIPPED: std::sync::LazyLock<tideway_core::Body> = std::sync::LazyLock::new(stripped_body);
    tideway_core::Body::ptr_eq(body, &STRIPPED)
}

/// A promoted item: shown in home pages after every `every` organic entries
/// while `starts_at <= now < ends_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promotion {
    pub id: Key,
    pub item: ItemId,
    pub every: u32,
    pub starts_at: Millis,
    pub ends_at: Millis,
}

impl Promotion {
    /// Of `list`, the promotions running at `at`, by id.
    pub fn running(list: &[Promotion], at: Millis) -> Vec<Promotion> {
        let mut out: Vec<Promotion> = list.iter().filter(|p| p.runs_at(at)).cloned().collect();
        out.sort_unstable_by_key(|p| p.id);
        out
    }

    /// Whether it runs at `now` (`starts_at <= now < ends_at`).
    pub fn runs_at(&self, now: Millis) -> bool {
        self.starts_at <= now && now < self.ends_at
    }
}
