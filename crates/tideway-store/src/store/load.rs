//! Lazy loading: how a read or a write gets the units it needs into the
//! index ([`Store::load`], [`Store::read`]), and the reads that go past the
//! index to the caches and the journal.

use super::Store;
use super::caches::Caches;
use super::journal::{Journal, disk};
use crate::blocks::SortedBlocks;
use crate::error::{Engine, StoreError};
use crate::state::State;
use crate::state::{FOLLOWERS_LOADED_WHOLE, Unit};
use crate::traits::is_stripped;
use crate::traits::*;
use crate::traits::{Job, Record};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tideway_core::{Body, Item, ItemId, UserId};

/// The most keys or units a journal read may touch to run on the caller's
/// thread (see [`Store::read_off_runtime`]).
pub(super) const INLINE_READ_MAX: usize = 64;

impl<J: Journal> Store<J> {
    /// An item as stored now: the index, the cache, else the journal (a
    /// blocking read: for write paths, which hold the write lock anyway;
    /// pages go through `records`). The body may be stripped.
    pub(super) fn item_now(&self, st: &State, id: ItemId) -> Result<Option<Arc<Item>>> {
        if let Some(i) = st.item(id) {
            return Ok(Some(i.clone()));
        }
        let Some(caches) = &self.caches else { return Ok(None) };
        if let Some(Record::Item(i)) = caches.items.get(&id.0) {
            return Ok(Some(i));
        }
        // (under the write lock: nothing is updated meanwhile)
        let read = disk(&*self.journal)?.read_records(&[id.0])?.pop().flatten();
        if let Some(v) = &read {
            caches.items.insert(id.0, v.clone());
        }
        Ok(match read {
            Some(Record::Item(i)) => Some(i),
            _ => None,
        })
    }

    /// Runs a journal read (cache misses read the disk) that touches at most
    /// `reach` keys or units: up to [`INLINE_READ_MAX`] on the caller's
    /// thread, a larger one on the blocking pool. A hand-off to the pool and
    /// back costs more than a small read whose blocks are in the OS page
    /// cache (~80 µs a trip on 2 cores, `docs/benchmarks.md`, "Cold first
    /// pages: no hand-offs, fewer outboxes"); a small read of a disk that must seek
    /// holds the runtime thread meanwhile.
    pub(super) async fn read_off_runtime<T: Send + 'static>(
        &self,
        reach: usize,
        read: impl FnOnce(&J) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        if reach <= INLINE_READ_MAX {
            return read(&self.journal);
        }
        let journal = self.journal.clone();
        tokio::task::spawn_blocking(move || read(&journal))
            .await
            .map_err(|e| StoreError::unavailable(Engine::Embedded, e))?
    }

    /// Runs a journal read off the runtime, then `cache` with what it read,
    /// unless an item was updated since the read began (see
    /// [`Caches::fresh`]; checked under the read lock, so no settle runs
    /// meanwhile).
    pub(super) async fn read_to_cache<T: Send + 'static>(
        &self,
        reach: usize,
        read: impl FnOnce(&J) -> Result<T> + Send + 'static,
        cache: impl FnOnce(&Caches, &T),
    ) -> Result<T> {
        let epoch = self.caches.as_ref().map(Caches::epoch);
        let out = self.read_off_runtime(reach, read).await?;
        let _st = self.state.read();
        if let (Some(c), Some(e)) = (&self.caches, epoch)
            && c.fresh(e)
        {
            cache(c, &out);
        }
        Ok(out)
    }

    /// A stripped item's body: from the cache when it holds the item whole,
    /// else the journal (blocking; a write's path, under the write lock).
    pub(super) fn body_now(&self, id: ItemId) -> Result<Option<Body>> {
        if let Some(caches) = &self.caches
            && let Some(Record::Item(i)) = caches.items.get(&id.0)
            && !is_stripped(&i.body)
        {
            return Ok(Some(i.body.clone()));
        }
        Ok(disk(&*self.journal)?.read_bodies(&[id])?.pop().flatten())
    }

    /// Loads units from a lazy journal into the index. The disk is read
    /// outside the lock; a unit is installed only if no write skipped it
    /// after the durable watermark the read started from (else the load
    /// waits for that write and reads again), so a loaded unit is never
    /// missing a write (see `State`).
    pub(super) async fn load(&self, mut units: Vec<Unit>) -> Result<()> {
        units.sort_unstable();
        units.dedup();
        loop {
            let watermark = self.journal.durable();
            let want = units.clone();
            // Followers, books and sessions may be long: read on the pool.
            let long = units.iter().any(|u| matches!(u, Unit::Followers(_) | Unit::Notify(_) | Unit::Live(_)));
            let reach = if long { usize::MAX } else { units.len() };
            let data = self.read_off_runtime(reach, move |j| disk(j)?.load_units(&want)).await?;
            let wait = {
                let mut st = self.state.write();
                let mark = st.residency_mark();
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
                self.evict_over_budget(&mut st, mark);
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
    pub(super) async fn read<T>(&self, read: impl Fn(&State, &mut Vec<Unit>) -> T) -> Result<T> {
        let mut first = true;
        loop {
            let mut need = Vec::new();
            let out = {
                let st = self.state.read();
                read(&st, &mut need)
            };
            if first {
                let counter = if need.is_empty() { &self.hits } else { &self.misses };
                counter.fetch_add(1, Ordering::Relaxed);
                first = false;
            }
            if need.is_empty() {
                return Ok(out);
            }
            self.load(need).await?;
        }
    }

    /// Lets go of loaded units over the budget (under the write lock), noting
    /// them as skipped at the last ticket written, durable or not: a load
    /// that read the disk before that ticket was durable (it may have
    /// started long before this eviction) must not install what it read, as
    /// the unit it would replace had changes its read may lack.
    pub(super) fn evict_over_budget(&self, st: &mut State, protect: u64) {
        let gone = st.evict_over_budget(protect);
        if !gone.is_empty() {
            st.note_skips(&gone, self.last_ticket.load(Ordering::Acquire), self.journal.durable());
        }
    }

    /// Reads a user's followers from memory, loading them first unless they
    /// are too many to hold ([`FOLLOWERS_LOADED_WHOLE`]): `None` then, and
    /// the caller reads the page it needs from the journal.
    pub(super) async fn followers_in_memory<T>(
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
    pub(super) async fn prefetch_followers(&self, jobs: &[Job]) -> Result<()> {
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
}
