//! Fan-out: the queued deliveries drained on one thread (deliveries/s), then
//! memory per inbox entry, each beside the Redis push baseline's.

use crate::context::{Bench, block};
use crate::measure::{hist, rss_bytes};
use crate::phases::baseline::redis_baseline;
use std::time::Instant;

/// Drains fan-out, measures the inboxes, runs the Redis push baseline
/// (unless `--redis ""`), and reports the three side by side.
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, svc, backend, worker, followers, posted) =
        (&b.args, &b.svc, &b.backend, &b.worker, &b.followers, &b.posted);
    let report = &mut b.report;
    let rss_before = b.figures.rss_before;
    let authors: Vec<u64> = posted.iter().map(|(_, a)| *a).collect();

    let expected: u64 = authors.iter().map(|a| followers.get(a).copied().unwrap_or(0)).sum();
    let t = Instant::now();
    let mut delivered = 0usize;
    let mut fan_series: Vec<(f64, f64)> = vec![(0.0, 0.0)];
    // Each step's time: the longest show where the worker waited (a
    // refill of the job window, a sync) rather than delivered.
    let mut steps = hist()?;
    let mut step_at = Instant::now();
    let mut slow = std::time::Duration::ZERO;
    while let tideway_service::StepOutcome::Progress { deliveries, .. } =
        block(worker.step()).map_err(|e| e.to_string())?
    {
        let took = step_at.elapsed();
        steps.record(took.as_nanos() as u64).map_err(|e| e.to_string())?;
        if took.as_millis() >= 10 {
            slow += took;
        }
        step_at = Instant::now();
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
    eprintln!(
        "fan-out steps: {}, p50 {} µs, p99 {} µs, longest {:.1} ms, {:.0} ms in steps of 10 ms or more",
        steps.len(),
        steps.value_at_quantile(0.5) / 1000,
        steps.value_at_quantile(0.99) / 1000,
        steps.max() as f64 / 1e6,
        slow.as_secs_f64() * 1e3
    );

    // -------------------------------------------------------------- memory
    let ib = block(backend.inbox_stats()).map_err(|e| e.to_string())?;
    let per_entry = ib.bytes as f64 / ib.entries.max(1) as f64;
    let rss_per = (rss_after.saturating_sub(rss_before)) as f64 / ib.entries.max(1) as f64;

    // -------------------------------------------------------------- redis baseline
    let redis = if args.redis.is_empty() {
        None
    } else {
        redis_baseline(args, posted, svc).inspect_err(|e| eprintln!("Redis baseline skipped: {e}")).ok()
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
    b.figures.fan_series = fan_series;
    b.figures.redis = redis;
    Ok(())
}
