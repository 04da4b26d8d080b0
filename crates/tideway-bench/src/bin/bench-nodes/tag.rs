//! `--tag-items N`: one tag feed of N items, paged, beside the profile of one
//! of their authors, on the embedded store and on one node on SQL + Redis, in
//! one run (issue 20: "a tag with 10M items pages as fast as a profile").
//!
//! N items by 100 authors, every one tagged `big` (and none else), are
//! written through the backend (16 writers, no fan-out: the feed is pulled).
//! Then, each `--reads` times: the tag feed's first page of 20, a page of 20
//! from a cursor in the middle of the feed, and author 1's profile's first
//! page of 20 (N/100 items) — p50 / p99.

use crate::{Args, node_config, pct, shared_config};
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::time::Instant;
use tideway_core::{FeedScope, IdGenerator, Item, ItemId, ItemKind, UserId};
use tideway_engines::Opened;
use tideway_service::{FeedService, PageRequest, SystemClock};
use tideway_store::Backend;
use tideway_store_sql::testing::FreshDatabase;

const AUTHORS: u64 = 100;

struct Row {
    load_per_sec: f64,
    first: (f64, f64),
    deep: (f64, f64),
    profile: (f64, f64),
}

/// Writes `n` tagged items; their keys, ascending.
async fn load(backend: &Arc<dyn Backend>, n: u64, writers: usize) -> Result<Vec<u64>, String> {
    let ids = IdGenerator::new(7).map_err(|e| e.to_string())?;
    let now = tideway_core::Millis(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_millis()
            as i64,
    );
    let mut keys = Vec::with_capacity(n as usize);
    for _ in 0..n {
        keys.push(ids.next(now).map_err(|e| e.to_string())?);
    }
    let keys = Arc::new(keys);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (backend, keys) = (backend.clone(), keys.clone());
        tasks.push(tokio::spawn(async move {
            for (i, key) in keys.iter().enumerate().skip(w).step_by(writers) {
                let mut item = Item::new(ItemId(*key), UserId(1 + i as u64 % AUTHORS), ItemKind::Post);
                item.tags = vec!["big".to_owned()];
                backend.create_item(item, false, now).await.map_err(|e| e.to_string())?;
                if w == 0 && i % 100_000 < writers {
                    eprintln!("  {i} items written");
                }
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(Arc::try_unwrap(keys).unwrap_or_else(|k| (*k).clone()))
}

async fn measure(backend: Arc<dyn Backend>, n: u64, args: &Args) -> Result<Row, String> {
    let t = Instant::now();
    let keys = load(&backend, n, args.writers).await?;
    let load_per_sec = n as f64 / t.elapsed().as_secs_f64();
    let opts = tideway_service::ServiceOptions::new(&node_config(), backend.profile());
    let svc = FeedService::new(backend, opts, Arc::new(SystemClock)).await.map_err(|e| e.to_string())?;
    let middle = tideway_core::Cursor::new(keys[keys.len() / 2]).encode(&FeedScope::Tag("big"));
    let first = PageRequest { limit: Some(20), ..Default::default() };
    let deep = PageRequest { limit: Some(20), before: Some(middle), after: None };
    let mut hs: Vec<Histogram<u64>> =
        (0..3).map(|_| Histogram::new(3)).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    for _ in 0..args.reads {
        for (which, hist) in hs.iter_mut().enumerate() {
            let t = Instant::now();
            let page = match which {
                0 => svc.feeds.tag_feed("big", None, &first).await,
                1 => svc.feeds.tag_feed("big", None, &deep).await,
                _ => svc.feeds.profile(UserId(1), None, &first).await,
            }
            .map_err(|e| e.to_string())?;
            hist.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            if page.entries.len() != 20 {
                return Err(format!("page {which} has {} entries", page.entries.len()));
            }
        }
    }
    Ok(Row { load_per_sec, first: pct(&hs[0]), deep: pct(&hs[1]), profile: pct(&hs[2]) })
}

#[allow(clippy::print_stdout, reason = "the report is this command's output")]
pub async fn run(args: &Args, n: u64) -> Result<(), String> {
    let engine = if args.sql.starts_with("postgres") { "PostgreSQL" } else { "MariaDB/MySQL" };
    eprintln!("embedded store: {n} tagged items");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cfg = node_config();
    cfg.storage.data_dir = dir.path().to_owned();
    let emb = measure(tideway_engines::open(&cfg).await.map_err(|e| e.chain())?.backend(), n, args).await?;
    eprintln!("1 node on {engine} + Redis: {n} tagged items");
    let db = FreshDatabase::create(&args.sql).await.map_err(|e| e.to_string())?;
    let prefix = format!("benchtag{}:", std::process::id());
    let opened = tideway_engines::open(&shared_config(&db.url, &args.redis, &prefix)).await.map_err(|e| e.chain())?;
    let shared = measure(opened.backend(), n, args).await;
    if let Opened::Shared { redis, .. } = &opened {
        redis.purge().await.map_err(|e| e.to_string())?;
    }
    opened.close().await;
    db.drop().await.map_err(|e| e.to_string())?;
    let shared = shared?;
    println!("a tag feed of {n} items (100 authors), {} reads of each page; 2 cores for everything", args.reads);
    println!(
        "| backend | items written/s (16 writers) | tag first page p50 / p99 (µs) | tag page from the middle p50 / p99 | profile first page p50 / p99 | tag first / profile p50 |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, r) in [("embedded (fjall, fsync)".to_owned(), &emb), (format!("1 node, {engine} + Redis"), &shared)] {
        println!(
            "| {name} | {:.0} | {:.1} / {:.1} | {:.1} / {:.1} | {:.1} / {:.1} | ×{:.2} |",
            r.load_per_sec,
            r.first.0,
            r.first.1,
            r.deep.0,
            r.deep.1,
            r.profile.0,
            r.profile.1,
            r.first.0 / r.profile.0
        );
    }
    Ok(())
}
