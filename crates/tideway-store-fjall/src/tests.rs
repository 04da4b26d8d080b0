//! Tests of the whole store over this journal: each opens a directory
//! through [`crate::open`] (or the [`Importer`]) and goes through the
//! store's API, most across a reopen.

use crate::{FjallJournal, Importer, SyncMode, open};
use fjall::{Database, KeyspaceCreateOptions, PersistMode};
use std::sync::Arc;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Item, ItemId, ItemKind, Key, Millis, UserId};
use tideway_store::{
    Disk, FollowStatus, Graph, Items, JobProgress, Jobs, Journal, ListKind, Postings, Promotion, Record, Store,
};

fn post(id: u64, author: u64) -> Item {
    Item {
        tags: vec!["rust".into()],
        idempotency_key: Some("k1".into()),
        ..Item::new(ItemId(id), UserId(author), ItemKind::Post)
    }
}

async fn outbox(s: &Store<FjallJournal>, u: u64) -> Vec<Key> {
    s.outbox_merge(&[UserId(u)], KeyRange::ALL, Direction::Older, 1000).await.expect("outbox")
}

async fn followers(s: &Store<FjallJournal>, u: u64) -> Vec<u64> {
    let mut v: Vec<u64> =
        s.list(UserId(u), ListKind::Followers, None, 100_000).await.expect("list").iter().map(|(f, _)| f.0).collect();
    v.sort_unstable();
    v
}

#[tokio::test]
async fn everything_written_is_there_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
        s.create_item(post(100, 1), true, Millis(1)).await.expect("create");
        s.create_item(post(101, 2), true, Millis(2)).await.expect("create");
        s.update_item(ItemId(101), &tideway_store::ItemChange::Delete).await.expect("delete");
        let st = s.follow_many(UserId(3), &[UserId(1), UserId(2)], Millis(5), 10).await.expect("follow");
        assert_eq!(st, vec![FollowStatus::Followed(Millis(5)); 2]);
        s.unfollow(UserId(3), UserId(2)).await.expect("unfollow");
        s.set_block(UserId(4), UserId(1), true, Millis(6)).await.expect("block");
        s.insert_home(UserId(3), ItemId(100), 200).await.expect("insert");
        let recorded = s
            .advance(1, &[JobProgress::Checkpoint(100, (Millis(5), UserId(3))), JobProgress::Complete(101)])
            .await
            .expect("advance");
        assert_eq!(recorded, vec![true, true]);
        s.set_reaction(ItemId(100), UserId(5), "like", true, &[]).await.expect("react");
        s.set_reaction(ItemId(100), UserId(6), "like", true, &[]).await.expect("react");
        s.set_reaction(ItemId(100), UserId(6), "like", false, &[]).await.expect("unreact");
        s.set_reaction(ItemId(100), UserId(6), "x_wow", true, &[]).await.expect("react");
        let p = Promotion { id: 300, item: ItemId(100), every: 5, starts_at: Millis(1), ends_at: Millis(9) };
        s.create_promotion(p).await.expect("promotion");
    }
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    {
        let st = s.state();
        assert!(st.users.is_empty() && st.items_loaded.is_empty(), "start-up loads no user and no item");
        assert!(!st.records.contains_key(&100), "items are not loaded at start");
        assert!(st.idempotency.is_empty(), "durable idempotency keys stay on disk");
    }
    match s.records(&[101]).await.expect("records").pop().flatten() {
        Some(Record::Item(i)) => assert!(i.deleted && i.tags == ["rust"]),
        other => panic!("the tombstone is stored: {other:?}"),
    }
    let item100 = match s.records(&[100]).await.expect("records").pop().flatten() {
        Some(Record::Item(i)) => i,
        other => panic!("item 100: {other:?}"),
    };
    assert_eq!(
        s.create_item(post(102, 1), false, Millis(3)).await.expect("idempotent"),
        tideway_store::CreateOutcome::Existing(item100),
        "the idempotency key of item 100 is known after a restart"
    );
    let stats = s.stats().await.expect("stats");
    assert_eq!((stats.users, stats.items, stats.follows, stats.max_key), (4, 1, 1, 300), "reactions name no user");
    assert_eq!(
        s.counts(UserId(1)).await.expect("counts"),
        tideway_store::UserCounts { following: 0, followers: 1, items: 1 }
    );
    assert_eq!(s.counts(UserId(2)).await.expect("counts").items, 0);
    assert_eq!(outbox(&s, 1).await, vec![100]);
    assert_eq!(outbox(&s, 2).await, vec![101], "a tombstone keeps its outbox place");
    assert_eq!(s.followees(UserId(3)).await.expect("followees"), vec![UserId(1)]);
    assert_eq!(followers(&s, 1).await, vec![3]);
    let rel = s.relations(UserId(4), &[UserId(1)]).await.expect("relations");
    assert!(rel[0].blocking && !rel[0].blocked_by);
    assert!(s.relations(UserId(1), &[UserId(4), UserId(3)]).await.expect("relations")[0].blocked_by);
    assert!(s.relations(UserId(1), &[UserId(3)]).await.expect("relations")[0].followed_by);
    assert_eq!(s.inserted_keys(UserId(3), &[ItemId(100)]).await.expect("inserted"), vec![Some(200)]);
    assert_eq!(s.inserts(UserId(3), KeyRange::ALL, Direction::Older, 10).await.expect("inserts"), vec![200]);
    match s.records(&[200]).await.expect("records").pop().flatten() {
        Some(Record::Insert { user, item, .. }) => assert_eq!((user, item), (UserId(3), ItemId(100))),
        other => panic!("the insertion record: {other:?}"),
    }
    let jobs = s.pending_jobs(10).await.expect("jobs");
    assert_eq!(jobs.iter().map(|j| (j.key, j.cursor)).collect::<Vec<_>>(), vec![(100, Some((Millis(5), UserId(3))))]);
    let h = s.hydration(&[ItemId(100)], Some(UserId(6))).await.expect("hydration");
    assert_eq!(h[0].0.reactions, vec![("like".into(), 1), ("x_wow".into(), 1)]);
    assert_eq!(h[0].1.as_ref().map(|m| m.reactions.clone()), Some(vec!["x_wow".to_owned()]));
    assert_eq!(s.active_promotions(Millis(5)).await.expect("promotions").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_share_syncs_and_lose_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = std::sync::Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("open"));
        s.create_item(post(100, 1), false, Millis(1)).await.expect("create");
        let writers: Vec<_> = (0..8u64)
            .map(|t| {
                let s = s.clone();
                tokio::spawn(async move {
                    for i in 0..100u64 {
                        let user = UserId(1000 * (t + 1) + i);
                        // Each like with its notification: journaled together, one wait.
                        let note = tideway_core::notify::Op::Stand {
                            notice: tideway_core::notify::Notice {
                                user: UserId(1),
                                verb: tideway_core::notify::Verb::Reaction { item: ItemId(100), kind: "like".into() },
                                actor: user,
                                at: Millis(10),
                                stands: true,
                                about: Some(ItemId(100)),
                            },
                            open: 5000,
                        };
                        s.set_reaction(ItemId(100), user, "like", true, &[note]).await.expect("react");
                        s.follow_many(user, &[UserId(1)], Millis(2), 10).await.expect("follow");
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.expect("writer");
        }
        // Every write was acknowledged, so every ticket issued is durable
        // (before the close, which syncs whatever is left).
        let next = s.journal().write(&[]).expect("an empty batch");
        assert!(s.journal().durable() >= next - 1, "acknowledged writes are durable when acknowledged");
    }
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    let h = s.hydration(&[ItemId(100)], None).await.expect("hydration");
    assert_eq!(h[0].0.reactions, vec![("like".into(), 800)]);
    let notes = tideway_store::Notifications::notifications(&s, UserId(1), None, 10).await.expect("notifications");
    assert_eq!(notes.groups.iter().map(|g| (g.id, g.actor_count)).collect::<Vec<_>>(), vec![(5000, 800)]);
    assert_eq!(s.counts(UserId(1)).await.expect("counts").followers, 800);
    assert_eq!(followers(&s, 1).await.len(), 800);
}

/// Units load while writes to them are in flight: a load that read the
/// disk before a write it skipped was durable must not install (it reads
/// again), so the index never misses an acknowledged write. Each round
/// reopens the store (nothing loaded), then runs writers to one user's
/// followers, outbox and item links beside readers that load them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_loaded_under_concurrent_writes_miss_nothing() {
    concurrent_loads_and_writes(u64::MAX).await;
}

/// The same under an index budget of one byte: holders are let go between
/// a write and its fsync, and loaded again meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_let_go_under_concurrent_writes_miss_nothing() {
    concurrent_loads_and_writes(1).await;
}

async fn concurrent_loads_and_writes(budget: u64) {
    let open = |dir: &std::path::Path, sync, cap| open(dir, sync, cap).map(|s| s.with_index_budget(budget));
    let dir = tempfile::tempdir().expect("tempdir");
    let star = UserId(1);
    let mut next_id = 1000u64;
    {
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
        s.create_item(post(999, 1), false, Millis(1)).await.expect("create");
    }
    let mut fans = 0u64;
    let mut posts = 1usize;
    let mut likes = 0u64;
    for round in 0..6u64 {
        let s = std::sync::Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("reopen"));
        let mut tasks = Vec::new();
        for t in 0..4u64 {
            let s = s.clone();
            let base = 10_000 + round * 1000 + t * 100;
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    s.follow_many(UserId(base + i), &[star], Millis(2), 10).await.expect("follow");
                }
            }));
        }
        let ids: Vec<u64> = (0..20).map(|i| next_id + i).collect();
        next_id += 20;
        {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                for id in ids {
                    let mut it = Item::new(ItemId(id), star, ItemKind::Post);
                    it.reply_to = Some(ItemId(999));
                    it.reply_to_author = Some(star);
                    s.create_item(it, false, Millis(3)).await.expect("reply");
                }
            }));
        }
        // Likes by distinct users while the liked item's unit is let go
        // and loaded again: every load must hold every like acknowledged.
        for t in 0..4u64 {
            let s = s.clone();
            let base = 50_000 + round * 1000 + t * 100;
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    assert!(s.set_reaction(ItemId(999), UserId(base + i), "like", true, &[]).await.expect("like"));
                }
            }));
        }
        for _ in 0..3 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                for _ in 0..30 {
                    s.list(star, ListKind::Followers, None, 10).await.expect("list");
                    s.outbox_merge(&[star], KeyRange::ALL, Direction::Older, 5).await.expect("outbox");
                    s.hydration(&[ItemId(999)], None).await.expect("hydration");
                    tokio::task::yield_now().await;
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        fans += 100;
        posts += 20;
        likes += 100;
        assert_eq!(followers(&s, 1).await.len() as u64, fans, "round {round}: the loaded followers");
        assert_eq!(outbox(&s, 1).await.len(), posts, "round {round}: the loaded outbox");
        let h = s.hydration(&[ItemId(999)], None).await.expect("hydration");
        assert_eq!(h[0].0.replies, posts as u64 - 1, "round {round}: the loaded replies");
        assert_eq!(h[0].0.of_kind("like"), likes, "round {round}: the loaded likes");
        assert_eq!(s.counts(star).await.expect("counts").followers, fans);
        eprintln!("round {round}: loads and retries {:?}, index {:?}", s.load_counts(), s.index_stats());
    }
}

#[tokio::test]
async fn bodies_live_on_disk_and_survive_a_visibility_patch_across_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut body = serde_json::Map::new();
    body.insert("text".into(), serde_json::json!("hello"));
    {
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
        let item = Item { body: tideway_core::Body::new(&body), ..post(100, 1) };
        s.create_item(item, false, Millis(1)).await.expect("create");
        // Durable: the index keeps no record; the caches and the disk do.
        assert!(s.state().item(ItemId(100)).is_none());
        assert_eq!(s.cache_usage().0, 1);
        assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(tideway_core::Body::new(&body))]);
    }
    {
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen").with_body_cache(1 << 16);
        assert!(s.state().item(ItemId(100)).is_none(), "not loaded at start");
        match s.records(&[100]).await.expect("records").pop().flatten() {
            Some(Record::Item(i)) => {
                assert!(tideway_store::is_stripped(&i.body), "a record, read without its body")
            }
            other => panic!("{other:?}"),
        }
        let patch =
            tideway_store::ItemChange::Patch { body: None, visibility: Some(tideway_core::Visibility::Followers) };
        s.update_item(ItemId(100), &patch).await.expect("patch").expect("exists");
    }
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    let stripped = async || match s.records(&[100]).await.expect("records").pop().flatten() {
        Some(Record::Item(i)) => tideway_store::is_stripped(&i.body),
        other => panic!("{other:?}"),
    };
    assert!(stripped().await, "the record is read without its body");
    assert_eq!(
        s.bodies(&[ItemId(100)]).await.expect("bodies"),
        vec![Some(tideway_core::Body::new(&body))],
        "still on disk"
    );
    assert!(!stripped().await, "the body read once is cached with its record");
    assert_eq!(s.bodies(&[ItemId(100)]).await.expect("bodies"), vec![Some(tideway_core::Body::new(&body))]);
    assert_eq!(s.cache_usage().0, 1, "one entry: the record with its body");
}

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

/// Fan-out progress is made durable at most every 50 ms (a crash only
/// repeats deliveries), and all of it when the store closes.
#[tokio::test]
async fn fan_out_progress_written_between_syncs_is_durable_at_close() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
        s.create_item(post(100, 1), true, Millis(1)).await.expect("post");
        for f in 2..=5u64 {
            let got = s.advance(7, &[JobProgress::Checkpoint(100, (Millis(1), UserId(f)))]).await.expect("advance");
            assert_eq!(got, vec![true]);
        }
        assert!(s.journal().durable() < 5, "the later checkpoints did not wait for the disk");
    }
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    let jobs = s.pending_jobs(10).await.expect("jobs");
    assert_eq!(jobs.iter().map(|j| j.cursor).collect::<Vec<_>>(), vec![Some((Millis(1), UserId(5)))]);
}

/// The tables keep next to nothing in memory for their data outside the
/// block cache, however much there is: their filters and block indexes are
/// read through the (bounded) cache, and only a large table's top-level
/// index stays (a line per 4 KiB block of index: under a thousandth of the
/// bytes on disk). fjall's default pins the first levels' filters and
/// indexes, and a table flushed to the first level and moved down whole
/// stays pinned until a restart: that grew with every item written.
/// Measured where it grew, on an import and on a running store's own
/// flushes, then after a reopen.
#[tokio::test]
async fn the_tables_pin_nothing_however_much_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut im = Importer::open(dir.path()).expect("importer");
        let edges: Vec<(UserId, UserId)> = (0..200_000).map(|i| (UserId(i + 10), UserId(i % 97 + 1))).collect();
        im.ingest_follows(&edges, Millis(5), &mut |_| {}).expect("follows");
        im.finish().expect("finish");
    }
    let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
    let small = |s: &Store<FjallJournal>, what: &str| {
        let (pinned, disk) = (s.index_stats().expect("lazy").disk_pinned, s.journal().disk_space());
        assert!(pinned * 1000 < disk, "{what}: {pinned} bytes pinned for {disk} on disk");
    };
    small(&s, "an import's tables");
    for i in 0..3_000 {
        let item = Item { idempotency_key: None, ..post(1000 + i, i % 7 + 1) };
        s.create_item(item, false, Millis(1)).await.expect("create");
        if i % 1_000 == 999 {
            s.journal().flush_memtables().expect("flush");
        }
    }
    assert!(s.journal().table_count() > 3, "the writes were flushed to tables");
    small(&s, "with the tables flushed while it runs");
    drop(s);
    let s = open(dir.path(), SyncMode::Buffer, 10).expect("reopen");
    small(&s, "after a reopen");
}

/// A memtable past its cap is rotated by the journal's rotator thread, off
/// the write path, and written out as a table by fjall's workers, in a
/// directory whose keyspaces were made with fjall's own 64 MiB limit (as
/// before 2026-12-05); a reopen right after the store is dropped finds the
/// directory free (the thread stopped before the database closed).
#[tokio::test]
async fn full_memtables_are_rotated_off_the_write_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Database::builder(dir.path()).open().expect("fjall");
        db.keyspace("bodies", KeyspaceCreateOptions::default).expect("bodies, fjall's limit");
        db.persist(PersistMode::SyncAll).expect("persist");
    }
    // A 4 MiB cache: 1 MiB of blocks, so each memtable is capped at 1 MiB.
    let s = crate::open_cached(dir.path(), SyncMode::Buffer, 10, 4 << 20).expect("open");
    assert_eq!(s.journal().table_count(), 0);
    let mut text = serde_json::Map::new();
    text.insert("t".into(), serde_json::Value::String("x".repeat(2_000)));
    let body = tideway_core::Body::new(&text);
    for i in 0..2_000u64 {
        let item = Item { body: body.clone(), idempotency_key: None, ..post(1000 + i, 1) };
        s.create_item(item, false, Millis(1)).await.expect("create");
    }
    // ~4 MiB of bodies: rotated at least thrice, then flushed by fjall.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while s.journal().table_count() == 0 {
        assert!(std::time::Instant::now() < until, "no memtable was rotated and written out");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        s.index_stats().expect("lazy").disk_buffered < 3 << 20,
        "the bodies' memtables were let go once written out"
    );
    drop(s);
    let s = crate::open_cached(dir.path(), SyncMode::Buffer, 10, 4 << 20).expect("reopen at once");
    assert_eq!(s.bodies(&[ItemId(2999)]).await.expect("bodies"), vec![Some(body)], "the last write, read back");
}

/// Recent writes held in the memtables are counted until written out.
#[tokio::test]
async fn what_the_memtables_hold_is_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path(), SyncMode::Buffer, 10).expect("open");
    let empty = s.index_stats().expect("lazy").disk_buffered;
    for i in 0..200 {
        let item = Item { idempotency_key: None, ..post(1000 + i, 1) };
        s.create_item(item, false, Millis(1)).await.expect("create");
    }
    let written = s.index_stats().expect("lazy").disk_buffered;
    assert!(written > empty + 200 * 50, "200 items are in the memtables: {empty} then {written}");
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

/// Items created by the process are known to have no reposts, replies or
/// reactions without a read — but never one whose unit may be on disk: an
/// item with reactions stored before it was created (the store does not
/// forbid it), across a reopen and within one process after its unit was
/// let go.
#[tokio::test]
async fn fresh_items_are_empty_without_a_read_but_never_hide_what_the_disk_has() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = |id: u64| Item::new(ItemId(id), UserId(1), ItemKind::Post);
    let likes = async |s: &Store<FjallJournal>, id: u64| {
        let h = s.hydration(&[ItemId(id)], None).await.expect("hydration");
        h[0].0.reactions.iter().map(|(_, n)| *n).sum::<u64>()
    };
    {
        let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
        s.set_reaction(ItemId(500), UserId(5), "like", true, &[]).await.expect("react before the item");
        s.create_item(plain(400), false, Millis(1)).await.expect("create");
        assert!(!s.state().is_fresh(ItemId(400)), "below an id whose unit was read");
        s.create_item(plain(900), false, Millis(1)).await.expect("create");
        assert!(s.state().is_fresh(ItemId(900)));
        let loads = s.load_counts().0;
        assert_eq!(likes(&s, 900).await, 0);
        assert_eq!(s.load_counts().0, loads, "a fresh item's unit is not read");
        s.set_reaction(ItemId(900), UserId(6), "like", true, &[]).await.expect("react");
        s.set_reaction(ItemId(900), UserId(7), "like", true, &[]).await.expect("react");
        let repost = Item { repost_of: Some(ItemId(900)), ..Item::new(ItemId(901), UserId(2), ItemKind::Post) };
        s.create_item(repost, false, Millis(2)).await.expect("repost");
        assert!(!s.state().is_fresh(ItemId(900)), "written to: a loaded unit like any other");
        assert_eq!(likes(&s, 900).await, 2);
        assert_eq!(s.reposts_by(&[ItemId(900)], &[UserId(2)]).await.expect("reposts")[0].len(), 1);
        // Let go of every unit: the reaction on 950 is then only on disk,
        // and 950 was seen, so its creation does not take it as empty.
        s.set_reaction(ItemId(950), UserId(5), "like", true, &[]).await.expect("react before the item");
        s.evict_all();
        s.create_item(plain(950), false, Millis(3)).await.expect("create");
        assert!(!s.state().is_fresh(ItemId(950)));
        assert_eq!(likes(&s, 950).await, 1, "the reaction stored before the item");
    }
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    s.create_item(plain(960), false, Millis(4)).await.expect("create");
    assert!(s.state().is_fresh(ItemId(960)), "above everything stored");
    // A reaction stored before its item, found by the floor at open.
    s.set_reaction(ItemId(990), UserId(5), "like", true, &[]).await.expect("react before the item");
    drop(s);
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    s.create_item(plain(990), false, Millis(5)).await.expect("create");
    assert!(!s.state().is_fresh(ItemId(990)), "at the floor the disk gave");
    assert_eq!(likes(&s, 990).await, 1);
    assert_eq!(likes(&s, 900).await, 2);
}

/// A worker that claims and completes jobs until none is pending and the
/// posters are done; returns every key it completed, in order.
async fn drain_jobs(s: Arc<Store<FjallJournal>>, posting: Arc<std::sync::atomic::AtomicBool>) -> Vec<Key> {
    let mut done = Vec::new();
    loop {
        let jobs = s.claim_jobs(1, Millis(0), 60_000, 5).await.expect("claim");
        let progress: Vec<JobProgress> = jobs.iter().map(|j| JobProgress::Complete(j.key)).collect();
        let recorded = s.advance(1, &progress).await.expect("advance");
        assert!(recorded.iter().all(|r| *r), "every claimed job completes");
        done.extend(jobs.iter().map(|j| j.key));
        if jobs.is_empty() {
            if !posting.load(std::sync::atomic::Ordering::Acquire) && s.stats().await.expect("stats").pending_jobs == 0
            {
                return done;
            }
            tokio::task::yield_now().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_beyond_the_window_wait_on_disk_and_each_runs_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("open").with_job_window(8));
        let posting = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let worker = tokio::spawn(drain_jobs(s.clone(), posting.clone()));
        let posters: Vec<_> = (0..3u64)
            .map(|t| {
                let s = s.clone();
                tokio::spawn(async move {
                    for i in 0..150u64 {
                        s.create_item(Item { idempotency_key: None, ..post(1000 + 3 * i + t, t + 1) }, true, Millis(1))
                            .await
                            .expect("create");
                    }
                })
            })
            .collect();
        for p in posters {
            p.await.expect("poster");
        }
        assert!(s.state().jobs.held().count() <= 8, "the index holds at most the window");
        posting.store(false, std::sync::atomic::Ordering::Release);
        let mut done = worker.await.expect("worker");
        done.sort_unstable();
        assert_eq!(done, (1000..1450).collect::<Vec<Key>>(), "every job ran, once");
        // A backlog left pending: 40 jobs, nothing claimed.
        for i in 0..40u64 {
            s.create_item(Item { idempotency_key: None, ..post(2000 + i, 9) }, true, Millis(2)).await.expect("create");
        }
        let st = s.stats().await.expect("stats");
        assert_eq!(st.pending_jobs, 40);
        assert_eq!(s.state().jobs.spilled(), 32);
    }
    let s = Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("reopen").with_job_window(8));
    assert_eq!(s.stats().await.expect("stats").pending_jobs, 40, "the spilled jobs are counted at start");
    assert_eq!(s.state().jobs.held().map(|j| j.key).collect::<Vec<_>>(), (2000..2008).collect::<Vec<Key>>());
    let posting = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut done = drain_jobs(s.clone(), posting).await;
    assert_eq!(done, (2000..2040).collect::<Vec<Key>>(), "oldest key first, each once");
    done.dedup();
    assert_eq!(done.len(), 40);
}

/// Outboxes judged by their authors' counters (the newest keys kept there
/// standing in for them, the outboxes loaded only if they may place) merge
/// to what the whole outboxes do, in every range, direction and limit, from
/// a cold index and a partly loaded one, and for counters stored before the
/// newest key was kept (24 bytes) or the recent keys were (32 bytes).
#[tokio::test]
async fn outbox_merges_judged_by_the_newest_key_equal_the_whole_merge() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let authors: Vec<UserId> = (1..=40).map(UserId).collect();
    let mut all: Vec<Key> = Vec::new();
    let mut author_of = std::collections::HashMap::new();
    {
        let s = open(tmp.path(), SyncMode::Buffer, 10).expect("open");
        let mut id = 1_000;
        for round in 0..30u64 {
            for a in 1..=40u64 {
                // Authors post at rates from every round to once in 30.
                if (round * 7 + a) % (a % 30 + 1) == 0 {
                    id += 1 + (a * 13 + round) % 5;
                    let item = Item::new(ItemId(id), UserId(a), ItemKind::Post);
                    s.create_item(item, false, Millis(1)).await.expect("create");
                    all.push(id);
                    author_of.insert(id, a);
                    // Deleted items keep their place in the outbox.
                    if id % 9 == 0 {
                        s.update_item(ItemId(id), &tideway_store::ItemChange::Delete).await.expect("delete");
                    }
                }
            }
        }
    }
    {
        // Author 30's counters as stored before the newest key was kept, and
        // author 31's before the recent keys were.
        let j = FjallJournal::open(tmp.path(), SyncMode::Buffer, 1 << 20).expect("journal").0;
        for (a, len) in [(30u64, 24), (31, 32)] {
            let key = a.to_be_bytes();
            let v = j.users.get(key).expect("read").expect("the author is known");
            assert_eq!(v.len(), 33 + 8 * tideway_store::Head::RECENT, "author {a} posted more than the recent keys");
            j.users.insert(key, v[..len].to_vec()).expect("write");
        }
        j.db.persist(PersistMode::SyncAll).expect("persist");
    }
    all.sort_unstable();
    {
        // A cold first page reads the counters, and the outboxes of only
        // the authors whose kept keys may all be taken (or are not known).
        let s = open(tmp.path(), SyncMode::Buffer, 10).expect("reopen");
        let got = s.outbox_merge(&authors, KeyRange::ALL, Direction::Older, 20).await.expect("merge");
        assert_eq!(got, all.iter().rev().take(20).copied().collect::<Vec<Key>>());
        let twentieth = got[19];
        let st = s.state();
        let read: Vec<u64> =
            authors.iter().filter(|a| st.loaded(tideway_store::Unit::Outbox(**a))).map(|a| a.0).collect();
        for a in &read {
            let mut keys: Vec<Key> = all.iter().copied().filter(|k| author_of[k] == *a).collect();
            keys.reverse();
            if keys.is_empty() {
                continue; // (no counters: known to have nothing)
            }
            let may = keys.len() > tideway_store::Head::RECENT && keys[tideway_store::Head::RECENT - 1] > twentieth;
            assert!(*a == 30 || *a == 31 || may, "author {a}'s outbox was read: {keys:?}");
        }
        assert!(read.len() <= 8, "{} of 40 outboxes read: {read:?}", read.len());
    }
    let whole = |range: KeyRange, dir: Direction, limit: usize| -> Vec<Key> {
        let mut v: Vec<Key> = all.iter().copied().filter(|k| range.contains(*k)).collect();
        if dir == Direction::Older {
            v.reverse();
        }
        v.truncate(limit);
        v
    };
    let mid = all[all.len() / 2];
    let ranges = [
        KeyRange::ALL,
        KeyRange { above: None, below: Some(mid) },
        KeyRange { above: Some(mid), below: None },
        KeyRange { above: Some(all[10]), below: Some(mid) },
    ];
    for range in ranges {
        for dir in [Direction::Older, Direction::Newer] {
            for limit in [1, 5, 20, 200, 10_000] {
                let want = whole(range, dir, limit);
                let s = open(tmp.path(), SyncMode::Buffer, 10).expect("reopen");
                let got = s.outbox_merge(&authors, range, dir, limit).await.expect("merge");
                assert_eq!(got, want, "cold: {range:?} {dir:?} {limit}");
                // Partly loaded: a few outboxes read whole first.
                s.outbox_merge(&authors[..5], KeyRange::ALL, Direction::Older, 10_000).await.expect("merge");
                let again = s.outbox_merge(&authors, range, dir, limit).await.expect("merge");
                assert_eq!(again, want, "partly loaded: {range:?} {dir:?} {limit}");
                drop(s);
            }
        }
    }
}

/// An outbox longer than [`tideway_store::OUTBOX_TAIL`] loads only its
/// newest keys for a first page; merges that read past them load the rest,
/// keep what was written meanwhile, and equal the whole merge.
#[tokio::test]
async fn long_outboxes_load_their_tail_and_the_rest_when_read_past_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let tail = tideway_store::OUTBOX_TAIL as u64;
    // Authors 1 and 2 post far more than the tail, 3 and 4 a few.
    let mut all: Vec<Key> = Vec::new();
    {
        let s = open(tmp.path(), SyncMode::Buffer, 10).expect("open");
        for i in 0..(3 * tail) {
            for a in [1u64, 2, 3, 4] {
                if a <= 2 || i % 97 == 0 {
                    let id = 10_000 + i * 10 + a;
                    s.create_item(Item::new(ItemId(id), UserId(a), ItemKind::Post), false, Millis(1))
                        .await
                        .expect("create");
                    all.push(id);
                }
            }
        }
    }
    let authors = [UserId(1), UserId(2), UserId(3), UserId(4)];
    let tail_of = |s: &Store<FjallJournal>, a: u64| {
        let st = s.state();
        st.users.get(&UserId(a)).map(|u| (u.outbox.len(), u.outbox_from))
    };
    let whole = |all: &[Key], range: KeyRange, dir: Direction, limit: usize| -> Vec<Key> {
        let mut v: Vec<Key> = all.iter().copied().filter(|k| range.contains(*k)).collect();
        v.sort_unstable();
        if dir == Direction::Older {
            v.reverse();
        }
        v.truncate(limit);
        v
    };
    all.sort_unstable();
    let newest_of_1: Vec<Key> = all.iter().copied().filter(|k| k % 10 == 1).collect();
    let deep = newest_of_1[newest_of_1.len() - tail as usize - 5];
    let ranges = [
        KeyRange::ALL,
        KeyRange { above: Some(deep), below: None },
        KeyRange { above: None, below: Some(deep) },
        KeyRange { above: Some(all[3]), below: Some(deep) },
    ];
    for range in ranges {
        for dir in [Direction::Older, Direction::Newer] {
            for limit in [1, 20, 200, 10_000] {
                let s = open(tmp.path(), SyncMode::Buffer, 10).expect("reopen");
                let got = s.outbox_merge(&authors, range, dir, limit).await.expect("merge");
                assert_eq!(got, whole(&all, range, dir, limit), "cold: {range:?} {dir:?} {limit}");
            }
        }
    }
    // A budget of one byte, and users nobody follows read between the
    // merges: the authors' tails and rests are let go and loaded again.
    let s = open(tmp.path(), SyncMode::Buffer, 10).expect("reopen").with_index_budget(1);
    let mut others = (100..).map(UserId);
    for _ in 0..3 {
        for range in ranges {
            for dir in [Direction::Older, Direction::Newer] {
                for limit in [20, 10_000] {
                    let got = s.outbox_merge(&authors, range, dir, limit).await.expect("merge");
                    assert_eq!(got, whole(&all, range, dir, limit), "tiny budget: {range:?} {dir:?} {limit}");
                    // Two loads: the first finds the authors used, the second lets them go.
                    for _ in 0..2 {
                        let some: Vec<UserId> = others.by_ref().take(10).collect();
                        s.outbox_merge(&some, KeyRange::ALL, Direction::Older, 20).await.expect("merge");
                    }
                }
            }
        }
    }
    let ix = s.index_stats().expect("lazy");
    // (3 rounds × 16 merges of the authors, each after two of others)
    assert_eq!(ix.misses, 3 * 16 * 3, "every merge loaded what it read again: {ix:?}");
    drop(s);
    // A first page loads the long outboxes' tails only.
    let s = open(tmp.path(), SyncMode::Buffer, 10).expect("reopen");
    let page = s.outbox_merge(&authors, KeyRange::ALL, Direction::Older, 20).await.expect("merge");
    assert_eq!(page, whole(&all, KeyRange::ALL, Direction::Older, 20));
    let (held, from) = tail_of(&s, 1).expect("author 1's outbox is loaded");
    assert_eq!(held as u64, tail, "only the newest keys of a long outbox are loaded");
    assert_eq!(from, *newest_of_1.iter().rev().nth(tail as usize - 1).expect("long"));
    assert_eq!(tail_of(&s, 3).map(|t| t.1), Some(0), "a short outbox is loaded whole");
    // Written while only the tail is here: a newest key, and one older
    // than the tail (an item imported late keeps its id).
    for id in [900_000_001, 5_001] {
        s.create_item(Item::new(ItemId(id), UserId(1), ItemKind::Post), false, Millis(1)).await.expect("create");
        all.push(id);
    }
    all.sort_unstable();
    let two = s.outbox_merge(&authors[..1], KeyRange::ALL, Direction::Older, 2).await.expect("merge");
    let by_1: Vec<Key> = all.iter().copied().filter(|k| k % 10 == 1).collect();
    assert_eq!(two, whole(&by_1, KeyRange::ALL, Direction::Older, 2));
    assert_ne!(tail_of(&s, 1).map(|t| t.1), Some(0), "a page within the tail loads nothing more");
    // Reading past the tail loads the rest, with both writes.
    let every = s.outbox_merge(&authors, KeyRange::ALL, Direction::Older, 100_000).await.expect("merge");
    assert_eq!(every, whole(&all, KeyRange::ALL, Direction::Older, 100_000));
    assert_eq!(tail_of(&s, 1).map(|t| t.1), Some(0), "the whole outbox is here now");
    drop(s);
    let s = open(tmp.path(), SyncMode::Buffer, 10).expect("reopen");
    let every = s.outbox_merge(&authors, KeyRange::ALL, Direction::Newer, 100_000).await.expect("merge");
    assert_eq!(every, whole(&all, KeyRange::ALL, Direction::Newer, 100_000), "after a reopen");
}

/// `prepare_jobs` loads what the next step's jobs read (their authors'
/// counters and follower lists), skips the jobs a worker holds, and claims
/// nothing.
#[tokio::test]
async fn jobs_prepared_ahead_are_loaded_and_left_unclaimed() {
    use tideway_store::state::Unit;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("open");
    for (follower, author) in [(10, 1), (11, 1), (12, 2)] {
        s.follow_many(UserId(follower), &[UserId(author)], Millis(1), 10).await.expect("follow");
    }
    s.create_item(post(100, 1), true, Millis(2)).await.expect("create");
    s.create_item(Item { idempotency_key: None, ..post(101, 2) }, true, Millis(3)).await.expect("create");
    s.evict_all();
    let loaded = |u: Unit| s.state().loaded(u);
    assert!(!loaded(Unit::Followers(UserId(1))) && !loaded(Unit::Followers(UserId(2))), "nothing loaded");
    // (workers of two nodes: a later epoch of one node would take over)
    let (one, two) = (tideway_store::rules::worker_id(1, 1), tideway_store::rules::worker_id(2, 1));
    let claimed = s.claim_jobs(one, Millis(0), 60_000, 1).await.expect("claim");
    assert_eq!(claimed.iter().map(|j| j.key).collect::<Vec<_>>(), vec![100]);
    assert!(loaded(Unit::Followers(UserId(1))), "a claim loads its jobs' followers");
    assert!(!loaded(Unit::Head(UserId(2))) && !loaded(Unit::Followers(UserId(2))));
    // The next job no worker holds is author 2's (100 is held).
    s.prepare_jobs(Millis(0), 1).await.expect("prepare");
    assert!(loaded(Unit::Head(UserId(2))) && loaded(Unit::Followers(UserId(2))), "the next job's reads are in");
    let next = s.claim_jobs(two, Millis(0), 60_000, 5).await.expect("claim");
    assert_eq!(next.iter().map(|j| j.key).collect::<Vec<_>>(), vec![101], "prepared, not claimed");
}

/// Copies a directory's files (the state a crash would leave of it, as the
/// page cache holds it).
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// fjall's journal is not synced when a round is acknowledged: the sync log
/// is. A crash image whose fjall stopped early (a copy of the directory
/// taken then) with the log as it was later gets every acknowledged write
/// back, across a wrap of the log, and replays nothing twice.
#[tokio::test]
async fn rounds_fjall_lost_are_replayed_from_the_sync_log() {
    let live = tempfile::tempdir().expect("tempdir");
    let image = tempfile::tempdir().expect("tempdir");
    let image = image.path().join("data");
    let item = |id: u64| Item::new(ItemId(id), UserId(1), ItemKind::Post);
    // 2,048 one-block frames fill the log: 2,600 rounds wrap it once.
    let (before, after) = (2_600u64, 300u64);
    {
        let s = open(live.path(), SyncMode::Fsync, 10).expect("open");
        for id in 1..=before {
            s.create_item(item(id), true, Millis(id as i64)).await.expect("create");
        }
        copy_dir(live.path(), &image);
        for id in before + 1..=before + after {
            s.create_item(item(id), true, Millis(id as i64)).await.expect("create");
        }
        // The crash: fjall's files as they were at the copy, the log as
        // it is now.
        std::fs::copy(live.path().join(crate::synclog::LOG_FILE), image.join(crate::synclog::LOG_FILE))
            .expect("copy log");
    }
    let all: Vec<Key> = (1..=before + after).rev().collect();
    {
        let s = open(&image, SyncMode::Fsync, 10).expect("reopen the image");
        let keys = s.outbox_merge(&[UserId(1)], KeyRange::ALL, Direction::Older, 10_000).await.expect("outbox");
        assert_eq!(keys.len(), all.len(), "every acknowledged post is back");
        assert!(keys == all, "each in its place");
        match s.records(&[before + after]).await.expect("records").pop().flatten() {
            Some(Record::Item(i)) => assert_eq!(i.author, UserId(1)),
            other => panic!("the last post's record is back: {other:?}"),
        }
        // Written after the replay, then read across another reopen: the
        // replayed frames are not applied again over it.
        s.update_item(ItemId(before + after), &tideway_store::ItemChange::Delete).await.expect("delete");
    }
    let s = open(&image, SyncMode::Fsync, 10).expect("reopen again");
    match s.records(&[before + after]).await.expect("records").pop().flatten() {
        Some(Record::Item(i)) => assert!(i.deleted, "the delete made after the replay stands"),
        other => panic!("the record is there: {other:?}"),
    }
    let keys = s.outbox_merge(&[UserId(1)], KeyRange::ALL, Direction::Older, 10_000).await.expect("outbox");
    assert!(keys == all, "a tombstone keeps its outbox place");
}

/// Sixteen writers at once: rounds are written to the sync log together
/// and committed in order; after a reopen every acknowledged post is there,
/// and each author's counters agree with their outbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_rounds_are_committed_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (writers, each) = (16u64, 200u64);
    {
        let s = Arc::new(open(dir.path(), SyncMode::Fsync, 10).expect("open"));
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let s = s.clone();
                tokio::spawn(async move {
                    for n in 0..each {
                        let id = 1 + w * each + n;
                        let item = Item::new(ItemId(id), UserId(w + 1), ItemKind::Post);
                        s.create_item(item, true, Millis(id as i64)).await.expect("create");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("writer");
        }
    }
    let s = open(dir.path(), SyncMode::Fsync, 10).expect("reopen");
    for w in 0..writers {
        let keys = s.outbox_merge(&[UserId(w + 1)], KeyRange::ALL, Direction::Older, 1_000).await.expect("outbox");
        let want: Vec<Key> = (1 + w * each..=(w + 1) * each).rev().collect();
        assert!(keys == want, "writer {w}: {} posts of {each}, in order", keys.len());
    }
}

#[test]
fn the_journal_rotates_memtables_well_before_fjalls_limit() {
    use crate::journal::{FJALL_MEMTABLE_LIMIT, limit_key, memtable_cap, rotation_point};
    let cap = memtable_cap(32 << 20);
    assert_eq!(rotation_point(cap, Some(FJALL_MEMTABLE_LIMIT)), cap);
    assert_eq!(rotation_point(32 << 20, Some(FJALL_MEMTABLE_LIMIT)), 32 << 20, "the largest cap, too");
    assert_eq!(rotation_point(cap, Some(cap)), cap / 2, "a limit of the cap's day");
    assert_eq!(rotation_point(cap, None), cap / 2, "a keyspace made before the record");

    let dir = tempfile::tempdir().expect("tempdir");
    let names: Vec<String>;
    {
        // A new directory: every keyspace is created with fjall's limit out
        // of reach, recorded, and rotated at the cap.
        let j = FjallJournal::open(dir.path(), SyncMode::Buffer, 32 << 20).expect("journal").0;
        assert_eq!(j.rotate_at, [cap; 18]);
        names = j.keyspaces().iter().map(|k| k.name().to_string()).collect();
        for name in &names {
            let v = j.meta.get(limit_key(name)).expect("read").unwrap_or_else(|| panic!("{name} not recorded"));
            assert_eq!(u64::from_le_bytes(v[..].try_into().expect("8 bytes")), FJALL_MEMTABLE_LIMIT, "{name}");
        }
    }
    {
        // Reopened with a larger cache: still recorded, at the new cap.
        let j = FjallJournal::open(dir.path(), SyncMode::Buffer, 64 << 20).expect("journal").0;
        assert_eq!(j.rotate_at, [memtable_cap(64 << 20); 18]);
        // What a directory made before the record looks like (its keyspaces
        // hold fjall's limit of their day, unknown here).
        for name in &names {
            j.meta.remove(limit_key(name)).expect("remove");
        }
        j.db.persist(PersistMode::SyncAll).expect("persist");
    }
    {
        let j = FjallJournal::open(dir.path(), SyncMode::Buffer, 32 << 20).expect("journal").0;
        assert_eq!(j.rotate_at, [cap / 2; 18], "rotated at half the cap");
        assert!(j.meta.get(limit_key("items")).expect("read").is_none(), "nothing claims a limit it did not set");
    }
}

/// fjall runs one worker on two cores or fewer (no worker of its own
/// bouncing compactions back to the queue), and its own default beyond.
#[test]
fn fjall_runs_one_worker_on_two_cores() {
    use crate::journal::fjall_workers;
    assert_eq!([1, 2].map(fjall_workers), [Some(1), Some(1)]);
    assert_eq!([3, 4, 16].map(fjall_workers), [None, None, None], "fjall's own choice");
}
