//! The comparison rows: tideway's figures kept by the phases beside the
//! baselines' (SQL pull, Redis push), in the report's order.

use crate::context::Bench;
use hdrhistogram::Histogram;

/// Adds the rows that compare the kept figures.
pub fn rows(b: &mut Bench) {
    let args = &b.args;
    let fig = &b.figures;
    let (sqls, h50, hret, celeb, redis_celeb) = (&fig.sqls, &fig.h50, &fig.hret, &fig.celeb, &fig.redis_celeb);
    let (fixed_runs, mix_rows) = (&fig.fixed_runs, &fig.mix_rows);
    let report = &mut b.report;
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let vs = |ours: f64, name: &str, theirs: f64| format!("{name}: {theirs:.0} µs → ×{:.1}", theirs / ours);
    let mut cmp50 = Vec::new();
    let mut cmp_ret = Vec::new();
    for f in sqls {
        cmp50.push(format!(
            "{}; {}",
            vs(us(h50, 0.5), &format!("{} p50", f.db.name()), us(&f.read, 0.5)),
            vs(us(h50, 0.99), "p99", us(&f.read, 0.99))
        ));
        cmp_ret.push(format!(
            "{}; {}",
            vs(us(hret, 0.5), &format!("{} p50", f.db.name()), us(&f.returning, 0.5)),
            vs(us(hret, 0.99), "p99", us(&f.returning, 0.99))
        ));
    }
    report.row(
        "home page of 50, in-process (same readers as SQL)",
        format!("p50 {:.1} µs, p99 {:.1} µs", us(h50, 0.5), us(h50, 0.99)),
        cmp50.join("<br>"),
    );
    if args.returning > 0 {
        report.row(
            &format!("returning reader's first page of 50 (follows {}, inbox rebuilt)", args.returning_follows),
            format!("p50 {:.0} µs, p99 {:.0} µs ({} readers)", us(hret, 0.5), us(hret, 0.99), args.returning),
            cmp_ret.join("<br>"),
        );
    }
    for f in sqls {
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
    let celebrity = (
        format!("time until a {}-follower post is readable by all (hot: pulled)", args.celebrity),
        celeb.hot1m_ms,
        redis_celeb.map(|r| r.1),
    );
    let ten_k = celeb.hot10k_ms.map(|ms| {
        ("time until a 10,000-follower post is readable by all (hot: pulled)".to_owned(), ms, redis_celeb.map(|r| r.0))
    });
    // (`--celebrity 0`: that account has no followers to time; a graph
    // too small for the 10k account leaves it out)
    for (label, ours, theirs) in ten_k.into_iter().chain((args.celebrity > 0).then_some(celebrity)) {
        let mut base = theirs.map_or(String::new(), |t| format!("Redis push: {t:.0} ms → ×{:.0}", t / ours.max(0.001)));
        if !sql_readable.is_empty() {
            base = format!("{base}<br>{}", sql_readable.join("<br>"));
        }
        report.row(&label, format!("{ours:.2} ms (post acknowledged; confirmed on sampled followers)"), base);
    }
    if let Some(ms) = celeb.push10k_ms {
        report.row(
            "time until a 9,999-follower post reaches every inbox (push path)",
            format!("{ms:.1} ms"),
            String::new(),
        );
    }
    for (rate, fixed) in fixed_runs {
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

    for (ratio, n, ours, redis_mix) in mix_rows {
        let mut base: Vec<String> = Vec::new();
        if let Some((ops, p99)) = redis_mix {
            base.push(format!(
                "Redis push (fan-out in the write): {ops:.0} ops/s → ×{:.1}, read p99 {p99:.0} µs",
                ours.0 / ops
            ));
        }
        for f in sqls {
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
}
