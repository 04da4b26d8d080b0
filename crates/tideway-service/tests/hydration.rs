//! A page costs a constant number of storage calls whatever its size:
//! [`Counted`] counts every call made through it.

use std::sync::Arc;
use tideway_core::{ItemId, ItemKind, Millis, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions};
use tideway_store::{Backend, Counted, Profiled, Store};

async fn setup() -> (Arc<Counted>, Arc<FeedService>) {
    setup_on(Arc::new(Store::in_memory(800))).await
}

/// The workload of every check here, on `engine`, with the options the
/// server gives a backend of its profile.
async fn setup_on(engine: Arc<dyn Backend>) -> (Arc<Counted>, Arc<FeedService>) {
    let opts = ServiceOptions::new(&tideway_service::Config::default(), engine.profile());
    let store = Arc::new(Counted::new(engine));
    let backend: Arc<dyn Backend> = store.clone();
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let svc = Arc::new(FeedService::new(backend, opts, clock.clone()).await.expect("service"));
    let reader = UserId(1);
    let authors: Vec<UserId> = (2..=31).map(UserId).collect();
    svc.graph.follow_many(reader, &authors).await.expect("follow");
    svc.feeds.home(reader, &PageRequest::default()).await.expect("inbox");
    let mut ids = Vec::new();
    for round in 0..10 {
        for &a in &authors {
            clock.advance(1);
            let (v, _) = svc.items.create_item(NewItem::new(a, ItemKind::Post)).await.expect("post");
            ids.push(v.item.id);
            if round % 3 == 0 {
                svc.items.react(v.item.id, reader, "like", true).await.expect("like");
                svc.items.react(v.item.id, UserId(99), "wow", true).await.expect("wow");
            }
        }
    }
    for id in ids.iter().step_by(7) {
        clock.advance(1);
        let mut r = NewItem::new(UserId(5), ItemKind::Repost);
        r.repost_of = Some(*id);
        svc.items.create_item(r).await.expect("repost");
        let mut reply = NewItem::new(UserId(6), ItemKind::Reply);
        reply.reply_to = Some(*id);
        svc.items.create_item(reply).await.expect("reply");
    }
    FanoutWorker::new(svc.clone()).drain().await.expect("drain");
    (store, svc)
}

async fn calls_of(store: &Counted, f: impl AsyncFnOnce()) -> u64 {
    let before = store.calls();
    f().await;
    store.calls() - before
}

#[tokio::test]
async fn home_profile_and_batch_get_cost_a_constant_number_of_calls() {
    let (store, svc) = setup().await;
    constant_calls(&store, &svc, IN_PROCESS_HOME_CALLS).await;
}

/// In process: the page's reads, each a call (`page_facts` asks the parts):
/// four first (the followees, the activity mark, the inbox, the hot
/// authors), then per batch the inbox's keys (the first batch's come with
/// the first read), the records, the originals they repost and the facts,
/// then the hydration. A batch is sized to what the page needs, and this
/// feed's newest keys are reposts of items shown further down, so the first
/// batch falls short and a second follows: two batches, 12 calls.
const IN_PROCESS_HOME_CALLS: u64 = 12;

/// On shared engines, a warm page (its records and its reader's followee
/// list held by the node, the reader marked active lately by it): the
/// inbox's first batch (with its floor) and, beside it, the hot-author
/// marks of the held list; the tokens of the facts the node holds copies
/// of (one call to the shared half), then the page's facts the copies lack
/// in one statement, which checks the copies of records and of the list.
/// No record and no followee is read, no activity mark written. (The
/// node's copies stand before the counting decorator, so every call
/// counted is one to an engine.)
const SHARED_WARM_HOME_CALLS: u64 = 4;

/// The same on PostgreSQL + Redis, as a scaled-out node runs (pages read
/// ahead, records held by the node): each call there is a round trip,
/// counted by the same decorator.
#[tokio::test]
async fn on_postgres_and_redis_a_page_costs_a_constant_number_of_calls() {
    on_shared_engines(tideway_config::BackendKind::Postgres, "TIDEWAY_TEST_POSTGRES_URL").await;
}

/// And on MariaDB + Redis.
#[tokio::test]
async fn on_mariadb_and_redis_a_page_costs_a_constant_number_of_calls() {
    on_shared_engines(tideway_config::BackendKind::Mysql, "TIDEWAY_TEST_MYSQL_URL").await;
}

async fn on_shared_engines(kind: tideway_config::BackendKind, url_var: &str) {
    let node = tideway_engines::testing::FreshNode::open(kind, url_var, "hydration").await;
    let (store, svc) = setup_on(node.backend()).await;
    assert!(store.profile().reads_ahead());
    assert!(svc.copies().is_some(), "a node on shared engines keeps copies of records");
    let names = constant_calls(&store, &svc, SHARED_WARM_HOME_CALLS).await;
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["fact_tokens", "page_facts", "read_inbox", "unpushed_keys"], "a warm page's calls: {names:?}");
    drop(svc);
    node.close().await;
}

/// A page's calls are the same for every size, and at most `home_max`;
/// first a page of 100 (its records then held where the node keeps copies).
/// Returns the names of a page's calls.
async fn constant_calls(store: &Counted, svc: &FeedService, home_max: u64) -> Vec<&'static str> {
    // The setup's writes send their signals from tasks of their own on
    // shared engines: let those land before counting a page's calls.
    let mut last = store.calls();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = store.calls();
        if now == last {
            break;
        }
        last = now;
    }
    svc.feeds.home(UserId(1), &PageRequest { limit: Some(100), ..Default::default() }).await.expect("warm up");
    let mut home_calls = Vec::new();
    for limit in [5, 20, 100] {
        home_calls.push(
            calls_of(store, async || {
                let page = svc
                    .feeds
                    .home(UserId(1), &PageRequest { limit: Some(limit), ..Default::default() })
                    .await
                    .expect("home");
                assert_eq!(page.entries.len(), limit);
                if limit == 100 {
                    // Hydrated: the reader's likes, counts per kind, replies and reposts.
                    assert!(
                        page.entries.iter().any(|e| e.item.viewer.as_ref().is_some_and(|v| v.reactions == ["like"]))
                    );
                    assert!(
                        page.entries
                            .iter()
                            .any(|e| e.item.counts.of_kind("wow") == 1 && e.item.counts.of_kind("like") == 1)
                    );
                    assert!(page.entries.iter().any(|e| e.item.counts.replies == 1 && e.item.counts.reposts == 1));
                }
            })
            .await,
        );
    }
    // (in process a page's batches are sized to what it needs, so one
    // whose keys were filtered takes another batch: calls, not round trips)
    if store.profile().reads_ahead() {
        assert!(home_calls.iter().all(|&c| c == home_calls[0]), "home calls vary with page size: {home_calls:?}");
    }
    let before = store.calls();
    svc.feeds.home(UserId(1), &PageRequest { limit: Some(20), ..Default::default() }).await.expect("home");
    let names = store.names_since(before);
    let most = home_calls.iter().copied().max().unwrap_or(0);
    assert!(most <= home_max, "a home page took {most} calls, more than {home_max}: {names:?}");

    let mut profile_calls = Vec::new();
    for limit in [2, 8] {
        profile_calls.push(
            calls_of(store, async || {
                let p = svc
                    .feeds
                    .profile(UserId(5), Some(UserId(1)), &PageRequest { limit: Some(limit), ..Default::default() })
                    .await
                    .expect("p");
                assert_eq!(p.entries.len(), limit);
            })
            .await,
        );
    }
    assert_eq!(profile_calls[0], profile_calls[1], "profile calls vary with page size");

    let ids: Vec<ItemId> = svc
        .feeds
        .home(UserId(1), &PageRequest { limit: Some(100), ..Default::default() })
        .await
        .expect("home")
        .entries
        .iter()
        .map(|e| e.item.item.id)
        .collect();
    let one = calls_of(store, async || {
        assert_eq!(svc.items.get_items(&ids[..1], Some(UserId(1))).await.expect("get").len(), 1)
    })
    .await;
    let hundred =
        calls_of(store, async || assert_eq!(svc.items.get_items(&ids, Some(UserId(1))).await.expect("get").len(), 100))
            .await;
    assert_eq!(one, hundred, "batch get calls vary with the number of ids");
    names
}

/// Reading counts and marks ahead (as on shared engines) changes how many
/// calls run in sequence, never what a page shows: two services on one store,
/// one reading ahead, serve the same pages, promotions included, and the one
/// reading ahead still makes a constant number of calls per page.
#[tokio::test]
async fn pages_read_ahead_are_the_same_pages() {
    let (store, plain) = setup().await;
    let backend: Arc<dyn Backend> = store.clone();
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_100_000)));
    let opts = ServiceOptions { read_ahead: true, ..ServiceOptions::default() };
    let ahead = FeedService::new(backend, opts, clock).await.expect("service");
    let promoted = plain.items.create_item(NewItem::new(UserId(7), ItemKind::Post)).await.expect("post").0.item.id;
    plain.items.react(promoted, UserId(1), "like", true).await.expect("like");
    plain.items.create_promotion(promoted, 3, Millis(0), Millis(i64::MAX)).await.expect("promotion");
    let mut calls = Vec::new();
    for limit in [5, 20, 100] {
        let req = PageRequest { limit: Some(limit), ..Default::default() };
        let want = plain.feeds.home(UserId(1), &req).await.expect("home");
        let mut got = None;
        calls.push(calls_of(&store, async || got = Some(ahead.feeds.home(UserId(1), &req).await.expect("home"))).await);
        let got = got.expect("page");
        assert_eq!(got, want, "home, limit {limit}");
        assert!(got.entries.iter().any(|e| e.item.item.id == promoted && e.item.viewer.is_some()));
        // The next page (older-ward) and the newer-ward one agree too.
        let older = PageRequest { limit: Some(limit), before: want.next_cursor.clone(), after: None };
        let newer =
            PageRequest { limit: Some(limit), before: None, after: want.entries.last().map(|e| e.cursor.clone()) };
        for req in [older, newer] {
            let want = plain.feeds.home(UserId(1), &req).await.expect("home");
            assert!(!want.entries.is_empty() || limit == 100, "limit {limit}: {req:?} is empty");
            assert_eq!(ahead.feeds.home(UserId(1), &req).await.expect("home"), want, "home {req:?}");
        }
        let p = PageRequest { limit: Some(limit.min(8)), ..Default::default() };
        assert_eq!(
            ahead.feeds.profile(UserId(5), Some(UserId(1)), &p).await.expect("profile"),
            plain.feeds.profile(UserId(5), Some(UserId(1)), &p).await.expect("profile"),
            "profile, limit {:?}",
            p.limit
        );
    }
    assert!(calls.iter().all(|&c| c == calls[0]), "home calls vary with page size: {calls:?}");
}

/// A like, or a read of one item, by a user the embedded store has never
/// seen reads no unit of theirs: whether a block separates them from the
/// author is read from the author's side, loaded once for every liker
/// (before, each new liker's follows and blockers were read from disk). A
/// followers-only item still reads the user's follows, and a block from
/// either side still refuses the like.
#[tokio::test]
async fn likers_never_seen_load_nothing_of_their_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store =
        Arc::new(tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, 800).expect("embedded"));
    let backend: Arc<dyn Backend> = store.clone();
    let opts = ServiceOptions::new(&tideway_service::Config::default(), backend.profile());
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let svc = FeedService::new(backend, opts, clock.clone()).await.expect("service");
    let author = UserId(1);
    let (post, _) = svc.items.create_item(NewItem::new(author, ItemKind::Post)).await.expect("post");
    let id = post.item.id;
    svc.items.react(id, UserId(2), "like", true).await.expect("the first like loads the author's side");
    let loads = store.load_counts().0;
    for liker in 100..150 {
        let counts = svc.items.react(id, UserId(liker), "like", true).await.expect("like");
        assert_eq!(counts.of_kind("like"), liker - 98);
        svc.items.get_item(id, Some(UserId(liker + 1000))).await.expect("read by a new viewer");
    }
    assert_eq!(store.load_counts().0, loads, "a new liker's or viewer's units were read");

    svc.graph.set_block(UserId(3), author, true).await.expect("block");
    let refused = svc.items.react(id, UserId(3), "like", true).await.expect_err("the liker blocks the author");
    assert!(matches!(refused, tideway_service::ServiceError::Forbidden(_)), "{refused:?}");
    svc.graph.set_block(author, UserId(4), true).await.expect("block");
    let refused = svc.items.react(id, UserId(4), "like", true).await.expect_err("the author blocks the liker");
    assert!(matches!(refused, tideway_service::ServiceError::Forbidden(_)), "{refused:?}");
    assert!(svc.items.get_item(id, Some(UserId(4))).await.is_err(), "a blocked viewer finds no item");

    let mut only_followers = NewItem::new(author, ItemKind::Post);
    only_followers.visibility = tideway_core::Visibility::Followers;
    let (hidden, _) = svc.items.create_item(only_followers).await.expect("post");
    svc.graph.follow(UserId(5), author).await.expect("follow");
    svc.items.react(hidden.item.id, UserId(5), "like", true).await.expect("a follower likes");
    let refused = svc.items.react(hidden.item.id, UserId(6), "like", true).await.expect_err("not a follower");
    assert!(matches!(refused, tideway_service::ServiceError::NotFound(_)), "{refused:?}");
}

/// In process a page asks for what it needs and one more key, doubling the
/// batch each time one falls short: a page behind many filtered keys (a
/// muted author's 400 posts above the rest) still reads few batches, and
/// shows exactly the entries the definition gives.
#[tokio::test]
async fn in_process_a_page_behind_many_filtered_keys_reads_few_batches() {
    let engine: Arc<dyn Backend> = Arc::new(Store::in_memory(800));
    assert!(!engine.profile().round_trips);
    let opts = ServiceOptions::new(&tideway_service::Config::default(), engine.profile());
    let store = Arc::new(Counted::new(engine));
    let backend: Arc<dyn Backend> = store.clone();
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let svc = Arc::new(FeedService::new(backend, opts, clock.clone()).await.expect("service"));
    let (reader, muted) = (UserId(1), UserId(40));
    let authors: Vec<UserId> = (2..=5).map(UserId).collect();
    svc.graph.follow_many(reader, &[authors.clone(), vec![muted]].concat()).await.expect("follow");
    svc.feeds.home(reader, &PageRequest::default()).await.expect("inbox");
    let mut shown = Vec::new();
    for _ in 0..10 {
        for &a in &authors {
            clock.advance(1);
            shown.push(svc.items.create_item(NewItem::new(a, ItemKind::Post)).await.expect("post").0.item.id);
        }
    }
    for _ in 0..400 {
        clock.advance(1);
        svc.items.create_item(NewItem::new(muted, ItemKind::Post)).await.expect("post");
    }
    svc.graph.set_mute(reader, muted, true).await.expect("mute");
    FanoutWorker::new(svc.clone()).drain().await.expect("drain");
    let before = store.calls();
    let page = svc.feeds.home(reader, &PageRequest { limit: Some(20), ..Default::default() }).await.expect("home");
    let batches = store.names_since(before).iter().filter(|n| **n == "records").count();
    let ids: Vec<ItemId> = page.entries.iter().map(|e| e.item.item.id).collect();
    let want: Vec<ItemId> = shown.iter().rev().take(20).copied().collect();
    assert_eq!(ids, want, "the 20 newest unmuted posts");
    assert!(page.next_cursor.is_some(), "20 more remain");
    // 22, 44, 88, 176, 352 keys: the fifth batch reaches past the 400
    // muted keys. Batches of a constant size would take 20 (of 22 keys) or
    // 9 (of 50).
    assert!(batches <= 5, "{batches} batches for 420 keys");
}
