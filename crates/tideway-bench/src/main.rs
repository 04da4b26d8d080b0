//! `tideway-bench`: the first benchmark of tideway, a command (not a test).
//!
//! 1. loads the real Twitter follow graph (`../shared/data/twitter-follow.txt.gz`,
//!    81k users, 1.77M follows) through batch follows;
//! 2. makes every user an active reader (each gets an inbox);
//! 3. posts items whose authors are drawn in proportion to their follower counts
//!    (fixed seed), then drains fan-out on one thread: deliveries per second;
//! 4. reads home first pages in-process and over HTTP: latency p50/p99;
//! 5. reports memory per inbox entry;
//! 6. in the same run, replays the same deliveries against the seeds' Redis push
//!    design (`ZADD timeline:<u>` + `ZREMRANGEBYRANK` to 800, pipelined) on the local
//!    Redis, and prints every figure with its ratio.
//!
//! Output is a Markdown table on stdout; progress goes to stderr.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command whose output is its report

mod report;
mod sql;
mod workload;

use clap::Parser;
use hdrhistogram::Histogram;
use rand::distr::{Distribution, weighted::WeightedIndex};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_core::{ItemKind, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, PageRequest, ServiceOptions, SystemClock};
use tideway_store::{Backend, Store};

/// The allocator of the `tideway` binary, so in-process figures are the
/// server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(about = "tideway benchmark on the real Twitter follow graph")]
struct Args {
    /// The workload: `twitter` (the real follow graph; posts by authors drawn
    /// by follower count), `synthetic:USERS:FOLLOWS` (seeded power-law graph),
    /// `higgs` (the Higgs activity trace replayed), or a gzip edge file.
    #[arg(long, default_value = "twitter")]
    graph: String,
    /// The shared data directory (Higgs files).
    #[arg(long, default_value = "../shared/data")]
    data: PathBuf,
    /// Items to post (for `higgs`: trace events to replay).
    #[arg(long, default_value_t = 100_000)]
    posts: usize,
    /// `embedded` (fjall, the default backend) or `memory`.
    #[arg(long, default_value = "embedded")]
    backend: String,
    /// Bytes of item bodies the embedded store keeps in memory (its body
    /// cache), like `storage.cache_size`: `64MiB`, `64KiB`…
    #[arg(long, default_value = "64MiB")]
    cache_size: String,
    /// Length of each post's body text (0: the short default text).
    #[arg(long, default_value_t = 0)]
    body_bytes: usize,
    /// fsync every acknowledged write (embedded only), as the server's default does.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    fsync: bool,
    /// Home pages read in-process.
    #[arg(long, default_value_t = 50_000)]
    reads: usize,
    /// Home pages read over HTTP.
    #[arg(long, default_value_t = 20_000)]
    http_reads: usize,
    /// Requests in flight over HTTP.
    #[arg(long, default_value_t = 8)]
    http_concurrency: usize,
    /// Redis for the baseline ("" to skip).
    #[arg(long, default_value = "redis://127.0.0.1:6379/15")]
    redis: String,
    /// Likes per phase (one hot item; many items).
    #[arg(long, default_value_t = 100_000)]
    likes: usize,
    /// Concurrent likers (threads; the Redis baseline uses as many clients).
    /// Durable writers share fsyncs, so more writers than cores is realistic.
    #[arg(long, default_value_t = 16)]
    like_threads: usize,
    /// Deliveries replayed against Redis (it is much slower: a sample).
    #[arg(long, default_value_t = 2_000_000)]
    redis_deliveries: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Fan-out chunks of a worker step in flight at once (`tideway serve`
    /// uses 1 in one process, 8 on shared engines).
    #[arg(long, default_value_t = 1)]
    chunks_in_flight: usize,
    /// PostgreSQL for the SQL pull baseline ("" to skip).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1/test")]
    postgres: String,
    /// MariaDB / MySQL for the SQL pull baseline ("" to skip).
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306/test")]
    mariadb: String,
    /// Returning readers, each following `--returning-follows` accounts.
    #[arg(long, default_value_t = 20)]
    returning: usize,
    #[arg(long, default_value_t = 2000)]
    returning_follows: usize,
    /// Followers of the big synthetic celebrity (time until readable).
    #[arg(long, default_value_t = 1_000_000)]
    celebrity: u64,
    /// Home reads per second over HTTP, open loop; a comma-separated list runs each.
    #[arg(long, value_delimiter = ',', default_values_t = vec![10_000u64, 20_000])]
    http_rate: Vec<u64>,
    #[arg(long, default_value_t = 5)]
    http_seconds: u64,
    /// Directory of the HTML report.
    #[arg(long, default_value = "bench-report")]
    report: PathBuf,
    /// Operations per read:write mix (100:1 and 1:1).
    #[arg(long, default_value_t = 20_000)]
    mix_ops: usize,
    /// Follow rows the SQL baselines load: `all`, `readers` (only the rows of
    /// the readers they measure, which are all their queries touch), or
    /// `auto` (all up to 20M follows, readers above).
    #[arg(long, default_value = "auto", value_parser = ["all", "readers", "auto"])]
    sql_follows: String,
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

fn percentiles(h: &Histogram<u64>) -> (f64, f64, f64) {
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    (us(0.5), us(0.99), us(0.999))
}

struct Report {
    rows: Vec<(String, String, String)>,
}

impl Report {
    fn row(&mut self, what: &str, value: String, baseline: String) {
        eprintln!("  {what}: {value} {baseline}");
        self.rows.push((what.to_owned(), value, baseline));
    }
}

/// The benchmark's runtime, for the synchronous phases' service calls.
static RUNTIME: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();

/// Runs one service call to completion from synchronous code (the main
/// thread or a writer thread). A call that needs no I/O completes on its
/// first poll: the overhead is one enter and one poll (well under a
/// microsecond), included in the in-process figures.
fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    RUNTIME.get().expect("the runtime is set first thing in main").block_on(f)
}

fn main() -> Result<(), String> {
    let args = Args::parse();
    let mut report = Report { rows: Vec::new() };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    RUNTIME.set(rt.handle().clone()).map_err(|_| "runtime set twice".to_owned())?;

    // -------------------------------------------------------------- graph
    let graph = workload::Graph::parse(&args.graph)?;
    eprintln!("loading {} …", graph.describe());
    let edges = workload::edges(&graph, &args.data, args.seed, 5000)?;
    let mut by_follower: HashMap<u64, Vec<UserId>> = HashMap::new();
    let mut followers: HashMap<u64, u64> = HashMap::new();
    for &(a, b) in &edges {
        by_follower.entry(a).or_default().push(UserId(b));
        *followers.entry(b).or_default() += 1;
        followers.entry(a).or_default();
    }
    let users: Vec<u64> = {
        let mut u: Vec<u64> = followers.keys().copied().collect();
        u.sort_unstable();
        u
    };
    eprintln!("{} users, {} follows", users.len(), edges.len());

    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let opts =
        ServiceOptions { max_following: 5000, chunks_in_flight: args.chunks_in_flight, ..ServiceOptions::default() };
    type GraphBytes = Box<dyn Fn() -> usize>;
    let (backend, graph_bytes): (Arc<dyn Backend>, GraphBytes) = match args.backend.as_str() {
        "memory" => {
            let s = Arc::new(Store::in_memory(opts.max_len));
            (s.clone(), Box::new(move || s.state().graph_bytes()))
        }
        "embedded" => {
            let sync =
                if args.fsync { tideway_store_fjall::SyncMode::Fsync } else { tideway_store_fjall::SyncMode::Buffer };
            let cache = tideway_service::config::ByteSize::parse(&args.cache_size)?.0;
            let s = Arc::new(
                tideway_store_fjall::open_cached(dir.path(), sync, opts.max_len, cache).map_err(|e| e.to_string())?,
            );
            (s.clone(), Box::new(move || s.state().graph_bytes()))
        }
        other => return Err(format!("--backend {other}: expected embedded or memory")),
    };
    let svc = Arc::new(
        block(FeedService::new(backend.clone(), opts.clone(), Arc::new(SystemClock))).map_err(|e| e.to_string())?,
    );
    let worker = FanoutWorker::new(svc.clone());

    let t = Instant::now();
    let rss_graph = rss_bytes();
    let mut batches = 0usize;
    let bar = indicatif::ProgressBar::new(edges.len() as u64).with_style(
        indicatif::ProgressStyle::with_template("  loading follows {bar:40} {pos}/{len} ({per_sec}, eta {eta})")
            .map_err(|e| e.to_string())?,
    );
    for (&u, targets) in &by_follower {
        for chunk in targets.chunks(1000) {
            block(svc.follow_many(UserId(u), chunk)).map_err(|e| e.to_string())?;
            batches += 1;
            bar.inc(chunk.len() as u64);
        }
    }
    bar.finish_and_clear();
    let load_s = t.elapsed().as_secs_f64();
    report.row(
        "graph load (batch follow, one storage round each)",
        format!("{:.1} s, {:.0} follows/s, {batches} batches", load_s, edges.len() as f64 / load_s),
        String::new(),
    );
    let follows = edges.len().max(1) as f64;
    report.row(
        "follow graph in memory per follow (both directions)",
        format!(
            "{:.1} B in the sorted blocks; process RSS grew {:.1} B per follow while loading (journal buffers included)",
            graph_bytes() as f64 / follows,
            rss_bytes().saturating_sub(rss_graph) as f64 / follows
        ),
        String::new(),
    );

    // Every user reads once: all are active readers with an inbox.
    let t = Instant::now();
    for &u in &users {
        block(svc.home(UserId(u), &PageRequest { limit: 1, ..Default::default() })).map_err(|e| e.to_string())?;
    }
    eprintln!("activated {} readers in {:.1} s", users.len(), t.elapsed().as_secs_f64());

    // -------------------------------------------------------------- posts
    let weights: Vec<u64> = users.iter().map(|u| followers[u].max(1)).collect();
    let dist = WeightedIndex::new(&weights).map_err(|e| e.to_string())?;
    let mut rng = StdRng::seed_from_u64(args.seed);
    let rss_before = rss_bytes();
    let t = Instant::now();
    let mut posted: Vec<(u64, u64)> = Vec::with_capacity(args.posts);
    if matches!(graph, workload::Graph::Higgs) {
        let events = workload::higgs_events(&args.data, args.posts)?;
        let (first, last) = (events.first().map_or(0, |e| e.0), events.last().map_or(0, |e| e.0));
        let n = replay_higgs(&svc, &events, &mut posted)?;
        let secs = t.elapsed().as_secs_f64();
        // The trace's busiest hour: 45,861 events (shared/data/README.md).
        let peak = 45_861.0 / 3600.0;
        report.row(
            "Higgs trace replay (RT → repost, MT → mention, RE → reply; durable, one thread)",
            format!(
                "{} events ({:.1} h of the trace) + {} originals in {secs:.1} s: {:.0} events/s",
                events.len(),
                (last - first) as f64 / 3600.0,
                n - events.len(),
                events.len() as f64 / secs
            ),
            format!("the trace's peak hour is {peak:.1} events/s → ×{:.0} headroom", events.len() as f64 / secs / peak),
        );
    } else {
        for _ in 0..args.posts {
            let a = users[dist.sample(&mut rng)];
            let mut new = NewItem::new(UserId(a), ItemKind::Post);
            let text = if args.body_bytes == 0 { "benchmark post".to_owned() } else { "x".repeat(args.body_bytes) };
            new.body.insert("text".to_owned(), serde_json::Value::from(text));
            let (item, _) = block(svc.create_item(new)).map_err(|e| e.to_string())?;
            posted.push((item.item.id.0, a));
        }
        let post_s = t.elapsed().as_secs_f64();
        report.row(
            "item writes (durable before ack, one thread)",
            format!("{:.0} items/s", args.posts as f64 / post_s),
            String::new(),
        );
    }
    let authors: Vec<u64> = posted.iter().map(|(_, a)| *a).collect();

    let expected: u64 = authors.iter().map(|a| followers.get(a).copied().unwrap_or(0)).sum();
    let t = Instant::now();
    let mut delivered = 0usize;
    let mut fan_series: Vec<(f64, f64)> = vec![(0.0, 0.0)];
    while let tideway_service::StepOutcome::Progress { deliveries, .. } =
        block(worker.step()).map_err(|e| e.to_string())?
    {
        delivered += deliveries;
        let now = t.elapsed().as_secs_f64();
        if now - fan_series.last().map_or(0.0, |p| p.0) >= 0.05 {
            fan_series.push((now, delivered as f64));
        }
    }
    let fan_s = t.elapsed().as_secs_f64();
    fan_series.push((fan_s, delivered as f64));
    let rss_after = rss_bytes();
    let our_rate = delivered as f64 / fan_s;
    eprintln!("delivered {delivered} of {expected} planned in {fan_s:.2} s");

    // -------------------------------------------------------------- memory
    let ib = block(backend.inbox_stats()).map_err(|e| e.to_string())?;
    let per_entry = ib.bytes as f64 / ib.entries.max(1) as f64;
    let rss_per = (rss_after.saturating_sub(rss_before)) as f64 / ib.entries.max(1) as f64;

    // -------------------------------------------------------------- redis baseline
    let redis = if args.redis.is_empty() {
        None
    } else {
        redis_baseline(&args, &posted, &svc).inspect_err(|e| eprintln!("Redis baseline skipped: {e}")).ok()
    };
    match &redis {
        Some(r) => report.row(
            "fan-out deliveries/s (one thread)",
            format!("{our_rate:.0} ({delivered} deliveries in {fan_s:.2} s)"),
            format!("Redis ZADD+trim pipelined: {:.0}/s → ×{:.1}", r.rate, our_rate / r.rate),
        ),
        None => {
            report.row("fan-out deliveries/s (one thread)", format!("{our_rate:.0}"), "Redis baseline skipped".into())
        }
    }
    let redis_bytes = redis.as_ref().map(|r| r.bytes_per_entry);
    report.row(
        "memory per inbox entry (deque bytes / entries)",
        format!("{per_entry:.1} B ({} entries in {} inboxes)", ib.entries, ib.inboxes),
        redis_bytes.map_or(String::new(), |b| format!("Redis sorted set: {b:.0} B → ×{:.1} smaller", b / per_entry)),
    );
    report.row(
        "process RSS growth during posts+fan-out / inbox entry",
        format!("{rss_per:.1} B (includes items, outboxes, jobs)"),
        String::new(),
    );

    // -------------------------------------------------------------- reads in-process
    let readers: Vec<u64> = users.iter().copied().filter(|u| by_follower.contains_key(u)).collect();
    let mut h = hist()?;
    let mut entries_seen = 0usize;
    for _ in 0..args.reads {
        let u = readers[rng.random_range(0..readers.len())];
        let t = Instant::now();
        let page =
            block(svc.home(UserId(u), &PageRequest { limit: 20, ..Default::default() })).map_err(|e| e.to_string())?;
        h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        entries_seen += page.entries.len();
    }
    let (p50, p99, p999) = percentiles(&h);
    report.row(
        "home first page (20), in-process",
        format!(
            "p50 {p50:.1} µs, p99 {p99:.1} µs, p99.9 {p999:.1} µs (avg {:.1} entries)",
            entries_seen as f64 / args.reads as f64
        ),
        String::new(),
    );
    // Past the cap: page 41 (entries 801–820) comes from the outboxes.
    let mut hdeep = hist()?;
    let heavy: Vec<u64> = readers.iter().copied().filter(|u| by_follower[u].len() >= 200).take(200).collect();
    for &u in &heavy {
        let first =
            block(svc.home(UserId(u), &PageRequest { limit: 100, ..Default::default() })).map_err(|e| e.to_string())?;
        let mut cursor = first.next_cursor;
        for _ in 0..7 {
            let Some(c) = cursor else { break };
            cursor = block(svc.home(UserId(u), &PageRequest { limit: 100, before: Some(c), after: None }))
                .map_err(|e| e.to_string())?
                .next_cursor;
        }
        if let Some(c) = cursor {
            let t = Instant::now();
            block(svc.home(UserId(u), &PageRequest { limit: 20, before: Some(c), after: None }))
                .map_err(|e| e.to_string())?;
            hdeep.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
    }
    if !hdeep.is_empty() {
        let (p50, p99, _) = percentiles(&hdeep);
        report.row(
            "home page past the cap (entries 801–820, pulled), in-process",
            format!("p50 {p50:.1} µs, p99 {p99:.1} µs ({} readers following ≥200)", hdeep.len()),
            String::new(),
        );
    }

    // -------------------------------------------------------------- reads over HTTP
    let (hp50, hp99, rps) = rt.block_on(http_reads(&args, svc.clone(), &readers))?;
    report.row(
        "home first page (20) over HTTP, loopback",
        format!(
            "p50 {hp50:.0} µs, p99 {hp99:.0} µs at {rps:.0} req/s ({} in flight, client on the same 2 cores)",
            args.http_concurrency
        ),
        String::new(),
    );

    // -------------------------------------------------------------- pages of 50 (as the SQL baseline)
    let mut rng50 = StdRng::seed_from_u64(args.seed + 50);
    let sample: Vec<u64> = (0..2000).map(|_| readers[rng50.random_range(0..readers.len())]).collect();
    let mut h50 = hist()?;
    for &u in &sample {
        let t = Instant::now();
        block(svc.home(UserId(u), &PageRequest { limit: 50, ..Default::default() })).map_err(|e| e.to_string())?;
        h50.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
    }

    // -------------------------------------------------------------- returning readers
    let with_posts: Vec<u64> = {
        let mut v: Vec<u64> = posted.iter().map(|(_, a)| *a).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let mut returning: Vec<(u64, Vec<u64>)> = Vec::new();
    for r in 0..args.returning as u64 {
        let mut pick: Vec<u64> = Vec::with_capacity(args.returning_follows);
        let mut seen = std::collections::HashSet::new();
        while pick.len() < args.returning_follows.min(with_posts.len()) {
            let a = with_posts[rng50.random_range(0..with_posts.len())];
            if seen.insert(a) {
                pick.push(a);
            }
        }
        returning.push((8_000_000_000_000 + r, pick));
    }
    let mut hret = hist()?;
    for (r, targets) in &returning {
        let ids: Vec<UserId> = targets.iter().map(|t| UserId(*t)).collect();
        for chunk in ids.chunks(1000) {
            block(svc.follow_many(UserId(*r), chunk)).map_err(|e| e.to_string())?;
        }
        let t = Instant::now();
        let page =
            block(svc.home(UserId(*r), &PageRequest { limit: 50, ..Default::default() })).map_err(|e| e.to_string())?;
        hret.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        if page.entries.len() != 50 {
            return Err(format!("returning reader {r}: {} entries", page.entries.len()));
        }
    }

    // -------------------------------------------------------------- SQL pull baselines
    let item_rows: Vec<(u64, u64, i64)> =
        posted.iter().map(|(id, a)| (*id, *a, tideway_core::ids::key_time(*id).0)).collect();
    // The SQL reads touch only the follow rows of the readers they measure;
    // past 20M follows, loading every row would take longer than the rest
    // of the run (and hold the rows as text), so `auto` loads those rows.
    let sql_edges: std::borrow::Cow<[(u64, u64)]> =
        if args.sql_follows == "readers" || (args.sql_follows == "auto" && edges.len() > 20_000_000) {
            let readers: std::collections::HashSet<u64> = sample.iter().copied().collect();
            let rows: Vec<(u64, u64)> = edges.iter().filter(|e| readers.contains(&e.0)).copied().collect();
            report.row(
                "SQL baselines: follow rows loaded",
                format!(
                    "{} of {} (only the measured readers' rows: --sql-follows {})",
                    rows.len(),
                    edges.len(),
                    args.sql_follows
                ),
                String::new(),
            );
            rows.into()
        } else {
            edges[..].into()
        };
    let mut sqls = Vec::new();
    for (db, url) in [(sql::Db::Postgres, &args.postgres), (sql::Db::MariaDb, &args.mariadb)] {
        if url.is_empty() {
            continue;
        }
        let mix_spec = [(100u32, args.mix_ops), (1u32, args.mix_ops / 10)];
        match rt.block_on(sql::run(db, url, &sql_edges, &item_rows, &sample, &returning, &mix_spec)) {
            Ok(f) => sqls.push(f),
            Err(e) => eprintln!("{} baseline skipped: {e}", db.name()),
        }
    }

    // -------------------------------------------------------------- celebrities
    let celeb = celebrities(&args, &svc, &users)?;
    let redis_celeb = if args.redis.is_empty() {
        None
    } else {
        redis_celebrities(&args).inspect_err(|e| eprintln!("Redis celebrity baseline skipped: {e}")).ok()
    };

    // -------------------------------------------------------------- read:write mixes
    let mut mix_rows = Vec::new();
    for (ratio, n) in [(100u32, args.mix_ops), (1u32, args.mix_ops / 10)] {
        let ours = mix_tideway(&svc, &readers, &users, &dist, ratio, n, args.seed)?;
        let redis_mix = if args.redis.is_empty() {
            None
        } else {
            mix_redis(&args, &svc, &readers, &users, &dist, ratio, n)
                .inspect_err(|e| eprintln!("Redis mix baseline skipped: {e}"))
                .ok()
        };
        mix_rows.push((ratio, n, ours, redis_mix));
    }

    // -------------------------------------------------------------- HTTP at a fixed rate
    let mut fixed_runs = Vec::new();
    for &rate in &args.http_rate {
        fixed_runs.push((rate, rt.block_on(http_fixed_rate(&args, rate, svc.clone(), &readers))?));
    }

    // -------------------------------------------------------------- likes
    let item_ids: Vec<tideway_core::ItemId> = posted.iter().map(|(id, _)| tideway_core::ItemId(*id)).collect();
    let threads = args.like_threads.max(1);
    let given = (args.likes / threads * threads) as u64;
    let (hot_rate, hot_count) = likes_phase(&svc, &item_ids, args.likes, threads, true)?;
    let (many_rate, _) = likes_phase(&svc, &item_ids, args.likes, threads, false)?;
    if hot_count != given {
        return Err(format!("hot item counted {hot_count} likes for {given} given"));
    }
    let redis_likes = if args.redis.is_empty() { None } else { redis_likes(&args, &item_ids).ok() };
    let ratio = |ours: f64, theirs: Option<(f64, f64)>, hot: bool| {
        theirs.map_or(String::new(), |(h, m)| {
            let t = if hot { h } else { m };
            format!("Redis SADD+HINCRBY, {threads} clients (no persistence): {t:.0}/s → ×{:.1}", ours / t)
        })
    };
    report.row(
        &format!(
            "likes/s on one hot item ({threads} writers, {}, distinct users)",
            if args.fsync { "fsync" } else { "buffer" }
        ),
        format!("{hot_rate:.0} (count exact: {hot_count})"),
        ratio(hot_rate, redis_likes, true),
    );
    report.row(
        &format!("likes/s on random items ({threads} writers, {})", if args.fsync { "fsync" } else { "buffer" }),
        format!("{many_rate:.0}"),
        ratio(many_rate, redis_likes, false),
    );

    // -------------------------------------------------------------- comparison rows
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let vs = |ours: f64, name: &str, theirs: f64| format!("{name}: {theirs:.0} µs → ×{:.1}", theirs / ours);
    let mut cmp50 = Vec::new();
    let mut cmp_ret = Vec::new();
    for f in &sqls {
        cmp50.push(format!(
            "{}; {}",
            vs(us(&h50, 0.5), &format!("{} p50", f.db.name()), us(&f.read, 0.5)),
            vs(us(&h50, 0.99), "p99", us(&f.read, 0.99))
        ));
        cmp_ret.push(format!(
            "{}; {}",
            vs(us(&hret, 0.5), &format!("{} p50", f.db.name()), us(&f.returning, 0.5)),
            vs(us(&hret, 0.99), "p99", us(&f.returning, 0.99))
        ));
    }
    report.row(
        "home page of 50, in-process (same readers as SQL)",
        format!("p50 {:.1} µs, p99 {:.1} µs", us(&h50, 0.5), us(&h50, 0.99)),
        cmp50.join("<br>"),
    );
    report.row(
        &format!("returning reader's first page of 50 (follows {}, inbox rebuilt)", args.returning_follows),
        format!("p50 {:.0} µs, p99 {:.0} µs ({} readers)", us(&hret, 0.5), us(&hret, 0.99), args.returning),
        cmp_ret.join("<br>"),
    );
    for f in &sqls {
        report.row(
            &format!("{}: storage per item (table + covering index)", f.db.name()),
            format!("{:.0} B per item; load {:.1} s; insert p50 {:.2} ms", f.bytes_per_item, f.load_s, f.insert_ms_p50),
            "pull model: nothing materialised per reader".into(),
        );
    }
    let sql_readable: Vec<String> = sqls
        .iter()
        .map(|f| format!("{}: readable at commit, insert p50 {:.2} ms", f.db.name(), f.insert_ms_p50))
        .collect();
    for (label, ours, theirs) in [
        (
            "time until a 10,000-follower post is readable by all (hot: pulled)".to_owned(),
            celeb.hot10k_ms,
            redis_celeb.map(|r| r.0),
        ),
        (
            format!("time until a {}-follower post is readable by all (hot: pulled)", args.celebrity),
            celeb.hot1m_ms,
            redis_celeb.map(|r| r.1),
        ),
    ] {
        let mut base = theirs.map_or(String::new(), |t| format!("Redis push: {t:.0} ms → ×{:.0}", t / ours.max(0.001)));
        if !sql_readable.is_empty() {
            base = format!("{base}<br>{}", sql_readable.join("<br>"));
        }
        report.row(&label, format!("{ours:.2} ms (post acknowledged; confirmed on sampled followers)"), base);
    }
    report.row(
        "time until a 9,999-follower post reaches every inbox (push path)",
        format!("{:.1} ms", celeb.push10k_ms),
        String::new(),
    );
    for (rate, fixed) in &fixed_runs {
        report.row(
            &format!("home first page (20) over HTTP at a fixed {rate} req/s (client on the same 2 cores)"),
            format!(
                "p50 {:.0} µs, p99 {:.0} µs, achieved {:.0} req/s; schedule lag p99 {:.0} µs (client timer ticks are 1 ms)",
                us(&fixed.0, 0.5),
                us(&fixed.0, 0.99),
                fixed.1,
                us(&fixed.2, 0.99)
            ),
            String::new(),
        );
    }

    for (ratio, n, ours, redis_mix) in &mix_rows {
        let mut base: Vec<String> = Vec::new();
        if let Some((ops, p99)) = redis_mix {
            base.push(format!(
                "Redis push (fan-out in the write): {ops:.0} ops/s → ×{:.1}, read p99 {p99:.0} µs",
                ours.0 / ops
            ));
        }
        for f in &sqls {
            if let Some((_, ops, p99)) = f.mixes.iter().find(|m| m.0 == *ratio) {
                base.push(format!("{} pull: {ops:.0} ops/s → ×{:.1}, read p99 {p99:.0} µs", f.db.name(), ours.0 / ops));
            }
        }
        report.row(
            &format!("read:write {ratio}:1 mix ({n} ops, one client, durable writes, fan-out running)"),
            format!("{:.0} ops/s, read p99 {:.0} µs", ours.0, ours.1),
            base.join("<br>"),
        );
    }

    // -------------------------------------------------------------- table
    let mut series = vec![("tideway in-process, page of 50".to_owned(), h50.clone())];
    for (rate, fixed) in &fixed_runs {
        series.push((format!("tideway over HTTP at {rate}/s"), fixed.0.clone()));
    }
    for f in &sqls {
        series.push((format!("{} pull, page of 50", f.db.name()), f.read.clone()));
    }
    let title = format!(
        "{} ({} users, {} follows), {} posts, backend {}",
        graph.describe(),
        users.len(),
        edges.len(),
        args.posts,
        args.backend
    );
    let path = report::write(
        &args.report,
        &title,
        &report.rows,
        &series,
        &fan_series,
        redis.as_ref().map(|r| r.series.as_slice()),
    )?;
    eprintln!("report: {}", path.display());
    println!(
        "## tideway-bench: {} ({} users, {} follows), {} posts, backend {}",
        graph.describe(),
        users.len(),
        edges.len(),
        args.posts,
        args.backend
    );
    println!();
    println!("| measure | tideway | baseline (same run) |");
    println!("|---|---|---|");
    for (a, b, c) in &report.rows {
        println!("| {a} | {b} | {c} |");
    }
    Ok(())
}

/// `n` likes from `threads` threads, by distinct new users, on one item (`hot`) or
/// on random items; returns likes/s and the final like count of the hot item.
fn likes_phase(
    svc: &Arc<FeedService>,
    items: &[tideway_core::ItemId],
    n: usize,
    threads: usize,
    hot: bool,
) -> Result<(f64, u64), String> {
    let per = n / threads;
    let base = if hot { 9_000_000_000u64 } else { 9_500_000_000u64 };
    let t = Instant::now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|th| {
                scope.spawn(move || -> Result<(), String> {
                    let mut rng = StdRng::seed_from_u64(7 + th as u64);
                    for i in 0..per {
                        let user = UserId(base + (th * per + i) as u64);
                        let item = if hot { items[0] } else { items[rng.random_range(0..items.len())] };
                        block(svc.react(item, user, "like", true)).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| h.join().map_err(|_| "like thread panicked".to_owned())?)
    })?;
    let rate = (per * threads) as f64 / t.elapsed().as_secs_f64();
    let count = if hot {
        block(svc.get_items(&items[..1], None))
            .map_err(|e| e.to_string())?
            .first()
            .map_or(0, |v| v.counts.of_kind("like"))
    } else {
        0
    };
    eprintln!("likes ({}): {rate:.0}/s", if hot { "one hot item" } else { "many items" });
    Ok((rate, count))
}

/// The seeds' like: `SADD likes:<item> <user>` + `HINCRBY counts:<item> like 1`,
/// one round trip per like, `--like-threads` clients. Returns (hot, many) likes/s.
fn redis_likes(args: &Args, items: &[tideway_core::ItemId]) -> Result<(f64, f64), String> {
    let prefix = format!("tideway-bench:{}:", std::process::id());
    let threads = args.like_threads.max(1) as u64;
    let run = |hot: bool| -> Result<f64, String> {
        let per = args.likes / threads as usize;
        let t = Instant::now();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let prefix = prefix.clone();
                    scope.spawn(move || -> Result<(), String> {
                        let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
                        let mut con =
                            client.get_connection_with_timeout(Duration::from_secs(2)).map_err(|e| e.to_string())?;
                        let mut rng = StdRng::seed_from_u64(11 + th);
                        for i in 0..per as u64 {
                            let item = if hot { items[0] } else { items[rng.random_range(0..items.len())] };
                            let user = th * 1_000_000_000 + i;
                            redis::pipe()
                                .cmd("SADD")
                                .arg(format!("{prefix}likes:{}", item.0))
                                .arg(user)
                                .ignore()
                                .cmd("HINCRBY")
                                .arg(format!("{prefix}counts:{}", item.0))
                                .arg("like")
                                .arg(1)
                                .ignore()
                                .query::<()>(&mut con)
                                .map_err(|e| e.to_string())?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().map_err(|_| "redis thread panicked".to_owned())?)
        })?;
        Ok((per * threads as usize) as f64 / t.elapsed().as_secs_f64())
    };
    let hot = run(true)?;
    let many = run(false)?;
    // Clean up what the baseline wrote.
    let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
    let mut con = client.get_connection().map_err(|e| e.to_string())?;
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}*")).query(&mut con).map_err(|e| e.to_string())?;
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query(&mut con).map_err(|e| e.to_string())?;
    }
    eprintln!("Redis likes: hot {hot:.0}/s, many {many:.0}/s");
    Ok((hot, many))
}

struct RedisFigures {
    rate: f64,
    bytes_per_entry: f64,
    /// (seconds, deliveries so far) during the replay.
    series: Vec<(f64, f64)>,
}

/// One delivery of the seeds' push design: `ZADD timeline <id> <id>`, then
/// trim the timeline to its newest 800 entries.
fn redis_push(p: &mut redis::Pipeline, timeline: &str, id: u64) {
    p.cmd("ZADD").arg(timeline).arg(id).arg(id).ignore();
    p.cmd("ZREMRANGEBYRANK").arg(timeline).arg(0).arg(-801).ignore();
}

/// The seeds' push design on the local Redis: for each item, for each follower,
/// `ZADD timeline:<f> <id> <id>` and `ZREMRANGEBYRANK timeline:<f> 0 -801`,
/// pipelined 1000 deliveries at a time. Replays the same items in the same
/// order to the same followers, up to `--redis-deliveries`.
fn redis_baseline(args: &Args, posted: &[(u64, u64)], svc: &FeedService) -> Result<RedisFigures, String> {
    let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2)).map_err(|e| {
        eprintln!("Redis baseline skipped: {e}");
        e.to_string()
    })?;
    let prefix = format!("tideway-bench:{}:", std::process::id());
    let used = |con: &mut redis::Connection| -> u64 {
        let info: String = redis::cmd("INFO").arg("memory").query(con).unwrap_or_default();
        info.lines().find_map(|l| l.strip_prefix("used_memory:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    };
    let mem_before = used(&mut con);
    let mut touched: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let mut pipe = redis::pipe();
    let mut in_pipe = 0usize;
    let mut done = 0usize;
    let mut series: Vec<(f64, f64)> = vec![(0.0, 0.0)];
    let t = Instant::now();
    'items: for &(id, author) in posted {
        let mut after = None;
        loop {
            let chunk = block(svc.backend().followers_chunk(UserId(author), after, 1000)).map_err(|e| e.to_string())?;
            for f in &chunk {
                redis_push(&mut pipe, &format!("{prefix}{}", f.1.0), id);
                touched.insert(f.1.0);
                in_pipe += 1;
                done += 1;
                if in_pipe == 1000 {
                    pipe.query::<()>(&mut con).map_err(|e| e.to_string())?;
                    pipe = redis::pipe();
                    in_pipe = 0;
                    let now = t.elapsed().as_secs_f64();
                    if now - series.last().map_or(0.0, |p: &(f64, f64)| p.0) >= 0.05 {
                        series.push((now, done as f64));
                    }
                }
                if done >= args.redis_deliveries {
                    break 'items;
                }
            }
            if chunk.len() < 1000 {
                break;
            }
            after = chunk.last().copied();
        }
    }
    if in_pipe > 0 {
        pipe.query::<()>(&mut con).map_err(|e| e.to_string())?;
    }
    let secs = t.elapsed().as_secs_f64();
    let mem_after = used(&mut con);
    let mut entries = 0u64;
    let keys: Vec<String> = touched.iter().map(|f| format!("{prefix}{f}")).collect();
    for chunk in keys.chunks(1000) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("ZCARD").arg(k);
        }
        let counts: Vec<u64> = p.query(&mut con).map_err(|e| e.to_string())?;
        entries += counts.iter().sum::<u64>();
        let _: () = redis::cmd("UNLINK").arg(chunk).query(&mut con).map_err(|e| e.to_string())?;
    }
    eprintln!(
        "Redis: {done} deliveries in {secs:.2} s, {entries} entries, {} bytes",
        mem_after.saturating_sub(mem_before)
    );
    series.push((secs, done as f64));
    Ok(RedisFigures {
        rate: done as f64 / secs,
        bytes_per_entry: mem_after.saturating_sub(mem_before) as f64 / entries.max(1) as f64,
        series,
    })
}

/// Closed-loop HTTP reads of home first pages against the real router on
/// loopback: `--http-concurrency` requests in flight.
async fn http_reads(args: &Args, svc: Arc<FeedService>, readers: &[u64]) -> Result<(f64, f64, f64), String> {
    let (addr, server) = start_http(svc).await?;
    let client = reqwest::Client::new();
    let per_task = args.http_reads / args.http_concurrency.max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..args.http_concurrency {
        let client = client.clone();
        let mut rng = StdRng::seed_from_u64(1000 + t as u64);
        let picks: Vec<u64> = (0..per_task).map(|_| readers[rng.random_range(0..readers.len())]).collect();
        tasks.push(tokio::spawn(async move {
            let mut h = hist()?;
            for u in picks {
                let t = Instant::now();
                get_home(&client, addr, u).await?;
                h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(h)
        }));
    }
    let mut all = hist()?;
    for t in tasks {
        let h = t.await.map_err(|e| e.to_string())??;
        all.add(&h).map_err(|e| e.to_string())?;
    }
    let secs = started.elapsed().as_secs_f64();
    server.abort();
    let (p50, p99, _) = percentiles(&all);
    Ok((p50, p99, all.len() as f64 / secs))
}

/// Times until posts of very followed accounts are readable.
struct Celebrity {
    hot10k_ms: f64,
    hot1m_ms: f64,
    push10k_ms: f64,
}

/// Follows `target` by every user of `followers`, from 16 threads (the
/// durable writes share fsyncs).
fn follow_from_many(svc: &Arc<FeedService>, followers: &[u64], target: UserId) -> Result<(), String> {
    std::thread::scope(|scope| {
        let hs: Vec<_> = followers
            .chunks(followers.len().div_ceil(16).max(1))
            .map(|chunk| {
                scope.spawn(move || -> Result<(), String> {
                    for &f in chunk {
                        block(svc.follow_many(UserId(f), &[target])).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter().try_for_each(|h| h.join().map_err(|_| "follow thread panicked".to_owned())?)
    })
}

/// Posts by a 10k-follower and a `--celebrity`-follower account (hot, so
/// pulled on read) and by a 9,999-follower account (pushed); confirms the
/// posts on sampled followers' first pages.
fn celebrities(args: &Args, svc: &Arc<FeedService>, users: &[u64]) -> Result<Celebrity, String> {
    let hot = svc.options().hot_followers;
    let post = |author: UserId| -> Result<(f64, u64), String> {
        let t = Instant::now();
        let (v, _) = block(svc.create_item(NewItem::new(author, ItemKind::Post))).map_err(|e| e.to_string())?;
        Ok((t.elapsed().as_secs_f64() * 1000.0, v.item.id.0))
    };
    let confirm = |followers: &[u64], id: u64| -> Result<(), String> {
        for &f in followers.iter().step_by((followers.len() / 200).max(1)) {
            let page = block(svc.home(UserId(f), &PageRequest { limit: 5, ..Default::default() }))
                .map_err(|e| e.to_string())?;
            if page.entries.first().map(|e| e.item.item.id.0) != Some(id) {
                return Err(format!("follower {f} does not see the celebrity's post first"));
            }
        }
        Ok(())
    };
    // 10k followers from the graph (active readers with inboxes).
    let c10 = UserId(7_000_000_000_000);
    let f10: Vec<u64> = users.iter().copied().take(hot as usize).collect();
    follow_from_many(svc, &f10, c10)?;
    let (hot10k_ms, id10) = post(c10)?;
    confirm(&f10, id10)?;
    // Just below the threshold: pushed; time until every inbox has it.
    let c9 = UserId(7_000_000_000_001);
    let f9: Vec<u64> = users.iter().copied().skip(20_000).take(hot as usize - 1).collect();
    follow_from_many(svc, &f9, c9)?;
    let worker = FanoutWorker::new(svc.clone());
    block(worker.drain()).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let (_, id9) = post(c9)?;
    block(worker.drain()).map_err(|e| e.to_string())?;
    let push10k_ms = t.elapsed().as_secs_f64() * 1000.0;
    confirm(&f9, id9)?;
    // A million synthetic followers.
    let c1m = UserId(6_000_000_000_000);
    let f1m: Vec<u64> = (0..args.celebrity).map(|i| 5_000_000_000_000 + i).collect();
    let t = Instant::now();
    follow_from_many(svc, &f1m, c1m)?;
    eprintln!("{} followers of the celebrity in {:.1} s", args.celebrity, t.elapsed().as_secs_f64());
    // The median of five posts: one write can land on an engine pause.
    let mut times = Vec::new();
    let mut id1m = 0;
    for _ in 0..5 {
        let (ms, id) = post(c1m)?;
        times.push(ms);
        id1m = id;
    }
    times.sort_by(f64::total_cmp);
    let hot1m_ms = times[2];
    eprintln!("1M-follower posts: median {hot1m_ms:.2} ms, max {:.2} ms", times[4]);
    confirm(&f1m, id1m)?;
    Ok(Celebrity { hot10k_ms, hot1m_ms, push10k_ms })
}

/// The push model's time until a 10k- and a `--celebrity`-follower post is
/// in every follower's timeline: pipelined ZADD + trim per follower.
fn redis_celebrities(args: &Args) -> Result<(f64, f64), String> {
    let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2)).map_err(|e| e.to_string())?;
    let prefix = format!("tideway-bench:{}:celeb:", std::process::id());
    let mut push = |n: u64, id: u64| -> Result<f64, String> {
        let t = Instant::now();
        let mut i = 0;
        while i < n {
            let mut p = redis::pipe();
            for f in i..(i + 1000).min(n) {
                redis_push(&mut p, &format!("{prefix}{f}"), id);
            }
            p.query::<()>(&mut con).map_err(|e| e.to_string())?;
            i += 1000;
        }
        Ok(t.elapsed().as_secs_f64() * 1000.0)
    };
    let ms10k = push(10_000, 1)?;
    let ms1m = push(args.celebrity, 2)?;
    let keys: Vec<String> = (0..args.celebrity).map(|f| format!("{prefix}{f}")).collect();
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query(&mut con).map_err(|e| e.to_string())?;
    }
    eprintln!("Redis celebrity push: 10k in {ms10k:.0} ms, {} in {ms1m:.0} ms", args.celebrity);
    Ok((ms10k, ms1m))
}

/// Open-loop HTTP reads at `--http-rate` for `--http-seconds`: requests are
/// scheduled at fixed times whatever the answers do. Latency counts from the
/// actual send; the lag of each send behind its schedule is kept apart (it
/// grows without bound when the server cannot keep up, and includes the
/// client timer's 1 ms ticks). Returns (latency, achieved rate, lag).
async fn http_fixed_rate(
    args: &Args,
    rate: u64,
    svc: Arc<FeedService>,
    readers: &[u64],
) -> Result<(Histogram<u64>, f64, Histogram<u64>), String> {
    let (addr, server) = start_http(svc).await?;
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build().map_err(|e| e.to_string())?;
    let lanes = 64u64;
    let total = rate * args.http_seconds;
    let interval = Duration::from_nanos(1_000_000_000 * lanes / rate.max(1));
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let client = client.clone();
        let mut rng = StdRng::seed_from_u64(5000 + lane);
        let picks: Vec<u64> = (0..total / lanes).map(|_| readers[rng.random_range(0..readers.len())]).collect();
        let offset = Duration::from_nanos(interval.as_nanos() as u64 * lane / lanes);
        tasks.push(tokio::spawn(async move {
            let mut h = hist()?;
            let mut lag = hist()?;
            for (i, u) in picks.into_iter().enumerate() {
                let intended = start + offset + interval * i as u32;
                tokio::time::sleep_until(intended).await;
                let sent = tokio::time::Instant::now();
                lag.record((sent - intended).as_nanos().max(1) as u64).map_err(|e| e.to_string())?;
                get_home(&client, addr, u).await?;
                h.record(sent.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            }
            Ok::<_, String>((h, lag))
        }));
    }
    let mut all = hist()?;
    let mut lags = hist()?;
    for t in tasks {
        let (h, lag) = t.await.map_err(|e| e.to_string())??;
        all.add(&h).map_err(|e| e.to_string())?;
        lags.add(&lag).map_err(|e| e.to_string())?;
    }
    let secs = (tokio::time::Instant::now() - start).as_secs_f64();
    server.abort();
    let rate = all.len() as f64 / secs;
    Ok((all, rate, lags))
}

/// Writes one item; records it in `posted` when it is new.
fn write_item(svc: &FeedService, new: NewItem, posted: &mut Vec<(u64, u64)>) -> Result<tideway_core::ItemId, String> {
    let author = new.author.0;
    let (v, created) = block(svc.create_item(new)).map_err(|e| e.to_string())?;
    if created {
        posted.push((v.item.id.0, author));
    }
    Ok(v.item.id)
}

/// Replays Higgs events: a repost or reply needs the target's latest
/// original, which is posted first when the target has none yet. Returns the
/// number of items written; `posted` gets each new (id, author).
fn replay_higgs(
    svc: &FeedService,
    events: &[(i64, workload::Event)],
    posted: &mut Vec<(u64, u64)>,
) -> Result<usize, String> {
    let before = posted.len();
    let mut latest: HashMap<u64, tideway_core::ItemId> = HashMap::new();
    for &(_, ev) in events {
        match ev {
            workload::Event::Repost { user, target } | workload::Event::Reply { user, target } => {
                let of = match latest.get(&target) {
                    Some(id) => *id,
                    None => {
                        let id = write_item(svc, NewItem::new(UserId(target), ItemKind::Post), posted)?;
                        latest.insert(target, id);
                        id
                    }
                };
                let n = if matches!(ev, workload::Event::Repost { .. }) {
                    NewItem { repost_of: Some(of), ..NewItem::new(UserId(user), ItemKind::Repost) }
                } else {
                    NewItem { reply_to: Some(of), ..NewItem::new(UserId(user), ItemKind::Reply) }
                };
                write_item(svc, n, posted)?;
            }
            workload::Event::Mention { user, target } => {
                let n = NewItem { mentions: vec![UserId(target)], ..NewItem::new(UserId(user), ItemKind::Post) };
                let id = write_item(svc, n, posted)?;
                latest.insert(user, id);
            }
        }
    }
    Ok(posted.len() - before)
}

/// A read:write mix against tideway: one client thread; writes are posts by
/// authors drawn by follower count; a worker thread keeps fan-out running as
/// the server does. Returns (ops/s, read p99 µs).
fn mix_tideway(
    svc: &Arc<FeedService>,
    readers: &[u64],
    users: &[u64],
    dist: &WeightedIndex<u64>,
    ratio: u32,
    n: usize,
    seed: u64,
) -> Result<(f64, f64), String> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut rng = StdRng::seed_from_u64(seed + u64::from(ratio));
    let mut reads = hist()?;
    let t = Instant::now();
    std::thread::scope(|scope| -> Result<(), String> {
        let worker = FanoutWorker::new(svc.clone());
        let stop = &stop;
        scope.spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(tideway_service::StepOutcome::Idle) = block(worker.step()) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        });
        let result = (|| {
            for i in 0..n {
                if i % (ratio as usize + 1) == ratio as usize {
                    let a = users[dist.sample(&mut rng)];
                    block(svc.create_item(NewItem::new(UserId(a), ItemKind::Post))).map_err(|e| e.to_string())?;
                } else {
                    let u = readers[rng.random_range(0..readers.len())];
                    let s = Instant::now();
                    block(svc.home(UserId(u), &PageRequest { limit: 20, ..Default::default() }))
                        .map_err(|e| e.to_string())?;
                    reads.record(s.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        })();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    })?;
    Ok((n as f64 / t.elapsed().as_secs_f64(), reads.value_at_quantile(0.99) as f64 / 1000.0))
}

/// The same mix on the seeds' Redis push design: a write pushes the item to
/// every follower's timeline (pipelined ZADD + trim) before it returns; a read
/// is ZREVRANGE of 20. Returns (ops/s, read p99 µs).
fn mix_redis(
    args: &Args,
    svc: &Arc<FeedService>,
    readers: &[u64],
    users: &[u64],
    dist: &WeightedIndex<u64>,
    ratio: u32,
    n: usize,
) -> Result<(f64, f64), String> {
    let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(2)).map_err(|e| e.to_string())?;
    let prefix = format!("tideway-bench:{}:mix:", std::process::id());
    let mut rng = StdRng::seed_from_u64(args.seed + 7 + u64::from(ratio));
    let mut reads = hist()?;
    let mut touched = std::collections::HashSet::new();
    let t = Instant::now();
    for i in 0..n {
        if i % (ratio as usize + 1) == ratio as usize {
            let a = users[dist.sample(&mut rng)];
            let mut after = None;
            loop {
                let chunk = block(svc.backend().followers_chunk(UserId(a), after, 1000)).map_err(|e| e.to_string())?;
                let mut p = redis::pipe();
                for f in &chunk {
                    redis_push(&mut p, &format!("{prefix}{}", f.1.0), i as u64);
                    touched.insert(f.1.0);
                }
                if !chunk.is_empty() {
                    p.query::<()>(&mut con).map_err(|e| e.to_string())?;
                }
                if chunk.len() < 1000 {
                    break;
                }
                after = chunk.last().copied();
            }
        } else {
            let u = readers[rng.random_range(0..readers.len())];
            let s = Instant::now();
            let _: Vec<String> = redis::cmd("ZREVRANGE")
                .arg(format!("{prefix}{u}"))
                .arg(0)
                .arg(19)
                .query(&mut con)
                .map_err(|e| e.to_string())?;
            reads.record(s.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        }
    }
    let ops = n as f64 / t.elapsed().as_secs_f64();
    let keys: Vec<String> = touched.iter().map(|f| format!("{prefix}{f}")).collect();
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query(&mut con).map_err(|e| e.to_string())?;
    }
    Ok((ops, reads.value_at_quantile(0.99) as f64 / 1000.0))
}

/// A latency histogram (1 ns .. 60 s, 3 significant digits).
fn hist() -> Result<Histogram<u64>, String> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())
}

/// Serves the real router (open, no metrics) on a loopback port.
async fn start_http(
    svc: Arc<FeedService>,
) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>), String> {
    let auth = tideway_http::Authenticator::new(&Default::default());
    let state = tideway_http::AppState::new(svc, auth, tideway_http::RateLimits::unlimited(), false, None);
    let app = tideway_http::router(state, Duration::from_secs(10));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The server the binary runs: its connection loop, no shutdown.
    let opts = tideway_http::ServeOptions {
        header_read_timeout: Duration::from_secs(30),
        max_connections: 10_000,
        shutdown_grace: Duration::from_secs(1),
    };
    Ok((addr, tokio::spawn(tideway_http::serve(listener, app, opts, std::future::pending()))))
}

/// Reads one home page of 20 over HTTP; a non-2xx answer is an error.
async fn get_home(client: &reqwest::Client, addr: std::net::SocketAddr, u: u64) -> Result<(), String> {
    let r = client.get(format!("http://{addr}/v1/users/{u}/home?limit=20")).send().await.map_err(|e| e.to_string())?;
    let ok = r.status().is_success();
    r.bytes().await.map_err(|e| e.to_string())?;
    if ok { Ok(()) } else { Err("HTTP read failed".to_owned()) }
}
