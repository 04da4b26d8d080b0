//! The storage seam's contracts, as code: one suite per trait, generic over
//! the backend (`&dyn Backend`), so the in-memory store, the embedded store
//! and every later backend (SQL, Redis) run the very same checks. Each suite
//! gets a fresh, empty backend and panics with a message on a violation.
//!
//! `tests/backends.rs` runs every suite against every backend of this
//! workspace; a new backend crate adds itself there (or runs the suites from
//! its own tests).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Item, ItemId, ItemKind, Key, Millis, UserId, Visibility};
use tideway_store::{Backend, CreateOutcome, ItemChange, JobProgress};

/// A suite: checks one trait's contract on a fresh, empty backend.
pub type Suite = for<'a> fn(&'a dyn Backend) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The suites, by name, for the test matrix.
pub const SUITES: &[(&str, Suite)] = &[
    ("items_update", |b| Box::pin(items_update(b))),
    ("jobs_leases", |b| Box::pin(jobs_leases(b))),
    ("activity", |b| Box::pin(activity(b))),
    ("hot_authors", |b| Box::pin(hot_authors(b))),
    ("inboxes", |b| Box::pin(inboxes(b))),
    ("bodies", |b| Box::pin(bodies(b))),
    ("graph_counts", |b| Box::pin(graph_counts(b))),
    ("hub", |b| Box::pin(hub(b))),
];

/// The inbox cap the harness gives every backend (`timeline.max_len`).
pub const INBOX_CAP: usize = 800;

async fn created(b: &dyn Backend, id: Key, author: u64, fan_out: bool) -> Arc<Item> {
    match b
        .create_item(Item::new(ItemId(id), UserId(author), ItemKind::Post), fan_out, Millis(id as i64))
        .await
        .expect("create_item")
    {
        CreateOutcome::Created(i) => i,
        other => panic!("create_item({id}) did not create: {other:?}"),
    }
}

/// `Items::update_item`: typed patches and soft deletes; none on a deleted
/// or unknown item.
pub async fn items_update(b: &dyn Backend) {
    created(b, 1000, 1, false).await;
    let mut body = serde_json::Map::new();
    body.insert("t".into(), serde_json::json!("edited"));
    let patched = b
        .update_item(ItemId(1000), &ItemChange::Patch { body: Some(body.clone()), visibility: None })
        .await
        .expect("patch")
        .expect("the item exists");
    assert_eq!((&*patched.body, patched.visibility), (&body, Visibility::Public));
    let patched = b
        .update_item(ItemId(1000), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("the item exists");
    assert_eq!((&*patched.body, patched.visibility), (&body, Visibility::Followers), "a patch keeps what it omits");
    let deleted = b.update_item(ItemId(1000), &ItemChange::Delete).await.expect("delete").expect("the item exists");
    assert!(deleted.deleted);
    assert_eq!(b.update_item(ItemId(1000), &ItemChange::Delete).await.expect("delete again"), None, "already deleted");
    assert_eq!(b.update_item(ItemId(4242), &ItemChange::Delete).await.expect("unknown"), None);
    match b.records(&[1000]).await.expect("records").pop().flatten() {
        Some(tideway_store::Record::Item(i)) => assert!(i.deleted, "the tombstone stays readable"),
        other => panic!("the deleted item's record: {other:?}"),
    }
}

/// `Jobs`: claims with leases, takeover after expiry, progress only from the
/// holder, checkpoints that never move back, completion.
pub async fn jobs_leases(b: &dyn Backend) {
    const A: u64 = 1;
    const B: u64 = 2;
    for id in [2001, 2002, 2003] {
        created(b, id, 7, true).await;
    }
    created(b, 2004, 7, false).await; // no job without fan-out
    let keys = |jobs: Vec<tideway_store::Job>| jobs.iter().map(|j| j.key).collect::<Vec<_>>();
    assert_eq!(keys(b.pending_jobs(10).await.expect("pending")), vec![2001, 2002, 2003], "oldest first");

    assert_eq!(keys(b.claim_jobs(A, Millis(1000), 100, 2).await.expect("claim")), vec![2001, 2002]);
    assert_eq!(keys(b.claim_jobs(B, Millis(1050), 100, 10).await.expect("claim")), vec![2003], "A's leases are live");
    assert_eq!(
        keys(b.claim_jobs(A, Millis(1080), 100, 10).await.expect("renew")),
        vec![2001, 2002],
        "A renews its own"
    );
    // A's leases end at 1180, B's at 1150: at 1300 B takes everything.
    assert_eq!(keys(b.claim_jobs(B, Millis(1300), 100, 10).await.expect("takeover")), vec![2001, 2002, 2003]);

    let at = |ms: i64, u: u64| (Millis(ms), UserId(u));
    assert_eq!(
        b.advance(A, &[JobProgress::Checkpoint(2001, at(5, 3))]).await.expect("advance"),
        vec![false],
        "A lost it"
    );
    assert_eq!(b.advance(B, &[JobProgress::Checkpoint(2001, at(7, 4))]).await.expect("advance"), vec![true]);
    assert_eq!(
        b.advance(B, &[JobProgress::Checkpoint(2001, at(6, 9)), JobProgress::Checkpoint(2001, at(7, 4))])
            .await
            .expect("advance"),
        vec![false, false],
        "a checkpoint never moves back, nor stays in place"
    );
    let job = b.pending_jobs(10).await.expect("pending").into_iter().find(|j| j.key == 2001).expect("job 2001");
    assert_eq!(job.cursor, Some(at(7, 4)));

    assert_eq!(
        b.advance(B, &[JobProgress::Complete(2002), JobProgress::Complete(9999)]).await.expect("complete"),
        vec![true, false],
        "an unknown job is not recorded"
    );
    assert_eq!(b.advance(A, &[JobProgress::Complete(2002)]).await.expect("complete again"), vec![false], "gone");
    assert_eq!(keys(b.pending_jobs(10).await.expect("pending")), vec![2001, 2003]);
    // After B's leases end, A may take the rest and finish them.
    assert_eq!(keys(b.claim_jobs(A, Millis(2000), 100, 10).await.expect("claim")), vec![2001, 2003]);
    let done = b.advance(A, &[JobProgress::Complete(2001), JobProgress::Complete(2003)]).await.expect("complete");
    assert_eq!(done, vec![true, true]);
    assert!(b.pending_jobs(10).await.expect("pending").is_empty());
}

/// `Activity`: last reads that never move back, batch reads in order, the
/// inactive set, export and import.
pub async fn activity(b: &dyn Backend) {
    let (u1, u2, u3) = (UserId(1), UserId(2), UserId(3));
    b.touch(u1, Millis(100)).await.expect("touch");
    b.touch(u1, Millis(50)).await.expect("touch");
    b.touch(u2, Millis(200)).await.expect("touch");
    assert_eq!(b.last_active(&[u2, u3, u1]).await.expect("last"), vec![Some(Millis(200)), None, Some(Millis(100))]);
    assert_eq!(b.inactive_before(Millis(101)).await.expect("inactive"), vec![u1]);
    assert!(b.inactive_before(Millis(100)).await.expect("inactive").is_empty(), "the cutoff is exclusive");
    assert_eq!(b.export_activity().await.expect("export"), vec![(u1, Millis(100)), (u2, Millis(200))]);
    b.import_activity(&[(u3, Millis(300)), (u1, Millis(10))]).await.expect("import");
    assert_eq!(
        b.export_activity().await.expect("export"),
        vec![(u1, Millis(100)), (u2, Millis(200)), (u3, Millis(300))],
        "an import never moves a last read back"
    );
}

/// `HotAuthors`: the newest unpushed key per author, filtered by floor, in
/// the order asked; export and import.
pub async fn hot_authors(b: &dyn Backend) {
    let (a, c, d) = (UserId(10), UserId(20), UserId(30));
    b.mark_unpushed(a, 500).await.expect("mark");
    b.mark_unpushed(a, 400).await.expect("mark");
    b.mark_unpushed(c, 900).await.expect("mark");
    assert_eq!(b.unpushed_above(&[c, d, a], 0).await.expect("above"), vec![c, a], "in the order asked");
    assert_eq!(b.unpushed_above(&[a, c], 499).await.expect("above"), vec![a, c]);
    assert_eq!(b.unpushed_above(&[a, c], 500).await.expect("above"), vec![c], "strictly above the floor");
    assert!(b.unpushed_above(&[], 0).await.expect("above").is_empty());
    assert_eq!(b.export_unpushed().await.expect("export"), vec![(a, 500), (c, 900)]);
    b.import_unpushed(&[(d, 50), (a, 1)]).await.expect("import");
    assert_eq!(b.export_unpushed().await.expect("export"), vec![(a, 500), (c, 900), (d, 50)]);
}

/// `Inboxes`: absent inboxes take nothing; a rebuild records deliveries that
/// race with it; keys are deduplicated, read in both directions within a
/// range and a limit, never at or below the floor; merges raise the floor;
/// the cap trims the oldest and raises the floor; drop, export and import.
pub async fn inboxes(b: &dyn Backend) {
    let (u1, u2, u3, u4) = (UserId(1), UserId(2), UserId(3), UserId(4));
    let all = async |u| {
        b.read_inbox(u, KeyRange::ALL, Direction::Older, 10_000).await.expect("read").map(|r| (r.floor, r.keys))
    };
    assert_eq!(b.inbox_floor(u1).await.expect("floor"), None);
    assert_eq!(all(u1).await, None);
    assert_eq!(b.deliver(10, &[u1]).await.expect("deliver"), 0, "an absent inbox takes nothing");

    b.begin_rebuild(u1).await.expect("begin");
    assert_eq!(b.inbox_floor(u1).await.expect("floor"), None, "a building inbox is not served");
    assert_eq!(b.deliver(20, &[u1]).await.expect("deliver"), 1, "a building inbox records deliveries");
    b.finish_rebuild(u1, &[15, 5], 0).await.expect("finish");
    assert_eq!(all(u1).await, Some((0, vec![20, 15, 5])));
    assert_eq!(b.deliver(20, &[u1, u2]).await.expect("deliver"), 0, "a key it holds; an absent inbox");

    let read = async |range, dir, limit| b.read_inbox(u1, range, dir, limit).await.expect("read").map(|r| r.keys);
    assert_eq!(read(KeyRange { above: None, below: Some(20) }, Direction::Older, 10).await, Some(vec![15, 5]));
    assert_eq!(read(KeyRange { above: Some(5), below: None }, Direction::Newer, 10).await, Some(vec![15, 20]));
    assert_eq!(read(KeyRange::ALL, Direction::Older, 2).await, Some(vec![20, 15]), "the limit");

    b.merge_inbox(u1, &[3, 30], 4).await.expect("merge");
    assert_eq!(all(u1).await, Some((4, vec![30, 20, 15, 5])), "a merge raises the floor and drops what is below");
    b.merge_inbox(u2, &[7], 0).await.expect("merge into an absent inbox");
    assert_eq!(all(u2).await, None, "a merge does not create an inbox");

    b.finish_rebuild(u3, &[], 0).await.expect("finish");
    let keys: Vec<Key> = (1001..=1000 + INBOX_CAP as u64 + 5).collect();
    let mut took = 0;
    for k in &keys {
        took += b.deliver(*k, &[u3]).await.expect("deliver");
    }
    assert_eq!(took, keys.len());
    let (floor, held) = all(u3).await.expect("present");
    assert_eq!(held.len(), INBOX_CAP, "the cap");
    assert_eq!((floor, held[0], *held.last().expect("oldest")), (1005, 1805, 1006), "the oldest trimmed, floor raised");
    assert_eq!(b.deliver(1003, &[u3]).await.expect("deliver"), 0, "at or below the floor: not taken");

    b.drop_inbox(u1).await.expect("drop");
    assert_eq!(all(u1).await, None);
    let exported = b.export_inboxes().await.expect("export");
    let (_, floor, asc) = exported.iter().find(|(u, ..)| *u == u3).expect("u3 exported").clone();
    assert_eq!((floor, asc.len(), asc[0]), (1005, INBOX_CAP, 1006), "keys ascending");
    b.import_inbox(u4, floor, &asc).await.expect("import");
    assert_eq!(all(u4).await, all(u3).await);
    let stats = b.inbox_stats().await.expect("stats");
    assert_eq!((stats.inboxes, stats.entries), (2, 2 * INBOX_CAP as u64), "{stats:?}");
}

/// `Items::bodies`: a body reads back as written, whether or not the store
/// keeps it in memory; a visibility patch keeps it; a body patch replaces
/// it; unknown items have none.
pub async fn bodies(b: &dyn Backend) {
    let mut body = serde_json::Map::new();
    body.insert("text".into(), serde_json::json!("x".repeat(400)));
    let item = Item { body: Arc::new(body.clone()), ..Item::new(ItemId(3000), UserId(1), ItemKind::Post) };
    assert!(matches!(b.create_item(item, false, Millis(1)).await.expect("create"), CreateOutcome::Created(_)));
    let got = |ids: Vec<u64>| async move {
        let ids: Vec<ItemId> = ids.into_iter().map(ItemId).collect();
        b.bodies(&ids).await.expect("bodies").into_iter().map(|o| o.map(|b| (*b).clone())).collect::<Vec<_>>()
    };
    assert_eq!(got(vec![3000, 4242]).await, vec![Some(body.clone()), None]);
    b.update_item(ItemId(3000), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(got(vec![3000]).await, vec![Some(body)], "a visibility patch keeps the body");
    let mut other = serde_json::Map::new();
    other.insert("t".into(), serde_json::json!(2));
    b.update_item(ItemId(3000), &ItemChange::Patch { body: Some(other.clone()), visibility: None })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(got(vec![3000]).await, vec![Some(other)]);
}

/// `Graph::counts`: following, followers and live items follow every write
/// that changes them — follows (repeated, refused at the limit or by a
/// block), unfollows, a block removing follows both ways, items created and
/// deleted.
pub async fn graph_counts(b: &dyn Backend) {
    use tideway_store::{FollowStatus, UserCounts};
    let u = |n: u64| UserId(n);
    let counts = async |n: u64| b.counts(u(n)).await.expect("counts");
    assert_eq!(counts(1).await, UserCounts::default(), "an unknown user counts nothing");
    let st = b.follow_many(u(1), &[u(2), u(3), u(4), u(2)], Millis(10), 3).await.expect("follow");
    assert_eq!(st[3], FollowStatus::Already(Millis(10)));
    b.follow_many(u(2), &[u(3)], Millis(11), 3).await.expect("follow");
    assert!(matches!(b.follow_many(u(1), &[u(5)], Millis(12), 3).await.expect("follow")[0], FollowStatus::Limit));
    assert_eq!(counts(1).await, UserCounts { following: 3, followers: 0, items: 0 });
    assert_eq!(counts(3).await, UserCounts { following: 0, followers: 2, items: 0 });
    assert!(b.unfollow(u(1), u(4)).await.expect("unfollow"));
    assert!(!b.unfollow(u(1), u(4)).await.expect("unfollow again"), "nothing to remove");
    assert_eq!((counts(1).await.following, counts(4).await.followers), (2, 0));
    b.follow_many(u(3), &[u(1)], Millis(13), 3).await.expect("follow back");
    b.set_block(u(1), u(3), true, Millis(14)).await.expect("block");
    assert_eq!(counts(1).await, UserCounts { following: 1, followers: 0, items: 0 }, "1 → 3 and 3 → 1 removed");
    assert_eq!(counts(3).await, UserCounts { following: 0, followers: 1, items: 0 });
    for id in [5001, 5002, 5003] {
        created(b, id, 2, false).await;
    }
    b.update_item(ItemId(5002), &ItemChange::Delete).await.expect("delete").expect("existed");
    b.update_item(ItemId(5002), &ItemChange::Delete).await.expect("delete again");
    b.update_item(ItemId(5001), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch");
    assert_eq!(counts(2).await, UserCounts { following: 1, followers: 1, items: 2 });
}

/// `Hub`: every subscription open when signals are published receives them,
/// in order; one opened later does not; publishing with no subscription
/// succeeds; a subscriber that falls behind is told (`Lagged`) instead of
/// holding an unbounded backlog.
pub async fn hub(b: &dyn Backend) {
    use tideway_store::{Received, Signal};
    async fn next(sub: &mut tideway_store::Subscription) -> Received {
        tokio::time::timeout(std::time::Duration::from_secs(5), sub.recv()).await.expect("a signal within 5 s")
    }
    b.publish(&[Signal::Work]).await.expect("publish with no subscription");
    let mut a = b.subscribe().await.expect("subscribe");
    let mut c = b.subscribe().await.expect("subscribe");
    b.publish(&[Signal::Work, Signal::Home(UserId(7))]).await.expect("publish");
    b.publish(&[Signal::Home(UserId(u64::MAX >> 1))]).await.expect("publish");
    for sub in [&mut a, &mut c] {
        assert_eq!(next(sub).await, Received::Signal(Signal::Work));
        assert_eq!(next(sub).await, Received::Signal(Signal::Home(UserId(7))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Home(UserId(u64::MAX >> 1))));
    }
    let mut late = b.subscribe().await.expect("subscribe");
    b.publish(&[Signal::Home(UserId(8))]).await.expect("publish");
    assert_eq!(next(&mut late).await, Received::Signal(Signal::Home(UserId(8))), "earlier signals are not replayed");
    // `a` reads nothing while many signals pass: it falls behind.
    let many: Vec<Signal> = (1..=5000).map(|u| Signal::Home(UserId(u))).collect();
    b.publish(&many).await.expect("publish");
    let mut lagged = false;
    for _ in 0..=many.len() + 1 {
        match next(&mut a).await {
            Received::Lagged => {
                lagged = true;
                break;
            }
            Received::Signal(_) => {}
            Received::Closed => panic!("the hub closed"),
        }
    }
    assert!(lagged, "a subscriber 5,000 signals behind is told it lagged");
    let mut fresh = b.subscribe().await.expect("subscribe");
    b.publish(&[Signal::Work]).await.expect("publish");
    assert_eq!(next(&mut fresh).await, Received::Signal(Signal::Work), "the hub goes on");
}
