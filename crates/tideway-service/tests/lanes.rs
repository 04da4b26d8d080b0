//! A small delivery is not stuck behind a huge one: each worker step
//! advances every one of the oldest jobs by a chunk.

use std::sync::Arc;
use tideway_core::{ItemKind, Millis, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions, StepOutcome};
use tideway_store::{Backend, Store};

#[tokio::test]
async fn a_small_delivery_finishes_while_a_huge_one_is_still_running() {
    let backend: Arc<dyn Backend> = Arc::new(Store::in_memory(800));
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let opts = ServiceOptions { chunk_size: 100, hot_followers: u64::MAX, ..ServiceOptions::default() };
    let svc = Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"));
    let (big, small) = (UserId(1), UserId(2));
    for f in 10..20_010 {
        svc.graph.follow_many(UserId(f), &[big]).await.expect("follow");
    }
    let readers = [UserId(50_000), UserId(50_001)];
    for r in readers {
        svc.graph.follow_many(r, &[small]).await.expect("follow");
        svc.feeds.home(r, &PageRequest::default()).await.expect("inbox");
    }
    svc.items.create_item(NewItem::new(big, ItemKind::Post)).await.expect("big post");
    clock.advance(1);
    let (small_post, _) = svc.items.create_item(NewItem::new(small, ItemKind::Post)).await.expect("small post");
    let worker = FanoutWorker::new(svc.clone());
    assert!(matches!(worker.step().await.expect("step"), StepOutcome::Progress { completed: 1, .. }));
    for r in readers {
        let page = svc.feeds.home(r, &PageRequest::default()).await.expect("home");
        assert_eq!(page.entries.iter().map(|e| e.item.item.id).collect::<Vec<_>>(), vec![small_post.item.id]);
    }
    let pending = backend.pending_jobs(10).await.expect("jobs");
    assert_eq!(pending.len(), 1, "the 20,000-follower delivery is still running (200 chunks)");
    assert_eq!(pending[0].author, big);
}
