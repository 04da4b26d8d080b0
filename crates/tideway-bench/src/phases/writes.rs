//! Item writes: posts by authors drawn by follower count (items/s), or the
//! Higgs trace replayed (events/s against the trace's peak hour).

use crate::context::{Bench, block};
use crate::measure::rss_bytes;
use crate::workload;
use rand::distr::Distribution;
use std::collections::HashMap;
use std::time::Instant;
use tideway_core::{ItemKind, NewItem, UserId};
use tideway_service::FeedService;

/// Posts `--posts` items (or replays as many Higgs events), one thread.
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, svc, graph, users, dist) = (&b.args, &b.svc, &b.graph, &b.users, &b.dist);
    let (report, rng) = (&mut b.report, &mut b.rng);
    let rss_before = rss_bytes();
    let t = Instant::now();
    let mut posted: Vec<(u64, u64)> = Vec::with_capacity(args.posts);
    if matches!(graph, workload::Graph::Higgs) {
        let events = workload::higgs_events(&args.data, args.posts)?;
        let (first, last) = (events.first().map_or(0, |e| e.0), events.last().map_or(0, |e| e.0));
        let n = replay_higgs(svc, &events, &mut posted)?;
        let secs = t.elapsed().as_secs_f64();
        // The trace's busiest hour: 45,861 events (shared/data/README.md).
        let peak = 45_861.0 / 3600.0;
        report.row(
            "Higgs trace replay (RT → repost, MT → mention, RE → reply; durable, one thread)",
            format!(
                "{} events ({:.1} h of the trace) + {} originals in {secs:.1} s: {:.0} events/s",
                events.len(),
                (last - first) as f64 / 3600.0,
                n - events.len(),
                events.len() as f64 / secs
            ),
            format!("the trace's peak hour is {peak:.1} events/s → ×{:.0} headroom", events.len() as f64 / secs / peak),
        );
    } else {
        for _ in 0..args.posts {
            let a = users[dist.sample(rng)];
            let mut new = NewItem::new(UserId(a), ItemKind::Post);
            let text = if args.body_bytes == 0 { "benchmark post".to_owned() } else { "x".repeat(args.body_bytes) };
            let mut body = serde_json::Map::new();
            body.insert("text".to_owned(), serde_json::Value::from(text));
            new.body = tideway_core::Body::new(&body);
            let (item, _) = block(svc.items.create_item(new)).map_err(|e| e.to_string())?;
            posted.push((item.item.id.0, a));
        }
        let post_s = t.elapsed().as_secs_f64();
        report.row(
            "item writes (durable before ack, one thread)",
            format!("{:.0} items/s", args.posts as f64 / post_s),
            String::new(),
        );
    }
    b.figures.rss_before = rss_before;
    b.posted = posted;
    Ok(())
}

/// Writes one item; records it in `posted` when it is new.
pub fn write_item(
    svc: &FeedService,
    new: NewItem,
    posted: &mut Vec<(u64, u64)>,
) -> Result<tideway_core::ItemId, String> {
    let author = new.author.0;
    let (v, created) = block(svc.items.create_item(new)).map_err(|e| e.to_string())?;
    if created {
        posted.push((v.item.id.0, author));
    }
    Ok(v.item.id)
}

/// Replays Higgs events: a repost or reply needs the target's latest
/// original, which is posted first when the target has none yet. Returns the
/// number of items written; `posted` gets each new (id, author).
pub fn replay_higgs(
    svc: &FeedService,
    events: &[(i64, workload::Event)],
    posted: &mut Vec<(u64, u64)>,
) -> Result<usize, String> {
    let before = posted.len();
    let mut latest: HashMap<u64, tideway_core::ItemId> = HashMap::new();
    for &(_, ev) in events {
        match ev {
            workload::Event::Repost { user, target } | workload::Event::Reply { user, target } => {
                let of = match latest.get(&target) {
                    Some(id) => *id,
                    None => {
                        let id = write_item(svc, NewItem::new(UserId(target), ItemKind::Post), posted)?;
                        latest.insert(target, id);
                        id
                    }
                };
                let n = if matches!(ev, workload::Event::Repost { .. }) {
                    NewItem { repost_of: Some(of), ..NewItem::new(UserId(user), ItemKind::Repost) }
                } else {
                    NewItem { reply_to: Some(of), ..NewItem::new(UserId(user), ItemKind::Reply) }
                };
                write_item(svc, n, posted)?;
            }
            workload::Event::Mention { user, target } => {
                let n = NewItem { mentions: vec![UserId(target)], ..NewItem::new(UserId(user), ItemKind::Post) };
                let id = write_item(svc, n, posted)?;
                latest.insert(user, id);
            }
        }
    }
    Ok(posted.len() - before)
}
