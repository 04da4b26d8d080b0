//! Item bodies are not resident: 20,000 items with 4 KiB bodies, written and
//! reopened under a 256 KiB body cache, grow the process by far less than
//! their bodies. (Each test binary runs in a process of its own under
//! nextest, so the resident size is this test's.)

use std::sync::Arc;
use tideway_core::{Item, ItemId, ItemKind, UserId};
use tideway_store::Items;

/// Resident set size of this process, in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * 4096
}

const ITEMS: u64 = 20_000;
const BODY: usize = 4096;

fn id(i: u64) -> ItemId {
    ItemId((i + 1_000_000) << 22)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stay_on_disk_under_a_small_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = "x".repeat(BODY);
    {
        let importer = tideway_store_fjall::Importer::open(dir.path()).expect("open");
        // Small batches: the writer's own peak stays small, so the resident
        // size measured below is the store's, not memory freed by the writer.
        let all: Vec<u64> = (1..=ITEMS).collect();
        for chunk in all.chunks(200) {
            let items: Vec<Item> = chunk
                .iter()
                .map(|&i| {
                    let mut body = serde_json::Map::new();
                    body.insert("text".into(), serde_json::Value::String(text.clone()));
                    Item { body: Arc::new(body), ..Item::new(id(i), UserId(i % 100 + 1), ItemKind::Post) }
                })
                .collect();
            importer.write_items(&items).expect("write");
        }
        importer.finish().expect("durable");
    }
    let before = rss();
    let store = tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, 800)
        .expect("open")
        .with_body_cache(256 << 10);
    // Read every body once: they pass through the small cache.
    let all: Vec<u64> = (1..=ITEMS).collect();
    for chunk in all.chunks(100) {
        let ids: Vec<ItemId> = chunk.iter().map(|i| id(*i)).collect();
        let bodies = store.bodies(&ids).await.expect("bodies");
        assert!(bodies.iter().all(|b| b.as_ref().is_some_and(|b| b["text"].as_str().is_some_and(|t| t.len() == BODY))));
    }
    let per_item = rss().saturating_sub(before) / ITEMS;
    let (_, cached) = store.body_cache_usage();
    eprintln!("{per_item} bytes resident per item; {cached} bytes of bodies cached");
    assert!(cached <= 256 << 10, "the cache holds {cached} bytes");
    // Held in memory, the bodies alone would be over 4 KiB an item.
    assert!(per_item < 1024, "{per_item} bytes resident per item");
}
