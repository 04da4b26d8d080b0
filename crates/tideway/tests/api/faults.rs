//! The engines fail under a running node. A private MariaDB or PostgreSQL and
//! a private Redis (own data directory, free ports; never the shared test
//! servers) are
//! killed with SIGKILL and restarted while a `tideway serve` process on them
//! takes writes: every answer is 201 or 503 (never a 500 or a hang), every
//! acknowledged item is there afterwards, the node recovers by itself, and
//! while Redis is down home pages are still served, exactly, from the
//! database.

use crate::crash::{free_port, start_with};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A server process of the test's own, killed (SIGKILL) when dropped.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "{what} did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn mariadb(dir: &Path, port: u16) -> Daemon {
    let child = Command::new("mariadbd")
        .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1", "--skip-log-bin"])
        .arg(format!("--datadir={}", dir.join("data").display()))
        .arg(format!("--port={port}"))
        .arg(format!("--socket={}", dir.join("sock").display()))
        .arg(format!("--log-error={}", dir.join("err.log").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mariadbd (scripts/services.sh installs it)");
    wait_until("mariadbd", || {
        Command::new("mysql")
            .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root", "-e", "select 1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    Daemon(child)
}

/// The newest installed PostgreSQL's programs.
fn pg_bin(program: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (scripts/services.sh installs it)")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    versions.sort_by_key(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<u32>().ok()));
    versions.last().expect("a PostgreSQL version").join("bin").join(program)
}

/// A command run as the `postgres` user (PostgreSQL refuses root), without
/// an intermediate process: killing the child kills the server.
fn as_postgres(program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]).arg(program);
    c
}

fn postgres(dir: &Path, port: u16) -> Daemon {
    let child = as_postgres(&pg_bin("postgres"))
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-k"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start postgres");
    wait_until("postgres", || {
        Command::new("pg_isready")
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .is_ok_and(|s| s.success())
    });
    Daemon(child)
}

fn redis(port: u16) -> Daemon {
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    wait_until("redis-server", || {
        Command::new("redis-cli")
            .args(["-p", &port.to_string(), "ping"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("PONG"))
    });
    Daemon(child)
}

#[derive(Default)]
struct Outcomes {
    acked: Vec<String>,
    unavailable: usize,
    other: Vec<String>,
}

async fn post(c: &reqwest::Client, base: &str, author: u64) -> Result<String, String> {
    let r = c
        .post(format!("{base}/v1/items"))
        .json(&json!({"author": author.to_string(), "body": {"text": "under fire"}}))
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .map_err(|e| format!("transport: {e}"))?;
    let status = r.status();
    let v: Value = r.json().await.map_err(|e| format!("{status}: not JSON: {e}"))?;
    match status {
        StatusCode::CREATED => Ok(v["item"]["id"].as_str().unwrap_or_default().to_owned()),
        s => Err(format!("{s} {}", v["error"]["code"])),
    }
}

async fn home(c: &reqwest::Client, base: &str, user: u64) -> (StatusCode, Vec<String>) {
    let r = c.get(format!("{base}/v1/users/{user}/home?limit=50")).send().await.expect("home");
    let s = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    let ids = v["entries"]
        .as_array()
        .map_or(vec![], |es| es.iter().map(|e| e["item"]["id"].as_str().unwrap_or_default().to_owned()).collect());
    (s, ids)
}

#[derive(Clone, Copy, PartialEq)]
enum Engine {
    MariaDb,
    Postgres,
}

/// A fresh private server of `engine` in `dir` with an empty database `tw`.
fn fresh(engine: Engine, dir: &Path, port: u16) -> Daemon {
    std::fs::create_dir_all(dir).expect("dir");
    let ok = match engine {
        Engine::MariaDb => Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"])
            .arg(format!("--datadir={}", dir.join("data").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status(),
        Engine::Postgres => {
            let _ = Command::new("chown").arg("postgres").arg(dir).status();
            as_postgres(&pg_bin("initdb"))
                .arg("-D")
                .arg(dir.join("data"))
                .args(["-A", "trust", "-U", "postgres"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
        }
    };
    assert!(ok.is_ok_and(|s| s.success()), "initialising a private server failed");
    let d = start(engine, dir, port);
    let created = match engine {
        Engine::MariaDb => Command::new("mysql")
            .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root", "-e", "create database tw"])
            .status(),
        Engine::Postgres => Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", "-qc", "create database tw"])
            .status(),
    };
    assert!(created.is_ok_and(|s| s.success()), "create database");
    d
}

fn start(engine: Engine, dir: &Path, port: u16) -> Daemon {
    match engine {
        Engine::MariaDb => mariadb(dir, port),
        Engine::Postgres => postgres(dir, port),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_rides_out_mariadb_and_redis_restarts() {
    rides_out(Engine::MariaDb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_rides_out_postgres_and_redis_restarts() {
    rides_out(Engine::Postgres).await;
}

async fn rides_out(engine: Engine) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db_dir: PathBuf = tmp.path().join("db");
    let (db_port, redis_port) = (free_port(), free_port());
    let mut db = fresh(engine, &db_dir, db_port);
    let mut rd = redis(redis_port);
    let (backend, url) = match engine {
        Engine::MariaDb => ("mysql", format!("mysql://root@127.0.0.1:{db_port}/tw")),
        Engine::Postgres => ("postgres", format!("postgres://postgres@127.0.0.1:{db_port}/tw")),
    };
    let redis_url = format!("redis://127.0.0.1:{redis_port}");
    let env = [
        ("TIDEWAY_STORAGE__BACKEND", backend),
        ("TIDEWAY_STORAGE__URL", url.as_str()),
        ("TIDEWAY_REDIS__URLS", redis_url.as_str()),
        ("TIDEWAY_SERVER__NODE_ID", "3"),
    ];
    let node = start_with(&tmp.path().join("node"), &tmp.path().join("node.log"), &env).await;
    let base = node.base.clone();
    let c = reqwest::Client::new();
    for a in 1..=4 {
        let r = c.put(format!("{base}/v1/users/100/following/{a}")).send().await.expect("follow");
        assert!(r.status().is_success());
    }
    assert_eq!(home(&c, &base, 100).await.0, StatusCode::OK);

    // Writers post without pause while MariaDB is killed and restarted.
    let out = Arc::new(Mutex::new(Outcomes::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (c, base, out, stop) = (c.clone(), base.clone(), out.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let r = post(&c, &base, 1 + (i + w) % 4).await;
                let mut o = out.lock().expect("lock");
                match r {
                    Ok(id) => o.acked.push(id),
                    Err(e) if e.starts_with("503") => o.unavailable += 1,
                    Err(e) => o.other.push(e),
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    drop(db); // kill -9 the database
    let acked_before_down = out.lock().expect("lock").acked.len();
    // Requests in flight wait for a connection (up to the pool's 3 s), then
    // answer 503.
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.lock().expect("lock").unavailable == 0 {
        assert!(Instant::now() < deadline, "writes while the database is down answer 503");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db = start(engine, &db_dir, db_port);
    // The node reconnects by itself: acknowledged writes resume.
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.lock().expect("lock").acked.len() < acked_before_down + 20 {
        assert!(Instant::now() < deadline, "the node did not recover after the database came back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer");
    }
    let out = std::mem::take(&mut *out.lock().expect("lock"));
    assert!(out.other.is_empty(), "only 201 or 503: {:?}", &out.other[..out.other.len().min(5)]);
    eprintln!("{} acknowledged, {} refused with 503 while the database was down", out.acked.len(), out.unavailable);
    for chunk in out.acked.chunks(100) {
        let r = c.get(format!("{base}/v1/items?ids={}", chunk.join(","))).send().await.expect("items");
        let v: Value = r.json().await.expect("json");
        let found: HashSet<&str> =
            v["items"].as_array().expect("items").iter().filter_map(|i| i["id"].as_str()).collect();
        assert!(chunk.iter().all(|id| found.contains(id.as_str())), "an acknowledged item was lost");
    }

    // Redis down: the home page is still served, from the database, exactly.
    let deadline = Instant::now() + Duration::from_secs(20);
    let before = loop {
        // Fan-out of the last posts may lag: wait for a page that stays put.
        let a = home(&c, &base, 100).await.1;
        tokio::time::sleep(Duration::from_millis(300)).await;
        if home(&c, &base, 100).await.1 == a {
            break a;
        }
        assert!(Instant::now() < deadline, "the home page never settled");
    };
    assert_eq!(before.len(), 50);
    drop(rd);
    assert_eq!(home(&c, &base, 100).await, (StatusCode::OK, before.clone()), "pulled while Redis is down");
    let refused = post(&c, &base, 1).await;
    assert!(refused.as_ref().is_err_and(|e| e.starts_with("503")), "a post while Redis is down: {refused:?}");
    rd = redis(redis_port); // empty: every inbox, mark and activity is gone
    assert_eq!(home(&c, &base, 100).await, (StatusCode::OK, before.clone()), "rebuilt from the database");
    let new = post(&c, &base, 2).await.expect("a post once Redis is back");
    let deadline = Instant::now() + Duration::from_secs(20);
    while home(&c, &base, 100).await.1.first() != Some(&new) {
        assert!(Instant::now() < deadline, "the new post never reached the home page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((node, rd, db));
}

/// The event hub's connection to Redis is lost and made again: a
/// subscription hears `Lagged` (signals may have been lost meanwhile), then
/// the signals published after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_hub_comes_back_with_redis() {
    use tideway_store::{Hub, Received, Signal};
    let port = free_port();
    let rd = redis(port);
    let opts = tideway_store_redis::RedisOptions::new(vec![format!("redis://127.0.0.1:{port}")], 800);
    let shared = tideway_store_redis::RedisShared::connect(opts).await.expect("connect");
    let mut sub = shared.subscribe().await.expect("subscribe");
    let next = async |sub: &mut tideway_store::Subscription| {
        tokio::time::timeout(Duration::from_secs(10), sub.recv()).await.expect("a signal within 10 s")
    };
    shared.publish(&[Signal::Work]).await.expect("publish");
    assert_eq!(next(&mut sub).await, Received::Signal(Signal::Work));
    drop(rd); // SIGKILL
    let _rd = redis(port);
    assert_eq!(next(&mut sub).await, Received::Lagged, "told that signals may have been lost");
    // Publishing works again once the connection is made again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while shared.publish(&[Signal::Home(tideway_core::UserId(5))]).await.is_err() {
        assert!(Instant::now() < deadline, "publishing never worked again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(next(&mut sub).await, Received::Signal(Signal::Home(tideway_core::UserId(5))));
}
