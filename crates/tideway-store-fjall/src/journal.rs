//! The fjall journal: its keyspaces, the encoding of changes into writes,
//! group commit, and the point reads behind the [`Journal`] trait.

use crate::layout::{
    ALL_SPACES, Op, SPACES, Space, counters_value, edge_in_key, edge_key, head_value, item_ops, json, key_of,
    millis_u64, note_op, session_ops,
};
use crate::synclog::{self, SyncLog};
use crate::{DATA_DIR, SyncMode, io};
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use tideway_store::{Change, Disk, Journal, State, StoreError, Ticket};

/// The fjall journal.
pub struct FjallJournal {
    /// First, so that it is dropped first: its thread holds the keyspaces,
    /// and the database closes only once it has stopped.
    rotator: Rotator,
    pub(crate) db: Database,
    pub(crate) meta: Keyspace,
    pub(crate) items: Keyspace,
    pub(crate) bodies: Keyspace,
    pub(crate) outbox: Keyspace,
    pub(crate) reposts: Keyspace,
    pub(crate) replies: Keyspace,
    pub(crate) idempotency: Keyspace,
    pub(crate) inserts: Keyspace,
    pub(crate) user_inserts: Keyspace,
    pub(crate) edges: Keyspace,
    pub(crate) edges_in: Keyspace,
    pub(crate) users: Keyspace,
    pub(crate) jobs: Keyspace,
    pub(crate) reactions: Keyspace,
    pub(crate) promotions: Keyspace,
    pub(crate) postings: Keyspace,
    pub(crate) notify: Keyspace,
    pub(crate) live: Keyspace,
    sync: SyncMode,
    /// Batches written but not yet committed, and the last ticket handed out.
    pending: Mutex<(Vec<Op>, Ticket)>,
    /// Group commit: (highest ticket known durable, a flush is running).
    synced: Mutex<(Ticket, bool)>,
    /// Wakes writers waiting for the running flush.
    sync_done: Condvar,
    /// Bytes written to each keyspace's memtable since it was last rotated
    /// (by [`Space`]), and the most one may take before it is: fjall keeps a
    /// keyspace's own limit from when the keyspace was created (64 MiB for
    /// stores made before this bound), so the journal rotates them itself.
    memtables: Mutex<[u64; SPACES]>,
    /// Where the journal rotates each keyspace's memtable ([`rotation_point`]).
    pub(crate) rotate_at: [u64; SPACES],
    /// With [`SyncMode::Fsync`], where group commit makes a round durable
    /// (`synclog.rs`), with the buffer its payloads are encoded in.
    log: Option<Mutex<(SyncLog, Vec<u8>)>>,
    /// Set when a write to the log failed: what it held may not be on
    /// disk, so no later write is acknowledged until a restart replays it.
    log_failed: AtomicBool,
}

/// What one write costs a memtable beyond its key and value (fjall's
/// entry and skip-list overhead, roughly).
const MEMTABLE_ENTRY: u64 = 48;

/// Builds the batches of a bulk rewrite, flushing every 50,000 writes.
pub(crate) struct Batches<'a> {
    pub(crate) j: &'a FjallJournal,
    pub(crate) ops: Vec<Op>,
}

impl Batches<'_> {
    pub(crate) fn push(&mut self, op: Op) -> Result<(), StoreError> {
        self.ops.push(op);
        if self.ops.len() >= 50_000 {
            self.j.flush(std::mem::take(&mut self.ops), PersistMode::Buffer)?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<(), StoreError> {
        self.j.flush(self.ops, PersistMode::SyncAll)
    }
}

impl FjallJournal {
    /// Opens (creating if needed) the data directory and reads the few
    /// things a lazy index starts from. Fails if another process has the
    /// directory open. `block_cache` bounds fjall's cache of (encoded)
    /// blocks; each keyspace's memtable (recent writes, until fjall writes
    /// them out as a table) is held to a quarter of it ([`memtable_cap`]).
    pub fn open(dir: &Path, sync: SyncMode, block_cache: u64) -> Result<(Self, State), StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Config {
            setting: DATA_DIR,
            message: format!("cannot create {}", dir.display()),
            source: Some(Box::new(e)),
        })?;
        // A journal of at most 64 MiB (fjall's least; its default is 512):
        // what it holds is recovered into memtables at start, so this bounds
        // the memory of recent writes after a restart.
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let builder = Database::builder(dir).cache_size(block_cache).max_journaling_size(64 << 20);
        let builder = match fjall_workers(cores) {
            Some(n) => builder.worker_threads(n),
            None => builder,
        };
        let db = builder.open().map_err(|e| match e {
            fjall::Error::Locked => {
                StoreError::config(DATA_DIR, format!("{} is in use by another tideway process", dir.display()))
            }
            e => io(e),
        })?;
        // fjall's default is 64 MiB per keyspace: with the 18 here, recent
        // writes alone could hold over a GiB before anything is written out.
        let memtable = memtable_cap(block_cache);
        // Filters and block indexes are read through the block cache, none
        // pinned: fjall's default pins the first levels' (outside any
        // budget), and a table flushed to the first level and then moved
        // down whole keeps them pinned until a restart, so what stayed in
        // memory grew by ~3 bytes per item written (docs/benchmarks.md,
        // 2026-12-05). fjall stores a keyspace's options when it creates it:
        // directories created before keep their pinning.
        //
        // fjall's own limit of a keyspace's memtable is set out of the
        // journal's way (`FJALL_MEMTABLE_LIMIT`): each write to a keyspace
        // over it queues a rotation request for fjall's workers, and a flood
        // of those while they are busy can deadlock them ([`rotation_point`]).
        let opts = || {
            KeyspaceCreateOptions::default()
                .max_memtable_size(FJALL_MEMTABLE_LIMIT)
                .index_block_pinning_policy(fjall::config::PinningPolicy::all(false))
                .filter_block_pinning_policy(fjall::config::PinningPolicy::all(false))
        };
        // Those not here yet are created by this open, with the limit above.
        let existed = db.list_keyspace_names();
        let ks = |name: &str| db.keyspace(name, opts).map_err(io);
        let mut j = FjallJournal {
            meta: ks("meta")?,
            items: ks("items")?,
            // Bodies are read only for items known to exist: no filter on
            // the last level.
            bodies: db.keyspace("bodies", || opts().expect_point_read_hits(true)).map_err(io)?,
            outbox: ks("outbox")?,
            reposts: ks("reposts")?,
            replies: ks("replies")?,
            idempotency: ks("idempotency")?,
            inserts: ks("inserts")?,
            user_inserts: ks("user_inserts")?,
            edges: ks("edges")?,
            edges_in: ks("edges_in")?,
            users: ks("users")?,
            jobs: ks("jobs")?,
            reactions: ks("reactions")?,
            promotions: ks("promotions")?,
            postings: ks("postings")?,
            notify: ks("notify")?,
            live: ks("live")?,
            db,
            sync,
            pending: Mutex::new((Vec::new(), 0)),
            synced: Mutex::new((0, false)),
            sync_done: Condvar::new(),
            memtables: Mutex::new([0; SPACES]),
            rotate_at: [memtable; SPACES],
            rotator: Rotator::default(),
            log: None,
            log_failed: AtomicBool::new(false),
        };
        // Recorded before anything is written to them; a crash before the
        // record leaves a keyspace treated as one made before (rotated
        // earlier than it needs, never later).
        let created: Vec<&Keyspace> = j.keyspaces().into_iter().filter(|k| !existed.contains(k.name())).collect();
        for k in &created {
            j.meta.insert(limit_key(k.name()), FJALL_MEMTABLE_LIMIT.to_le_bytes()).map_err(io)?;
        }
        if !created.is_empty() {
            j.db.persist(PersistMode::SyncAll).map_err(io)?;
        }
        let mut rotate_at = [memtable; SPACES];
        for (at, k) in rotate_at.iter_mut().zip(j.keyspaces()) {
            let recorded = j.meta.get(limit_key(k.name())).map_err(io)?;
            let limit = recorded.and_then(|v| <[u8; 8]>::try_from(&v[..]).ok()).map(u64::from_le_bytes);
            *at = rotation_point(memtable, limit);
        }
        j.rotate_at = rotate_at;
        j.rotator = Rotator::start(j.keyspaces().map(Keyspace::clone))
            .map_err(|e| StoreError::unavailable(tideway_store::Engine::Embedded, e))?;
        let next_seq = j.replay_log(dir)?;
        if sync == SyncMode::Fsync {
            let log = SyncLog::open(dir, next_seq).map_err(log_io)?;
            j.log = Some(Mutex::new((log, Vec::new())));
        }
        j.ensure_format()?;
        let state = j.load()?;
        Ok((j, state))
    }

    pub(crate) fn keyspaces(&self) -> [&Keyspace; SPACES] {
        ALL_SPACES.map(|s| self.space(s))
    }

    /// Bytes on disk.
    pub fn disk_space(&self) -> u64 {
        self.keyspaces().iter().map(|k| k.disk_space()).sum()
    }

    /// Encodes one change.
    fn encode(c: &Change, ops: &mut Vec<Op>) -> Result<(), StoreError> {
        match c {
            Change::PutItem(item) => item_ops(item, true, ops)?,
            Change::UpdateItem(item) => item_ops(item, false, ops)?,
            Change::PutInsert { key, user, item } => {
                ops.push(Op::Put(Space::Inserts, key_of(&[*key]), key_of(&[user.0, item.0])));
                ops.push(Op::Put(Space::UserInserts, key_of(&[user.0, *key]), key_of(&[item.0])));
            }
            Change::PutEdge { kind, from, to, since } => {
                ops.push(Op::Put(Space::Edges, edge_key(*kind, *from, *to), millis_u64(*since).to_be_bytes().to_vec()));
                if let Some(k) = edge_in_key(*kind, *from, *to, *since) {
                    ops.push(Op::Put(Space::EdgesIn, k, Vec::new()));
                }
            }
            Change::DelEdge { kind, from, to, since } => {
                ops.push(Op::Del(Space::Edges, edge_key(*kind, *from, *to)));
                if let Some(k) = edge_in_key(*kind, *from, *to, *since) {
                    ops.push(Op::Del(Space::EdgesIn, k));
                }
            }
            Change::PutJob(job) => ops.push(Op::Put(Space::Jobs, key_of(&[job.key]), json(job)?)),
            Change::DelJob(key) => ops.push(Op::Del(Space::Jobs, key_of(&[*key]))),
            Change::SetReaction { item, user, kind, on } => {
                let mut k = key_of(&[item.0, user.0]);
                k.extend_from_slice(kind.as_bytes());
                ops.push(if *on { Op::Put(Space::Reactions, k, Vec::new()) } else { Op::Del(Space::Reactions, k) });
            }
            Change::PutPromotion(p) => ops.push(Op::Put(Space::Promotions, key_of(&[p.id]), json(p)?)),
            Change::PutHead(u, h) => ops.push(Op::Put(Space::Users, key_of(&[u.0]), head_value(h))),
            Change::PutCounters(c) => ops.push(Op::Put(Space::Meta, b"counters".to_vec(), counters_value(c))),
            // Notification changes are kept as the rows they wrote.
            Change::Notify(_) | Change::NotifyMark { .. } => {}
            Change::NoteRow(row) => ops.push(note_op(row)?),
            Change::PutSession(session) => ops.extend(session_ops(session)?),
        }
        Ok(())
    }
}

impl Journal for FjallJournal {
    /// Encodes the batch and queues it; the caller's `sync` commits it.
    fn write(&self, changes: &[Change]) -> Result<Ticket, StoreError> {
        let mut ops = Vec::with_capacity(changes.len() * 2);
        for c in changes {
            Self::encode(c, &mut ops)?;
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

    fn durable(&self) -> Ticket {
        self.synced.lock().0
    }

    /// The keyspaces, read back by the lazy index (`load.rs`).
    fn disk(&self) -> Option<&dyn Disk> {
        Some(self)
    }

    fn health(&self) -> Result<(), StoreError> {
        self.log_ok()?;
        // A no-op flush to the OS: fails once fjall has poisoned itself.
        self.db.persist(PersistMode::Buffer).map_err(io)
    }

    /// Group commit. The first caller to find no flush running becomes the
    /// leader: it takes every queued batch, commits them as one atomic fjall
    /// batch and persists once (with `fsync`, as one frame of the sync log:
    /// [`Self::commit_logged`]); callers arriving meanwhile wait and are
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
            let res = match &self.log {
                Some(log) => self.commit_logged(log, ops),
                None => self.flush(ops, mode),
            };
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

/// How many background workers fjall runs (flushes and compactions) on a
/// machine of `cores`: one on two cores or fewer, else `None`, fjall's own
/// choice (a worker a core, at most four, in fjall 3.1). With more than
/// one, fjall's worker 0 keeps itself free for flushes by sending every
/// compaction it receives back to the queue, and receives it again at once
/// while the others are busy: a busy loop for as long as a compaction runs, which on two cores
/// is half the machine. One worker flushes after the compaction it is
/// running instead; on this machine that lost nothing (the drain, the
/// page, the mix, and a soak of 5M posts with reads: memory, throughput and
/// write latency alike) and gained durable likes on many items in six pairs
/// of six (×1.04–1.42), on one item in five (×0.91–1.15; docs/benchmarks.md,
/// 2026-12-06 evening). Larger machines keep fjall's default, unmeasured.
pub(crate) fn fjall_workers(cores: usize) -> Option<usize> {
    (cores <= 2).then_some(1)
}

/// The most bytes a keyspace's memtable takes before it is written out:
/// a quarter of the block cache, between 1 and 32 MiB (8 MiB for the
/// default `storage.cache_size` of 128 MiB, whose quarter is the block
/// cache).
pub(crate) fn memtable_cap(block_cache: u64) -> u64 {
    (block_cache / 4).clamp(1 << 20, MAX_MEMTABLE_CAP)
}

/// The largest [`memtable_cap`].
const MAX_MEMTABLE_CAP: u64 = 32 << 20;

/// fjall's own memtable limit for the keyspaces the journal creates: four
/// times the largest cap, so that the journal's rotation at its cap comes
/// first whatever `storage.cache_size` is now or later.
pub(crate) const FJALL_MEMTABLE_LIMIT: u64 = 4 * MAX_MEMTABLE_CAP;

/// The meta key recording fjall's limit for keyspace `name`, written when
/// the journal creates it (fjall stores the limit but does not expose it).
pub(crate) fn limit_key(name: &str) -> Vec<u8> {
    [b"memtable_limit:".as_slice(), name.as_bytes()].concat()
}

/// Where the journal rotates a keyspace's memtable, given its cap and the
/// recorded fjall limit of the keyspace (`None`: made before the record).
///
/// The rotation must come well before fjall's limit. Past that limit, every
/// write to the keyspace queues a rotation request for fjall's workers (a
/// queue of 1,000, requests dropped when full). A worker that rotates then
/// sends the flush with a blocking send, as the journal's [`Rotator`] does.
/// If the queue fills while every worker is busy and all block in such a send,
/// none receives: flushes stop and memtables grow without bound. Seen with one
/// worker in a soak (docs/benchmarks.md, 2026-12-06 afternoon). A keyspace made
/// before the record has a limit of 64 MiB (fjall's default) or of the cap of
/// its day, so it is rotated at half the cap.
pub(crate) fn rotation_point(cap: u64, fjall_limit: Option<u64>) -> u64 {
    match fjall_limit {
        Some(limit) => cap.min(limit / 2),
        None => cap / 2,
    }
}

impl FjallJournal {
    pub(crate) fn space(&self, s: Space) -> &Keyspace {
        match s {
            Space::Meta => &self.meta,
            Space::Items => &self.items,
            Space::Bodies => &self.bodies,
            Space::Outbox => &self.outbox,
            Space::Reposts => &self.reposts,
            Space::Replies => &self.replies,
            Space::Idempotency => &self.idempotency,
            Space::Inserts => &self.inserts,
            Space::UserInserts => &self.user_inserts,
            Space::Edges => &self.edges,
            Space::EdgesIn => &self.edges_in,
            Space::Users => &self.users,
            Space::Jobs => &self.jobs,
            Space::Reactions => &self.reactions,
            Space::Promotions => &self.promotions,
            Space::Postings => &self.postings,
            Space::Notify => &self.notify,
            Space::Live => &self.live,
        }
    }

    pub(crate) fn flush(&self, ops: Vec<Op>, mode: PersistMode) -> Result<(), StoreError> {
        self.commit(ops)?;
        self.db.persist(mode).map_err(io)
    }

    /// Writes a batch to fjall's memtables and (buffered) journal.
    fn commit(&self, ops: Vec<Op>) -> Result<(), StoreError> {
        if !ops.is_empty() {
            let mut written = [0u64; SPACES];
            let mut b = self.db.batch();
            for op in ops {
                match op {
                    Op::Put(s, k, v) => {
                        written[s.index()] += (k.len() + v.len()) as u64 + MEMTABLE_ENTRY;
                        b.insert(self.space(s), k, v);
                    }
                    Op::Del(s, k) => {
                        written[s.index()] += k.len() as u64 + MEMTABLE_ENTRY;
                        b.remove(self.space(s), k);
                    }
                }
            }
            b.commit().map_err(io)?;
            self.rotate_full_memtables(&written);
        }
        Ok(())
    }

    /// Group commit's round with the sync log: the batch is made durable
    /// as one frame of the log, then committed to fjall unsynced. A batch
    /// too large for the log is persisted by fjall itself. When the log is
    /// full, fjall is persisted first (then it holds all the log held) and
    /// the log starts over (`synclog.rs`).
    fn commit_logged(&self, log: &Mutex<(SyncLog, Vec<u8>)>, ops: Vec<Op>) -> Result<(), StoreError> {
        self.log_ok()?;
        if ops.is_empty() {
            return Ok(());
        }
        let mut guard = log.lock();
        let (log, payload) = &mut *guard;
        synclog::encode_ops(&ops, payload);
        if !log.could_hold(payload.len()) {
            drop(guard);
            return self.flush(ops, PersistMode::SyncData);
        }
        if !log.fits(payload.len()) {
            self.meta.insert(synclog::BASE_KEY, log.next_seq().to_le_bytes()).map_err(io)?;
            self.db.persist(PersistMode::SyncData).map_err(io)?;
            log.wrap();
        }
        if let Err(e) = log.append(payload) {
            // What it held may not be on disk: no later round may be
            // acknowledged over the gap.
            self.log_failed.store(true, Ordering::Release);
            return Err(log_io(e));
        }
        drop(guard);
        self.commit(ops)
    }

    /// Fails once a write to the sync log has.
    fn log_ok(&self) -> Result<(), StoreError> {
        if self.log_failed.load(Ordering::Acquire) {
            return Err(StoreError::unavailable_because(
                tideway_store::Engine::Embedded,
                "a write to the sync log failed; restart to recover from the disk",
            ));
        }
        Ok(())
    }

    /// Replays into fjall the frames of the sync log it may not hold
    /// (`synclog.rs`), persists them, and returns the sequence number the
    /// log's next frame takes.
    fn replay_log(&self, dir: &Path) -> Result<u64, StoreError> {
        let base = match self.meta.get(synclog::BASE_KEY).map_err(io)? {
            Some(v) => u64::from_le_bytes(
                v.as_ref().try_into().map_err(|_| StoreError::corrupt("the sync log's base in meta"))?,
            ),
            None => 0,
        };
        let found = SyncLog::recover(dir, base).map_err(log_io)?;
        if !found.payloads.is_empty() {
            tracing::info!(frames = found.payloads.len(), "replaying the sync log");
            for p in &found.payloads {
                let ops = synclog::decode_ops(p).ok_or_else(|| StoreError::corrupt("a frame of the sync log"))?;
                self.commit(ops)?;
            }
            self.meta.insert(synclog::BASE_KEY, found.next_seq.to_le_bytes()).map_err(io)?;
            self.db.persist(PersistMode::SyncAll).map_err(io)?;
        }
        Ok(found.next_seq)
    }

    /// Counts what a batch wrote to each memtable and has the full ones
    /// handed to fjall's flush workers (they become tables on disk; until
    /// then a sealed memtable still holds its memory: twice this cap per
    /// keyspace while a flush runs, and with one worker, whose flushes wait
    /// for the compaction it is running, at most five, since fjall holds a
    /// keyspace's writes while four sealed memtables wait; plus what is
    /// written while the [`Rotator`] gets to it).
    fn rotate_full_memtables(&self, written: &[u64; SPACES]) {
        let mut m = self.memtables.lock();
        for (i, w) in written.iter().enumerate() {
            debug_assert_eq!(ALL_SPACES[i].index(), i);
            m[i] += w;
            if m[i] > self.rotate_at[i] {
                m[i] = 0;
                self.rotator.rotate(i);
            }
        }
    }

    /// Writes every keyspace's memtable out as a table, and waits (tests).
    #[cfg(test)]
    pub(crate) fn flush_memtables(&self) -> Result<(), StoreError> {
        self.keyspaces().iter().try_for_each(|k| k.rotate_memtable_and_wait().map_err(io))
    }

    /// How many tables the keyspaces hold (tests).
    #[cfg(test)]
    pub(crate) fn table_count(&self) -> usize {
        self.keyspaces().iter().map(|k| k.table_count()).sum()
    }
}

/// Rotates full memtables on a thread of its own, off the write path.
/// fjall's rotation takes its journal's lock and then tidies every
/// keyspace's version history, which waits for a flush or compaction
/// running meanwhile: inside group commit it held a round, and every
/// writer behind it, for 134 ms (a fan-out step's progress sync after the
/// Twitter run's posts, docs/benchmarks.md, 2026-12-06).
#[derive(Default)]
struct Rotator {
    /// Indexes into [`ALL_SPACES`] of the keyspaces to rotate.
    tx: Option<std::sync::mpsc::Sender<usize>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Rotator {
    fn start(spaces: [Keyspace; SPACES]) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel::<usize>();
        let thread = std::thread::Builder::new().name("tideway:rotate".into()).spawn(move || {
            for i in rx {
                // A failure is an I/O error of fjall's (its journal or
                // version files): the memtable stays active, to be rotated
                // at the next cap's worth of writes, or by fjall's own
                // limit; a poisoned journal fails the next write anyway.
                if let Err(e) = spaces[i].rotate_memtable() {
                    tracing::error!(error = %e, keyspace = ?spaces[i].name(), "rotating a full memtable failed");
                }
            }
        })?;
        Ok(Self { tx: Some(tx), thread: Some(thread) })
    }

    /// Asks for keyspace `i`'s memtable to be rotated. Without a thread
    /// (only while the journal opens) nothing is written yet to rotate.
    fn rotate(&self, i: usize) {
        if let Some(tx) = &self.tx {
            // (the thread outlives the sender: it ends once this is dropped)
            let _ = tx.send(i);
        }
    }
}

impl Drop for Rotator {
    /// Stops the thread once it has rotated what it was asked to.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An I/O error of the sync log: the disk cannot serve.
fn log_io(e: std::io::Error) -> StoreError {
    StoreError::unavailable(tideway_store::Engine::Embedded, e)
}
