//! The shared half's trust record, kept by the durable half
//! ([`Jobs::shared_trust`]): whether nodes may trust the shared half, and
//! the one rule that changes it ([`SharedTrust::apply`]). What a node does
//! with it is in `crate::trust`.

#[allow(unused_imports)]
use super::*;
use std::time::{Duration, Instant};

/// Whether nodes may trust the shared half, as the durable half records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedTrust {
    /// Moved each time the shared half stops being trusted.
    pub generation: u64,
    /// Writes that went on without the shared half, all told.
    pub missed: u64,
    pub trusted: bool,
    /// When it last stopped being trusted (the store's clock; 0: never).
    pub since: Millis,
    /// It is not trusted again before this time (the last miss's hold).
    pub hold_until: Millis,
    /// The store's clock when the record was read.
    pub now: Millis,
}

impl SharedTrust {
    /// The record of a deployment whose shared half never missed a write.
    pub const FIRST: SharedTrust = SharedTrust {
        generation: 0,
        missed: 0,
        trusted: true,
        since: Millis(0),
        hold_until: Millis(0),
        now: Millis(0),
    };

    /// The record after `change` at `now` (the one rule every store
    /// follows; SQL spells it as one `UPDATE`).
    pub fn apply(self, change: TrustChange, now: Millis) -> SharedTrust {
        let mut t = SharedTrust { now, ..self };
        match change {
            TrustChange::Read => {}
            TrustChange::Distrust { hold_ms } => {
                if t.trusted {
                    t.generation += 1;
                    t.since = now;
                }
                t.trusted = false;
                t.missed += 1;
                t.hold_until = Millis(t.hold_until.0.max(now.0.saturating_add(hold_ms)));
            }
            TrustChange::Restore { generation, missed } => {
                if !t.trusted && t.generation == generation && t.missed == missed && now.0 >= t.hold_until.0 {
                    t.trusted = true;
                }
            }
        }
        t
    }
}

/// A read or change of the record ([`SharedTrust::apply`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrustChange {
    /// Nothing changes.
    Read,
    /// A write is going on without the shared half: untrusted from now
    /// (a new generation if it was trusted), one more miss, and not
    /// trusted again for `hold_ms` at least.
    Distrust { hold_ms: i64 },
    /// Trusted again, if it is still the generation and the count of
    /// misses read before the shared half was dropped, and the hold is
    /// over.
    Restore { generation: u64, missed: u64 },
}

/// What [`Hub::distrust_shared`] answered: when the write may be
/// acknowledged, and until when its record holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Distrusted {
    /// No node trusts the shared half from this instant on (`None`: at once).
    pub ack_after: Option<Instant>,
    /// The record holds the shared half untrusted until about then (`None`:
    /// nothing to hold).
    pub hold_ends: Option<Instant>,
    /// The hold's length.
    pub hold: Duration,
}

impl Distrusted {
    /// Waits until the write may be acknowledged.
    pub async fn wait(&self) {
        if let Some(at) = self.ack_after {
            tokio::time::sleep_until(at.into()).await;
        }
    }

    /// Whether a write under this record ran so long that it must record
    /// its miss again (less than half the hold is left).
    pub fn outlived(&self) -> bool {
        self.hold_ends.is_some_and(|h| h.saturating_duration_since(Instant::now()) < self.hold / 2)
    }
}
