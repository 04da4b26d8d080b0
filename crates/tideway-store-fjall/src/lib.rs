//! The embedded durable backend: a [`Journal`] on the fjall LSM engine.
//!
//! fjall holds the source of truth (items, insertions, edges, fan-out jobs,
//! reactions, promotions) and the indexes the feeds read. Every change is
//! written here in one atomic batch (all keyspaces share fjall's journal)
//! before it is acknowledged. The index of [`tideway_store::Store`] is lazy
//! over this journal: start-up reads the store-wide counters, the pending
//! fan-out jobs and the promotions, nothing that grows with the items or the
//! graph; each part of the index (a user's counters, out edges, followers,
//! blockers, outbox or insertions; an item's reposts, replies and
//! reactions) is read from the keyspaces (see `layout.rs`) the first time
//! a page or a write needs it ([`Disk::load_units`]), and pages read
//! records and bodies through bounded caches. Why fjall: see
//! ARCHITECTURE.md ("Embedded engine").
//!
//! Where things are done:
//!
//! - `layout.rs`: the format: the keyspaces, what their keys and values
//!   hold, and their codecs;
//! - `journal.rs`: [`FjallJournal`], the encoding of changes, group commit
//!   and point reads;
//! - `synclog.rs`: the log of fixed size each round of group commit is
//!   made durable in, and its replay at open;
//! - `load.rs`: reading the units of the lazy index;
//! - `migrate.rs`: opening a directory of an older format, and rebuilding
//!   the derived indexes;
//! - `import.rs`: [`Importer`], bulk loading for `tideway import`.
//!
//! [`Journal`]: tideway_store::Journal
//! [`Disk::load_units`]: tideway_store::Disk::load_units

mod import;
mod journal;
mod layout;
mod load;
mod migrate;
mod synclog;
#[cfg(test)]
mod tests;

pub use import::{Existing, Importer};
pub use journal::FjallJournal;

use std::path::Path;
use tideway_store::{Store, StoreError};

/// How hard an acknowledged write is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// `fdatasync` before acknowledging: survives power loss.
    Fsync,
    /// Hand to the OS before acknowledging: survives a process crash
    /// (`kill -9`), not a power loss.
    Buffer,
}

/// The setting that names the embedded store's directory.
pub(crate) const DATA_DIR: &str = "storage.data_dir (TIDEWAY_STORAGE__DATA_DIR)";

/// A fjall error: the disk cannot serve (an I/O error, a full disk).
fn io(e: fjall::Error) -> StoreError {
    StoreError::unavailable(tideway_store::Engine::Embedded, e)
}

/// Opens the embedded backend in `dir` with the default cache size.
pub fn open(dir: &Path, sync: SyncMode, inbox_cap: usize) -> Result<Store<FjallJournal>, StoreError> {
    open_cached(dir, sync, inbox_cap, tideway_store::DEFAULT_CACHE_SIZE)
}

/// Opens the embedded backend in `dir`, its caches bounded by `cache_bytes`
/// in all: a quarter for fjall's blocks (as stored, compressed), three
/// quarters for the decoded records and bodies pages read, weighed by the
/// memory they hold (see `Store::with_body_cache`).
pub fn open_cached(
    dir: &Path,
    sync: SyncMode,
    inbox_cap: usize,
    cache_bytes: u64,
) -> Result<Store<FjallJournal>, StoreError> {
    let blocks = (cache_bytes / 4).max(1 << 20);
    let (journal, state) = FjallJournal::open(dir, sync, blocks)?;
    Ok(Store::new(journal, state, inbox_cap).with_body_cache(cache_bytes - cache_bytes / 4))
}
