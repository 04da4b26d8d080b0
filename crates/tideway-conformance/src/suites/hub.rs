//! The `hub` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Hub`: every subscription open when signals are published receives them,
/// in order; one opened later does not; publishing with no subscription
/// succeeds; a subscriber that falls behind is told (`Lagged`) instead of
/// holding an unbounded backlog.
pub async fn hub(b: &dyn Backend) {
    use tideway_store::{Received, Signal};
    async fn next(sub: &mut tideway_store::Subscription) -> Received {
        tokio::time::timeout(std::time::Duration::from_secs(5), sub.recv()).await.expect("a signal within 5 s")
    }
    b.publish(&[Signal::Work]).await.expect("publish with no subscription");
    // (A Redis Cluster passes a PUBLISH on to its other nodes over its bus,
    // after answering it: one subscribed at once on another node could still
    // hear this one.)
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut a = b.subscribe().await.expect("subscribe");
    let mut c = b.subscribe().await.expect("subscribe");
    b.publish(&[
        Signal::Work,
        Signal::Home(UserId(7)),
        Signal::Author(UserId(3)),
        Signal::Gone(UserId(4)),
        Signal::Item(ItemId(9_000_000_001)),
    ])
    .await
    .expect("publish");
    b.publish(&[Signal::Home(UserId(u64::MAX >> 1))]).await.expect("publish");
    for sub in [&mut a, &mut c] {
        assert_eq!(next(sub).await, Received::Signal(Signal::Work));
        assert_eq!(next(sub).await, Received::Signal(Signal::Home(UserId(7))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Author(UserId(3))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Gone(UserId(4))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Item(ItemId(9_000_000_001))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Home(UserId(u64::MAX >> 1))));
    }
    let mut late = b.subscribe().await.expect("subscribe");
    b.publish(&[Signal::Home(UserId(8))]).await.expect("publish");
    assert_eq!(next(&mut late).await, Received::Signal(Signal::Home(UserId(8))), "earlier signals are not replayed");
    // `a` reads nothing while many signals pass: it falls behind.
    let many: Vec<Signal> = (1..=5000).map(|u| Signal::Home(UserId(u))).collect();
    b.publish(&many).await.expect("publish");
    let mut lagged = false;
    for _ in 0..=many.len() + 1 {
        match next(&mut a).await {
            Received::Lagged => {
                lagged = true;
                break;
            }
            Received::Signal(_) => {}
            Received::Closed => panic!("the hub closed"),
        }
    }
    assert!(lagged, "a subscriber 5,000 signals behind is told it lagged");
    let mut fresh = b.subscribe().await.expect("subscribe");
    b.publish(&[Signal::Work]).await.expect("publish");
    assert_eq!(next(&mut fresh).await, Received::Signal(Signal::Work), "the hub goes on");
}
