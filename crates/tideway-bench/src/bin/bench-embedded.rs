//! The embedded store at scale, beside the all-in-memory backend, in one run:
//! a follow graph and N items with bodies are bulk-imported (as `tideway
//! import` does), the store is opened (the time until it can serve), and
//! home first pages are read by a sample of readers three times:
//!
//! 1. **cold**, right after the open: nothing of the index is loaded, no
//!    inbox exists (as after a `kill -9`), records and bodies come from disk;
//! 2. **warm**, the same readers again;
//! 3. **cold index, inboxes from the snapshot**: a clean restart (the inbox
//!    snapshot is written and read back), the index and caches empty.
//!
//! The baseline is the in-memory backend holding the same graph and items
//! (loaded through the storage API), read by the same readers: first pages
//! (inboxes rebuilt) and warm pages.
//!
//!   cargo run --release -p tideway-bench --bin bench-embedded -- \
//!       [--graph twitter] [--items 1000000] [--body-bytes 400] [--cache-size 128MiB] \
//!       [--readers 2000] [--memory-baseline true] [--drop-page-cache true] \
//!       [--postgres postgres://postgres@127.0.0.1:5432/test]
//!
//! With `--postgres`, the same follows and items are then loaded into that
//! server (the seeds' pull model, in a database of its own, dropped at the
//! end) and the same readers' first pages are read by its pull query: after
//! the load, after a restart of the server (its buffers empty, the OS page
//! cache warm), and after a restart with the OS page cache dropped.
//!
//! Start-up time of the `tideway serve` process and its resident memory per
//! item are measured by `scripts/bench-storage.sh` (a process of its own,
//! beside another build).

#![allow(clippy::print_stdout, reason = "a command whose output is its report")]

use tideway_bench::workload;

use tideway_bench::sql;

use clap::Parser;
use hdrhistogram::Histogram;
use rand::distr::{Distribution, weighted::WeightedIndex};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tideway_core::{IdGenerator, Item, ItemId, ItemKind, Millis, UserId};
use tideway_service::{FeedService, PageRequest, ServiceOptions, SystemClock};
use tideway_store::{Backend, Store};
use tideway_store_fjall::Importer;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
struct Args {
    /// `twitter`, an edge file, or `synthetic:USERS:FOLLOWS`.
    #[arg(long, default_value = "twitter")]
    graph: String,
    /// Where `twitter` and `higgs` are read from.
    #[arg(long, default_value = "../shared/data")]
    data: PathBuf,
    #[arg(long, default_value_t = 1_000_000)]
    items: u64,
    #[arg(long, default_value_t = 400)]
    body_bytes: usize,
    /// `storage.cache_size` of the embedded store.
    #[arg(long, default_value = "128MiB")]
    cache_size: String,
    /// Readers sampled (users who follow someone).
    #[arg(long, default_value_t = 2000)]
    readers: usize,
    /// Posts of each fan-out phase (0: none).
    #[arg(long, default_value_t = 20_000)]
    fanout_posts: usize,
    /// Also load everything into the in-memory backend and read it there.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    memory_baseline: bool,
    /// Seconds to wait after the open before the cold pages: fjall compacts
    /// the import's tables meanwhile (0: read at once, as right after an
    /// import). The index and caches stay empty.
    #[arg(long, default_value_t = 0)]
    settle_secs: u64,
    /// Drop the OS page cache before the cold pages (`sync`, then `3` to
    /// `/proc/sys/vm/drop_caches`; needs root), so that they read the disk,
    /// not the kernel's copy of the data directory.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    drop_page_cache: bool,
    /// A PostgreSQL server (any database's URL) to read the same data from
    /// by the seeds' pull query, cold and warm ("": none).
    #[arg(long, default_value = "")]
    postgres: String,
    /// How many of the readers (the first) read on that server: its pull
    /// sorts every item of the followed authors, ~0.1 s a page at 10M items.
    #[arg(long, default_value_t = 500)]
    postgres_readers: usize,
    /// How that server is restarted between its phases (run by `sh -c`).
    #[arg(long, default_value = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main restart")]
    postgres_restart: String,
    /// Where the data directory goes (a temporary one inside it).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).map(|kb| kb * 1024))
        })
        .unwrap_or(0)
}

fn hist() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())
}

/// (p50, p99) in µs.
fn pct(h: &Histogram<u64>) -> (f64, f64) {
    (h.value_at_quantile(0.5) as f64 / 1000.0, h.value_at_quantile(0.99) as f64 / 1000.0)
}

/// One first page (20 entries) for each reader; the latencies and the
/// entries seen.
async fn first_pages(svc: &FeedService, readers: &[UserId]) -> Result<(Histogram<u64>, usize), String> {
    let (h, entries, _) = first_pages_each(svc, readers).await?;
    Ok((h, entries))
}

/// [`first_pages`], with each reader's latency in ns, in the readers' order.
async fn first_pages_each(svc: &FeedService, readers: &[UserId]) -> Result<(Histogram<u64>, usize, Vec<u64>), String> {
    let mut h = hist()?;
    let mut entries = 0;
    let mut each = Vec::with_capacity(readers.len());
    for &u in readers {
        let t = Instant::now();
        let page = svc
            .feeds
            .home(u, &PageRequest { limit: Some(20), ..Default::default() })
            .await
            .map_err(|e| e.to_string())?;
        let ns = t.elapsed().as_nanos() as u64;
        h.record(ns).map_err(|e| e.to_string())?;
        each.push(ns);
        entries += page.entries.len();
    }
    Ok((h, entries, each))
}

/// Writes every dirty page out and drops the OS page cache (clean pages,
/// dentries and inodes), so that the next reads go to the disk.
fn drop_page_cache() -> Result<(), String> {
    let synced = std::process::Command::new("sync").status().map_err(|e| format!("sync: {e}"))?;
    if !synced.success() {
        return Err(format!("sync failed: {synced}"));
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("--drop-page-cache needs root (writing /proc/sys/vm/drop_caches: {e})"))?;
    eprintln!("OS page cache dropped");
    Ok(())
}

/// Cold latencies by the reader's followee count: one row per band
/// (readers, p50, p99, and the band's share of all the cold time).
fn by_followees(readers: &[UserId], each: &[u64], following: &HashMap<u64, u64>) -> Result<String, String> {
    let bands: [(u64, u64); 5] = [(0, 10), (11, 100), (101, 500), (501, 2000), (2001, u64::MAX)];
    let total: u64 = each.iter().sum();
    let mut out = Vec::new();
    for (lo, hi) in bands {
        let mut h = hist()?;
        let mut time = 0;
        for (u, ns) in readers.iter().zip(each) {
            let f = following.get(&u.0).copied().unwrap_or(0);
            if f >= lo && f <= hi {
                h.record(*ns).map_err(|e| e.to_string())?;
                time += ns;
            }
        }
        if !h.is_empty() {
            let (p50, p99) = pct(&h);
            let hi = if hi == u64::MAX { "…".to_owned() } else { hi.to_string() };
            out.push(format!(
                "{lo}–{hi} followees: {} readers, p50 {p50:.0} µs, p99 {p99:.0} µs, {:.0}% of the time",
                h.len(),
                100.0 * time as f64 / total.max(1) as f64
            ));
        }
    }
    Ok(out.join("; "))
}

/// Cold latencies by the reader's place in the run, in quarters: whether
/// the first readers pay for what later ones find loaded.
fn by_quarter(each: &[u64]) -> Result<String, String> {
    let q = each.len().div_ceil(4).max(1);
    let mut out = Vec::new();
    for (i, part) in each.chunks(q).enumerate() {
        let mut h = hist()?;
        for ns in part {
            h.record(*ns).map_err(|e| e.to_string())?;
        }
        let (p50, p99) = pct(&h);
        out.push(format!("readers {}–{}: p50 {p50:.0} µs, p99 {p99:.0} µs", i * q + 1, i * q + part.len()));
    }
    Ok(out.join("; "))
}

fn row(what: &str, ours: String, base: String) {
    println!("| {what} | {ours} | {base} |");
}

fn ratio(base: f64, ours: f64) -> String {
    if ours > 0.0 { format!("×{:.2}", base / ours) } else { "-".into() }
}

fn main() -> Result<(), String> {
    // Before the runtime starts its threads (mimalloc's options are not
    // synchronized).
    tideway_engines::allocator::tune();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(run())
}

async fn run() -> Result<(), String> {
    let args = Args::parse();
    let cache = tideway_config::ByteSize::parse(&args.cache_size)?.0;
    let graph = workload::Graph::parse(&args.graph)?;
    let opts = ServiceOptions { max_following: 5000, ..ServiceOptions::default() };
    let mut edges = workload::edges(&graph, &args.data, args.seed, opts.max_following)?;
    edges.sort_unstable();
    edges.dedup();
    let mut followers: HashMap<u64, u64> = HashMap::new();
    let mut following: HashMap<u64, u64> = HashMap::new();
    for &(a, b) in &edges {
        *followers.entry(b).or_default() += 1;
        *following.entry(a).or_default() += 1;
    }
    let mut users: Vec<u64> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
    users.sort_unstable();
    users.dedup();
    eprintln!(
        "{}: {} users, {} follows; {} items of {} B",
        graph.describe(),
        users.len(),
        edges.len(),
        args.items,
        args.body_bytes
    );

    // Items: authors in proportion to their followers, one a millisecond,
    // ending now.
    let weights: Vec<u64> = users.iter().map(|u| followers.get(u).copied().unwrap_or(0).max(1)).collect();
    let dist = WeightedIndex::new(&weights).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let ids = IdGenerator::new(0).map_err(|e| e.to_string())?;
    let start = Millis::now().0 - args.items as i64 - 1000;
    let text = "x".repeat(args.body_bytes);
    let make = |i: u64, rng: &mut StdRng| -> Result<Item, String> {
        let author = UserId(users[dist.sample(rng)]);
        let id = ids.at(Millis(start + i as i64)).map_err(|e| e.to_string())?;
        let mut body = serde_json::Map::new();
        body.insert("text".into(), serde_json::Value::String(text.clone()));
        Ok(Item { body: tideway_core::Body::new(&body), ..Item::new(ItemId(id), author, ItemKind::Post) })
    };

    // ------------------------------------------------------------ import
    let dir = tempfile::tempdir_in(&args.dir).map_err(|e| e.to_string())?;
    let follows: Vec<(UserId, UserId)> = edges.iter().map(|&(a, b)| (UserId(a), UserId(b))).collect();
    let t = Instant::now();
    let mut importer = Importer::open(dir.path()).map_err(|e| e.to_string())?;
    importer.ingest_follows(&follows, Millis(start), &mut |_| {}).map_err(|e| e.to_string())?;
    let follows_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut all_items: Vec<Item> = Vec::new();
    // (id, author, time) of each item, for the pull model (`--postgres`)
    let mut pull_items: Vec<(u64, u64, i64)> = Vec::new();
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..args.items {
        let item = make(i, &mut rng)?;
        if args.memory_baseline {
            all_items.push(item.clone());
        }
        if !args.postgres.is_empty() {
            pull_items.push((item.id.0, item.author.0, start + i as i64));
        }
        batch.push(item);
        if batch.len() == 10_000 {
            importer.write_items(&batch).map_err(|e| e.to_string())?;
            batch.clear();
        }
    }
    importer.write_items(&batch).map_err(|e| e.to_string())?;
    importer.finish().map_err(|e| e.to_string())?;
    let items_s = t.elapsed().as_secs_f64();

    println!("\n| measure | embedded store | in-memory backend (same run) |\n|---|---|---|");
    row(
        "bulk import (Importer)",
        format!(
            "{:.0} follows/s ({} in {follows_s:.2} s); {:.0} items/s ({} in {items_s:.1} s)",
            edges.len() as f64 / follows_s,
            edges.len(),
            args.items as f64 / items_s,
            args.items
        ),
        String::new(),
    );

    // ------------------------------------------------------------ open
    let rss0 = rss_bytes();
    let t = Instant::now();
    let mut cfg = tideway_service::Config::default();
    cfg.storage.data_dir = dir.path().to_owned();
    cfg.storage.cache_size = tideway_config::ByteSize(cache);
    cfg.timeline.max_len = opts.max_len;
    let open = || -> Result<Arc<dyn Backend>, String> {
        Ok(Arc::new(tideway_engines::open_embedded(&cfg).map_err(|e| e.chain())?))
    };
    let backend = open()?;
    let svc =
        FeedService::new(backend.clone(), opts.clone(), Arc::new(SystemClock)).await.map_err(|e| e.to_string())?;
    let ready_ms = t.elapsed().as_secs_f64() * 1000.0;
    let rss_open = rss_bytes();

    let readers: Vec<UserId> = {
        let with: Vec<u64> = {
            let mut v: Vec<u64> = edges.iter().map(|e| e.0).collect();
            v.dedup();
            v
        };
        (0..args.readers).map(|_| UserId(with[rng.random_range(0..with.len())])).collect()
    };

    // ------------------------------------------------------------ memory baseline
    let memory = if args.memory_baseline {
        let t = Instant::now();
        let mem: Arc<dyn Backend> = Arc::new(Store::in_memory(opts.max_len));
        let mut i = 0;
        while i < follows.len() {
            let from = follows[i].0;
            let mut targets = Vec::new();
            while i < follows.len() && follows[i].0 == from {
                targets.push(follows[i].1);
                i += 1;
            }
            mem.follow_many(from, &targets, Millis(start), opts.max_following).await.map_err(|e| e.to_string())?;
        }
        for item in all_items.drain(..) {
            mem.create_item(item, false, Millis(start)).await.map_err(|e| e.to_string())?;
        }
        let load_s = t.elapsed().as_secs_f64();
        let msvc =
            FeedService::new(mem.clone(), opts.clone(), Arc::new(SystemClock)).await.map_err(|e| e.to_string())?;
        let (first, _) = first_pages(&msvc, &readers).await?;
        let (warm, _) = first_pages(&msvc, &readers).await?;
        Some((load_s, first, warm, Arc::new(msvc)))
    } else {
        None
    };

    row(
        "ready (open the data directory, start the service)",
        format!("{ready_ms:.1} ms; RSS +{:.1} MB", rss_open.saturating_sub(rss0) as f64 / 1e6),
        memory.as_ref().map_or(String::new(), |m| format!("everything loaded through the API: {:.1} s", m.0)),
    );

    // ------------------------------------------------------------ pages
    if args.settle_secs > 0 {
        eprintln!("waiting {} s after the open before the cold pages", args.settle_secs);
        tokio::time::sleep(std::time::Duration::from_secs(args.settle_secs)).await;
    }
    if args.drop_page_cache {
        drop_page_cache()?;
    }
    let (cold, entries, cold_each) = first_pages_each(&svc, &readers).await?;
    let (warm, _) = first_pages(&svc, &readers).await?;
    let rss_read = rss_bytes();
    let (c50, c99) = pct(&cold);
    let (w50, w99) = pct(&warm);
    let (mem_first, mem_warm) = match &memory {
        Some((_, f, w, _)) => (Some(pct(f)), Some(pct(w))),
        None => (None, None),
    };
    let vs = |m: Option<(f64, f64)>, ours: (f64, f64)| {
        m.map_or(String::new(), |(b50, b99)| {
            format!(
                "p50 {b50:.1} µs, p99 {b99:.1} µs (ours / theirs: p50 {}, p99 {})",
                ratio(ours.0, b50),
                ratio(ours.1, b99)
            )
        })
    };
    row(
        &format!(
            "home first page (20), cold: {}, no inbox (rebuilt), index and caches empty",
            match (args.settle_secs, args.drop_page_cache) {
                (0, false) => "right after the open".to_owned(),
                (0, true) => "right after the open, OS page cache dropped".to_owned(),
                (secs, false) => format!("{secs} s after the open"),
                (secs, true) => format!("{secs} s after the open, OS page cache dropped"),
            }
        ),
        format!(
            "p50 {c50:.1} µs, p99 {c99:.1} µs ({} readers, {:.1} entries a page)",
            readers.len(),
            entries as f64 / readers.len().max(1) as f64
        ),
        format!("first read, inbox rebuilt: {}", vs(mem_first, (c50, c99))),
    );
    row(
        "home first page (20), cold, by the reader's followee count",
        by_followees(&readers, &cold_each, &following)?,
        String::new(),
    );
    row("home first page (20), cold, by the reader's place in the run", by_quarter(&cold_each)?, String::new());
    row(
        "home first page (20), warm: the same readers again",
        format!("p50 {w50:.1} µs, p99 {w99:.1} µs"),
        vs(mem_warm, (w50, w99)),
    );

    // ------------------------------------------------------------ fan-out
    // Every reader has an inbox now. Posts by authors drawn by followers,
    // delivered by one worker: first with the authors' followers not yet
    // loaded (as after a start), then again with them loaded.
    let all_readers: Vec<UserId> = {
        let mut v: Vec<u64> = edges.iter().map(|e| e.0).collect();
        v.dedup();
        v.into_iter().map(UserId).collect()
    };
    let activate = async |svc: &FeedService| -> Result<f64, String> {
        let t = Instant::now();
        for &u in &all_readers {
            svc.feeds
                .home(u, &PageRequest { limit: Some(1), ..Default::default() })
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let act_s = activate(&svc).await?;
    if let Some(m) = &memory {
        activate(&m.3).await?;
    }
    eprintln!("{} readers activated (an inbox each) in {act_s:.1} s", all_readers.len());
    let fanout = |svc: Arc<FeedService>, n: usize, seed: u64| {
        let users = &users;
        let dist = &dist;
        async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let t = Instant::now();
            for _ in 0..n {
                let a = UserId(users[dist.sample(&mut rng)]);
                svc.items
                    .create_item(tideway_core::NewItem::new(a, ItemKind::Post))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            let posts_per_s = n as f64 / t.elapsed().as_secs_f64();
            let worker = tideway_service::FanoutWorker::new(svc);
            let t = Instant::now();
            let delivered = worker.drain().await.map_err(|e| e.to_string())?;
            Ok::<(usize, f64, f64), String>((delivered, t.elapsed().as_secs_f64(), posts_per_s))
        }
    };
    let svc = Arc::new(svc);
    let posts = args.fanout_posts;
    // The warm round posts as the same authors in the same order: what it
    // measures is delivery with their follower lists loaded (a round that
    // drew its authors anew loaded some lists as it went, ~20% of its time).
    let (cold_n, cold_s, cold_posts) = fanout(svc.clone(), posts, args.seed + 1).await?;
    let (warm_n, warm_s, warm_posts) = fanout(svc.clone(), posts, args.seed + 1).await?;
    row(
        "durable posts, one writer (fsync each)",
        format!("authors' counters not loaded yet: {cold_posts:.0} posts/s; loaded: {warm_posts:.0} posts/s"),
        String::new(),
    );
    let mem_fan = match &memory {
        Some(m) => {
            // (twice, as ours: the second round meets inboxes as full)
            fanout(m.3.clone(), posts, args.seed + 1).await?;
            let (n, s, _) = fanout(m.3.clone(), posts, args.seed + 1).await?;
            format!(
                "{:.0} deliveries/s ({n} in {s:.2} s) → ours warm ×{:.2}",
                n as f64 / s,
                (warm_n as f64 / warm_s) / (n as f64 / s)
            )
        }
        None => String::new(),
    };
    row(
        &format!("fan-out, one worker ({posts} posts by authors drawn by followers)"),
        format!(
            "followers not loaded yet: {:.0} deliveries/s ({cold_n} in {cold_s:.2} s); loaded: {:.0} deliveries/s ({warm_n} in {warm_s:.2} s)",
            cold_n as f64 / cold_s,
            warm_n as f64 / warm_s
        ),
        mem_fan,
    );
    let svc = Arc::try_unwrap(svc).map_err(|_| "the service is still shared".to_owned())?;

    // ------------------------------------------------------------ clean restart
    let snap = dir.path().join("inboxes.snapshot");
    svc.ops.save_snapshot(&snap).await.map_err(|e| e.to_string())?;
    drop(svc);
    drop(backend);
    let t = Instant::now();
    let backend = open()?;
    let svc =
        FeedService::new(backend.clone(), opts.clone(), Arc::new(SystemClock)).await.map_err(|e| e.to_string())?;
    svc.ops.load_snapshot(&snap).await.map_err(|e| e.to_string())?;
    let restart_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (snapped, _) = first_pages(&svc, &readers).await?;
    let (s50, s99) = pct(&snapped);
    row(
        "home first page (20) after a clean restart: inboxes from the snapshot, index and caches empty",
        format!("p50 {s50:.1} µs, p99 {s99:.1} µs (restart with the snapshot: {restart_ms:.1} ms)"),
        vs(mem_warm, (s50, s99)),
    );
    row(
        "process RSS after the reads",
        format!(
            "+{:.1} MB over the open store ({} readers' units, inboxes and the caches of {})",
            rss_read.saturating_sub(rss_open) as f64 / 1e6,
            readers.len(),
            args.cache_size
        ),
        String::new(),
    );
    drop(svc);
    drop(backend);
    if !args.postgres.is_empty() {
        let readers: Vec<u64> = readers.iter().take(args.postgres_readers).map(|u| u.0).collect();
        // (the embedded store's cold pages of the same readers)
        let mut h = hist()?;
        for &ns in cold_each.iter().take(readers.len()) {
            h.record(ns).map_err(|e| e.to_string())?;
        }
        let (p50, p99) = pct(&h);
        let cold = ColdPages { p50, p99, disk: args.drop_page_cache };
        postgres_pulls(&args, &edges, &pull_items, &readers, cold).await?;
    }
    Ok(())
}

/// The embedded store's cold first pages of the run, to compare with.
struct ColdPages {
    p50: f64,
    p99: f64,
    /// Read with the OS page cache dropped.
    disk: bool,
}

/// The first readers' first pages on PostgreSQL by the seeds' pull query
/// (the newest 20 ids of the followed authors' items: no bodies, counts or
/// filtering), in a database of its own: after the load, after a restart,
/// and after a restart with the OS page cache dropped.
async fn postgres_pulls(
    args: &Args,
    follows: &[(u64, u64)],
    items: &[(u64, u64, i64)],
    readers: &[u64],
    cold: ColdPages,
) -> Result<(), String> {
    let base = args.postgres.as_str();
    let name = format!("tw_cold_{}", std::process::id());
    let url = format!("{}/{name}", base.rsplit_once('/').map_or(base, |(server, _)| server));
    let mut admin = sql::Conn::open(sql::Db::Postgres, base).await?;
    admin.exec(&format!("CREATE DATABASE {name}")).await?;
    drop(admin);
    let measured = async {
        let mut c = sql::Conn::open(sql::Db::Postgres, &url).await?;
        let load_s = sql::load_model(&mut c, sql::Db::Postgres, follows, items, &[]).await?;
        // (a freshly copied table has no visibility map: its index-only
        // scans would visit the heap, as a served table's do not)
        c.exec("VACUUM (ANALYZE) tw_items").await?;
        c.exec("CHECKPOINT").await?;
        let loaded = pull_pages(&mut c, readers).await?;
        drop(c);
        restart_postgres(args).await?;
        let restarted = pull_pages(&mut sql::Conn::open(sql::Db::Postgres, &url).await?, readers).await?;
        restart_postgres(args).await?;
        drop_page_cache()?;
        let from_disk = pull_pages(&mut sql::Conn::open(sql::Db::Postgres, &url).await?, readers).await?;
        Ok::<_, String>((load_s, loaded, restarted, from_disk))
    }
    .await;
    let mut admin = sql::Conn::open(sql::Db::Postgres, base).await?;
    admin.exec(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await?;
    let (load_s, loaded, restarted, from_disk) = measured?;
    let ours = format!(
        "embedded, cold{}: p50 {:.1} µs, p99 {:.1} µs",
        if cold.disk { ", OS page cache dropped" } else { "" },
        cold.p50,
        cold.p99
    );
    for (what, h) in [
        (format!("PostgreSQL pull, first page (20 ids), right after its load ({load_s:.0} s)"), loaded),
        (
            "PostgreSQL pull, first page (20 ids), server restarted: its buffers empty, OS page cache warm".into(),
            restarted,
        ),
        ("PostgreSQL pull, first page (20 ids), server restarted, OS page cache dropped".into(), from_disk),
    ] {
        let (p50, p99) = pct(&h);
        row(
            &what,
            format!("p50 {p50:.1} µs, p99 {p99:.1} µs ({} readers)", readers.len()),
            format!("{ours} (embedded / PostgreSQL: p50 {}, p99 {})", ratio(cold.p50, p50), ratio(cold.p99, p99)),
        );
    }
    Ok(())
}

/// One first page of the pull model for each reader, in order.
async fn pull_pages(c: &mut sql::Conn, readers: &[u64]) -> Result<Histogram<u64>, String> {
    let mut h = hist()?;
    for &u in readers {
        let t = Instant::now();
        c.home_n(u, 20).await?;
        h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
    }
    Ok(h)
}

/// Restarts the PostgreSQL server (`--postgres-restart`) and waits until it
/// takes connections again.
async fn restart_postgres(args: &Args) -> Result<(), String> {
    let status = std::process::Command::new("sh")
        .args(["-c", &args.postgres_restart])
        .status()
        .map_err(|e| format!("--postgres-restart: {e}"))?;
    if !status.success() {
        return Err(format!("--postgres-restart failed: {status}"));
    }
    for _ in 0..300 {
        if sql::Conn::open(sql::Db::Postgres, &args.postgres).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err("PostgreSQL did not take connections within 30 s of its restart".into())
}
