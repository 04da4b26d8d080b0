//! The shared half of the storage (inboxes, activity, hot-author marks: Redis
//! in a scaled-out deployment) goes down and comes back. While it is down,
//! home pages are pulled from the outboxes and equal the pages read through
//! the inboxes; writes that would leave an inbox behind (posts, follows,
//! home inserts) answer `unavailable` before anything durable is written.
//! When it is back, pages go through the inboxes again and still agree.

use async_trait::async_trait;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{ItemKind, Key, Millis, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceError, ServiceOptions};
use tideway_store::{
    Activity, Backend, HotAuthors, Hub, InboxRead, InboxStats, Inboxes, NoJournal, Result, Signal, Split, Store,
    StoreError, Subscription,
};

/// An in-memory shared half with a switch.
struct Switch {
    inner: Store<NoJournal>,
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

/// Every entry of `user`'s home, walked page by page: (item id, reason).
async fn whole_home(svc: &FeedService, user: UserId) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut req = PageRequest { limit: Some(4), ..PageRequest::default() };
    loop {
        let page = svc.home(user, &req).await.expect("home");
        out.extend(page.entries.iter().map(|e| (e.item.item.id.to_string(), format!("{:?}", e.reason))));
        match page.next_cursor {
            Some(c) => req.before = Some(c),
            None => return out,
        }
    }
}

fn unavailable<T: std::fmt::Debug>(r: std::result::Result<T, ServiceError>, what: &str) {
    match r {
        Err(ServiceError::Store(e)) if e.is_unavailable() => {}
        other => panic!("{what} while the shared state is down: {other:?}"),
    }
}

#[tokio::test]
async fn pages_are_pulled_while_the_shared_state_is_down_and_writes_wait() {
    let shared = Arc::new(Switch { inner: Store::in_memory(800), down: AtomicBool::new(false) });
    let backend: Arc<dyn Backend> = Arc::new(Split::new(Arc::new(Store::in_memory(800)), shared.clone()));
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let opts = ServiceOptions { hot_followers: 3, ..ServiceOptions::default() };
    let svc = Arc::new(FeedService::new(backend.clone(), opts, clock.clone()).await.expect("service"));
    let worker = FanoutWorker::new(svc.clone());
    let readers: Vec<UserId> = (1..=4).map(UserId).collect();
    let (plain, hot, later) = (UserId(10), UserId(20), UserId(30));
    for r in &readers {
        svc.follow_many(*r, &[plain, hot]).await.expect("follow");
        svc.home(*r, &PageRequest::default()).await.expect("an inbox");
    }
    for i in 0..12 {
        clock.advance(1000);
        let author = if i % 3 == 0 { hot } else { plain };
        svc.create_item(NewItem::new(author, ItemKind::Post)).await.expect("post");
        svc.create_item(NewItem::new(later, ItemKind::Post)).await.expect("post");
    }
    worker.drain().await.expect("fan-out");
    let mut through_inboxes = Vec::new();
    for r in &readers {
        let home = whole_home(&svc, *r).await;
        assert_eq!(home.len(), 12, "reader {r}: every post of both authors");
        through_inboxes.push(home);
    }

    shared.down.store(true, Ordering::SeqCst);
    for (r, want) in readers.iter().zip(&through_inboxes) {
        assert_eq!(&whole_home(&svc, *r).await, want, "reader {r}: the pulled page is the same");
    }
    let profile = |svc: Arc<FeedService>| async move {
        svc.profile(plain, None, &PageRequest::default()).await.expect("profile").entries.len()
    };
    let before = profile(svc.clone()).await;
    unavailable(svc.create_item(NewItem::new(plain, ItemKind::Post)).await, "a post");
    unavailable(svc.create_item(NewItem::new(hot, ItemKind::Post)).await, "a hot author's post");
    assert_eq!(profile(svc.clone()).await, before, "nothing of the refused post was stored");
    unavailable(svc.follow(UserId(1), later).await, "a follow");
    assert!(!svc.relationships(UserId(1), &[later]).await.expect("relation")[0].following, "not stored");
    assert_eq!(worker.drain().await.ok(), Some(0), "no job was left behind");

    shared.down.store(false, Ordering::SeqCst);
    svc.follow(UserId(1), later).await.expect("follow once it is back");
    clock.advance(1000);
    svc.create_item(NewItem::new(plain, ItemKind::Post)).await.expect("post once it is back");
    worker.drain().await.expect("fan-out");
    let pushed: Vec<_> = {
        let mut v = Vec::new();
        for r in &readers {
            v.push(whole_home(&svc, *r).await);
        }
        v
    };
    assert_eq!(pushed[0].len(), 12 + 12 + 1, "reader 1 now follows the third author too");
    assert_eq!(pushed[1].len(), 13);
    shared.down.store(true, Ordering::SeqCst);
    for (r, want) in readers.iter().zip(&pushed) {
        assert_eq!(&whole_home(&svc, *r).await, want, "reader {r}: inboxes and pulls agree after the outage");
    }
}
