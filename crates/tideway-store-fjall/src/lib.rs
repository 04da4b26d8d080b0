//! The embedded durable backend: a [`Journal`] on the fjall LSM engine.
//!
//! fjall holds the source of truth (items, insertions, edges, fan-out jobs).
//! Every change is written here in one atomic batch (all keyspaces share
//! fjall's journal) before it is applied to the index of
//! [`tideway_store::Store`] and acknowledged. Items stay here: the index
//! keeps their outbox keys and counters, loaded at start-up from the small
//! per-item index keyspaces below (never from the item records), and pages
//! read records and bodies through bounded caches. Edges, jobs, reactions
//! and promotions are loaded whole. Why fjall: see ARCHITECTURE.md
//! ("Embedded engine").
//!
//! Layout (all integers big-endian so keys sort numerically):
//!
//! | keyspace  | key                          | value                  |
//! |-----------|------------------------------|------------------------|
//! | `items`   | item id (8)                  | item without its body, JSON |
//! | `bodies`  | item id (8)                  | body, JSON             |
//! | `outbox`  | author (8) + item id (8)     | 1 live, 0 deleted      |
//! | `reposts` | original (8) + author (8) + repost (8) | empty (live reposts) |
//! | `replies` | parent (8) + reply (8)       | empty (live replies)   |
//! | `idempotency` | author (8) + key         | item id (8)            |
//! | `inserts` | insertion key (8)            | user (8) + item (8)    |
//! | `edges`   | kind (1) + from (8) + to (8) | since, ms (8)          |
//! | `jobs`    | job key (8)                  | job, JSON              |
//! | `reactions` | item (8) + user (8) + kind | empty                  |
//! | `promotions` | promotion id (8)          | promotion, JSON        |
//! | `meta`    | `format`                     | format version         |

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;
use tideway_core::{Item, ItemId, Millis, UserId};
use tideway_store::{Change, EdgeKind, Job, Journal, Promotion, State, Store, StoreError, Ticket};

const FORMAT: &[u8] = b"tideway-3";
/// The previous format: items whole in `items`, replayed at start-up. Opened
/// directories of it are migrated in place.
const FORMAT_2: &[u8] = b"tideway-2";

/// How hard an acknowledged write is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// `fdatasync` before acknowledging: survives power loss.
    Fsync,
    /// Hand to the OS before acknowledging: survives a process crash
    /// (`kill -9`), not a power loss.
    Buffer,
}

/// The fjall journal.
pub struct FjallJournal {
    db: Database,
    items: Keyspace,
    bodies: Keyspace,
    outbox: Keyspace,
    reposts: Keyspace,
    replies: Keyspace,
    idempotency: Keyspace,
    inserts: Keyspace,
    edges: Keyspace,
    jobs: Keyspace,
    reactions: Keyspace,
    promotions: Keyspace,
    sync: SyncMode,
    /// Batches written but not yet committed, and the last ticket handed out.
    pending: Mutex<(Vec<Op>, Ticket)>,
    /// Group commit: (highest ticket known durable, a flush is running).
    synced: Mutex<(Ticket, bool)>,
    /// Wakes writers waiting for the running flush.
    sync_done: Condvar,
}

/// One encoded write, queued until the next group commit.
enum Op {
    Put(Space, Vec<u8>, Vec<u8>),
    Del(Space, Vec<u8>),
}

#[derive(Clone, Copy)]
enum Space {
    Items,
    Bodies,
    Outbox,
    Reposts,
    Replies,
    Idempotency,
    Inserts,
    Edges,
    Jobs,
    Reactions,
    Promotions,
}

fn io(e: fjall::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

fn u64_at(b: &[u8], at: usize) -> Result<u64, StoreError> {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::Corrupt(format!("short key or value ({} bytes)", b.len())))
}

fn key_of(parts: &[u64]) -> Vec<u8> {
    parts.iter().flat_map(|p| p.to_be_bytes()).collect()
}

fn json<T: serde::Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// The writes that store `item`: its record and body, and its entries in
/// the per-item index keyspaces (`new`: it was not stored before; else it
/// replaces a live item).
fn item_ops(item: &Item, new: bool, ops: &mut Vec<Op>) -> Result<(), StoreError> {
    let id = item.id.0;
    let live = !item.deleted;
    let record = Item { body: tideway_store::stripped_body(), ..item.clone() };
    ops.push(Op::Put(Space::Items, key_of(&[id]), json(&record)?));
    ops.push(Op::Put(Space::Bodies, key_of(&[id]), json(&*item.body)?));
    ops.push(Op::Put(Space::Outbox, key_of(&[item.author.0, id]), vec![u8::from(live)]));
    if new && let Some(k) = &item.idempotency_key {
        let mut key = key_of(&[item.author.0]);
        key.extend_from_slice(k.as_bytes());
        ops.push(Op::Put(Space::Idempotency, key, key_of(&[id])));
    }
    if let Some(orig) = item.repost_of {
        let k = key_of(&[orig.0, item.author.0, id]);
        ops.push(if live { Op::Put(Space::Reposts, k, Vec::new()) } else { Op::Del(Space::Reposts, k) });
    }
    if let Some(parent) = item.reply_to {
        let k = key_of(&[parent.0, id]);
        ops.push(if live { Op::Put(Space::Replies, k, Vec::new()) } else { Op::Del(Space::Replies, k) });
    }
    Ok(())
}

fn decode_record(id: ItemId, v: &[u8]) -> Result<Arc<Item>, StoreError> {
    let mut item: Item = serde_json::from_slice(v).map_err(|e| StoreError::Corrupt(format!("item {id}: {e}")))?;
    item.body = tideway_store::stripped_body();
    Ok(Arc::new(item))
}

fn edge_kind_byte(k: EdgeKind) -> u8 {
    match k {
        EdgeKind::Follow => b'f',
        EdgeKind::Block => b'b',
        EdgeKind::Mute => b'm',
    }
}

fn edge_key(kind: EdgeKind, from: UserId, to: UserId) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(edge_kind_byte(kind));
    k.extend_from_slice(&from.0.to_be_bytes());
    k.extend_from_slice(&to.0.to_be_bytes());
    k
}

impl FjallJournal {
    /// Opens (creating if needed) the data directory and replays it into a
    /// fresh index. Fails if another process has the directory open.
    /// `block_cache` bounds fjall's cache of (encoded) blocks.
    pub fn open(dir: &Path, sync: SyncMode, block_cache: u64) -> Result<(Self, State), StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(format!("creating {}: {e}", dir.display())))?;
        // A journal of at most 64 MiB (fjall's least; its default is 512):
        // what it holds is recovered into memtables at start, so this bounds
        // the memory of recent writes after a restart.
        let db =
            Database::builder(dir).cache_size(block_cache).max_journaling_size(64 << 20).open().map_err(
                |e| match e {
                    fjall::Error::Locked => {
                        StoreError::Io(format!("{} is in use by another tideway process", dir.display()))
                    }
                    e => io(e),
                },
            )?;
        let ks = |name: &str| db.keyspace(name, KeyspaceCreateOptions::default).map_err(io);
        let meta = ks("meta")?;
        let format = meta.get("format").map_err(io)?;
        let j = FjallJournal {
            items: ks("items")?,
            // Bodies are read only for items known to exist, and their index
            // grows with their bytes: no filter on the last level, and index
            // blocks go through the (bounded) block cache instead of being
            // pinned in memory.
            bodies: db
                .keyspace("bodies", || {
                    KeyspaceCreateOptions::default()
                        .expect_point_read_hits(true)
                        .index_block_pinning_policy(fjall::config::PinningPolicy::all(false))
                        .filter_block_pinning_policy(fjall::config::PinningPolicy::all(false))
                })
                .map_err(io)?,
            outbox: ks("outbox")?,
            reposts: ks("reposts")?,
            replies: ks("replies")?,
            idempotency: ks("idempotency")?,
            inserts: ks("inserts")?,
            edges: ks("edges")?,
            jobs: ks("jobs")?,
            reactions: ks("reactions")?,
            promotions: ks("promotions")?,
            db,
            sync,
            pending: Mutex::new((Vec::new(), 0)),
            synced: Mutex::new((0, false)),
            sync_done: Condvar::new(),
        };
        match format.as_deref() {
            Some(v) if v == FORMAT => {}
            Some(v) if v == FORMAT_2 => {
                j.migrate_from_2()?;
                meta.insert("format", FORMAT).map_err(io)?;
                j.db.persist(PersistMode::SyncAll).map_err(io)?;
            }
            Some(v) => {
                return Err(StoreError::Corrupt(format!(
                    "data directory has format {:?}, this build reads {:?} (and migrates {:?})",
                    String::from_utf8_lossy(v),
                    String::from_utf8_lossy(FORMAT),
                    String::from_utf8_lossy(FORMAT_2),
                )));
            }
            None => meta.insert("format", FORMAT).map_err(io)?,
        }
        let state = j.load()?;
        Ok((j, state))
    }

    /// Rewrites a `tideway-2` directory's items (whole records, replayed at
    /// start-up) into this format's records, bodies and index keyspaces, in
    /// batches; idempotent, so a crash midway is finished by the next open.
    fn migrate_from_2(&self) -> Result<(), StoreError> {
        tracing::info!("migrating the data directory from tideway-2 to tideway-3 (items leave the start-up path)");
        let started = std::time::Instant::now();
        let mut ops = Vec::new();
        let mut n = 0u64;
        for g in self.items.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            let item: Item = serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("item: {e}")))?;
            item_ops(&item, true, &mut ops)?;
            n += 1;
            if ops.len() >= 50_000 {
                self.flush(std::mem::take(&mut ops), PersistMode::Buffer)?;
            }
        }
        self.flush(ops, PersistMode::SyncAll)?;
        tracing::info!(items = n, secs = started.elapsed().as_secs_f64(), "migrated");
        Ok(())
    }

    /// The index at start-up: per-item keys and counters from the small
    /// index keyspaces (not the item records), and everything else whole.
    fn load(&self) -> Result<State, StoreError> {
        let mut st = State { items_elsewhere: true, ..State::default() };
        for g in self.outbox.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            st.load_outbox_key(UserId(u64_at(&k, 0)?), ItemId(u64_at(&k, 8)?), v.first() == Some(&1));
        }
        st.shrink_outboxes();
        for g in self.reposts.iter() {
            let k = g.key().map_err(io)?;
            st.load_repost(ItemId(u64_at(&k, 0)?), UserId(u64_at(&k, 8)?), ItemId(u64_at(&k, 16)?));
        }
        for g in self.replies.iter() {
            let k = g.key().map_err(io)?;
            st.load_reply(ItemId(u64_at(&k, 0)?));
        }
        for g in self.inserts.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            st.apply(Change::PutInsert {
                key: u64_at(&k, 0)?,
                user: UserId(u64_at(&v, 0)?),
                item: ItemId(u64_at(&v, 8)?),
            });
        }
        for g in self.edges.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let kind = match k.first() {
                Some(b'f') => EdgeKind::Follow,
                Some(b'b') => EdgeKind::Block,
                Some(b'm') => EdgeKind::Mute,
                other => return Err(StoreError::Corrupt(format!("edge kind {other:?}"))),
            };
            let since = Millis(i64::try_from(u64_at(&v, 0)?).unwrap_or(0));
            st.apply(Change::PutEdge { kind, from: UserId(u64_at(&k, 1)?), to: UserId(u64_at(&k, 9)?), since });
        }
        for g in self.jobs.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            let job: Job = serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("job: {e}")))?;
            st.apply(Change::PutJob(job));
        }
        for g in self.reactions.iter() {
            let k = g.key().map_err(io)?;
            let kind = match k.get(16..) {
                Some(rest) if !rest.is_empty() => {
                    std::str::from_utf8(rest).map_err(|_| StoreError::Corrupt("reaction kind is not UTF-8".into()))?
                }
                _ => return Err(StoreError::Corrupt(format!("reaction key of {} bytes has no kind", k.len()))),
            };
            st.reactions.set(ItemId(u64_at(&k, 0)?), UserId(u64_at(&k, 8)?), kind, true);
        }
        for g in self.promotions.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            let p: Promotion =
                serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("promotion: {e}")))?;
            st.apply(Change::PutPromotion(p));
        }
        Ok(st)
    }

    fn keyspaces(&self) -> [&Keyspace; 11] {
        [
            &self.items,
            &self.bodies,
            &self.outbox,
            &self.reposts,
            &self.replies,
            &self.idempotency,
            &self.inserts,
            &self.edges,
            &self.jobs,
            &self.reactions,
            &self.promotions,
        ]
    }

    /// Bytes on disk.
    pub fn disk_space(&self) -> u64 {
        self.keyspaces().iter().map(|k| k.disk_space()).sum()
    }
}

impl Journal for FjallJournal {
    /// Encodes the batch and queues it; the caller's `sync` commits it.
    fn write(&self, changes: &[Change]) -> Result<Ticket, StoreError> {
        let mut ops = Vec::with_capacity(changes.len());
        for c in changes {
            match c {
                Change::PutItem(item) => item_ops(item, true, &mut ops)?,
                Change::UpdateItem(item) => item_ops(item, false, &mut ops)?,
                Change::PutInsert { key, user, item } => {
                    let mut v = Vec::with_capacity(16);
                    v.extend_from_slice(&user.0.to_be_bytes());
                    v.extend_from_slice(&item.0.to_be_bytes());
                    ops.push(Op::Put(Space::Inserts, key.to_be_bytes().to_vec(), v));
                }
                Change::PutEdge { kind, from, to, since } => {
                    let since = u64::try_from(since.0.max(0)).unwrap_or(0);
                    ops.push(Op::Put(Space::Edges, edge_key(*kind, *from, *to), since.to_be_bytes().to_vec()));
                }
                Change::DelEdge { kind, from, to } => ops.push(Op::Del(Space::Edges, edge_key(*kind, *from, *to))),
                Change::PutJob(job) => {
                    let v = serde_json::to_vec(job).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    ops.push(Op::Put(Space::Jobs, job.key.to_be_bytes().to_vec(), v));
                }
                Change::DelJob(key) => ops.push(Op::Del(Space::Jobs, key.to_be_bytes().to_vec())),
                Change::SetReaction { item, user, kind, on } => {
                    let mut k = Vec::with_capacity(16 + kind.len());
                    k.extend_from_slice(&item.0.to_be_bytes());
                    k.extend_from_slice(&user.0.to_be_bytes());
                    k.extend_from_slice(kind.as_bytes());
                    ops.push(if *on { Op::Put(Space::Reactions, k, Vec::new()) } else { Op::Del(Space::Reactions, k) });
                }
                Change::PutPromotion(p) => {
                    let v = serde_json::to_vec(p).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    ops.push(Op::Put(Space::Promotions, p.id.to_be_bytes().to_vec(), v));
                }
            }
        }
        let mut pending = self.pending.lock();
        pending.0.extend(ops);
        pending.1 += 1;
        Ok(pending.1)
    }

    /// Only an fsync is worth a trip to the blocking pool; a buffered
    /// persist is a write to the page cache.
    fn blocks(&self) -> bool {
        self.sync == SyncMode::Fsync
    }

    fn keeps_items(&self) -> bool {
        true
    }

    /// Point reads of the records (fjall's block cache and the OS page
    /// cache serve the warm ones).
    fn read_items(&self, ids: &[ItemId]) -> Result<Vec<tideway_store::Stored<Arc<Item>>>, StoreError> {
        ids.iter()
            .map(|id| {
                let Some(v) = self.items.get(id.0.to_be_bytes()).map_err(io)? else { return Ok(None) };
                Ok(Some((decode_record(*id, &v)?, v.len())))
            })
            .collect()
    }

    fn read_bodies(&self, ids: &[ItemId]) -> Result<Vec<tideway_store::Stored<tideway_core::Body>>, StoreError> {
        ids.iter()
            .map(|id| {
                let Some(v) = self.bodies.get(id.0.to_be_bytes()).map_err(io)? else { return Ok(None) };
                let body: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("body of {id}: {e}")))?;
                Ok(Some((Arc::new(body), v.len())))
            })
            .collect()
    }

    fn has_item(&self, id: ItemId) -> Result<bool, StoreError> {
        self.items.contains_key(id.0.to_be_bytes()).map_err(io)
    }

    fn idempotent(&self, author: UserId, key: &str) -> Result<Option<ItemId>, StoreError> {
        let mut k = key_of(&[author.0]);
        k.extend_from_slice(key.as_bytes());
        match self.idempotency.get(k).map_err(io)? {
            Some(v) => Ok(Some(ItemId(u64_at(&v, 0)?))),
            None => Ok(None),
        }
    }

    fn health(&self) -> Result<(), StoreError> {
        // A no-op flush to the OS: fails once fjall has poisoned itself.
        self.db.persist(PersistMode::Buffer).map_err(io)
    }

    /// Group commit. The first caller to find no flush running becomes the
    /// leader: it takes every queued batch, commits them as one atomic fjall
    /// batch and persists once; callers arriving meanwhile wait and are
    /// covered by the next leader's flush. (fjall holds its journal lock
    /// during an fsync, so batching must happen here to share fsyncs.)
    /// On an I/O error fjall poisons the database: every later write fails
    /// and `/readyz` answers 503 until a restart reloads from disk.
    fn sync(&self, ticket: Ticket) -> Result<(), StoreError> {
        let mode = match self.sync {
            SyncMode::Fsync => PersistMode::SyncData,
            SyncMode::Buffer => PersistMode::Buffer,
        };
        let mut g = self.synced.lock();
        loop {
            if g.0 >= ticket {
                return Ok(());
            }
            if g.1 {
                self.sync_done.wait(&mut g);
                continue;
            }
            g.1 = true;
            drop(g);
            let (ops, upto) = {
                let mut p = self.pending.lock();
                (std::mem::take(&mut p.0), p.1)
            };
            let res = self.flush(ops, mode);
            g = self.synced.lock();
            g.1 = false;
            if res.is_ok() {
                g.0 = g.0.max(upto);
            }
            self.sync_done.notify_all();
            res?;
        }
    }
}

impl FjallJournal {
    fn space(&self, s: Space) -> &Keyspace {
        match s {
            Space::Items => &self.items,
            Space::Bodies => &self.bodies,
            Space::Outbox => &self.outbox,
            Space::Reposts => &self.reposts,
            Space::Replies => &self.replies,
            Space::Idempotency => &self.idempotency,
            Space::Inserts => &self.inserts,
            Space::Edges => &self.edges,
            Space::Jobs => &self.jobs,
            Space::Reactions => &self.reactions,
            Space::Promotions => &self.promotions,
        }
    }

    fn flush(&self, ops: Vec<Op>, mode: PersistMode) -> Result<(), StoreError> {
        if !ops.is_empty() {
            let mut b = self.db.batch();
            for op in ops {
                match op {
                    Op::Put(s, k, v) => b.insert(self.space(s), k, v),
                    Op::Del(s, k) => b.remove(self.space(s), k),
                }
            }
            b.commit().map_err(io)?;
        }
        self.db.persist(mode).map_err(io)
    }
}

/// Bulk loading for `tideway import`: writes straight into the engine, not
/// through the write path of the service (no journal batch per follow).
/// Holds the data directory's lock like a running server, so the two never
/// share a directory.
pub struct Importer {
    journal: FjallJournal,
    state: State,
}

impl Importer {
    /// Opens (creating if needed) `dir` and reads what it holds, so an import
    /// into a directory with data can respect the graph already there.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let (journal, state) = FjallJournal::open(dir, SyncMode::Buffer, 32 << 20)?;
        Ok(Self { journal, state })
    }

    /// What the directory held when opened.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// Writes follows, sorted by (follower, followee) and free of
    /// duplicates, in one ingestion: the engine builds its tables directly
    /// from the sorted stream, and registers them atomically at the end (a
    /// crash before that leaves none of them). `progress` is called with the
    /// count written so far, every 65,536 follows.
    pub fn ingest_follows(
        &self,
        follows: &[(UserId, UserId)],
        since: Millis,
        progress: &mut dyn FnMut(usize),
    ) -> Result<(), StoreError> {
        let since = u64::try_from(since.0.max(0)).unwrap_or(0).to_be_bytes();
        let mut ingestion = self.journal.edges.start_ingestion().map_err(io)?;
        for (i, &(from, to)) in follows.iter().enumerate() {
            ingestion.write(edge_key(EdgeKind::Follow, from, to), since.to_vec()).map_err(io)?;
            if i % 65_536 == 65_535 {
                progress(i + 1);
            }
        }
        ingestion.finish().map_err(io)?;
        progress(follows.len());
        Ok(())
    }

    /// Writes items (new ids, no fan-out job: inboxes are rebuilt from the
    /// outboxes on first read) as one atomic batch.
    pub fn write_items(&self, items: &[Item]) -> Result<(), StoreError> {
        let mut ops = Vec::with_capacity(items.len() * 3);
        for item in items {
            item_ops(item, true, &mut ops)?;
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

    /// Makes everything written durable (fsync), then writes the memtables
    /// out as tables, so the next start does not recover the import from
    /// the journal into memory.
    pub fn finish(self) -> Result<(), StoreError> {
        self.journal.db.persist(PersistMode::SyncAll).map_err(io)?;
        for ks in self.journal.keyspaces() {
            ks.rotate_memtable_and_wait().map_err(io)?;
        }
        Ok(())
    }
}

/// Opens the embedded backend in `dir` with the default cache size.
pub fn open(dir: &Path, sync: SyncMode, inbox_cap: usize) -> Result<Store<FjallJournal>, StoreError> {
    open_cached(dir, sync, inbox_cap, tideway_store::DEFAULT_BODY_CACHE)
}

/// Opens the embedded backend in `dir`, its caches bounded by `cache_bytes`
/// in all: half for fjall's blocks (as stored, compressed), half for the
/// decoded records and bodies pages read (see `Store::with_body_cache`).
pub fn open_cached(
    dir: &Path,
    sync: SyncMode,
    inbox_cap: usize,
    cache_bytes: u64,
) -> Result<Store<FjallJournal>, StoreError> {
    let blocks = (cache_bytes / 2).max(1 << 20);
    let (journal, state) = FjallJournal::open(dir, sync, blocks)?;
    Ok(Store::new(journal, state, inbox_cap).with_body_cache(cache_bytes - cache_bytes / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::ItemKind;
    use tideway_store::{FollowStatus, Graph, Items, JobProgress, Jobs};

    fn post(id: u64, author: u64) -> Item {
        Item {
            tags: vec!["rust".into()],
            idempotency_key: Some("k1".into()),
            ..Item::new(ItemId(id), UserId(author), ItemKind::Post)
        }
    }

    #[tokio::test]
    async fn everything_written_is_there_after_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
            s.create_item(post(100, 1), true, Millis(1)).await.expect("create");
            s.create_item(post(101, 2), true, Millis(2)).await.expect("create");
            s.update_item(ItemId(101), &tideway_store::ItemChange::Delete).await.expect("delete");
            let st = s.follow_many(UserId(3), &[UserId(1), UserId(2)], Millis(5), 10).await.expect("follow");
            assert_eq!(st, vec![FollowStatus::Followed(Millis(5)); 2]);
            s.unfollow(UserId(3), UserId(2)).await.expect("unfollow");
            s.set_block(UserId(4), UserId(1), true, Millis(6)).await.expect("block");
            s.insert_home(UserId(3), ItemId(100), 200).await.expect("insert");
            let recorded = s
                .advance(1, &[JobProgress::Checkpoint(100, (Millis(5), UserId(3))), JobProgress::Complete(101)])
                .await
                .expect("advance");
            assert_eq!(recorded, vec![true, true]);
            s.set_reaction(ItemId(100), UserId(5), "like", true).await.expect("react");
            s.set_reaction(ItemId(100), UserId(6), "like", true).await.expect("react");
            s.set_reaction(ItemId(100), UserId(6), "like", false).await.expect("unreact");
            s.set_reaction(ItemId(100), UserId(6), "x_wow", true).await.expect("react");
            let p = Promotion { id: 300, item: ItemId(100), every: 5, starts_at: Millis(1), ends_at: Millis(9) };
            s.create_promotion(p).await.expect("promotion");
        }
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
        match s.records(&[101]).await.expect("records").pop().flatten() {
            Some(tideway_store::Record::Item(i)) => assert!(i.deleted && i.tags == ["rust"]),
            other => panic!("the tombstone is stored: {other:?}"),
        }
        assert_eq!(
            s.create_item(post(102, 1), false, Millis(3)).await.expect("idempotent"),
            tideway_store::CreateOutcome::Existing(
                s.records(&[100])
                    .await
                    .expect("records")
                    .pop()
                    .flatten()
                    .and_then(|r| match r {
                        tideway_store::Record::Item(i) => Some(i),
                        _ => None,
                    })
                    .expect("item 100")
            ),
            "the idempotency key of item 100 is known after a restart"
        );
        let st = s.state();
        assert_eq!(st.items_live, 1);
        assert_eq!(st.user(UserId(1)).map(|u| (u.outbox.clone(), u.items)), Some((vec![100], 1)));
        assert_eq!(st.user(UserId(2)).map(|u| (u.outbox.clone(), u.items)), Some((vec![101], 0)));
        assert!(!st.records.contains_key(&100), "items are not loaded at start");
        assert_eq!(st.user(UserId(3)).map(|u| u.following.len()), Some(1));
        assert!(st.relation(UserId(4), UserId(1)).blocking);
        assert_eq!(st.first_insert.get(&(UserId(3), ItemId(100))), Some(&200));
        assert_eq!(st.jobs.len(), 1);
        assert_eq!(st.jobs.get(&100).and_then(|j| j.cursor), Some((Millis(5), UserId(3))));
        assert!(st.idempotency.is_empty(), "durable idempotency keys stay on disk");
        assert_eq!(s.journal().idempotent(UserId(1), "k1").expect("read"), Some(ItemId(100)));
        assert_eq!(st.reactions.counts(ItemId(100)), vec![("like".into(), 1), ("x_wow".into(), 1)]);
        assert_eq!(st.reactions.of_user(ItemId(100), UserId(6)), vec!["x_wow".to_owned()]);
        assert_eq!(st.promotions.get(&300).map(|p| p.every), Some(5));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writers_share_syncs_and_lose_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = std::sync::Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("open"));
            s.create_item(post(100, 1), false, Millis(1)).await.expect("create");
            let writers: Vec<_> = (0..8u64)
                .map(|t| {
                    let s = s.clone();
                    tokio::spawn(async move {
                        for i in 0..100u64 {
                            s.set_reaction(ItemId(100), UserId(1000 * (t + 1) + i), "like", true).await.expect("react");
                            s.follow_many(UserId(1000 * (t + 1) + i), &[UserId(1)], Millis(2), 10)
                                .await
                                .expect("follow");
                        }
                    })
                })
                .collect();
            for w in writers {
                w.await.expect("writer");
            }
        }
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
        let st = s.state();
        assert_eq!(st.reactions.counts(ItemId(100)), vec![("like".into(), 800)]);
        assert_eq!(st.user(UserId(1)).map(|u| u.followers.len()), Some(800));
    }

    #[tokio::test]
    async fn bodies_live_on_disk_and_survive_a_visibility_patch_across_reopens() {
        use tideway_store::{Items, is_stripped};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut body = serde_json::Map::new();
        body.insert("text".into(), serde_json::json!("hello"));
        {
            let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
            let item = Item { body: Arc::new(body.clone()), ..post(100, 1) };
            s.create_item(item, false, Millis(1)).await.expect("create");
            // Durable: the index keeps no record; the caches and the disk do.
            assert!(s.state().item(ItemId(100)).is_none());
            assert_eq!(s.record_cache_usage().0, 1);
            assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(Arc::new(body.clone()))]);
        }
        {
            let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen").with_body_cache(1 << 16);
            assert!(s.state().item(ItemId(100)).is_none(), "not loaded at start");
            match s.records(&[100]).await.expect("records").pop().flatten() {
                Some(tideway_store::Record::Item(i)) => {
                    assert!(is_stripped(&i.body), "a record, read without its body")
                }
                other => panic!("{other:?}"),
            }
            let patch =
                tideway_store::ItemChange::Patch { body: None, visibility: Some(tideway_core::Visibility::Followers) };
            s.update_item(ItemId(100), &patch).await.expect("patch").expect("exists");
        }
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
        assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(Arc::new(body))], "still on disk");
        assert_eq!(s.body_cache_usage().0, 1, "read once, cached");
    }

    #[test]
    fn a_second_process_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _a = open(dir.path(), SyncMode::Buffer, 10).expect("open");
        assert!(open(dir.path(), SyncMode::Buffer, 10).is_err());
    }

    #[test]
    fn a_directory_of_another_format_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let db = Database::builder(dir.path()).open().expect("fjall");
            let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
            meta.insert("format", "tideway-1").expect("insert");
            db.persist(PersistMode::SyncAll).expect("persist");
        }
        let err = open(dir.path(), SyncMode::Buffer, 10).map(|_| ()).expect_err("refused");
        let msg = err.to_string();
        assert!(msg.contains("tideway-1") && msg.contains("tideway-3"), "{msg}");
    }

    #[tokio::test]
    async fn a_tideway_2_directory_is_migrated_in_place() {
        use tideway_store::{Items, Record};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut body = serde_json::Map::new();
        body.insert("text".into(), serde_json::json!("old"));
        let original = Item { body: Arc::new(body.clone()), ..post(100, 1) };
        let reply = Item { reply_to: Some(ItemId(100)), idempotency_key: None, ..post(101, 2) };
        let repost =
            Item { repost_of: Some(ItemId(100)), kind: ItemKind::Repost, idempotency_key: None, ..post(102, 3) };
        {
            // The previous format: whole items, nothing else.
            let db = Database::builder(dir.path()).open().expect("fjall");
            let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
            let items = db.keyspace("items", KeyspaceCreateOptions::default).expect("items");
            meta.insert("format", "tideway-2").expect("format");
            for i in [&original, &reply, &repost] {
                items.insert(i.id.0.to_be_bytes(), serde_json::to_vec(i).expect("json")).expect("item");
            }
            db.persist(PersistMode::SyncAll).expect("persist");
        }
        for _ in 0..2 {
            let s = open(dir.path(), SyncMode::Buffer, 10).expect("open migrates");
            {
                let st = s.state();
                assert_eq!(st.items_live, 3);
                assert_eq!(st.replies.get(&ItemId(100)), Some(&1));
                assert_eq!(st.repost_by.get(&(UserId(3), ItemId(100))), Some(&ItemId(102)));
            }
            assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(Arc::new(body.clone()))]);
            match s.records(&[100]).await.expect("records").pop().flatten() {
                Some(Record::Item(i)) => assert_eq!(i.tags, ["rust"]),
                other => panic!("{other:?}"),
            }
            assert_eq!(s.journal().idempotent(UserId(1), "k1").expect("read"), Some(ItemId(100)));
        }
    }
}
