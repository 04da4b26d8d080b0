//! Celebrities: time until a post by a 10k- and a `--celebrity`-follower
//! account (pulled) is readable, and a 9,999-follower post (pushed) is in
//! every inbox; beside the Redis push model's times.

use crate::Args;
use crate::context::{Bench, Celebrity, block};
use crate::phases::baseline::redis_push;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_core::{ItemKind, NewItem, UserId};
use tideway_service::{FanoutWorker, FeedService, PageRequest};

/// Runs the celebrity posts, then the Redis push baseline (unless `--redis ""`).
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, svc, users) = (&b.args, &b.svc, &b.users);
    let celeb = celebrities(args, svc, users)?;
    let redis_celeb = if args.redis.is_empty() {
        None
    } else {
        redis_celebrities(args).inspect_err(|e| eprintln!("Redis celebrity baseline skipped: {e}")).ok()
    };
    b.figures.celeb = celeb;
    b.figures.redis_celeb = redis_celeb;
    Ok(())
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
                        block(svc.graph.follow_many(UserId(f), &[target])).map_err(|e| e.to_string())?;
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
pub fn celebrities(args: &Args, svc: &Arc<FeedService>, users: &[u64]) -> Result<Celebrity, String> {
    let hot = svc.options().hot_followers;
    let post = |author: UserId| -> Result<(f64, u64), String> {
        let t = Instant::now();
        let (v, _) = block(svc.items.create_item(NewItem::new(author, ItemKind::Post))).map_err(|e| e.to_string())?;
        Ok((t.elapsed().as_secs_f64() * 1000.0, v.item.id.0))
    };
    let confirm = |followers: &[u64], id: u64| -> Result<(), String> {
        for &f in followers.iter().step_by((followers.len() / 200).max(1)) {
            let page = block(svc.feeds.home(UserId(f), &PageRequest { limit: Some(5), ..Default::default() }))
                .map_err(|e| e.to_string())?;
            if page.entries.first().map(|e| e.item.item.id.0) != Some(id) {
                return Err(format!("follower {f} does not see the celebrity's post first"));
            }
        }
        Ok(())
    };
    // The graph's users follow these two: a graph too small for either
    // leaves it out.
    let too_few = |account: &str, need: usize| {
        eprintln!("the graph's {} users are fewer than the {need} the {account} takes: left out", users.len());
        None
    };
    // 10k followers from the graph (active readers with inboxes).
    let hot10k_ms = if users.len() < hot as usize {
        too_few("10,000-follower account", hot as usize)
    } else {
        let c10 = UserId(7_000_000_000_000);
        let f10: Vec<u64> = users.iter().copied().take(hot as usize).collect();
        follow_from_many(svc, &f10, c10)?;
        let (ms, id10) = post(c10)?;
        confirm(&f10, id10)?;
        Some(ms)
    };
    // Just below the threshold: pushed; time until every inbox has it.
    let after = 20_000 + hot as usize - 1;
    let push10k_ms = if users.len() < after {
        too_few("9,999-follower account (after the first 20,000)", after)
    } else {
        let c9 = UserId(7_000_000_000_001);
        let f9: Vec<u64> = users.iter().copied().skip(20_000).take(hot as usize - 1).collect();
        follow_from_many(svc, &f9, c9)?;
        let worker = FanoutWorker::new(svc.clone());
        block(worker.drain()).map_err(|e| e.to_string())?;
        let t = Instant::now();
        let (_, id9) = post(c9)?;
        block(worker.drain()).map_err(|e| e.to_string())?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        confirm(&f9, id9)?;
        Some(ms)
    };
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
pub fn redis_celebrities(args: &Args) -> Result<(f64, f64), String> {
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
