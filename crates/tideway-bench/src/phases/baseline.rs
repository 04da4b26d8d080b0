//! The seeds' Redis push baseline: the same deliveries replayed as pipelined
//! `ZADD` + trim on the local Redis (deliveries/s, bytes per entry).

use crate::Args;
use crate::context::{RedisFigures, block};
use std::time::{Duration, Instant};
use tideway_core::UserId;
use tideway_service::FeedService;

/// One delivery of the seeds' push design: `ZADD timeline <id> <id>`, then
/// trim the timeline to its newest 800 entries.
pub fn redis_push(p: &mut redis::Pipeline, timeline: &str, id: u64) {
    p.cmd("ZADD").arg(timeline).arg(id).arg(id).ignore();
    p.cmd("ZREMRANGEBYRANK").arg(timeline).arg(0).arg(-801).ignore();
}

/// The seeds' push design on the local Redis: for each item, for each follower,
/// `ZADD timeline:<f> <id> <id>` and `ZREMRANGEBYRANK timeline:<f> 0 -801`,
/// pipelined 1000 deliveries at a time. Replays the same items in the same
/// order to the same followers, up to `--redis-deliveries`.
pub fn redis_baseline(args: &Args, posted: &[(u64, u64)], svc: &FeedService) -> Result<RedisFigures, String> {
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
