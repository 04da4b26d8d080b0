//! Notifications go in the same atomic write as their cause (issue 64,
//! item 7), and the backfill gives what was stored without them the
//! notifications its writes would have made.

use std::collections::BTreeSet;
use std::sync::Arc;
use tideway_core::{ItemId, ItemKind, Millis, NewItem, UserId};
use tideway_service::{FeedService, ManualClock, ServiceOptions};
use tideway_store::{Backend, CausePos, Counted, Notifications, Store, StoredCause};

async fn service(engine: Arc<dyn Backend>) -> (Arc<Counted>, FeedService, Arc<ManualClock>) {
    let opts = ServiceOptions::new(&tideway_service::Config::default(), engine.profile());
    let counted = Arc::new(Counted::new(engine));
    let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
    let svc = FeedService::new(counted.clone(), opts, clock.clone()).await.expect("service");
    (counted, svc, clock)
}

/// Every user's notification groups, as (verb, actors, count), in a set:
/// what two histories of the same facts must agree on.
async fn shapes(svc: &FeedService, users: std::ops::RangeInclusive<u64>) -> BTreeSet<(u64, String, Vec<u64>, u64)> {
    let mut out = BTreeSet::new();
    for u in users {
        let page = svc.notifications.page(UserId(u), Some(100), None).await.expect("notifications");
        for g in page.groups {
            let mut actors: Vec<u64> = g.actors.iter().map(|a| a.0).collect();
            actors.sort_unstable();
            out.insert((u, format!("{:?}", g.verb), actors, g.actor_count));
        }
    }
    out
}

/// The names of the storage calls `f` makes, after a step of the clock.
async fn step(counted: &Counted, clock: &ManualClock, f: impl Future<Output = ()>) -> Vec<&'static str> {
    clock.advance(10);
    let before = counted.calls();
    f.await;
    counted.names_since(before)
}

/// The history both tests write: follows, a post mentioning two users,
/// replies (one to an item deleted later), a repost, likes, an unfollow;
/// with the storage calls of each step that should carry notifications.
async fn history(svc: &FeedService, clock: &ManualClock, counted: &Counted) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut calls = Vec::new();
    let follow = svc.graph.follow_many(UserId(1), &[UserId(2), UserId(3)]);
    calls.push(("follow", step(counted, clock, async { follow.await.map(|_| ()).expect("follow") }).await));
    let follow = svc.graph.follow(UserId(4), UserId(2));
    calls.push(("follow", step(counted, clock, async { follow.await.map(|_| ()).expect("follow") }).await));
    let mut post = NewItem::new(UserId(2), ItemKind::Post);
    post.mentions = vec![UserId(1), UserId(5)];
    let (mut id, mut doomed) = (ItemId(0), ItemId(0));
    let create = svc.items.create_item(post);
    calls.push(("mention", step(counted, clock, async { id = create.await.expect("post").0.item.id }).await));
    let create = svc.items.create_item(NewItem::new(UserId(3), ItemKind::Post));
    step(counted, clock, async { doomed = create.await.expect("doomed").0.item.id }).await;
    for (who, to) in [(1, id), (4, id), (1, doomed)] {
        let mut reply = NewItem::new(UserId(who), ItemKind::Reply);
        reply.reply_to = Some(to);
        let create = svc.items.create_item(reply);
        calls.push(("reply", step(counted, clock, async { create.await.map(|_| ()).expect("reply") }).await));
    }
    let mut repost = NewItem::new(UserId(4), ItemKind::Repost);
    repost.repost_of = Some(id);
    let create = svc.items.create_item(repost);
    calls.push(("repost", step(counted, clock, async { create.await.map(|_| ()).expect("repost") }).await));
    for who in [1, 3, 4] {
        let like = svc.items.react(id, UserId(who), "like", true);
        step(counted, clock, async { like.await.map(|_| ()).expect("like") }).await;
    }
    let delete = svc.items.delete_item(doomed, Some(UserId(3)));
    calls.push(("delete", step(counted, clock, async { delete.await.expect("delete") }).await));
    let unfollow = svc.graph.unfollow(UserId(1), UserId(3));
    calls.push(("unfollow", step(counted, clock, async { unfollow.await.expect("unfollow") }).await));
    calls
}

#[tokio::test]
async fn a_cause_and_its_notifications_are_one_write() {
    let (counted, svc, clock) = service(Arc::new(Store::in_memory(800))).await;
    let calls = history(&svc, &clock, &counted).await;
    for (what, names) in &calls {
        assert!(!names.contains(&"notify"), "{what} wrote its notifications apart from itself: {names:?}");
        let writes = names
            .iter()
            .filter(|n| ["create_item", "update_item", "follow_many", "unfollow", "notify"].contains(n))
            .count();
        assert_eq!(writes, 1, "{what}: one durable write, {names:?}");
    }
    let got = shapes(&svc, 1..=5).await;
    let verbs: Vec<(u64, &str)> =
        got.iter().map(|(u, v, _, _)| (*u, v.split([' ', '{']).next().unwrap_or(""))).collect();
    assert!(verbs.contains(&(2, "Follow")) && verbs.contains(&(1, "Mention")) && verbs.contains(&(5, "Mention")));
    assert!(verbs.contains(&(2, "Reply")) && verbs.contains(&(2, "Repost")) && verbs.contains(&(2, "Reaction")));
    assert!(!verbs.contains(&(3, "Follow")), "the unfollow took its event along: {got:?}");
    assert!(!verbs.contains(&(3, "Reply")), "the delete took the reply to it along: {got:?}");
}

#[tokio::test]
async fn the_backfill_gives_stored_facts_the_notifications_their_writes_make() {
    // The history, written through the service: its notifications are the reference.
    let (counted, live, clock) = service(Arc::new(Store::in_memory(800))).await;
    history(&live, &clock, &counted).await;
    let want = shapes(&live, 1..=5).await;
    assert!(want.len() >= 6, "{want:?}");

    // The same facts stored with no notification (as before notifications
    // existed, or by an import), copied through the seam.
    let bare: Arc<dyn Backend> = Arc::new(Store::in_memory(800));
    for start in [CausePos::Items(None), CausePos::Follows(None), CausePos::Reactions(None)] {
        let mut pos = start;
        loop {
            let page = counted.stored_causes(&pos, 3).await.expect("scan");
            let Some(last) = page.last() else { break };
            pos = last.pos();
            for c in page {
                match c {
                    StoredCause::Item(i) => {
                        bare.create_item((*i).clone(), false, Millis(0)).await.expect("item");
                    }
                    StoredCause::Follow { from, to, since } => {
                        bare.follow_many(from, &[to], since, 100).await.expect("follow");
                    }
                    StoredCause::Reaction { item, user, kind } => {
                        bare.set_reaction(item, user, &kind, true, &[]).await.expect("reaction");
                    }
                }
            }
        }
    }
    let (_, restored, _) = service(bare).await;
    assert!(shapes(&restored, 1..=5).await.is_empty(), "no notification before the backfill");
    let done = restored.notifications.backfill(|_| {}).await.expect("backfill");
    assert_eq!((done.items, done.follows, done.reactions), (6, 2, 3), "{done:?}");
    assert_eq!(shapes(&restored, 1..=5).await, want, "the backfill makes what the writes made");
    // Run again, it changes nothing (ids and times included).
    let first = pages(&restored).await;
    restored.notifications.backfill(|_| {}).await.expect("again");
    assert_eq!(pages(&restored).await, first, "a second backfill is the first");
}

/// Every user's groups as (id, latest_at, count): the whole of what a
/// second backfill must leave as it was.
async fn pages(svc: &FeedService) -> Vec<Vec<(u64, Millis, u64)>> {
    let mut all = Vec::new();
    for u in 1..=5 {
        let p = svc.notifications.page(UserId(u), Some(100), None).await.expect("page");
        all.push(p.groups.iter().map(|g| (g.id, g.latest_at, g.actor_count)).collect());
    }
    all
}
