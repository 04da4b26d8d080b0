//! In-process home reads: first pages of 20, a page past the inbox cap, and
//! pages of 50 (the readers the SQL baselines read).

use crate::context::{Bench, block};
use crate::measure::{hist, percentiles};
use rand::Rng;
use std::time::Instant;
use tideway_core::UserId;
use tideway_service::PageRequest;

/// Home first pages of 20 by random readers, then page 41 of heavy readers.
pub fn first_pages(b: &mut Bench) -> Result<(), String> {
    let (args, svc, users, by_follower) = (&b.args, &b.svc, &b.users, &b.by_follower);
    let (report, rng) = (&mut b.report, &mut b.rng);
    let readers: Vec<u64> = users.iter().copied().filter(|u| by_follower.contains_key(u)).collect();
    let mut h = hist()?;
    let mut entries_seen = 0usize;
    for _ in 0..args.reads {
        let u = readers[rng.random_range(0..readers.len())];
        let t = Instant::now();
        let page = block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(20), ..Default::default() }))
            .map_err(|e| e.to_string())?;
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
        let first = block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(100), ..Default::default() }))
            .map_err(|e| e.to_string())?;
        let mut cursor = first.next_cursor;
        for _ in 0..7 {
            let Some(c) = cursor else { break };
            cursor = block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(100), before: Some(c), after: None }))
                .map_err(|e| e.to_string())?
                .next_cursor;
        }
        if let Some(c) = cursor {
            let t = Instant::now();
            block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(20), before: Some(c), after: None }))
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
    b.readers = readers;
    Ok(())
}

/// Pages of 50 by 2,000 random readers, kept for the SQL comparison.
pub fn pages_of_50(b: &mut Bench) -> Result<(), String> {
    let (svc, readers, rng50) = (&b.svc, &b.readers, &mut b.rng50);
    let sample: Vec<u64> = (0..2000).map(|_| readers[rng50.random_range(0..readers.len())]).collect();
    let mut h50 = hist()?;
    for &u in &sample {
        let t = Instant::now();
        block(svc.feeds.home(UserId(u), &PageRequest { limit: Some(50), ..Default::default() }))
            .map_err(|e| e.to_string())?;
        h50.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
    }
    b.figures.sample = sample;
    b.figures.h50 = h50;
    Ok(())
}
