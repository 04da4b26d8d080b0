//! Graph load: the follows through batch follows (seconds, follows/s, memory
//! per follow), then every user reads once to become an active reader.

use crate::context::{Bench, block};
use crate::measure::rss_bytes;
use std::time::Instant;
use tideway_core::UserId;
use tideway_service::PageRequest;

/// Loads the follow graph; reports its load rate and memory per follow.
pub fn follows(b: &mut Bench) -> Result<(), String> {
    let (svc, edges, by_follower, graph_bytes) = (&b.svc, &b.edges, &b.by_follower, &b.graph_bytes);
    let report = &mut b.report;
    let t = Instant::now();
    let rss_graph = rss_bytes();
    let mut batches = 0usize;
    let bar = indicatif::ProgressBar::new(edges.len() as u64).with_style(
        indicatif::ProgressStyle::with_template("  loading follows {bar:40} {pos}/{len} ({per_sec}, eta {eta})")
            .map_err(|e| e.to_string())?,
    );
    for (&u, targets) in by_follower {
        for chunk in targets.chunks(1000) {
            block(svc.graph.follow_many(UserId(u), chunk)).map_err(|e| e.to_string())?;
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
    Ok(())
}

/// Every user reads once: all are active readers with an inbox.
pub fn activate_readers(b: &Bench) -> Result<(), String> {
    let (svc, users) = (&b.svc, &b.users);
    let t = Instant::now();
    for &u in users {
        block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(1), ..Default::default() }))
            .map_err(|e| e.to_string())?;
    }
    eprintln!("activated {} readers in {:.1} s", users.len(), t.elapsed().as_secs_f64());
    Ok(())
}
