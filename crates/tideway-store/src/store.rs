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
//!
//! With a lazy journal (the embedded store) the index loads what a read or
//! a write needs on first use ([`State`]'s module docs): every read runs
//! under the read lock, reports the units it found missing, and runs again
//! once [`Store::load`] has installed them; every write does the same with
//! its decision and with the counters its changes touch.

use crate::blocks::SortedBlocks;
use crate::change::{Change, EdgeKind, Job, Promotion, Record};
use crate::components::{JobLeases, MemoryActivity, MemoryHotAuthors, MemoryHub};
use crate::error::{Engine, StoreError};
use crate::inbox::{InboxRead, InboxSet, InboxStats};
use crate::rules::{self, CreateDecision, CreateFacts, FollowFact, JobState, ProgressEffect};
use crate::state::State;
use crate::state::{Applied, FOLLOWERS_LOADED_WHOLE, Unit, UnitData};
use crate::traits::*;
use async_trait::async_trait;
use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{Body, Item, ItemId, Key, Millis, Relation, UserId};

pub use crate::state::Ticket;

/// A stored value read back, with its stored size in bytes.
pub type Stored<T> = Option<(T, usize)>;

/// Where changes go to become durable. Every method is required: what a
/// journal that keeps its data to read back must also provide is the
/// separate [`Disk`] trait, which [`Journal::disk`] hands out.
pub trait Journal: Send + Sync + 'static {
    /// Writes one atomic batch (all of it or none); returns its ticket.
    fn write(&self, changes: &[Change]) -> Result<Ticket>;
    /// Returns once every batch up to `ticket` is durable. Concurrent callers
    /// share one sync (group commit).
    fn sync(&self, ticket: Ticket) -> Result<()>;
    /// Fails when the journal can no longer take writes.
    fn health(&self) -> Result<()>;
    /// Whether `sync` blocks (on the disk): the store then waits for it on
    /// the blocking pool, never on a runtime worker.
    fn blocks(&self) -> bool;
    /// Every batch up to this ticket is on disk, where [`Disk::load_units`]
    /// reads.
    fn durable(&self) -> Ticket;
    /// What the journal keeps to read back. `Some` makes the index lazy:
    /// item records and bodies are read back through bounded caches, the
    /// index holds an item only until it is durable, and every other unit is
    /// loaded on first use. `None` (the memory backend): the index keeps
    /// everything and is the only copy.
    fn disk(&self) -> Option<&dyn Disk>;
}

/// What a journal that keeps everything reads back (the embedded store's
/// keyspaces): the lazy index's units and what pages read past the caches.
pub trait Disk: Send + Sync {
    /// Reads units of the index.
    fn load_units(&self, units: &[Unit]) -> Result<Vec<UnitData>>;
    /// A page of a user's followers by (since, id): ascending after `from`,
    /// or descending before it (for sets too big to load whole).
    fn followers_range(
        &self,
        user: UserId,
        from: Option<FollowerPos>,
        ascending: bool,
        limit: usize,
    ) -> Result<Vec<FollowerPos>>;
    /// Stored records (items without their bodies, see [`stripped_body`];
    /// insertions), with their stored size in bytes.
    fn read_records(&self, keys: &[Key]) -> Result<Vec<Stored<Record>>>;
    /// The stored bodies of items, with their stored size in bytes.
    fn read_bodies(&self, ids: &[ItemId]) -> Result<Vec<Stored<Body>>>;
    /// Whether an item with this id is stored.
    fn has_item(&self, id: ItemId) -> Result<bool>;
    /// The stored item created by `author` with this idempotency key.
    fn idempotent(&self, author: UserId, key: &str) -> Result<Option<ItemId>>;
}

/// The journal's [`Disk`]; only a lazy store asks (so never the memory
/// backend's).
fn disk<J: Journal>(journal: &J) -> Result<&dyn Disk> {
    journal
        .disk()
        .ok_or_else(|| StoreError::unavailable_because(Engine::Embedded, "this journal keeps nothing to read back"))
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

impl<K, T> quick_cache::Weighter<K, (T, usize)> for StoredWeight {
    fn weight(&self, _: &K, v: &(T, usize)) -> u64 {
        v.1 as u64 + 64
    }
}

type BodyCache = quick_cache::sync::Cache<ItemId, (Body, usize), StoredWeight>;
type RecordCache = quick_cache::sync::Cache<Key, (Record, usize), StoredWeight>;

/// Bytes cached by default (records and bodies).
pub const DEFAULT_BODY_CACHE: u64 = 64 << 20;

/// The caches of a lazy journal: a quarter of the bytes for
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
    fn health(&self) -> Result<()> {
        Ok(())
    }
    fn blocks(&self) -> bool {
        false
    }
    fn durable(&self) -> Ticket {
        Ticket::MAX
    }
    fn disk(&self) -> Option<&dyn Disk> {
        None
    }
}

/// A backend: index + journal + inboxes.
pub struct Store<J: Journal> {
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
    hub: MemoryHub,
    /// Recent and hot records and bodies, when the journal is lazy.
    caches: Option<Caches>,
    /// Units loaded from a lazy journal, and loads that had to read again
    /// because a write skipped their unit meanwhile.
    loads: AtomicU64,
    load_retries: AtomicU64,
    /// The last ticket written, and when fan-out progress was last made
    /// durable (see [`PROGRESS_SYNC`]).
    last_ticket: AtomicU64,
    progress_synced: parking_lot::Mutex<Option<std::time::Instant>>,
}

/// How often fan-out progress is made durable. Progress only saves work: a
/// crash loses every inbox of this process anyway, and a chunk delivered
/// again is ignored by the inboxes that hold it; so a worker step waits for
/// the disk at most this often, and a crash repeats at most this much
/// delivery. (A write that must be durable syncs everything before it.)
pub const PROGRESS_SYNC: std::time::Duration = std::time::Duration::from_millis(50);

/// What a decided write did: nothing, or a batch written at a ticket.
enum Committed<T> {
    Nothing(T),
    Written { out: T, ticket: Ticket, written: Vec<Arc<Item>> },
}

impl<J: Journal> Drop for Store<J> {
    fn drop(&mut self) {
        // Progress written without waiting for the disk (fan-out
        // checkpoints) is made durable when the store closes.
        if !self.failed.load(Ordering::Acquire)
            && let Err(e) = self.journal.sync(self.last_ticket.load(Ordering::Acquire))
        {
            tracing::warn!(error = %e, "fan-out progress could not be made durable at close; it will be repeated");
        }
    }
}

impl Store<NoJournal> {
    /// The in-memory backend.
    pub fn in_memory(inbox_cap: usize) -> Self {
        Store::new(NoJournal, State::eager(), inbox_cap)
    }
}

/// The items a batch of changes writes (they move to the caches once durable).
fn written_items(changes: &[Change]) -> Vec<Arc<Item>> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::PutItem(i) | Change::UpdateItem(i) => Some(i.clone()),
            _ => None,
        })
        .collect()
}

impl<J: Journal> Store<J> {
    pub fn new(journal: J, mut state: State, inbox_cap: usize) -> Self {
        state.lazy = journal.disk().is_some();
        Self {
            state: RwLock::new(state),
            journal: Arc::new(journal),
            inboxes: InboxSet::new(inbox_cap),
            failed: AtomicBool::new(false),
            activity: MemoryActivity::default(),
            hot: MemoryHotAuthors::default(),
            leases: JobLeases::default(),
            hub: MemoryHub::default(),
            caches: None,
            loads: AtomicU64::new(0),
            load_retries: AtomicU64::new(0),
            last_ticket: AtomicU64::new(0),
            progress_synced: parking_lot::Mutex::new(None),
        }
        .with_body_cache(DEFAULT_BODY_CACHE)
    }

    /// Sizes the caches of records and bodies (bytes in all; used only when
    /// the journal is lazy).
    pub fn with_body_cache(mut self, bytes: u64) -> Self {
        self.caches = self.journal.disk().is_some().then(|| Caches::new(bytes));
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

    /// Units loaded from the journal so far, and loads that read again.
    pub fn load_counts(&self) -> (u64, u64) {
        (self.loads.load(Ordering::Relaxed), self.load_retries.load(Ordering::Relaxed))
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
            caches.records.insert(id.0, (Record::Item(record), record_size));
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
        if let Some((Record::Item(i), _)) = caches.records.get(&id.0) {
            return Ok(Some(i));
        }
        let read = disk(&*self.journal)?.read_records(&[id.0])?.pop().flatten();
        if let Some(v) = &read {
            caches.records.insert(id.0, v.clone());
        }
        Ok(match read {
            Some((Record::Item(i), _)) => Some(i),
            _ => None,
        })
    }

    /// Runs a journal read (cache misses read the disk) on the blocking pool.
    async fn read_off_runtime<T: Send + 'static>(
        &self,
        read: impl FnOnce(&J) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let journal = self.journal.clone();
        tokio::task::spawn_blocking(move || read(&journal))
            .await
            .map_err(|e| StoreError::unavailable(Engine::Embedded, e))?
    }

    /// A stripped item's body: from the cache, else the journal (blocking).
    fn body_now(&self, id: ItemId) -> Result<Option<Body>> {
        if let Some(caches) = &self.caches
            && let Some((b, _)) = caches.bodies.get(&id)
        {
            return Ok(Some(b));
        }
        let read = disk(&*self.journal)?.read_bodies(&[id])?.pop().flatten();
        if let (Some(caches), Some(v)) = (&self.caches, &read) {
            caches.bodies.insert(id, v.clone());
        }
        Ok(read.map(|(b, _)| b))
    }

    /// A read view of the index (benchmarks and tests).
    pub fn state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read()
    }

    /// Makes every write durable and drops every loaded unit (a lazy
    /// journal). Tests run it before every call (through
    /// [`Counted::before_each`](crate::Counted::before_each)) so each call
    /// loads what it reads from disk, as the first calls after a start do.
    /// Slow, and blocking: never for serving.
    pub fn evict_all(&self) {
        let mut st = self.state.write();
        if let Err(e) = self.journal.sync(self.last_ticket.load(Ordering::Acquire)) {
            tracing::warn!(error = %e, "could not sync before evicting; units stay loaded");
            return;
        }
        st.evict_all();
    }

    pub fn journal(&self) -> &J {
        &self.journal
    }

    fn check_failed(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(StoreError::unavailable_because(
                Engine::Embedded,
                "an earlier write failed to reach the disk; restart the process to reload from disk",
            ));
        }
        Ok(())
    }

    /// Marks the store failed: the index may hold a change the disk never got.
    fn fail(&self, e: &StoreError) {
        tracing::error!(error = %e, "a write failed to reach the disk: taking no more writes until a restart");
        self.failed.store(true, Ordering::Release);
    }

    /// Waits for `ticket` to be durable, on the blocking pool when the
    /// journal blocks; a failure marks the store failed.
    async fn sync(&self, ticket: Ticket) -> Result<()> {
        let res = if self.journal.blocks() {
            let journal = self.journal.clone();
            match tokio::task::spawn_blocking(move || journal.sync(ticket)).await {
                Ok(r) => r,
                Err(e) => Err(StoreError::unavailable(Engine::Embedded, e)),
            }
        } else {
            self.journal.sync(ticket)
        };
        res.inspect_err(|e| self.fail(e))
    }

    /// Loads units from a lazy journal into the index. The disk is read
    /// outside the lock; a unit is installed only if no write skipped it
    /// after the durable watermark the read started from (else the load
    /// waits for that write and reads again), so a loaded unit is never
    /// missing a write (see `State`).
    async fn load(&self, mut units: Vec<Unit>) -> Result<()> {
        units.sort_unstable();
        units.dedup();
        loop {
            let watermark = self.journal.durable();
            let want = units.clone();
            let data = self.read_off_runtime(move |j| disk(j)?.load_units(&want)).await?;
            let wait = {
                let mut st = self.state.write();
                let mut retry = Vec::new();
                let mut wait = 0;
                for (unit, data) in units.iter().zip(data) {
                    match st.skipped_since(*unit, watermark) {
                        Some(t) if !st.loaded(*unit) => {
                            retry.push(*unit);
                            wait = wait.max(t);
                        }
                        _ => st.install(*unit, data),
                    }
                }
                self.loads.fetch_add((units.len() - retry.len()) as u64, Ordering::Relaxed);
                if retry.is_empty() {
                    return Ok(());
                }
                units = retry;
                wait
            };
            self.load_retries.fetch_add(1, Ordering::Relaxed);
            self.sync(wait).await?;
        }
    }

    /// Runs a read under the index's read lock. `read` notes the units it
    /// found missing (a lazy index); they are loaded and it runs again.
    async fn read<T>(&self, read: impl Fn(&State, &mut Vec<Unit>) -> T) -> Result<T> {
        loop {
            let mut need = Vec::new();
            let out = {
                let st = self.state.read();
                read(&st, &mut need)
            };
            if need.is_empty() {
                return Ok(out);
            }
            self.load(need).await?;
        }
    }

    /// Reads a user's followers from memory, loading them first unless they
    /// are too many to hold ([`FOLLOWERS_LOADED_WHOLE`]): `None` then, and
    /// the caller reads the page it needs from the journal.
    async fn followers_in_memory<T>(
        &self,
        user: UserId,
        read: impl Fn(&SortedBlocks<FollowerPos>) -> T,
    ) -> Result<Option<T>> {
        self.read(|st, need| match st.user_for(Unit::Followers(user)) {
            Ok(u) => Some(u.map_or_else(|| read(&SortedBlocks::default()), |u| read(&u.followers))),
            Err(unit) => {
                let head = st.user_or_need(Unit::Head(user), need)?;
                if head.head.followers <= FOLLOWERS_LOADED_WHOLE {
                    need.push(unit);
                }
                None
            }
        })
        .await
    }

    /// Loads, in one batch, the followers of the authors of claimed jobs
    /// (their chunks are read next) where they are not loaded and not too
    /// many to load whole; their counters first, to know.
    async fn prefetch_followers(&self, jobs: &[Job]) -> Result<()> {
        let missing = |st: &State, unit: fn(UserId) -> Unit| -> Vec<Unit> {
            jobs.iter().map(|j| unit(j.author)).filter(|u| !st.loaded(*u)).collect()
        };
        let heads = missing(&self.state.read(), Unit::Head);
        if !heads.is_empty() {
            self.load(heads).await?;
        }
        let small: Vec<Unit> = {
            let st = self.state.read();
            missing(&st, Unit::Followers)
                .into_iter()
                .filter(|u| {
                    let Unit::Followers(a) = u else { return false };
                    st.user_for(Unit::Head(*a))
                        .ok()
                        .flatten()
                        .is_some_and(|s| s.head.followers <= FOLLOWERS_LOADED_WHOLE)
                })
                .collect()
        };
        if !small.is_empty() {
            self.load(small).await?;
        }
        Ok(())
    }

    /// Decides the changes of a write under the index lock, applies and
    /// journals them, releases the lock, then waits until they are durable.
    /// `decide` notes the units it found missing; they, and the counters the
    /// changes touch, are loaded first (and it decides again).
    async fn commit<T: Send>(
        &self,
        decide: impl Fn(&State, &mut Vec<Unit>) -> Result<(T, Vec<Change>)> + Send + Sync,
    ) -> Result<T> {
        match self.write(decide).await? {
            Committed::Nothing(out) => Ok(out),
            Committed::Written { out, ticket, written } => {
                self.sync(ticket).await?;
                self.settle(&written);
                Ok(out)
            }
        }
    }

    /// The first half of [`Store::commit`]: decided, applied and journaled,
    /// not yet waited for.
    async fn write<T: Send>(
        &self,
        decide: impl Fn(&State, &mut Vec<Unit>) -> Result<(T, Vec<Change>)> + Send + Sync,
    ) -> Result<Committed<T>> {
        self.check_failed()?;
        loop {
            let need = {
                let mut st = self.state.write();
                let mut need = Vec::new();
                let decided = decide(&st, &mut need);
                if need.is_empty() {
                    let (out, changes) = decided?;
                    if changes.is_empty() {
                        return Ok(Committed::Nothing(out));
                    }
                    st.required(&changes, &mut need);
                    if need.is_empty() {
                        let written = written_items(&changes);
                        let mut ap = Applied::default();
                        for c in &changes {
                            st.apply(c.clone(), &mut ap);
                        }
                        let mut all = changes;
                        all.extend(st.derived(&ap));
                        // The index already has the batch: a journal that
                        // cannot take it leaves the store failed.
                        let ticket = self.journal.write(&all).inspect_err(|e| self.fail(e))?;
                        self.last_ticket.fetch_max(ticket, Ordering::AcqRel);
                        st.note_skips(&ap.skipped, ticket, self.journal.durable());
                        return Ok(Committed::Written { out, ticket, written });
                    }
                }
                need
            };
            self.load(need).await?;
        }
    }
}

/// Answered in process (the memory backend, the embedded store).
impl<J: Journal> crate::Profiled for Store<J> {
    fn profile(&self) -> crate::Profile {
        crate::Profile::IN_PROCESS
    }
}

#[async_trait]
impl<J: Journal> Items for Store<J> {
    async fn create_item(&self, item: Item, fan_out: bool, now: Millis) -> Result<CreateOutcome> {
        self.commit(|st, need| {
            let mut facts = CreateFacts::default();
            if let Some(k) = &item.idempotency_key {
                // Pending keys are in the index; durable ones, with a lazy
                // journal, only in the journal.
                let known = match st.idempotency.get(&(item.author, k.clone())) {
                    Some(id) => Some(*id),
                    None if st.lazy => disk(&*self.journal)?.idempotent(item.author, k)?,
                    None => None,
                };
                facts.by_idempotency_key = known.map(|id| self.item_now(st, id)).transpose()?.flatten();
            }
            if facts.by_idempotency_key.is_none()
                && let Some(orig) = item.repost_of
                && st.item_or_need(orig, need)
                && let Some(id) = st.repost_by.get(&(item.author, orig))
            {
                facts.earlier_repost = self.item_now(st, *id)?;
            }
            if facts.by_idempotency_key.is_none() && facts.earlier_repost.is_none() {
                facts.id_taken =
                    st.records.contains_key(&item.id.0) || (st.lazy && disk(&*self.journal)?.has_item(item.id)?);
            }
            match rules::create(facts) {
                CreateDecision::Resolved(outcome) => return Ok((outcome, vec![])),
                CreateDecision::IdTaken => return Err(StoreError::IdTaken(item.id.0)),
                CreateDecision::Store => {}
            }
            let item = Arc::new(item.clone());
            let mut changes = vec![Change::PutItem(item.clone())];
            if fan_out {
                changes.push(Change::PutJob(Job { key: item.id.0, author: item.author, cursor: None, created: now }));
            }
            Ok((CreateOutcome::Created(item), changes))
        })
        .await
    }

    async fn update_item(&self, id: ItemId, change: &ItemChange) -> Result<Option<Arc<Item>>> {
        self.commit(|st, _| match self.item_now(st, id)? {
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
        let mut out: Vec<Option<Record>> = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        {
            let st = self.state.read();
            for (n, k) in keys.iter().enumerate() {
                let found = match (st.records.get(k), &self.caches) {
                    (Some(r), _) => Some(r.clone()),
                    (None, Some(c)) => c.records.get(k).map(|(r, _)| r),
                    (None, None) => None,
                };
                if found.is_none() && self.caches.is_some() {
                    missing.push((n, *k));
                }
                out.push(found);
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let want: Vec<Key> = missing.iter().map(|(_, k)| *k).collect();
        let read = self.read_off_runtime(move |j| disk(j)?.read_records(&want)).await?;
        for ((n, key), got) in missing.into_iter().zip(read) {
            if let (Some(c), Some(v)) = (&self.caches, &got) {
                c.records.insert(key, v.clone());
            }
            out[n] = got.map(|(r, _)| r);
        }
        Ok(out)
    }

    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
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
        let read = self.read_off_runtime(move |j| disk(j)?.read_bodies(&want)).await?;
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
        self.read(|st, need| {
            let lists: Vec<&[Key]> = authors
                .iter()
                .filter_map(|a| st.user_or_need(Unit::Outbox(*a), need))
                .map(|u| u.outbox.as_slice())
                .collect();
            if need.is_empty() { merge_sorted(&lists, range, dir, limit) } else { Vec::new() }
        })
        .await
    }

    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>> {
        self.read(|st, need| {
            let mut set: Option<HashSet<UserId>> = None;
            originals
                .iter()
                .map(|o| {
                    if !st.item_or_need(*o, need) {
                        return Vec::new();
                    }
                    let all = st.reposts.get(o).map(Vec::as_slice).unwrap_or(&[]);
                    if all.len() <= reposters.len() {
                        let set = set.get_or_insert_with(|| reposters.iter().copied().collect());
                        all.iter().filter(|(u, _)| set.contains(u)).copied().collect()
                    } else {
                        reposters.iter().filter_map(|r| st.repost_by.get(&(*r, *o)).map(|id| (*r, *id))).collect()
                    }
                })
                .collect()
        })
        .await
    }

    async fn hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        self.read(|st, need| {
            ids.iter()
                .map(|id| {
                    st.item_or_need(*id, need);
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
                .collect()
        })
        .await
    }

    async fn set_reaction(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> Result<bool> {
        self.check_failed()?;
        // A read lock of the state: reactions to one item from many users
        // proceed in parallel; only the pair (item, user) is locked while its
        // change is journaled and applied. The item's reactions must be
        // loaded (the change is decided from them).
        let ticket = loop {
            {
                let st = self.state.read();
                if st.loaded(Unit::Item(item)) {
                    let mut pair = st.reactions.lock(item, user);
                    if pair.has(kind) == on {
                        return Ok(false);
                    }
                    let ticket =
                        self.journal.write(&[Change::SetReaction { item, user, kind: kind.to_owned(), on }])?;
                    self.last_ticket.fetch_max(ticket, Ordering::AcqRel);
                    st.reactions.set_locked(&mut pair, kind, on);
                    break ticket;
                }
            }
            self.load(vec![Unit::Item(item)]).await?;
        };
        self.sync(ticket).await?;
        Ok(true)
    }

    async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.commit(|_, _| Ok(((), vec![Change::PutPromotion(p.clone())]))).await
    }

    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        let st = self.state.read();
        Ok(st.promotions.values().filter(|p| p.starts_at <= now && now < p.ends_at).cloned().collect())
    }

    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.commit(|_, _| Ok(((), vec![Change::PutInsert { key, user, item }]))).await
    }

    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        self.read(|st, need| {
            st.user_or_need(Unit::Inserts(user), need)
                .map(|u| merge_sorted(&[u.inserts.as_slice()], range, dir, limit))
                .unwrap_or_default()
        })
        .await
    }

    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
        self.read(|st, need| {
            st.user_or_need(Unit::Inserts(user), need);
            items.iter().map(|i| st.first_insert.get(&(user, *i)).copied()).collect()
        })
        .await
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
        self.commit(|st, need| {
            let following = st.user_or_need(Unit::Head(user), need).map_or(0, |u| u.head.following as usize);
            let decided = rules::follow(targets, at, following, max_following, |t| {
                if let Some(since) = st.follow_since(user, t, need) {
                    FollowFact::Following(since)
                } else if st.relation_of(user, t, need).blocked_either_way() {
                    FollowFact::Blocked
                } else {
                    FollowFact::Free
                }
            });
            let changes = decided
                .new
                .iter()
                .map(|&t| Change::PutEdge { kind: EdgeKind::Follow, from: user, to: t, since: at })
                .collect();
            let statuses = decided.statuses;
            Ok((statuses, changes))
        })
        .await
    }

    async fn unfollow(&self, user: UserId, target: UserId) -> Result<bool> {
        self.commit(|st, need| match st.follow_since(user, target, need) {
            Some(since) => Ok((true, vec![Change::DelEdge { kind: EdgeKind::Follow, from: user, to: target, since }])),
            None => Ok((false, vec![])),
        })
        .await
    }

    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.commit(|st, need| {
            let mut changes = Vec::new();
            let blocking = st.has_edge(EdgeKind::Block, user, target, need);
            if on {
                if !blocking {
                    changes.push(Change::PutEdge { kind: EdgeKind::Block, from: user, to: target, since: at });
                }
                for (a, b) in [(user, target), (target, user)] {
                    if let Some(since) = st.follow_since(a, b, need) {
                        changes.push(Change::DelEdge { kind: EdgeKind::Follow, from: a, to: b, since });
                    }
                }
            } else if blocking {
                changes.push(Change::DelEdge { kind: EdgeKind::Block, from: user, to: target, since: at });
            }
            Ok(((), changes))
        })
        .await
    }

    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.commit(|st, need| {
            let has = st.has_edge(EdgeKind::Mute, user, target, need);
            let changes = match (on, has) {
                (true, false) => vec![Change::PutEdge { kind: EdgeKind::Mute, from: user, to: target, since: at }],
                (false, true) => vec![Change::DelEdge { kind: EdgeKind::Mute, from: user, to: target, since: at }],
                _ => vec![],
            };
            Ok(((), changes))
        })
        .await
    }

    async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
        self.read(|st, need| {
            st.user_or_need(Unit::Out(user), need)
                .map(|u| u.following.iter().map(|e| e.0).collect())
                .unwrap_or_default()
        })
        .await
    }

    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>> {
        let page = match which {
            ListKind::Following => {
                self.read(|st, need| {
                    let Some(u) = st.user_or_need(Unit::Out(user), need) else { return Some(vec![]) };
                    Some(u.following_by_time.iter_before_rev(after.as_ref()).take(limit).copied().collect())
                })
                .await?
            }
            ListKind::Followers => {
                self.followers_in_memory(user, |f| f.iter_before_rev(after.as_ref()).take(limit).copied().collect())
                    .await?
            }
        };
        let page = match page {
            Some(p) => p,
            None => self.read_off_runtime(move |j| disk(j)?.followers_range(user, after, false, limit)).await?,
        };
        Ok(page.into_iter().map(|(since, id)| (id, since)).collect())
    }

    async fn followers_chunk(
        &self,
        user: UserId,
        after: Option<FollowerPos>,
        limit: usize,
    ) -> Result<Vec<FollowerPos>> {
        match self.followers_in_memory(user, |f| f.iter_after(after.as_ref()).take(limit).copied().collect()).await? {
            Some(chunk) => Ok(chunk),
            None => self.read_off_runtime(move |j| disk(j)?.followers_range(user, after, true, limit)).await,
        }
    }

    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        // `followed_by` is the other user's side: their out edges load too
        // (a page's authors' follow lists: the graph is what memory keeps).
        self.read(|st, need| {
            others
                .iter()
                .map(|o| Relation {
                    followed_by: st.followed_by(user, *o).unwrap_or_else(|unit| {
                        need.push(unit);
                        false
                    }),
                    ..st.relation_of(user, *o, need)
                })
                .collect()
        })
        .await
    }

    async fn counts(&self, user: UserId) -> Result<UserCounts> {
        self.read(|st, need| {
            st.user_or_need(Unit::Head(user), need)
                .map(|u| UserCounts { following: u.head.following, followers: u.head.followers, items: u.head.items })
                .unwrap_or_default()
        })
        .await
    }

    async fn health(&self) -> Result<()> {
        self.check_failed()?;
        self.journal.health()
    }

    async fn stats(&self) -> Result<StoreStats> {
        self.health().await?;
        let st = self.state.read();
        Ok(StoreStats {
            users: st.counters.users,
            items: st.counters.items_live,
            follows: st.counters.follows,
            pending_jobs: st.jobs.len() as u64,
            oldest_job: st.jobs.values().map(|j| j.created).min(),
            max_key: st.counters.max_key,
        })
    }
}

#[async_trait]
impl<J: Journal> Jobs for Store<J> {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let st = self.state.read();
        Ok(st.jobs.values().take(limit).cloned().collect())
    }

    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        let jobs: Vec<Job> = {
            let st = self.state.read();
            let until = Millis(now.0.saturating_add(lease_ms));
            st.jobs.values().filter(|j| self.leases.try_take(j.key, worker, now, until)).take(limit).cloned().collect()
        };
        self.prefetch_followers(&jobs).await?;
        Ok(jobs)
    }

    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        let committed = self
            .write(|st, _| {
                let mut recorded = Vec::with_capacity(progress.len());
                let mut changes = Vec::new();
                for p in progress {
                    let key = match *p {
                        JobProgress::Checkpoint(k, _) | JobProgress::Complete(k) => k,
                    };
                    let job = st.jobs.get(&key);
                    let state = job
                        .map(|j| JobState { held_by_other: !self.leases.may_advance(key, worker), cursor: j.cursor });
                    let change = match (rules::progress(state, *p), job) {
                        (Some(ProgressEffect::Advance(pos)), Some(j)) => {
                            Some(Change::PutJob(Job { cursor: Some(pos), ..j.clone() }))
                        }
                        (Some(ProgressEffect::Complete), _) => Some(Change::DelJob(key)),
                        _ => None,
                    };
                    recorded.push(change.is_some());
                    changes.extend(change);
                }
                Ok((recorded, changes))
            })
            .await?;
        let recorded = match committed {
            Committed::Nothing(r) => r,
            Committed::Written { out, ticket, .. } => {
                // Durable at most every PROGRESS_SYNC (see there).
                let due = self.progress_synced.lock().is_none_or(|t| t.elapsed() >= PROGRESS_SYNC);
                if due {
                    self.sync(ticket).await?;
                    *self.progress_synced.lock() = Some(std::time::Instant::now());
                }
                out
            }
        };
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
}
