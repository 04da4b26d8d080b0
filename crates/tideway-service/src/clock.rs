//! Time, injected so that tests control it.

use parking_lot::Mutex;
use tideway_core::Millis;

pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
    /// Whether this clock tells the real time, so that comparing it with the
    /// database's means something (a test's manual clock does not: the
    /// service keeps it as the only clock).
    fn is_real(&self) -> bool {
        true
    }
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        Millis::now()
    }
}

/// A clock that moves only when told (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<Millis>);

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        Self(Mutex::new(start))
    }
    pub fn advance(&self, ms: i64) {
        let mut t = self.0.lock();
        t.0 += ms;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        *self.0.lock()
    }
    fn is_real(&self) -> bool {
        false
    }
}

/// The wall clock moved by a fixed offset (tests of a node whose clock is
/// wrong).
#[derive(Debug, Clone, Copy)]
pub struct SkewedClock(pub i64);

impl Clock for SkewedClock {
    fn now(&self) -> Millis {
        Millis(Millis::now().0 + self.0)
    }
}
