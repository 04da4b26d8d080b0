//! Whether a node may trust the shared half, so that losing it costs
//! speed and never a write (issue 64).
//!
//! The shared half (Redis) holds what makes pages fast: inboxes, hot-author
//! marks, removal notes, and the tokens that say a node's copies of page
//! facts are current (`copies/facts.rs`). Every write keeps them right: it
//! delivers, marks, and moves tokens. A write that cannot reach the shared
//! half still goes on, durably. What it did not tell the shared half makes
//! that half stale, for every node. So before such a write is
//! acknowledged, no node may trust the shared half, and none may trust it
//! again until it has been dropped after the write.
//!
//! - **The record.** The durable half keeps one [`SharedTrust`]:
//!   `trusted` or not, a generation moved each time it stops being
//!   trusted, the writes that missed it, and a hold. It is changed only by
//!   [`SharedTrust::apply`], read or changed atomically through
//!   [`crate::Jobs::shared_trust`], on the store's clock.
//! - **Leases.** A node trusts the shared half for [`TrustTimes::lease`]
//!   after a read of the record that began then and found it trusted. Its
//!   probe reads the record once a second. While the node does not trust
//!   the shared half, [`Trusted`] fails every read a page would trust
//!   ([`GATED`]) as if the engine were down: pages are pulled from the
//!   durable half, exactly as defined, and no copy is kept. Writes to the
//!   shared half go on while it answers.
//! - **A write that misses it** asks [`Hub::distrust_shared`] first: the
//!   record becomes untrusted (a new generation if it was trusted), counts
//!   the miss, and holds until [`TrustTimes::hold`] from now. If the
//!   durable half cannot record that, the write fails before it writes.
//!   The write then runs, and is acknowledged no sooner than a lease after
//!   the record became untrusted ([`Distrusted::wait`]): by then no node's
//!   lease, read before, still runs.
//! - **Trusted again.** A probe that finds the record untrusted, its hold
//!   over and the shared engine answering drops everything the deployment
//!   keeps there ([`Hub::forget_all`]: inboxes are rebuilt from the
//!   durable half on their next read, tokens are random, so no copy is
//!   taken again), then restores the record only if no write missed the
//!   shared half meanwhile (the same generation and count of misses). The
//!   hold is longer than any write's bounds on the database (statements
//!   end within 30 s, `tideway-store-sql`'s `session.rs`), so a write that
//!   recorded its miss has ended before the drop; one that outlived half
//!   the hold records it again.
//!
//! The cost while the shared half answers: one read of one row a second
//! per node. While it does not: pages from the durable half, one write of
//! that row per node every quarter of a hold, and the first writes of the
//! outage wait out a lease (3 s). Afterwards: the shared half is trusted
//! again a hold (60 s) after the last write that missed it, its inboxes
//! rebuilt on their next reads.

use crate::profile::{Profile, Profiled};
use crate::traits::*;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs `write`, which goes on without the shared half: the miss recorded
/// before it (nothing written if that fails), recorded again if the write
/// outlived half its hold, and the answer given once no node trusts the
/// shared half.
pub async fn without_shared<T>(hub: &dyn Hub, write: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    let d = hub.distrust_shared().await?;
    let out = write.await;
    if d.outlived()
        && let Err(e) = hub.distrust_shared().await
    {
        tracing::error!(error = %e, "a long write without the shared half could not record its miss again");
        metrics::counter!("tideway_shared_misses_unrecorded_total").increment(1);
    }
    d.wait().await;
    out
}

/// How long the leases and holds last.
#[derive(Debug, Clone, Copy)]
pub struct TrustTimes {
    /// A node trusts the shared half this long after a read of the record
    /// that began then and found it trusted (its probe reads it each
    /// second).
    pub lease: Duration,
    /// A write that missed the shared half keeps it untrusted this long
    /// from its start; longer than any write's bounds on the database.
    pub hold: Duration,
    /// Added to waits that compare this node's clock with another's rate.
    pub margin: Duration,
}

impl Default for TrustTimes {
    fn default() -> Self {
        TrustTimes { lease: Duration::from_secs(3), hold: Duration::from_secs(60), margin: Duration::from_millis(500) }
    }
}

/// The reads a page trusts: failed while the node does not trust the
/// shared half, as if it were down.
pub const GATED: &[&str] =
    &["fact_tokens", "read_inbox", "inbox_floor", "unpushed_above", "unpushed_keys", "removed_since", "begin_rebuild"];

/// Until when this node trusts the shared half.
#[derive(Debug, Clone, Copy)]
enum Until {
    /// No probe has read the record yet: trusted, as a backend opened for
    /// a tool or a test is (a server probes before it listens).
    Unprobed,
    At(Instant),
}

#[derive(Debug)]
struct Lease {
    until: Until,
    /// This node's last recorded miss, while its hold lasts.
    held: Option<Distrusted>,
}

/// The shared half as a node may trust it: every call forwarded, the reads
/// of [`GATED`] failed while the node holds no lease; the probe ([`Hub::ping`])
/// renews the lease and trusts the shared half again after a miss.
pub struct Trusted {
    inner: Arc<dyn Shared>,
    durable: Arc<dyn Durable>,
    times: TrustTimes,
    lease: Mutex<Lease>,
}

impl Trusted {
    pub fn new(inner: Arc<dyn Shared>, durable: Arc<dyn Durable>, times: TrustTimes) -> Self {
        Self { inner, durable, times, lease: Mutex::new(Lease { until: Until::Unprobed, held: None }) }
    }

    /// Whether this node trusts the shared half now.
    pub fn trusted(&self) -> bool {
        match self.lease.lock().until {
            Until::Unprobed => true,
            Until::At(t) => Instant::now() < t,
        }
    }

    fn gate(&self, name: &str) -> Result<()> {
        if !GATED.contains(&name) || self.trusted() {
            return Ok(());
        }
        Err(crate::StoreError::unavailable_because(
            crate::Engine::Redis,
            "the shared half is not trusted: a write went on without it (pages are read from the database until it \
             is dropped and trusted again)",
        ))
    }

    fn lapse(&self, at: Instant) {
        let mut l = self.lease.lock();
        l.until = match l.until {
            Until::At(t) if t < at => Until::At(t),
            _ => Until::At(at),
        };
    }

    /// The probe's part: reads the record; renews the lease when it says
    /// trusted; when not, and its hold is over and the shared engine
    /// answered, drops the shared half and trusts it again.
    async fn refresh(&self, answered: bool) {
        let began = Instant::now();
        let t = match self.durable.shared_trust(TrustChange::Read).await {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!(error = %e, "the shared half's trust not read: the lease runs out");
                if let Until::Unprobed = self.lease.lock().until {
                    self.lapse(began);
                }
                return;
            }
        };
        if t.trusted {
            self.lease.lock().until = Until::At(began + self.times.lease);
            return;
        }
        self.lapse(began);
        if !answered || t.now.0 < t.hold_until.0 {
            return;
        }
        match self.inner.forget_all().await {
            Ok(dropped) => {
                let restore = TrustChange::Restore { generation: t.generation, missed: t.missed };
                let asked = Instant::now();
                match self.durable.shared_trust(restore).await {
                    Ok(after) if after.trusted => {
                        tracing::info!(
                            dropped,
                            generation = t.generation,
                            "the shared half is trusted again: dropped after the writes that missed it"
                        );
                        metrics::counter!("tideway_shared_restored_total").increment(1);
                        self.lease.lock().until = Until::At(asked + self.times.lease);
                    }
                    Ok(_) => tracing::info!("a write missed the shared half while it was dropped: dropped again later"),
                    Err(e) => tracing::warn!(error = %e, "the shared half was dropped but its trust not restored"),
                }
            }
            Err(e) => tracing::warn!(error = %e, "the shared half could not be dropped to be trusted again"),
        }
    }
}

impl Profiled for Trusted {
    fn profile(&self) -> Profile {
        self.inner.profile()
    }
}

crate::forward::forward_backend!(@shared Trusted, s => s.inner, gate: |name| s.gate(name));

#[async_trait::async_trait]
impl Hub for Trusted {
    async fn publish(&self, signals: &[Signal]) -> Result<()> {
        self.inner.publish(signals).await
    }
    async fn subscribe(&self) -> Result<Subscription> {
        self.inner.subscribe().await
    }
    /// The engine's probe, and the lease's renewal beside it.
    async fn ping(&self) -> Result<()> {
        let pinged = self.inner.ping().await;
        self.refresh(pinged.is_ok()).await;
        pinged
    }
    async fn forget_all(&self) -> Result<usize> {
        self.inner.forget_all().await
    }
    async fn distrust_shared(&self) -> Result<Distrusted> {
        let now = Instant::now();
        // This node's last miss still holds for most of a hold: it covers
        // this write too (the record cannot be restored before it ends).
        if let Some(d) = self.lease.lock().held
            && d.hold_ends.is_some_and(|h| h > now + self.times.hold * 3 / 4)
        {
            return Ok(d);
        }
        let hold_ms = i64::try_from(self.times.hold.as_millis()).unwrap_or(i64::MAX);
        let t = self.durable.shared_trust(TrustChange::Distrust { hold_ms }).await?;
        self.lapse(now);
        let after_ms = t.since.0 + i64::try_from(self.times.lease.as_millis()).unwrap_or(0) - t.now.0;
        let ack_after = (after_ms > 0).then(|| now + Duration::from_millis(after_ms as u64) + self.times.margin);
        let hold_ends = Duration::from_millis(u64::try_from(t.hold_until.0 - t.now.0).unwrap_or(0))
            .checked_sub(self.times.margin)
            .map(|d| now + d);
        let d = Distrusted { ack_after, hold_ends, hold: self.times.hold };
        self.lease.lock().held = Some(d);
        metrics::counter!("tideway_shared_misses_total").increment(1);
        Ok(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::Millis;

    #[test]
    fn the_record_follows_its_rule() {
        let t = SharedTrust::FIRST.apply(TrustChange::Read, Millis(5));
        assert_eq!(t, SharedTrust { now: Millis(5), ..SharedTrust::FIRST });
        let d = t.apply(TrustChange::Distrust { hold_ms: 100 }, Millis(10));
        assert_eq!((d.generation, d.missed, d.trusted, d.since, d.hold_until), (1, 1, false, Millis(10), Millis(110)));
        let again = d.apply(TrustChange::Distrust { hold_ms: 100 }, Millis(50));
        assert_eq!(
            (again.generation, again.missed, again.since, again.hold_until),
            (1, 2, Millis(10), Millis(150)),
            "a second miss keeps the generation and its start, and holds longer"
        );
        let early = again.apply(TrustChange::Restore { generation: 1, missed: 2 }, Millis(149));
        assert!(!early.trusted, "not before the hold ends");
        let raced = again.apply(TrustChange::Restore { generation: 1, missed: 1 }, Millis(200));
        assert!(!raced.trusted, "not after a miss it did not see");
        let back = again.apply(TrustChange::Restore { generation: 1, missed: 2 }, Millis(150));
        assert!(back.trusted);
        let next = back.apply(TrustChange::Distrust { hold_ms: 10 }, Millis(300));
        assert_eq!((next.generation, next.since, next.hold_until), (2, Millis(300), Millis(310)));
    }
}
