//! A one-million-follower delivery is chunked, checkpointed and resumable:
//! stop it midway, reopen the store from disk as a restart would, and it
//! completes from its checkpoint (not from the start); every follower then
//! sees the item exactly once.

use std::sync::Arc;
use std::time::Instant;
use tideway_core::{ItemKind, Millis, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions, StepOutcome};
use tideway_store::Backend;
use tideway_store_fjall::SyncMode;

const FOLLOWERS: u64 = 1_000_000;
const AUTHOR: UserId = UserId(1);

async fn open(dir: &std::path::Path, clock: &Arc<ManualClock>) -> (Arc<dyn Backend>, Arc<FeedService>) {
    let backend: Arc<dyn Backend> = Arc::new(tideway_store_fjall::open(dir, SyncMode::Buffer, 800).expect("open"));
    let opts = ServiceOptions { chunk_size: 1000, ..ServiceOptions::default() };
    let svc = Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"));
    (backend, svc)
}

async fn home_ids(svc: &FeedService, u: UserId) -> Vec<u64> {
    svc.feeds
        .home(u, &PageRequest { limit: Some(10), ..Default::default() })
        .await
        .expect("home")
        .entries
        .iter()
        .map(|e| e.item.item.id.0)
        .collect()
}

#[tokio::test]
async fn a_million_follower_delivery_resumes_from_its_checkpoint() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    // Sampled readers: every 997th follower, on both sides of the checkpoint.
    let sample: Vec<UserId> = (2..FOLLOWERS + 2).step_by(997).map(UserId).collect();
    // Every follower follows the author, loaded in bulk as `tideway import`
    // does (hot_followers is 10,000 by default, so this author would be
    // pulled: it is raised below to test the push).
    {
        let mut importer = tideway_store_fjall::Importer::open(dir.path()).expect("importer");
        let follows: Vec<(UserId, UserId)> = (2..FOLLOWERS + 2).map(|f| (UserId(f), AUTHOR)).collect();
        importer.ingest_follows(&follows, Millis(1), &mut |_| {}).expect("follows");
        importer.finish().expect("durable");
    }
    let item = {
        let (backend, svc) = open(dir.path(), &clock).await;
        assert_eq!(backend.counts(AUTHOR).await.expect("counts").followers, FOLLOWERS);
        // Too many to load whole: a page of them is read from disk.
        let newest = backend.list(AUTHOR, tideway_store::ListKind::Followers, None, 3).await.expect("list");
        assert_eq!(
            newest,
            vec![
                (UserId(FOLLOWERS + 1), Millis(1)),
                (UserId(FOLLOWERS), Millis(1)),
                (UserId(FOLLOWERS - 1), Millis(1))
            ]
        );
        drop(svc);
        let opts = ServiceOptions { chunk_size: 1000, hot_followers: u64::MAX, ..ServiceOptions::default() };
        let svc = Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"));
        for &u in &sample {
            assert!(home_ids(&svc, u).await.is_empty());
        }
        clock.advance(5);
        let (v, _) = svc.items.create_item(NewItem::new(AUTHOR, ItemKind::Post)).await.expect("post");
        let worker = FanoutWorker::new(svc.clone());
        let mut delivered = 0;
        for _ in 0..400 {
            match worker.step().await.expect("step") {
                StepOutcome::Progress { deliveries, .. } => delivered += deliveries,
                StepOutcome::Idle => panic!("finished too early"),
            }
        }
        // 400 chunks of 1000 followers: the sampled readers among them have it.
        let reached = sample.iter().filter(|u| u.0 <= 400_001).count();
        assert_eq!(delivered, reached);
        for &u in sample.iter().filter(|u| u.0 <= 400_001) {
            assert_eq!(
                backend
                    .read_inbox(u, tideway_core::merge::KeyRange::ALL, tideway_core::merge::Direction::Older, 10)
                    .await
                    .expect("read")
                    .map(|r| r.keys),
                Some(vec![v.item.id.0])
            );
        }
        v.item.id.0
        // Everything is dropped here without finishing: the restart below
        // sees only what is on disk.
    };
    let (backend, svc) = open(dir.path(), &clock).await;
    let job = backend.pending_jobs(10).await.expect("jobs");
    assert_eq!(job.len(), 1, "the delivery is still pending after the restart");
    assert_eq!(job[0].cursor, Some((Millis(1), UserId(400_001))), "checkpointed after the 400th chunk");
    // Some readers come back (their inboxes are rebuilt), others stay away.
    let (back, away): (Vec<UserId>, Vec<UserId>) = sample.iter().partition(|u| u.0 % 2 == 0);
    for &u in &back {
        assert_eq!(home_ids(&svc, u).await, vec![item], "a returning reader's rebuilt first page");
    }
    let worker = FanoutWorker::new(svc.clone());
    let mut steps = 0;
    while let StepOutcome::Progress { .. } = worker.step().await.expect("step") {
        steps += 1;
    }
    // 600 chunks of 1000, then one step that finds no follower left and
    // completes the job: resumed at the checkpoint, not from the start (1001).
    assert_eq!(steps, 601, "resumed at the checkpoint");
    assert!(backend.pending_jobs(10).await.expect("jobs").is_empty());
    // Exactly once, for everyone: active, returning, and those who stayed away.
    for &u in back.iter().chain(&away) {
        assert_eq!(home_ids(&svc, u).await, vec![item], "follower {u}");
    }
    eprintln!("took {:?}", started.elapsed());
}
