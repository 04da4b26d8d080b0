//! The lazy index over the disk: units loaded and let go under writes,
//! fresh items, the jobs window, outbox tails and merges, prepared jobs.

use super::*;

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
