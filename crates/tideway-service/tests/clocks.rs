//! A node's clock against the database's, on PostgreSQL and MariaDB (+
//! Redis), with the node's clock skewed by an injected clock: beyond
//! `server.max_clock_offset` the node refuses writes and is not ready, and
//! says why; cross-node deadlines (job leases, activity windows) follow the
//! database's clock whatever the node's; a future id in the store never
//! becomes the floor new ids continue from.

use std::sync::Arc;
use std::time::Duration;
use tideway_config::BackendKind;
use tideway_core::ids::key_time;
use tideway_core::{Item, ItemId, ItemKind, Millis, NewItem, UserId};
use tideway_service::{
    Clock, FanoutWorker, FeedService, PageRequest, ServiceError, ServiceOptions, SkewedClock, StepOutcome, SystemClock,
};
use tideway_store::Backend;

const MINUTE: i64 = 60_000;

async fn service(backend: &Arc<dyn Backend>, clock: impl Clock + 'static) -> Arc<FeedService> {
    let opts = ServiceOptions {
        lease_ms: 1_000,
        chunk_size: 1,
        hot_followers: u64::MAX,
        active_window_ms: 10 * MINUTE,
        ..ServiceOptions::new(&tideway_service::Config::default(), backend.profile())
    };
    Arc::new(FeedService::new(backend.clone(), opts, Arc::new(clock)).await.expect("service"))
}

async fn skewed_nodes(kind: BackendKind, db_var: &str) {
    let node = tideway_engines::testing::FreshNode::open(kind, db_var, "clocks").await;
    let backend = node.backend();

    // A far-future id in the store (a node 10 minutes ahead wrote it before
    // clocks were checked): a correct node's ids continue from the clock.
    let future =
        tideway_core::IdGenerator::new(9).expect("ids").next(Millis(Millis::now().0 + 10 * MINUTE)).expect("id");
    backend
        .create_item(Item::new(ItemId(future), UserId(3), ItemKind::Post), false, Millis::now())
        .await
        .expect("a future item");
    let good = service(&backend, SystemClock).await;
    good.node().check_clock().expect("a correct clock takes writes");
    let (item, _) = good.items.create_item(NewItem::new(UserId(1), ItemKind::Post)).await.expect("post");
    let dated = key_time(item.item.id.0).0 - Millis::now().0;
    assert!(dated.abs() < 5_000, "a new id is dated by the clock, not after the future id ({dated} ms off)");

    // A node 10 minutes ahead: writes refused with the reason, not ready.
    let ahead = service(&backend, SkewedClock(10 * MINUTE)).await;
    let refused = ahead.items.create_item(NewItem::new(UserId(1), ItemKind::Post)).await;
    match refused {
        Err(ServiceError::NodeUnavailable(m)) => {
            assert!(m.contains("ahead of the database") && m.contains("server.max_clock_offset"), "{m}")
        }
        other => panic!("a write on a node 10 minutes ahead: {other:?}"),
    }
    assert!(matches!(ahead.graph.follow(UserId(5), UserId(1)).await, Err(ServiceError::NodeUnavailable(_))));
    ahead.ops.probe_engines().await;
    let why = ahead.ops.readiness().expect_err("not ready");
    assert!(why.contains("clock"), "{why}");
    let shared = ahead.node().shared_now().0 - Millis::now().0;
    assert!(shared.abs() < 2_000, "its deadlines follow the database's clock ({shared} ms off)");
    // Reads still work.
    ahead.feeds.home(UserId(5), &PageRequest::default()).await.expect("a read");

    // Its worker's lease ends by the database's clock (1 s), not its own
    // (10 minutes later): a correct node takes the job over after it.
    let followers: Vec<UserId> = (100..104).map(UserId).collect();
    for f in &followers {
        good.graph.follow(*f, UserId(1)).await.expect("follow");
        good.feeds.home(*f, &PageRequest::default()).await.expect("an inbox");
    }
    let (post, _) = good.items.create_item(NewItem::new(UserId(1), ItemKind::Post)).await.expect("post");
    let (a, b) = (FanoutWorker::new(ahead.clone()), FanoutWorker::new(good.clone()));
    assert_eq!(a.step().await.expect("step"), StepOutcome::Progress { deliveries: 1, completed: 0 });
    assert_eq!(b.step().await.expect("step"), StepOutcome::Idle, "the skewed node's lease is live");
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    assert_eq!(b.drain().await.expect("drain"), 3, "taken over after 1 s of the database's clock");
    for f in &followers {
        let page = good.feeds.home(*f, &PageRequest::default()).await.expect("home");
        assert_eq!(page.entries.first().map(|e| e.item.item.id), Some(post.item.id), "follower {f}");
    }

    // A node 15 days ahead does not find recent readers inactive.
    let far = service(&backend, SkewedClock(15 * 24 * 60 * MINUTE)).await;
    assert_eq!(far.ops.sweep_inactive().await.expect("sweep"), 0, "readers of a minute ago are active");
    assert!(far.ops.user(UserId(100)).await.expect("user").active);
    // And a node 10 minutes behind is refused too.
    let behind = service(&backend, SkewedClock(-10 * MINUTE)).await;
    match behind.items.create_item(NewItem::new(UserId(1), ItemKind::Post)).await {
        Err(ServiceError::NodeUnavailable(m)) => assert!(m.contains("behind the database"), "{m}"),
        other => panic!("a write on a node 10 minutes behind: {other:?}"),
    }

    drop((a, b, good, ahead, far, behind, backend));
    node.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_node_on_postgres_refuses_writes_and_keeps_deadlines() {
    skewed_nodes(BackendKind::Postgres, "TIDEWAY_TEST_POSTGRES_URL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_node_on_mariadb_refuses_writes_and_keeps_deadlines() {
    skewed_nodes(BackendKind::Mysql, "TIDEWAY_TEST_MYSQL_URL").await;
}
