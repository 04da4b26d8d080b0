//! A fan-out worker that dies loses its jobs after the lease; another worker
//! resumes them from their checkpoints, and every follower gets the item
//! exactly once.

use std::sync::Arc;
use tideway_core::{ItemKind, Millis, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions, StepOutcome};
use tideway_store::{Backend, Store};

#[tokio::test]
async fn another_worker_resumes_a_dead_workers_job_after_its_lease() {
    let backend: Arc<dyn Backend> = Arc::new(Store::in_memory(800));
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let opts =
        ServiceOptions { chunk_size: 1000, hot_followers: u64::MAX, lease_ms: 30_000, ..ServiceOptions::default() };
    let svc = Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"));
    let author = UserId(1);
    let followers: Vec<UserId> = (10..2_510).map(UserId).collect();
    for f in &followers {
        svc.graph.follow_many(*f, &[author]).await.expect("follow");
        svc.feeds.home(*f, &PageRequest::default()).await.expect("an inbox, so the follower is pushed to");
    }
    let (post, _) = svc.items.create_item(NewItem::new(author, ItemKind::Post)).await.expect("post");
    // Two nodes' workers (a later epoch of one node would take its jobs at once).
    let (a, b) = (
        FanoutWorker::with_id(svc.clone(), tideway_store::rules::worker_id(1, 1)),
        FanoutWorker::with_id(svc.clone(), tideway_store::rules::worker_id(2, 1)),
    );

    // A delivers one chunk of 1,000 and dies.
    assert_eq!(a.step().await.expect("step"), StepOutcome::Progress { deliveries: 1000, completed: 0 });
    // Within A's lease B finds nothing to claim.
    clock.advance(29_000);
    assert_eq!(b.step().await.expect("step"), StepOutcome::Idle);
    // After it, B resumes from A's checkpoint: 1,500 deliveries, not 2,500.
    clock.advance(2_000);
    assert_eq!(b.step().await.expect("step"), StepOutcome::Progress { deliveries: 1000, completed: 0 });
    assert_eq!(b.step().await.expect("step"), StepOutcome::Progress { deliveries: 500, completed: 1 });
    assert_eq!(b.step().await.expect("step"), StepOutcome::Idle);
    assert!(backend.pending_jobs(10).await.expect("jobs").is_empty());
    // A comes back: nothing left, nothing undone.
    assert_eq!(a.step().await.expect("step"), StepOutcome::Idle);
    for f in &followers {
        let page = svc.feeds.home(*f, &PageRequest::default()).await.expect("home");
        let ids: Vec<_> = page.entries.iter().map(|e| e.item.item.id).collect();
        assert_eq!(ids, vec![post.item.id], "follower {f}: exactly once");
    }
}
