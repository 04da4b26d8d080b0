//! Returning readers: a reader who follows `--returning-follows` posting
//! accounts at once, then reads a first page of 50 (its inbox rebuilt).

use crate::context::{Bench, block};
use crate::measure::hist;
use rand::Rng;
use std::time::Instant;
use tideway_core::UserId;
use tideway_service::PageRequest;

/// Follows, then times each returning reader's first page of 50.
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, svc, posted, rng50) = (&b.args, &b.svc, &b.posted, &mut b.rng50);
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
            block(svc.graph.follow_many(UserId(*r), chunk)).map_err(|e| e.to_string())?;
        }
        let t = Instant::now();
        let page = block(svc.feeds.home(UserId(*r), &PageRequest { limit: Some(50), ..Default::default() }))
            .map_err(|e| e.to_string())?;
        hret.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
        if page.entries.len() != 50 {
            return Err(format!("returning reader {r}: {} entries", page.entries.len()));
        }
    }
    b.figures.returning = returning;
    b.figures.hret = hret;
    Ok(())
}
