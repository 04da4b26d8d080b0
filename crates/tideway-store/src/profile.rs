//! What a backend is like, as its engines report it: the service shapes its
//! work by it (how many fan-out chunks run side by side, whether pages read
//! ahead) instead of deciding it from the name of a setting.

/// How a backend's calls cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Each call is a round trip over the network to an engine that other
    /// nodes share (PostgreSQL, MariaDB, Redis): calls side by side overlap
    /// their waits. Otherwise calls are answered in process, hardly waiting.
    pub round_trips: bool,
}

impl Profile {
    /// Answered in process (the memory and embedded backends).
    pub const IN_PROCESS: Profile = Profile { round_trips: false };
    /// Each call a round trip to a shared engine.
    pub const REMOTE: Profile = Profile { round_trips: true };

    /// A backend made of two engines: remote if either is.
    pub fn with(self, other: Profile) -> Profile {
        Profile { round_trips: self.round_trips || other.round_trips }
    }

    /// Fan-out chunks of a worker step in flight at once: 8 on remote
    /// engines (each chunk is two round trips), 1 in one process (its calls
    /// hardly wait, so side by side gains nothing).
    pub fn chunks_in_flight(self) -> usize {
        if self.round_trips { 8 } else { 1 }
    }

    /// Whether pages read counts and marks ahead, beside the reads of the
    /// entry rule, for items they may then filter out: on remote engines a
    /// call in parallel is free and one in sequence is a round trip; in one
    /// process the extra items are only extra work.
    pub fn reads_ahead(self) -> bool {
        self.round_trips
    }

    /// Whether a post wakes the fan-out workers from a task of its own
    /// instead of before it answers: a remote hub's publish is a round trip;
    /// a local one is immediate (and a task would keep the store open past
    /// the service).
    pub fn background_signals(self) -> bool {
        self.round_trips
    }

    /// How long after an id's time a write that took it may still become
    /// visible: ids are taken before the write, and several writers (or
    /// nodes) store theirs in any order. A home stream sends an entry only
    /// once this long has passed since its time, so that one stored a
    /// little later with an older id is not passed over. In process a write
    /// takes microseconds to a few milliseconds (an fsync); on shared
    /// engines a transaction, and nodes' clocks differ by a few ms.
    pub fn settle_ms(self) -> i64 {
        if self.round_trips { 300 } else { 50 }
    }
}

/// A backend (or one of its halves) that says what it is like.
pub trait Profiled: Send + Sync {
    fn profile(&self) -> Profile;
}
