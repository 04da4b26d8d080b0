//! tideway on shared engines, beside the embedded store, in one run: the same
//! synthetic workload through the service on (a) the embedded store, (b) one
//! node on PostgreSQL or MariaDB + Redis, (c) two nodes on the same engines
//! (two service instances in this process, each with its fan-out worker,
//! requests alternating between them).
//!
//! ```text
//! cargo run --release -p tideway-bench --bin bench-nodes -- \
//!     [--sql postgres://postgres@127.0.0.1:5432/test] [--redis redis://127.0.0.1:6379] \
//!     [--users 5000] [--follows 40] [--authors 1000] [--posts 5000] [--reads 5000]
//! … --tag-items 1000000 --reads 2000   # a tag feed of 1M items beside a profile (tag.rs)
//! ```
//!
//! Each run gets a fresh database (created on the server of `--sql`, dropped
//! after) and a fresh Redis key prefix. Reported per setup: durable posts/s
//! (16 writers), fan-out deliveries/s (draining every post's job into the
//! readers' inboxes), home p50/p99 with warm inboxes, the same readers' pages
//! read again in the same order (on tideway with the facts the first read
//! copied), and a returning reader's
//! first page after every inbox was lost (a Redis flush; for the embedded
//! store, dropped inboxes).
//!
//! Beside them, on the same SQL server and Redis, the seeds' design driven
//! through the same workload (`seeds`): items and the follow graph (both
//! ways) in SQL, a fan-out job queue in Redis, and a sorted set per home
//! timeline capped at 800 (`ZADD` + `ZREMRANGEBYRANK`, pipelined by chunks of
//! 1,000 followers); a page is `ZREVRANGE` then the items by id; a returning
//! reader's timeline is regenerated as Mastodon's `populate_home` does (up to
//! 400 recent items of every followee), here waited for before the page.

use clap::Parser;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_config::{BackendKind, SyncKind};
use tideway_core::{ItemKind, NewItem, UserId};
use tideway_engines::Opened;
use tideway_service::{Config, FanoutWorker, FeedService, PageRequest, ServiceOptions, SystemClock};
use tideway_store::Backend;
use tideway_store_sql::testing::FreshDatabase;

mod seeds;
mod tag;

#[derive(Parser, Debug)]
struct Args {
    /// A PostgreSQL or MySQL/MariaDB server (any existing database: a fresh
    /// one is created beside it).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/test")]
    sql: String,
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    #[arg(long, default_value_t = 5000)]
    users: u64,
    /// Follows per user.
    #[arg(long, default_value_t = 40)]
    follows: usize,
    /// Authors (users 1..=authors post and are followed).
    #[arg(long, default_value_t = 1000)]
    authors: u64,
    #[arg(long, default_value_t = 5000)]
    posts: usize,
    #[arg(long, default_value_t = 5000)]
    reads: usize,
    #[arg(long, default_value_t = 16)]
    writers: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Followers of a celebrity loaded straight into PostgreSQL (0: skip):
    /// the time from the celebrity's post to a follower's page showing it.
    #[arg(long, default_value_t = 1_000_000)]
    celebrity: u64,
    /// Only time single round trips (a SQL `SELECT 1`, a Redis inbox read)
    /// and one home page's storage calls, then exit.
    #[arg(long)]
    probe: bool,
    /// Serve the seeds' design over HTTP on this address instead (for
    /// `scripts/bench-http.sh`): `--sql` is then the database itself.
    #[arg(long, value_name = "ADDR")]
    serve_seeds: Option<String>,
    /// Redis key prefix of `--serve-seeds`.
    #[arg(long, default_value = "seeds:")]
    prefix: String,
    /// Only page a tag feed of this many items beside a profile, on the
    /// embedded store and on one SQL + Redis node, then exit (`tag.rs`).
    #[arg(long, value_name = "N")]
    tag_items: Option<u64>,
    /// Nodes on SQL keep no copies of item records (every page reads its
    /// records), as before the item cache: the same run's "before".
    #[arg(long)]
    no_item_cache: bool,
}

struct Figures {
    posts_per_sec: f64,
    deliveries_per_sec: f64,
    warm: (f64, f64),
    /// The warm reads' readers again, in the same order.
    again: (f64, f64),
    returning: (f64, f64),
}

fn pct(h: &Histogram<u64>) -> (f64, f64) {
    (h.value_at_quantile(0.5) as f64 / 1000.0, h.value_at_quantile(0.99) as f64 / 1000.0)
}

/// Runs the workload on `nodes` (one or two services over the same engines);
/// `flush` loses every inbox.
async fn workload<F, Fut>(args: &Args, nodes: &[Arc<FeedService>], flush: F) -> Result<Figures, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let e = |e: tideway_service::ServiceError| e.to_string();
    let node = |i: usize| nodes[i % nodes.len()].clone();
    let mut rng = SmallRng::seed_from_u64(args.seed);
    let readers: Vec<u64> = (args.authors + 1..=args.authors + args.users).collect();
    eprintln!("  follows: {} users × {}", readers.len(), args.follows);
    for (i, r) in readers.iter().enumerate() {
        let targets: Vec<UserId> = (0..args.follows).map(|_| UserId(rng.random_range(1..=args.authors))).collect();
        let mut t = targets;
        t.sort_unstable();
        t.dedup();
        node(i).graph.follow_many(UserId(*r), &t).await.map_err(e)?;
    }
    // Every reader reads once: inboxes exist, readers are active.
    for (i, r) in readers.iter().enumerate() {
        node(i).feeds.home(UserId(*r), &PageRequest::default()).await.map_err(e)?;
    }

    eprintln!("  posts: {} by {} writers", args.posts, args.writers);
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..args.writers {
        let svc = node(w);
        let (n, authors, seed) = (args.posts / args.writers, args.authors, args.seed + w as u64);
        tasks.spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed);
            for _ in 0..n {
                let a = UserId(rng.random_range(1..=authors));
                svc.items.create_item(NewItem::new(a, ItemKind::Post)).await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    let posts_per_sec = (args.posts / args.writers * args.writers) as f64 / t.elapsed().as_secs_f64();

    eprintln!("  fan-out");
    let t = Instant::now();
    let mut delivered = 0usize;
    let mut drains = tokio::task::JoinSet::new();
    for svc in nodes {
        let w = FanoutWorker::new(svc.clone());
        drains.spawn(async move { w.drain().await.map_err(|e| e.to_string()) });
    }
    while let Some(r) = drains.join_next().await {
        delivered += r.map_err(|e| e.to_string())??;
    }
    // A second pass finishes jobs a worker found leased to the other.
    for svc in nodes {
        delivered += FanoutWorker::new(svc.clone()).drain().await.map_err(e)?;
    }
    let deliveries_per_sec = delivered as f64 / t.elapsed().as_secs_f64();

    let read = |count: usize, seed: u64| {
        let nodes = nodes.to_vec();
        let readers = readers.clone();
        async move {
            let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
            let mut rng = SmallRng::seed_from_u64(seed);
            for i in 0..count {
                let r = readers[rng.random_range(0..readers.len())];
                let t = Instant::now();
                let page = nodes[i % nodes.len()]
                    .feeds
                    .home(UserId(r), &PageRequest::default())
                    .await
                    .map_err(|e| e.to_string())?;
                h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
                std::hint::black_box(page);
            }
            Ok::<_, String>(h)
        }
    };
    eprintln!("  warm reads");
    let warm = pct(&read(args.reads, 7).await?);
    eprintln!("  warm reads again (the same readers, in the same order)");
    let again = pct(&read(args.reads, 7).await?);
    flush().await?;
    eprintln!("  returning readers (every inbox lost)");
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for (i, r) in readers.iter().take(args.reads.min(readers.len())).enumerate() {
        let t = Instant::now();
        std::hint::black_box(node(i).feeds.home(UserId(*r), &PageRequest::default()).await.map_err(e)?);
        h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
    }
    Ok(Figures { posts_per_sec, deliveries_per_sec, warm, again, returning: pct(&h) })
}

fn opts(node_id: u16, backend: &dyn Backend, args: &Args) -> ServiceOptions {
    // The settings of `tideway serve` for the backend (on SQL + Redis: the
    // copies of records and lists, the hot-author decisions kept 10 s, the
    // reader's activity marked once a window); every reader's inbox is
    // pushed to (no hot authors at this size).
    let served = ServiceOptions::new(&node_config(), backend.profile());
    ServiceOptions { node_id, copies_bytes: if args.no_item_cache { 0 } else { served.copies_bytes }, ..served }
}

/// The settings of a benchmark node (inboxes of 800 keys), as `tideway
/// serve` would be given them: the embedded store unless changed.
fn node_config() -> Config {
    let mut cfg = Config::default();
    cfg.timeline.max_len = 800;
    cfg.storage.sync = SyncKind::Fsync;
    cfg
}

/// A node on the database at `url` and the Redis at `redis`, its keys under
/// `prefix`.
fn shared_config(url: &str, redis: &str, prefix: &str) -> Config {
    let mut cfg = node_config();
    cfg.storage.backend = if url.starts_with("postgres") { BackendKind::Postgres } else { BackendKind::Mysql };
    cfg.storage.url = Some(url.to_owned());
    cfg.redis.urls = vec![redis.to_owned()];
    cfg.redis.prefix = prefix.to_owned();
    cfg
}

async fn embedded(args: &Args) -> Result<Figures, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut cfg = node_config();
    cfg.storage.data_dir = dir.path().to_owned();
    let backend = tideway_engines::open(&cfg).await.map_err(|e| e.chain())?.backend();
    let svc = Arc::new(
        FeedService::new(backend.clone(), opts(0, &*backend, args), Arc::new(SystemClock))
            .await
            .map_err(|e| e.to_string())?,
    );
    let b = backend.clone();
    let readers: Vec<UserId> = (args.authors + 1..=args.authors + args.users).map(UserId).collect();
    workload(args, &[svc], || {
        let (b, readers) = (b.clone(), readers.clone());
        async move {
            for r in readers {
                b.drop_inbox(r).await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
    })
    .await
}

async fn shared(args: &Args, n: usize) -> Result<Figures, String> {
    let db = FreshDatabase::create(&args.sql).await.map_err(|e| e.to_string())?;
    let prefix = format!("benchnodes{}x{n}:", std::process::id());
    let mut nodes = Vec::new();
    let mut flusher = None;
    for i in 0..n {
        let opened =
            tideway_engines::open(&shared_config(&db.url, &args.redis, &prefix)).await.map_err(|e| e.chain())?;
        if let Opened::Shared { redis, .. } = &opened {
            flusher.get_or_insert_with(|| redis.clone());
        }
        let backend = opened.backend();
        nodes.push(Arc::new(
            FeedService::new(backend.clone(), opts(i as u16 + 1, &*backend, args), Arc::new(SystemClock))
                .await
                .map_err(|e| e.to_string())?,
        ));
    }
    let flusher = flusher.ok_or("no node")?;
    let f = flusher.clone();
    let figures = workload(args, &nodes, || {
        let f = f.clone();
        async move { f.purge().await.map(|_| ()).map_err(|e| e.to_string()) }
    })
    .await;
    flusher.purge().await.map_err(|e| e.to_string())?;
    drop(nodes);
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.drop().await.map_err(|e| e.to_string())?;
    figures
}

/// A celebrity with `--celebrity` followers (rows written by one SQL
/// statement per table, as a migration would): one node, the post acknowledged,
/// then one follower's home page.
#[allow(clippy::print_stdout, reason = "the report is this command's output")]
async fn celebrity(args: &Args) -> Result<(), String> {
    let db = FreshDatabase::create(&args.sql).await.map_err(|e| e.to_string())?;
    let prefix = format!("celebrity{}:", std::process::id());
    let opened = tideway_engines::open(&shared_config(&db.url, &args.redis, &prefix)).await.map_err(|e| e.chain())?;
    let Opened::Shared { redis, .. } = &opened else { return Err("not a shared backend".into()) };
    let redis = redis.clone();
    let (star, first, n) = (7u64, 1_000_000u64, args.celebrity);
    let t = Instant::now();
    // The followers' follow times are their ids (a spread, as real follows have).
    db.execute(&FreshDatabase::followers_sql(star, first, n, "g")).await.map_err(|e| e.to_string())?;
    eprintln!("  {n} follows loaded in {:.1} s", t.elapsed().as_secs_f64());
    let backend = opened.backend();
    let svc = FeedService::new(backend.clone(), opts(1, &*backend, args), Arc::new(SystemClock))
        .await
        .map_err(|e| e.to_string())?;
    let reader = UserId(first + n / 2);
    svc.feeds.home(reader, &PageRequest::default()).await.map_err(|e| e.to_string())?;
    let t = Instant::now();
    let (posted, _) =
        svc.items.create_item(NewItem::new(UserId(star), ItemKind::Post)).await.map_err(|e| e.to_string())?;
    let acked = t.elapsed();
    let page = svc.feeds.home(reader, &PageRequest::default()).await.map_err(|e| e.to_string())?;
    let readable = t.elapsed();
    let shown = page.entries.first().is_some_and(|e| e.item.item.id == posted.item.id);
    println!(
        "celebrity with {n} followers on PostgreSQL + Redis: post acknowledged in {:.1} ms, on a follower's \
         next page after {:.1} ms (shown: {shown}; the author is hot, so the page pulls it, no fan-out)",
        acked.as_secs_f64() * 1e3,
        readable.as_secs_f64() * 1e3
    );
    redis.purge().await.map_err(|e| e.to_string())?;
    drop(svc);
    tokio::time::sleep(Duration::from_millis(200)).await;
    db.drop().await.map_err(|e| e.to_string())
}

/// Round trips, one at a time: what a page's sequential calls cost each.
#[allow(clippy::print_stdout, reason = "the report is this command's output")]
async fn probe(args: &Args) -> Result<(), String> {
    use tideway_store::{Graph, Inboxes};
    let db = FreshDatabase::create(&args.sql).await.map_err(|e| e.to_string())?;
    let prefix = format!("probe{}:", std::process::id());
    let (sql, redis) =
        tideway_engines::open_shared(&shared_config(&db.url, &args.redis, &prefix)).await.map_err(|e| e.chain())?;
    redis.finish_rebuild(UserId(1), &(1..=800).collect::<Vec<u64>>(), 0).await.map_err(|e| e.to_string())?;
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for _ in 0..2000 {
        let t = Instant::now();
        sql.health().await.map_err(|e| e.to_string())?;
        h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
    }
    let (p50, p99) = pct(&h);
    println!("SQL SELECT 1: p50 {p50:.1} µs, p99 {p99:.1} µs");
    if args.sql.starts_with("postgres") {
        // The same through sqlx's native PostgreSQL driver, for comparison.
        let native = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&db.url)
            .await
            .map_err(|e| e.to_string())?;
        let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
        for _ in 0..2000 {
            let t = Instant::now();
            sqlx::query("SELECT 1").execute(&native).await.map_err(|e| e.to_string())?;
            h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
        let (p50, p99) = pct(&h);
        println!("SQL SELECT 1, native driver: p50 {p50:.1} µs, p99 {p99:.1} µs");
        native.close().await;
    }
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for _ in 0..2000 {
        let t = Instant::now();
        redis.inbox_floor(UserId(1)).await.map_err(|e| e.to_string())?;
        h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
    }
    let (p50, p99) = pct(&h);
    println!("Redis read of an 800-key inbox: p50 {p50:.1} µs, p99 {p99:.1} µs");
    // A page's worth of items (20, 400-byte bodies) and its SQL reads.
    use tideway_store::Items;
    let mut ids = Vec::new();
    for i in 0..20u64 {
        let mut body = serde_json::Map::new();
        body.insert("text".into(), serde_json::Value::String("x".repeat(400)));
        let item = tideway_core::Item {
            body: tideway_core::Body::new(&body),
            ..tideway_core::Item::new(tideway_core::ItemId((1_000 + i) << 22), UserId(1 + i % 5), ItemKind::Post)
        };
        sql.create_item(item, false, tideway_core::Millis(1)).await.map_err(|e| e.to_string())?;
        ids.push(tideway_core::ItemId((1_000 + i) << 22));
    }
    let keys: Vec<u64> = ids.iter().map(|i| i.0).collect();
    let authors: Vec<UserId> = (1..=5).map(UserId).collect();
    for (name, which) in [("records(20)", 0), ("hydration(20, viewer)", 1), ("relations(5)", 2), ("followees", 3)] {
        let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
        for _ in 0..1000 {
            let t = Instant::now();
            match which {
                0 => drop(sql.records(&keys).await.map_err(|e| e.to_string())?),
                1 => drop(sql.hydration(&ids, Some(UserId(9))).await.map_err(|e| e.to_string())?),
                2 => drop(sql.relations(UserId(9), &authors).await.map_err(|e| e.to_string())?),
                _ => drop(sql.followees(UserId(9)).await.map_err(|e| e.to_string())?),
            }
            h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
        let (p50, p99) = pct(&h);
        println!("SQL {name}: p50 {p50:.1} µs, p99 {p99:.1} µs");
    }
    // Each length of an IN list is its own statement text to the driver,
    // prepared on first use on each connection and kept in a cache of 100
    // statements per connection: the same read with 150 users every time,
    // and with 100 to 200 (each length in turn: never in the cache).
    let others: Vec<UserId> = (1..=200).map(UserId).collect();
    for (name, varying) in [("relations(150)", false), ("relations(100 to 200, each in turn)", true)] {
        let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
        for i in 0..1010 {
            let n = if varying { 100 + i % 101 } else { 150 };
            let t = Instant::now();
            drop(sql.relations(UserId(9), &others[..n]).await.map_err(|e| e.to_string())?);
            h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
        let (p50, p99) = pct(&h);
        println!("SQL {name}: p50 {p50:.1} µs, p99 {p99:.1} µs");
    }
    viral(&sql, &db.url, &ids).await?;
    redis.purge().await.map_err(|e| e.to_string())?;
    sql.close().await;
    db.drop().await.map_err(|e| e.to_string())
}

/// A page's counts when one of its 20 items is viral (`VIRAL` reactions, as
/// many likes written through `set_reaction`): read from the kept counts
/// (schema 5), and beside it, in the same run, by counting the rows as the
/// read did before (the same query shape, on the same rows).
#[allow(clippy::print_stdout, reason = "the report is this command's output")]
async fn viral(sql: &tideway_store_sql::SqlStore, url: &str, ids: &[tideway_core::ItemId]) -> Result<(), String> {
    use futures_util::StreamExt;
    use tideway_store::Items;
    const VIRAL: u64 = 20_000;
    let hot = ids[0];
    let t = Instant::now();
    let writes = futures_util::stream::iter(0..VIRAL)
        .map(|u| async move { sql.set_reaction(hot, UserId(10_000 + u), "like", true, &[]).await })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    for w in writes {
        w.map_err(|e| e.to_string())?;
    }
    let rate = VIRAL as f64 / t.elapsed().as_secs_f64();
    println!("likes of one item, 32 at once: {rate:.0}/s");
    let h = sql.hydration(&ids[..1], None).await.map_err(|e| e.to_string())?;
    if h[0].0.reactions != vec![("like".to_owned(), VIRAL)] {
        return Err(format!("the viral item's counts: {:?}", h[0].0));
    }
    let dialect = tideway_store_sql::Dialect::of_url(url).ok_or("not a SQL URL")?;
    let pool = sqlx::any::AnyPoolOptions::new().max_connections(2).connect(url).await.map_err(|e| e.to_string())?;
    let m = vec!["?"; ids.len()].join(", ");
    let counting = dialect.placeholders(&format!(
        "SELECT 'r', reply_to, '', COUNT(*) FROM tw_items WHERE reply_to IN ({m}) AND live = 1 GROUP BY reply_to \
         UNION ALL SELECT 'p', repost_of, '', COUNT(*) FROM tw_items WHERE repost_of IN ({m}) AND live = 1 GROUP BY repost_of \
         UNION ALL SELECT 'k', item, kind, COUNT(*) FROM tw_reactions WHERE item IN ({m}) GROUP BY item, kind"
    ));
    for (name, kept) in [("kept counts", true), ("rows counted at read (before schema 5)", false)] {
        let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
        for _ in 0..300 {
            let t = Instant::now();
            if kept {
                drop(sql.hydration(ids, None).await.map_err(|e| e.to_string())?);
            } else {
                let mut q = sqlx::query(&counting);
                for _ in 0..3 {
                    for i in ids {
                        q = q.bind(i.0 as i64);
                    }
                }
                drop(q.fetch_all(&pool).await.map_err(|e| e.to_string())?);
            }
            h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
        let (p50, p99) = pct(&h);
        println!("SQL counts of 20 items, one with {VIRAL} likes, {name}: p50 {p50:.1} µs, p99 {p99:.1} µs");
    }
    pool.close().await;
    Ok(())
}

#[allow(clippy::print_stdout, reason = "the report is this command's output")]
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    let engine = if args.sql.starts_with("postgres") { "PostgreSQL" } else { "MariaDB/MySQL" };
    if args.probe {
        return probe(&args).await;
    }
    if let Some(listen) = &args.serve_seeds {
        return seeds::serve(&args, listen).await;
    }
    if let Some(n) = args.tag_items {
        return tag::run(&args, n).await;
    }
    if args.celebrity > 0 && args.sql.starts_with("postgres") {
        celebrity(&args).await?;
    }
    eprintln!("the seeds' design on {engine} + Redis");
    let base = seeds::run(&args).await?;
    eprintln!("embedded store");
    let emb = embedded(&args).await?;
    eprintln!("1 node on {engine} + Redis");
    let one = shared(&args, 1).await?;
    eprintln!("2 nodes on {engine} + Redis");
    let two = shared(&args, 2).await?;
    println!(
        "{} users × {} follows of {} authors, {} posts ({} writers), {} reads; 2 cores for everything",
        args.users, args.follows, args.authors, args.posts, args.writers, args.reads
    );
    println!(
        "| setup | posts/s (durable) | deliveries/s | home p50 / p99 warm (µs) | read again p50 / p99 (µs) | returning reader p50 / p99 (µs) |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, f) in [
        (format!("seeds: {engine} items + Redis ZSET timelines"), &base),
        ("embedded (fjall, fsync)".to_owned(), &emb),
        (format!("1 node, {engine} + Redis"), &one),
        (format!("2 nodes, {engine} + Redis"), &two),
    ] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} |",
            f.posts_per_sec,
            f.deliveries_per_sec,
            f.warm.0,
            f.warm.1,
            f.again.0,
            f.again.1,
            f.returning.0,
            f.returning.1
        );
    }
    let ratio = |name: &str, a: &Figures, b: &Figures| {
        println!(
            "| {name} | ×{:.2} | ×{:.2} | ×{:.2} p50, ×{:.2} p99 | ×{:.2} p50, ×{:.2} p99 | ×{:.2} p99 |",
            a.posts_per_sec / b.posts_per_sec,
            a.deliveries_per_sec / b.deliveries_per_sec,
            a.warm.0 / b.warm.0,
            a.warm.1 / b.warm.1,
            a.again.0 / b.again.0,
            a.again.1 / b.again.1,
            a.returning.1 / b.returning.1
        );
    };
    ratio("2 nodes / 1 node", &two, &one);
    ratio("1 node / seeds", &one, &base);
    Ok(())
}
