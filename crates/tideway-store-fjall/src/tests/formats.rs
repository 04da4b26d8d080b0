//! The directory: one process at a time, formats refused or migrated in
//! place, imports cut short and the indexes derived after them.

use super::*;

#[test]
fn a_second_process_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _a = open(dir.path(), SyncMode::Buffer, 10).expect("open");
    match open(dir.path(), SyncMode::Buffer, 10) {
        Err(e @ tideway_store::StoreError::Config { .. }) => {
            assert!(e.to_string().contains("storage.data_dir") && e.to_string().contains("in use"), "{e}")
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a second process opened the same directory"),
    }
}

#[test]
fn a_directory_of_another_format_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Database::builder(dir.path()).open().expect("fjall");
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
        meta.insert("format", "tideway-1").expect("insert");
        db.persist(PersistMode::SyncAll).expect("persist");
    }
    let err = open(dir.path(), SyncMode::Buffer, 10).map(|_| ()).expect_err("refused");
    let msg = err.to_string();
    assert!(msg.contains("tideway-1") && msg.contains("tideway-5"), "{msg}");
}

#[tokio::test]
async fn a_tideway_2_directory_is_migrated_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut body = serde_json::Map::new();
    body.insert("text".into(), serde_json::json!("old"));
    let original = Item { body: tideway_core::Body::new(&body), ..post(100, 1) };
    let reply = Item { reply_to: Some(ItemId(100)), idempotency_key: None, ..post(101, 2) };
    let repost = Item { repost_of: Some(ItemId(100)), kind: ItemKind::Repost, idempotency_key: None, ..post(102, 3) };
    {
        // The previous format: whole items, nothing else.
        let db = Database::builder(dir.path()).open().expect("fjall");
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
        let items = db.keyspace("items", KeyspaceCreateOptions::default).expect("items");
        meta.insert("format", "tideway-2").expect("format");
        for i in [&original, &reply, &repost] {
            items.insert(i.id.0.to_be_bytes(), serde_json::to_vec(i).expect("json")).expect("item");
        }
        db.persist(PersistMode::SyncAll).expect("persist");
    }
    for _ in 0..2 {
        let s = open(dir.path(), SyncMode::Buffer, 10).expect("open migrates");
        assert_eq!(s.stats().await.expect("stats").items, 3);
        let h = s.hydration(&[ItemId(100)], Some(UserId(3))).await.expect("hydration");
        assert_eq!((h[0].0.replies, h[0].0.reposts), (1, 1));
        assert_eq!(h[0].1.as_ref().map(|m| m.reposted), Some(true));
        assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(tideway_core::Body::new(&body))]);
        match s.records(&[100]).await.expect("records").pop().flatten() {
            Some(Record::Item(i)) => assert_eq!(i.tags, ["rust"]),
            other => panic!("{other:?}"),
        }
        assert_eq!(s.journal().idempotent(UserId(1), "k1").expect("read"), Some(ItemId(100)));
        assert_eq!(s.counts(UserId(2)).await.expect("counts").items, 1);
        let rust = tideway_core::PostingFeed::Tag("rust".into()).id();
        let posted = s.postings(rust, KeyRange::ALL, Direction::Older, 10).await.expect("postings");
        assert_eq!(posted, vec![101, 100], "posted by the migration; the repost is not");
    }
}

/// A `tideway-4` directory (everything but postings) is migrated in place:
/// the stored items are posted to their feeds, once, and later writes post
/// as they go.
#[tokio::test]
async fn a_tideway_4_directory_gets_its_postings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let feed = tideway_core::PostingFeed::Mentions(UserId(7)).id();
    {
        let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
        for id in [100, 101] {
            let item = Item { mentions: vec![UserId(7)], idempotency_key: None, ..post(id, 1) };
            s.create_item(item, false, Millis(1)).await.expect("create");
        }
    }
    {
        // As a tideway-4 build left it: no postings.
        let db = Database::builder(dir.path()).open().expect("fjall");
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
        let postings = db.keyspace("postings", KeyspaceCreateOptions::default).expect("postings");
        let keys: Vec<_> = postings.iter().map(|g| g.key().expect("key")).collect();
        assert_eq!(keys.len(), 4, "two items, each in its mention and tag feeds");
        for k in keys {
            postings.remove(k).expect("remove");
        }
        meta.insert("format", "tideway-4").expect("format");
        db.persist(PersistMode::SyncAll).expect("persist");
    }
    for round in 0..2 {
        let s = open(dir.path(), SyncMode::Buffer, 10).expect("open migrates");
        let want: Vec<Key> = if round == 0 { vec![101, 100] } else { vec![102, 101, 100] };
        assert_eq!(s.postings(feed, KeyRange::ALL, Direction::Older, 10).await.expect("postings"), want);
        if round == 0 {
            let item = Item { mentions: vec![UserId(7)], idempotency_key: None, ..post(102, 2) };
            s.create_item(item, false, Millis(2)).await.expect("create");
        }
    }
}

/// An import is cut before `finish` (which writes the counters): the
/// next open finds the mark and rebuilds them from what was written.
#[tokio::test]
async fn an_import_cut_before_it_finished_is_counted_at_the_next_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
        s.follow_many(UserId(9), &[UserId(1)], Millis(1), 10).await.expect("follow");
    }
    {
        let mut im = Importer::open(dir.path()).expect("importer");
        assert!(im.has_edges().expect("edges"));
        assert_eq!(im.existing(UserId(9)).expect("existing").following, [UserId(1)].into());
        im.ingest_follows(&[(UserId(2), UserId(1)), (UserId(3), UserId(1))], Millis(5), &mut |_| {}).expect("follows");
        im.write_items(&[post(100, 1), Item { idempotency_key: None, ..post(101, 1) }]).expect("items");
        // Dropped without `finish`.
    }
    let s = open(dir.path(), SyncMode::Buffer, 10).expect("open rebuilds");
    let stats = s.stats().await.expect("stats");
    assert_eq!((stats.users, stats.items, stats.follows, stats.max_key), (4, 2, 3, 101));
    assert_eq!(
        s.counts(UserId(1)).await.expect("counts"),
        tideway_store::UserCounts { following: 0, followers: 3, items: 2 }
    );
    assert_eq!(followers(&s, 1).await, vec![2, 3, 9]);
}

/// A `tideway-3` directory (no reverse edges, counters or per-user
/// insertions) gets them at open; so does one whose import was cut.
#[tokio::test]
async fn derived_indexes_are_built_for_format_3_and_after_a_cut_import() {
    for case in ["format 3", "interrupted import"] {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
            s.create_item(post(100, 1), false, Millis(1)).await.expect("create");
            s.follow_many(UserId(3), &[UserId(1), UserId(2)], Millis(5), 10).await.expect("follow");
            s.follow_many(UserId(4), &[UserId(1)], Millis(6), 10).await.expect("follow");
            s.set_block(UserId(5), UserId(1), true, Millis(7)).await.expect("block");
            s.insert_home(UserId(3), ItemId(100), 200).await.expect("insert");
        }
        {
            // Take the derived keyspaces away, as in a directory of
            // format 3 (or, for the cut import, leave them half written).
            let db = Database::builder(dir.path()).open().expect("fjall");
            let meta = db.keyspace("meta", KeyspaceCreateOptions::default).expect("meta");
            for name in ["edges_in", "users", "user_inserts"] {
                let ks = db.keyspace(name, KeyspaceCreateOptions::default).expect("keyspace");
                let keys: Vec<_> = ks.iter().map(|g| g.key().expect("key")).collect();
                for k in keys.iter().skip(usize::from(case == "interrupted import")) {
                    ks.remove(k.clone()).expect("remove");
                }
            }
            meta.remove("counters").expect("counters");
            match case {
                "format 3" => meta.insert("format", "tideway-3").expect("format"),
                _ => meta.insert("rebuild", "import").expect("mark"),
            }
            db.persist(PersistMode::SyncAll).expect("persist");
        }
        let s = open(dir.path(), SyncMode::Buffer, 10).expect("open rebuilds");
        let stats = s.stats().await.expect("stats");
        assert_eq!((stats.users, stats.items, stats.follows, stats.max_key), (5, 1, 3, 200), "{case}");
        assert_eq!(followers(&s, 1).await, vec![3, 4], "{case}");
        assert_eq!(
            s.counts(UserId(1)).await.expect("counts"),
            tideway_store::UserCounts { following: 0, followers: 2, items: 1 }
        );
        assert!(s.relations(UserId(1), &[UserId(5)]).await.expect("relations")[0].blocked_by, "{case}");
        assert_eq!(s.inserted_keys(UserId(3), &[ItemId(100)]).await.expect("inserted"), vec![Some(200)], "{case}");
        let reopened = {
            drop(s);
            open(dir.path(), SyncMode::Buffer, 10).expect("reopen")
        };
        assert_eq!(reopened.journal().meta.get("rebuild").expect("meta"), None, "{case}: the mark is gone");
    }
}
