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
    ("node_claims", |b| Box::pin(node_claims(b))),
    ("shared_trust", |b| Box::pin(shared_trust(b))),
    ("activity", |b| Box::pin(activity(b))),
    ("hot_authors", |b| Box::pin(hot_authors(b))),
    ("inboxes", |b| Box::pin(inboxes(b))),
    ("bodies", |b| Box::pin(bodies(b))),
    ("graph_counts", |b| Box::pin(graph_counts(b))),
    ("hub", |b| Box::pin(hub(b))),
    ("reactions", |b| Box::pin(reactions(b))),
    ("graph_lists", |b| Box::pin(graph_lists(b))),
    ("items_feeds", |b| Box::pin(items_feeds(b))),
    ("items_at_once", |b| Box::pin(items_at_once(b))),
    ("postings", |b| Box::pin(postings(b))),
    ("notifications", |b| Box::pin(notifications(b))),
    ("notifying_writes", |b| Box::pin(notifying_writes(b))),
    ("live", |b| Box::pin(live(b))),
    ("snapshots", |b| Box::pin(snapshots(b))),
    ("removals", |b| Box::pin(removals(b))),
    ("forget_all", |b| Box::pin(forget_all(b))),
    ("fact_tokens", |b| Box::pin(fact_tokens(b))),
    ("pages", |b| Box::pin(pages(b))),
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
    let body = tideway_core::Body::new(&body);
    let patched = b
        .update_item(ItemId(1000), &ItemChange::Patch { body: Some(body.clone()), visibility: None })
        .await
        .expect("patch")
        .expect("the item exists");
    assert_eq!((&patched.body, patched.visibility), (&body, Visibility::Public));
    let patched = b
        .update_item(ItemId(1000), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("the item exists");
    assert_eq!((&patched.body, patched.visibility), (&body, Visibility::Followers), "a patch keeps what it omits");
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
    use tideway_store::rules::worker_id;
    // Two nodes' workers, and a later run of A's node.
    const A: u64 = worker_id(1, 1);
    const B: u64 = worker_id(2, 1);
    const A2: u64 = worker_id(1, 2);
    for id in [2001, 2002, 2003] {
        created(b, id, 7, true).await;
    }
    created(b, 2004, 7, false).await; // no job without fan-out
    let keys = |jobs: Vec<tideway_store::Job>| jobs.iter().map(|j| j.key).collect::<Vec<_>>();
    assert_eq!(keys(b.pending_jobs(10).await.expect("pending")), vec![2001, 2002, 2003], "oldest first");

    assert_eq!(keys(b.claim_jobs(A, Millis(1000), 100, 2).await.expect("claim")), vec![2001, 2002]);
    // Reading the next jobs ahead is a hint: it claims nothing.
    b.prepare_jobs(Millis(1000), 10).await.expect("prepare");
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

    // A restarted node (a later epoch of A's id) takes back what its dead
    // run holds at once, live lease or not; another node does not.
    for id in [2005, 2006] {
        created(b, id, 7, true).await;
    }
    assert_eq!(keys(b.claim_jobs(A, Millis(3000), 10_000, 1).await.expect("claim")), vec![2005]);
    assert_eq!(keys(b.claim_jobs(B, Millis(3001), 10_000, 10).await.expect("claim")), vec![2006], "A's lease is live");
    assert_eq!(
        keys(b.claim_jobs(A2, Millis(3002), 10_000, 10).await.expect("claim")),
        vec![2005],
        "A's later run takes A's job at once, not B's"
    );
    assert_eq!(
        b.advance(A, &[JobProgress::Complete(2005)]).await.expect("advance"),
        vec![false],
        "the earlier run's progress is not recorded"
    );
    assert_eq!(
        keys(b.claim_jobs(A, Millis(3003), 10_000, 10).await.expect("claim")),
        Vec::<u64>::new(),
        "nor may it take back"
    );
    assert_eq!(b.advance(A2, &[JobProgress::Complete(2005)]).await.expect("advance"), vec![true]);
    assert_eq!(b.advance(B, &[JobProgress::Complete(2006)]).await.expect("advance"), vec![true]);
}

/// `Jobs`: node ids claimed by one running instance at a time, heartbeats,
/// takeover of a stale claim with a new epoch, release, the store's clock.
pub async fn node_claims(b: &dyn Backend) {
    use tideway_store::NodeClaim;
    const STALE: i64 = 300;
    let (first, second, third) = (11, 22, 33);
    assert_eq!(b.claim_node(5, first, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 1 });
    assert_eq!(b.claim_node(6, second, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 1 }, "ids are apart");
    assert!(b.beat(5, first).await.expect("beat"));
    match b.claim_node(5, second, STALE).await.expect("claim") {
        NodeClaim::Held { age_ms } => assert!((0..STALE).contains(&age_ms), "age {age_ms}"),
        other => panic!("a live holder keeps its id, got {other:?}"),
    }
    assert!(!b.beat(5, second).await.expect("beat"), "a beat of a non-holder records nothing");
    assert_eq!(
        b.claim_node(5, first, STALE).await.expect("claim"),
        NodeClaim::Claimed { epoch: 2 },
        "the holder claiming again starts a new epoch"
    );
    // The holder stops beating: once its beat is stale the id is taken.
    tokio::time::sleep(std::time::Duration::from_millis(STALE as u64 + 50)).await;
    assert_eq!(b.claim_node(5, second, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 3 });
    assert!(!b.beat(5, first).await.expect("beat"), "the earlier holder learns it lost the id");
    assert!(b.beat(5, second).await.expect("beat"));
    // A release frees the id at once; releasing someone else's does not.
    b.release_node(5, first).await.expect("release");
    assert!(matches!(b.claim_node(5, third, STALE).await.expect("claim"), NodeClaim::Held { .. }));
    b.release_node(5, second).await.expect("release");
    assert_eq!(b.claim_node(5, third, STALE).await.expect("claim"), NodeClaim::Claimed { epoch: 4 });
    assert!(b.beat(5, third).await.expect("beat"));
    // The store's clock, where it has one, is the wall clock's (same machine).
    if let Some(t) = b.clock().await.expect("clock") {
        assert!((t.0 - Millis::now().0).abs() < 5_000, "store clock {t:?}");
    }
}

/// `Jobs::shared_trust`: the record of trust in the shared half starts
/// trusted and changes only by `SharedTrust::apply`, at the store's clock:
/// a miss distrusts it (a new generation once), a restore needs the hold
/// over and no miss it did not see.
pub async fn shared_trust(b: &dyn Backend) {
    use tideway_store::TrustChange::{Distrust, Read, Restore};
    let t = b.shared_trust(Read).await.expect("read");
    assert!(t.trusted && t.generation == 0 && t.missed == 0, "a new deployment trusts its shared half: {t:?}");
    assert!((t.now.0 - Millis::now().0).abs() < 5_000, "the store's clock: {t:?}");
    let hold = Distrust { hold_ms: 300 };
    let d = b.shared_trust(hold).await.expect("distrust");
    assert_eq!(d, t.apply(hold, d.now), "a miss");
    assert!(!d.trusted && d.generation == 1 && d.missed == 1 && d.since == d.now, "{d:?}");
    let again = b.shared_trust(hold).await.expect("distrust again");
    assert_eq!(again, d.apply(hold, again.now), "a second miss keeps the generation");
    let read = b.shared_trust(Read).await.expect("read");
    assert_eq!(read, again.apply(Read, read.now), "read back");
    let restore = Restore { generation: again.generation, missed: again.missed };
    let early = b.shared_trust(restore).await.expect("restore");
    if early.now.0 < again.hold_until.0 {
        assert!(!early.trusted, "not trusted again within the hold: {early:?}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    let stale = b.shared_trust(Restore { generation: again.generation, missed: d.missed }).await.expect("restore");
    assert!(!stale.trusted, "not after a miss the restore did not see: {stale:?}");
    let back = b.shared_trust(restore).await.expect("restore");
    assert_eq!(back, again.apply(restore, back.now), "trusted again");
    assert!(back.trusted, "{back:?}");
    let next = b.shared_trust(hold).await.expect("a later miss");
    assert_eq!((next.generation, next.missed, next.trusted, next.since), (2, 3, false, next.now), "{next:?}");
}

/// `Hub::forget_all`: the shared half forgets what it kept (inboxes, hot
/// marks, activity, removal notes, tokens), and works on as before.
pub async fn forget_all(b: &dyn Backend) {
    use tideway_store::{FactKey, Removal};
    let (u, author) = (UserId(1), UserId(2));
    b.finish_rebuild(u, &[10, 20], 0).await.expect("an inbox");
    b.mark_unpushed(author, 30).await.expect("a mark");
    b.touch(u, Millis(1_000)).await.expect("a read");
    let at = Millis::now();
    b.note_removals(&[Removal::Item { author, item: ItemId(20), key: Some(20) }], at, 60_000).await.expect("a note");
    let keys = [FactKey::Item(ItemId(20))];
    b.mint_fact_tokens(&keys).await.expect("mint");
    let before = b.fact_tokens(&keys).await.expect("tokens");
    b.forget_all().await.expect("forget");
    assert_eq!(b.inbox_floor(u).await.expect("floor"), None, "the inbox is gone");
    assert_eq!(b.unpushed_keys(&[author]).await.expect("marks"), vec![None], "the mark is gone");
    assert_eq!(b.last_active(&[u]).await.expect("activity"), vec![None], "the activity is gone");
    let removed = b.removed_since(u, &[author], Millis(0)).await.expect("notes");
    assert!(removed.items.is_empty() && removed.others.is_empty(), "the notes are gone: {removed:?}");
    b.mint_fact_tokens(&keys).await.expect("mint");
    let after = b.fact_tokens(&keys).await.expect("tokens");
    assert!(before[0].is_none() || after[0] != before[0], "no token comes back: {before:?} then {after:?}");
    b.finish_rebuild(u, &[40], 0).await.expect("an inbox again");
    assert_eq!(b.inbox_floor(u).await.expect("floor"), Some(0), "and works on");
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
    let keys = b.unpushed_keys(&[c, d, a]).await.expect("keys");
    assert_eq!(keys, vec![Some(900), None, Some(500)], "each author's newest, in the order asked");
    for floor in [0, 499, 500, 900] {
        assert_eq!(
            tideway_store::unpushed_above_floor(&[c, d, a], &keys, floor),
            b.unpushed_above(&[c, d, a], floor).await.expect("above"),
            "the keys filtered by floor {floor} are what unpushed_above answers"
        );
    }
    assert!(b.unpushed_keys(&[]).await.expect("keys").is_empty());
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

    // A rebuild abandoned midway (its node died) is begun again by the next
    // reader, on any node: what was delivered meanwhile is kept.
    let u5 = UserId(5);
    b.begin_rebuild(u5).await.expect("begin");
    assert_eq!(b.deliver(40, &[u5]).await.expect("deliver"), 1);
    b.begin_rebuild(u5).await.expect("begin again");
    assert_eq!(b.inbox_floor(u5).await.expect("floor"), None, "still building");
    assert_eq!(b.deliver(41, &[u5]).await.expect("deliver"), 1);
    b.finish_rebuild(u5, &[35], 0).await.expect("finish");
    assert_eq!(all(u5).await, Some((0, vec![41, 40, 35])), "deliveries of the abandoned rebuild kept");
    b.drop_inbox(u5).await.expect("drop");

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

    // A fan-out step's deliveries at once: as each delivered in turn (a key
    // held, given twice or at the floor is not taken; an absent inbox takes
    // nothing; a building one records), however a store groups them.
    let (u6, u7, u8) = (UserId(6), UserId(7), UserId(8));
    b.finish_rebuild(u6, &[50], 40).await.expect("finish");
    b.begin_rebuild(u7).await.expect("begin");
    let step: [(Key, &[UserId]); 6] =
        [(70, &[u6, u7, u2]), (60, &[u6]), (50, &[u6]), (40, &[u6, u7]), (65, &[u7]), (70, &[u6])];
    assert_eq!(b.deliver_many(&step).await.expect("deliver many"), 5, "70 and 60 to u6; 70, 65 and 40 to u7");
    assert_eq!(all(u6).await, Some((40, vec![70, 60, 50])));
    b.finish_rebuild(u7, &[10], 0).await.expect("finish");
    assert_eq!(all(u7).await, Some((0, vec![70, 65, 40, 10])));
    assert_eq!(all(u2).await, None, "an absent inbox takes nothing");
    // Keys below the newest held, and more than an inbox has room for.
    assert_eq!(b.deliver_many(&[(55, &[u6]), (80, &[u6]), (45, &[u6])]).await.expect("deliver many"), 3);
    assert_eq!(all(u6).await, Some((40, vec![80, 70, 60, 55, 50, 45])));
    b.finish_rebuild(u8, &[], 0).await.expect("finish");
    let users = [u8];
    let step: Vec<(Key, &[UserId])> = keys.iter().map(|&k| (k, &users[..])).collect();
    assert_eq!(b.deliver_many(&step).await.expect("deliver many"), keys.len());
    assert_eq!(all(u8).await, all(u3).await, "the cap, as key by key");
}

/// `Items::bodies`: a body reads back as written, whether or not the store
/// keeps it in memory; a visibility patch keeps it; a body patch replaces
/// it; unknown items have none.
pub async fn bodies(b: &dyn Backend) {
    let mut body = serde_json::Map::new();
    body.insert("text".into(), serde_json::json!("x".repeat(400)));
    let body = tideway_core::Body::new(&body);
    let item = Item { body: body.clone(), ..Item::new(ItemId(3000), UserId(1), ItemKind::Post) };
    assert!(matches!(b.create_item(item, false, Millis(1)).await.expect("create"), CreateOutcome::Created(_)));
    let got = |ids: Vec<u64>| async move {
        let ids: Vec<ItemId> = ids.into_iter().map(ItemId).collect();
        b.bodies(&ids).await.expect("bodies").into_iter().collect::<Vec<_>>()
    };
    assert_eq!(got(vec![3000, 4242]).await, vec![Some(body.clone()), None]);
    b.update_item(ItemId(3000), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(got(vec![3000]).await, vec![Some(body)], "a visibility patch keeps the body");
    let mut other = serde_json::Map::new();
    other.insert("t".into(), serde_json::json!(2));
    let other = tideway_core::Body::new(&other);
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
    // (A Redis Cluster passes a PUBLISH on to its other nodes over its bus,
    // after answering it: one subscribed at once on another node could still
    // hear this one.)
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut a = b.subscribe().await.expect("subscribe");
    let mut c = b.subscribe().await.expect("subscribe");
    b.publish(&[
        Signal::Work,
        Signal::Home(UserId(7)),
        Signal::Author(UserId(3)),
        Signal::Gone(UserId(4)),
        Signal::Item(ItemId(9_000_000_001)),
    ])
    .await
    .expect("publish");
    b.publish(&[Signal::Home(UserId(u64::MAX >> 1))]).await.expect("publish");
    for sub in [&mut a, &mut c] {
        assert_eq!(next(sub).await, Received::Signal(Signal::Work));
        assert_eq!(next(sub).await, Received::Signal(Signal::Home(UserId(7))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Author(UserId(3))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Gone(UserId(4))));
        assert_eq!(next(sub).await, Received::Signal(Signal::Item(ItemId(9_000_000_001))));
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

/// An item of `author` that reposts or replies to `target`.
async fn linked(
    b: &dyn Backend,
    id: Key,
    author: u64,
    repost_of: Option<u64>,
    reply_to: Option<(u64, u64)>,
) -> CreateOutcome {
    let mut item =
        Item::new(ItemId(id), UserId(author), if repost_of.is_some() { ItemKind::Repost } else { ItemKind::Reply });
    item.repost_of = repost_of.map(ItemId);
    item.reply_to = reply_to.map(|(i, _)| ItemId(i));
    item.reply_to_author = reply_to.map(|(_, a)| UserId(a));
    b.create_item(item, false, Millis(id as i64)).await.expect("create_item")
}

/// `Items::set_reaction` and `Items::hydration`: reactions are idempotent
/// per (item, user, kind); a page's counts per kind (sorted, positive only),
/// replies and live reposts, and the viewer's own marks, in one call; one
/// live repost per user and original.
pub async fn reactions(b: &dyn Backend) {
    use tideway_store::{ItemCounts, ViewerMarks};
    let u = UserId;
    created(b, 6000, 1, false).await;
    assert!(b.set_reaction(ItemId(6000), u(2), "like", true, &[]).await.expect("react"));
    assert!(!b.set_reaction(ItemId(6000), u(2), "like", true, &[]).await.expect("react again"), "idempotent");
    assert!(b.set_reaction(ItemId(6000), u(3), "like", true, &[]).await.expect("react"));
    assert!(b.set_reaction(ItemId(6000), u(3), "x_wow", true, &[]).await.expect("react"));
    assert!(b.set_reaction(ItemId(6000), u(2), "like", false, &[]).await.expect("take back"));
    assert!(!b.set_reaction(ItemId(6000), u(2), "like", false, &[]).await.expect("take back again"), "idempotent");
    let first = match linked(b, 6002, 4, Some(6000), None).await {
        CreateOutcome::Created(i) => i,
        other => panic!("the first repost: {other:?}"),
    };
    assert_eq!(linked(b, 6003, 4, Some(6000), None).await, CreateOutcome::AlreadyReposted(first), "one repost a user");
    assert!(matches!(linked(b, 6004, 5, None, Some((6000, 1))).await, CreateOutcome::Created(_)));
    let h = b.hydration(&[ItemId(6000), ItemId(6999)], Some(u(3))).await.expect("hydration");
    assert_eq!(
        h[0],
        (
            ItemCounts { replies: 1, reposts: 1, reactions: vec![("like".into(), 1), ("x_wow".into(), 1)] },
            Some(ViewerMarks { reposted: false, reactions: vec!["like".into(), "x_wow".into()] })
        )
    );
    assert_eq!(h[1], (ItemCounts::default(), Some(ViewerMarks::default())), "an unknown item counts nothing");
    let h = b.hydration(&[ItemId(6000)], Some(u(4))).await.expect("hydration");
    assert_eq!(h[0].1, Some(ViewerMarks { reposted: true, reactions: vec![] }));
    assert_eq!(b.hydration(&[ItemId(6000)], None).await.expect("hydration")[0].1, None, "no viewer, no marks");
    b.update_item(ItemId(6002), &ItemChange::Delete).await.expect("delete").expect("existed");
    b.update_item(ItemId(6004), &ItemChange::Delete).await.expect("delete").expect("existed");
    let h = b.hydration(&[ItemId(6000)], Some(u(4))).await.expect("hydration");
    assert_eq!((h[0].0.replies, h[0].0.reposts, h[0].1.as_ref().map(|m| m.reposted)), (0, 0, Some(false)));
    assert!(matches!(linked(b, 6005, 4, Some(6000), None).await, CreateOutcome::Created(_)), "may repost again");
    assert!(b.set_reaction(ItemId(6000), u(3), "like", false, &[]).await.expect("take back"));
    let h = b.hydration(&[ItemId(6000)], Some(u(3))).await.expect("hydration");
    assert_eq!(
        (h[0].0.reactions.clone(), h[0].0.reposts),
        (vec![("x_wow".into(), 1)], 1),
        "a count at zero is left out"
    );

    // Counts stay exact when many writers change one item's at once (on
    // SQL the counts are rows the writes keep, so they contend).
    created(b, 6100, 1, false).await;
    let likes = (10..42).map(|x| b.set_reaction(ItemId(6100), u(x), "like", true, &[]));
    assert!(futures_util::future::join_all(likes).await.into_iter().all(|r| r.expect("react")));
    let replies = (0..8u64).map(|x| async move {
        let reply = linked(b, 6101 + x, 50 + x, None, Some((6100, 1))).await;
        let repost = linked(b, 6201 + x, 50 + x, Some(6100), None).await;
        (reply, repost)
    });
    for (reply, repost) in futures_util::future::join_all(replies).await {
        assert!(matches!((reply, repost), (CreateOutcome::Created(_), CreateOutcome::Created(_))));
    }
    let changes = (10..26).map(|x| b.set_reaction(ItemId(6100), u(x), "like", false, &[]));
    let deletes = (0..3u64).map(|x| b.update_item(ItemId(6101 + x), &ItemChange::Delete));
    let (changes, deletes) =
        tokio::join!(futures_util::future::join_all(changes), futures_util::future::join_all(deletes));
    assert!(changes.into_iter().all(|r| r.expect("take back")));
    assert!(deletes.into_iter().all(|r| r.expect("delete").is_some()));
    let h = b.hydration(&[ItemId(6100)], None).await.expect("hydration");
    assert_eq!(
        (h[0].0.reactions.clone(), h[0].0.replies, h[0].0.reposts),
        (vec![("like".into(), 16)], 5, 8),
        "counts after concurrent writes"
    );

    // A reaction carries its notification ops: applied with it, and again
    // (as once) by a repeat that changes no reaction, which is how a repeat
    // completes a call that failed between the two.
    use tideway_core::notify::{Notice, Op, Verb};
    let liked = |actor: u64, at: i64, open: u64| Op::Stand {
        notice: Notice {
            user: u(1),
            verb: Verb::Reaction { item: ItemId(6100), kind: "like".into() },
            actor: u(actor),
            at: Millis(at),
            stands: true,
            about: Some(ItemId(6100)),
        },
        open,
    };
    let groups = async || {
        let p = b.notifications(u(1), None, 10).await.expect("notifications");
        p.groups
            .iter()
            .map(|g| (g.id, g.actors.iter().map(|a| a.0).collect::<Vec<_>>(), g.actor_count))
            .collect::<Vec<_>>()
    };
    assert!(b.set_reaction(ItemId(6100), u(60), "like", true, &[liked(60, 200, 7000)]).await.expect("react"));
    assert_eq!(groups().await, vec![(7000, vec![60], 1)], "the reaction's notification");
    assert!(!b.set_reaction(ItemId(6100), u(60), "like", true, &[liked(60, 200, 7001)]).await.expect("again"));
    assert_eq!(groups().await, vec![(7000, vec![60], 1)], "a repeat adds nothing");
    // (as if the notification of user 61's like had failed)
    assert!(b.set_reaction(ItemId(6100), u(61), "like", true, &[]).await.expect("react"));
    assert!(!b.set_reaction(ItemId(6100), u(61), "like", true, &[liked(61, 201, 7002)]).await.expect("repeat"));
    assert_eq!(groups().await, vec![(7000, vec![61, 60], 2)], "ops applied though the reaction did not change");
    let likes = (62..78).map(|x| b.set_reaction(ItemId(6100), u(x), "like", true, &[]));
    assert!(futures_util::future::join_all(likes).await.into_iter().all(|r| r.expect("react")));
    let notes = (62..78).map(|x| async move {
        b.set_reaction(ItemId(6100), u(x), "like", true, &[liked(x, 300 + x as i64, 7100 + x)]).await
    });
    assert!(futures_util::future::join_all(notes).await.into_iter().all(|r| !r.expect("repeat")));
    assert_eq!(groups().await[0].2, 18, "every concurrent call's notification, in one group");
    let h = b.hydration(&[ItemId(6100)], None).await.expect("hydration");
    assert_eq!(h[0].0.reactions, vec![("like".into(), 34)], "16 + 2 + 16 likes");
}

/// `Graph` lists and relations: followers and following newest first,
/// paged by `(since, id)`; fan-out chunks oldest first, resumed after a
/// position; relations both ways; a block removes follows both ways and
/// refuses new ones until lifted; mutes.
pub async fn graph_lists(b: &dyn Backend) {
    use tideway_store::{FollowStatus, ListKind};
    let u = UserId;
    let at = |ms: i64, id: u64| (u(id), Millis(ms));
    b.follow_many(u(10), &[u(1), u(2), u(3)], Millis(100), 10).await.expect("follow");
    b.follow_many(u(11), &[u(1)], Millis(101), 10).await.expect("follow");
    b.follow_many(u(12), &[u(1)], Millis(102), 10).await.expect("follow");
    let list = async |user: u64, which, after, limit| b.list(u(user), which, after, limit).await.expect("list");
    assert_eq!(list(1, ListKind::Followers, None, 10).await, vec![at(102, 12), at(101, 11), at(100, 10)]);
    assert_eq!(
        list(1, ListKind::Followers, Some((Millis(101), u(11))), 10).await,
        vec![at(100, 10)],
        "after a position"
    );
    assert_eq!(list(1, ListKind::Followers, None, 1).await, vec![at(102, 12)], "a limit");
    assert_eq!(list(10, ListKind::Following, None, 2).await, vec![at(100, 3), at(100, 2)], "ties by id, newest first");
    assert_eq!(list(99, ListKind::Followers, None, 10).await, vec![], "an unknown user");
    let chunk = async |after, limit| b.followers_chunk(u(1), after, limit).await.expect("chunk");
    assert_eq!(chunk(None, 2).await, vec![(Millis(100), u(10)), (Millis(101), u(11))], "oldest first");
    assert_eq!(chunk(Some((Millis(101), u(11))), 10).await, vec![(Millis(102), u(12))], "resumed after a position");
    let mut followees = b.followees(u(10)).await.expect("followees");
    followees.sort_unstable();
    assert_eq!(followees, vec![u(1), u(2), u(3)]);

    b.follow_many(u(1), &[u(10)], Millis(103), 10).await.expect("follow back");
    let r = b.relations(u(10), &[u(1), u(11), u(99)]).await.expect("relations");
    assert!(r[0].following && r[0].followed_by && !r[0].blocking && !r[0].blocked_by && !r[0].muting);
    assert!(!r[1].following && !r[1].followed_by, "no relation to 11");
    assert_eq!(r[2], tideway_core::Relation::default(), "nor to an unknown user");

    b.set_block(u(1), u(10), true, Millis(104)).await.expect("block");
    assert!(b.relations(u(1), &[u(10)]).await.expect("relations")[0].blocking);
    let r = b.relations(u(10), &[u(1)]).await.expect("relations")[0];
    assert!(r.blocked_by && !r.following && !r.followed_by, "the block removed both follows: {r:?}");
    assert_eq!(list(1, ListKind::Followers, None, 10).await, vec![at(102, 12), at(101, 11)]);
    assert_eq!(b.follow_many(u(10), &[u(1)], Millis(105), 10).await.expect("follow"), vec![FollowStatus::Blocked]);
    b.set_block(u(1), u(10), false, Millis(106)).await.expect("unblock");
    assert!(!b.relations(u(10), &[u(1)]).await.expect("relations")[0].blocked_by);
    assert_eq!(
        b.follow_many(u(10), &[u(1)], Millis(107), 10).await.expect("follow"),
        vec![FollowStatus::Followed(Millis(107))]
    );
    assert_eq!(list(1, ListKind::Followers, None, 1).await, vec![at(107, 10)], "a new follow, at its time");

    b.set_mute(u(10), u(2), true, Millis(108)).await.expect("mute");
    assert!(b.relations(u(10), &[u(2)]).await.expect("relations")[0].muting);
    assert!(!b.relations(u(2), &[u(10)]).await.expect("relations")[0].muting, "a mute is one way");
    b.set_mute(u(10), u(2), false, Millis(109)).await.expect("unmute");
    assert!(!b.relations(u(10), &[u(2)]).await.expect("relations")[0].muting);
    assert!(b.unfollow(u(10), u(2)).await.expect("unfollow"));
    assert_eq!(list(2, ListKind::Followers, None, 10).await, vec![]);
}

/// The reads feeds are made of: outboxes merged in either direction within
/// an open range and a limit (tombstones keep their place), reposts by a set
/// of users, insertions into a home (records of their own, the earliest per
/// item), promotions while they run, idempotency keys per author, ids taken.
pub async fn items_feeds(b: &dyn Backend) {
    use tideway_store::{Promotion, Record};
    for (id, author) in [(7001, 21), (7002, 22), (7003, 21), (7004, 22), (7005, 21)] {
        created(b, id, author, false).await;
    }
    b.update_item(ItemId(7003), &ItemChange::Delete).await.expect("delete").expect("existed");
    let merge = async |range, dir, limit| {
        b.outbox_merge(&[UserId(21), UserId(22), UserId(99)], range, dir, limit).await.expect("outbox_merge")
    };
    assert_eq!(merge(KeyRange::ALL, Direction::Older, 3).await, vec![7005, 7004, 7003], "newest first, tombstone kept");
    assert_eq!(merge(KeyRange::ALL, Direction::Newer, 2).await, vec![7001, 7002], "oldest first");
    let r = KeyRange { above: Some(7001), below: Some(7005) };
    assert_eq!(merge(r, Direction::Older, 10).await, vec![7004, 7003, 7002], "bounds are exclusive");
    assert_eq!(
        b.outbox_merge(&[UserId(22)], KeyRange::ALL, Direction::Older, 10).await.expect("merge"),
        vec![7004, 7002]
    );

    for (id, author) in [(7010, 31), (7011, 32), (7012, 33)] {
        assert!(matches!(linked(b, id, author, Some(7001), None).await, CreateOutcome::Created(_)));
    }
    b.update_item(ItemId(7012), &ItemChange::Delete).await.expect("delete").expect("existed");
    let mut by =
        b.reposts_by(&[ItemId(7001), ItemId(7002)], &[UserId(31), UserId(33), UserId(40)]).await.expect("reposts_by");
    by[0].sort_unstable();
    assert_eq!(by, vec![vec![(UserId(31), ItemId(7010))], vec![]], "live reposts by those users only");

    b.insert_home(UserId(50), ItemId(7002), 7020).await.expect("insert");
    b.insert_home(UserId(50), ItemId(7002), 7021).await.expect("insert again");
    b.insert_home(UserId(50), ItemId(7004), 7022).await.expect("insert");
    b.insert_home(UserId(51), ItemId(7004), 7023).await.expect("insert elsewhere");
    assert_eq!(
        b.inserts(UserId(50), KeyRange::ALL, Direction::Older, 10).await.expect("inserts"),
        vec![7022, 7021, 7020]
    );
    assert_eq!(
        b.inserts(UserId(50), KeyRange { above: Some(7020), below: None }, Direction::Newer, 1).await.expect("inserts"),
        vec![7021]
    );
    assert_eq!(
        b.inserted_keys(UserId(50), &[ItemId(7002), ItemId(7004), ItemId(7001)]).await.expect("inserted"),
        vec![Some(7020), Some(7022), None],
        "the earliest insertion of each item"
    );
    match b.records(&[7021]).await.expect("records").pop().flatten() {
        Some(Record::Insert { key, user, item }) => assert_eq!((key, user, item), (7021, UserId(50), ItemId(7002))),
        other => panic!("an insertion's record: {other:?}"),
    }

    let p = Promotion { id: 7030, item: ItemId(7001), every: 3, starts_at: Millis(100), ends_at: Millis(200) };
    b.create_promotion(p.clone()).await.expect("promotion");
    assert_eq!(b.active_promotions(Millis(150)).await.expect("active"), vec![p.clone()]);
    assert!(b.active_promotions(Millis(200)).await.expect("active").is_empty(), "the end is exclusive");
    assert!(b.active_promotions(Millis(99)).await.expect("active").is_empty());
    let later = Promotion { id: 7029, item: ItemId(7001), every: 5, starts_at: Millis(300), ends_at: Millis(400) };
    b.create_promotion(later.clone()).await.expect("a later promotion");
    assert_eq!(b.promotions_not_ended(Millis(99)).await.expect("not ended"), vec![later.clone(), p.clone()], "by id");
    assert_eq!(
        b.promotions_not_ended(Millis(200)).await.expect("not ended"),
        vec![later.clone()],
        "the end is exclusive"
    );
    assert!(b.promotions_not_ended(Millis(400)).await.expect("not ended").is_empty());

    let keyed = |id: u64, author: u64| Item {
        idempotency_key: Some("k-1".into()),
        ..Item::new(ItemId(id), UserId(author), ItemKind::Post)
    };
    let first = match b.create_item(keyed(7040, 60), false, Millis(1)).await.expect("create") {
        CreateOutcome::Created(i) => i,
        other => panic!("{other:?}"),
    };
    assert_eq!(b.create_item(keyed(7041, 60), false, Millis(1)).await.expect("again"), CreateOutcome::Existing(first));
    assert!(matches!(
        b.create_item(keyed(7042, 61), false, Millis(1)).await.expect("other"),
        CreateOutcome::Created(_)
    ));
    assert!(
        matches!(
            b.create_item(Item::new(ItemId(7001), UserId(62), ItemKind::Post), false, Millis(1)).await,
            Err(tideway_store::StoreError::IdTaken(7001))
        ),
        "an id is never reused"
    );
    let stats = b.stats().await.expect("stats");
    assert!(stats.max_key >= 7042, "the largest key is known: {}", stats.max_key);
}

/// `Items::create_item`, many at once (a backend may write them together):
/// each is stored whole with its postings, its author's item counter, its
/// parent's reply count and, when asked, its fan-out job; an id already
/// taken fails that create alone, and every other of its moment is stored.
pub async fn items_at_once(b: &dyn Backend) {
    use tideway_core::PostingFeed;
    created(b, 9000, 70, false).await;
    created(b, 9001, 71, false).await;
    let item = |n: u64| {
        let mut i = Item::new(ItemId(9100 + n), UserId(80 + n % 5), ItemKind::Post);
        if n.is_multiple_of(3) {
            i.kind = ItemKind::Reply;
            i.reply_to = Some(ItemId(if n.is_multiple_of(2) { 9000 } else { 9001 }));
            i.reply_to_author = Some(UserId(if n.is_multiple_of(2) { 70 } else { 71 }));
        }
        if n.is_multiple_of(4) {
            i.tags = vec!["both".into(), format!("t{}", n % 8)];
        }
        if n.is_multiple_of(5) {
            i.mentions = vec![UserId(99)];
        }
        i.body = tideway_core::Body::new(
            serde_json::json!({ "text": format!("é \"{n}\"\n😀"), "n": n }).as_object().expect("an object"),
        );
        i
    };
    let n = 40u64;
    // Half at the moment one create reuses a taken id, half alone.
    let creates = |r: std::ops::Range<u64>| {
        futures_util::future::join_all(r.map(|n| b.create_item(item(n), n.is_multiple_of(2), Millis(9100 + n as i64))))
    };
    let taken = b.create_item(Item::new(ItemId(9000), UserId(88), ItemKind::Post), true, Millis(9000));
    let (mut outcomes, taken) = tokio::join!(creates(0..n / 2), taken);
    assert!(matches!(taken, Err(tideway_store::StoreError::IdTaken(9000))), "the taken id fails alone: {taken:?}");
    outcomes.extend(creates(n / 2..n).await);
    for (n, o) in outcomes.into_iter().enumerate() {
        match o.expect("create_item") {
            CreateOutcome::Created(i) => assert_eq!(i.id, ItemId(9100 + n as u64)),
            other => panic!("create {n} did not create: {other:?}"),
        }
    }

    let ids: Vec<Key> = (0..n).map(|n| 9100 + n).collect();
    let records = b.records(&ids).await.expect("records");
    for (n, r) in records.into_iter().enumerate() {
        match r {
            Some(tideway_store::Record::Item(i)) => {
                let want = item(n as u64);
                assert_eq!(
                    (i.author, i.reply_to, &i.tags, &i.mentions, i.deleted),
                    (want.author, want.reply_to, &want.tags, &want.mentions, false),
                    "item {n}"
                );
            }
            other => panic!("item {n} is stored: {other:?}"),
        }
    }
    let bodies = b.bodies(&ids.iter().map(|i| ItemId(*i)).collect::<Vec<_>>()).await.expect("bodies");
    for (n, body) in bodies.into_iter().enumerate() {
        assert_eq!(body.as_ref(), Some(&item(n as u64).body), "body {n}, unicode and escapes kept");
    }
    assert_eq!(b.counts(UserId(88)).await.expect("counts").items, 0, "the failed create counted nothing");
    for a in 80..85 {
        assert_eq!(b.counts(UserId(a)).await.expect("counts").items, n / 5, "items of author {a}");
    }
    let replies = b.hydration(&[ItemId(9000), ItemId(9001)], None).await.expect("hydration");
    let want = |even: bool| (0..n).filter(|n| n.is_multiple_of(3) && (n.is_multiple_of(2)) == even).count() as u64;
    assert_eq!((replies[0].0.replies, replies[1].0.replies), (want(true), want(false)), "reply counts");

    let feed = async |f: PostingFeed| b.postings(f.id(), KeyRange::ALL, Direction::Newer, 100).await.expect("postings");
    let tagged: Vec<Key> = (0..n).filter(|n| n.is_multiple_of(4)).map(|n| 9100 + n).collect();
    assert_eq!(feed(PostingFeed::Tag("both".into())).await, tagged);
    assert_eq!(feed(PostingFeed::Tag("t4".into())).await, vec![9104, 9112, 9120, 9128, 9136]);
    let mentioned: Vec<Key> = (0..n).filter(|n| n.is_multiple_of(5)).map(|n| 9100 + n).collect();
    assert_eq!(feed(PostingFeed::Mentions(UserId(99))).await, mentioned);

    // Every job, claimed and completed until none is left (a backend may
    // hold only a window of its jobs at a time).
    let worker = tideway_store::rules::worker_id(1, 1);
    let mut jobs: Vec<(Key, UserId, Millis)> = vec![];
    for _ in 0..=n {
        let claimed = b.claim_jobs(worker, Millis(20_000), 60_000, 100).await.expect("claim");
        if claimed.is_empty() {
            break;
        }
        let done: Vec<JobProgress> = claimed.iter().map(|j| JobProgress::Complete(j.key)).collect();
        b.advance(worker, &done).await.expect("complete");
        jobs.extend(claimed.iter().map(|j| (j.key, j.author, j.created)));
    }
    jobs.sort_unstable();
    let want: Vec<(Key, UserId, Millis)> = (0..n)
        .filter(|n| n.is_multiple_of(2))
        .map(|n| (9100 + n, UserId(80 + n % 5), Millis(9100 + n as i64)))
        .collect();
    assert_eq!(jobs, want, "a job for each fan-out, none for the others or the failed create");
}

/// `Postings`: a new item is posted, in its own write, to the feed of each
/// user it mentions, each of its tags and its object; a repost is not;
/// postings stay after a delete or a visibility change (pages filter);
/// feeds are read by range, in either direction, within a limit, and never
/// mix; an item created again (an idempotent repeat) is posted once.
pub async fn postings(b: &dyn Backend) {
    use tideway_core::{ObjectRef, PostingFeed};
    let post = async |id: u64, author: u64, tags: &[&str], mentions: &[u64], object: Option<(&str, &str)>| {
        let mut i = Item::new(ItemId(id), UserId(author), ItemKind::Post);
        i.tags = tags.iter().map(|t| (*t).to_owned()).collect();
        i.mentions = mentions.iter().map(|m| UserId(*m)).collect();
        i.object = object.map(|(k, id)| ObjectRef { kind: k.into(), id: id.into() });
        i.idempotency_key = Some(format!("p{id}"));
        b.create_item(i, false, Millis(id as i64)).await.expect("create")
    };
    post(8001, 31, &["rust"], &[41], Some(("book", "1"))).await;
    post(8002, 32, &["rust", "db"], &[], None).await;
    post(8003, 31, &[], &[41, 42], Some(("book", "1"))).await;
    post(8004, 33, &["db"], &[42], Some(("book", "2"))).await;
    post(8005, 32, &["rust"], &[41], None).await;
    // An idempotent repeat writes nothing new.
    let again = post(8099, 32, &["rust"], &[41], None).await;
    assert!(matches!(again, CreateOutcome::Created(_)), "a new key");
    let repeat = {
        let mut i = Item::new(ItemId(8100), UserId(32), ItemKind::Post);
        i.tags = vec!["rust".into()];
        i.idempotency_key = Some("p8005".into());
        b.create_item(i, false, Millis(8100)).await.expect("repeat")
    };
    assert!(matches!(repeat, CreateOutcome::Existing(ref e) if e.id == ItemId(8005)), "{repeat:?}");
    // A repost carries no postings of its own.
    let mut repost = Item::new(ItemId(8006), UserId(34), ItemKind::Repost);
    repost.repost_of = Some(ItemId(8001));
    repost.mentions = vec![UserId(41)];
    repost.tags = vec!["rust".into()];
    b.create_item(repost, false, Millis(8006)).await.expect("repost");
    // Deleted and re-scoped items keep their postings.
    b.update_item(ItemId(8002), &ItemChange::Delete).await.expect("delete").expect("existed");
    b.update_item(ItemId(8004), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("existed");

    let feed = async |f: PostingFeed, range, dir, limit| b.postings(f.id(), range, dir, limit).await.expect("postings");
    let rust = || PostingFeed::Tag("rust".into());
    assert_eq!(feed(rust(), KeyRange::ALL, Direction::Older, 10).await, vec![8099, 8005, 8002, 8001]);
    assert_eq!(feed(rust(), KeyRange::ALL, Direction::Newer, 2).await, vec![8001, 8002], "oldest first, limited");
    let r = KeyRange { above: Some(8001), below: Some(8099) };
    assert_eq!(feed(rust(), r, Direction::Older, 10).await, vec![8005, 8002], "bounds are exclusive");
    assert_eq!(feed(PostingFeed::Tag("db".into()), KeyRange::ALL, Direction::Older, 10).await, vec![8004, 8002]);
    assert_eq!(
        feed(PostingFeed::Mentions(UserId(41)), KeyRange::ALL, Direction::Older, 10).await,
        vec![8099, 8005, 8003, 8001]
    );
    assert_eq!(feed(PostingFeed::Mentions(UserId(42)), KeyRange::ALL, Direction::Newer, 10).await, vec![8003, 8004]);
    let book = |id: &str| PostingFeed::Object { kind: "book".into(), id: id.into() };
    assert_eq!(feed(book("1"), KeyRange::ALL, Direction::Older, 10).await, vec![8003, 8001]);
    assert_eq!(feed(book("2"), KeyRange::ALL, Direction::Older, 10).await, vec![8004]);
    assert!(feed(book("3"), KeyRange::ALL, Direction::Older, 10).await.is_empty(), "an unknown feed is empty");
    assert!(feed(rust(), KeyRange::ALL, Direction::Older, 0).await.is_empty(), "limit 0");
    assert!(feed(PostingFeed::Mentions(UserId(31)), KeyRange::ALL, Direction::Older, 10).await.is_empty());
}

/// `Notifications`: events gather in the newest unread group of their key
/// and open a new one once it is read; replies and mentions are groups of
/// their own; a group shows its 5 newest visible actors, their exact count
/// and its newest time; undoing, forgetting a deleted item and hiding take
/// actors out (and unhiding puts them back); an actor hidden by the graph
/// when the event starts is kept hidden; pages walk each group once below a
/// cursor; marks only move forward, `up_to` names the user's own group, and
/// the counts above them are exact; ops apply once however often they are
/// sent; two writers of one key at once make one group.
pub async fn notifications(b: &dyn Backend) {
    use tideway_core::notify::{Mark, Notice, Op, Verb};
    let u = UserId;
    let like = |item: u64| Verb::Reaction { item: ItemId(item), kind: "like".into() };
    let stand = |user: u64, verb: Verb, actor: u64, at: i64, open: u64| {
        let about = match &verb {
            Verb::Reaction { item, .. } | Verb::Repost { item } => Some(*item),
            Verb::Reply { .. } => Some(ItemId(900)),
            _ => None,
        };
        Op::Stand { notice: Notice { user: u(user), verb, actor: u(actor), at: Millis(at), stands: true, about }, open }
    };
    let page = async |user: u64, before: Option<(Millis, u64)>, limit: usize| {
        b.notifications(u(user), before, limit).await.expect("notifications")
    };
    let shape = |p: &tideway_store::NotifyPage| {
        p.groups
            .iter()
            .map(|g| (g.id, g.actors.iter().map(|a| a.0).collect::<Vec<_>>(), g.actor_count, g.latest_at.0))
            .collect::<Vec<_>>()
    };

    let empty = page(1, None, 10).await;
    assert!(empty.groups.is_empty() && empty.unseen == 0 && empty.unread == 0, "{empty:?}");
    assert!(b.mark_notifications(u(1), Mark::Read, None).await.expect("mark"), "nothing to mark is no error");

    // Seven likes of item 900 gather; the group shows the 5 newest.
    let likes: Vec<Op> = (2..=8).map(|a| stand(1, like(900), a, 100 + a as i64, 5000 + a)).collect();
    b.notify(&likes).await.expect("likes");
    b.notify(&likes[..2]).await.expect("sent again");
    let p = page(1, None, 10).await;
    assert_eq!(shape(&p), vec![(5002, vec![8, 7, 6, 5, 4], 7, 108)], "one group, opened by the first like");
    assert_eq!((p.unseen, p.unread), (1, 1));

    // A follow and a reply, each its own group; a mention too.
    b.notify(&[
        stand(1, Verb::Follow, 3, 110, 5010),
        stand(1, Verb::Reply { item: ItemId(901) }, 4, 111, 5011),
        stand(1, Verb::Mention { item: ItemId(902) }, 5, 112, 5012),
        stand(1, Verb::Mention { item: ItemId(903) }, 5, 113, 5013),
    ])
    .await
    .expect("more");
    let p = page(1, None, 10).await;
    assert_eq!(p.groups.iter().map(|g| g.id).collect::<Vec<_>>(), vec![5013, 5012, 5011, 5010, 5002]);
    assert_eq!(p.groups[2].verb, Verb::Reply { item: ItemId(901) });
    assert_eq!((p.unseen, p.unread), (5, 5));

    // Pages walk below a cursor, each group once.
    let first = page(1, None, 2).await;
    let last = first.groups.last().expect("two groups");
    let rest = page(1, Some((last.latest_at, last.id)), 10).await;
    assert_eq!(rest.groups.iter().map(|g| g.id).collect::<Vec<_>>(), vec![5011, 5010, 5002]);

    // Seen up to the follow group: the groups at or below its time are seen.
    assert!(b.mark_notifications(u(1), Mark::Seen, Some(5010)).await.expect("seen"));
    let p = page(1, None, 10).await;
    assert_eq!((p.seen, p.unseen, p.unread), (Millis(110), 3, 5));
    // Marks never move back; a foreign or unknown group is refused.
    assert!(b.mark_notifications(u(1), Mark::Seen, Some(5002)).await.expect("older"));
    assert_eq!(page(1, None, 10).await.seen, Millis(110), "an older up_to changes nothing");
    b.notify(&[stand(2, Verb::Follow, 9, 50, 5020)]).await.expect("user 2");
    assert!(!b.mark_notifications(u(1), Mark::Read, Some(5020)).await.expect("foreign"), "user 2's group");
    assert!(!b.mark_notifications(u(1), Mark::Read, Some(424242)).await.expect("unknown"));
    assert_eq!(page(1, None, 10).await.unread, 5, "a refused mark moves nothing");

    // Read everything: a new like opens a new group; the read one stays.
    assert!(b.mark_notifications(u(1), Mark::Read, None).await.expect("read"));
    assert_eq!(page(1, None, 10).await.unread, 0);
    b.notify(&[stand(1, like(900), 9, 120, 5030), stand(1, like(900), 10, 121, 5031)]).await.expect("after read");
    let p = page(1, None, 10).await;
    assert_eq!(shape(&p)[0], (5030, vec![10, 9], 2, 121), "a new group after the read");
    assert_eq!(shape(&p)[5], (5002, vec![8, 7, 6, 5, 4], 7, 108), "the read group as it was");
    assert_eq!((p.unseen, p.unread), (4, 1));

    // Undo: the newest actor of the read group takes their like back.
    b.notify(&[Op::Fall { user: u(1), verb: like(900), actor: u(8), at: Millis(500) }]).await.expect("unlike");
    b.notify(&[Op::Fall { user: u(1), verb: like(900), actor: u(8), at: Millis(500) }]).await.expect("again");
    // A fall of an event older than the standing one (a delete sent again
    // after its actor acted anew) leaves the standing one.
    b.notify(&[Op::Fall { user: u(1), verb: like(900), actor: u(7), at: Millis(100) }]).await.expect("an older fall");
    let g = page(1, None, 10).await.groups.into_iter().find(|g| g.id == 5002).expect("still shown");
    assert_eq!((g.actors.clone(), g.actor_count, g.latest_at), (vec![u(7), u(6), u(5), u(4), u(3)], 6, Millis(107)));

    // Hiding an actor takes them out everywhere; unhiding puts them back.
    b.notify(&[Op::Hide { user: u(1), actor: u(5), hidden: true }]).await.expect("hide");
    let p = page(1, None, 10).await;
    assert!(p.groups.iter().all(|g| g.id != 5012 && g.id != 5013), "the mentions by 5 are hidden");
    let g = p.groups.iter().find(|g| g.id == 5002).expect("shown");
    assert_eq!((g.actor_count, g.actors.clone()), (5, vec![u(7), u(6), u(4), u(3), u(2)]));
    assert_eq!((p.unseen, p.unread), (2, 1), "hidden groups leave the counts");
    b.notify(&[Op::Hide { user: u(1), actor: u(5), hidden: false }]).await.expect("unhide");
    assert_eq!(page(1, None, 10).await.groups.len(), 6);

    // A deleted item takes every event about it along.
    b.notify(&[Op::Forget { user: u(1), item: ItemId(900) }]).await.expect("forget");
    let p = page(1, None, 10).await;
    assert_eq!(
        p.groups.iter().map(|g| g.id).collect::<Vec<_>>(),
        vec![5013, 5012, 5010],
        "likes and the reply to 900 gone"
    );
    assert_eq!((p.unseen, p.unread), (2, 0));
    // Marking up to a group with nothing standing moves to its last time.
    assert!(b.mark_notifications(u(1), Mark::Seen, Some(5030)).await.expect("emptied group"));
    assert_eq!(page(1, None, 10).await.seen, Millis(121));

    // The graph hides an actor whose event starts while blocked or muted.
    b.set_mute(u(3), u(11), true, Millis(130)).await.expect("mute");
    b.set_block(u(12), u(3), true, Millis(130)).await.expect("block");
    b.notify(&[
        stand(3, Verb::Follow, 11, 131, 5040),
        stand(3, Verb::Follow, 12, 132, 5041),
        stand(3, Verb::Follow, 13, 133, 5042),
    ])
    .await
    .expect("follows");
    let p = page(3, None, 10).await;
    // Hidden events stand in no group's count, so 13 opens a group of its own.
    assert_eq!(shape(&p), vec![(5042, vec![13], 1, 133)], "muted 11 and blocking 12 are hidden");
    b.notify(&[Op::Hide { user: u(3), actor: u(11), hidden: false }]).await.expect("unmute");
    assert_eq!(shape(&page(3, None, 10).await), vec![(5042, vec![13], 1, 133), (5040, vec![11], 1, 131)]);

    // Two writers of one key at once make one group.
    let (one, other) = ([stand(4, like(950), 2, 200, 5050)], [stand(4, like(950), 3, 201, 5051)]);
    let (x, y) = tokio::join!(b.notify(&one), b.notify(&other));
    x.expect("one");
    y.expect("other");
    let p = page(4, None, 10).await;
    assert_eq!(p.groups.len(), 1, "{p:?}");
    assert_eq!((p.groups[0].actor_count, p.unread), (2, 1));
}

/// The writes that carry their cause's notifications (`*_notifying`): a
/// create applies them when it stores the item, never for an idempotent
/// repeat or a taken id; an update when it changes the item; a follow those
/// of the targets it newly follows; an unfollow when it removes one. And
/// `Notifications::stored_causes`: every item (deleted too), follow and
/// reaction once, in pages, each kind from its start.
pub async fn notifying_writes(b: &dyn Backend) {
    use tideway_core::notify::{Notice, Op, Verb};
    use tideway_store::{CausePos, FollowStatus, StoredCause};
    let u = UserId;
    let stand = |user: u64, verb: Verb, actor: u64, at: i64, open: u64| Op::Stand {
        notice: Notice { user: u(user), verb, actor: u(actor), at: Millis(at), stands: true, about: None },
        open,
    };
    let groups = async |user: u64| {
        let p = b.notifications(u(user), None, 50).await.expect("notifications");
        p.groups.iter().map(|g| (g.id, g.verb.clone(), g.actor_count)).collect::<Vec<_>>()
    };

    // A mention stored with its item.
    let mut post = Item::new(ItemId(100), u(2), ItemKind::Post);
    post.mentions = vec![u(1)];
    post.idempotency_key = Some("k".into());
    let mention = [stand(1, Verb::Mention { item: ItemId(100) }, 2, 100, 7000)];
    let made = b.create_item_notifying(post.clone(), false, Millis(100), &mention).await.expect("create");
    assert!(matches!(made, CreateOutcome::Created(_)), "{made:?}");
    assert_eq!(groups(1).await, vec![(7000, Verb::Mention { item: ItemId(100) }, 1)], "the mention, with its item");
    // A repeat (same idempotency key, a new id) and a taken id apply nothing.
    let mut again = post.clone();
    again.id = ItemId(101);
    let other = [stand(1, Verb::Mention { item: ItemId(101) }, 2, 101, 7001)];
    let repeat = b.create_item_notifying(again, false, Millis(101), &other).await.expect("repeat");
    assert!(matches!(repeat, CreateOutcome::Existing(ref i) if i.id == ItemId(100)), "{repeat:?}");
    let mut taken = Item::new(ItemId(100), u(3), ItemKind::Post);
    taken.mentions = vec![u(1)];
    let taken_ops = [stand(1, Verb::Mention { item: ItemId(100) }, 3, 100, 7002)];
    assert!(b.create_item_notifying(taken, false, Millis(100), &taken_ops).await.is_err(), "the id is taken");
    assert_eq!(groups(1).await.len(), 1, "a repeat and a refused create notify no one");

    // A delete's ops go with it, and only when it deletes.
    let forget = [Op::Forget { user: u(1), item: ItemId(100) }];
    // (a like about item 100, which a `Forget` of it would take along)
    let like = Notice {
        user: u(1),
        verb: Verb::Reaction { item: ItemId(100), kind: "like".into() },
        actor: u(5),
        at: Millis(110),
        stands: true,
        about: Some(ItemId(100)),
    };
    b.notify(&[Op::Stand { notice: like, open: 7003 }]).await.expect("a like about 100");
    let fall = [Op::Fall { user: u(1), verb: Verb::Mention { item: ItemId(100) }, actor: u(2), at: Millis(100) }];
    assert!(b.update_item_notifying(ItemId(100), &ItemChange::Delete, &fall).await.expect("delete").is_some());
    assert_eq!(groups(1).await.len(), 1, "the mention fell with the delete; the like stands");
    assert!(b.update_item_notifying(ItemId(100), &ItemChange::Delete, &forget).await.expect("again").is_none());
    assert_eq!(groups(1).await.len(), 1, "a delete of a deleted item applies nothing");

    // Follows: only the newly followed targets' ops.
    b.follow_many(u(3), &[u(4)], Millis(120), 100).await.expect("an earlier follow");
    let follow_ops = [stand(4, Verb::Follow, 3, 130, 7010), stand(6, Verb::Follow, 3, 130, 7011)];
    let st = b.follow_many_notifying(u(3), &[u(4), u(6)], Millis(130), 100, &follow_ops).await.expect("follow");
    assert_eq!(st, vec![FollowStatus::Already(Millis(120)), FollowStatus::Followed(Millis(130))]);
    assert!(groups(4).await.is_empty(), "a follow that stood already notifies nothing anew");
    assert_eq!(groups(6).await, vec![(7011, Verb::Follow, 1)], "the new follow, with its notification");
    // Unfollow: its fall goes with it, only when it removes the follow.
    let unfollow = [Op::Fall { user: u(6), verb: Verb::Follow, actor: u(3), at: Millis(140) }];
    assert!(b.unfollow_notifying(u(3), u(6), &unfollow).await.expect("unfollow"));
    assert!(groups(6).await.is_empty(), "the follow's event fell with it");
    b.notify(&[stand(6, Verb::Follow, 3, 150, 7012)]).await.expect("an event with no follow under it");
    assert!(!b.unfollow_notifying(u(3), u(6), &unfollow).await.expect("no follow to remove"));
    assert_eq!(groups(6).await.len(), 1, "an unfollow that removed nothing applies nothing");

    // What is stored, scanned in pages of two.
    b.create_item(Item::new(ItemId(90), u(7), ItemKind::Post), false, Millis(90)).await.expect("item 90");
    b.set_reaction(ItemId(90), u(8), "like", true, &[]).await.expect("like");
    b.set_reaction(ItemId(90), u(8), "wow", true, &[]).await.expect("wow");
    b.set_reaction(ItemId(100), u(9), "like", true, &[]).await.expect("like of the deleted");
    b.set_reaction(ItemId(90), u(9), "like", false, &[]).await.expect("nothing to take back");
    let mut scanned = Vec::new();
    for start in [CausePos::Items(None), CausePos::Follows(None), CausePos::Reactions(None)] {
        let mut pos = start;
        loop {
            let page = b.stored_causes(&pos, 2).await.expect("stored causes");
            assert!(page.len() <= 2, "{page:?}");
            let Some(last) = page.last() else { break };
            assert_eq!(std::mem::discriminant(&last.pos()), std::mem::discriminant(&pos), "one kind a page");
            pos = last.pos();
            scanned.extend(page);
        }
    }
    let items: Vec<(u64, bool)> = scanned
        .iter()
        .filter_map(|c| match c {
            StoredCause::Item(i) => Some((i.id.0, i.deleted)),
            _ => None,
        })
        .collect();
    assert_eq!(items, vec![(90, false), (100, true)], "every item once, deleted ones too");
    let mentions = scanned.iter().find_map(|c| match c {
        StoredCause::Item(i) if i.id == ItemId(100) => Some(i.mentions.clone()),
        _ => None,
    });
    assert_eq!(mentions, Some(vec![u(1)]), "an item comes with what it names");
    let follows: Vec<(u64, u64, i64)> = scanned
        .iter()
        .filter_map(|c| match c {
            StoredCause::Follow { from, to, since } => Some((from.0, to.0, since.0)),
            _ => None,
        })
        .collect();
    assert_eq!(follows, vec![(3, 4, 120)], "every follow standing, with its time");
    let mut reactions: Vec<(u64, u64, String)> = scanned
        .iter()
        .filter_map(|c| match c {
            StoredCause::Reaction { item, user, kind } => Some((item.0, user.0, kind.clone())),
            _ => None,
        })
        .collect();
    let in_order = reactions.clone();
    reactions.sort();
    assert_eq!(in_order, reactions, "reactions in (item, user, kind) order");
    assert_eq!(
        reactions,
        vec![(90, 8, "like".to_owned()), (90, 8, "wow".to_owned()), (100, 9, "like".to_owned())],
        "every reaction standing, each kind its own"
    );
}

/// `Live`: sessions stored whole, steps decided by `Session::moved` (a
/// wrong one changes nothing and says where the session is), the limit of
/// open sessions per anchor, open sessions of many anchors in one call,
/// ended ones merged by (end, id) below a position; two racing starts of
/// one session make one.
pub async fn live(b: &dyn Backend) {
    use tideway_core::live::{Move, Phase, Session};
    use tideway_store::Moved;
    let mut body = serde_json::Map::new();
    body.insert("title".into(), serde_json::json!("Friday night"));
    let body = tideway_core::Body::new(&body);
    let new = |id: u64, anchor: u64, at: i64| Session::new(id, UserId(anchor), Millis(at), body.clone());
    let ids = |v: &[Session]| {
        let mut v: Vec<u64> = v.iter().map(|s| s.id).collect();
        v.sort_unstable();
        v
    };

    assert!(b.create_session(new(7001, 1, 500), 3).await.expect("create"));
    assert_eq!(b.sessions(&[7001, 7999]).await.expect("sessions"), vec![Some(new(7001, 1, 500)), None]);
    assert_eq!(b.move_session(7999, Move::Start, Millis(10)).await.expect("unknown"), Moved::Unknown);
    match b.move_session(7001, Move::End, Millis(10)).await.expect("end an upcoming one") {
        Moved::Wrong(s) => assert_eq!(s.phase(), Phase::Upcoming),
        other => panic!("ending an upcoming session: {other:?}"),
    }
    let started = match b.move_session(7001, Move::Start, Millis(600)).await.expect("start") {
        Moved::Done(s) => s,
        other => panic!("start: {other:?}"),
    };
    assert_eq!((started.phase(), started.started_at, &started.body), (Phase::Live, Some(Millis(600)), &body));
    assert!(matches!(b.move_session(7001, Move::Start, Millis(601)).await.expect("again"), Moved::Wrong(_)));
    assert_eq!(b.sessions(&[7001]).await.expect("read").pop().flatten(), Some(started.clone()));

    // At most 3 open per anchor (live counts; ended ones do not).
    assert!(b.create_session(new(7002, 1, 700), 3).await.expect("second"));
    assert!(b.create_session(new(7003, 1, 800), 3).await.expect("third"));
    assert!(!b.create_session(new(7004, 1, 900), 3).await.expect("fourth"), "over the limit");
    assert_eq!(b.sessions(&[7004]).await.expect("read").pop().flatten(), None, "nothing stored");
    match b.move_session(7001, Move::End, Millis(650)).await.expect("end") {
        Moved::Done(s) => assert_eq!((s.phase(), s.ended_at), (Phase::Replay, Some(Millis(650)))),
        other => panic!("end: {other:?}"),
    }
    assert!(b.create_session(new(7004, 1, 900), 3).await.expect("room again"));

    // Anchors 2 and 3: ended sessions at 100..; anchor 4 has none.
    for (id, anchor, end) in [(7010, 2, 100), (7011, 3, 100), (7012, 2, 300), (7013, 3, 200), (7014, 2, 50)] {
        assert!(b.create_session(new(id, anchor, 1), 10).await.expect("create"));
        assert!(matches!(b.move_session(id, Move::Start, Millis(end - 10)).await.expect("start"), Moved::Done(_)));
        assert!(matches!(b.move_session(id, Move::End, Millis(end)).await.expect("end"), Moved::Done(_)));
    }
    assert!(b.create_session(new(7020, 3, 5000), 10).await.expect("upcoming of 3"));
    let anchors = [UserId(1), UserId(2), UserId(3), UserId(4)];
    assert_eq!(ids(&b.open_sessions(&anchors).await.expect("open")), vec![7002, 7003, 7004, 7020]);
    assert!(b.open_sessions(&[UserId(4)]).await.expect("none").is_empty());
    let ended = b.ended_sessions(&anchors, (Millis(i64::MAX), 0), 10).await.expect("ended");
    assert_eq!(ended.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7001, 7012, 7013, 7011, 7010, 7014]);
    assert_eq!(ended[0].ended_at, Some(Millis(650)));
    let below = b.ended_sessions(&anchors, (Millis(100), 7011), 2).await.expect("below");
    assert_eq!(below.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7010, 7014], "(end, id) strictly below");
    let of_two = b.ended_sessions(&[UserId(2)], (Millis(300), 7012), 10).await.expect("one anchor");
    assert_eq!(of_two.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7010, 7014]);
    assert!(b.ended_sessions(&[], (Millis(i64::MAX), 0), 10).await.expect("no anchors").is_empty());

    // Two starts of one session at once: one wins.
    assert!(b.create_session(new(7030, 5, 1), 10).await.expect("create"));
    let (x, y) =
        tokio::join!(b.move_session(7030, Move::Start, Millis(20)), b.move_session(7030, Move::Start, Millis(21)));
    let done = [x.expect("x"), y.expect("y")].iter().filter(|m| matches!(m, Moved::Done(_))).count();
    assert_eq!(done, 1, "exactly one start succeeds");
}

/// `Snapshots`: bytes kept under an id, read back whole, gone after their
/// time to live; an unknown id is `None`.
pub async fn snapshots(b: &dyn Backend) {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(9 * 300).collect();
    b.put_snapshot(91, &bytes, 60_000).await.expect("put");
    b.put_snapshot(92, &[], 60_000).await.expect("put an empty one");
    b.put_snapshot(93, &[1, 2, 3], 50).await.expect("put a short-lived one");
    assert_eq!(b.snapshot(91).await.expect("get"), Some(bytes));
    assert_eq!(b.snapshot(92).await.expect("get empty"), Some(vec![]));
    assert_eq!(b.snapshot(94).await.expect("unknown"), None);
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    assert_eq!(b.snapshot(93).await.expect("expired"), None, "gone after its time to live");
}

/// `Removals`: every note at or after the time asked, for the user asked
/// (the others they lost) or the authors asked (their items, with the
/// appearance that went), once each; nothing for others or from before.
pub async fn removals(b: &dyn Backend) {
    use tideway_store::{Removal, Removed};
    let u = UserId;
    let item = |author: u64, item: u64, key: Option<u64>| Removal::Item { author: u(author), item: ItemId(item), key };
    let sorted = |mut r: Removed| {
        r.items.sort();
        r.others.sort();
        r
    };
    assert_eq!(b.removed_since(u(1), &[u(2), u(3)], Millis(0)).await.expect("empty"), Removed::default());
    b.note_removals(&[item(2, 20, Some(20))], Millis(1_000), 60_000).await.expect("an item");
    b.note_removals(
        &[item(3, 30, None), item(3, 31, Some(35)), Removal::Relation { user: u(1), other: u(4) }],
        Millis(2_000),
        60_000,
    )
    .await
    .expect("items and a relation");
    b.note_removals(&[item(2, 21, Some(21)), item(2, 20, Some(20))], Millis(1_500), 60_000).await.expect("again");
    assert_eq!(
        sorted(b.removed_since(u(1), &[], Millis(0)).await.expect("the user's")),
        Removed { items: vec![], others: vec![u(4)] }
    );
    assert_eq!(
        sorted(b.removed_since(u(9), &[u(2), u(3), u(5)], Millis(1_000)).await.expect("the authors'")),
        Removed {
            items: vec![(ItemId(20), Some(20)), (ItemId(21), Some(21)), (ItemId(30), None), (ItemId(31), Some(35)),],
            others: vec![]
        },
        "each item once, at its newest note"
    );
    assert_eq!(
        sorted(b.removed_since(u(1), &[u(2), u(3)], Millis(1_600)).await.expect("since")),
        Removed { items: vec![(ItemId(30), None), (ItemId(31), Some(35))], others: vec![u(4)] },
        "notes before the time asked are left out"
    );
    assert_eq!(b.removed_since(u(9), &[u(4), u(5)], Millis(0)).await.expect("others"), Removed::default());
    let many: Vec<UserId> = (100..2100).map(UserId).collect();
    assert_eq!(b.removed_since(u(9), &many, Millis(0)).await.expect("2,000 authors"), Removed::default());
    // Notes far older than the newest are forgotten.
    b.note_removals(&[item(2, 22, None)], Millis(200_000), 60_000).await.expect("much later");
    assert_eq!(
        b.removed_since(u(9), &[u(2)], Millis(0)).await.expect("pruned").items,
        vec![(ItemId(22), None)],
        "only the notes within the window of the newest"
    );
}

/// `FactTokens`: an item's token stands until a change of its facts
/// begins; is absent while any change begun has not ended; and is new once
/// the last one ends (also after an end with nothing begun: a change that
/// lapsed). And the pages of a backend built on them show every change of
/// the counts and marks acknowledged before, read on a second node too.
pub async fn fact_tokens(b: &dyn Backend) {
    use tideway_store::FactKey;
    let (x, y) = (FactKey::Item(ItemId(9001)), FactKey::Followees(UserId(9002)));
    b.mint_fact_tokens(&[x, y]).await.expect("mint");
    let first = b.fact_tokens(&[x, y]).await.expect("tokens");
    let (tx, ty) = (first[0].expect("x has a token"), first[1].expect("y has a token"));
    assert_eq!(b.fact_tokens(&[y, x]).await.expect("again"), vec![Some(ty), Some(tx)], "tokens stand");
    b.mint_fact_tokens(&[x, y]).await.expect("mint again");
    assert_eq!(b.fact_tokens(&[x, y]).await.expect("minted twice"), vec![Some(tx), Some(ty)], "minting keeps a token");
    b.begin_fact_change(&[x]).await.expect("begin");
    assert_eq!(b.fact_tokens(&[x]).await.expect("changing"), vec![None], "no token while x changes");
    b.mint_fact_tokens(&[x]).await.expect("mint while changing");
    assert_eq!(b.fact_tokens(&[x]).await.expect("changing"), vec![None], "minting leaves a change in flight");
    b.begin_fact_change(&[x]).await.expect("a second change");
    b.end_fact_change(&[x]).await.expect("the first ends");
    assert_eq!(b.fact_tokens(&[x]).await.expect("one left"), vec![None], "none while a change is in flight");
    b.end_fact_change(&[x]).await.expect("the second ends");
    let after = b.fact_tokens(&[x]).await.expect("ended")[0].expect("a token once every change ended");
    assert_ne!(after, tx, "a new token after a change");
    assert_eq!(b.fact_tokens(&[x]).await.expect("stands")[0], Some(after));
    // An end with nothing begun (the change lapsed) still moves the token.
    b.end_fact_change(&[x]).await.expect("a late end");
    let late = b.fact_tokens(&[x]).await.expect("after a late end")[0].expect("a token");
    assert!(late != after && late != tx, "a late end moves the token to a new one");
    assert!(b.fact_tokens(&[]).await.expect("none asked").is_empty());

    let (records, promotions) = (FactKey::Records, FactKey::Promotions);
    b.mint_fact_tokens(&[records, promotions]).await.expect("mint");
    let global = b.fact_tokens(&[records, promotions]).await.expect("global keys");
    assert!(global.iter().all(Option::is_some));
    b.begin_fact_change(&[records]).await.expect("begin");
    assert_eq!(b.fact_tokens(&[records, promotions]).await.expect("one changing")[0], None);
    b.end_fact_change(&[records]).await.expect("end");
    assert!(b.fact_tokens(&[records]).await.expect("ended")[0].is_some_and(|t| Some(t) != global[0]));

    // Pages through the layer: counts and marks read, kept, and changed.
    use tideway_store::{ItemCounts, PageQuery, ViewerMarks};
    let (viewer, other, author) = (UserId(1), UserId(2), UserId(3));
    let item = ItemId(9100);
    created(b, item.0, author.0, false).await;
    let page = |v: UserId| async move {
        let hydrate = [item];
        let q = PageQuery { viewer: Some(v), hydrate: &hydrate, originals: &hydrate, ..Default::default() };
        b.page_facts(&q).await.expect("facts").hydrated.remove(0)
    };
    let none = (ItemCounts::default(), Some(ViewerMarks::default()));
    assert_eq!(page(viewer).await, none);
    assert_eq!(page(viewer).await, none, "twice");
    assert!(b.set_reaction(item, viewer, "like", true, &[]).await.expect("like"));
    let liked = ItemCounts { reactions: vec![("like".into(), 1)], ..Default::default() };
    let mine = ViewerMarks { reactions: vec!["like".into()], ..Default::default() };
    assert_eq!(page(viewer).await, (liked.clone(), Some(mine.clone())), "the like shows");
    assert_eq!(page(other).await, (liked.clone(), Some(ViewerMarks::default())), "to another viewer");
    assert_eq!(page(viewer).await, (liked.clone(), Some(mine.clone())), "and again");
    assert!(matches!(linked(b, 9101, other.0, Some(item.0), None).await, CreateOutcome::Created(_)));
    let reposted = ItemCounts { reposts: 1, ..liked.clone() };
    assert_eq!(page(other).await, (reposted.clone(), Some(ViewerMarks { reposted: true, reactions: vec![] })));
    assert_eq!(page(viewer).await, (reposted, Some(mine)));
    b.update_item(ItemId(9101), &ItemChange::Delete).await.expect("the repost deleted");
    b.set_reaction(item, viewer, "like", false, &[]).await.expect("unlike");
    assert_eq!(page(other).await, none, "the delete and the unlike show");
    assert_eq!(page(viewer).await, none);
    // Promotions asked beside them: each one stored is on the next page.
    let promoted = async |at: i64| {
        let q = PageQuery { promotions_at: Some(Millis(at)), ..Default::default() };
        let mut ids: Vec<u64> =
            b.page_facts(&q).await.expect("facts").promotions.expect("asked").iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids
    };
    let promotion = |id: u64, starts: i64| tideway_store::Promotion {
        id,
        item,
        every: 3,
        starts_at: Millis(starts),
        ends_at: Millis(10_000),
    };
    assert!(promoted(100).await.is_empty());
    b.create_promotion(promotion(1, 0)).await.expect("a promotion");
    assert_eq!(promoted(100).await, vec![1]);
    b.create_promotion(promotion(2, 500)).await.expect("a later one");
    assert_eq!(promoted(100).await, vec![1], "not yet running");
    assert_eq!(promoted(600).await, vec![1, 2]);
    assert!(promoted(10_000).await.is_empty(), "ended");
}

/// `Pages::page_facts`: everything a page asks beside its records in one
/// call, each answer what the trait it comes from answers alone; and the
/// check of held copies: every patch and delete moves an item's `rev`, so a
/// copy of an older `rev`, of a deleted item or of an unknown id is stale.
pub async fn pages(b: &dyn Backend) {
    use tideway_store::{ItemCounts, PageQuery, ViewerMarks};
    let u = UserId;
    let (viewer, a2, a3, a4, a5) = (u(1), u(2), u(3), u(4), u(5));
    b.follow_many(viewer, &[a2, a3, a5], Millis(1), 100).await.expect("follow");
    b.follow_many(a2, &[viewer], Millis(2), 100).await.expect("follow back");
    b.set_block(a4, viewer, true, Millis(3)).await.expect("block");
    b.set_mute(viewer, a5, true, Millis(4)).await.expect("mute");
    let (x, y, z) = (ItemId(8001), ItemId(8002), ItemId(8005));
    created(b, x.0, 2, false).await;
    created(b, y.0, 3, false).await;
    created(b, z.0, 2, false).await;
    assert!(matches!(linked(b, 8003, 3, Some(x.0), None).await, CreateOutcome::Created(_)));
    assert!(matches!(linked(b, 8004, 1, Some(y.0), None).await, CreateOutcome::Created(_)));
    assert!(matches!(linked(b, 8006, 5, Some(x.0), None).await, CreateOutcome::Created(_)));
    b.insert_home(viewer, y, 8010).await.expect("insert");
    assert!(b.set_reaction(x, viewer, "like", true, &[]).await.expect("react"));
    assert!(b.set_reaction(x, a2, "like", true, &[]).await.expect("react"));
    assert!(b.set_reaction(x, a3, "x_wow", true, &[]).await.expect("react"));
    let patched = b
        .update_item(x, &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(patched.rev, 1, "a patch moves rev");
    let deleted = b.update_item(z, &ItemChange::Delete).await.expect("delete").expect("exists");
    assert_eq!(deleted.rev, 1, "a delete moves rev");
    match b.records(&[x.0, y.0]).await.expect("records").as_slice() {
        [Some(tideway_store::Record::Item(i)), Some(tideway_store::Record::Item(j))] => {
            assert_eq!((i.rev, j.rev), (1, 0), "rev is stored")
        }
        other => panic!("records: {other:?}"),
    }

    let originals = [x, y, ItemId(8999)];
    let reposters = [a2, a3, viewer, a5];
    let related = [a2, a4, u(77)];
    let q = PageQuery {
        originals: &originals,
        reposters: &reposters,
        inserts_of: Some(viewer),
        viewer: Some(viewer),
        related: &related,
        hydrate: &[x, y],
        held: &[(x, 0), (y, 0), (z, 0), (ItemId(8999), 0), (ItemId(8003), 0)],
        ..Default::default()
    };
    let f = b.page_facts(&q).await.expect("page_facts");
    // Each answer is its own trait's...
    assert_eq!(f.reposts, b.reposts_by(&originals, &reposters).await.expect("reposts_by"));
    assert_eq!(f.inserted, b.inserted_keys(viewer, &originals).await.expect("inserted_keys"));
    // (the reposters found, a3 and a5 but not the viewer, after the related)
    let (listed, rels): (Vec<UserId>, Vec<tideway_core::Relation>) = f.relations.iter().copied().unzip();
    assert_eq!(listed, vec![a2, a4, u(77), a3, a5], "the related users, then the reposters found by id");
    assert_eq!(rels, b.relations(viewer, &listed).await.expect("relations"));
    assert_eq!(f.hydrated, b.hydration(&[x, y], Some(viewer)).await.expect("hydration"));
    // ... and what the data says.
    assert_eq!(f.reposts[0], vec![(a3, ItemId(8003)), (a5, ItemId(8006))], "reposts by reposters, id order");
    assert_eq!(f.reposts[1], vec![(viewer, ItemId(8004))]);
    assert!(f.reposts[2].is_empty());
    assert_eq!(f.inserted, vec![None, Some(8010), None]);
    assert!(rels[0].following && rels[0].followed_by && !rels[0].muting);
    assert!(rels[1].blocked_by && !rels[1].blocking && !rels[1].following);
    assert_eq!(rels[2], tideway_core::Relation::default(), "an unknown user is related to nothing");
    assert!(rels[3].following && !rels[3].followed_by && !rels[3].muting);
    assert!(rels[4].muting && rels[4].following);
    assert_eq!(
        f.hydrated[0],
        (
            ItemCounts { replies: 0, reposts: 2, reactions: vec![("like".into(), 2), ("x_wow".into(), 1)] },
            Some(ViewerMarks { reposted: false, reactions: vec!["like".into()] })
        )
    );
    assert_eq!(f.hydrated[1].1, Some(ViewerMarks { reposted: true, reactions: vec![] }));
    assert_eq!(f.stale, vec![x, z, ItemId(8999)], "patched, deleted and unknown copies are stale");
    // With the viewer's follows known to the caller: the same relations
    // but for following and followed_by, which say false.
    let f2 = b.page_facts(&PageQuery { follows_known: true, ..q }).await.expect("page_facts");
    let cleared: Vec<(UserId, tideway_core::Relation)> = f
        .relations
        .iter()
        .map(|(u, r)| (*u, tideway_core::Relation { following: false, followed_by: false, ..*r }))
        .collect();
    assert_eq!(f2.relations, cleared, "blocks and mutes told, follows not");
    let unfollowed = b.relations_unfollowed(viewer, &listed).await.expect("relations_unfollowed");
    assert_eq!(listed.iter().copied().zip(unfollowed).collect::<Vec<_>>(), cleared, "the same, asked alone");
    assert_eq!((f2.reposts, f2.hydrated), (f.reposts.clone(), f.hydrated.clone()));
    // With the viewer's own relations held by the caller: none read, the
    // rest the same.
    let f3 = b.page_facts(&PageQuery { follows_known: true, relations_known: true, ..q }).await.expect("page_facts");
    assert!(f3.relations.is_empty(), "relations known: none told");
    assert_eq!((f3.reposts, f3.inserted, f3.hydrated), (f.reposts.clone(), f.inserted.clone(), f.hydrated.clone()));

    let q = PageQuery { held: &[(x, 1), (z, 1), (y, 0), (ItemId(8999), 1)], ..Default::default() };
    let stale = b.page_facts(&q).await.expect("page_facts").stale;
    assert_eq!(stale, vec![ItemId(8999)], "copies of the stored rev (a tombstone's too) are current");

    // The item epoch, where the engine keeps one: moved by every patch and
    // delete, so copies current at it are current while it stands (and not
    // checked one by one); once it moved, each is checked again. Engines
    // without one check every copy.
    let q = PageQuery { held: &[(y, 0)], ..Default::default() };
    let before = b.page_facts(&q).await.expect("page_facts").items_epoch;
    let at = PageQuery { held_at: before, ..q };
    assert!(b.page_facts(&at).await.expect("page_facts").stale.is_empty(), "unchanged: current");
    b.update_item(y, &ItemChange::Patch { body: None, visibility: None }).await.expect("patch").expect("exists");
    let f = b.page_facts(&at).await.expect("page_facts");
    assert_eq!(f.stale, vec![y], "a copy from before a patch is stale, whatever epoch it is sent with");
    match (before, f.items_epoch) {
        (Some(e0), Some(e1)) => assert!(e1 > e0 && e0 > 0, "a patch moves the epoch: {e0} -> {e1}"),
        (None, None) => {}
        other => panic!("an engine keeps an item epoch or not: {other:?}"),
    }
    let held_now = [(y, 1)];
    let now = PageQuery { held: &held_now, held_at: f.items_epoch, ..Default::default() };
    assert!(b.page_facts(&now).await.expect("page_facts").stale.is_empty(), "the new copy is current");
    assert_eq!(b.page_facts(&now).await.expect("page_facts").items_epoch, f.items_epoch, "reads do not move it");

    // Without a viewer: no relations, counts without marks.
    let q = PageQuery { originals: &[x], reposters: &[a3], hydrate: &[x], related: &related, ..Default::default() };
    let f = b.page_facts(&q).await.expect("page_facts");
    assert_eq!((f.relations.len(), f.inserted.len()), (0, 0));
    assert_eq!(f.reposts, vec![vec![(a3, ItemId(8003))]]);
    assert_eq!(f.hydrated[0].1, None, "no viewer, no marks");
    assert_eq!(b.page_facts(&PageQuery::default()).await.expect("empty"), tideway_store::PageFacts::default());

    // The version of a followee set and own relations, where the engine
    // keeps one: read with them, told by the page's call, moved by every
    // change of them (a block removes follows both ways and changes both
    // users' blocks; a mute the muter's; an insertion its owner's) and by
    // nothing else.
    let others = [viewer, a2, a3, a4, a5, u(6), u(77)];
    let version = |user| async move {
        let q = PageQuery { followees_of: Some(user), ..Default::default() };
        let told = b.page_facts(&q).await.expect("page_facts").followees_version;
        assert_eq!(told, b.followees_version(user).await.expect("followees_version"), "the call tells the version");
        let read = b.followees_versioned(user).await.expect("followees_versioned");
        assert_eq!(read.list, b.followees(user).await.expect("followees"), "the list of the version");
        assert_eq!(read.version, told, "read with the list");
        match &read.own {
            Some(own) => {
                let rels = b.relations_unfollowed(user, &others).await.expect("relations_unfollowed");
                for (o, r) in others.iter().zip(rels) {
                    if *o != user {
                        assert_eq!(own.relation(*o), r, "own relations of {user:?} to {o:?}");
                    }
                }
                let inserted = b.inserts(user, KeyRange::ALL, Direction::Older, 1).await.expect("inserts");
                assert_eq!(own.inserts, !inserted.is_empty(), "whether {user:?} has insertions");
            }
            None => assert_eq!(read.version, None, "own relations are read where a version is kept"),
        }
        (read.version, read.own)
    };
    let (v0, own) = version(viewer).await;
    if v0.is_some() {
        let own = own.expect("few relations: read");
        assert!(own.mutes.contains(&a5) && own.blocked_by.contains(&a4) && own.inserts, "{own:?}");
        b.set_mute(viewer, a4, true, Millis(5)).await.expect("mute");
        let (v1, own) = version(viewer).await;
        assert_ne!(v1, v0, "a mute moves it");
        assert!(own.expect("read").mutes.contains(&a4));
        b.follow_many(a4, &[a5], Millis(5), 100).await.expect("someone else follows");
        b.set_mute(a4, viewer, true, Millis(5)).await.expect("someone else mutes");
        assert_eq!(version(viewer).await.0, v1, "another's follow or mute leaves it");
        b.follow_many(viewer, &[u(6)], Millis(6), 100).await.expect("follow");
        let v2 = version(viewer).await.0;
        assert_ne!(v2, v1, "a follow moves it");
        assert!(b.unfollow(viewer, u(6)).await.expect("unfollow"));
        let v3 = version(viewer).await.0;
        assert!(![v0, v1, v2].contains(&v3), "an unfollow moves it, never back to an earlier one");
        let v4 = version(a2).await.0;
        b.set_block(viewer, a2, true, Millis(7)).await.expect("block");
        assert_ne!(version(viewer).await.0, v3, "a block moves the blocker's");
        let (v5, own) = version(a2).await;
        assert_ne!(v5, v4, "... and the blocked one's");
        assert!(own.expect("read").blocked_by.contains(&viewer));
        b.set_block(viewer, a2, false, Millis(8)).await.expect("unblock");
        assert_ne!(version(a2).await.0, v5, "an unblock moves it");
        let (v6, own) = version(a3).await;
        assert!(!own.expect("read").inserts);
        b.insert_home(a3, y, 8011).await.expect("insert");
        let (v7, own) = version(a3).await;
        assert!(v7 != v6 && own.expect("read").inserts, "an insertion moves its owner's");
        assert_eq!(version(u(4321)).await, (Some(0), Some(Default::default())), "a user never seen is at version 0");
    } else {
        assert_eq!(version(u(4321)).await, (None, None), "an engine keeps a version for everyone or no one");
    }
    assert!(b.page_facts(&PageQuery::default()).await.expect("empty").promotions.is_none(), "not asked");

    // The running promotions, asked with the page's facts.
    let p = |id: u64, starts: i64, ends: i64| tideway_store::Promotion {
        id,
        item: x,
        every: 4,
        starts_at: Millis(starts),
        ends_at: Millis(ends),
    };
    for q in [p(8102, 100, 300), p(8101, 150, 250), p(8103, 400, 500)] {
        b.create_promotion(q).await.expect("promotion");
    }
    let at = |t: i64| async move {
        let q = PageQuery { originals: &[x], promotions_at: Some(Millis(t)), ..Default::default() };
        let told = b.page_facts(&q).await.expect("page_facts").promotions.expect("asked");
        assert_eq!(told, b.active_promotions(Millis(t)).await.expect("active"), "the call tells the running ones");
        told
    };
    assert_eq!(at(200).await, vec![p(8101, 150, 250), p(8102, 100, 300)], "running at 200, by id");
    assert_eq!(at(250).await, vec![p(8102, 100, 300)], "the end is exclusive");
    assert!(at(99).await.is_empty());
}
