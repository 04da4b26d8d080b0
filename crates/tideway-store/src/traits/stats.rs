//! Counts and statistics a backend reports.

#[allow(unused_imports)]
use super::*;

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
