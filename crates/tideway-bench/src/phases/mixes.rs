//! Read:write mixes (100:1 and 1:1, `--mix-ops` operations): one client,
//! durable writes, fan-out running; beside the Redis push design's.

use crate::Args;
use crate::context::{Bench, block, spawn};
use crate::measure::hist;
use crate::phases::baseline::redis_push;
use rand::distr::{Distribution, weighted::WeightedIndex};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_core::{ItemKind, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, PageRequest};

/// Runs each mix on tideway, then on Redis (unless `--redis ""`).
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, svc, readers, users, dist) = (&b.args, &b.svc, &b.readers, &b.users, &b.dist);
    let mut mix_rows = Vec::new();
    for (ratio, n) in [(100u32, args.mix_ops), (1u32, args.mix_ops / 10)] {
        let ours = mix_tideway(svc, readers, users, dist, ratio, n, args.seed)?;
        let redis_mix = if args.redis.is_empty() {
            None
        } else {
            mix_redis(args, svc, readers, users, dist, ratio, n)
                .inspect_err(|e| eprintln!("Redis mix baseline skipped: {e}"))
                .ok()
        };
        mix_rows.push((ratio, n, ours, redis_mix));
    }
    b.figures.mix_rows = mix_rows;
    Ok(())
}

/// A read:write mix against tideway: one client thread; writes are posts by
/// authors drawn by follower count; the fan-out worker runs on the runtime as
/// the server runs it (`FanoutWorker::run`: woken by the event hub when a
/// post makes work, asleep otherwise). Returns (ops/s, read p99 µs).
pub fn mix_tideway(
    svc: &Arc<FeedService>,
    readers: &[u64],
    users: &[u64],
    dist: &WeightedIndex<u64>,
    ratio: u32,
    n: usize,
    seed: u64,
) -> Result<(f64, f64), String> {
    let mut rng = StdRng::seed_from_u64(seed + u64::from(ratio));
    let ix_before = block(svc.ops.stats()).ok().and_then(|s| s.index);
    let mut reads = hist()?;
    let mut writes = hist()?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let worker = spawn(FanoutWorker::new(svc.clone()).run(cancel.clone()));
    let t = Instant::now();
    let result = (|| -> Result<(), String> {
        for i in 0..n {
            if i % (ratio as usize + 1) == ratio as usize {
                let a = users[dist.sample(&mut rng)];
                let s = Instant::now();
                block(svc.items.create_item(NewItem::new(UserId(a), ItemKind::Post))).map_err(|e| e.to_string())?;
                writes.record(s.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            } else {
                let u = readers[rng.random_range(0..readers.len())];
                let s = Instant::now();
                block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(20), ..Default::default() }))
                    .map_err(|e| e.to_string())?;
                reads.record(s.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    })();
    let secs = t.elapsed().as_secs_f64();
    cancel.cancel();
    block(worker).map_err(|e| format!("the fan-out worker failed: {e}"))?;
    result?;
    let ix_after = block(svc.ops.stats()).ok().and_then(|s| s.index);
    if let (Some(a), Some(b)) = (ix_before, ix_after) {
        eprintln!(
            "mix {ratio}:1: the index missed {} times, loaded {} units, let {} holders go ({} of {} MiB used)",
            b.misses - a.misses,
            b.loads - a.loads,
            b.evictions - a.evictions,
            b.bytes >> 20,
            b.budget >> 20
        );
    }
    let ms = |h: &hdrhistogram::Histogram<u64>| (h.len() as f64 * h.mean()) / 1e6;
    eprintln!(
        "mix {ratio}:1 on tideway: {n} ops in {:.0} ms: reads {:.0} ms (p50 {} µs), writes {:.0} ms (p50 {} µs, p99 {} µs)",
        secs * 1000.0,
        ms(&reads),
        reads.value_at_quantile(0.5) / 1000,
        ms(&writes),
        writes.value_at_quantile(0.5) / 1000,
        writes.value_at_quantile(0.99) / 1000,
    );
    Ok((n as f64 / secs, reads.value_at_quantile(0.99) as f64 / 1000.0))
}

/// The same mix on the seeds' Redis push design: a write pushes the item to
/// every follower's timeline (pipelined ZADD + trim) before it returns; a read
/// is ZREVRANGE of 20. Returns (ops/s, read p99 µs).
pub fn mix_redis(
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
