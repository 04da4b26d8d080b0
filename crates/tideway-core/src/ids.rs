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
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
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
    // One spelling per id: no leading zero ("01" is not user 1).
    if s.len() > 1 && s.starts_with('0') {
        return Err(DomainError::invalid(field, format!("{s:?} has a leading zero; ids are written like 42")));
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
    /// Where the next imported item of a millisecond goes (see [`Self::at`]).
    imports: Mutex<ImportSlots>,
    /// How many milliseconds an import may move forward.
    spill_ms: u64,
}

/// How far past its `created_at` an imported item may be moved when its
/// millisecond has no free id left on this node: 4,096 ids a millisecond,
/// so a second-precision import of up to ~4 million items in one second
/// keeps its second.
pub const IMPORT_SPILL_MS: u64 = 999;
/// Milliseconds remembered by the import allocator before it forgets them
/// (a forgotten millisecond is found again by probing the store).
const IMPORT_SLOTS_REMEMBERED: usize = 1 << 16;

/// The import allocator's memory, per millisecond.
#[derive(Debug, Default)]
struct ImportSlots {
    next: HashMap<u64, Slot>,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The next sequence to try (4,096: the millisecond is full).
    seq: u64,
    /// The jump after the next collision (doubles each time).
    stride: u64,
    /// Once full: the first later millisecond that may have room, so a run
    /// of full milliseconds is crossed in one step, not one by one.
    skip_to: u64,
}

impl Slot {
    fn new(seq: u64) -> Self {
        Self { seq, stride: 1, skip_to: 0 }
    }
}

impl IdGenerator {
    pub fn new(node: u16) -> Result<Self, DomainError> {
        if node > MAX_NODE {
            return Err(DomainError::invalid("node_id", format!("must be at most {MAX_NODE}")));
        }
        Ok(Self {
            node: u64::from(node),
            last: AtomicU64::new(0),
            imports: Mutex::new(ImportSlots::default()),
            spill_ms: IMPORT_SPILL_MS,
        })
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

    /// The same with imports moved at most `spill_ms` forward (tests).
    pub fn with_import_spill(node: u16, spill_ms: u64) -> Result<Self, DomainError> {
        Ok(Self { spill_ms, ..Self::new(node)? })
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

    /// A key at a given (imported) time. Ids of one millisecond are handed
    /// out in sequence; once this node's 4,096 ids of that millisecond are
    /// used, the item moves to the next millisecond with a free id (at most
    /// [`IMPORT_SPILL_MS`] later), so its `created_at` is that much later.
    /// Never key 0 (id "0" is not a valid id). The store still detects a
    /// collision (an id taken before a restart, or by a live item): the
    /// caller reports it with [`Self::taken`] and asks again.
    pub fn at(&self, t: Millis) -> Result<Key, DomainError> {
        let first = Self::ms_of("created_at", t)?;
        let mut slots = self.imports.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if slots.next.len() >= IMPORT_SLOTS_REMEMBERED {
            slots.next.clear();
        }
        let last = (first + self.spill_ms).min(MAX_TIME);
        let mut ms = first;
        while ms <= last {
            let start = u64::from(ms == 0 && self.node == 0); // key 0 is not an id
            let slot = slots.next.entry(ms).or_insert(Slot::new(start));
            if slot.seq < (1 << SEQ_BITS) {
                let seq = slot.seq;
                slot.seq += 1;
                if ms > first
                    && let Some(f) = slots.next.get_mut(&first)
                {
                    f.skip_to = f.skip_to.max(ms);
                }
                return Ok(self.compose(ms, seq));
            }
            ms = (ms + 1).max(slot.skip_to);
        }
        Err(DomainError::invalid(
            "created_at",
            format!(
                "no free item id within {} ms after {t}: this node already holds 4,096 items in every millisecond \
                 of that span; spread the import over more time or more nodes",
                self.spill_ms + 1
            ),
        ))
    }

    /// The store found `key` (from [`Self::at`]) taken. The next ids of its
    /// millisecond jump past it by a stride that doubles at each collision,
    /// so a millisecond filled before a restart is crossed in ~12 tries.
    pub fn taken(&self, key: Key) {
        let (ms, seq) = (key >> TIME_SHIFT, key & ((1 << SEQ_BITS) - 1));
        let mut slots = self.imports.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let slot = slots.next.entry(ms).or_insert(Slot::new(0));
        slot.seq = slot.seq.max(seq + slot.stride);
        slot.stride = (slot.stride * 2).min(1 << SEQ_BITS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_parse_strictly() {
        assert_eq!(UserId::parse("u", "42"), Ok(UserId(42)));
        for bad in ["", "0", "-1", "1.5", " 1", "01", "007", "9223372036854775808", "abc", "99999999999999999999"] {
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
    fn imports_of_one_millisecond_spill_into_the_next_ones_and_never_collide() {
        let g = IdGenerator::new(0).expect("node");
        let t = Millis(ID_EPOCH_MS + 7_000);
        let keys: Vec<Key> = (0..10_000).map(|_| g.at(t).expect("key")).collect();
        let distinct: std::collections::HashSet<Key> = keys.iter().copied().collect();
        assert_eq!(distinct.len(), keys.len(), "every imported key is distinct");
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "one millisecond fills before the next");
        assert_eq!(key_time(keys[4095]), t);
        assert_eq!(key_time(keys[4096]), Millis(t.0 + 1), "the 4,097th item moves 1 ms later");
        assert_eq!(key_time(keys[9_999]), Millis(t.0 + 2));
    }

    #[test]
    fn import_at_the_epoch_never_gets_key_zero() {
        let g = IdGenerator::new(0).expect("node");
        let k = g.at(Millis(ID_EPOCH_MS)).expect("key");
        assert_ne!(k, 0);
        assert!(ItemId::parse("id", &k.to_string()).is_ok(), "every assigned id parses");
    }

    #[test]
    fn collisions_after_a_restart_are_crossed_in_few_tries() {
        // Before the "restart": a millisecond full and the next one half full.
        let before = IdGenerator::new(0).expect("node");
        let t = Millis(ID_EPOCH_MS + 99);
        let mut stored: std::collections::HashSet<Key> = (0..6_000).map(|_| before.at(t).expect("key")).collect();
        let after = IdGenerator::new(0).expect("node");
        let mut tries = 0;
        let key = loop {
            let k = after.at(t).expect("key");
            if stored.insert(k) {
                break k;
            }
            after.taken(k);
            tries += 1;
        };
        assert!(tries <= 24, "{tries} tries to find a free id");
        assert!(key_time(key) >= Millis(t.0 + 1));
    }

    #[test]
    fn an_exhausted_span_is_a_clear_error() {
        let g = IdGenerator::with_import_spill(0, 2).expect("node");
        let t = Millis(ID_EPOCH_MS + 5);
        let total = 3 * (1 << SEQ_BITS);
        for _ in 0..total {
            g.at(t).expect("key");
        }
        let err = g.at(t).expect_err("no room left");
        assert!(err.to_string().contains("no free item id within 3 ms"), "{err}");
    }

    #[test]
    fn keys_fit_a_signed_column() {
        let g = IdGenerator::new(MAX_NODE).expect("node");
        let k = g.next(Millis(ID_EPOCH_MS + MAX_TIME as i64)).expect("key");
        assert!(k <= i64::MAX as u64);
    }
}
