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
//! once `Store::load` has installed them; every write does the same with
//! its decision and with the counters its changes touch.
//!
//! The files of this module:
//!
//! * `mod.rs`: [`Store`], its inspection methods, and the write path
//!   (`commit`: decide, journal, apply, then `sync`; `settle`).
//! * `journal.rs`: [`Journal`] and [`Disk`], what a store writes to and
//!   reads back from.
//! * `caches.rs`: the bounded caches of records and bodies of a lazy store.
//! * `load.rs`: lazy loading (`load`, `read`) and the reads past the index.
//! * `items.rs`, `postings.rs`, `notifications.rs`, `live.rs`, `graph.rs`,
//!   `jobs.rs`: the [`Items`], [`Postings`], [`Notifications`], [`Live`],
//!   [`Graph`] and [`Jobs`] impls; the rules they apply are in [`crate::rules`] and
//!   `tideway_core::notify`.
//! * `shared.rs`: the [`Activity`], [`HotAuthors`], [`Inboxes`] and [`Hub`]
//!   impls, forwarded to the in-process components and the inbox set.
//!
//! The memory backend, `Store<NoJournal>`, is in [`crate::memory`].

mod caches;
mod graph;
mod items;
mod jobs;
mod journal;
mod live;
mod load;
mod notifications;
mod postings;
mod shared;
#[cfg(test)]
mod tests;

use crate::change::Change;
use crate::components::{JobLeases, MemoryActivity, MemoryHotAuthors, MemoryHub, MemoryRemovals, MemorySnapshots};
use crate::error::{Engine, StoreError};
use crate::inbox::InboxSet;
use crate::state::State;
use crate::state::{Applied, Unit};
use crate::traits::Record;
use crate::traits::*;
use caches::Caches;
use parking_lot::{RwLock, RwLockReadGuard};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tideway_core::Item;

pub use caches::{DEFAULT_BODY_CACHE, DEFAULT_CACHE_SIZE};
pub use journal::{Disk, Journal, Ticket};

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
    nodes: crate::components::LocalNodes,
    hub: MemoryHub,
    snapshots: MemorySnapshots,
    removals: MemoryRemovals,
    fact_tokens: crate::components::MemoryFactTokens,
    /// Recent and hot records and bodies, when the journal is lazy.
    caches: Option<Caches>,
    /// Units loaded from a lazy journal, and loads that had to read again
    /// because a write skipped their unit meanwhile.
    loads: AtomicU64,
    load_retries: AtomicU64,
    /// Reads that found every unit they needed loaded, and reads that had
    /// to load some.
    hits: AtomicU64,
    misses: AtomicU64,
    /// The last ticket written, and when fan-out progress was last made
    /// durable (see [`PROGRESS_SYNC`]).
    last_ticket: Arc<AtomicU64>,
    progress_synced: parking_lot::Mutex<Option<std::time::Instant>>,
    /// Spilled fan-out jobs being read back on the blocking pool (one
    /// refill at a time; `jobs.rs`).
    refill: parking_lot::Mutex<Option<jobs::RefillRead>>,
    /// The syncs of a journal that blocks (see [`Store::sync`]).
    syncs: Syncs,
}

/// Group commit without a blocked thread per waiter: one caller at a time
/// starts a syncer on the blocking pool, which syncs everything journaled so
/// far, again and again while writes keep coming ([`sync_while_written`]),
/// and every caller waits for the durable ticket it publishes.
struct Syncs {
    /// The ticket known durable, and whether a sync failed.
    durable: Arc<tokio::sync::watch::Sender<(Ticket, bool)>>,
    /// A sync is running.
    running: Arc<AtomicBool>,
}

/// How often fan-out progress is made durable. Progress only saves work: a
/// crash loses every inbox of this process anyway, and a chunk delivered
/// again is ignored by the inboxes that hold it; so a worker step starts a
/// sync at most this often and does not wait for it (a progress frame of
/// 26–60 KB took 4–8 ms), and a crash repeats at most about this much
/// delivery. (A write that must be durable syncs everything before it.)
pub const PROGRESS_SYNC: std::time::Duration = std::time::Duration::from_millis(50);

/// The syncer of [`Syncs`]: syncs up to the last ticket written and
/// publishes it, back to back while writes keep coming (the next round
/// starts as the last ends, not when a waiter wakes to start it); stops
/// when all is durable, or at a failure (published: every waiter fails).
fn sync_while_written<J: Journal>(
    journal: &J,
    last: &AtomicU64,
    durable: &tokio::sync::watch::Sender<(Ticket, bool)>,
    running: &AtomicBool,
) {
    /// Publishes a failure unless disarmed: a sync that panics fails its
    /// waiters instead of leaving them waiting for a syncer that is gone.
    struct Failed<'a>(&'a tokio::sync::watch::Sender<(Ticket, bool)>, &'a AtomicBool);
    impl Drop for Failed<'_> {
        fn drop(&mut self) {
            self.1.store(false, Ordering::Release);
            self.0.send_modify(|d| d.1 = true);
        }
    }
    let failed = Failed(durable, running);
    loop {
        let upto = last.load(Ordering::Acquire);
        if upto > durable.borrow().0 {
            if let Err(e) = journal.sync(upto) {
                tracing::error!(error = %e, "a sync of the journal failed");
                return; // (published by `failed`)
            }
            durable.send_modify(|d| d.0 = d.0.max(upto));
            continue;
        }
        // Nothing left: stop, unless a write came between the look and
        // the stop whose writer saw this syncer running and waits on it.
        running.store(false, Ordering::Release);
        if last.load(Ordering::Acquire) <= durable.borrow().0 || running.swap(true, Ordering::AcqRel) {
            std::mem::forget(failed);
            return;
        }
    }
}

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
        let durable = journal.durable();
        if let Some(disk) = journal.disk() {
            // (unknown: no item is taken as fresh)
            state.set_fresh_floor(disk.item_units_floor().unwrap_or(u64::MAX));
        }
        Self {
            state: RwLock::new(state),
            journal: Arc::new(journal),
            inboxes: InboxSet::new(inbox_cap),
            failed: AtomicBool::new(false),
            activity: MemoryActivity::default(),
            hot: MemoryHotAuthors::default(),
            leases: JobLeases::default(),
            nodes: crate::components::LocalNodes::default(),
            hub: MemoryHub::default(),
            snapshots: MemorySnapshots::default(),
            removals: MemoryRemovals::default(),
            fact_tokens: Default::default(),
            caches: None,
            loads: AtomicU64::new(0),
            load_retries: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            last_ticket: Arc::new(AtomicU64::new(0)),
            progress_synced: parking_lot::Mutex::new(None),
            refill: parking_lot::Mutex::new(None),
            syncs: Syncs {
                durable: Arc::new(tokio::sync::watch::Sender::new((durable, false))),
                running: Arc::new(AtomicBool::new(false)),
            },
        }
        .with_body_cache(DEFAULT_BODY_CACHE)
    }

    /// Sizes the caches of records and bodies (bytes in all; used only when
    /// the journal is lazy).
    pub fn with_body_cache(mut self, bytes: u64) -> Self {
        self.caches = self.journal.disk().is_some().then(|| Caches::new(bytes));
        self
    }

    /// Records cached now, whole or without their bodies (entries, bytes).
    pub fn cache_usage(&self) -> (u64, u64) {
        self.caches.as_ref().map_or((0, 0), |c| (c.items.len() as u64, c.items.weight()))
    }

    /// Units loaded from the journal so far, and loads that read again.
    pub fn load_counts(&self) -> (u64, u64) {
        (self.loads.load(Ordering::Relaxed), self.load_retries.load(Ordering::Relaxed))
    }

    /// Bounds the bytes of the index's loaded units (a lazy journal; the
    /// eager memory backend holds everything). Holders not used lately are
    /// let go once it is exceeded; see [`State::evict_over_budget`].
    pub fn with_index_budget(self, bytes: u64) -> Self {
        self.state.write().set_budget(usize::try_from(bytes).unwrap_or(usize::MAX));
        self
    }

    /// Holds at most `jobs` pending fan-out jobs in the index (a lazy
    /// journal; the rest wait on disk, see [`crate::job_window`]). Before
    /// serving only.
    pub fn with_job_window(self, jobs: usize) -> Self {
        if self.journal.disk().is_some() {
            self.state.write().jobs.set_cap(jobs);
        }
        self
    }

    /// The index's residency now (`None` when eager: nothing is let go).
    pub fn index_stats(&self) -> Option<IndexStats> {
        let (bytes, holders, evictions, budget) = {
            let st = self.state.read();
            if !st.lazy {
                return None;
            }
            let (bytes, holders, evictions) = st.residency();
            (bytes, holders, evictions, st.budget())
        };
        // (the disk's figures read outside the index's lock)
        let disk = self.journal.disk();
        Some(IndexStats {
            bytes: bytes as u64,
            budget: budget as u64,
            holders: holders as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            evictions,
            disk_pinned: disk.map_or(0, |d| d.pinned_bytes()),
            disk_buffered: disk.map_or(0, |d| d.buffered_bytes()),
        })
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
            // Whole: the write has the body at hand.
            caches.items.insert(id.0, Record::Item(item.clone()));
        }
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
        // A load that read the disk before now may miss a write the
        // evicted units had: it reads again (as after any eviction).
        st.note_all_skipped(self.last_ticket.load(Ordering::Acquire));
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

    /// Waits for `ticket` to be durable; a failure marks the store failed.
    /// A journal that blocks is synced on the blocking pool by one caller
    /// at a time for everyone ([`Syncs`]): 16 writers waiting cost one
    /// thread, not 16, and each wakes by a message, not a thread hand-off.
    async fn sync(&self, ticket: Ticket) -> Result<()> {
        if !self.journal.blocks() {
            return self.journal.sync(ticket).inspect_err(|e| self.fail(e));
        }
        let mut seen = self.syncs.durable.subscribe();
        loop {
            let (durable, failed) = *seen.borrow_and_update();
            if durable >= ticket {
                return Ok(());
            }
            if failed {
                let e = StoreError::unavailable_because(Engine::Embedded, "a sync of the journal failed");
                self.fail(&e);
                return Err(e);
            }
            self.start_syncer();
            // (the sender lives as long as the store)
            let _ = seen.changed().await;
        }
    }

    /// Starts a syncer on the blocking pool unless one is running; it syncs
    /// everything journaled so far and publishes it ([`sync_while_written`]).
    /// Detached: a caller dropped mid-wait, or one that does not wait,
    /// strands no one.
    fn start_syncer(&self) {
        if !self.syncs.running.swap(true, Ordering::AcqRel) {
            let (journal, last) = (self.journal.clone(), self.last_ticket.clone());
            let (durable, running) = (self.syncs.durable.clone(), self.syncs.running.clone());
            tokio::task::spawn_blocking(move || sync_while_written(&*journal, &last, &durable, &running));
        }
    }

    /// Makes `ticket` durable soon. A journal that blocks is not waited
    /// for: its failed sync is met by the next write that waits (which fails
    /// the store then). For what only saves work, like fan-out progress.
    fn sync_soon(&self, ticket: Ticket) -> Result<()> {
        if !self.journal.blocks() {
            return self.journal.sync(ticket).inspect_err(|e| self.fail(e));
        }
        self.start_syncer();
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
                        if let Some(c) = &self.caches
                            && changes.iter().any(|c| matches!(c, Change::UpdateItem(_)))
                        {
                            c.updated();
                        }
                        let mark = st.residency_mark();
                        let written = written_items(&changes);
                        let mut ap = Applied::default();
                        for c in &changes {
                            st.apply(c.clone(), &mut ap);
                        }
                        st.recount(&changes);
                        let mut all = changes;
                        all.extend(st.derived(&ap));
                        // The index already has the batch: a journal that
                        // cannot take it leaves the store failed.
                        let ticket = self.journal.write(&all).inspect_err(|e| self.fail(e))?;
                        self.last_ticket.fetch_max(ticket, Ordering::AcqRel);
                        st.note_skips(&ap.skipped, ticket, self.journal.durable());
                        self.evict_over_budget(&mut st, mark);
                        return Ok(Committed::Written { out, ticket, written });
                    }
                }
                need
            };
            self.load(need).await?;
        }
    }
}
