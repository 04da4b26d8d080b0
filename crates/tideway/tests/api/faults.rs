//! The engines fail under a running node. A private MariaDB or PostgreSQL and
//! a private Redis (own data directory, free ports; never the shared test
//! servers) are
//! killed with SIGKILL and restarted while a `tideway serve` process on them
//! takes writes: every answer is 201 or 503 (never a 500 or a hang), every
//! acknowledged item is there afterwards, the node recovers by itself, and
//! while Redis is down posts are still taken and home pages still served,
//! exactly, from the database.

use crate::crash::{free_port, start_with};
use crate::daemons::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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

/// A probe's status; it must answer within a second (a probe that waits on
/// an engine is the fault these checks exist for).
async fn probe(c: &reqwest::Client, base: &str, path: &str) -> StatusCode {
    let r = c.get(format!("{base}{path}")).timeout(Duration::from_secs(1)).send().await;
    r.unwrap_or_else(|e| panic!("{path} did not answer within 1 s: {e}")).status()
}

/// Waits until `path` answers `want` (the probes run once a second).
async fn probe_becomes(c: &reqwest::Client, base: &str, path: &str, want: StatusCode, why: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = probe(c, base, path).await;
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{path} is {got}, not {want}, {why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of one series of `/metrics` (`name{labels}` as rendered).
async fn metric(c: &reqwest::Client, base: &str, series: &str) -> Option<f64> {
    let text = c.get(format!("{base}/metrics")).send().await.ok()?.text().await.ok()?;
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// With Redis (or part of it) down: monitoring shows it, the node stays
/// ready and alive, and still reads the fan-out figures from the database.
async fn ready_with_redis_down(c: &reqwest::Client, base: &str, what: &str) {
    let redis_up = r#"tideway_engine_up{engine="redis",role="shared"}"#;
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(c, base, redis_up).await != Some(0.0) {
        assert!(Instant::now() < deadline, "tideway_engine_up shows Redis down ({what})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(probe(c, base, "/readyz").await, StatusCode::OK, "ready with {what}");
    assert_eq!(probe(c, base, "/healthz").await, StatusCode::OK, "alive with {what}");
    let pending = metric(c, base, r#"tideway_fanout_pending{scope="deployment"}"#).await;
    assert!(pending.is_some_and(|p| !p.is_nan()), "fan-out figures read from the database: {pending:?}");
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
    let durable_up = format!(r#"tideway_engine_up{{engine="{backend}",role="durable"}}"#);
    assert_eq!(probe(&c, &base, "/readyz").await, StatusCode::OK);
    assert_eq!(metric(&c, &base, &durable_up).await, Some(1.0));
    drop(db); // kill -9 the database
    let acked_before_down = out.lock().expect("lock").acked.len();
    // Requests in flight wait for a connection (up to the pool's 3 s), then
    // answer 503.
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.lock().expect("lock").unavailable == 0 {
        assert!(Instant::now() < deadline, "writes while the database is down answer 503");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Probes: not ready (send pages elsewhere), but alive (a restart would
    // not bring the database back); monitoring says so, and does not show
    // a made-up fan-out lag of 0.
    probe_becomes(&c, &base, "/readyz", StatusCode::SERVICE_UNAVAILABLE, "with the database down").await;
    assert_eq!(probe(&c, &base, "/healthz").await, StatusCode::OK, "alive with the database down");
    assert_eq!(metric(&c, &base, &durable_up).await, Some(0.0));
    let lag = metric(&c, &base, r#"tideway_fanout_oldest_pending_ms{scope="deployment"}"#).await;
    assert!(lag.is_some_and(f64::is_nan), "the lag is unknown while the database is down: {lag:?}");
    let errors = format!(r#"tideway_engine_errors_total{{engine="{backend}",kind="unavailable"}}"#);
    assert!(metric(&c, &base, &errors).await.is_some_and(|n| n > 0.0), "the refused writes are counted");
    db = start(engine, &db_dir, db_port);
    probe_becomes(&c, &base, "/readyz", StatusCode::OK, "once the database is back").await;
    // The node reconnects by itself: acknowledged writes resume, until a
    // home page's worth (50) is acknowledged for the Redis steps below.
    let deadline = Instant::now() + Duration::from_secs(30);
    while out.lock().expect("lock").acked.len() < (acked_before_down + 20).max(50) {
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

    // The database hangs (stopped: connections open, no answers): not ready
    // within the probe's timeout, alive all along, ready again after.
    pause(&db, true);
    probe_becomes(&c, &base, "/readyz", StatusCode::SERVICE_UNAVAILABLE, "with the database hung").await;
    assert_eq!(probe(&c, &base, "/healthz").await, StatusCode::OK, "alive with the database hung");
    pause(&db, false);
    probe_becomes(&c, &base, "/readyz", StatusCode::OK, "once the database answers again").await;

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
    // Ready and alive: pages are served from the database; monitoring shows
    // Redis down and still reads the fan-out figures from the database.
    ready_with_redis_down(&c, &base, "Redis down").await;
    // A post is taken all the same (the database records that no node may
    // trust Redis, `tideway_store::trust`) and is on the home page at once.
    let during = post(&c, &base, 1).await.expect("a post while Redis is down is taken");
    let mut want = vec![during.clone()];
    want.extend(before[..49].iter().cloned());
    assert_eq!(home(&c, &base, 100).await, (StatusCode::OK, want.clone()), "the post, pulled while Redis is down");
    rd = redis(redis_port); // empty: every inbox, mark and activity is gone
    assert_eq!(home(&c, &base, 100).await, (StatusCode::OK, want), "rebuilt from the database");
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

/// One primary of three away: the node stays ready and alive and serves
/// home pages from the database; monitoring shows Redis down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_redis_primary_away_leaves_the_node_ready() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cluster = redis_cluster(tmp.path());
    let (db, node) = node_on_cluster(tmp.path(), &cluster, 4).await;
    let (c, base) = (reqwest::Client::new(), node.base.clone());
    for a in 1..=3 {
        let r = c.put(format!("{base}/v1/users/100/following/{a}")).send().await.expect("follow");
        assert!(r.status().is_success());
    }
    let mut posted = Vec::new();
    for a in [1, 2, 3, 1, 2, 3] {
        posted.push(post(&c, &base, a).await.expect("a post"));
    }
    posted.reverse();
    let deadline = Instant::now() + Duration::from_secs(20);
    while home(&c, &base, 100).await.1 != posted {
        assert!(Instant::now() < deadline, "the home page shows the posts");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let redis_up = r#"tideway_engine_up{engine="redis",role="shared"}"#;
    assert_eq!(metric(&c, &base, redis_up).await, Some(1.0));

    drop(cluster.remove(1)); // kill -9 one primary
    ready_with_redis_down(&c, &base, "one primary away").await;
    assert_eq!(home(&c, &base, 100).await, (StatusCode::OK, posted.clone()), "pages pulled from the database");
    // (A figure, not an assertion: what a pulled page costs with the
    // breaker open, against ~1.28 s a read before it.)
    let mut took: Vec<u128> = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        assert_eq!(home(&c, &base, 100).await, (StatusCode::OK, posted.clone()));
        took.push(t.elapsed().as_micros());
    }
    took.sort_unstable();
    eprintln!("home page with one primary of three away: p50 {} µs, max {} µs (20 reads)", took[10], took[19]);
    let r = c.get(format!("{base}/v1/stats")).send().await.expect("stats");
    assert_eq!(r.status(), StatusCode::OK, "stats answer (inbox figures cached, or null)");
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["fanout"]["pending"], json!(0), "{v}");
    drop((node, cluster));
    db.drop().await.expect("drop the database");
}

/// A fresh PostgreSQL database and a `tideway serve` node (id `node_id`) on
/// it and the private `cluster`, its log in `dir/node.log`.
async fn node_on_cluster(
    dir: &Path,
    cluster: &[(u16, Daemon)],
    node_id: u16,
) -> (tideway_store_sql::testing::FreshDatabase, crate::crash::Proc) {
    let db = tideway_store_sql::testing::FreshDatabase::create(
        &std::env::var("TIDEWAY_TEST_POSTGRES_URL").expect("TIDEWAY_TEST_POSTGRES_URL (scripts/services.sh)"),
    )
    .await
    .expect("db");
    let urls: Vec<String> = cluster.iter().map(|(p, _)| format!("redis://127.0.0.1:{p}")).collect();
    let (urls, id) = (urls.join(","), node_id.to_string());
    let env = [
        ("TIDEWAY_STORAGE__BACKEND", "postgres"),
        ("TIDEWAY_STORAGE__URL", db.url.as_str()),
        ("TIDEWAY_REDIS__URLS", urls.as_str()),
        ("TIDEWAY_SERVER__NODE_ID", id.as_str()),
    ];
    let node = start_with(&dir.join("node"), &dir.join("node.log"), &env).await;
    (db, node)
}

/// Failovers of a Redis Cluster with a replica per primary, under posts and
/// home reads: a coordinated `CLUSTER FAILOVER`, then `kill -9` of a primary
/// (its replica promoted after `cluster-node-timeout`). Every post answers
/// 201 or 503, every read 200; the node follows the new topology by itself
/// (posts succeed again); nothing acknowledged is lost, and every home page
/// equals its definition: the followed authors' posts, newest first (a
/// promoted replica may lack the last deliveries, so the node drops the
/// shared state once and inboxes are rebuilt from the database).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_failovers_lose_nothing() {
    const AUTHORS: u64 = 6;
    const READERS: std::ops::Range<u64> = 100..130;
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cluster = redis_cluster_of(tmp.path(), 1);
    let (db, node) = node_on_cluster(tmp.path(), &cluster, 5).await;
    let (c, base) = (reqwest::Client::new(), node.base.clone());
    // Reader r follows the authors r % 3 and 3 + r % 3: homes across every slot.
    let followed = |r: u64| [1 + r % 3, 4 + r % 3];
    for r in READERS {
        for a in followed(r) {
            let f = c.put(format!("{base}/v1/users/{r}/following/{a}")).send().await.expect("follow");
            assert!(f.status().is_success());
        }
        assert_eq!(home(&c, &base, r).await.0, StatusCode::OK);
    }

    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (c, base, outcomes, stop) = (c.clone(), base.clone(), outcomes.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            let mut bad_reads = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let outcome = post(&c, &base, 1 + n % AUTHORS).await;
                {
                    let mut o = outcomes.lock().expect("outcomes");
                    match outcome {
                        Ok(id) => o.acked.push(id),
                        Err(e) if e.starts_with("503") => o.unavailable += 1,
                        Err(e) => o.other.push(e),
                    }
                }
                let (status, _) = home(&c, &base, READERS.start + n % 30).await;
                if status != StatusCode::OK {
                    bad_reads.push(status);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            bad_reads
        })
    };
    let acked = || outcomes.lock().expect("outcomes").acked.len();
    // Posts succeed again (the node follows the new topology by itself).
    // (On a timeout it says what the posts got, and what the cluster's nodes say.)
    let posts_flow = async |what: &'static str, report: &dyn Fn() -> String| {
        let stuck = || {
            let o = outcomes.lock().expect("outcomes");
            let last: Vec<&String> = o.other.iter().rev().take(3).collect();
            format!("{} answered 503, the last other errors {last:?}\n{}", o.unavailable, report())
        };
        let before = acked();
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked() < before + 10 {
            assert!(Instant::now() < deadline, "posts did not succeed again after {what}: {}", stuck());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    posts_flow("the start", &|| cluster_report(tmp.path(), &cluster)).await;

    // 1. A coordinated failover: a replica takes over its primary's slots.
    let replica = cluster.iter().map(|(p, _)| *p).find(|p| !is_primary(*p)).expect("a replica");
    assert!(rcli(replica, &["cluster", "failover"]).contains("OK"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_primary(replica) {
        assert!(Instant::now() < deadline, "the replica on {replica} was not promoted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    posts_flow("CLUSTER FAILOVER", &|| cluster_report(tmp.path(), &cluster)).await;

    // 2. kill -9 of a primary: its replica is promoted after the node timeout.
    let victim = cluster.iter().position(|(p, _)| is_primary(*p)).expect("a primary");
    let (victim_port, victim_daemon) = cluster.remove(victim);
    drop(victim_daemon);
    eprintln!("killed the primary on {victim_port}");
    posts_flow("kill -9 of a primary", &|| cluster_report(tmp.path(), &cluster)).await;

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let bad_reads = load.await.expect("load");
    let o = std::mem::take(&mut *outcomes.lock().expect("outcomes"));
    eprintln!("{} posts acknowledged, {} answered 503", o.acked.len(), o.unavailable);
    assert!(o.other.is_empty(), "answers other than 201 and 503: {:?}", o.other);
    assert!(bad_reads.is_empty(), "home reads that did not answer 200: {bad_reads:?}");

    // Every acknowledged post is stored; every home equals its definition.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = c.get(format!("{base}/v1/stats")).send().await.expect("stats");
        let v: Value = r.json().await.expect("json");
        if v["fanout"]["pending"] == json!(0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fan-out did not drain: {v}; the node's log:\n{}\nthe cluster:\n{}",
            std::fs::read_to_string(tmp.path().join("node.log")).unwrap_or_default(),
            cluster_report(tmp.path(), &cluster)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut by_author: Vec<Vec<String>> = vec![Vec::new(); AUTHORS as usize + 1];
    for a in 1..=AUTHORS {
        let r = c.get(format!("{base}/v1/users/{a}/profile?limit=100")).send().await.expect("profile");
        let v: Value = r.json().await.expect("json");
        let mut ids: Vec<String> = Vec::new();
        let mut page = v;
        loop {
            ids.extend(
                page["entries"]
                    .as_array()
                    .expect("entries")
                    .iter()
                    .map(|e| e["item"]["id"].as_str().expect("id").to_owned()),
            );
            let Some(next) = page["next_cursor"].as_str().map(str::to_owned) else { break };
            let r = c.get(format!("{base}/v1/users/{a}/profile?limit=100&before={next}")).send().await.expect("page");
            page = r.json().await.expect("json");
        }
        by_author[a as usize] = ids;
    }
    let stored: HashSet<&String> = by_author.iter().flatten().collect();
    let lost: Vec<&String> = o.acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "acknowledged posts lost: {lost:?}");
    let key = |id: &String| id.parse::<u64>().expect("numeric id");
    for r in READERS {
        let mut want: Vec<String> = followed(r).iter().flat_map(|&a| by_author[a as usize].clone()).collect();
        want.sort_by_key(|id| std::cmp::Reverse(key(id)));
        want.truncate(50);
        let got = home(&c, &base, r).await;
        assert_eq!(got, (StatusCode::OK, want), "home of {r} after the failovers");
    }
    let log = std::fs::read_to_string(tmp.path().join("node.log")).unwrap_or_default();
    assert!(log.contains("became a primary"), "the node saw the promotions and dropped the shared state: {log}");
    drop((node, cluster));
    db.drop().await.expect("drop the database");
}
