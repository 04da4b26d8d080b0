//! What a lazy index keeps loaded, under a byte budget: every holder of
//! loaded units (a user, an item, a user's notifications, an anchor's
//! sessions) is in one queue in the order it came; a holder used since the
//! queue last passed it goes round again (a second chance, the CLOCK
//! approximation of least recently used), one that was not is let go.
//!
//! The bytes are an estimate, counted when a holder comes in and again each
//! time it goes round (writes that grow a loaded unit are counted then). The
//! index itself does the letting go ([`crate::state::State::evict_over_budget`]);
//! this module only keeps the order, the marks and the sums.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use tideway_core::{ItemId, UserId};

/// A holder of loaded units: what is let go as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Holder {
    /// A user's counters, edges, outbox and insertions.
    User(UserId),
    /// An item's reposts, replies and reactions.
    Item(ItemId),
    /// A user's notifications.
    Notify(UserId),
    /// An anchor's live sessions.
    Live(UserId),
}

/// A holder's mark and the bytes counted for it (kept beside its units).
#[derive(Debug)]
pub struct Held {
    used: AtomicBool,
    /// Bytes counted for this holder in [`Residency::bytes`].
    pub counted: usize,
}

impl Held {
    /// `used`: whether it starts marked (what a read loads does; what a
    /// write creates does not).
    pub fn new(used: bool, counted: usize) -> Self {
        Self { used: AtomicBool::new(used), counted }
    }

    /// Marks the holder used (a read found it). Cheap on the read path: it
    /// writes only when the mark is not there yet.
    #[inline]
    pub fn touch(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }

    /// Whether it was used since the last look, clearing the mark.
    pub fn take_used(&self) -> bool {
        self.used.swap(false, Ordering::Relaxed)
    }
}

impl Default for Held {
    fn default() -> Self {
        Self::new(true, 0)
    }
}

/// Holders looked at, at most, by one call of the eviction (a call follows
/// every load and every write, so this bounds the time it adds to each).
pub const LOOKS_PER_PASS: usize = 256;

/// The queue of holders and the byte sums.
#[derive(Debug)]
pub struct Residency {
    /// Bytes of loaded units to keep at most (`usize::MAX`: no bound).
    pub budget: usize,
    /// Every holder of the index once, with the sequence number it was
    /// queued with.
    queue: VecDeque<(Holder, u64)>,
    next_seq: u64,
    /// Bytes counted for the holders in the queue.
    pub bytes: usize,
    /// Holders let go so far.
    pub evictions: u64,
}

impl Default for Residency {
    fn default() -> Self {
        Self { budget: usize::MAX, queue: VecDeque::new(), next_seq: 0, bytes: 0, evictions: 0 }
    }
}

impl Residency {
    /// Queues a holder that just came in, counting its bytes.
    pub fn admit(&mut self, h: Holder, bytes: usize) {
        self.queue.push_back((h, self.next_seq));
        self.next_seq += 1;
        self.bytes += bytes;
    }

    /// The sequence number the next queued holder gets: holders queued from
    /// now on are not let go by a pass that starts here.
    pub fn mark(&self) -> u64 {
        self.next_seq
    }

    /// Holders in the queue.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether the budget is exceeded.
    pub fn over(&self) -> bool {
        self.bytes > self.budget
    }

    /// The next holder to look at, unless it was queued at or after
    /// `protect` (what the running call loaded or sent round again).
    pub fn next(&mut self, protect: u64) -> Option<Holder> {
        match self.queue.front() {
            Some(&(h, seq)) if seq < protect => {
                self.queue.pop_front();
                Some(h)
            }
            _ => None,
        }
    }

    /// Sends a holder round again, its bytes recounted.
    pub fn again(&mut self, h: Holder, was: usize, now: usize) {
        self.recount(was, now);
        self.admit(h, 0);
    }

    /// A holder's bytes counted anew (a write grew or shrank its units).
    pub fn recount(&mut self, was: usize, now: usize) {
        self.bytes = self.bytes - was.min(self.bytes) + now;
    }

    /// A holder let go (or found gone): its bytes leave the sum.
    pub fn gone(&mut self, was: usize, evicted: bool) {
        self.bytes -= was.min(self.bytes);
        self.evictions += u64::from(evicted);
    }

    /// Forgets every holder (the index dropped every unit).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.bytes = 0;
    }
}
