//! The `node_claims` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Jobs`: node ids claimed by one running instance at a time, heartbeats,
/// takeover of a stale claim with a new epoch, release, the store's clock.
pub async fn node_claims(b: &dyn Backend) {
    use tideway_store::NodeClaim;
    const STALE: i64 = 300;
    let (first, second, third) = (11, 22, 33);
    assert_eq!(b.claim_node(5, first, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 1 });
    assert_eq!(b.claim_node(6, second, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 1 }, "ids are apart");
    assert!(b.beat(5, first).await.expect("beat"));
    match b.claim_node(5, second, STALE).await.expect("claim") {
        NodeClaim::Held { age_ms } => assert!((0..STALE).contains(&age_ms), "age {age_ms}"),
        other => panic!("a live holder keeps its id, got {other:?}"),
    }
    assert!(!b.beat(5, second).await.expect("beat"), "a beat of a non-holder records nothing");
    assert_eq!(
        b.claim_node(5, first, STALE).await.expect("claim"),
        NodeClaim::Claimed { epoch: 2 },
        "the holder claiming again starts a new epoch"
    );
    // The holder stops beating: once its beat is stale the id is taken.
    tokio::time::sleep(std::time::Duration::from_millis(STALE as u64 + 50)).await;
    assert_eq!(b.claim_node(5, second, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 3 });
    assert!(!b.beat(5, first).await.expect("beat"), "the earlier holder learns it lost the id");
    assert!(b.beat(5, second).await.expect("beat"));
    // A release frees the id at once; releasing someone else's does not.
    b.release_node(5, first).await.expect("release");
    assert!(matches!(b.claim_node(5, third, STALE).await.expect("claim"), NodeClaim::Held { .. }));
    b.release_node(5, second).await.expect("release");
    assert_eq!(b.claim_node(5, third, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 4 });
    assert!(b.beat(5, third).await.expect("beat"));
    // The store's clock, where it has one, is the wall clock's (same machine).
    if let Some(t) = b.clock().await.expect("clock") {
        assert!((t.0 - Millis::now().0).abs() < 5_000, "store clock {t:?}");
    }
}
