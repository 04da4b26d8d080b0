//! [`Store`]: the in-memory index behind one lock, a [`Journal`] that makes
//! changes durable, and the inboxes. It implements every storage trait.
//!
//! A write takes the index's write lock, decides its changes from the
//! current state (so rules such as "at most `max_following`" hold under
//! concurrent writers), writes them to the journal, applies them to the
//! index, releases the lock, and only then waits for the journal to be
//! synced to disk: concurrent writers share one fsync, and readers never
//! wait behind a disk flush. A write is acknowledged only after that sync;
//! writers arriving while a sync runs are all covered by the next one.

use crate::change::{Change, EdgeKind, Job, Promotion, Record};
use crate::components::{JobLeases, MemoryActivity, MemoryHotAuthors};
use crate::error::StoreError;
use crate::inbox::{InboxRead, InboxSet, InboxStats};
use crate::state::State;
use crate::traits::*;
use async_trait::async_trait;
use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{Body, Item, ItemId, Key, Millis, Relation, UserId};

/// A position in the journal: what a write must wait for to be durable.
pub type Ticket = u64;

/// A stored value read back, with its stored size in bytes.
pub type Stored<T> = Option<(T, usize)>;

/// Where changes go to become durable.
pub trait Journal: Send + Sync + 'static {
    /// Writes one atomic batch (all of it or none); returns its ticket.
    fn write(&self, changes: &[Change]) -> Result<Ticket>;
    /// Returns once every batch up to `ticket` is durable. Concurrent callers
    /// share one sync (group commit).
    fn sync(&self, ticket: Ticket) -> Result<()>;
    /// Fails when the journal can no longer take writes.
    fn health(&self) -> Result<()> {
        Ok(())
    }
    /// Whether `sync` blocks (on the disk): the store then waits for it on
    /// the blocking pool, never on a runtime worker.
    fn blocks(&self) -> bool {
        true
    }
    /// Whether the journal keeps item records and reads them back
    /// ([`Journal::read_items`], [`Journal::read_bodies`]): the index then
    /// holds an item only until it is durable, and bounded caches hold the
    /// recent and hot records and bodies.
    fn keeps_items(&self) -> bool {
        false
    }
    /// Stored items without their bodies ([`stripped_body`]), with their
    /// stored size in bytes.
    fn read_items(&self, ids: &[ItemId]) -> Result<Vec<Stored<Arc<Item>>>> {
        Ok(vec![None; ids.len()])
    }
    /// The stored bodies of items, with their stored size in bytes.
    fn read_bodies(&self, ids: &[ItemId]) -> Result<Vec<Stored<Body>>> {
        Ok(vec![None; ids.len()])
    }
    /// Whether an item with this id is stored.
    fn has_item(&self, _id: ItemId) -> Result<bool> {
        Ok(false)
    }
    /// The stored item created by `author` with this idempotency key.
    fn idempotent(&self, _author: UserId, _key: &str) -> Result<Option<ItemId>> {
        Ok(None)
    }
}

/// The body of an item whose body the index does not hold (shared: one
/// allocation for all of them, recognised by address).
pub fn stripped_body() -> Body {
    static STRIPPED: std::sync::LazyLock<Body> = std::sync::LazyLock::new(Body::default);
    STRIPPED.clone()
}

/// Whether an item's body was left on disk.
pub fn is_stripped(body: &Body) -> bool {
    static STRIPPED: std::sync::LazyLock<Body> = std::sync::LazyLock::new(stripped_body);
    Arc::ptr_eq(body, &STRIPPED)
}

/// Weighs cached values by their stored size (plus the entry's own cost).
#[derive(Clone)]
struct StoredWeight;

impl<T> quick_cache::Weighter<ItemId, (T, usize)> for StoredWeight {
    fn weight(&self, _: &ItemId, v: &(T, usize)) -> u64 {
        v.1 as u64 + 64
    }
}

type BodyCache = quick_cache::sync::Cache<ItemId, (Body, usize), StoredWeight>;
type RecordCache = quick_cache::sync::Cache<ItemId, (Arc<Item>, usize), StoredWeight>;

/// Bytes cached by default (records and bodies).
pub const DEFAULT_BODY_CACHE: u64 = 64 << 20;

/// The caches of a journal that keeps items: a quarter of the bytes for
/// records (what pages filter on: small, read for every entry considered),
/// the rest for bodies (read only for the entries a page shows).
struct Caches {
    records: RecordCache,
    bodies: BodyCache,
}

impl Caches {
    fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        let (rec, body) = (bytes / 4, bytes - bytes / 4);
        // The estimates (~256 B a record, ~1 KB a body) only size the
        // caches' own indexes; the weights bound them.
        let n = |b: u64, each: u64| usize::try_from(b / each).unwrap_or(usize::MAX).max(16);
        Caches {
            records: RecordCache::with_weighter(n(rec, 256), rec, StoredWeight),
            bodies: BodyCache::with_weighter(n(body, 1024), body, StoredWeight),
        }
    }
}

/// The journal of the in-memory backend: nothing is durable.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoJournal;

impl Journal for NoJournal {
    fn write(&self, _: &[Change]) -> Result<Ticket> {
        Ok(0)
    }
    fn sync(&self, _: Ticket) -> Result<()> {
        Ok(())
    }
    fn blocks(&self) -> bool {
        false
    }
}

/// A backend: index + journal + inboxes.
pub struct Store<J> {
    /// Trait calls made (tests assert that a page costs a constant number).
    calls: AtomicU64,
    /// One lock for the index: reads are short and parallel; writes are short
    /// (the fsync happens after it is released).
    state: RwLock<State>,
    /// Shared with the blocking-pool tasks that wait for its syncs.
    journal: Arc<J>,
    inboxes: InboxSet,
    /// Set when a write failed to reach the disk after the index applied it:
    /// the index may then show changes that were never acknowledged nor made
    /// durable, so no further write is taken and [`Graph::health`] fails
    /// until a restart reloads the index from disk.
    failed: AtomicBool,
    /// The shared components, in process (see `components`).
    activity: MemoryActivity,
    hot: MemoryHotAuthors,
    leases: JobLeases,
    /// Recent and hot records and bodies, when the journal keeps items.
    caches: Option<Caches>,
}

impl Store<NoJournal> {
    /// The in-memory backend.
    pub fn in_memory(inbox_cap: usize) -> Self {
        Store::new(NoJournal, State::default(), inbox_cap)
    }
}

impl<J: Journal> Store<J> {
    pub fn new(journal: J, mut state: State, inbox_cap: usize) -> Self {
        state.items_elsewhere = journal.keeps_items();
        Self {
            calls: AtomicU64::new(0),
            state: RwLock::new(state),
            journal: Arc::new(journal),
            inboxes: InboxSet::new(inbox_cap),
            failed: AtomicBool::new(false),
            activity: MemoryActivity::default(),
            hot: MemoryHotAuthors::default(),
            leases: JobLeases::default(),
            caches: None,
        }
        .with_body_cache(DEFAULT_BODY_CACHE)
    }

    /// Sizes the caches of records and bodies (bytes in all; used only when
    /// the journal keeps items).
    pub fn with_body_cache(mut self, bytes: u64) -> Self {
        self.caches = self.journal.keeps_items().then(|| Caches::new(bytes));
        self
    }

    /// Bodies cached now (entries, bytes).
    pub fn body_cache_usage(&self) -> (u64, u64) {
        self.caches.as_ref().map_or((0, 0), |c| (c.bodies.len() as u64, c.bodies.weight()))
    }

    /// Records cached now (entries, bytes).
    pub fn record_cache_usage(&self) -> (u64, u64) {
        self.caches.as_ref().map_or((0, 0), |c| (c.records.len() as u64, c.records.weight()))
    }

    /// Once a write is durable, its items leave the index for the caches
    /// (the journal has them). An item replaced meanwhile by a later write
    /// stays: that write settles it. Runs under the write lock, so a reader
    /// finds each item in the index or in the cache, never in neither.
    fn settle(&self, written: &[Arc<Item>]) {
        let Some(caches) = &self.caches else { return };
        if written.is_empty() {
            return;
        }
        let mut st = self.state.write();
        for item in written {
            let id = item.id;
            match st.records.get(&id.0) {
                Some(Record::Item(i)) if Arc::ptr_eq(i, item) => {}
                _ => continue,
            }
            st.records.remove(&id.0);
            if let Some(k) = &item.idempotency_key
                && st.idempotency.get(&(item.author, k.clone())) == Some(&id)
            {
                st.idempotency.remove(&(item.author, k.clone()));
            }
            let body_size = serde_json::to_vec(&*item.body).map_or(0, |v| v.len());
            let record = Arc::new(Item { body: stripped_body(), ..(**item).clone() });
            let record_size = 128 + item.tags.iter().map(String::len).sum::<usize>() + 8 * item.mentions.len();
            caches.bodies.insert(id, (item.body.clone(), body_size));
            caches.records.insert(id, (record, record_size));
        }
    }

    /// An item as stored now: the index, the cache, else the journal (a
    /// blocking read: for write paths, which hold the write lock anyway;
    /// pages go through `records`). The body may be stripped.
    fn item_now(&self, st: &State, id: ItemId) -> Result<Option<Arc<Item>>> {
        if let Some(i) = st.item(id) {
            return Ok(Some(i.clone()));
        }
        let Some(caches) = &self.caches else { return Ok(None) };
        if let Some((i, _)) = caches.records.get(&id) {
            return Ok(Some(i));
        }
        let read = self.journal.read_items(&[id])?.pop().flatten();
        if let Some(v) = &read {
            caches.records.insert(id, v.clone());
        }
        Ok(read.map(|(i, _)| i))
    }

    /// Runs a journal read (cache misses read the disk) on the blocking pool.
    async fn read_off_runtime<T: Send + 'static>(
        &self,
        read: impl FnOnce(&J) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let journal = self.journal.clone();
        tokio::task::spawn_blocking(move || read(&journal))
            .await
            .map_err(|e| StoreError::Io(format!("the read task failed: {e}")))?
    }

    /// A stripped item's body: from the cache, else the journal (blocking).
    fn body_now(&self, id: ItemId) -> Result<Option<Body>> {
        if let Some(caches) = &self.caches
            && let Some((b, _)) = caches.bodies.get(&id)
        {
            return Ok(Some(b));
        }
        let read = self.journal.read_bodies(&[id])?.pop().flatten();
        if let (Some(caches), Some(v)) = (&self.caches, &read) {
            caches.bodies.insert(id, v.clone());
        }
        Ok(read.map(|(b, _)| b))
    }

    /// A read view of the index (benchmarks and tests).
    pub fn state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read()
    }

    /// How many storage calls were made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn tick(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    pub fn journal(&self) -> &J {
        &self.journal
    }

    fn check_failed(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::Io(
                "an earlier write failed to reach the disk; restart the process to reload from disk".into(),
            ));
        }
        Ok(())
    }

    /// Waits for `ticket` to be durable, on the blocking pool when the
    /// journal blocks; a failure marks the store failed.
    async fn sync(&self, ticket: Ticket) -> Result<()> {
        let res = if self.journal.blocks() {
            let journal = self.journal.clone();
            match tokio::task::spawn_blocking(move || journal.sync(ticket)).await {
                Ok(r) => r,
                Err(e) => Err(StoreError::Io(format!("the sync task failed: {e}"))),
            }
        } else {
            self.journal.sync(ticket)
        };
        res.inspect_err(|e| {
            tracing::error!(error = %e, "a write failed to reach the disk: taking no more writes until a restart");
            self.failed.store(true, Ordering::Release);
        })
    }

    /// Decides the changes of a write under the index lock, journals and
    /// applies them, releases the lock, then waits until they are durable.
    async fn commit<T: Send>(&self, decide: impl FnOnce(&State) -> Result<(T, Vec<Change>)> + Send) -> Result<T> {
        self.check_failed()?;
        let (out, ticket, written) = {
            let mut st = self.state.write();
            let (out, changes) = decide(&st)?;
            if changes.is_empty() {
                return Ok(out);
            }
            let ticket = self.journal.write(&changes)?;
            let written: Vec<Arc<Item>> = changes
                .iter()
                .filter_map(|c| match c {
                    Change::PutItem(i) | Change::UpdateItem(i) => Some(i.clone()),
                    _ => None,
                })
                .collect();
            for c in changes {
                st.apply(c);
            }
            (out, ticket, written)
        };
        self.sync(ticket).await?;
        self.settle(&written);
        Ok(out)
    }
}

#[async_trait]
impl<J: Journal> Items for Store<J> {
    async fn create_item(&self, item: Item, fan_out: bool, now: Millis) -> Result<CreateOutcome> {
        self.tick();
        self.commit(|st| {
            if let Some(k) = &item.idempotency_key {
                // Pending keys are in the index; durable ones, with a journal
                // that keeps items, only in the journal.
                let known = match st.idempotency.get(&(item.author, k.clone())) {
                    Some(id) => Some(*id),
                    None if st.items_elsewhere => self.journal.idempotent(item.author, k)?,
                    None => None,
                };
                if let Some(existing) = known.map(|id| self.item_now(st, id)).transpose()?.flatten() {
                    return Ok((CreateOutcome::Existing(existing), vec![]));
                }
            }
            if let Some(orig) = item.repost_of
                && let Some(id) = st.repost_by.get(&(item.author, orig))
                && let Some(existing) = self.item_now(st, *id)?
            {
                return Ok((CreateOutcome::AlreadyReposted(existing), vec![]));
            }
            if st.records.contains_key(&item.id.0) || (st.items_elsewhere && self.journal.has_item(item.id)?) {
                return Err(StoreError::IdTaken(item.id.0));
            }
            let item = Arc::new(item);
            let mut changes = vec![Change::PutItem(item.clone())];
            if fan_out {
                changes.push(Change::PutJob(Job { key: item.id.0, author: item.author, cursor: None, created: now }));
            }
            Ok((CreateOutcome::Created(item), changes))
        })
        .await
    }

    async fn update_item(&self, id: ItemId, change: &ItemChange) -> Result<Option<Arc<Item>>> {
        self.tick();
        self.commit(|st| match self.item_now(st, id)? {
            Some(i) if !i.deleted => {
                let mut new = change.apply(&i);
                if is_stripped(&new.body) {
                    // The change keeps the body, which only the journal has:
                    // a rare write (a visibility change or a delete) reads it
                    // in place, so the record written is whole.
                    new.body = self.body_now(id)?.unwrap_or_default();
                }
                let new = Arc::new(new);
                Ok((Some(new.clone()), vec![Change::UpdateItem(new)]))
            }
            _ => Ok((None, vec![])),
        })
        .await
    }

    async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
        self.tick();
        let mut out: Vec<Option<Record>> = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        {
            let st = self.state.read();
            for (n, k) in keys.iter().enumerate() {
                let found = match (st.records.get(k), &self.caches) {
                    (Some(r), _) => Some(r.clone()),
                    (None, Some(c)) => c.records.get(&ItemId(*k)).map(|(i, _)| Record::Item(i)),
                    (None, None) => None,
                };
                if found.is_none() && self.caches.is_some() {
                    missing.push((n, ItemId(*k)));
                }
                out.push(found);
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let want: Vec<ItemId> = missing.iter().map(|(_, id)| *id).collect();
        let read = self.read_off_runtime(move |j| j.read_items(&want)).await?;
        for ((n, id), got) in missing.into_iter().zip(read) {
            if let (Some(c), Some(v)) = (&self.caches, &got) {
                c.records.insert(id, v.clone());
            }
            out[n] = got.map(|(i, _)| Record::Item(i));
        }
        Ok(out)
    }

    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
        self.tick();
        let mut out: Vec<Option<Body>> = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        {
            let st = self.state.read();
            for (n, id) in ids.iter().enumerate() {
                match (st.item(*id), &self.caches) {
                    (Some(i), _) if !is_stripped(&i.body) => out.push(Some(i.body.clone())),
                    (_, Some(c)) => match c.bodies.get(id) {
                        Some((b, _)) => out.push(Some(b)),
                        None => {
                            missing.push((n, *id));
                            out.push(None);
                        }
                    },
                    (i, None) => out.push(i.map(|i| i.body.clone())),
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let want: Vec<ItemId> = missing.iter().map(|(_, id)| *id).collect();
        let read = self.read_off_runtime(move |j| j.read_bodies(&want)).await?;
        for ((n, id), got) in missing.into_iter().zip(read) {
            if let (Some(c), Some(v)) = (&self.caches, &got) {
                c.bodies.insert(id, v.clone());
            }
            out[n] = got.map(|(b, _)| b);
        }
        Ok(out)
    }

    async fn outbox_merge(
        &self,
        authors: &[UserId],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        self.tick();
        let st = self.state.read();
        let lists: Vec<&[Key]> = authors.iter().filter_map(|a| st.user(*a)).map(|u| u.outbox.as_slice()).collect();
        Ok(merge_sorted(&lists, range, dir, limit))
    }

    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>> {
        self.tick();
        let st = self.state.read();
        let mut set: Option<HashSet<UserId>> = None;
        Ok(originals
            .iter()
            .map(|o| {
                let all = st.reposts.get(o).map(Vec::as_slice).unwrap_or(&[]);
                if all.len() <= reposters.len() {
                    let set = set.get_or_insert_with(|| reposters.iter().copied().collect());
                    all.iter().filter(|(u, _)| set.contains(u)).copied().collect()
                } else {
                    reposters.iter().filter_map(|r| st.repost_by.get(&(*r, *o)).map(|id| (*r, *id))).collect()
                }
            })
            .collect())
    }

    async fn hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        self.tick();
        let st = self.state.read();
        Ok(ids
            .iter()
            .map(|id| {
                let counts = ItemCounts {
                    replies: st.replies.get(id).copied().unwrap_or(0),
                    reposts: st.reposts.get(id).map_or(0, |v| v.len() as u64),
                    reactions: st.reactions.counts(*id),
                };
                let marks = viewer.map(|v| ViewerMarks {
                    reposted: st.repost_by.contains_key(&(v, *id)),
                    reactions: st.reactions.of_user(*id, v),
                });
                (counts, marks)
            })
            .collect())
    }

    async fn set_reaction(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> Result<bool> {
        self.tick();
        self.check_failed()?;
        // A read lock of the state: reactions to one item from many users
        // proceed in parallel; only the pair (item, user) is locked while its
        // change is journaled and applied.
        let ticket = {
            let st = self.state.read();
            let mut pair = st.reactions.lock(item, user);
            if pair.has(kind) == on {
                return Ok(false);
            }
            let ticket = self.journal.write(&[Change::SetReaction { item, user, kind: kind.to_owned(), on }])?;
            st.reactions.set_locked(&mut pair, kind, on);
            ticket
        };
        self.sync(ticket).await?;
        Ok(true)
    }

    async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.tick();
        self.commit(|_| Ok(((), vec![Change::PutPromotion(p)]))).await
    }

    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        self.tick();
        let st = self.state.read();
        Ok(st.promotions.values().filter(|p| p.starts_at <= now && now < p.ends_at).cloned().collect())
    }

    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.tick();
        self.commit(|_| Ok(((), vec![Change::PutInsert { key, user, item }]))).await
    }

    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        self.tick();
        let st = self.state.read();
        Ok(st.user(user).map(|u| merge_sorted(&[u.inserts.as_slice()], range, dir, limit)).unwrap_or_default())
    }

    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
        self.tick();
        let st = self.state.read();
        Ok(items.iter().map(|i| st.first_insert.get(&(user, *i)).copied()).collect())
    }
}

#[async_trait]
impl<J: Journal> Graph for Store<J> {
    async fn follow_many(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
    ) -> Result<Vec<FollowStatus>> {
        self.tick();
        self.commit(|st| {
            let mut count = st.user(user).map_or(0, |u| u.following.len());
            let mut changes = Vec::new();
            let mut statuses = Vec::with_capacity(targets.len());
            let mut now_following: HashSet<UserId> = HashSet::new();
            for &t in targets {
                let status = if let Some(since) = st.follow_since(user, t) {
                    FollowStatus::Already(since)
                } else if now_following.contains(&t) {
                    FollowStatus::Already(at)
                } else if st.relation(user, t).blocked_either_way() {
                    FollowStatus::Blocked
                } else if count >= max_following {
                    FollowStatus::Limit
                } else {
                    count += 1;
                    now_following.insert(t);
                    changes.push(Change::PutEdge { kind: EdgeKind::Follow, from: user, to: t, since: at });
                    FollowStatus::Followed(at)
                };
                statuses.push(status);
            }
            Ok((statuses, changes))
        })
        .await
    }

    async fn unfollow(&self, user: UserId, target: UserId) -> Result<bool> {
        self.tick();
        self.commit(|st| {
            if st.has_edge(EdgeKind::Follow, user, target) {
                Ok((true, vec![Change::DelEdge { kind: EdgeKind::Follow, from: user, to: target }]))
            } else {
                Ok((false, vec![]))
            }
        })
        .await
    }

    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.tick();
        self.commit(|st| {
            let mut changes = Vec::new();
            if on {
                if !st.has_edge(EdgeKind::Block, user, target) {
                    changes.push(Change::PutEdge { kind: EdgeKind::Block, from: user, to: target, since: at });
                }
                for (a, b) in [(user, target), (target, user)] {
                    if st.has_edge(EdgeKind::Follow, a, b) {
                        changes.push(Change::DelEdge { kind: EdgeKind::Follow, from: a, to: b });
                    }
                }
            } else if st.has_edge(EdgeKind::Block, user, target) {
                changes.push(Change::DelEdge { kind: EdgeKind::Block, from: user, to: target });
            }
            Ok(((), changes))
        })
        .await
    }

    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.tick();
        self.commit(|st| {
            let has = st.has_edge(EdgeKind::Mute, user, target);
            let changes = match (on, has) {
                (true, false) => vec![Change::PutEdge { kind: EdgeKind::Mute, from: user, to: target, since: at }],
                (false, true) => vec![Change::DelEdge { kind: EdgeKind::Mute, from: user, to: target }],
                _ => vec![],
            };
            Ok(((), changes))
        })
        .await
    }

    async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
        self.tick();
        let st = self.state.read();
        Ok(st.user(user).map(|u| u.following.iter().map(|e| e.0).collect()).unwrap_or_default())
    }

    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>> {
        self.tick();
        let st = self.state.read();
        let Some(u) = st.user(user) else { return Ok(vec![]) };
        let set = match which {
            ListKind::Following => &u.following_by_time,
            ListKind::Followers => &u.followers,
        };
        Ok(set.iter_before_rev(after.as_ref()).take(limit).map(|&(since, id)| (id, since)).collect())
    }

    async fn followers_chunk(
        &self,
        user: UserId,
        after: Option<FollowerPos>,
        limit: usize,
    ) -> Result<Vec<FollowerPos>> {
        self.tick();
        let st = self.state.read();
        let Some(u) = st.user(user) else { return Ok(vec![]) };
        Ok(u.followers.iter_after(after.as_ref()).take(limit).copied().collect())
    }

    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        self.tick();
        let st = self.state.read();
        Ok(others.iter().map(|o| st.relation(user, *o)).collect())
    }

    async fn counts(&self, user: UserId) -> Result<UserCounts> {
        self.tick();
        let st = self.state.read();
        Ok(st
            .user(user)
            .map(|u| UserCounts {
                following: u.following.len() as u64,
                followers: u.followers.len() as u64,
                items: u.items,
            })
            .unwrap_or_default())
    }

    async fn health(&self) -> Result<()> {
        self.check_failed()?;
        self.journal.health()
    }

    async fn stats(&self) -> Result<StoreStats> {
        self.tick();
        self.health().await?;
        let st = self.state.read();
        Ok(StoreStats {
            users: st.users.len() as u64,
            items: st.items_live,
            follows: st.follows,
            pending_jobs: st.jobs.len() as u64,
            oldest_job: st.jobs.values().map(|j| j.created).min(),
            max_key: st.max_key,
        })
    }
}

#[async_trait]
impl<J: Journal> Jobs for Store<J> {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        self.tick();
        let st = self.state.read();
        Ok(st.jobs.values().take(limit).cloned().collect())
    }

    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        self.tick();
        let st = self.state.read();
        let until = Millis(now.0.saturating_add(lease_ms));
        Ok(st.jobs.values().filter(|j| self.leases.try_take(j.key, worker, now, until)).take(limit).cloned().collect())
    }

    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        self.tick();
        let recorded = self
            .commit(|st| {
                let mut recorded = Vec::with_capacity(progress.len());
                let mut changes = Vec::new();
                for p in progress {
                    let key = match *p {
                        JobProgress::Checkpoint(k, _) | JobProgress::Complete(k) => k,
                    };
                    let change = match (st.jobs.get(&key), *p) {
                        (Some(_), _) if !self.leases.may_advance(key, worker) => None,
                        // A checkpoint never moves back.
                        (Some(j), JobProgress::Checkpoint(_, pos)) if j.cursor.is_none_or(|c| c < pos) => {
                            Some(Change::PutJob(Job { cursor: Some(pos), ..j.clone() }))
                        }
                        (Some(_), JobProgress::Complete(_)) => Some(Change::DelJob(key)),
                        _ => None,
                    };
                    recorded.push(change.is_some());
                    changes.extend(change);
                }
                Ok((recorded, changes))
            })
            .await?;
        for p in progress {
            if let JobProgress::Complete(k) = p {
                self.leases.release(*k);
            }
        }
        Ok(recorded)
    }
}

#[async_trait]
impl<J: Journal> Activity for Store<J> {
    async fn touch(&self, user: UserId, at: Millis) -> Result<()> {
        self.activity.record(user, at);
        Ok(())
    }
    async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>> {
        self.tick();
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
        self.tick();
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
        self.tick();
        Ok(self.inboxes.deliver(key, users))
    }
    async fn read_inbox(
        &self,
        user: UserId,
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Option<InboxRead>> {
        self.tick();
        Ok(self.inboxes.read(user, range, dir, limit))
    }
    async fn begin_rebuild(&self, user: UserId) -> Result<()> {
        self.tick();
        self.inboxes.begin_rebuild(user);
        Ok(())
    }
    async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.tick();
        self.inboxes.finish_rebuild(user, keys, floor);
        Ok(())
    }
    async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.tick();
        self.inboxes.merge(user, keys, floor);
        Ok(())
    }
    async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>> {
        self.tick();
        Ok(self.inboxes.floor(user))
    }
    async fn drop_inbox(&self, user: UserId) -> Result<()> {
        self.tick();
        self.inboxes.drop_inbox(user);
        Ok(())
    }
    async fn inbox_stats(&self) -> Result<InboxStats> {
        self.tick();
        Ok(self.inboxes.stats())
    }
    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
        self.tick();
        Ok(self.inboxes.export())
    }
    async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()> {
        self.tick();
        self.inboxes.import(user, floor, keys);
        Ok(())
    }
}
