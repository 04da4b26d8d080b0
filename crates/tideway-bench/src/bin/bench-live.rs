//! The live feed of a viewer following `--anchors` anchors (`--live` of them
//! live, `--upcoming` more with a session scheduled, every anchor with
//! `--ended` replays), beside the seeds' design measured in the same
//! process on the same Redis: a sorted set per anchor (seed 004's queue:
//! each anchor's sessions scored by part and time, the session JSON under
//! its own key), read for a page as one pipeline of a `ZREVRANGEBYSCORE …
//! LIMIT` per anchor, merged in the client, then one `MGET`.
//!
//! Measured, each `--reads` times: the first page (tideway: reads the open
//! sessions of every followed anchor and stores the walk's snapshot; the
//! baseline: its first page), a page inside the snapshot, and a page deep
//! in the replay part (the baseline: below the same score). Tideway runs on
//! the embedded store and, with `--postgres`, on PostgreSQL + Redis. The
//! sessions are stored through the backend (`Live::create_session`, in
//! their final state), not timed.
//!
//! ```text
//! eval "$(scripts/services.sh up)"
//! cargo run --release -p tideway-bench --bin bench-live -- \
//!     --postgres "$TIDEWAY_TEST_POSTGRES_URL" --redis "$TIDEWAY_TEST_REDIS_URL" \
//!     [--anchors 2000] [--live 100] [--upcoming 200] [--ended 10] [--reads 500]
//! ```

#![allow(clippy::print_stdout, reason = "a command whose output is its report")]

use clap::Parser;
use hdrhistogram::Histogram;
use std::time::Instant;
use tideway_config::SyncKind;
use tideway_core::live::Session;
use tideway_core::{Millis, UserId};
use tideway_service::Config;
use tideway_store_sql::testing::FreshDatabase;

use tideway_bench::setup;

use tideway_bench::measure;

use measure::{hist, percentiles};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 2000)]
    anchors: u64,
    #[arg(long, default_value_t = 100)]
    live: u64,
    #[arg(long, default_value_t = 200)]
    upcoming: u64,
    /// Ended sessions of every anchor.
    #[arg(long, default_value_t = 10)]
    ended: u64,
    #[arg(long, default_value_t = 500)]
    reads: usize,
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// A PostgreSQL server (a fresh database is made on it) for tideway on
    /// PostgreSQL + Redis.
    #[arg(long)]
    postgres: Option<String>,
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
}

type Res<T> = Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

const VIEWER: UserId = UserId(1_000_000);

/// Every session of the workload, as stored: anchors are users 1..=anchors;
/// the first `live` anchors have a live session, the next `upcoming` an
/// upcoming one; every anchor has `ended` replays.
fn sessions(args: &Args, now: Millis) -> Vec<Session> {
    let mut body = serde_json::Map::new();
    body.insert("title".into(), serde_json::json!("a session of the benchmark"));
    let body = tideway_core::Body::new(&body);
    let mut out = Vec::new();
    let mut id = 1u64 << 40;
    let mut next = || {
        id += 1;
        id
    };
    for a in 1..=args.anchors {
        let anchor = UserId(a);
        for e in 0..args.ended {
            let end = now.0 - ((a * 7919 + e * 104_729) % 30_000_000) as i64 - 1000;
            let mut s = Session::new(next(), anchor, Millis(end - 3_600_000), body.clone());
            s.started_at = Some(Millis(end - 3_000_000));
            s.ended_at = Some(Millis(end));
            out.push(s);
        }
        if a <= args.live {
            let mut s = Session::new(next(), anchor, Millis(now.0 - 600_000), body.clone());
            s.started_at = Some(Millis(now.0 - ((a * 7919) % 3_600_000) as i64));
            out.push(s);
        } else if a <= args.live + args.upcoming {
            out.push(Session::new(next(), anchor, Millis(now.0 + ((a * 7919) % 86_400_000) as i64), body.clone()));
        }
    }
    out
}

fn report(what: &str, h: &Histogram<u64>, base: Option<&Histogram<u64>>) {
    let (p50, p99, _) = percentiles(h);
    match base {
        Some(b) => {
            let (b50, b99, _) = percentiles(b);
            println!(
                "| {what} | {p50:.0} | {p99:.0} | {b50:.0} | {b99:.0} | ×{:.2} | ×{:.2} |",
                b50 / p50.max(0.001),
                b99 / p99.max(0.001)
            );
        }
        None => println!("| {what} | {p50:.0} | {p99:.0} | | | | |"),
    }
}

/// Tideway's pages on one engine: first, inside the snapshot, deep in replay.
async fn tideway(args: &Args, cfg: &Config) -> Res<[Histogram<u64>; 3]> {
    let svc = setup::service(cfg).await?;
    let backend = svc.backend().clone();
    let started = Instant::now();
    let all = sessions(args, svc.node().now());
    for chunk in all.chunks(64) {
        let writes = chunk.iter().map(|s| backend.create_session(s.clone(), usize::MAX));
        for ok in futures_util::future::join_all(writes).await {
            if !ok.map_err(err)? {
                return Err("a session was refused".into());
            }
        }
    }
    let anchors: Vec<UserId> = (1..=args.anchors).map(UserId).collect();
    for part in anchors.chunks(tideway_core::limits::MAX_BATCH_FOLLOW) {
        svc.graph.follow_many(VIEWER, part).await.map_err(err)?;
    }
    eprintln!("  {} sessions stored in {:.1} s", all.len(), started.elapsed().as_secs_f64());

    let (mut first, mut inside, mut deep) = (hist()?, hist()?, hist()?);
    let mut cursor = None;
    for _ in 0..args.reads {
        let t = Instant::now();
        let p = svc.live.page(VIEWER, None, Some(args.limit)).await.map_err(err)?;
        first.record(t.elapsed().as_nanos() as u64).map_err(err)?;
        cursor = p.next_cursor;
    }
    let cursor = cursor.ok_or("the first page has no next page")?;
    for _ in 0..args.reads {
        let t = Instant::now();
        svc.live.page(VIEWER, Some(&cursor), Some(args.limit)).await.map_err(err)?;
        inside.record(t.elapsed().as_nanos() as u64).map_err(err)?;
    }
    // Walk into the replay part: past every open session, then 10 pages.
    let mut c = cursor;
    let open = (args.live + args.upcoming) as usize;
    for _ in 0..(open / args.limit + 10) {
        let p = svc.live.page(VIEWER, Some(&c), Some(args.limit)).await.map_err(err)?;
        c = p.next_cursor.ok_or("the walk ended before the replay part")?;
    }
    for _ in 0..args.reads {
        let t = Instant::now();
        let p = svc.live.page(VIEWER, Some(&c), Some(args.limit)).await.map_err(err)?;
        deep.record(t.elapsed().as_nanos() as u64).map_err(err)?;
        if p.entries.iter().any(|s| s.ended_at.is_none()) {
            return Err("a deep page is not in the replay part".into());
        }
    }
    Ok([first, inside, deep])
}

/// The seeds' score of a session: live above upcoming above replay; within
/// each, the order of the feed (newest start, soonest start, latest end).
fn seed_score(s: &Session) -> f64 {
    const PART: f64 = 1e13;
    match (s.started_at, s.ended_at) {
        (_, Some(e)) => e.0 as f64,
        (Some(t), None) => 2.0 * PART + t.0 as f64,
        (None, None) => PART + (PART - s.scheduled_start.0 as f64),
    }
}

/// The seeds' design on Redis: the first page, and a page below the score
/// of the deep page's position.
async fn seeds(args: &Args) -> Res<[Histogram<u64>; 2]> {
    let client = redis::Client::open(args.redis.as_str()).map_err(err)?;
    let mut conn = client.get_multiplexed_async_connection().await.map_err(err)?;
    let prefix = format!("benchlive{}:", std::process::id());
    let all = sessions(args, Millis::now());
    for chunk in all.chunks(500) {
        let mut pipe = redis::pipe();
        for s in chunk {
            let json = serde_json::to_string(s).map_err(err)?;
            pipe.set(format!("{prefix}s:{}", s.id), json).ignore();
            pipe.zadd(format!("{prefix}live:{}", s.anchor.0), s.id, seed_score(s)).ignore();
        }
        let () = pipe.query_async(&mut conn).await.map_err(err)?;
    }
    let page = async |conn: &mut redis::aio::MultiplexedConnection, below: f64| -> Res<usize> {
        let mut pipe = redis::pipe();
        for a in 1..=args.anchors {
            pipe.cmd("ZREVRANGEBYSCORE")
                .arg(format!("{prefix}live:{a}"))
                .arg(format!("({below}"))
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(args.limit);
        }
        let per: Vec<Vec<(u64, f64)>> = pipe.query_async(conn).await.map_err(err)?;
        let mut merged: Vec<(u64, f64)> = per.into_iter().flatten().collect();
        merged.sort_by(|x, y| y.1.total_cmp(&x.1));
        merged.truncate(args.limit);
        let keys: Vec<String> = merged.iter().map(|(id, _)| format!("{prefix}s:{id}")).collect();
        let got: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query_async(conn).await.map_err(err)?;
        let sessions: Vec<Session> =
            got.into_iter().flatten().map(|j| serde_json::from_str(&j)).collect::<Result<_, _>>().map_err(err)?;
        Ok(sessions.len())
    };
    let (mut first, mut deep) = (hist()?, hist()?);
    for _ in 0..args.reads {
        let t = Instant::now();
        let n = page(&mut conn, f64::INFINITY).await?;
        first.record(t.elapsed().as_nanos() as u64).map_err(err)?;
        if n != args.limit {
            return Err(format!("the seeds' first page has {n} sessions"));
        }
    }
    // As deep as tideway's deep page: 10 pages into the replays.
    let mut ended: Vec<f64> = all.iter().filter(|s| s.ended_at.is_some()).map(seed_score).collect();
    ended.sort_by(|x, y| y.total_cmp(x));
    let below = ended.get(10 * args.limit).copied().unwrap_or(0.0);
    for _ in 0..args.reads {
        let t = Instant::now();
        page(&mut conn, below).await?;
        deep.record(t.elapsed().as_nanos() as u64).map_err(err)?;
    }
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        if !keys.is_empty() {
            let _: () = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await.map_err(err)?;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok([first, deep])
}

fn main() -> Res<()> {
    // Before the runtime starts its threads (mimalloc's options are not
    // synchronized).
    tideway_engines::allocator::tune();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(err)?.block_on(run())
}

async fn run() -> Res<()> {
    let args = Args::parse();
    eprintln!("the seeds' design: a sorted set per anchor on Redis");
    let base = seeds(&args).await?;
    eprintln!("tideway: embedded");
    let dir = tempfile::tempdir().map_err(err)?;
    let embedded = tideway(&args, &setup::embedded(dir.path(), SyncKind::Buffer)).await?;
    let shared = match &args.postgres {
        Some(base_url) => {
            eprintln!("tideway: PostgreSQL + Redis");
            let db = FreshDatabase::create(base_url).await.map_err(err)?;
            let cfg = setup::postgres(&db.url, &args.redis, format!("benchlive{}t:", std::process::id()));
            let f = tideway(&args, &cfg).await?;
            db.drop().await.map_err(err)?;
            Some(f)
        }
        None => None,
    };
    println!(
        "# live feed: a viewer following {} anchors ({} live, {} upcoming, {} replays each), pages of {}, {} reads",
        args.anchors, args.live, args.upcoming, args.ended, args.limit, args.reads
    );
    println!("| page | tideway p50 µs | p99 µs | seeds p50 µs | p99 µs | seeds/tideway p50 | p99 |");
    println!("|---|---|---|---|---|---|---|");
    let [first, inside, deep] = &embedded;
    report("embedded: first (takes the snapshot)", first, Some(&base[0]));
    report("embedded: inside the snapshot", inside, None);
    report("embedded: deep in replay", deep, Some(&base[1]));
    if let Some([first, inside, deep]) = &shared {
        report("PostgreSQL + Redis: first", first, Some(&base[0]));
        report("PostgreSQL + Redis: inside the snapshot", inside, None);
        report("PostgreSQL + Redis: deep in replay", deep, Some(&base[1]));
    }
    Ok(())
}
