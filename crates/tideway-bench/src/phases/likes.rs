//! Likes: `--likes` likes by distinct users from `--like-threads` writers on
//! one hot item (its count exact) and on random items; beside Redis's, as
//! the seeds run it (no persistence) and, on a Redis of the bench's own,
//! made as durable as ours (`appendfsync always`).

use crate::context::{Bench, block};
use crate::{Args, LikeMode};
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_core::UserId;
use tideway_service::FeedService;

/// Runs both like phases, checks the hot item's count, reports the rates.
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, svc, posted) = (&b.args, &b.svc, &b.posted);
    let report = &mut b.report;
    let item_ids: Vec<tideway_core::ItemId> = posted.iter().map(|(id, _)| tideway_core::ItemId(*id)).collect();
    let threads = args.like_threads.max(1);
    let given = (args.likes / threads * threads) as u64;
    let mode = args.like_mode;
    let (hot_rate, hot_count) = likes_phase(svc, &item_ids, args.likes, threads, mode, true)?;
    let (many_rate, _) = likes_phase(svc, &item_ids, args.likes, threads, mode, false)?;
    if hot_count != given {
        return Err(format!("hot item counted {hot_count} likes for {given} given"));
    }
    let plain_likes = if args.redis.is_empty() { None } else { redis_likes(&args.redis, args, &item_ids).ok() };
    // The same design with each write fsynced before its reply, on the same
    // disk as the store: what durability costs Redis here.
    let durable_likes = if args.redis.is_empty() || !args.durable_redis {
        None
    } else {
        match DurableRedis::start() {
            Ok(server) => redis_likes(&server.url, args, &item_ids)
                .inspect_err(|e| eprintln!("durable Redis likes failed: {e}"))
                .ok(),
            Err(e) => {
                eprintln!("durable Redis baseline left out: {e}");
                None
            }
        }
    };
    let writers = match mode {
        LikeMode::Tasks => format!("{threads} writers as tasks"),
        LikeMode::Threads => format!("{threads} writer threads"),
    };
    let ratio = |ours: f64, hot: bool| {
        let mut out = Vec::new();
        for (theirs, how) in [(plain_likes, "no persistence"), (durable_likes, "appendfsync always")] {
            if let Some((h, m)) = theirs {
                let t = if hot { h } else { m };
                out.push(format!("Redis SADD+HINCRBY, {threads} clients ({how}): {t:.0}/s → ×{:.2}", ours / t));
            }
        }
        out.join("; ")
    };
    report.row(
        &format!(
            "likes/s on one hot item ({writers}, {}, distinct users)",
            if args.fsync { "fsync" } else { "buffer" }
        ),
        format!("{hot_rate:.0} (count exact: {hot_count})"),
        ratio(hot_rate, true),
    );
    report.row(
        &format!("likes/s on random items ({writers}, {})", if args.fsync { "fsync" } else { "buffer" }),
        format!("{many_rate:.0}"),
        ratio(many_rate, false),
    );
    Ok(())
}

/// `n` likes from `threads` writers, by distinct new users, on one item
/// (`hot`) or on random items; returns likes/s and the final like count of
/// the hot item. The writers are tasks on the runtime (as the server runs
/// concurrent requests) or OS threads blocking on it (`mode`).
pub fn likes_phase(
    svc: &Arc<FeedService>,
    items: &[tideway_core::ItemId],
    n: usize,
    threads: usize,
    mode: LikeMode,
    hot: bool,
) -> Result<(f64, u64), String> {
    let per = n / threads;
    let base = if hot { 9_000_000_000u64 } else { 9_500_000_000u64 };
    // One writer's likes, in turn: writer `th`'s users are its own.
    let writer = move |th: usize, svc: Arc<FeedService>, items: Arc<[tideway_core::ItemId]>| async move {
        let mut rng = StdRng::seed_from_u64(7 + th as u64);
        for i in 0..per {
            let user = UserId(base + (th * per + i) as u64);
            let item = if hot { items[0] } else { items[rng.random_range(0..items.len())] };
            svc.items.react(item, user, "like", true).await.map_err(|e| e.to_string())?;
        }
        Ok::<(), String>(())
    };
    let shared: Arc<[tideway_core::ItemId]> = items.into();
    let t = Instant::now();
    match mode {
        LikeMode::Tasks => block(async {
            let mut set = tokio::task::JoinSet::new();
            for th in 0..threads {
                set.spawn(writer(th, svc.clone(), shared.clone()));
            }
            while let Some(done) = set.join_next().await {
                done.map_err(|e| format!("a like task failed: {e}"))??;
            }
            Ok::<(), String>(())
        })?,
        LikeMode::Threads => std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let (svc, shared) = (svc.clone(), shared.clone());
                    scope.spawn(move || block(writer(th, svc, shared)))
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().map_err(|_| "like thread panicked".to_owned())?)
        })?,
    }
    let rate = (per * threads) as f64 / t.elapsed().as_secs_f64();
    let count = if hot {
        block(svc.items.get_items(&items[..1], None))
            .map_err(|e| e.to_string())?
            .first()
            .map_or(0, |v| v.counts.of_kind("like"))
    } else {
        0
    };
    eprintln!("likes ({}): {rate:.0}/s", if hot { "one hot item" } else { "many items" });
    Ok((rate, count))
}

/// The seeds' like: `SADD likes:<item> <user>` + `HINCRBY counts:<item> like 1`,
/// one round trip per like, `--like-threads` clients of the Redis at `url`.
/// Returns (hot, many) likes/s.
pub fn redis_likes(url: &str, args: &Args, items: &[tideway_core::ItemId]) -> Result<(f64, f64), String> {
    let prefix = format!("tideway-bench:{}:", std::process::id());
    let threads = args.like_threads.max(1) as u64;
    let run = |hot: bool| -> Result<f64, String> {
        let per = args.likes / threads as usize;
        let t = Instant::now();
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|th| {
                    let prefix = prefix.clone();
                    scope.spawn(move || -> Result<(), String> {
                        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
                        let mut con =
                            client.get_connection_with_timeout(Duration::from_secs(2)).map_err(|e| e.to_string())?;
                        let mut rng = StdRng::seed_from_u64(11 + th);
                        for i in 0..per as u64 {
                            let item = if hot { items[0] } else { items[rng.random_range(0..items.len())] };
                            let user = th * 1_000_000_000 + i;
                            redis::pipe()
                                .cmd("SADD")
                                .arg(format!("{prefix}likes:{}", item.0))
                                .arg(user)
                                .ignore()
                                .cmd("HINCRBY")
                                .arg(format!("{prefix}counts:{}", item.0))
                                .arg("like")
                                .arg(1)
                                .ignore()
                                .query::<()>(&mut con)
                                .map_err(|e| e.to_string())?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().map_err(|_| "redis thread panicked".to_owned())?)
        })?;
        Ok((per * threads as usize) as f64 / t.elapsed().as_secs_f64())
    };
    let hot = run(true)?;
    let many = run(false)?;
    // Clean up what the baseline wrote.
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let mut con = client.get_connection().map_err(|e| e.to_string())?;
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}*")).query(&mut con).map_err(|e| e.to_string())?;
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("UNLINK").arg(chunk).query(&mut con).map_err(|e| e.to_string())?;
    }
    eprintln!("Redis likes ({url}): hot {hot:.0}/s, many {many:.0}/s");
    Ok((hot, many))
}

/// A `redis-server` of the bench's own on a free loopback port, appending
/// every write to its file and fsyncing it before the reply
/// (`appendfsync always`: the writes of one turn of its event loop share a
/// fsync, Redis's group commit), its directory a temporary one beside the
/// store's. Stopped and removed when dropped.
struct DurableRedis {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl DurableRedis {
    fn start() -> Result<Self, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", ""])
            .args(["--appendonly", "yes", "--appendfsync", "always"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("redis-server could not start ({e}); install it to compare"))?;
        let server = Self { child, url: format!("redis://127.0.0.1:{port}/0"), _dir: dir };
        let client = redis::Client::open(server.url.as_str()).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = client
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut con| redis::cmd("PING").query::<String>(&mut con));
            match ping {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => return Err(format!("redis-server did not answer: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        let mut con = client.get_connection().map_err(|e| e.to_string())?;
        let fsync: Vec<String> =
            redis::cmd("CONFIG").arg("GET").arg("appendfsync").query(&mut con).map_err(|e| e.to_string())?;
        if fsync.get(1).map(String::as_str) != Some("always") {
            return Err(format!("redis-server reports appendfsync {fsync:?}"));
        }
        Ok(server)
    }
}

impl Drop for DurableRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
