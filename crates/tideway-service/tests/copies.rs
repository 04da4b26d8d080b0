//! Nodes' copies of item records (`tideway_store::copies`) never show an item as it
//! was before a change acknowledged on any node: two nodes on one store,
//! the second holding copies, the first (or the store behind both, as a
//! lost hub signal would leave it) changing the items. On the memory
//! backend, and on PostgreSQL and MariaDB with Redis as scaled-out nodes
//! run.

use std::sync::Arc;
use tideway_core::{ItemId, ItemKind, Millis, NewItem, UserId, Visibility};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions};
use tideway_store::{Backend, ItemChange, NodeCopies, Record};

async fn two_nodes(backend: Arc<dyn Backend>) -> (Arc<FeedService>, Arc<FeedService>, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let base = ServiceOptions::new(&tideway_service::Config::default(), backend.profile());
    let node = async |id: u16| {
        let opts = ServiceOptions { node_id: id, copies_bytes: 1 << 20, read_ahead: true, ..base.clone() };
        Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"))
    };
    (node(1).await, node(2).await, clock)
}

fn ids(page: &tideway_service::Page) -> Vec<ItemId> {
    page.entries.iter().map(|e| e.item.item.id).collect()
}

fn held_rev(svc: &FeedService, id: ItemId) -> Option<u32> {
    match svc.copies().expect("copies").records().get(id.0) {
        Some((Record::Item(i), _)) => Some(i.rev),
        _ => None,
    }
}

/// The item epoch node `svc` keeps its copy of `id` with (0: none).
fn held_at(svc: &FeedService, id: ItemId) -> Option<u64> {
    svc.copies().expect("copies").records().get(id.0).map(|(_, at)| at)
}

async fn changes_are_never_hidden_by_copies(backend: Arc<dyn Backend>) {
    let (a, b, clock) = two_nodes(backend.clone()).await;
    let (reader, author, stranger) = (UserId(1), UserId(2), UserId(3));
    a.graph.follow_many(reader, &[author]).await.expect("follow");
    a.feeds.home(reader, &PageRequest::default()).await.expect("inbox");
    let mut posted = Vec::new();
    for _ in 0..4 {
        clock.advance(1);
        posted.push(a.items.create_item(NewItem::new(author, ItemKind::Post)).await.expect("post").0.item.id);
    }
    FanoutWorker::new(a.clone()).drain().await.expect("drain");
    let newest_first: Vec<ItemId> = posted.iter().rev().copied().collect();
    assert_eq!(ids(&b.feeds.home(reader, &PageRequest::default()).await.expect("home")), newest_first);
    assert_eq!(
        ids(&b.feeds.profile(author, Some(stranger), &PageRequest::default()).await.expect("profile")),
        newest_first
    );
    for id in &posted {
        assert_eq!(held_rev(&b, *id), Some(0), "node 2 holds a copy of {id}");
    }
    // Where the store keeps an item epoch (SQL), the copies a page checked
    // are kept as current at it, and the next pages check none of them one
    // by one while it stands: the changes below move it.
    b.feeds.home(reader, &PageRequest::default()).await.expect("home");
    let epoch = b.copies().expect("copies").records().epoch();
    for id in &posted {
        assert_eq!(held_at(&b, *id), Some(epoch), "the copy of {id} is current at the epoch seen");
    }
    assert_eq!(epoch > 0, backend.profile().round_trips, "an epoch where the store keeps one (SQL)");

    // Changes written where no node hears of them (a third node whose hub
    // signals are lost: its writes pass through its own copies, which
    // tell the shared half's tokens, and nothing else): node 2's copies
    // stay, and its pages must not show them.
    let quiet: Arc<dyn Backend> = Arc::new(NodeCopies::new(backend.clone(), 1 << 20));
    let (hidden, deleted) = (posted[1], posted[2]);
    quiet
        .update_item(hidden, &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("exists");
    quiet.update_item(deleted, &ItemChange::Delete).await.expect("delete").expect("exists");
    assert_eq!(held_rev(&b, hidden), Some(0), "no signal: the copy is still held");
    let home = b.feeds.home(reader, &PageRequest::default()).await.expect("home");
    assert_eq!(ids(&home), vec![posted[3], posted[1], posted[0]], "the deleted item is gone from home");
    let profile = b.feeds.profile(author, Some(stranger), &PageRequest::default()).await.expect("profile");
    assert_eq!(ids(&profile), vec![posted[3], posted[0]], "a stranger no longer sees the followers-only item");
    assert_eq!(held_rev(&b, hidden), Some(1), "the page read the item again and kept the new copy");

    // A change acknowledged by node 1 is on node 2's next page at once,
    // whether or not its signal has arrived ...
    a.items.delete_item(posted[3], Some(author)).await.expect("delete");
    let home = b.feeds.home(reader, &PageRequest::default()).await.expect("home");
    assert_eq!(ids(&home), vec![posted[1], posted[0]]);
    a.items.patch_item(posted[0], None, Some(Visibility::Mentioned), Some(author)).await.expect("patch");
    let home = b.feeds.home(reader, &PageRequest::default()).await.expect("home");
    assert_eq!(ids(&home), vec![posted[1]], "a mentions-only item leaves a follower's home");
    // ... and the signal makes node 2 forget its copy.
    clock.advance(1);
    a.items.patch_item(posted[1], None, Some(Visibility::Public), Some(author)).await.expect("patch");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while held_rev(&b, posted[1]).is_some() {
        assert!(std::time::Instant::now() < deadline, "node 2 still holds the copy 10 s after the signal");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        ids(&b.feeds.profile(author, Some(stranger), &PageRequest::default()).await.expect("profile")),
        vec![posted[1]]
    );

    // Node 2 walks its copy of the reader's followee list (where the engine
    // keeps versions); a follow or unfollow acknowledged by node 1 is on
    // node 2's next page at once all the same.
    let other = UserId(4);
    clock.advance(1);
    let theirs = a.items.create_item(NewItem::new(other, ItemKind::Post)).await.expect("post").0.item.id;
    FanoutWorker::new(a.clone()).drain().await.expect("drain");
    assert_eq!(ids(&b.feeds.home(reader, &PageRequest::default()).await.expect("home")), vec![posted[1]]);
    a.graph.follow_many(reader, &[other]).await.expect("follow on node 1");
    assert_eq!(
        ids(&b.feeds.home(reader, &PageRequest::default()).await.expect("home")),
        vec![theirs, posted[1]],
        "a follow made on node 1 is on node 2's next page"
    );
    a.graph.unfollow(reader, author).await.expect("unfollow on node 1");
    assert_eq!(
        ids(&b.feeds.home(reader, &PageRequest::default()).await.expect("home")),
        vec![theirs],
        "an unfollow made on node 1 is on node 2's next page"
    );
    // (written where no node hears of it, as a block of another node's)
    quiet.set_block(other, reader, true, Millis(1_700_000_001_000)).await.expect("block");
    assert!(b.feeds.home(reader, &PageRequest::default()).await.expect("home").entries.is_empty(), "a block ends it");

    // Node 2 keeps the reader's own relations with the list (where the
    // engine reads them with it): an insertion made on node 1, and a mute
    // written where no node hears of it, are on node 2's next page at once.
    clock.advance(1);
    a.feeds.insert_home(reader, posted[1]).await.expect("insert on node 1");
    assert_eq!(
        ids(&b.feeds.home(reader, &PageRequest::default()).await.expect("home")),
        vec![posted[1]],
        "an insertion made on node 1 is on node 2's next page"
    );
    quiet.set_mute(reader, author, true, Millis(1_700_000_002_000)).await.expect("mute");
    assert!(
        b.feeds.home(reader, &PageRequest::default()).await.expect("home").entries.is_empty(),
        "a mute hides the author's insertion on node 2's next page"
    );
    quiet.set_mute(reader, author, false, Millis(1_700_000_003_000)).await.expect("unmute");
    assert_eq!(ids(&b.feeds.home(reader, &PageRequest::default()).await.expect("home")), vec![posted[1]], "an unmute");
    quiet.set_block(reader, author, true, Millis(1_700_000_004_000)).await.expect("block");
    assert!(
        b.feeds.home(reader, &PageRequest::default()).await.expect("home").entries.is_empty(),
        "the reader's own block hides the insertion on node 2's next page"
    );
}

#[tokio::test]
async fn in_memory_copies_never_hide_a_change() {
    changes_are_never_hidden_by_copies(Arc::new(tideway_store::Store::in_memory(800))).await;
}

async fn on_shared_engines(kind: tideway_config::BackendKind, url_var: &str) {
    let node = tideway_engines::testing::FreshNode::open(kind, url_var, "itemcache").await;
    changes_are_never_hidden_by_copies(node.backend()).await;
    node.close().await;
}

#[tokio::test]
async fn on_postgres_copies_never_hide_a_change() {
    on_shared_engines(tideway_config::BackendKind::Postgres, "TIDEWAY_TEST_POSTGRES_URL").await;
}

#[tokio::test]
async fn on_mariadb_copies_never_hide_a_change() {
    on_shared_engines(tideway_config::BackendKind::Mysql, "TIDEWAY_TEST_MYSQL_URL").await;
}
