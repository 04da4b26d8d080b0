//! When this node last marked a reader active, so a page on engines a round
//! trip away pays the mark at most once in a while.

use tideway_core::UserId;

/// When this node last marked a user active (`Activity::touch`), so that a
/// page pays the mark at most once per `every` milliseconds per user (on
/// engines a round trip away). Bounded: users share slots by hash, and a
/// slot another user took only means one more mark.
pub struct RecentTouches {
    slots: Box<[parking_lot::Mutex<(UserId, i64)>]>,
    every: i64,
}

impl RecentTouches {
    const SLOTS: usize = 1 << 14;

    pub fn new(every_ms: i64) -> Self {
        RecentTouches {
            slots: (0..Self::SLOTS).map(|_| parking_lot::Mutex::new((UserId(0), i64::MIN))).collect(),
            every: every_ms.max(0),
        }
    }

    fn slot(&self, user: UserId) -> &parking_lot::Mutex<(UserId, i64)> {
        let h = user.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50;
        &self.slots[h as usize % Self::SLOTS]
    }

    /// Whether this node marked `user` within `every` before `now` (a clock
    /// gone back counts as not recent).
    pub fn recent(&self, user: UserId, now: i64) -> bool {
        let (who, at) = *self.slot(user).lock();
        who == user && now >= at && now.saturating_sub(at) < self.every
    }

    /// Notes that this node marked `user` at `now`.
    pub fn note(&self, user: UserId, now: i64) {
        *self.slot(user).lock() = (user, now);
    }
}
