//! The shared half of the storage (inboxes, activity, hot-author marks,
//! fact tokens: Redis in a scaled-out deployment) goes away from one node
//! of two and comes back. Every write on the cut node is accepted (it goes
//! on without the shared half, which then no node trusts:
//! `tideway_store::trust`), and every page on either node equals the
//! definition meanwhile (pulled from the durable half) and after (through
//! the inboxes again, once the shared half was dropped and trusted again).

use async_trait::async_trait;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{ItemId, ItemKind, Key, Millis, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions};
use tideway_store::trust::TrustTimes;
use tideway_store::{
    Activity, Backend, HotAuthors, Hub, InboxRead, InboxStats, Inboxes, NoJournal, Result, Signal, Split, Store,
    StoreError, Subscription,
};

/// A node's link to an in-memory shared half, with a switch.
struct Switch {
    inner: Arc<Store<NoJournal>>,
    down: AtomicBool,
}

impl Switch {
    fn up(&self) -> Result<&Store<NoJournal>> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::unavailable_because(
                tideway_store::Engine::Redis,
                "connection refused (the test took it down)",
            ))
        } else {
            Ok(&self.inner)
        }
    }
}

impl tideway_store::Profiled for Switch {
    fn profile(&self) -> tideway_store::Profile {
        tideway_store::Profile::REMOTE
    }
}

#[async_trait]
impl Inboxes for Switch {
    async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize> {
        self.up()?.deliver(key, users).await
    }
    async fn read_inbox(&self, u: UserId, r: KeyRange, d: Direction, n: usize) -> Result<Option<InboxRead>> {
        self.up()?.read_inbox(u, r, d, n).await
    }
    async fn begin_rebuild(&self, u: UserId) -> Result<()> {
        self.up()?.begin_rebuild(u).await
    }
    async fn finish_rebuild(&self, u: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.up()?.finish_rebuild(u, keys, floor).await
    }
    async fn merge_inbox(&self, u: UserId, keys: &[Key], floor: Key) -> Result<()> {
        self.up()?.merge_inbox(u, keys, floor).await
    }
    async fn inbox_floor(&self, u: UserId) -> Result<Option<Key>> {
        self.up()?.inbox_floor(u).await
    }
    async fn drop_inbox(&self, u: UserId) -> Result<()> {
        self.up()?.drop_inbox(u).await
    }
    async fn inbox_stats(&self) -> Result<InboxStats> {
        self.up()?.inbox_stats().await
    }
    async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
        self.up()?.export_inboxes().await
    }
    async fn import_inbox(&self, u: UserId, floor: Key, keys: &[Key]) -> Result<()> {
        self.up()?.import_inbox(u, floor, keys).await
    }
}

#[async_trait]
impl Activity for Switch {
    async fn touch(&self, u: UserId, at: Millis) -> Result<()> {
        self.up()?.touch(u, at).await
    }
    async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>> {
        self.up()?.last_active(users).await
    }
    async fn inactive_before(&self, cutoff: Millis) -> Result<Vec<UserId>> {
        self.up()?.inactive_before(cutoff).await
    }
    async fn export_activity(&self) -> Result<Vec<(UserId, Millis)>> {
        self.up()?.export_activity().await
    }
    async fn import_activity(&self, e: &[(UserId, Millis)]) -> Result<()> {
        self.up()?.import_activity(e).await
    }
}

#[async_trait]
impl Hub for Switch {
    async fn publish(&self, signals: &[Signal]) -> Result<()> {
        self.up()?.publish(signals).await
    }
    async fn subscribe(&self) -> Result<Subscription> {
        self.up()?.subscribe().await
    }
    async fn ping(&self) -> Result<()> {
        self.up()?.ping().await
    }
    async fn forget_all(&self) -> Result<usize> {
        self.up()?.forget_all().await
    }
}

#[async_trait]
impl tideway_store::Removals for Switch {
    async fn note_removals(&self, notes: &[tideway_store::Removal], at: Millis, keep_ms: i64) -> Result<()> {
        self.up()?.note_removals(notes, at, keep_ms).await
    }
    async fn removed_since(&self, user: UserId, authors: &[UserId], since: Millis) -> Result<tideway_store::Removed> {
        self.up()?.removed_since(user, authors, since).await
    }
}

#[async_trait]
impl tideway_store::FactTokens for Switch {
    async fn fact_tokens(&self, keys: &[tideway_store::FactKey]) -> Result<Vec<Option<u64>>> {
        self.up()?.fact_tokens(keys).await
    }
    async fn mint_fact_tokens(&self, keys: &[tideway_store::FactKey]) -> Result<()> {
        self.up()?.mint_fact_tokens(keys).await
    }
    async fn begin_fact_change(&self, keys: &[tideway_store::FactKey]) -> Result<()> {
        self.up()?.begin_fact_change(keys).await
    }
    async fn end_fact_change(&self, keys: &[tideway_store::FactKey]) -> Result<()> {
        self.up()?.end_fact_change(keys).await
    }
}

#[async_trait]
impl tideway_store::Snapshots for Switch {
    async fn put_snapshot(&self, id: u64, bytes: &[u8], ttl_ms: u64) -> Result<()> {
        self.up()?.put_snapshot(id, bytes, ttl_ms).await
    }
    async fn snapshot(&self, id: u64) -> Result<Option<Vec<u8>>> {
        self.up()?.snapshot(id).await
    }
}

#[async_trait]
impl HotAuthors for Switch {
    async fn mark_unpushed(&self, a: UserId, key: Key) -> Result<()> {
        self.up()?.mark_unpushed(a, key).await
    }
    async fn unpushed_above(&self, authors: &[UserId], floor: Key) -> Result<Vec<UserId>> {
        self.up()?.unpushed_above(authors, floor).await
    }
    async fn unpushed_keys(&self, authors: &[UserId]) -> Result<Vec<Option<Key>>> {
        self.up()?.unpushed_keys(authors).await
    }
    async fn export_unpushed(&self) -> Result<Vec<(UserId, Key)>> {
        self.up()?.export_unpushed().await
    }
    async fn import_unpushed(&self, e: &[(UserId, Key)]) -> Result<()> {
        self.up()?.import_unpushed(e).await
    }
}

/// Every entry of `user`'s home, walked page by page: (item id, reason,
/// counts).
async fn whole_home(svc: &FeedService, user: UserId) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut req = PageRequest { limit: Some(4), ..PageRequest::default() };
    loop {
        let page = svc.feeds.home(user, &req).await.expect("home");
        out.extend(
            page.entries
                .iter()
                .map(|e| (e.item.item.id.to_string(), format!("{:?}", e.reason), format!("{:?}", e.item.counts))),
        );
        match page.next_cursor {
            Some(c) => req.before = Some(c),
            None => return out,
        }
    }
}

/// Leases and holds short enough for a test.
const TIMES: TrustTimes = TrustTimes {
    lease: Duration::from_millis(300),
    hold: Duration::from_millis(1_500),
    margin: Duration::from_millis(50),
};

/// One node: its service over the durable store and its own link to the
/// shared one.
struct Node {
    svc: Arc<FeedService>,
    backend: Arc<dyn Backend>,
    link: Arc<Switch>,
    worker: FanoutWorker,
}

async fn node(
    id: u16,
    durable: &Arc<Store<NoJournal>>,
    shared: &Arc<Store<NoJournal>>,
    clock: &Arc<ManualClock>,
) -> Node {
    let link = Arc::new(Switch { inner: shared.clone(), down: AtomicBool::new(false) });
    let backend: Arc<dyn Backend> = Arc::new(Split::with_trust(durable.clone(), link.clone(), TIMES));
    let opts = ServiceOptions { hot_followers: 3, node_id: id, ..ServiceOptions::default() };
    let svc = Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"));
    let worker = FanoutWorker::new(svc.clone());
    backend.ping().await.expect("the first probe");
    Node { svc, backend, link, worker }
}

/// The definition of each reader's home: read by a node whose shared half
/// is new and empty (every inbox rebuilt from the durable half's outboxes).
async fn definition(
    durable: &Arc<Store<NoJournal>>,
    clock: &Arc<ManualClock>,
    readers: &[UserId],
) -> Vec<Vec<(String, String, String)>> {
    let fresh = node(900, durable, &Arc::new(Store::in_memory(800)), clock).await;
    let mut out = Vec::new();
    for r in readers {
        out.push(whole_home(&fresh.svc, *r).await);
    }
    out
}

async fn homes(n: &Node, readers: &[UserId]) -> Vec<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    for r in readers {
        out.push(whole_home(&n.svc, *r).await);
    }
    out
}

#[tokio::test]
async fn writes_go_on_without_the_shared_half_and_every_page_stays_the_definition() {
    let durable = Arc::new(Store::in_memory(800));
    let shared = Arc::new(Store::in_memory(800));
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let (a, b) = (node(1, &durable, &shared, &clock).await, node(2, &durable, &shared, &clock).await);
    let readers: Vec<UserId> = (1..=4).map(UserId).collect();
    let (plain, hot, later) = (UserId(10), UserId(20), UserId(30));
    for r in &readers {
        a.svc.graph.follow_many(*r, &[plain, hot]).await.expect("follow");
        a.svc.feeds.home(*r, &PageRequest::default()).await.expect("an inbox");
        b.svc.feeds.home(*r, &PageRequest::default()).await.expect("read on b too");
    }
    let mut posts: Vec<ItemId> = Vec::new();
    for i in 0..12 {
        clock.advance(1000);
        let author = if i % 3 == 0 { hot } else { plain };
        posts.push(a.svc.items.create_item(NewItem::new(author, ItemKind::Post)).await.expect("post").0.item.id);
        a.svc.items.create_item(NewItem::new(later, ItemKind::Post)).await.expect("post");
    }
    a.worker.drain().await.expect("fan-out");
    let want = definition(&durable, &clock, &readers).await;
    assert_eq!(want[0].len(), 12, "every post of both authors");
    assert_eq!(homes(&a, &readers).await, want, "node a, through the inboxes");
    assert_eq!(homes(&b, &readers).await, want, "node b, through the inboxes");

    // Node a loses the shared half; b keeps it. Every write on a is
    // accepted, answered once no node trusts the shared half, and every
    // page on either node is the definition from its answer on.
    a.link.down.store(true, Ordering::SeqCst);
    let began = Instant::now();
    clock.advance(1000);
    a.svc.items.create_item(NewItem::new(plain, ItemKind::Post)).await.expect("a post without the shared half");
    assert!(began.elapsed() >= TIMES.lease, "the first write waited out a lease: {:?}", began.elapsed());
    let check = async |why: &str| {
        let want = definition(&durable, &clock, &readers).await;
        assert_eq!(homes(&b, &readers).await, want, "node b after {why}");
        assert_eq!(homes(&a, &readers).await, want, "node a after {why}");
    };
    check("a post").await;
    clock.advance(1000);
    a.svc.items.create_item(NewItem::new(hot, ItemKind::Post)).await.expect("a hot author's post");
    check("a hot author's post").await;
    a.svc.items.react(posts[1], UserId(2), "like", true).await.expect("a like");
    check("a like").await;
    a.svc.graph.follow(UserId(1), later).await.expect("a follow");
    check("a follow").await;
    a.svc.items.delete_item(posts[2], Some(plain)).await.expect("a delete");
    check("a delete").await;
    a.svc.graph.unfollow(UserId(3), hot).await.expect("an unfollow");
    check("an unfollow").await;
    a.svc.feeds.insert_home(UserId(4), posts[5]).await.expect("a home insert");
    check("a home insert").await;
    // Node b writes through the shared half it still reaches.
    b.svc.items.react(posts[1], UserId(3), "like", true).await.expect("a like on b");
    clock.advance(1000);
    b.svc.items.create_item(NewItem::new(plain, ItemKind::Post)).await.expect("a post on b");
    b.worker.drain().await.expect("fan-out on b");
    check("b's writes").await;
    // Nothing was trusted meanwhile: no inbox was rebuilt in the shared half.
    for r in &readers {
        assert!(shared.inbox_floor(*r).await.expect("floor").is_some(), "b's deliveries keep the old inboxes");
    }

    // The link comes back. The probes trust the shared half again once the
    // hold of the last miss is over, after dropping it.
    a.link.down.store(false, Ordering::SeqCst);
    a.worker.drain().await.expect("fan-out");
    let healed = Instant::now();
    loop {
        a.backend.ping().await.expect("probe a");
        b.backend.ping().await.expect("probe b");
        if shared.inbox_floor(readers[0]).await.expect("floor").is_none() {
            break;
        }
        assert!(healed.elapsed() < TIMES.hold * 4, "the shared half was never dropped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for n in [&a, &b] {
        n.backend.ping().await.expect("probe");
    }
    check("the shared half came back").await;
    assert!(
        shared.inbox_floor(readers[0]).await.expect("floor").is_some(),
        "pages go through the inboxes again (rebuilt on read)"
    );
    clock.advance(1000);
    a.svc.items.create_item(NewItem::new(plain, ItemKind::Post)).await.expect("a post once it is back");
    a.svc.items.react(posts[1], UserId(4), "like", true).await.expect("a like once it is back");
    a.worker.drain().await.expect("fan-out");
    check("writes once it is back").await;
}
