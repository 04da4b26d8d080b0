//! Identifiers.
//!
//! Users are named by the app (`1..=2^63-1`). Items and home insertions get
//! server-assigned 63-bit keys that sort by creation time:
//!
//! ```text
//!  63      62 ............ 22 21 ..... 12 11 ....... 0
//!  0  | ms since 2020-01-01 (41 bits) | node (10) | sequence (12) |
//! ```
//!
//! 41 bits of milliseconds last until 2089; 10 bits of node id let 1024
//! nodes assign ids without coordination; 4096 ids per millisecond per node.
//! The top bit stays zero so every key fits a signed 64-bit SQL column.

use crate::error::DomainError;
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// 2020-01-01T00:00:00Z in Unix milliseconds: the epoch of item ids.
pub const ID_EPOCH_MS: i64 = 1_577_836_800_000;
const NODE_BITS: u32 = 10;
const SEQ_BITS: u32 = 12;
const TIME_SHIFT: u32 = NODE_BITS + SEQ_BITS;
const MAX_TIME: u64 = (1 << 41) - 1;
/// Largest node id.
pub const MAX_NODE: u16 = (1 << NODE_BITS) - 1;

/// A position in a feed: the id of the item or insertion that made an
/// appearance. Feeds sort by key, newest (largest) first.
pub type Key = u64;

fn parse_u63(field: &'static str, s: &str) -> Result<u64, DomainError> {
    if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DomainError::invalid(field, format!("{s:?} is not a decimal id")));
    }
    let v: u64 = s.parse().map_err(|_| DomainError::invalid(field, format!("{s:?} is out of range")))?;
    if v == 0 || v > i64::MAX as u64 {
        return Err(DomainError::invalid(field, format!("{s:?} is out of range 1..=9223372036854775807")));
    }
    Ok(v)
}

/// A user id chosen by the app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub u64);

impl UserId {
    pub fn parse(field: &'static str, s: &str) -> Result<Self, DomainError> {
        parse_u63(field, s).map(UserId)
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A server-assigned item id (see the module docs for its layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ItemId(pub u64);

impl ItemId {
    pub fn parse(field: &'static str, s: &str) -> Result<Self, DomainError> {
        parse_u63(field, s).map(ItemId)
    }

    /// The creation time encoded in the id.
    pub fn created_at(self) -> Millis {
        key_time(self.0)
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The time encoded in a key.
pub fn key_time(key: Key) -> Millis {
    Millis(i64::try_from(key >> TIME_SHIFT).unwrap_or(0) + ID_EPOCH_MS)
}

/// The smallest key of a millisecond (useful as a range bound).
pub fn key_floor_of(t: Millis) -> Key {
    let ms = u64::try_from((t.0 - ID_EPOCH_MS).max(0)).unwrap_or(0).min(MAX_TIME);
    ms << TIME_SHIFT
}

/// Assigns keys: monotonic for "now", and unique-per-call for imported times
/// (the store rejects the rare collision and the caller asks again).
#[derive(Debug)]
pub struct IdGenerator {
    node: u64,
    /// Last key handed out for the present, packed (ms << 12 | seq); an
    /// atomic so that concurrent writers never take a lock to get an id.
    last: AtomicU64,
    /// Sequence for imported (past) times.
    import_seq: AtomicU64,
}

impl IdGenerator {
    pub fn new(node: u16) -> Result<Self, DomainError> {
        if node > MAX_NODE {
            return Err(DomainError::invalid("node_id", format!("must be at most {MAX_NODE}")));
        }
        Ok(Self { node: u64::from(node), last: AtomicU64::new(0), import_seq: AtomicU64::new(0) })
    }

    fn compose(&self, ms: u64, seq: u64) -> Key {
        (ms << TIME_SHIFT) | (self.node << SEQ_BITS) | (seq & ((1 << SEQ_BITS) - 1))
    }

    fn ms_of(field: &'static str, t: Millis) -> Result<u64, DomainError> {
        let ms = t.0 - ID_EPOCH_MS;
        if ms < 0 {
            return Err(DomainError::invalid(field, "must be on or after 2020-01-01T00:00:00Z"));
        }
        let ms = u64::try_from(ms).unwrap_or(MAX_TIME + 1);
        if ms > MAX_TIME {
            return Err(DomainError::invalid(field, "is too far in the future"));
        }
        Ok(ms)
    }

    /// A key for "now": strictly greater than every key this generator gave
    /// for the present before, even if the clock steps back.
    pub fn next(&self, now: Millis) -> Result<Key, DomainError> {
        let now_ms = Self::ms_of("created_at", now)?;
        let mut cur = self.last.load(Ordering::Relaxed);
        loop {
            let (ms, seq) = (cur >> SEQ_BITS, cur & ((1 << SEQ_BITS) - 1));
            let packed = if now_ms > ms {
                now_ms << SEQ_BITS
            } else if seq + 1 < (1 << SEQ_BITS) {
                cur + 1
            } else {
                (ms + 1) << SEQ_BITS
            };
            match self.last.compare_exchange_weak(cur, packed, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(self.compose(packed >> SEQ_BITS, packed & ((1 << SEQ_BITS) - 1))),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Makes every later key for the present larger than `key` (called at
    /// start-up with the largest stored key, so a clock that stepped back
    /// across a restart cannot reorder new items before old ones).
    pub fn observe(&self, key: Key) {
        let packed = ((key >> TIME_SHIFT) << SEQ_BITS) | (key & ((1 << SEQ_BITS) - 1));
        self.last.fetch_max(packed, Ordering::Relaxed);
    }

    /// A key at a given (imported) time. Unique among the next 4096 calls
    /// for the same millisecond; the store detects any collision.
    pub fn at(&self, t: Millis) -> Result<Key, DomainError> {
        let ms = Self::ms_of("created_at", t)?;
        Ok(self.compose(ms, self.import_seq.fetch_add(1, Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_parse_strictly() {
        assert_eq!(UserId::parse("u", "42"), Ok(UserId(42)));
        for bad in ["", "0", "-1", "1.5", " 1", "9223372036854775808", "abc", "99999999999999999999"] {
            assert!(UserId::parse("u", bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(UserId::parse("u", "9223372036854775807"), Ok(UserId(i64::MAX as u64)));
    }

    #[test]
    fn keys_are_monotonic_and_carry_time() {
        let g = IdGenerator::new(3).expect("node");
        let t = Millis(ID_EPOCH_MS + 1_000_000);
        let mut prev = 0;
        for _ in 0..10_000 {
            let k = g.next(t).expect("key");
            assert!(k > prev);
            prev = k;
        }
        // 10k keys in one ms overflow the sequence into the next ms: still ordered.
        assert!(key_time(prev) >= t);
        let later = g.next(Millis(t.0 + 100_000)).expect("key");
        assert_eq!(key_time(later), Millis(t.0 + 100_000));
        // The clock stepping back never produces a smaller key.
        assert!(g.next(t).expect("key") > later);
        assert!(g.next(Millis(0)).is_err());
        let fresh = IdGenerator::new(3).expect("node");
        fresh.observe(later);
        assert!(fresh.next(t).expect("key") > later, "observe keeps keys above stored ones");
    }

    #[test]
    fn nodes_never_collide() {
        let a = IdGenerator::new(1).expect("node");
        let b = IdGenerator::new(2).expect("node");
        let t = Millis(ID_EPOCH_MS + 5);
        assert_ne!(a.next(t).expect("a"), b.next(t).expect("b"));
        assert!(IdGenerator::new(MAX_NODE + 1).is_err());
    }

    #[test]
    fn keys_fit_a_signed_column() {
        let g = IdGenerator::new(MAX_NODE).expect("node");
        let k = g.next(Millis(ID_EPOCH_MS + MAX_TIME as i64)).expect("key");
        assert!(k <= i64::MAX as u64);
    }
}
