//! fjall beneath the store: tables that pin nothing, memtables rotated off
//! the write path and counted, rounds replayed from the sync log, workers.

use super::*;

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
