//! Time, injected so that tests control it.

use parking_lot::Mutex;
use tideway_core::Millis;

pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
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
}
