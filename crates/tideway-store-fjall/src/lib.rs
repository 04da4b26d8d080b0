//! The embedded durable backend: a [`Journal`] on the fjall LSM engine.
//!
//! fjall holds the source of truth (items, insertions, edges, fan-out jobs);
//! at start-up its contents are replayed into the in-memory index of
//! [`tideway_store::Store`], and every later change is written here in one
//! atomic batch (all keyspaces share fjall's journal) before it is applied
//! and acknowledged. Why fjall: see ARCHITECTURE.md ("Embedded engine").
//!
//! Layout (all integers big-endian so keys sort numerically):
//!
//! | keyspace  | key                          | value                  |
//! |-----------|------------------------------|------------------------|
//! | `items`   | item id (8)                  | item, JSON             |
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

const FORMAT: &[u8] = b"tideway-2";

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
    pub fn open(dir: &Path, sync: SyncMode) -> Result<(Self, State), StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io(format!("creating {}: {e}", dir.display())))?;
        let db = Database::builder(dir).open().map_err(|e| match e {
            fjall::Error::Locked => StoreError::Io(format!("{} is in use by another tideway process", dir.display())),
            e => io(e),
        })?;
        let ks = |name: &str| db.keyspace(name, KeyspaceCreateOptions::default).map_err(io);
        let meta = ks("meta")?;
        match meta.get("format").map_err(io)? {
            Some(v) if &*v == FORMAT => {}
            Some(v) => {
                return Err(StoreError::Corrupt(format!(
                    "data directory has format {:?}, this build reads {:?}",
                    String::from_utf8_lossy(&v),
                    String::from_utf8_lossy(FORMAT)
                )));
            }
            None => meta.insert("format", FORMAT).map_err(io)?,
        }
        let j = FjallJournal {
            items: ks("items")?,
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
        let state = j.load()?;
        Ok((j, state))
    }

    fn load(&self) -> Result<State, StoreError> {
        let mut st = State::default();
        for g in self.items.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            let mut item: Item = serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("item: {e}")))?;
            // Bodies stay on disk: the index holds what pages filter on.
            item.body = tideway_store::stripped_body();
            st.apply(Change::PutItem(Arc::new(item)));
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

    /// Bytes on disk.
    pub fn disk_space(&self) -> u64 {
        [&self.items, &self.inserts, &self.edges, &self.jobs, &self.reactions, &self.promotions]
            .iter()
            .map(|k| k.disk_space())
            .sum()
    }
}

impl Journal for FjallJournal {
    /// Encodes the batch and queues it; the caller's `sync` commits it.
    fn write(&self, changes: &[Change]) -> Result<Ticket, StoreError> {
        let mut ops = Vec::with_capacity(changes.len());
        for c in changes {
            match c {
                Change::PutItem(item) => {
                    let v = serde_json::to_vec(&**item).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                    ops.push(Op::Put(Space::Items, item.id.0.to_be_bytes().to_vec(), v));
                }
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

    fn keeps_bodies(&self) -> bool {
        true
    }

    /// Point reads of the items keyspace (fjall's block cache and the OS
    /// page cache serve the warm ones).
    fn read_bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<(tideway_core::Body, usize)>>, StoreError> {
        ids.iter()
            .map(|id| {
                let Some(v) = self.items.get(id.0.to_be_bytes()).map_err(io)? else { return Ok(None) };
                let item: Item =
                    serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("item {id}: {e}")))?;
                Ok(Some((item.body, v.len())))
            })
            .collect()
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
        let (journal, state) = FjallJournal::open(dir, SyncMode::Buffer)?;
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
        let mut b = self.journal.db.batch();
        for item in items {
            let v = serde_json::to_vec(item).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            b.insert(&self.journal.items, item.id.0.to_be_bytes().to_vec(), v);
        }
        b.commit().map_err(io)
    }

    /// Makes everything written durable (fsync).
    pub fn finish(self) -> Result<(), StoreError> {
        self.journal.db.persist(PersistMode::SyncAll).map_err(io)
    }
}

/// Opens the embedded backend in `dir`.
pub fn open(dir: &Path, sync: SyncMode, inbox_cap: usize) -> Result<Store<FjallJournal>, StoreError> {
    let (journal, state) = FjallJournal::open(dir, sync)?;
    Ok(Store::new(journal, state, inbox_cap))
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
        let st = s.state();
        assert_eq!(st.items_live, 1);
        assert!(st.item(ItemId(101)).is_some_and(|i| i.deleted));
        assert_eq!(st.user(UserId(3)).map(|u| u.following.len()), Some(1));
        assert!(st.relation(UserId(4), UserId(1)).blocking);
        assert_eq!(st.first_insert.get(&(UserId(3), ItemId(100))), Some(&200));
        assert_eq!(st.jobs.len(), 1);
        assert_eq!(st.jobs.get(&100).and_then(|j| j.cursor), Some((Millis(5), UserId(3))));
        assert_eq!(st.idempotency.get(&(UserId(1), "k1".into())), Some(&ItemId(100)));
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
            // Durable: the index keeps the item without its body.
            assert!(s.state().item(ItemId(100)).is_some_and(|i| is_stripped(&i.body)));
            assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(Arc::new(body.clone()))]);
        }
        {
            let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen").with_body_cache(1 << 16);
            assert!(s.state().item(ItemId(100)).is_some_and(|i| is_stripped(&i.body)), "not loaded at start");
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
        assert!(msg.contains("tideway-1") && msg.contains("tideway-2"), "{msg}");
    }
}
