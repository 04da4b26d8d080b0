//! What is read does not stay resident beyond the budgets.
//!
//! Items: two stores, of 20,000 and of 100,000 items with 2 KiB bodies, are
//! each opened in a process of their own under a 1 MiB cache and every
//! record and body is read once; the difference between the two processes'
//! growth, per extra item, must stay within 64 bytes.
//!
//! The index: two stores of 10,000 and 50,000 authors with ten posts each
//! are opened under a 1 MiB index budget and every author's counters and
//! outbox are loaded; the growth per extra author must stay within 64 bytes,
//! 6.4 per stored item (held, they take over 500 bytes each; what remains is
//! the engine's filters and indexes of the larger store).
//!
//! (Differencing two sizes removes what does not depend on the number of
//! items: the caches, the allocator's arenas, the engine's threads.) This
//! test binary is its own child process, running the ignored helpers.

use std::path::Path;
use std::process::Command;
use tideway_core::{Item, ItemId, ItemKind, UserId};
use tideway_store::Items;

/// Resident set size of this process, in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * 4096
}

const SMALL: u64 = 20_000;
const LARGE: u64 = 100_000;
const BODY: usize = 2048;
const CACHE: u64 = 1 << 20;
const INDEX: u64 = 1 << 20;
const AUTHORS_SMALL: u64 = 10_000;
const AUTHORS_LARGE: u64 = 50_000;
const POSTS_EACH: u64 = 10;
const DIR_VAR: &str = "TIDEWAY_RESIDENT_DIR";
const N_VAR: &str = "TIDEWAY_RESIDENT_ITEMS";

fn id(i: u64) -> ItemId {
    ItemId((i + 1_000_000) << 22)
}

fn fixture() -> (String, u64) {
    let dir = std::env::var(DIR_VAR).expect("fixture directory");
    let n = std::env::var(N_VAR).ok().and_then(|n| n.parse().ok()).expect("item count");
    (dir, n)
}

/// Imports `n` items made by `make` into the fixture's directory.
fn import(dir: &str, n: u64, make: impl Fn(u64) -> Item) {
    let mut importer = tideway_store_fjall::Importer::open(Path::new(dir)).expect("open");
    let all: Vec<u64> = (0..n).collect();
    for chunk in all.chunks(1000) {
        let items: Vec<Item> = chunk.iter().map(|&i| make(i)).collect();
        importer.write_items(&items).expect("write");
    }
    importer.finish().expect("durable");
}

/// Opens the fixture's directory under the small cache.
fn open_small(dir: &str) -> tideway_store::Store<tideway_store_fjall::FjallJournal> {
    tideway_store_fjall::open_cached(Path::new(dir), tideway_store_fjall::SyncMode::Buffer, 800, CACHE).expect("open")
}

/// Tells the parent process how much this one grew since `before`.
fn report(before: u64) {
    #[allow(clippy::print_stdout, reason = "the parent process reads the figure from standard output")]
    {
        println!("GREW {}", rss().saturating_sub(before));
    }
}

#[test]
#[ignore = "a helper of items_stay_on_disk_under_a_small_cache"]
fn write_fixture() {
    let (dir, n) = fixture();
    let text = "x".repeat(BODY);
    import(&dir, n, |i| {
        let mut body = serde_json::Map::new();
        body.insert("text".into(), serde_json::Value::String(text.clone()));
        Item {
            body: tideway_core::Body::new(&body),
            tags: vec!["rust".into()],
            ..Item::new(id(i + 1), UserId((i + 1) % 100 + 1), ItemKind::Post)
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper of items_stay_on_disk_under_a_small_cache"]
async fn measure_fixture() {
    let (dir, n) = fixture();
    let before = rss();
    let store = open_small(&dir);
    assert_eq!(store.state().counters.items_live, n, "every item is counted without being loaded");
    // Read every record and body once: they pass through the small caches.
    let all: Vec<u64> = (1..=n).collect();
    for chunk in all.chunks(100) {
        let ids: Vec<ItemId> = chunk.iter().map(|i| id(*i)).collect();
        let keys: Vec<u64> = ids.iter().map(|i| i.0).collect();
        let records = store.records(&keys).await.expect("records");
        assert!(records.iter().all(|r| matches!(r, Some(tideway_store::Record::Item(i)) if i.tags == ["rust"])));
        let bodies = store.bodies(&ids).await.expect("bodies");
        assert!(
            bodies
                .iter()
                .all(|b| b.as_ref().is_some_and(|b| b.to_map()["text"].as_str().is_some_and(|t| t.len() == BODY)))
        );
    }
    let (_, cached) = store.cache_usage();
    assert!(cached <= CACHE, "the cache holds {cached} bytes");
    report(before);
}

#[test]
#[ignore = "a helper of loaded_units_stay_within_the_index_budget"]
fn write_authors_fixture() {
    let (dir, n) = fixture();
    import(&dir, n * POSTS_EACH, |i| Item::new(id(i), UserId(i % n + 1), ItemKind::Post));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a helper of loaded_units_stay_within_the_index_budget"]
async fn measure_authors_fixture() {
    use tideway_core::merge::{Direction, KeyRange};
    use tideway_store::Graph;
    let (dir, n) = fixture();
    let before = rss();
    let store = open_small(&dir).with_index_budget(INDEX);
    for u in 1..=n {
        let user = UserId(u);
        assert_eq!(store.counts(user).await.expect("counts").items, POSTS_EACH, "user {u}");
        let keys = store.outbox_merge(&[user], KeyRange::ALL, Direction::Older, 20).await.expect("outbox");
        assert_eq!(keys.len() as u64, POSTS_EACH, "user {u}");
    }
    let ix = store.index_stats().expect("a lazy index");
    assert!(ix.evictions > 0 && ix.bytes <= 2 * INDEX, "{ix:?}");
    report(before);
}

/// Runs one helper of this binary in a child process; its standard output.
fn child(helper: &str, dir: &Path, n: u64) -> String {
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", helper, "--ignored", "--nocapture", "--test-threads", "1"])
        .env(DIR_VAR, dir)
        .env(N_VAR, n.to_string())
        // One malloc arena: the blocking pool grows with the machine's load, and
        // each new thread's arena would otherwise show as growth.
        .env("MALLOC_ARENA_MAX", "1")
        .output()
        .expect("run a helper");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{helper} failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn growth(write: &str, measure: &str, n: u64) -> u64 {
    let dir = tempfile::tempdir().expect("tempdir");
    child(write, dir.path(), n);
    let out = child(measure, dir.path(), n);
    out.split("GREW ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("no measurement in {out:?}"))
}

#[test]
fn items_stay_on_disk_under_a_small_cache() {
    let small = growth("write_fixture", "measure_fixture", SMALL);
    let large = growth("write_fixture", "measure_fixture", LARGE);
    let per_item = large.saturating_sub(small) / (LARGE - SMALL);
    eprintln!("grew {small} bytes with {SMALL} items, {large} with {LARGE}: {per_item} bytes per extra item");
    // Held in memory, the bodies alone would be over 2 KiB an item, and the
    // records of the previous format ~400 bytes.
    assert!(per_item <= 64, "{per_item} bytes resident per item");
}

#[test]
fn loaded_units_stay_within_the_index_budget() {
    let (s, l) = (AUTHORS_SMALL, AUTHORS_LARGE);
    // The least of two runs of each: a run beside a loaded machine (the
    // whole suite) once measured 71 bytes an author where alone it measures
    // 13-17, the engine's background work holding memory at the sample.
    let least = |n| (0..2).map(|_| growth("write_authors_fixture", "measure_authors_fixture", n)).min().unwrap_or(0);
    let (small, large) = (least(s), least(l));
    let per_author = large.saturating_sub(small) / (l - s);
    eprintln!("grew {small} bytes with {s} authors loaded, {large} with {l}: {per_author} bytes per extra author");
    assert!(per_author <= 64, "{per_author} bytes resident per author loaded");
}
