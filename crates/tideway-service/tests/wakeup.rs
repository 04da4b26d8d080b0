//! Fan-out workers are woken through the event hub, on every node: a post
//! on one node is delivered by an idle worker of another at once. The
//! workers here poll only once a minute, so a delivery within the test's
//! deadline can only come from the hub's signal. On one process (the
//! in-memory hub) and on two nodes sharing a Redis (its pub/sub).

use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_core::{ItemKind, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, PageRequest, ServiceOptions, SystemClock};
use tideway_store::{Backend, Split, Store};
use tokio_util::sync::CancellationToken;

async fn service(backend: Arc<dyn Backend>) -> Arc<FeedService> {
    Arc::new(FeedService::new(backend, ServiceOptions::default(), Arc::new(SystemClock)).await.expect("service"))
}

/// `reader` follows `author` on `poster`; an idle worker of `worker_node`
/// delivers `author`'s post to `reader`'s inbox.
async fn a_post_wakes_an_idle_worker(poster: Arc<FeedService>, worker_node: Arc<FeedService>) {
    let (reader, author) = (UserId(1), UserId(2));
    poster.graph.follow(reader, author).await.expect("follow");
    assert!(poster.feeds.home(reader, &PageRequest::default()).await.expect("home").entries.is_empty());
    let cancel = CancellationToken::new();
    let worker = FanoutWorker::new(worker_node.clone()).poll_every(Duration::from_secs(60));
    let running = tokio::spawn(worker.run(cancel.clone()));
    // Let the worker find nothing and go idle (subscribed to the hub).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (posted, _) = poster.items.create_item(NewItem::new(author, ItemKind::Post)).await.expect("post");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let inbox = poster
            .backend()
            .read_inbox(reader, tideway_core::merge::KeyRange::ALL, tideway_core::merge::Direction::Older, 10)
            .await
            .expect("inbox")
            .map(|r| r.keys);
        if inbox == Some(vec![posted.item.id.0]) {
            break;
        }
        assert!(Instant::now() < deadline, "the idle worker was not woken (its poll is a minute): {inbox:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cancel.cancel();
    running.await.expect("the worker stops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_wakes_the_worker_of_its_process() {
    let svc = service(Arc::new(Store::in_memory(800))).await;
    a_post_wakes_an_idle_worker(svc.clone(), svc).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_on_one_node_wakes_the_worker_of_another() {
    let url =
        std::env::var("TIDEWAY_TEST_REDIS_URL").expect("TIDEWAY_TEST_REDIS_URL is not set (scripts/services.sh up)");
    let durable: Arc<Store<tideway_store::NoJournal>> = Arc::new(Store::in_memory(800));
    let prefix = format!("test{}:", rand::random::<u64>());
    let node = async || {
        let mut ro = tideway_store_redis::RedisOptions::new(vec![url.clone()], 800);
        ro.prefix = prefix.clone();
        let shared = Arc::new(tideway_store_redis::RedisShared::connect(ro).await.expect("redis"));
        (service(Arc::new(Split::new(durable.clone(), shared.clone()))).await, shared)
    };
    let (a, shared) = node().await;
    let (b, _) = node().await;
    a_post_wakes_an_idle_worker(a, b).await;
    shared.purge().await.expect("purge");
}
