//! The `shared_trust` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Jobs::shared_trust`: the record of trust in the shared half starts
/// trusted and changes only by `SharedTrust::apply`, at the store's clock:
/// a miss distrusts it (a new generation once), a restore needs the hold
/// over and no miss it did not see.
pub async fn shared_trust(b: &dyn Backend) {
    use tideway_store::TrustChange::{Distrust, Read, Restore};
    let t = b.shared_trust(Read).await.expect("read");
    assert!(t.trusted && t.generation == 0 && t.missed == 0, "a new deployment trusts its shared half: {t:?}");
    assert!((t.now.0 - Millis::now().0).abs() < 5_000, "the store's clock: {t:?}");
    let hold = Distrust { hold_ms: 300 };
    let d = b.shared_trust(hold).await.expect("distrust");
    assert_eq!(d, t.apply(hold, d.now), "a miss");
    assert!(!d.trusted && d.generation == 1 && d.missed == 1 && d.since == d.now, "{d:?}");
    let again = b.shared_trust(hold).await.expect("distrust again");
    assert_eq!(again, d.apply(hold, again.now), "a second miss keeps the generation");
    let read = b.shared_trust(Read).await.expect("read");
    assert_eq!(read, again.apply(Read, read.now), "read back");
    let restore = Restore { generation: again.generation, missed: again.missed };
    let early = b.shared_trust(restore).await.expect("restore");
    if early.now.0 < again.hold_until.0 {
        assert!(!early.trusted, "not trusted again within the hold: {early:?}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    let stale = b.shared_trust(Restore { generation: again.generation, missed: d.missed }).await.expect("restore");
    assert!(!stale.trusted, "not after a miss the restore did not see: {stale:?}");
    let back = b.shared_trust(restore).await.expect("restore");
    assert_eq!(back, again.apply(restore, back.now), "trusted again");
    assert!(back.trusted, "{back:?}");
    let next = b.shared_trust(hold).await.expect("a later miss");
    assert_eq!((next.generation, next.missed, next.trusted, next.since), (2, 3, false, next.now), "{next:?}");
}
