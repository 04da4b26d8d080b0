//! What a [`Store`](super::Store) writes its changes to ([`Journal`]) and,
//! when the journal keeps them, reads back from ([`Disk`]); and the shared
//! body that marks an item whose body was left on disk.

use crate::change::Change;
use crate::error::{Engine, StoreError};
use crate::state::{Unit, UnitData};
use crate::traits::Record;
use crate::traits::*;
use std::sync::Arc;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Body, ItemId, Key, Millis, UserId};

pub use crate::state::Ticket;

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
    /// insertions).
    fn read_records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>>;
    /// The stored bodies of items.
    fn read_bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>>;
    /// Whether an item with this id is stored.
    fn has_item(&self, id: ItemId) -> Result<bool>;
    /// The stored item created by `author` with this idempotency key.
    fn idempotent(&self, author: UserId, key: &str) -> Result<Option<ItemId>>;
    /// Item keys posted to `feed` in `range`, in `dir` order, at most
    /// `limit` (one range read: feeds are never loaded whole).
    fn postings_range(&self, feed: u64, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>>;
    /// Stored items after `after` by id (deleted ones too, without their
    /// bodies), at most `limit`: a scan for a backfill.
    fn items_after(&self, after: Option<ItemId>, limit: usize) -> Result<Vec<Arc<tideway_core::Item>>>;
    /// Stored follows after `after` by (follower, followee), with their
    /// times, at most `limit`.
    fn follows_after(&self, after: Option<(UserId, UserId)>, limit: usize) -> Result<Vec<(UserId, UserId, Millis)>>;
    /// Stored reactions after `after` by (item, user, kind), at most `limit`.
    fn reactions_after(
        &self,
        after: Option<(ItemId, UserId, String)>,
        limit: usize,
    ) -> Result<Vec<(ItemId, UserId, String)>>;
    /// Stored live sessions by id (`None`: unknown).
    fn read_sessions(&self, ids: &[u64]) -> Result<Vec<Option<tideway_core::live::Session>>>;
    /// Pending fan-out jobs in key order, leaving out the keys in `held`
    /// (ascending), at most `limit` (the jobs a window let go).
    fn pending_jobs(&self, held: &[Key], limit: usize) -> Result<Vec<crate::traits::Job>>;
    /// The highest item id whose reposts, replies or reactions are stored
    /// (0: none). Items created above it start with none: the index knows
    /// them empty without a read ([`crate::state::FreshItems`]). The default
    /// knows nothing, so nothing is taken as empty.
    fn item_units_floor(&self) -> Result<u64> {
        Ok(u64::MAX)
    }
    /// Bytes the disk keeps in memory for the data it holds, outside the
    /// caches and the index's budget (the embedded store: the filters and
    /// block indexes of its tables that stay loaded, next to nothing in a
    /// directory it created, see `FjallJournal::open`); 0 when unknown.
    fn pinned_bytes(&self) -> u64 {
        0
    }
    /// Bytes of recent writes the disk holds in memory until it writes them
    /// out (the embedded store: fjall's memtables, bounded per keyspace by
    /// `storage.cache_size`); 0 when unknown.
    fn buffered_bytes(&self) -> u64 {
        0
    }
}

/// The journal's [`Disk`]; only a lazy store asks (so never the memory
/// backend's).
pub(super) fn disk<J: Journal>(journal: &J) -> Result<&dyn Disk> {
    journal
        .disk()
        .ok_or_else(|| StoreError::unavailable_because(Engine::Embedded, "this journal keeps nothing to read back"))
}
