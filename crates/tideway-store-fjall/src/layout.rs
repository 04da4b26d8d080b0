//! The on-disk layout: the keyspaces, the format versions and the codecs
//! of their keys and values.
//!
//! Layout (format `tideway-5`; all integers big-endian so keys sort
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
//! | `users`   | user (8)                     | following, followers, live items, newest outbox key (4 × 8; 3 × 8 before it was kept), then the count (1) and the outbox's newest keys, ascending (≤ 8 × 8; absent before they were kept) |
//! | `jobs`    | job key (8)                  | job, JSON              |
//! | `reactions` | item (8) + user (8) + kind | empty                  |
//! | `promotions` | promotion id (8)          | promotion, JSON        |
//! | `postings` | feed id (8) + item id (8)   | empty (mention, tag and object feeds; `tideway_store::rules::postings`) |
//! | `notify`  | `m` + user (8); `g` + user (8) + group (8); `e` + user (8) + actor (8) + verb, JSON | marks, seen + read (2 × 8); group head, JSON; event, JSON (a user's `Book` as rows) |
//! | `live`    | `s` + session id (8); `a` + anchor (8) + session id (8) | session, JSON; empty (an anchor's sessions) |
//! | `meta`    | `format`; `counters`; `rebuild` (an import is under way) | format version; users, live items, follows, largest key (4 × 8) |
//!
//! `edges_in`, `users`, `user_inserts` and the counters are derived from the
//! rest: written in the same batches, and rebuilt from it when a directory
//! of an older format is opened or an import was interrupted.

use std::sync::Arc;
use tideway_core::{Item, ItemId, Millis, UserId};
use tideway_store::notebook::Row;
use tideway_store::{Counters, EdgeKind, Head, StoreError};

pub(crate) const FORMAT: &[u8] = b"tideway-5";

/// One encoded write, queued until the next group commit.
pub(crate) enum Op {
    Put(Space, Vec<u8>, Vec<u8>),
    Del(Space, Vec<u8>),
}
/// Items whole in `items`, replayed at start-up. Migrated in place.
pub(crate) const FORMAT_2: &[u8] = b"tideway-2";
/// Per-item index keyspaces loaded at start-up, no reverse edges, counters
/// or heads. Migrated in place.
pub(crate) const FORMAT_3: &[u8] = b"tideway-3";
/// Everything but the postings. Migrated in place (postings built from the
/// items).
pub(crate) const FORMAT_4: &[u8] = b"tideway-4";

/// A keyspace of the table above, as an [`Op`] names it.
#[derive(Clone, Copy)]
pub(crate) enum Space {
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
    Postings,
    Notify,
    Live,
}

/// Keyspaces ([`Space`]'s variants), in the order of their discriminants.
pub(crate) const SPACES: usize = 18;
pub(crate) const ALL_SPACES: [Space; SPACES] = [
    Space::Meta,
    Space::Items,
    Space::Bodies,
    Space::Outbox,
    Space::Reposts,
    Space::Replies,
    Space::Idempotency,
    Space::Inserts,
    Space::UserInserts,
    Space::Edges,
    Space::EdgesIn,
    Space::Users,
    Space::Jobs,
    Space::Reactions,
    Space::Promotions,
    Space::Postings,
    Space::Notify,
    Space::Live,
];

impl Space {
    /// The position of this keyspace among all (its discriminant).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The keyspace at this position, if there is one.
    pub(crate) fn from_index(i: usize) -> Option<Space> {
        ALL_SPACES.get(i).copied()
    }
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Result<u64, StoreError> {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StoreError::corrupt(format!("short key or value ({} bytes)", b.len())))
}

pub(crate) fn key_of(parts: &[u64]) -> Vec<u8> {
    parts.iter().flat_map(|p| p.to_be_bytes()).collect()
}

pub(crate) fn json<T: serde::Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(v).map_err(|e| StoreError::corrupt_by("a value to store", e))
}

pub(crate) fn millis_u64(m: Millis) -> u64 {
    u64::try_from(m.0.max(0)).unwrap_or(0)
}

pub(crate) fn head_value(h: &Head) -> Vec<u8> {
    let mut v = key_of(&[h.following, h.followers, h.items, h.newest]);
    if let Some(recent) = h.recent() {
        v.push(recent.len() as u8);
        v.extend(recent.iter().flat_map(|k| k.to_be_bytes()));
    }
    v
}

/// A user's counters: 33 bytes and 8 a recent key (`Head::recent`), or 32
/// as written before the recent keys were kept, or 24 before the newest key
/// was (what is missing is unknown, and read from the outbox).
pub(crate) fn head_of(v: &[u8]) -> Result<Head, StoreError> {
    let newest = if v.len() >= 32 { u64_at(v, 24)? } else { Head::NEWEST_UNKNOWN };
    let mut head = Head {
        following: u64_at(v, 0)?,
        followers: u64_at(v, 8)?,
        items: u64_at(v, 16)?,
        newest,
        recent: [0; Head::RECENT],
        recent_len: Head::RECENT_UNKNOWN,
    };
    if let Some(&n) = v.get(32) {
        let n = usize::from(n);
        if n > Head::RECENT || v.len() != 33 + 8 * n {
            return Err(StoreError::corrupt(format!("counters of {} bytes with {n} recent keys", v.len())));
        }
        for (i, k) in head.recent[..n].iter_mut().enumerate() {
            *k = u64_at(v, 33 + 8 * i)?;
        }
        head.recent_len = n as u8;
    }
    Ok(head)
}

pub(crate) fn counters_value(c: &Counters) -> Vec<u8> {
    key_of(&[c.users, c.items_live, c.follows, c.max_key])
}

pub(crate) fn counters_of(v: &[u8]) -> Result<Counters, StoreError> {
    Ok(Counters { users: u64_at(v, 0)?, items_live: u64_at(v, 8)?, follows: u64_at(v, 16)?, max_key: u64_at(v, 24)? })
}

/// The writes that store `item`: its record and body, and its entries in
/// the per-item index keyspaces (`new`: it was not stored before; else it
/// replaces a live item).
pub(crate) fn item_ops(item: &Item, new: bool, ops: &mut Vec<Op>) -> Result<(), StoreError> {
    let id = item.id.0;
    let live = !item.deleted;
    let record = Item { body: tideway_store::stripped_body(), ..item.clone() };
    ops.push(Op::Put(Space::Items, key_of(&[id]), json(&record)?));
    ops.push(Op::Put(Space::Bodies, key_of(&[id]), item.body.as_str().as_bytes().to_vec()));
    ops.push(Op::Put(Space::Outbox, key_of(&[item.author.0, id]), vec![u8::from(live)]));
    if new && let Some(k) = &item.idempotency_key {
        let mut key = key_of(&[item.author.0]);
        key.extend_from_slice(k.as_bytes());
        ops.push(Op::Put(Space::Idempotency, key, key_of(&[id])));
    }
    if new {
        postings_ops(item, ops);
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

/// The postings of a new item (`tideway_store::rules::postings`).
pub(crate) fn postings_ops(item: &Item, ops: &mut Vec<Op>) {
    for feed in tideway_store::rules::postings(item) {
        ops.push(Op::Put(Space::Postings, key_of(&[feed, item.id.0]), Vec::new()));
    }
}

pub(crate) fn decode_record(id: ItemId, v: &[u8]) -> Result<Arc<Item>, StoreError> {
    let mut item: Item = serde_json::from_slice(v).map_err(|e| StoreError::corrupt_by(format!("item {id}"), e))?;
    item.body = tideway_store::stripped_body();
    Ok(Arc::new(item))
}

pub(crate) fn edge_kind_byte(k: EdgeKind) -> u8 {
    match k {
        EdgeKind::Follow => b'f',
        EdgeKind::Block => b'b',
        EdgeKind::Mute => b'm',
    }
}

pub(crate) fn edge_key(kind: EdgeKind, from: UserId, to: UserId) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(edge_kind_byte(kind));
    k.extend_from_slice(&from.0.to_be_bytes());
    k.extend_from_slice(&to.0.to_be_bytes());
    k
}

/// The reverse entry of an edge, for the followers (by time) and the
/// blockers of `to`; mutes have none.
pub(crate) fn edge_in_key(kind: EdgeKind, from: UserId, to: UserId, since: Millis) -> Option<Vec<u8>> {
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
pub(crate) fn runs(sorted: impl Iterator<Item = UserId>) -> Vec<(UserId, u64)> {
    let mut out: Vec<(UserId, u64)> = Vec::new();
    for u in sorted {
        match out.last_mut() {
            Some((last, n)) if *last == u => *n += 1,
            _ => out.push((u, 1)),
        }
    }
    out
}

pub(crate) fn prefixed(tag: u8, id: u64) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The key of a user's notification marks, groups or events.
pub(crate) fn note_prefix(tag: u8, user: UserId) -> Vec<u8> {
    let mut k = vec![tag];
    k.extend_from_slice(&user.0.to_be_bytes());
    k
}

/// The write that keeps one row of a user's notifications.
pub(crate) fn note_op(row: &Row) -> Result<Op, StoreError> {
    Ok(match row {
        Row::Marks { user, seen, read } => {
            let mut v = seen.0.to_be_bytes().to_vec();
            v.extend_from_slice(&read.0.to_be_bytes());
            Op::Put(Space::Notify, note_prefix(b'm', *user), v)
        }
        Row::Group { user, id, head } => {
            let mut k = note_prefix(b'g', *user);
            k.extend_from_slice(&id.to_be_bytes());
            Op::Put(Space::Notify, k, json(head)?)
        }
        Row::Event { user, verb, actor, event } => {
            let mut k = note_prefix(b'e', *user);
            k.extend_from_slice(&actor.0.to_be_bytes());
            k.extend_from_slice(&json(verb)?);
            match event {
                Some(e) => Op::Put(Space::Notify, k, json(e)?),
                None => Op::Del(Space::Notify, k),
            }
        }
    })
}

/// The writes that keep a live session, new or after a step.
pub(crate) fn session_ops(s: &tideway_core::live::Session) -> Result<[Op; 2], StoreError> {
    let mut by_anchor = prefixed(b'a', s.anchor.0);
    by_anchor.extend_from_slice(&s.id.to_be_bytes());
    Ok([Op::Put(Space::Live, prefixed(b's', s.id), json(s)?), Op::Put(Space::Live, by_anchor, Vec::new())])
}
