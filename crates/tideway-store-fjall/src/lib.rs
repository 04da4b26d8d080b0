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
//! reactions) is read from the keyspaces below the first time a page or a
//! write needs it ([`Journal::load_units`]), and pages read records and
//! bodies through bounded caches. Why fjall: see ARCHITECTURE.md
//! ("Embedded engine").
//!
//! Layout (format `tideway-4`; all integers big-endian so keys sort
//! numerically):
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
//! | `user_inserts` | user (8) + insertion key (8) | item (8)          |
//! | `edges`   | kind (1) + from (8) + to (8) | since, ms (8)          |
//! | `edges_in` | `f` + to (8) + since (8) + from (8); `b` + to (8) + from (8) | empty |
//! | `users`   | user (8)                     | following, followers, live items (3 × 8) |
//! | `jobs`    | job key (8)                  | job, JSON              |
//! | `reactions` | item (8) + user (8) + kind | empty                  |
//! | `promotions` | promotion id (8)          | promotion, JSON        |
//! | `meta`    | `format`; `counters`; `rebuild` (an import is under way) | format version; users, live items, follows, largest key (4 × 8) |
//!
//! `edges_in`, `users`, `user_inserts` and the counters are derived from the
//! rest: written in the same batches, and rebuilt from it when a directory
//! of an older format is opened or an import was interrupted.

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Millis, UserId};
use tideway_store::{
    Change, Counters, EdgeKind, Head, Journal, Record, State, Store, StoreError, Ticket, Unit, UnitData,
};

const FORMAT: &[u8] = b"tideway-4";
/// Items whole in `items`, replayed at start-up. Migrated in place.
const FORMAT_2: &[u8] = b"tideway-2";
/// Per-item index keyspaces loaded at start-up, no reverse edges, counters
/// or heads. Migrated in place.
const FORMAT_3: &[u8] = b"tideway-3";

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
    meta: Keyspace,
    items: Keyspace,
    bodies: Keyspace,
    outbox: Keyspace,
    reposts: Keyspace,
    replies: Keyspace,
    idempotency: Keyspace,
    inserts: Keyspace,
    user_inserts: Keyspace,
    edges: Keyspace,
    edges_in: Keyspace,
    users: Keyspace,
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
    Meta,
    Items,
    Bodies,
    Outbox,
    Reposts,
    Replies,
    Idempotency,
    Inserts,
    UserInserts,
    Edges,
    EdgesIn,
    Users,
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

fn millis_u64(m: Millis) -> u64 {
    u64::try_from(m.0.max(0)).unwrap_or(0)
}

fn head_value(h: &Head) -> Vec<u8> {
    key_of(&[h.following, h.followers, h.items])
}

fn head_of(v: &[u8]) -> Result<Head, StoreError> {
    Ok(Head { following: u64_at(v, 0)?, followers: u64_at(v, 8)?, items: u64_at(v, 16)? })
}

fn counters_value(c: &Counters) -> Vec<u8> {
    key_of(&[c.users, c.items_live, c.follows, c.max_key])
}

fn counters_of(v: &[u8]) -> Result<Counters, StoreError> {
    Ok(Counters { users: u64_at(v, 0)?, items_live: u64_at(v, 8)?, follows: u64_at(v, 16)?, max_key: u64_at(v, 24)? })
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

/// The reverse entry of an edge, for the followers (by time) and the
/// blockers of `to`; mutes have none.
fn edge_in_key(kind: EdgeKind, from: UserId, to: UserId, since: Millis) -> Option<Vec<u8>> {
    match kind {
        EdgeKind::Follow => {
            let mut k = vec![b'f'];
            k.extend_from_slice(&key_of(&[to.0, millis_u64(since), from.0]));
            Some(k)
        }
        EdgeKind::Block => {
            let mut k = vec![b'b'];
            k.extend_from_slice(&key_of(&[to.0, from.0]));
            Some(k)
        }
        EdgeKind::Mute => None,
    }
}

/// Run lengths of a sorted sequence: each distinct value and how many times.
fn runs(sorted: impl Iterator<Item = UserId>) -> Vec<(UserId, u64)> {
    let mut out: Vec<(UserId, u64)> = Vec::new();
    for u in sorted {
        match out.last_mut() {
            Some((last, n)) if *last == u => *n += 1,
            _ => out.push((u, 1)),
        }
    }
    out
}

fn prefixed(tag: u8, id: u64) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// Builds the batches of a bulk rewrite, flushing every 50,000 writes.
struct Batches<'a> {
    j: &'a FjallJournal,
    ops: Vec<Op>,
}

impl Batches<'_> {
    fn push(&mut self, op: Op) -> Result<(), StoreError> {
        self.ops.push(op);
        if self.ops.len() >= 50_000 {
            self.j.flush(std::mem::take(&mut self.ops), PersistMode::Buffer)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<(), StoreError> {
        self.j.flush(self.ops, PersistMode::SyncAll)
    }
}

impl FjallJournal {
    /// Opens (creating if needed) the data directory and reads the few
    /// things a lazy index starts from. Fails if another process has the
    /// directory open. `block_cache` bounds fjall's cache of (encoded)
    /// blocks.
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
        let j = FjallJournal {
            meta: ks("meta")?,
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
            user_inserts: ks("user_inserts")?,
            edges: ks("edges")?,
            edges_in: ks("edges_in")?,
            users: ks("users")?,
            jobs: ks("jobs")?,
            reactions: ks("reactions")?,
            promotions: ks("promotions")?,
            db,
            sync,
            pending: Mutex::new((Vec::new(), 0)),
            synced: Mutex::new((0, false)),
            sync_done: Condvar::new(),
        };
        let format = j.meta.get("format").map_err(io)?;
        match format.as_deref() {
            Some(v) if v == FORMAT => {
                if j.meta.contains_key("rebuild").map_err(io)? {
                    tracing::warn!("an import into this directory was interrupted: rebuilding its derived indexes");
                    j.build_derived()?;
                    j.meta.remove("rebuild").map_err(io)?;
                    j.db.persist(PersistMode::SyncAll).map_err(io)?;
                }
            }
            Some(v) if v == FORMAT_2 || v == FORMAT_3 => {
                if v == FORMAT_2 {
                    j.migrate_from_2()?;
                    j.meta.insert("format", FORMAT_3).map_err(io)?;
                    j.db.persist(PersistMode::SyncAll).map_err(io)?;
                }
                j.build_derived()?;
                j.meta.insert("format", FORMAT).map_err(io)?;
                j.db.persist(PersistMode::SyncAll).map_err(io)?;
            }
            Some(v) => {
                return Err(StoreError::Corrupt(format!(
                    "data directory has format {:?}, this build reads {:?} (and migrates {:?} and {:?})",
                    String::from_utf8_lossy(v),
                    String::from_utf8_lossy(FORMAT),
                    String::from_utf8_lossy(FORMAT_2),
                    String::from_utf8_lossy(FORMAT_3),
                )));
            }
            None => {
                j.meta.insert("format", FORMAT).map_err(io)?;
                j.meta.insert("counters", counters_value(&Counters::default())).map_err(io)?;
                j.db.persist(PersistMode::SyncAll).map_err(io)?;
            }
        }
        let state = j.load()?;
        Ok((j, state))
    }

    /// Rewrites a `tideway-2` directory's items (whole records, replayed at
    /// start-up) into records, bodies and index keyspaces, in batches;
    /// idempotent, so a crash midway is finished by the next open.
    fn migrate_from_2(&self) -> Result<(), StoreError> {
        tracing::info!("migrating the data directory from tideway-2 (items leave the start-up path)");
        let started = std::time::Instant::now();
        let mut out = Batches { j: self, ops: Vec::new() };
        let mut n = 0u64;
        for g in self.items.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            let item: Item = serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("item: {e}")))?;
            let mut ops = Vec::new();
            item_ops(&item, true, &mut ops)?;
            for op in ops {
                out.push(op)?;
            }
            n += 1;
        }
        out.finish()?;
        tracing::info!(items = n, secs = started.elapsed().as_secs_f64(), "migrated the items");
        Ok(())
    }

    /// Writes what is derived from the edges, outboxes, insertions and
    /// promotions: the reverse edges, every user's counters, the insertions
    /// by user and the store-wide counters. Idempotent (it recounts
    /// everything): run on a directory of format 3 and after an interrupted
    /// import. One pass over those keyspaces, with the users' counters in
    /// memory.
    fn build_derived(&self) -> Result<(), StoreError> {
        tracing::info!("building the derived indexes (reverse edges, per-user counters)");
        let started = std::time::Instant::now();
        let mut heads: HashMap<u64, Head> = HashMap::new();
        let mut c = Counters::default();
        let mut out = Batches { j: self, ops: Vec::new() };
        for g in self.users.iter() {
            heads.entry(u64_at(&g.key().map_err(io)?, 0)?).or_default();
        }
        for g in self.edges.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let (from, to) = (u64_at(&k, 1)?, u64_at(&k, 9)?);
            let kind = match k.first() {
                Some(b'f') => EdgeKind::Follow,
                Some(b'b') => EdgeKind::Block,
                Some(b'm') => EdgeKind::Mute,
                other => return Err(StoreError::Corrupt(format!("edge kind {other:?}"))),
            };
            let since = Millis(i64::try_from(u64_at(&v, 0)?).unwrap_or(0));
            if kind == EdgeKind::Follow {
                heads.entry(from).or_default().following += 1;
                heads.entry(to).or_default().followers += 1;
                c.follows += 1;
            } else {
                heads.entry(from).or_default();
                heads.entry(to).or_default();
            }
            if let Some(rk) = edge_in_key(kind, UserId(from), UserId(to), since) {
                out.push(Op::Put(Space::EdgesIn, rk, Vec::new()))?;
            }
        }
        for g in self.outbox.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let (author, id) = (u64_at(&k, 0)?, u64_at(&k, 8)?);
            let h = heads.entry(author).or_default();
            if v.first() == Some(&1) {
                h.items += 1;
                c.items_live += 1;
            }
            c.max_key = c.max_key.max(id);
        }
        for g in self.inserts.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let (key, user, item) = (u64_at(&k, 0)?, u64_at(&v, 0)?, u64_at(&v, 8)?);
            heads.entry(user).or_default();
            c.max_key = c.max_key.max(key);
            out.push(Op::Put(Space::UserInserts, key_of(&[user, key]), key_of(&[item])))?;
        }
        for g in self.promotions.iter() {
            c.max_key = c.max_key.max(u64_at(&g.key().map_err(io)?, 0)?);
        }
        c.users = heads.len() as u64;
        for (u, h) in &heads {
            out.push(Op::Put(Space::Users, key_of(&[*u]), head_value(h)))?;
        }
        out.push(Op::Put(Space::Meta, b"counters".to_vec(), counters_value(&c)))?;
        out.finish()?;
        tracing::info!(
            users = c.users,
            follows = c.follows,
            items = c.items_live,
            secs = started.elapsed().as_secs_f64(),
            "built the derived indexes"
        );
        Ok(())
    }

    /// What a lazy index starts from: the counters, the pending jobs and
    /// the promotions (none of them grows with the items or the graph).
    fn load(&self) -> Result<State, StoreError> {
        let counters = match self.meta.get("counters").map_err(io)? {
            Some(v) => counters_of(&v)?,
            None => Counters::default(),
        };
        let mut jobs = Vec::new();
        for g in self.jobs.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            jobs.push(serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("job: {e}")))?);
        }
        let mut promotions = Vec::new();
        for g in self.promotions.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            promotions.push(serde_json::from_slice(&v).map_err(|e| StoreError::Corrupt(format!("promotion: {e}")))?);
        }
        Ok(State::lazy(counters, jobs, promotions))
    }

    fn keyspaces(&self) -> [&Keyspace; 15] {
        [
            &self.meta,
            &self.items,
            &self.bodies,
            &self.outbox,
            &self.reposts,
            &self.replies,
            &self.idempotency,
            &self.inserts,
            &self.user_inserts,
            &self.edges,
            &self.edges_in,
            &self.users,
            &self.jobs,
            &self.reactions,
            &self.promotions,
        ]
    }

    /// Bytes on disk.
    pub fn disk_space(&self) -> u64 {
        self.keyspaces().iter().map(|k| k.disk_space()).sum()
    }

    /// Decodes every key under `prefix` of a keyspace (without holding
    /// them: a unit can be a million keys).
    fn decode_under<T>(
        ks: &Keyspace,
        prefix: &[u8],
        decode: impl Fn(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        ks.prefix(prefix).map(|g| decode(&g.key().map_err(io)?)).collect()
    }

    /// Reads one unit of the index.
    fn load_unit(&self, unit: Unit) -> Result<UnitData, StoreError> {
        Ok(match unit {
            Unit::Head(u) => {
                UnitData::Head(self.users.get(u.0.to_be_bytes()).map_err(io)?.map(|v| head_of(&v)).transpose()?)
            }
            Unit::Out(u) => {
                let mut following = Vec::new();
                for g in self.edges.prefix(prefixed(b'f', u.0)) {
                    let (k, v) = g.into_inner().map_err(io)?;
                    following.push((UserId(u64_at(&k, 9)?), Millis(i64::try_from(u64_at(&v, 0)?).unwrap_or(0))));
                }
                let tos = |tag: u8| Self::decode_under(&self.edges, &prefixed(tag, u.0), |k| Ok(UserId(u64_at(k, 9)?)));
                UnitData::Out { following, blocking: tos(b'b')?, muting: tos(b'm')? }
            }
            Unit::Followers(u) => UnitData::Followers(Self::decode_under(&self.edges_in, &prefixed(b'f', u.0), |k| {
                Ok((Millis(i64::try_from(u64_at(k, 9)?).unwrap_or(0)), UserId(u64_at(k, 17)?)))
            })?),
            Unit::BlockedBy(u) => UnitData::BlockedBy(Self::decode_under(&self.edges_in, &prefixed(b'b', u.0), |k| {
                Ok(UserId(u64_at(k, 9)?))
            })?),
            Unit::Outbox(u) => {
                UnitData::Outbox(Self::decode_under(&self.outbox, &u.0.to_be_bytes(), |k| u64_at(k, 8))?)
            }
            Unit::Inserts(u) => {
                let mut list = Vec::new();
                for g in self.user_inserts.prefix(u.0.to_be_bytes()) {
                    let (k, v) = g.into_inner().map_err(io)?;
                    list.push((u64_at(&k, 8)?, ItemId(u64_at(&v, 0)?)));
                }
                UnitData::Inserts(list)
            }
            Unit::Item(i) => {
                let prefix = i.0.to_be_bytes();
                let reposts = Self::decode_under(&self.reposts, &prefix, |k| {
                    Ok((UserId(u64_at(k, 8)?), ItemId(u64_at(k, 16)?)))
                })?;
                let replies = self.replies.prefix(prefix).count() as u64;
                let reactions = Self::decode_under(&self.reactions, &prefix, |k| {
                    let kind = match k.get(16..) {
                        Some(rest) if !rest.is_empty() => std::str::from_utf8(rest)
                            .map_err(|_| StoreError::Corrupt("reaction kind is not UTF-8".into()))?,
                        _ => return Err(StoreError::Corrupt(format!("reaction key of {} bytes has no kind", k.len()))),
                    };
                    Ok((UserId(u64_at(k, 8)?), kind.to_owned()))
                })?;
                UnitData::Item { reposts, replies, reactions }
            }
        })
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

    fn lazy(&self) -> bool {
        true
    }

    fn durable(&self) -> Ticket {
        self.synced.lock().0
    }

    /// A user never named has no units: one point read of their counters
    /// answers all their units at once (a follow by a new user asks for
    /// three).
    fn load_units(&self, units: &[Unit]) -> Result<Vec<UnitData>, StoreError> {
        let mut unknown: HashMap<UserId, bool> = HashMap::new();
        units
            .iter()
            .map(|unit| {
                let user = match *unit {
                    Unit::Item(_) => None,
                    Unit::Head(u)
                    | Unit::Out(u)
                    | Unit::Followers(u)
                    | Unit::BlockedBy(u)
                    | Unit::Outbox(u)
                    | Unit::Inserts(u) => Some(u),
                };
                if let Some(u) = user {
                    let absent = match unknown.get(&u) {
                        Some(a) => *a,
                        None => {
                            let a = !self.users.contains_key(u.0.to_be_bytes()).map_err(io)?;
                            unknown.insert(u, a);
                            a
                        }
                    };
                    if absent {
                        return Ok(UnitData::empty(*unit));
                    }
                }
                self.load_unit(*unit)
            })
            .collect()
    }

    fn followers_range(
        &self,
        user: UserId,
        from: Option<tideway_store::FollowerPos>,
        ascending: bool,
        limit: usize,
    ) -> Result<Vec<tideway_store::FollowerPos>, StoreError> {
        let prefix = prefixed(b'f', user.0);
        let key = |(since, id): tideway_store::FollowerPos| {
            let mut k = prefix.clone();
            k.extend_from_slice(&key_of(&[millis_u64(since), id.0]));
            k
        };
        let decode = |k: &[u8]| -> Result<tideway_store::FollowerPos, StoreError> {
            Ok((Millis(i64::try_from(u64_at(k, 9)?).unwrap_or(0)), UserId(u64_at(k, 17)?)))
        };
        let mut end = prefix.clone();
        end.extend_from_slice(&[0xff; 16]);
        let iter = match (from, ascending) {
            (Some(p), true) => self.edges_in.range((std::ops::Bound::Excluded(key(p)), std::ops::Bound::Included(end))),
            (None, true) => self.edges_in.prefix(&prefix),
            (Some(p), false) => {
                self.edges_in.range((std::ops::Bound::Included(prefix.clone()), std::ops::Bound::Excluded(key(p))))
            }
            (None, false) => self.edges_in.prefix(&prefix),
        };
        let keys: Box<dyn Iterator<Item = fjall::Guard>> =
            if ascending { Box::new(iter) } else { Box::new(iter.rev()) };
        keys.take(limit).map(|g| decode(&g.key().map_err(io)?)).collect()
    }

    /// Point reads of the records (fjall's block cache and the OS page
    /// cache serve the warm ones): an item, else an insertion.
    fn read_records(&self, keys: &[Key]) -> Result<Vec<tideway_store::Stored<Record>>, StoreError> {
        keys.iter()
            .map(|key| {
                if let Some(v) = self.items.get(key.to_be_bytes()).map_err(io)? {
                    return Ok(Some((Record::Item(decode_record(ItemId(*key), &v)?), v.len())));
                }
                let Some(v) = self.inserts.get(key.to_be_bytes()).map_err(io)? else { return Ok(None) };
                let (user, item) = (UserId(u64_at(&v, 0)?), ItemId(u64_at(&v, 8)?));
                Ok(Some((Record::Insert { key: *key, user, item }, v.len())))
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
            let reverse =
                reverse.join().unwrap_or_else(|_| Err(StoreError::Io("the reverse ingestion panicked".into())));
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
            if !item.deleted {
                self.head(item.author)?.items += 1;
                self.counters.items_live += 1;
            } else {
                self.head(item.author)?;
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
    /// not recover the import from the journal into memory.
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
    use tideway_core::merge::{Direction, KeyRange};
    use tideway_store::{FollowStatus, Graph, Items, JobProgress, Jobs, ListKind, Promotion};

    fn post(id: u64, author: u64) -> Item {
        Item {
            tags: vec!["rust".into()],
            idempotency_key: Some("k1".into()),
            ..Item::new(ItemId(id), UserId(author), ItemKind::Post)
        }
    }

    async fn outbox(s: &Store<FjallJournal>, u: u64) -> Vec<Key> {
        s.outbox_merge(&[UserId(u)], KeyRange::ALL, Direction::Older, 1000).await.expect("outbox")
    }

    async fn followers(s: &Store<FjallJournal>, u: u64) -> Vec<u64> {
        let mut v: Vec<u64> = s
            .list(UserId(u), ListKind::Followers, None, 100_000)
            .await
            .expect("list")
            .iter()
            .map(|(f, _)| f.0)
            .collect();
        v.sort_unstable();
        v
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
        {
            let st = s.state();
            assert!(st.users.is_empty() && st.items_loaded.is_empty(), "start-up loads no user and no item");
            assert!(!st.records.contains_key(&100), "items are not loaded at start");
            assert!(st.idempotency.is_empty(), "durable idempotency keys stay on disk");
        }
        match s.records(&[101]).await.expect("records").pop().flatten() {
            Some(Record::Item(i)) => assert!(i.deleted && i.tags == ["rust"]),
            other => panic!("the tombstone is stored: {other:?}"),
        }
        let item100 = match s.records(&[100]).await.expect("records").pop().flatten() {
            Some(Record::Item(i)) => i,
            other => panic!("item 100: {other:?}"),
        };
        assert_eq!(
            s.create_item(post(102, 1), false, Millis(3)).await.expect("idempotent"),
            tideway_store::CreateOutcome::Existing(item100),
            "the idempotency key of item 100 is known after a restart"
        );
        let stats = s.stats().await.expect("stats");
        assert_eq!((stats.users, stats.items, stats.follows, stats.max_key), (4, 1, 1, 300), "reactions name no user");
        assert_eq!(
            s.counts(UserId(1)).await.expect("counts"),
            tideway_store::UserCounts { following: 0, followers: 1, items: 1 }
        );
        assert_eq!(s.counts(UserId(2)).await.expect("counts").items, 0);
        assert_eq!(outbox(&s, 1).await, vec![100]);
        assert_eq!(outbox(&s, 2).await, vec![101], "a tombstone keeps its outbox place");
        assert_eq!(s.followees(UserId(3)).await.expect("followees"), vec![UserId(1)]);
        assert_eq!(followers(&s, 1).await, vec![3]);
        let rel = s.relations(UserId(4), &[UserId(1)]).await.expect("relations");
        assert!(rel[0].blocking && !rel[0].blocked_by);
        assert!(s.relations(UserId(1), &[UserId(4), UserId(3)]).await.expect("relations")[0].blocked_by);
        assert!(s.relations(UserId(1), &[UserId(3)]).await.expect("relations")[0].followed_by);
        assert_eq!(s.inserted_keys(UserId(3), &[ItemId(100)]).await.expect("inserted"), vec![Some(200)]);
        assert_eq!(s.inserts(UserId(3), KeyRange::ALL, Direction::Older, 10).await.expect("inserts"), vec![200]);
        match s.records(&[200]).await.expect("records").pop().flatten() {
            Some(Record::Insert { user, item, .. }) => assert_eq!((user, item), (UserId(3), ItemId(100))),
            other => panic!("the insertion record: {other:?}"),
        }
        let jobs = s.pending_jobs(10).await.expect("jobs");
        assert_eq!(
            jobs.iter().map(|j| (j.key, j.cursor)).collect::<Vec<_>>(),
            vec![(100, Some((Millis(5), UserId(3))))]
        );
        let h = s.hydration(&[ItemId(100)], Some(UserId(6))).await.expect("hydration");
        assert_eq!(h[0].0.reactions, vec![("like".into(), 1), ("x_wow".into(), 1)]);
        assert_eq!(h[0].1.as_ref().map(|m| m.reactions.clone()), Some(vec!["x_wow".to_owned()]));
        assert_eq!(s.active_promotions(Millis(5)).await.expect("promotions").len(), 1);
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
        let h = s.hydration(&[ItemId(100)], None).await.expect("hydration");
        assert_eq!(h[0].0.reactions, vec![("like".into(), 800)]);
        assert_eq!(s.counts(UserId(1)).await.expect("counts").followers, 800);
        assert_eq!(followers(&s, 1).await.len(), 800);
    }

    /// Units load while writes to them are in flight: a load that read the
    /// disk before a write it skipped was durable must not install (it reads
    /// again), so the index never misses an acknowledged write. Each round
    /// reopens the store (nothing loaded), then runs writers to one user's
    /// followers, outbox and item links beside readers that load them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn units_loaded_under_concurrent_writes_miss_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let star = UserId(1);
        let mut next_id = 1000u64;
        {
            let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
            s.create_item(post(999, 1), false, Millis(1)).await.expect("create");
        }
        let mut fans = 0u64;
        let mut posts = 1usize;
        for round in 0..6u64 {
            let s = std::sync::Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("reopen"));
            let mut tasks = Vec::new();
            for t in 0..4u64 {
                let s = s.clone();
                let base = 10_000 + round * 1000 + t * 100;
                tasks.push(tokio::spawn(async move {
                    for i in 0..25 {
                        s.follow_many(UserId(base + i), &[star], Millis(2), 10).await.expect("follow");
                    }
                }));
            }
            let ids: Vec<u64> = (0..20).map(|i| next_id + i).collect();
            next_id += 20;
            {
                let s = s.clone();
                tasks.push(tokio::spawn(async move {
                    for id in ids {
                        let mut it = Item::new(ItemId(id), star, ItemKind::Post);
                        it.reply_to = Some(ItemId(999));
                        it.reply_to_author = Some(star);
                        s.create_item(it, false, Millis(3)).await.expect("reply");
                    }
                }));
            }
            for _ in 0..3 {
                let s = s.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..30 {
                        s.list(star, ListKind::Followers, None, 10).await.expect("list");
                        s.outbox_merge(&[star], KeyRange::ALL, Direction::Older, 5).await.expect("outbox");
                        s.hydration(&[ItemId(999)], None).await.expect("hydration");
                        tokio::task::yield_now().await;
                    }
                }));
            }
            for t in tasks {
                t.await.expect("task");
            }
            fans += 100;
            posts += 20;
            assert_eq!(followers(&s, 1).await.len() as u64, fans, "round {round}: the loaded followers");
            assert_eq!(outbox(&s, 1).await.len(), posts, "round {round}: the loaded outbox");
            let h = s.hydration(&[ItemId(999)], None).await.expect("hydration");
            assert_eq!(h[0].0.replies, posts as u64 - 1, "round {round}: the loaded replies");
            assert_eq!(s.counts(star).await.expect("counts").followers, fans);
            eprintln!("round {round}: loads and retries {:?}", s.load_counts());
        }
    }

    #[tokio::test]
    async fn bodies_live_on_disk_and_survive_a_visibility_patch_across_reopens() {
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
                Some(Record::Item(i)) => {
                    assert!(tideway_store::is_stripped(&i.body), "a record, read without its body")
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
        assert!(msg.contains("tideway-1") && msg.contains("tideway-4"), "{msg}");
    }

    #[tokio::test]
    async fn a_tideway_2_directory_is_migrated_in_place() {
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
            assert_eq!(s.stats().await.expect("stats").items, 3);
            let h = s.hydration(&[ItemId(100)], Some(UserId(3))).await.expect("hydration");
            assert_eq!((h[0].0.replies, h[0].0.reposts), (1, 1));
            assert_eq!(h[0].1.as_ref().map(|m| m.reposted), Some(true));
            assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(Arc::new(body.clone()))]);
            match s.records(&[100]).await.expect("records").pop().flatten() {
                Some(Record::Item(i)) => assert_eq!(i.tags, ["rust"]),
                other => panic!("{other:?}"),
            }
            assert_eq!(s.journal().idempotent(UserId(1), "k1").expect("read"), Some(ItemId(100)));
            assert_eq!(s.counts(UserId(2)).await.expect("counts").items, 1);
        }
    }

    /// Fan-out progress is made durable at most every 50 ms (a crash only
    /// repeats deliveries), and all of it when the store closes.
    #[tokio::test]
    async fn fan_out_progress_written_between_syncs_is_durable_at_close() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
            s.create_item(post(100, 1), true, Millis(1)).await.expect("post");
            for f in 2..=5u64 {
                let got = s.advance(7, &[JobProgress::Checkpoint(100, (Millis(1), UserId(f)))]).await.expect("advance");
                assert_eq!(got, vec![true]);
            }
            assert!(s.journal().durable() < 5, "the later checkpoints did not wait for the disk");
        }
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
        let jobs = s.pending_jobs(10).await.expect("jobs");
        assert_eq!(jobs.iter().map(|j| j.cursor).collect::<Vec<_>>(), vec![Some((Millis(1), UserId(5)))]);
    }

    /// An import is cut before `finish` (which writes the counters): the
    /// next open finds the mark and rebuilds them from what was written.
    #[tokio::test]
    async fn an_import_cut_before_it_finished_is_counted_at_the_next_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
            s.follow_many(UserId(9), &[UserId(1)], Millis(1), 10).await.expect("follow");
        }
        {
            let mut im = Importer::open(dir.path()).expect("importer");
            assert!(im.has_edges().expect("edges"));
            assert_eq!(im.existing(UserId(9)).expect("existing").following, [UserId(1)].into());
            im.ingest_follows(&[(UserId(2), UserId(1)), (UserId(3), UserId(1))], Millis(5), &mut |_| {})
                .expect("follows");
            im.write_items(&[post(100, 1), Item { idempotency_key: None, ..post(101, 1) }]).expect("items");
            // Dropped without `finish`.
        }
        let s = open(dir.path(), SyncMode::Buffer, 10).expect("open rebuilds");
        let stats = s.stats().await.expect("stats");
        assert_eq!((stats.users, stats.items, stats.follows, stats.max_key), (4, 2, 3, 101));
        assert_eq!(
            s.counts(UserId(1)).await.expect("counts"),
            tideway_store::UserCounts { following: 0, followers: 3, items: 2 }
        );
        assert_eq!(followers(&s, 1).await, vec![2, 3, 9]);
    }

    /// A `tideway-3` directory (no reverse edges, counters or per-user
    /// insertions) gets them at open; so does one whose import was cut.
    #[tokio::test]
    async fn derived_indexes_are_built_for_format_3_and_after_a_cut_import() {
        for case in ["format 3", "interrupted import"] {
            let dir = tempfile::tempdir().expect("tempdir");
            {
                let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
                s.create_item(post(100, 1), false, Millis(1)).await.expect("create");
                s.follow_many(UserId(3), &[UserId(1), UserId(2)], Millis(5), 10).await.expect("follow");
                s.follow_many(UserId(4), &[UserId(1)], Millis(6), 10).await.expect("follow");
                s.set_block(UserId(5), UserId(1), true, Millis(7)).await.expect("block");
                s.insert_home(UserId(3), ItemId(100), 200).await.expect("insert");
            }
            {
                // Take the derived keyspaces away, as in a directory of
                // format 3 (or, for the cut import, leave them half written).
                let db = Database::builder(dir.path()).open().expect("fjall");
                let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
                for name in ["edges_in", "users", "user_inserts"] {
                    let ks = db.keyspace(name, KeyspaceCreateOptions::default).expect("keyspace");
                    let keys: Vec<_> = ks.iter().map(|g| g.key().expect("key")).collect();
                    for k in keys.iter().skip(usize::from(case == "interrupted import")) {
                        ks.remove(k.clone()).expect("remove");
                    }
                }
                meta.remove("counters").expect("counters");
                match case {
                    "format 3" => meta.insert("format", "tideway-3").expect("format"),
                    _ => meta.insert("rebuild", "import").expect("mark"),
                }
                db.persist(PersistMode::SyncAll).expect("persist");
            }
            let s = open(dir.path(), SyncMode::Buffer, 10).expect("open rebuilds");
            let stats = s.stats().await.expect("stats");
            assert_eq!((stats.users, stats.items, stats.follows, stats.max_key), (5, 1, 3, 200), "{case}");
            assert_eq!(followers(&s, 1).await, vec![3, 4], "{case}");
            assert_eq!(
                s.counts(UserId(1)).await.expect("counts"),
                tideway_store::UserCounts { following: 0, followers: 2, items: 1 }
            );
            assert!(s.relations(UserId(1), &[UserId(5)]).await.expect("relations")[0].blocked_by, "{case}");
            assert_eq!(s.inserted_keys(UserId(3), &[ItemId(100)]).await.expect("inserted"), vec![Some(200)], "{case}");
            let reopened = {
                drop(s);
                open(dir.path(), SyncMode::Buffer, 10).expect("reopen")
            };
            assert_eq!(reopened.journal().meta.get("rebuild").expect("meta"), None, "{case}: the mark is gone");
        }
    }
}
