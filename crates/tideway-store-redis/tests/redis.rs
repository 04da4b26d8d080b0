//! The shared half on real Redis servers: every conformance suite against a
//! single Redis and against a three-node Redis Cluster (the durable half is
//! the in-memory store), a model test of inboxes against the in-memory
//! implementation, the trimming bound and the recovery from a lost script
//! cache. `scripts/services.sh up` starts the servers and names them in
//! TIDEWAY_TEST_REDIS_URL and TIDEWAY_TEST_REDIS_CLUSTER (scripts/test.sh
//! does this); each test uses a fresh key prefix and deletes its keys.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use tideway_conformance::{INBOX_CAP, SUITES};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Key, UserId};
use tideway_store::{HotAuthors, InboxSet, Inboxes, Split, Store};
use tideway_store_redis::{RedisOptions, RedisShared};

fn urls(var: &str) -> Vec<String> {
    let v = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: start the engines with `eval \"$(scripts/services.sh up)\"` (scripts/test.sh does)")
    });
    v.split(',').map(str::to_owned).collect()
}

fn single() -> Vec<String> {
    urls("TIDEWAY_TEST_REDIS_URL")
}

fn cluster() -> Vec<String> {
    let u = urls("TIDEWAY_TEST_REDIS_CLUSTER");
    assert!(u.len() >= 3, "a cluster of three nodes: {u:?}");
    u
}

async fn connect(urls: Vec<String>, cap: usize) -> Arc<RedisShared> {
    let mut opts = RedisOptions::new(urls, cap);
    opts.prefix = format!("test{}:", rand::random::<u64>());
    Arc::new(RedisShared::connect(opts).await.expect("connect to redis"))
}

async fn conforms(urls: Vec<String>, name: &str) {
    for (suite, check) in SUITES {
        eprintln!("{name}: {suite}");
        let shared = connect(urls.clone(), INBOX_CAP).await;
        let backend = Split::new(Arc::new(Store::in_memory(INBOX_CAP)), shared.clone());
        check(&backend).await;
        shared.purge().await.expect("purge");
    }
}

#[tokio::test]
async fn single_redis_conforms() {
    conforms(single(), "redis").await;
}

#[tokio::test]
async fn redis_cluster_conforms() {
    conforms(cluster(), "redis cluster").await;
}

/// Random deliveries (in and out of order, repeated), rebuilds, merges and
/// drops on Redis and on the in-memory inboxes: every read is the same.
async fn matches_the_memory_inboxes(urls: Vec<String>, seed: u64) {
    const CAP: usize = 16;
    let redis = connect(urls, CAP).await;
    let model = InboxSet::new(CAP);
    let users: Vec<UserId> = (1..=6).map(UserId).collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut next: Key = 1000;
    for step in 0..1500 {
        let u = users[rng.random_range(0..users.len())];
        match rng.random_range(0..100) {
            0..10 => {
                // A fan-out step: several keys (new, older, repeated), each
                // to some users, at once; as each in ascending order.
                let mut chunks: Vec<(Key, Vec<UserId>)> = Vec::new();
                for _ in 0..rng.random_range(1..6) {
                    next += rng.random_range(0..3);
                    let key = if rng.random_bool(0.3) { next - rng.random_range(0..40) } else { next };
                    chunks.push((key, users.iter().copied().filter(|_| rng.random_bool(0.5)).collect()));
                }
                let mut ascending = chunks.clone();
                ascending.sort_by_key(|(k, _)| *k);
                let want: usize = ascending.iter().map(|(k, to)| model.deliver(*k, to)).sum();
                let batch: Vec<(Key, &[UserId])> = chunks.iter().map(|(k, to)| (*k, to.as_slice())).collect();
                assert_eq!(redis.deliver_many(&batch).await.expect("deliver many"), want, "step {step}: {chunks:?}");
            }
            10..55 => {
                // Mostly new keys, sometimes an older or a repeated one.
                next += rng.random_range(1..4);
                let key = if rng.random_bool(0.2) { next - rng.random_range(0..40) } else { next };
                let to: Vec<UserId> = users.iter().copied().filter(|_| rng.random_bool(0.5)).collect();
                let want = model.deliver(key, &to);
                assert_eq!(redis.deliver(key, &to).await.expect("deliver"), want, "step {step}: deliver {key}");
            }
            55..62 => {
                model.begin_rebuild(u);
                redis.begin_rebuild(u).await.expect("begin");
            }
            62..70 => {
                let keys: Vec<Key> = (0..rng.random_range(0..30)).map(|_| next - rng.random_range(0..80)).collect();
                let floor = next.saturating_sub(rng.random_range(20..100));
                model.finish_rebuild(u, &keys, floor);
                redis.finish_rebuild(u, &keys, floor).await.expect("finish");
            }
            70..76 => {
                let keys: Vec<Key> = (0..rng.random_range(0..10)).map(|_| next - rng.random_range(0..60)).collect();
                let floor = next.saturating_sub(rng.random_range(30..120));
                model.merge(u, &keys, floor);
                redis.merge_inbox(u, &keys, floor).await.expect("merge");
            }
            76..78 => {
                model.drop_inbox(u);
                redis.drop_inbox(u).await.expect("drop");
            }
            _ => {
                let range = KeyRange { above: Some(next - rng.random_range(0..50)), below: None };
                let range = if rng.random_bool(0.5) { KeyRange::ALL } else { range };
                let dir = if rng.random_bool(0.5) { Direction::Older } else { Direction::Newer };
                let limit = rng.random_range(1..30);
                let want = model.read(u, range, dir, limit);
                assert_eq!(
                    redis.read_inbox(u, range, dir, limit).await.expect("read"),
                    want,
                    "step {step}: read {u:?}"
                );
                assert_eq!(redis.inbox_floor(u).await.expect("floor"), model.floor(u), "step {step}");
            }
        }
    }
    let mut want = model.export();
    want.sort_unstable_by_key(|(u, ..)| *u);
    assert_eq!(redis.export_inboxes().await.expect("export"), want);
    redis.purge().await.expect("purge");
}

#[tokio::test]
async fn inboxes_match_the_in_memory_ones_on_redis() {
    for seed in 1..=3 {
        matches_the_memory_inboxes(single(), seed).await;
    }
}

#[tokio::test]
async fn inboxes_match_the_in_memory_ones_on_a_cluster() {
    matches_the_memory_inboxes(cluster(), 7).await;
}

/// A full inbox stays within cap + cap/10 slots (about 9 bytes an entry)
/// however many keys arrive, and reads only the newest `cap`.
#[tokio::test]
async fn a_full_inbox_stays_compact() {
    const CAP: usize = 800;
    let redis = connect(single(), CAP).await;
    let u = UserId(5);
    redis.finish_rebuild(u, &[], 0).await.expect("create");
    let mut biggest = 0;
    for k in 1..=5000u64 {
        assert_eq!(redis.deliver(k, &[u]).await.expect("deliver"), 1);
        biggest = biggest.max(redis.inbox_value_len(u).await.expect("length"));
    }
    let read = redis.read_inbox(u, KeyRange::ALL, Direction::Older, 10_000).await.expect("read").expect("present");
    assert_eq!(read.keys.len(), CAP);
    assert_eq!((read.keys[0], read.floor), (5000, 5000 - CAP as u64));
    assert!(biggest <= 24 + (CAP + CAP / 10) * 8, "the value grew to {biggest} bytes");
    assert!(biggest as f64 / CAP as f64 <= 9.1, "{} bytes per entry", biggest as f64 / CAP as f64);
    redis.purge().await.expect("purge");
}

/// A server that lost its scripts (restart, failover, SCRIPT FLUSH) gets
/// them again on the next call.
#[tokio::test]
async fn scripts_come_back_after_a_flush() {
    let redis = connect(single(), 10).await;
    let u = UserId(9);
    redis.finish_rebuild(u, &[1], 0).await.expect("create");
    let client = redis::Client::open(single()[0].as_str()).expect("client");
    let mut c = client.get_multiplexed_async_connection().await.expect("conn");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut c).await.expect("flush scripts");
    assert_eq!(redis.deliver(2, &[u]).await.expect("deliver after the flush"), 1);
    redis.mark_unpushed(u, 77).await.expect("mark after the flush");
    assert_eq!(redis.unpushed_above(&[u], 0).await.expect("above"), vec![u]);
    redis.purge().await.expect("purge");
}

/// The same on a cluster where only one primary lost its scripts (a new
/// or promoted server): each script runs from its text on the server that
/// answers for the keys, whichever that is.
#[tokio::test]
async fn scripts_come_back_when_one_cluster_node_lost_them() {
    let redis = connect(cluster(), 10).await;
    let users: Vec<UserId> = (1..=30).map(UserId).collect();
    for &u in &users {
        redis.finish_rebuild(u, &[1], 0).await.expect("create");
    }
    let first = &cluster()[0];
    let client = redis::Client::open(first.as_str()).expect("client");
    let mut c = client.get_multiplexed_async_connection().await.expect("conn");
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut c).await.expect("flush scripts");
    // Only the commands that missed are run again: the count of inboxes
    // that took the key keeps those that took it the first time.
    assert_eq!(redis.deliver(2, &users).await.expect("deliver after the flush"), users.len());
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut c).await.expect("flush scripts");
    let step: [(Key, &[UserId]); 2] = [(4, &users[..]), (3, &users[..10])];
    assert_eq!(redis.deliver_many(&step).await.expect("deliver many after the flush"), users.len() + 10);
    for &u in &users {
        let read = redis.read_inbox(u, KeyRange::ALL, Direction::Older, 10).await.expect("read").expect("present");
        let want = if u.0 <= 10 { vec![4, 3, 2, 1] } else { vec![4, 2, 1] };
        assert_eq!(read.keys, want, "user {u}");
        redis.mark_unpushed(u, 77).await.expect("mark after the flush");
    }
    assert_eq!(redis.unpushed_above(&users, 0).await.expect("above"), users);
    redis.purge().await.expect("purge");
}

/// A step to more inboxes than one script run takes (256) is delivered in
/// several runs, on one Redis and on a cluster, every key counted once.
#[tokio::test]
async fn a_step_to_many_inboxes_takes_several_runs() {
    for urls in [single(), cluster()] {
        let redis = connect(urls, 10).await;
        let users: Vec<UserId> = (1..=700).map(UserId).collect();
        for &u in &users {
            redis.finish_rebuild(u, &[1], 0).await.expect("create");
        }
        let step: [(Key, &[UserId]); 2] = [(5, &users[..]), (3, &users[..300])];
        assert_eq!(redis.deliver_many(&step).await.expect("deliver many"), 1000);
        for &u in &users {
            let read = redis.read_inbox(u, KeyRange::ALL, Direction::Older, 10).await.expect("read").expect("present");
            let want = if u.0 <= 300 { vec![5, 3, 1] } else { vec![5, 1] };
            assert_eq!(read.keys, want, "user {u}");
        }
        redis.purge().await.expect("purge");
    }
}

/// A private `redis-server` on `port` (killed on drop).
struct Server(std::process::Child);

impl Server {
    fn start(port: u16) -> Self {
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server on {port} did not come up");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Server(child)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Once a probe found Redis down, calls fail at once without asking it (a
/// page is then pulled from the database at once, not after a timeout per
/// call); the next probe that finds it back closes the breaker.
#[tokio::test]
async fn calls_fail_fast_while_the_probe_finds_redis_down() {
    use tideway_store::Hub;
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let server = Server::start(port);
    let redis = connect(vec![format!("redis://127.0.0.1:{port}")], 10).await;
    let u = UserId(4);
    redis.ping().await.expect("up");
    redis.finish_rebuild(u, &[1], 0).await.expect("create");
    drop(server);
    assert!(redis.ping().await.is_err(), "the probe finds it down");
    let e = redis.inbox_floor(u).await.expect_err("down");
    assert!(e.is_unavailable() && e.to_string().contains("not asked again"), "{e}");
    let _server = Server::start(port);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while redis.ping().await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the probe did not find it back");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(redis.inbox_floor(u).await.expect("back"), None, "its data went with it: the inbox is rebuilt on read");
}

/// An unreachable server or a malformed URL is refused at connect, naming
/// the setting to fix.
#[tokio::test]
async fn a_bad_url_is_refused_naming_the_setting() {
    for urls in [vec!["redis://127.0.0.1:1".to_string()], vec!["http://example".to_string()], vec![]] {
        let mut opts = RedisOptions::new(urls.clone(), 10);
        opts.timeout = std::time::Duration::from_millis(300);
        match RedisShared::connect(opts).await {
            Ok(_) => panic!("{urls:?} connected"),
            Err(e) => assert!(e.to_string().contains("TIDEWAY_REDIS__URLS"), "{urls:?}: {e}"),
        }
    }
    // A password never shows; a Redis without cluster mode named as a
    // cluster's nodes is told apart.
    let mut opts = RedisOptions::new(vec!["redis://:sekrit@127.0.0.1:1".into()], 10);
    opts.timeout = std::time::Duration::from_millis(300);
    let e = RedisShared::connect(opts).await.err().expect("refused").chain();
    assert!(!e.contains("sekrit") && e.contains("<redacted>"), "{e}");
    let twice = vec![single()[0].clone(), single()[0].clone()];
    let e = RedisShared::connect(RedisOptions::new(twice, 10)).await.err().expect("refused").chain();
    assert!(e.contains("TIDEWAY_REDIS__URLS") && e.contains("without cluster mode"), "{e}");
}

/// Two nodes (two connections with one prefix) hear each other's signals;
/// another deployment's prefix hears nothing.
async fn nodes_hear_each_other(urls: Vec<String>) {
    use tideway_store::{Hub, Received, Signal};
    let prefix = format!("test{}:", rand::random::<u64>());
    let node = |prefix: String| {
        let urls = urls.clone();
        async move {
            let mut opts = RedisOptions::new(urls, INBOX_CAP);
            opts.prefix = prefix;
            RedisShared::connect(opts).await.expect("connect to redis")
        }
    };
    let (a, b, other) =
        (node(prefix.clone()).await, node(prefix).await, node(format!("test{}:", rand::random::<u64>())).await);
    let mut on_b = b.subscribe().await.expect("subscribe");
    let mut on_other = other.subscribe().await.expect("subscribe");
    a.publish(&[Signal::Work, Signal::Home(UserId(42))]).await.expect("publish");
    let next = async |s: &mut tideway_store::Subscription| {
        tokio::time::timeout(std::time::Duration::from_secs(5), s.recv()).await.expect("a signal within 5 s")
    };
    assert_eq!(next(&mut on_b).await, Received::Signal(Signal::Work));
    assert_eq!(next(&mut on_b).await, Received::Signal(Signal::Home(UserId(42))));
    other.publish(&[Signal::Home(UserId(1))]).await.expect("publish");
    assert_eq!(next(&mut on_other).await, Received::Signal(Signal::Home(UserId(1))), "not A's signals");
}

#[tokio::test]
async fn hub_signals_cross_nodes_on_redis() {
    nodes_hear_each_other(single()).await;
}

#[tokio::test]
async fn hub_signals_cross_nodes_on_a_cluster() {
    nodes_hear_each_other(cluster()).await;
}

/// Hot-author marks made on one node are read on another, which keeps a
/// copy of who has marks: a new author's first mark, a later one, marks
/// after a flush, and a first mark whose announcement failed (written
/// here by hand, as a node that stopped between the two would leave it).
async fn marks_on_one_node_are_read_on_another(urls: Vec<String>) {
    let prefix = format!("test{}:", rand::random::<u64>());
    let node = |urls: Vec<String>, prefix: String| async move {
        let mut opts = RedisOptions::new(urls, 10);
        opts.prefix = prefix;
        Arc::new(RedisShared::connect(opts).await.expect("connect to redis"))
    };
    let (a, b) = (node(urls.clone(), prefix.clone()).await, node(urls.clone(), prefix.clone()).await);
    let followed: Vec<UserId> = (1..=100).map(UserId).collect();
    let marks = async |expected: &[(u64, Key)]| {
        let got = a.unpushed_keys(&followed).await.expect("marks");
        let want: Vec<Option<Key>> =
            followed.iter().map(|u| expected.iter().find(|(w, _)| *w == u.0).map(|(_, k)| *k)).collect();
        assert_eq!(got, want);
    };
    marks(&[]).await;
    b.mark_unpushed(UserId(7), 500).await.expect("mark");
    marks(&[(7, 500)]).await;
    b.mark_unpushed(UserId(7), 600).await.expect("mark");
    b.mark_unpushed(UserId(7), 550).await.expect("an older mark");
    marks(&[(7, 600)]).await;
    b.mark_unpushed(UserId(42), 900).await.expect("mark");
    marks(&[(7, 600), (42, 900)]).await;
    // A flush drops the marks and their generation.
    b.purge().await.expect("purge");
    marks(&[]).await;
    b.mark_unpushed(UserId(7), 700).await.expect("mark after the flush");
    marks(&[(7, 700)]).await;
    // A first mark left unannounced: seen once its author is marked again.
    let shard = format!("{prefix}h{{h9}}"); // (user 9: shard 9 of 16)
    let mut value = 750u64.to_be_bytes().to_vec();
    value.push(b'n');
    let _: () = raw_query(&urls, redis::cmd("HSET").arg(&shard).arg(9).arg(&value)).await;
    b.mark_unpushed(UserId(9), 800).await.expect("mark");
    marks(&[(7, 700), (9, 800)]).await;
    assert_eq!(b.export_unpushed().await.expect("export"), vec![(UserId(7), 700), (UserId(9), 800)]);
    a.purge().await.expect("purge");
}

/// One command sent straight to the server or cluster at `urls`, past
/// tideway (what a test sets up or looks at behind its back).
async fn raw_query<T: redis::FromRedisValue>(urls: &[String], cmd: &redis::Cmd) -> T {
    if urls.len() == 1 {
        let client = redis::Client::open(urls[0].as_str()).expect("client");
        let mut c = client.get_multiplexed_async_connection().await.expect("conn");
        cmd.query_async(&mut c).await.expect("a raw command")
    } else {
        let cluster = redis::cluster::ClusterClient::new(urls.to_vec()).expect("cluster client");
        let mut c = cluster.get_async_connection().await.expect("conn");
        cmd.query_async(&mut c).await.expect("a raw command")
    }
}

#[tokio::test]
async fn marks_on_one_node_are_read_on_another_on_redis() {
    marks_on_one_node_are_read_on_another(single()).await;
}

#[tokio::test]
async fn marks_on_one_node_are_read_on_another_on_a_cluster() {
    marks_on_one_node_are_read_on_another(cluster()).await;
}

/// A fact change in flight lapses (its key expires within 30 s), and a
/// token lost (a lapse, a flush) is replaced by one never given before;
/// an end that comes after its change lapsed still moves the token.
async fn fact_tokens_lapse_and_are_never_repeated(urls: Vec<String>) {
    use tideway_core::ItemId;
    use tideway_store::{FactKey, FactTokens};
    let mut opts = RedisOptions::new(urls.clone(), 10);
    opts.prefix = format!("test{}:", rand::random::<u64>());
    let redis = RedisShared::connect(opts.clone()).await.expect("connect");
    let item = FactKey::Item(ItemId(12345));
    assert_eq!(redis.fact_tokens(&[item]).await.expect("tokens"), vec![None], "none before one is minted");
    redis.mint_fact_tokens(&[item]).await.expect("mint");
    let first = redis.fact_tokens(&[item]).await.expect("tokens")[0].expect("a token");
    redis.begin_fact_change(&[item]).await.expect("begin");
    let key = format!("{}t{{t{}}}:12345", opts.prefix, 12345 % 16);
    let ttl: i64 = raw_query(&urls, redis::cmd("PTTL").arg(&key)).await;
    assert!(ttl > 0 && ttl <= 30_000, "a change in flight lapses within 30 s: PTTL {ttl}");
    assert_eq!(redis.fact_tokens(&[item]).await.expect("in flight"), vec![None]);
    // It lapses (as the key's expiry would make it).
    redis.purge().await.expect("purge");
    assert_eq!(redis.fact_tokens(&[item]).await.expect("after a lapse"), vec![None]);
    redis.mint_fact_tokens(&[item]).await.expect("mint");
    let second = redis.fact_tokens(&[item]).await.expect("after a lapse")[0].expect("a new token");
    assert_ne!(second, first, "a token is never given twice");
    redis.end_fact_change(&[item]).await.expect("a late end");
    let third = redis.fact_tokens(&[item]).await.expect("after the late end")[0].expect("a token");
    assert!(third != second && third != first, "a late end moves the token");
    redis.purge().await.expect("purge");
}

#[tokio::test]
async fn fact_tokens_lapse_and_are_never_repeated_on_redis() {
    fact_tokens_lapse_and_are_never_repeated(single()).await;
}

#[tokio::test]
async fn fact_tokens_lapse_and_are_never_repeated_on_a_cluster() {
    fact_tokens_lapse_and_are_never_repeated(cluster()).await;
}

/// A private Redis Cluster of three primaries without replicas, configured
/// as docs/deploy.md configures one (`cluster-require-full-coverage no`:
/// a primary's slots fail alone), with a short `cluster-node-timeout`
/// (every node killed, and its directory removed, on drop).
struct PrivateCluster {
    dir: std::path::PathBuf,
    nodes: Vec<(u16, std::process::Child)>,
}

impl PrivateCluster {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("tideway-test-cluster-{}", rand::random::<u64>()));
        let mut me = PrivateCluster { dir, nodes: Vec::new() };
        for i in 0..3 {
            // A free port whose cluster-bus port (+10000) is free too.
            let port = loop {
                let p = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
                if p < 55000 && std::net::TcpListener::bind(("127.0.0.1", p + 10000)).is_ok() {
                    break p;
                }
            };
            let child = me.spawn(i, port);
            me.nodes.push((port, child));
        }
        let addrs: Vec<String> = me.nodes.iter().map(|(p, _)| format!("127.0.0.1:{p}")).collect();
        let created = std::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .arg("--cluster-yes")
            .output();
        assert!(created.as_ref().is_ok_and(|o| o.status.success()), "redis-cli --cluster create: {created:?}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        for i in 0..3 {
            while !me.cli(i, &["cluster", "info"]).contains("cluster_state:ok") {
                assert!(std::time::Instant::now() < deadline, "the cluster did not become ready");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        me
    }

    /// Starts node `i` on `port` (its directory and cluster view kept
    /// across restarts; no persistence) and waits until it listens.
    fn spawn(&self, i: usize, port: u16) -> std::process::Child {
        let d = self.dir.join(format!("r{i}"));
        std::fs::create_dir_all(&d).expect("dir");
        let child = std::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
            .args(["--cluster-require-full-coverage", "no"])
            .arg("--cluster-config-file")
            .arg(d.join("nodes.conf"))
            .arg("--dir")
            .arg(&d)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(std::time::Instant::now() < deadline, "redis-server on {port} did not come up");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child
    }

    /// `kill -9` of node `i`.
    fn kill(&mut self, i: usize) {
        let _ = self.nodes[i].1.kill();
        let _ = self.nodes[i].1.wait();
    }

    /// Starts node `i` again after [`Self::kill`]: empty, the same node of
    /// the cluster (its `nodes.conf`), serving the same slots.
    fn restart(&mut self, i: usize) {
        self.nodes[i].1 = self.spawn(i, self.nodes[i].0);
    }

    fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|(p, _)| format!("redis://127.0.0.1:{p}")).collect()
    }

    /// `redis-cli -p <node i's port> args…`'s output.
    fn cli(&self, i: usize, args: &[&str]) -> String {
        let out = std::process::Command::new("redis-cli")
            .arg("-p")
            .arg(self.nodes[i].0.to_string())
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends node `i` a signal (`STOP`: it answers nothing, its connections
    /// stay open; `CONT`: it carries on).
    fn signal(&self, i: usize, sig: &str) {
        let done =
            std::process::Command::new("kill").arg(format!("-{sig}")).arg(self.nodes[i].1.id().to_string()).status();
        assert!(done.is_ok_and(|s| s.success()), "kill -{sig}");
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.nodes {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One primary of three stops answering (paused: no replica takes over):
/// once the probe found it down, calls for its slots fail at once (well
/// under the 2 s command timeout), and those for the other primaries' slots
/// go through, reads, writes, batches that span both (the healthy part
/// runs), and the hub's `PUBLISH`; the same once the other nodes flag it
/// failed (the cluster stays `ok`: full coverage is not required). When it
/// answers again, the next probe closes its breaker and every call works.
/// Then the same with the primary killed and started again (empty).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_down_fails_only_its_slots() {
    use std::time::{Duration, Instant};
    use tideway_store::{Hub, Signal};
    let mut cluster = PrivateCluster::start();
    let prefix = format!("test{}:", rand::random::<u64>());
    let mut opts = RedisOptions::new(cluster.urls(), 10);
    opts.prefix = prefix.clone();
    let redis = Arc::new(RedisShared::connect(opts).await.expect("connect"));
    redis.ping().await.expect("up");
    let users: Vec<UserId> = (1..=60).map(UserId).collect();
    for &u in &users {
        redis.finish_rebuild(u, &[1], 0).await.expect("create");
    }
    // The users whose inbox the paused node serves (`<prefix>i{<user>}`).
    let on_paused: Vec<UserId> = cluster
        .cli(0, &["keys", &format!("{prefix}i*")])
        .lines()
        .filter_map(|k| k.trim().strip_prefix(&format!("{prefix}i{{"))?.strip_suffix('}')?.parse().ok())
        .map(UserId)
        .collect();
    let elsewhere: Vec<UserId> = users.iter().copied().filter(|u| !on_paused.contains(u)).collect();
    assert!(!on_paused.is_empty() && elsewhere.len() > 20, "{on_paused:?}");

    // Node 0 serves the first slots: the probe meets it first.
    cluster.signal(0, "STOP");
    let checks = async |round: &str, key: Key| {
        // Within the server's probe timeout (2 s), which would cut it short.
        let t = Instant::now();
        let e = redis.ping().await.expect_err("the probe finds a primary down");
        assert!(e.to_string().contains("is down"), "{round}: {e}");
        assert!(t.elapsed() < Duration::from_millis(1800), "{round}: the probe took {:?}", t.elapsed());
        for &u in &on_paused[..on_paused.len().min(5)] {
            let t = Instant::now();
            let e = redis.inbox_floor(u).await.expect_err("its primary is down");
            assert!(e.is_unavailable() && e.to_string().contains("not asked again"), "{round}: {e}");
            assert!(t.elapsed() < Duration::from_millis(300), "{round}: failed in {:?}, not at once", t.elapsed());
        }
        let t = Instant::now();
        for &u in &elsewhere {
            assert_eq!(redis.inbox_floor(u).await.expect("a healthy primary's slot"), Some(0), "{round}");
        }
        assert_eq!(redis.deliver_many(&[(key, &elsewhere[..])]).await.expect("delivered"), elsewhere.len(), "{round}");
        redis.publish(&[Signal::Work]).await.expect("publish to a primary that answers");
        assert!(t.elapsed() < Duration::from_secs(1), "{round}: healthy calls took {:?}", t.elapsed());
        // A step to inboxes on every primary: the healthy ones get it, the
        // step fails at once (the worker delivers it again, idempotently).
        let t = Instant::now();
        let e = redis.deliver_many(&[(key + 1, &users[..])]).await.expect_err("part of it is down");
        assert!(e.is_unavailable() && t.elapsed() < Duration::from_millis(500), "{round}: {e} in {:?}", t.elapsed());
        for &u in &elsewhere {
            let read = redis.read_inbox(u, KeyRange::ALL, Direction::Older, 10).await.expect("read").expect("there");
            assert_eq!(read.keys[..2], [key + 1, key], "{round}: user {u}");
        }
    };
    checks("paused", 10).await;
    // The other nodes flag it failed after cluster-node-timeout (1 s); the
    // cluster's state stays ok and the healthy slots keep serving.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cluster.cli(2, &["cluster", "nodes"]).contains("master,fail") {
        assert!(
            Instant::now() < deadline,
            "node 0 was never flagged failed:\n{}",
            cluster.cli(2, &["cluster", "nodes"])
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cluster.cli(2, &["cluster", "info"]).contains("cluster_state:ok"), "full coverage is not required");
    checks("flagged failed", 20).await;

    cluster.signal(0, "CONT");
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = redis.ping().await {
        assert!(Instant::now() < deadline, "the probe never found it back: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for &u in &on_paused {
        assert_eq!(redis.inbox_floor(u).await.expect("back"), Some(0), "user {u}: kept while paused");
    }
    assert_eq!(redis.deliver_many(&[(30, &users[..])]).await.expect("every primary"), users.len());

    // The same primary killed (`kill -9`): the same, and once it is started
    // again (empty: no persistence) its users' inboxes are absent, to be
    // rebuilt from the database, and every call works.
    cluster.kill(0);
    checks("killed", 40).await;
    cluster.restart(0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = redis.ping().await {
        assert!(Instant::now() < deadline, "the probe never found it back after a restart: {e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for &u in &on_paused {
        assert_eq!(redis.inbox_floor(u).await.expect("back"), None, "user {u}: lost with its primary");
    }
    for &u in &elsewhere {
        assert_eq!(redis.inbox_floor(u).await.expect("there"), Some(0), "user {u}");
    }
    assert_eq!(redis.deliver_many(&[(50, &elsewhere[..])]).await.expect("every primary"), elsewhere.len());
    redis.purge().await.expect("purge");
}
