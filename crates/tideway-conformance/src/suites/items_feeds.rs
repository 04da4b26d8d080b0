//! The `items_feeds` suite.

#[allow(unused_imports)]
use crate::prelude::*;

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
