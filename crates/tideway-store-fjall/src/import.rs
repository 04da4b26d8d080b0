//! Bulk loading for `tideway import`, straight into the engine.

use crate::SyncMode;
use crate::io;
use crate::journal::{Batches, FjallJournal};
use crate::layout::Op;
use crate::layout::{Space, counters_value, edge_in_key, edge_key, head_value, item_ops, key_of, millis_u64, runs};
use fjall::PersistMode;
use std::collections::HashSet;
use std::path::Path;
use tideway_core::{Item, ItemId, Millis, UserId};
use tideway_store::{Counters, Disk, EdgeKind, Head, StoreError, Unit, UnitData};

/// What the graph already says about one follower, for an import's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Existing {
    /// Whom they follow.
    pub following: HashSet<UserId>,
    /// Whom they block or are blocked by.
    pub blocked: HashSet<UserId>,
}

/// Bulk loading for `tideway import`: writes straight into the engine, not
/// through the write path of the service (no journal batch per follow).
/// Holds the data directory's lock like a running server, so the two never
/// share a directory.
pub struct Importer {
    journal: FjallJournal,
    counters: Counters,
    /// The counters of the users written so far (read from disk first);
    /// they and the store's are written by [`Importer::finish`].
    heads: rustc_hash::FxHashMap<UserId, Option<Head>>,
    /// The `rebuild` mark is written: until `finish` removes it, an open
    /// of the directory rebuilds the derived indexes (the import was cut).
    marked: bool,
    /// The directory held no user when opened.
    was_empty: bool,
}

impl Importer {
    /// Opens (creating if needed) `dir`, so an import into a directory with
    /// data respects the graph already there.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let (journal, state) = FjallJournal::open(dir, SyncMode::Buffer, 32 << 20)?;
        let was_empty = state.counters.users == 0;
        Ok(Self { journal, counters: state.counters, heads: Default::default(), marked: false, was_empty })
    }

    /// Writes the `rebuild` mark (durably) before the first write.
    fn mark(&mut self) -> Result<(), StoreError> {
        if !self.marked {
            self.journal.meta.insert("rebuild", b"import").map_err(io)?;
            self.journal.db.persist(PersistMode::SyncAll).map_err(io)?;
            self.marked = true;
        }
        Ok(())
    }

    /// Whether the directory holds any edge (else an import's plan needs
    /// no lookups).
    pub fn has_edges(&self) -> Result<bool, StoreError> {
        Ok(!self.journal.edges.is_empty().map_err(io)?)
    }

    /// What the graph says about `user` now.
    pub fn existing(&self, user: UserId) -> Result<Existing, StoreError> {
        let mut e = Existing::default();
        if let UnitData::Out { following, blocking, .. } = self.journal.load_unit(Unit::Out(user))? {
            e.following = following.into_iter().map(|(t, _)| t).collect();
            e.blocked.extend(blocking);
        }
        if let UnitData::BlockedBy(by) = self.journal.load_unit(Unit::BlockedBy(user))? {
            e.blocked.extend(by);
        }
        Ok(e)
    }

    /// The counters of `user` as written so far (the user is then known).
    fn head(&mut self, user: UserId) -> Result<&mut Head, StoreError> {
        if !self.heads.contains_key(&user) {
            // Into an empty directory, nobody has counters yet.
            let head = match (self.was_empty, self.journal.load_unit(Unit::Head(user))) {
                (true, _) => None,
                (false, r) => match r? {
                    UnitData::Head(h) => h,
                    _ => None,
                },
            };
            if head.is_none() {
                self.counters.users += 1;
            }
            self.heads.insert(user, head);
        }
        let h = self.heads.entry(user).or_default();
        Ok(h.get_or_insert_with(Head::default))
    }

    /// Writes follows, sorted by (follower, followee) and free of
    /// duplicates and of follows already stored, in one ingestion per
    /// keyspace: the engine builds its tables directly from the sorted
    /// streams. A `rebuild` mark written first (and removed by `finish`)
    /// makes the next open rebuild the derived indexes if the import is cut
    /// short. `progress` is called with the count written so far, every
    /// 65,536 follows.
    pub fn ingest_follows(
        &mut self,
        follows: &[(UserId, UserId)],
        since: Millis,
        progress: &mut dyn FnMut(usize),
    ) -> Result<(), StoreError> {
        if follows.is_empty() {
            return Ok(());
        }
        self.mark()?;
        // The two ingestions (by follower, and the reverse entries by
        // followee) are independent: one on its own thread, beside the other.
        let since_bytes = millis_u64(since).to_be_bytes();
        let journal = &self.journal;
        let reverse = std::thread::scope(|scope| {
            let reverse = scope.spawn(|| -> Result<Vec<(UserId, u64)>, StoreError> {
                let mut reverse: Vec<(UserId, UserId)> = follows.iter().map(|&(a, b)| (b, a)).collect();
                reverse.sort_unstable();
                let mut ingestion = journal.edges_in.start_ingestion().map_err(io)?;
                for &(to, from) in &reverse {
                    let k = edge_in_key(EdgeKind::Follow, from, to, since).unwrap_or_default();
                    ingestion.write(k, Vec::new()).map_err(io)?;
                }
                ingestion.finish().map_err(io)?;
                Ok(runs(reverse.iter().map(|e| e.0)))
            });
            let forward = (|| -> Result<(), StoreError> {
                let mut ingestion = journal.edges.start_ingestion().map_err(io)?;
                for (i, &(from, to)) in follows.iter().enumerate() {
                    ingestion.write(edge_key(EdgeKind::Follow, from, to), since_bytes.to_vec()).map_err(io)?;
                    if i % 65_536 == 65_535 {
                        progress(i + 1);
                    }
                }
                ingestion.finish().map_err(io)
            })();
            let reverse = reverse.join().unwrap_or_else(|_| {
                Err(StoreError::unavailable_because(tideway_store::Engine::Embedded, "the reverse ingestion panicked"))
            });
            forward.and(reverse)
        });
        let followers = reverse?;
        progress(follows.len());
        // Counted by runs of the sorted lists: one update a user, not a follow.
        for (u, n) in runs(follows.iter().map(|e| e.0)) {
            self.head(u)?.following += n;
        }
        for (u, n) in followers {
            self.head(u)?.followers += n;
        }
        self.counters.follows += follows.len() as u64;
        Ok(())
    }

    /// Writes items (new ids, no fan-out job: inboxes are rebuilt from the
    /// outboxes on first read) as one atomic batch; their authors' counters
    /// are written by `finish`.
    pub fn write_items(&mut self, items: &[Item]) -> Result<(), StoreError> {
        self.mark()?;
        let mut ops = Vec::with_capacity(items.len() * 3);
        for item in items {
            item_ops(item, true, &mut ops)?;
            let head = self.head(item.author)?;
            head.note_key(item.id.0);
            if !item.deleted {
                head.items += 1;
                self.counters.items_live += 1;
            }
            self.counters.max_key = self.counters.max_key.max(item.id.0);
        }
        let mut b = self.journal.db.batch();
        for op in ops {
            match op {
                Op::Put(s, k, v) => b.insert(self.journal.space(s), k, v),
                Op::Del(s, k) => b.remove(self.journal.space(s), k),
            }
        }
        b.commit().map_err(io)
    }

    /// Whether an item with this id is stored.
    pub fn has_item(&self, id: ItemId) -> Result<bool, StoreError> {
        self.journal.has_item(id)
    }

    /// The stored item of `author` with this idempotency key.
    pub fn idempotent(&self, author: UserId, key: &str) -> Result<Option<ItemId>, StoreError> {
        self.journal.idempotent(author, key)
    }

    /// Writes the counters of every user the import touched and the
    /// store's, makes everything durable (fsync) and removes the `rebuild`
    /// mark; then writes the memtables out as tables, so the next start does
    /// not recover the import from the journal into memory, and compacts
    /// every keyspace into one sorted run (seconds per million items).
    pub fn finish(self) -> Result<(), StoreError> {
        let mut heads: Vec<(UserId, Head)> = self.heads.iter().filter_map(|(u, h)| h.map(|h| (*u, h))).collect();
        if self.was_empty {
            // Nobody had counters: one sorted ingestion, as for the follows.
            heads.sort_unstable_by_key(|h| h.0);
            let mut ingestion = self.journal.users.start_ingestion().map_err(io)?;
            for (u, h) in &heads {
                ingestion.write(key_of(&[u.0]), head_value(h)).map_err(io)?;
            }
            ingestion.finish().map_err(io)?;
        } else {
            let mut out = Batches { j: &self.journal, ops: Vec::new() };
            for (u, h) in &heads {
                out.push(Op::Put(Space::Users, key_of(&[u.0]), head_value(h)))?;
            }
            out.finish()?;
        }
        self.journal.flush(
            vec![Op::Put(Space::Meta, b"counters".to_vec(), counters_value(&self.counters))],
            PersistMode::SyncAll,
        )?;
        if self.marked {
            self.journal.meta.remove("rebuild").map_err(io)?;
        }
        self.journal.db.persist(PersistMode::SyncAll).map_err(io)?;
        for ks in self.journal.keyspaces() {
            ks.rotate_memtable_and_wait().map_err(io)?;
        }
        // Memtables the engine sealed on its own (its journal filled up)
        // may still be flushing: an exit now would leave them to be replayed
        // into memory at the next start.
        while self.journal.keyspaces().iter().any(|ks| ks.sealed_memtable_count() > 0) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // The import's tables compacted now, not by a server that has just
        // started on them: fjall compacts them once writes come, and those
        // minutes of compaction on a small machine were most of a cold
        // page's p99 (at 10M items: 6-17 ms against 4-6 ms compacted; 16 s
        // of compaction; docs/benchmarks.md). `major_compact` is hidden
        // from fjall 3's docs; Cargo.lock pins the version it works on.
        for ks in self.journal.keyspaces() {
            ks.major_compact().map_err(io)?;
        }
        Ok(())
    }
}
