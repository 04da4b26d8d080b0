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

mod formats;
mod loading;
mod memtables;

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
