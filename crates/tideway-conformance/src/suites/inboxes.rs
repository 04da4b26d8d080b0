//! The `inboxes` suite.

#[allow(unused_imports)]
use crate::prelude::*;

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
