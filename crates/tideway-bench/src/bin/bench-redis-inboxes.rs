//! Inboxes in Redis: tideway's packed inboxes (`tideway-store-redis`) beside
//! the seeds' design (a sorted set per timeline, `ZADD` then trimmed to 800
//! with `ZREMRANGEBYRANK`), in the same run on the same server: deliveries
//! per second, pipelined in chunks of followers as fan-out sends them, and
//! the server's memory per inbox entry once every inbox is full.
//!
//!   cargo run --release -p tideway-bench --bin bench-redis-inboxes -- \
//!       [--redis redis://127.0.0.1:6379] [--cluster redis://…,redis://…] [--users 5000] [--rounds 1200]
//!
//! Every user receives every key (`rounds` keys, so with rounds > 800 the
//! inboxes are full and trimming is part of the steady state).

use clap::Parser;
use std::sync::Arc;
use std::time::Instant;
use tideway_core::UserId;
use tideway_store::Inboxes;
use tideway_store_redis::{RedisOptions, RedisShared};

#[derive(Parser, Debug)]
struct Args {
    /// A single Redis: both designs run here, and its memory is measured.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// A Redis Cluster's node URLs (comma-separated): tideway's inboxes run
    /// there too (rate only).
    #[arg(long, default_value = "")]
    cluster: String,
    #[arg(long, default_value_t = 5000)]
    users: u64,
    /// Keys delivered to every user.
    #[arg(long, default_value_t = 1200)]
    rounds: u64,
    /// Followers per pipelined delivery (`fanout.chunk_size`).
    #[arg(long, default_value_t = 1000)]
    chunk: usize,
    /// Pipelines in flight (fan-out lanes).
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
}

const CAP: usize = 800;

fn used_memory(con: &mut redis::Connection) -> Result<u64, String> {
    let info: String = redis::cmd("INFO").arg("memory").query(con).map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "no used_memory in INFO".to_owned())
}

struct Figures {
    per_sec: f64,
    bytes_per_entry: Option<f64>,
}

/// Delivers `rounds` keys to every user through `deliver(key, chunk)`, with
/// `concurrency` chunks in flight.
async fn drive<F, Fut>(args: &Args, deliver: F) -> Result<(u64, f64), String>
where
    F: Fn(u64, Vec<UserId>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<(), String>> + Send,
{
    let users: Vec<UserId> = (1..=args.users).map(UserId).collect();
    let chunks: Vec<Vec<UserId>> = users.chunks(args.chunk).map(<[UserId]>::to_vec).collect();
    let t = Instant::now();
    let mut in_flight = tokio::task::JoinSet::new();
    let mut done = 0u64;
    for round in 0..args.rounds {
        let key = (1_700_000_000_000u64 + round) << 22;
        for c in &chunks {
            if in_flight.len() >= args.concurrency
                && let Some(r) = in_flight.join_next().await
            {
                r.map_err(|e| e.to_string())??;
            }
            let (d, c) = (deliver.clone(), c.clone());
            done += c.len() as u64;
            in_flight.spawn(async move { d(key, c).await });
        }
    }
    while let Some(r) = in_flight.join_next().await {
        r.map_err(|e| e.to_string())??;
    }
    Ok((done, t.elapsed().as_secs_f64()))
}

async fn packed(args: &Args, urls: Vec<String>, mem: Option<&mut redis::Connection>) -> Result<Figures, String> {
    let mut opts = RedisOptions::new(urls, CAP);
    opts.prefix = format!("bench{}:", std::process::id());
    let shared = Arc::new(RedisShared::connect(opts).await.map_err(|e| e.to_string())?);
    // Measured from before the inboxes exist: their keys are part of the cost.
    let mut mem = mem;
    let base = match mem.as_deref_mut() {
        Some(c) => Some(used_memory(c)?),
        None => None,
    };
    for u in 1..=args.users {
        shared.finish_rebuild(UserId(u), &[], 0).await.map_err(|e| e.to_string())?;
    }
    let s = shared.clone();
    let (n, secs) = drive(args, move |key, users| {
        let s = s.clone();
        async move { s.deliver(key, &users).await.map(|_| ()).map_err(|e| e.to_string()) }
    })
    .await?;
    let bytes_per_entry = match (mem, base) {
        (Some(c), Some(b)) => {
            let entries = args.users * args.rounds.min(CAP as u64);
            Some(used_memory(c)?.saturating_sub(b) as f64 / entries as f64)
        }
        _ => None,
    };
    shared.purge().await.map_err(|e| e.to_string())?;
    Ok(Figures { per_sec: n as f64 / secs, bytes_per_entry })
}

async fn sorted_sets(args: &Args, mem: &mut redis::Connection) -> Result<Figures, String> {
    let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
    let con = client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let prefix = format!("benchz{}:", std::process::id());
    let base = used_memory(mem)?;
    let p = prefix.clone();
    let (n, secs) = drive(args, move |key, users| {
        let (mut con, p) = (con.clone(), p.clone());
        async move {
            let mut pipe = redis::pipe();
            for u in users {
                let k = format!("{p}{}", u.0);
                pipe.cmd("ZADD").arg(&k).arg(key).arg(key).ignore();
                pipe.cmd("ZREMRANGEBYRANK").arg(&k).arg(0).arg(-(CAP as i64) - 1).ignore();
            }
            pipe.query_async::<()>(&mut con).await.map_err(|e| e.to_string())
        }
    })
    .await?;
    let entries = args.users * args.rounds.min(CAP as u64);
    let bytes = used_memory(mem)?.saturating_sub(base) as f64 / entries as f64;
    let keys: Vec<String> = (1..=args.users).map(|u| format!("{prefix}{u}")).collect();
    for chunk in keys.chunks(1000) {
        // DEL, not UNLINK: the memory is free before the next design measures.
        let _: () = redis::cmd("DEL").arg(chunk).query(mem).map_err(|e| e.to_string())?;
    }
    Ok(Figures { per_sec: n as f64 / secs, bytes_per_entry: Some(bytes) })
}

#[allow(clippy::print_stdout, reason = "the report is this command's output")]
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), String> {
    let args = Args::parse();
    let client = redis::Client::open(args.redis.as_str()).map_err(|e| e.to_string())?;
    let mut mem = client.get_connection().map_err(|e| e.to_string())?;
    eprintln!(
        "{} users × {} keys each ({} deliveries per design), chunks of {}, {} in flight",
        args.users,
        args.rounds,
        args.users * args.rounds,
        args.chunk,
        args.concurrency
    );
    let zset = sorted_sets(&args, &mut mem).await?;
    let ours = packed(&args, vec![args.redis.clone()], Some(&mut mem)).await?;
    let b = |f: &Figures| f.bytes_per_entry.map_or("-".to_owned(), |b| format!("{b:.1}"));
    println!("| design | deliveries/s | bytes per entry (server memory) |");
    println!("|---|---|---|");
    println!("| seeds: ZSET per timeline, ZADD + ZREMRANGEBYRANK | {:.0} | {} |", zset.per_sec, b(&zset));
    println!("| tideway: packed inbox, one script run per node and chunk | {:.0} | {} |", ours.per_sec, b(&ours));
    println!(
        "| ratio (tideway / seeds) | ×{:.2} | ×{:.2} smaller |",
        ours.per_sec / zset.per_sec,
        zset.bytes_per_entry.unwrap_or(0.0) / ours.bytes_per_entry.unwrap_or(f64::NAN)
    );
    if !args.cluster.is_empty() {
        let urls: Vec<String> = args.cluster.split(',').map(str::to_owned).collect();
        let c = packed(&args, urls, None).await?;
        println!(
            "| tideway on the Redis Cluster ({} nodes, one machine) | {:.0} | - |",
            args.cluster.split(',').count(),
            c.per_sec
        );
    }
    Ok(())
}
