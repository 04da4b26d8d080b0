//! `kill -9` the real binary during a stream of acknowledged writes, restart
//! it on the same data directory, and find every acknowledged write and
//! correct home pages.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) struct Proc {
    child: Child,
    pub(crate) base: String,
}

/// Kills the server even when an assertion fails mid-test.
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Starts the binary; its stderr goes to `log` (printed if start-up fails).
async fn start(dir: &std::path::Path, log: &std::path::Path) -> Proc {
    start_with(dir, log, &[]).await
}

/// Starts the binary with extra environment (configuration) variables and
/// waits until it is ready.
pub(crate) async fn start_with(dir: &std::path::Path, log: &std::path::Path, env: &[(&str, &str)]) -> Proc {
    start_until(dir, log, env, "/readyz").await
}

/// The same, waiting only until it is alive (`/healthz`): a node that is
/// not meant to become ready.
pub(crate) async fn start_alive(dir: &std::path::Path, log: &std::path::Path, env: &[(&str, &str)]) -> Proc {
    start_until(dir, log, env, "/healthz").await
}

async fn start_until(dir: &std::path::Path, log: &std::path::Path, env: &[(&str, &str)], probe: &str) -> Proc {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tideway"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env("TIDEWAY_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).map(Stdio::from).expect("log file"))
        .spawn()
        .expect("spawn tideway");
    let mut proc = Proc { child, base: String::new() };
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = client.get(format!("{base}{probe}")).send().await
            && r.status() == StatusCode::OK
        {
            proc.base = base;
            return proc;
        }
        assert!(
            Instant::now() < deadline,
            "tideway did not become ready: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the binary with `env` expecting it to refuse to start: waits for
/// it to exit (failing if it serves or runs on) and returns its log.
pub(crate) async fn refused_start(dir: &std::path::Path, env: &[(String, String)]) -> String {
    let log = dir.with_extension("log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tideway"))
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port()), "--data-dir"])
        .arg(dir)
        .env("TIDEWAY_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map(Stdio::from).expect("log file"))
        .spawn()
        .expect("spawn tideway");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tideway did not refuse to start: {}", std::fs::read_to_string(&log).unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "tideway exited 0: {log}");
    log
}

async fn get(c: &reqwest::Client, url: String) -> (StatusCode, Value) {
    let r = c.get(url).send().await.expect("get");
    let s = r.status();
    (s, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let mut p = start(dir.path(), &logs.path().join("first.log")).await;
    let c = reqwest::Client::new();
    for a in 1..=5 {
        let r = c.put(format!("{}/v1/users/100/following/{a}", p.base)).send().await.expect("follow");
        assert_eq!(r.status(), StatusCode::OK);
    }
    let acked_items: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
    let acked_follows: Arc<Mutex<Vec<u64>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (base, items, follows, c) = (p.base.clone(), acked_items.clone(), acked_follows.clone(), c.clone());
        writers.push(tokio::spawn(async move {
            for i in 0u64.. {
                let author = 1 + (i + w) % 5;
                let r = c
                    .post(format!("{base}/v1/items"))
                    .json(&json!({"author": author.to_string(), "body": {"w": w, "i": i}}))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == StatusCode::CREATED => {
                        let v: Value = r.json().await.expect("json");
                        items.lock().expect("lock").push((v["item"]["id"].as_str().expect("id").to_owned(), author));
                    }
                    _ => return,
                }
                if i % 7 == 0 {
                    let target = 1000 + w * 100_000 + i;
                    match c.put(format!("{base}/v1/users/200/following/{target}")).send().await {
                        Ok(r) if r.status() == StatusCode::OK => follows.lock().expect("lock").push(target),
                        _ => return,
                    }
                }
            }
        }));
    }
    // A cursor taken before the crash must still work after it: taken once
    // at least 8 items are acknowledged (3 on its page, 5 below it), however
    // slowly the writers start on a loaded machine.
    let t0 = Instant::now();
    while acked_items.lock().expect("lock").len() < 8 && t0.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, before_crash) = get(&c, format!("{}/v1/users/100/home?limit=3", p.base)).await;
    let old_cursor = before_crash["next_cursor"].as_str().expect("cursor before the crash").to_owned();
    // Let a few hundred writes through, then kill -9 mid-stream.
    let t0 = Instant::now();
    while acked_items.lock().expect("lock").len() < 300 && t0.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.child.kill().expect("kill -9");
    let _ = p.child.wait();
    for w in writers {
        w.await.expect("writer");
    }
    let items = acked_items.lock().expect("lock").clone();
    let follows = acked_follows.lock().expect("lock").clone();
    assert!(items.len() >= 300, "only {} writes acknowledged", items.len());

    let p = start(dir.path(), &logs.path().join("second.log")).await;
    // Every acknowledged item is there.
    let ids: Vec<&str> = items.iter().map(|(id, _)| id.as_str()).collect();
    for chunk in ids.chunks(100) {
        let (s, v) = get(&c, format!("{}/v1/items?ids={}", p.base, chunk.join(","))).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v["items"].as_array().map(Vec::len), Some(chunk.len()), "acknowledged items lost");
    }
    // Every acknowledged follow is there.
    let (_, u) = get(&c, format!("{}/v1/users/200", p.base)).await;
    let following = u["following_count"].as_u64().expect("count") as usize;
    assert!(following >= follows.len(), "acknowledged follows lost: {following} < {}", follows.len());
    // Home of the reader: every item of the five authors that exists, once,
    // newest first, across pages (the inbox is rebuilt after the crash).
    let (_, stats) = get(&c, format!("{}/v1/stats", p.base)).await;
    let total = stats["items"].as_u64().expect("items") as usize;
    assert!(
        total >= items.len() && total <= items.len() + 2,
        "{total} items for {} acknowledged (+2 in flight)",
        items.len()
    );
    let mut seen: Vec<u64> = Vec::new();
    let mut url = format!("{}/v1/users/100/home?limit=100", p.base);
    loop {
        let (s, v) = get(&c, url.clone()).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        for e in v["entries"].as_array().expect("entries") {
            seen.push(e["item"]["id"].as_str().expect("id").parse().expect("num"));
        }
        match v["next_cursor"].as_str() {
            Some(cur) => url = format!("{}/v1/users/100/home?limit=100&before={cur}", p.base),
            None => break,
        }
    }
    assert_eq!(seen.len(), total, "home holds every item once");
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "newest first, no duplicate");
    let acked: HashSet<u64> = items.iter().map(|(id, _)| id.parse().expect("num")).collect();
    assert!(acked.iter().all(|id| seen.contains(id)));
    let (s, v) = get(&c, format!("{}/v1/users/100/home?limit=5&before={old_cursor}", p.base)).await;
    assert_eq!(s, StatusCode::OK, "a cursor survives the restart: {v}");
    assert_eq!(v["entries"].as_array().map(Vec::len), Some(5));
}

/// `kill -9` the real binary in the middle of a one-million-follower
/// delivery; after a restart it completes from its durable checkpoint, and
/// followers see the item exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_follower_delivery_survives_kill_9() {
    use tideway_core::{ItemKind, Millis, NewItem, UserId};
    use tideway_store::Jobs;
    const FOLLOWERS: u64 = 1_000_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    // Prepare the data directory with the library: 1M followers (loaded in
    // bulk, as `tideway import` does), one post.
    {
        let mut importer = tideway_store_fjall::Importer::open(dir.path()).expect("importer");
        let follows: Vec<(UserId, UserId)> = (2..FOLLOWERS + 2).map(|f| (UserId(f), UserId(1))).collect();
        importer.ingest_follows(&follows, Millis(1), &mut |_| {}).expect("follows");
        importer.finish().expect("durable");
    }
    let item = {
        let store = tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, 800).expect("open");
        let backend: std::sync::Arc<dyn tideway_store::Backend> = std::sync::Arc::new(store);
        let opts = tideway_service::ServiceOptions { hot_followers: u64::MAX, ..Default::default() };
        let svc = tideway_service::FeedService::new(backend, opts, std::sync::Arc::new(tideway_service::SystemClock))
            .await
            .expect("service");
        let (v, _) = svc.items.create_item(NewItem::new(UserId(1), ItemKind::Post)).await.expect("post");
        v.item.id.0.to_string()
    };
    // Deliver in chunks of 100 (10,000 durable steps), and kill -9 midway.
    let env = [("TIDEWAY_FANOUT__CHUNK_SIZE", "100"), ("TIDEWAY_FANOUT__HOT_FOLLOWERS", "100000000")];
    let p = start_with(dir.path(), &logs.path().join("first.log"), &env).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    drop(p); // SIGKILL
    let cursor = {
        let store = tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, 800).expect("reopen");
        let jobs = store.pending_jobs(10).await.expect("jobs");
        assert_eq!(jobs.len(), 1, "the delivery was still running when killed (raise the chunk count if not)");
        jobs[0].cursor.map_or(0, |c| c.1.0)
    };
    assert!(cursor > 1 && cursor < FOLLOWERS, "killed midway with a checkpoint: cursor {cursor}");
    // Restart: the delivery resumes and finishes; followers see the item once.
    let p = start_with(dir.path(), &logs.path().join("second.log"), &env).await;
    let c = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, stats) = get(&c, format!("{}/v1/stats", p.base)).await;
        if stats["fanout"]["pending"] == json!(0) {
            break;
        }
        assert!(Instant::now() < deadline, "the delivery did not finish after the restart");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for f in [2, cursor - 1, cursor, cursor + 1, FOLLOWERS / 2, FOLLOWERS + 1] {
        let (s, v) = get(&c, format!("{}/v1/users/{f}/home", p.base)).await;
        assert_eq!(s, StatusCode::OK);
        let ids: Vec<&str> =
            v["entries"].as_array().expect("entries").iter().map(|e| e["item"]["id"].as_str().expect("id")).collect();
        assert_eq!(ids, vec![item.as_str()], "follower {f}");
    }
}

/// Clients streaming their homes while the server is killed with `kill -9`:
/// their streams end; after the restart each resumes from its last event
/// id, with the entries written after it (acknowledged before the kill or
/// after the restart), none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_resume_after_kill_9() {
    use crate::stream::Client;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("server.log");
    let data = dir.path().join("data");
    let c = reqwest::Client::new();
    let server = start(&data, &log).await;
    let post = async |base: &str, author: u64| -> String {
        let r =
            c.post(format!("{base}/v1/items")).json(&json!({"author": author.to_string()})).send().await.expect("post");
        assert_eq!(r.status(), StatusCode::CREATED);
        let v: Value = r.json().await.expect("json");
        v["item"]["id"].as_str().expect("id").to_owned()
    };
    for u in [1, 2] {
        let r = c.put(format!("{}/v1/users/{u}/following/9", server.base)).send().await.expect("follow");
        assert!(r.status().is_success());
    }
    let mut streams = vec![
        Client::connect_to(&c, &server.base, None, 1, None).await,
        Client::connect_to(&c, &server.base, None, 2, None).await,
    ];
    let metrics = c.get(format!("{}/metrics", server.base)).send().await.expect("metrics").text().await.expect("text");
    assert!(metrics.lines().any(|l| l == "tideway_home_streams_open 2"), "the gauge counts both streams:\n{metrics}");
    let before: Vec<String> = [post(&server.base, 9).await, post(&server.base, 9).await].into();
    let mut last = Vec::new();
    for s in &mut streams {
        let events = s.take(2, Duration::from_secs(10)).await;
        let got: Vec<&str> = events.iter().map(|e| e.data["item"]["id"].as_str().expect("id")).collect();
        assert_eq!(got, before.iter().map(String::as_str).collect::<Vec<_>>());
        last.push(events[0].id.clone());
    }
    // Acknowledged, maybe not yet streamed: then the kill.
    let unseen = post(&server.base, 9).await;
    drop(server);
    for s in &mut streams {
        let mut tail = Vec::new();
        while let Some(e) = s.next(Duration::from_secs(5)).await {
            tail.push(e);
        }
        assert!(tail.len() <= 1, "at most the last post before the stream ended: {tail:?}");
    }
    let server = start(&data, &log).await;
    let after = post(&server.base, 9).await;
    // Each resumes from its first event's id: the second, the unseen one
    // and the one after the restart, in order, once.
    for (u, id) in [(1, &last[0]), (2, &last[1])] {
        let mut s = Client::connect_to(&c, &server.base, None, u, Some(id)).await;
        let events = s.take(3, Duration::from_secs(10)).await;
        let got: Vec<&str> = events.iter().map(|e| e.data["item"]["id"].as_str().expect("id")).collect();
        assert_eq!(got, [before[1].as_str(), unseen.as_str(), after.as_str()], "user {u}");
        assert!(s.next(Duration::from_millis(300)).await.is_none(), "user {u}: no duplicate");
    }
}
