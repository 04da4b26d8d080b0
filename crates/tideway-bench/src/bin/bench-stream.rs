//! Home streams at scale: `--streams` Server-Sent Events connections to a
//! `tideway serve` process (the release binary, on the embedded store), one
//! per user, every user following one author; `--posts` posts by that author,
//! one every `--every-ms`. Measured: post-to-event latency (from sending the
//! post to each stream's `entry` event for it, over all streams) and the
//! server's resident memory per open stream.
//!
//! The baseline is the seeds' streaming design on the same Redis, in the
//! same run: a channel per user (`timeline:<user>`), every follower's
//! channel published to for each post (as a fan-out of `PUBLISH`es), one
//! subscriber connection holding every channel (a streaming server's): from
//! the first `PUBLISH` of a post to each message received. It leaves out the
//! HTTP hop to the clients that tideway's figure includes.
//!
//! ```text
//! cargo build --release -p tideway -p tideway-bench
//! target/release/bench-stream [--streams 10000] [--posts 40] [--every-ms 250] \
//!     [--redis redis://127.0.0.1:6379] [--tideway target/release/tideway]
//! ```

#![allow(clippy::print_stdout, reason = "a command whose output is its report")]

use clap::Parser;
use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use tideway_bench::measure;

use measure::{hist, percentiles};

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 10_000)]
    streams: u64,
    #[arg(long, default_value_t = 40)]
    posts: usize,
    #[arg(long, default_value_t = 250)]
    every_ms: u64,
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
    /// The server binary (default: `tideway` beside this one).
    #[arg(long)]
    tideway: Option<PathBuf>,
}

type Res<T> = Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

const AUTHOR: u64 = 1;

fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        })
        .map_or(0, |kb| kb * 1024)
}

/// Post times by item id, and every arrival's latency.
#[derive(Default)]
struct Arrivals {
    sent: HashMap<String, Instant>,
    latency: Vec<u64>,
    early: Vec<(String, Instant)>,
}

/// One stream: reads events, records each entry's latency.
async fn stream(
    addr: String,
    user: u64,
    arrivals: Arc<Mutex<Arrivals>>,
    ready: Arc<tokio::sync::Semaphore>,
) -> Res<()> {
    let mut sock = tokio::net::TcpStream::connect(&addr).await.map_err(err)?;
    let req = format!("GET /v1/users/{user}/home/stream HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    sock.write_all(req.as_bytes()).await.map_err(err)?;
    let mut lines = BufReader::with_capacity(4096, sock).lines();
    let mut announced = false;
    while let Some(line) = lines.next_line().await.map_err(err)? {
        if !announced && line.starts_with(": tideway") {
            ready.add_permits(1);
            announced = true;
        }
        let Some(data) = line.strip_prefix("data: ") else { continue };
        let at = Instant::now();
        let Some(i) = data.find("\"item\":{\"id\":\"") else { continue };
        let rest = &data[i + 14..];
        let id = rest[..rest.find('"').unwrap_or(0)].to_owned();
        let mut a = arrivals.lock().await;
        match a.sent.get(&id) {
            Some(t0) => {
                let us = at.duration_since(*t0).as_nanos() as u64;
                a.latency.push(us);
            }
            None => a.early.push((id, at)),
        }
    }
    Ok(())
}

/// Tideway: latencies (ns) and bytes per stream.
async fn tideway(args: &Args) -> Res<(Histogram<u64>, f64, usize)> {
    let bin = match &args.tideway {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(err)?.with_file_name("tideway"),
    };
    let dir = tempfile::tempdir().map_err(err)?;
    // The follow graph, imported: users 2.. follow the author.
    let edges = dir.path().join("follows.txt");
    let mut text = String::new();
    for u in 2..args.streams + 2 {
        text.push_str(&format!("{u} {AUTHOR}\n"));
    }
    std::fs::write(&edges, text).map_err(err)?;
    let data = dir.path().join("data");
    let ok = std::process::Command::new(&bin)
        .args(["import", "--data-dir"])
        .arg(&data)
        .arg("--follows")
        .arg(&edges)
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(err)?;
    if !ok.success() {
        return Err("tideway import failed".into());
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").map_err(err)?.local_addr().map_err(err)?.port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = std::process::Command::new(&bin)
        .args(["serve", "--listen", &addr, "--data-dir"])
        .arg(&data)
        .env("TIDEWAY_SERVER__MAX_CONNECTIONS", (args.streams + 2000).to_string())
        .env("TIDEWAY_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .map_err(err)?;
    let pid = child.id();
    let http = reqwest::Client::new();
    let base = format!("http://{addr}");
    for _ in 0..200 {
        if http.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let idle = rss_of(pid);
    let arrivals = Arc::new(Mutex::new(Arrivals::default()));
    let ready = Arc::new(tokio::sync::Semaphore::new(0));
    let started = Instant::now();
    for u in 2..args.streams + 2 {
        tokio::spawn(stream(addr.clone(), u, arrivals.clone(), ready.clone()));
        if u % 500 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let all = u32::try_from(args.streams).map_err(err)?;
    tokio::time::timeout(Duration::from_secs(120), ready.acquire_many(all))
        .await
        .map_err(|_| "streams did not all open in 120 s")?
        .map_err(err)?
        .forget();
    eprintln!("  {} streams open in {:.1} s", args.streams, started.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let open = rss_of(pid);
    for _ in 0..args.posts {
        let t0 = Instant::now();
        let r = http
            .post(format!("{base}/v1/items"))
            .json(&serde_json::json!({"author": AUTHOR.to_string(), "body": {"t": "live"}}))
            .send()
            .await
            .map_err(err)?;
        let v: serde_json::Value = r.json().await.map_err(err)?;
        let id = v["item"]["id"].as_str().ok_or("no item id")?.to_owned();
        {
            let mut a = arrivals.lock().await;
            let early: Vec<Instant> = a.early.iter().filter(|(i, _)| *i == id).map(|(_, at)| *at).collect();
            for at in early {
                a.latency.push(at.saturating_duration_since(t0).as_nanos() as u64);
            }
            a.early.retain(|(i, _)| *i != id);
            a.sent.insert(id, t0);
        }
        tokio::time::sleep(Duration::from_millis(args.every_ms)).await;
    }
    let want = args.streams as usize * args.posts;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = arrivals.lock().await.latency.len();
        if n >= want || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let a = arrivals.lock().await;
    let mut h = hist()?;
    for l in &a.latency {
        h.record((*l).max(1)).map_err(err)?;
    }
    let _ = child.kill();
    let _ = child.wait();
    let per = (open.saturating_sub(idle)) as f64 / args.streams as f64;
    Ok((h, per, a.latency.len()))
}

/// The seeds' design: a channel per user, a PUBLISH per follower.
async fn seeds(args: &Args) -> Res<Histogram<u64>> {
    let client = redis::Client::open(args.redis.as_str()).map_err(err)?;
    let prefix = format!("benchstream{}:", std::process::id());
    let (mut sink, mut stream) = client.get_async_pubsub().await.map_err(err)?.split();
    let channels: Vec<String> = (2..args.streams + 2).map(|u| format!("{prefix}timeline:{u}")).collect();
    for part in channels.chunks(1000) {
        sink.subscribe(part).await.map_err(err)?;
    }
    let posts: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let got = Arc::new(Mutex::new(Vec::<u64>::new()));
    let reader = {
        let (posts, got) = (posts.clone(), got.clone());
        tokio::spawn(async move {
            use futures_util::StreamExt;
            while let Some(msg) = stream.next().await {
                let at = Instant::now();
                let payload: String = msg.get_payload().unwrap_or_default();
                if let Some(t0) = posts.lock().await.get(&payload) {
                    got.lock().await.push(at.duration_since(*t0).as_nanos() as u64);
                }
            }
        })
    };
    let mut conn = client.get_multiplexed_async_connection().await.map_err(err)?;
    for p in 0..args.posts {
        let id = format!("post{p}");
        posts.lock().await.insert(id.clone(), Instant::now());
        let mut pipe = redis::pipe();
        for c in &channels {
            pipe.publish(c, &id).ignore();
        }
        let () = pipe.query_async(&mut conn).await.map_err(err)?;
        tokio::time::sleep(Duration::from_millis(args.every_ms)).await;
    }
    let want = args.streams as usize * args.posts;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.lock().await.len() < want && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reader.abort();
    let mut h = hist()?;
    for l in got.lock().await.iter() {
        h.record((*l).max(1)).map_err(err)?;
    }
    Ok(h)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let args = Args::parse();
    eprintln!("the seeds' design: a Redis channel per user, a PUBLISH per follower");
    let base = seeds(&args).await?;
    eprintln!("tideway: embedded, {} streams", args.streams);
    let (h, per, n) = tideway(&args).await?;
    let (p50, p99, _) = percentiles(&h);
    let (b50, b99, _) = percentiles(&base);
    println!(
        "# home streams: {} streams of followers of one author, {} posts every {} ms",
        args.streams, args.posts, args.every_ms
    );
    println!("| | p50 ms | p99 ms | events |");
    println!("|---|---|---|---|");
    println!("| tideway (embedded), post to `entry` over HTTP | {:.1} | {:.1} | {n} |", p50 / 1000.0, p99 / 1000.0);
    println!(
        "| seeds: first PUBLISH to message, pub/sub only | {:.1} | {:.1} | {} |",
        b50 / 1000.0,
        b99 / 1000.0,
        base.len()
    );
    println!("server memory per open stream: {:.1} KiB", per / 1024.0);
    Ok(())
}
