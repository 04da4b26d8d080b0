//! Two `tideway serve` processes on one PostgreSQL database and a three-node
//! Redis Cluster (a fresh database and key prefix): writes on one node are read on the
//! other, a node killed with `kill -9` in the middle of a delivery leaves it
//! to the other node (every follower gets the item exactly once), and pages
//! stay right after every Redis key is deleted. The engines come from
//! `scripts/services.sh up` (TIDEWAY_TEST_POSTGRES_URL, TIDEWAY_TEST_REDIS_CLUSTER).

use crate::crash::{Proc, start_with};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run `eval \"$(scripts/services.sh up)\"`"))
}

pub(crate) struct Cluster {
    pub(crate) db: tideway_store_sql::testing::FreshDatabase,
    /// `postgres` or `mysql`.
    backend: &'static str,
    redis: String,
    pub(crate) prefix: String,
    dir: tempfile::TempDir,
    pub(crate) c: reqwest::Client,
}

impl Cluster {
    async fn create() -> Self {
        Self::create_on("postgres").await
    }

    /// A fresh database on `backend` (`postgres` or `mysql`) and the cluster.
    pub(crate) async fn create_on(backend: &'static str) -> Self {
        let var = if backend == "mysql" { "TIDEWAY_TEST_MYSQL_URL" } else { "TIDEWAY_TEST_POSTGRES_URL" };
        Cluster {
            db: tideway_store_sql::testing::FreshDatabase::create(&env(var)).await.expect("db"),
            backend,
            redis: env("TIDEWAY_TEST_REDIS_CLUSTER"),
            prefix: format!("nodes{}x{}:", std::process::id(), rand::random::<u32>()),
            dir: tempfile::tempdir().expect("tempdir"),
            c: reqwest::Client::new(),
        }
    }

    async fn node(&self, id: u16) -> Proc {
        self.node_with(id, &[("TIDEWAY_FANOUT__CHUNK_SIZE", "25")]).await
    }

    /// A node with more settings (they override the shared ones).
    pub(crate) async fn node_with(&self, id: u16, more: &[(&str, &str)]) -> Proc {
        self.start_node(id, more, true).await
    }

    /// Starts a node and waits until it is ready (or, `ready` false, alive).
    async fn start_node(&self, id: u16, more: &[(&str, &str)], ready: bool) -> Proc {
        let id_s = id.to_string();
        let mut env: Vec<(&str, &str)> = vec![
            ("TIDEWAY_STORAGE__BACKEND", self.backend),
            ("TIDEWAY_STORAGE__URL", &self.db.url),
            ("TIDEWAY_REDIS__URLS", &self.redis),
            ("TIDEWAY_REDIS__PREFIX", &self.prefix),
            ("TIDEWAY_SERVER__NODE_ID", &id_s),
            ("TIDEWAY_FANOUT__LEASE", "2s"),
            ("TIDEWAY_LOG", "warn"),
        ];
        env.extend_from_slice(more);
        let (data, log) = (self.dir.path().join(format!("node{id}")), self.dir.path().join(format!("node{id}.log")));
        if ready { start_with(&data, &log, &env).await } else { crate::crash::start_alive(&data, &log, &env).await }
    }

    /// A node with more settings that is alive but not ready.
    async fn node_alive(&self, id: u16, more: &[(&str, &str)]) -> Proc {
        self.start_node(id, more, false).await
    }

    /// The environment of a node (as [`Self::node_with`] starts it), for a
    /// start that is expected to fail.
    fn node_env(&self, id: Option<u16>) -> Vec<(String, String)> {
        let mut env = vec![
            ("TIDEWAY_STORAGE__BACKEND".to_owned(), self.backend.to_owned()),
            ("TIDEWAY_STORAGE__URL".to_owned(), self.db.url.clone()),
            ("TIDEWAY_REDIS__URLS".to_owned(), self.redis.clone()),
            ("TIDEWAY_REDIS__PREFIX".to_owned(), self.prefix.clone()),
        ];
        env.extend(id.map(|id| ("TIDEWAY_SERVER__NODE_ID".to_owned(), id.to_string())));
        env
    }

    /// The deployment's pending fan-out jobs, as `node` reads them.
    pub(crate) async fn pending(&self, node: &Proc) -> u64 {
        let stats = self.get(format!("{}/v1/stats", node.base)).await;
        stats["fanout"]["pending"].as_u64().expect("pending")
    }

    /// Deletes this test's Redis keys and its database.
    pub(crate) async fn clean(self) {
        let mut ro = tideway_store_redis::RedisOptions::new(self.redis.split(',').map(str::to_owned).collect(), 800);
        ro.prefix = self.prefix.clone();
        let r = tideway_store_redis::RedisShared::connect(ro).await.expect("redis");
        r.purge().await.expect("purge");
        self.db.drop().await.expect("drop the database");
    }

    async fn get(&self, url: String) -> Value {
        let r = self.c.get(url).send().await.expect("get");
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.expect("json")
    }

    /// Ids on `user`'s whole home as `node` serves it.
    async fn home(&self, node: &Proc, user: u64) -> Vec<String> {
        let v = self.get(format!("{}/v1/users/{user}/home?limit=100", node.base)).await;
        v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["item"]["id"].as_str().expect("id").to_owned())
            .collect()
    }

    async fn post(&self, node: &Proc, author: u64) -> String {
        let r = self
            .c
            .post(format!("{}/v1/items", node.base))
            .json(&json!({"author": author.to_string(), "body": {"text": "hello"}}))
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), StatusCode::CREATED);
        let v: Value = r.json().await.expect("json");
        v["item"]["id"].as_str().expect("id").to_owned()
    }

    async fn follow(&self, node: &Proc, user: u64, target: u64) {
        let r = self.c.put(format!("{}/v1/users/{user}/following/{target}", node.base)).send().await.expect("follow");
        assert!(r.status().is_success(), "follow: {}", r.status());
    }

    /// Waits until `user`'s home on `node` is `want` (delivery lags).
    async fn home_becomes(&self, node: &Proc, user: u64, want: &[String]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.home(node, user).await;
            if got == want {
                return;
            }
            assert!(Instant::now() < deadline, "home({user}) on {}: {got:?}, want {want:?}", node.base);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_serve_one_service() {
    let cl = Cluster::create().await;
    let a = cl.node(1).await;
    let mut b = cl.node(2).await;

    // Writes on one node, reads on the other.
    for t in [1, 2] {
        cl.follow(&a, 100, t).await;
    }
    assert!(cl.home(&b, 100).await.is_empty(), "an inbox is built, empty");
    let first = cl.post(&b, 1).await;
    let second = cl.post(&a, 2).await;
    let profile = cl.get(format!("{}/v1/users/1/profile", a.base)).await;
    assert_eq!(profile["entries"][0]["item"]["id"], json!(first), "B's post is on A's next read of the profile");
    let want = vec![second.clone(), first.clone()];
    cl.home_becomes(&a, 100, &want).await;
    assert_eq!(cl.home(&b, 100).await, want, "the same page from either node");

    // A delivery to 400 followers: B takes the job (it was posted there) and
    // is killed at once; A's worker finishes it after B's lease.
    let followers: Vec<u64> = (1000..1400).collect();
    for f in &followers {
        cl.follow(&a, *f, 7).await;
        assert!(cl.home(&a, *f).await.is_empty());
    }
    let big = cl.post(&b, 7).await;
    drop(b); // kill -9
    let mut had = 0;
    for f in followers.iter().step_by(25) {
        had += usize::from(cl.home(&a, *f).await == [big.clone()]);
    }
    eprintln!("at the kill, {had} of {} sampled followers (one a chunk) had the item", followers.len() / 25);
    for f in &followers {
        cl.home_becomes(&a, *f, std::slice::from_ref(&big)).await;
    }

    // Every Redis key gone: pages are rebuilt from the database.
    let urls: Vec<String> = cl.redis.split(',').map(str::to_owned).collect();
    assert!(urls.len() >= 3, "a cluster: {urls:?}");
    let mut ro = tideway_store_redis::RedisOptions::new(urls, 800);
    ro.prefix = cl.prefix.clone();
    let r = tideway_store_redis::RedisShared::connect(ro).await.expect("redis");
    assert!(r.purge().await.expect("flush") > 0);
    drop(r);
    assert_eq!(cl.home(&a, 100).await, want, "after a Redis flush");
    assert_eq!(cl.home(&a, 1003).await, vec![big.clone()]);

    // B comes back and serves the same pages.
    b = cl.node(2).await;
    assert_eq!(cl.home(&b, 100).await, want);
    assert_eq!(cl.home(&b, 1399).await, vec![big]);
    drop((a, b));
    cl.clean().await;
}

/// One million followers, loaded straight into PostgreSQL as a migration
/// would; node B posts (the author is pushed: `hot_followers` raised) and is
/// killed with `kill -9` in the middle of the delivery; node A finishes it
/// after B's lease. Every sampled follower who was reading gets the item
/// exactly once, and so do followers who were away (their first page is
/// rebuilt from the database).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_follower_delivery_killed_midway_is_finished_by_the_other_node() {
    use tideway_store_sql::testing::FreshDatabase;
    const STAR: u64 = 7;
    const FIRST: u64 = 1_000_000;
    const N: u64 = 1_000_000;
    let cl = Cluster::create().await;
    // The schema (a node would create it at start), then the rows; follow
    // times are the followers' ids, so the delivery walks them in id order.
    drop(tideway_store_sql::SqlStore::connect(&cl.db.url).await.expect("schema"));
    cl.db.execute(&FreshDatabase::followers_sql(STAR, FIRST, N, "g")).await.expect("1M follows");
    let push = [("TIDEWAY_FANOUT__HOT_FOLLOWERS", "100000000"), ("TIDEWAY_FANOUT__CHUNK_SIZE", "1000")];
    let a = cl.node_with(1, &push).await;
    let b = cl.node_with(2, &push).await;
    // Every 1000th follower reads (an inbox to deliver to); the others are away.
    let readers: Vec<u64> = (FIRST..FIRST + N).step_by(1000).collect();
    for &f in &readers {
        assert!(cl.home(&a, f).await.is_empty());
    }
    let item = cl.post(&b, STAR).await;
    // Kill B once its delivery has passed a tenth of the followers.
    let tenth = readers[readers.len() / 10];
    let deadline = Instant::now() + Duration::from_secs(120);
    while cl.home(&a, tenth).await.is_empty() {
        assert!(Instant::now() < deadline, "B's delivery did not reach follower {tenth}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(b); // kill -9
    let reached = {
        let mut n = 0;
        for &f in readers.iter().step_by(10) {
            n += usize::from(!cl.home(&a, f).await.is_empty());
        }
        n
    };
    let stats = cl.get(format!("{}/v1/stats", a.base)).await;
    assert_eq!(stats["fanout"]["pending"], json!(1), "killed midway: {reached} of 100 sampled followers had it");
    eprintln!("at the kill, {reached} of 100 sampled followers had the item");
    // A takes the job over after B's lease and finishes it.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let stats = cl.get(format!("{}/v1/stats", a.base)).await;
        if stats["fanout"]["pending"] == json!(0) {
            break;
        }
        assert!(Instant::now() < deadline, "A did not finish the delivery: {stats}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for &f in &readers {
        assert_eq!(cl.home(&a, f).await, std::slice::from_ref(&item), "follower {f}: exactly once");
    }
    for f in [FIRST + 1, FIRST + N / 2 + 1, FIRST + N - 1] {
        assert_eq!(cl.home(&a, f).await, std::slice::from_ref(&item), "follower {f}, away, rebuilt");
    }
    drop(a);
    cl.clean().await;
}

/// A home stream held on one node gets what is posted on the other, pushed
/// (fan-out on whichever node's worker) and pulled (a hot author) alike,
/// through the event hub on Redis; a reconnect to the other node resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_on_one_node_reaches_a_stream_held_on_the_other() {
    use crate::stream::Client;
    let cl = Cluster::create().await;
    let hot = [("TIDEWAY_FANOUT__HOT_FOLLOWERS", "2")];
    let (a, b) = (cl.node_with(1, &hot).await, cl.node_with(2, &hot).await);
    for (u, t) in [(1, 2), (1, 3), (4, 3)] {
        cl.follow(&a, u, t).await;
    }
    let mut s = Client::connect_to(&cl.c, &b.base, None, 1, None).await;
    let mut posted = Vec::new();
    for author in [2, 3, 2, 3] {
        posted.push(cl.post(&a, author).await);
    }
    let events = s.take(posted.len(), Duration::from_secs(15)).await;
    let got: Vec<String> = events.iter().map(|e| e.data["item"]["id"].as_str().expect("id").to_owned()).collect();
    assert_eq!(got, posted, "in order, pushed and pulled");
    // Resume on the other node.
    let last = events.last().expect("events").id.clone();
    drop(s);
    let late = cl.post(&b, 2).await;
    let mut s = Client::connect_to(&cl.c, &a.base, None, 1, Some(&last)).await;
    let events = s.take(1, Duration::from_secs(15)).await;
    assert_eq!(events[0].data["item"]["id"], json!(late));
    assert!(s.next(Duration::from_millis(300)).await.is_none(), "no duplicate");
    // Away again: a delete on one node, an unfollow on the other; the
    // resume on either gets both entries' deletes (noted in Redis).
    let last = events[0].id.clone();
    drop(s);
    let r = cl.c.delete(format!("{}/v1/items/{}", a.base, posted[0])).send().await.expect("delete");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = cl.c.delete(format!("{}/v1/users/1/following/3", b.base)).send().await.expect("unfollow");
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let mut s = Client::connect_to(&cl.c, &b.base, None, 1, Some(&last)).await;
    let events = s.take(3, Duration::from_secs(15)).await;
    let mut got: Vec<(String, String)> =
        events.iter().map(|e| (e.event.clone(), e.data["item"].as_str().expect("an item").to_owned())).collect();
    got.sort();
    let mut want: Vec<(String, String)> =
        [&posted[0], &posted[1], &posted[3]].into_iter().map(|i| ("delete".to_owned(), i.clone())).collect();
    want.sort();
    assert_eq!(got, want, "the deleted post and the unfollowed author's two");
    assert!(s.next(Duration::from_millis(300)).await.is_none(), "nothing else");
    // Back on the first node from the last delete's id: nothing received
    // is sent again, and what was missed since comes once.
    let last = events[2].id.clone();
    drop(s);
    let again = cl.post(&a, 2).await;
    let mut s = Client::connect_to(&cl.c, &a.base, None, 1, Some(&last)).await;
    let events = s.take(1, Duration::from_secs(15)).await;
    assert_eq!((events[0].event.as_str(), &events[0].data["item"]["id"]), ("entry", &json!(again)));
    assert!(s.next(Duration::from_millis(500)).await.is_none(), "no delete sent again");
    drop(s);
    drop((a, b));
    cl.clean().await;
}

/// A node id is claimed, not assumed: a second running node with the same
/// id (or two left at the default) does not start, and says which setting
/// to fix; a clean stop frees the id at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_id_is_held_by_one_running_node() {
    use crate::crash::refused_start;
    let cl = Cluster::create().await;
    let a = cl.node(3).await;
    let log = refused_start(&cl.dir.path().join("dup"), &cl.node_env(Some(3))).await;
    assert!(log.contains("server.node_id") && log.contains("held by another running node"), "{log}");
    // Two nodes with no id set: the second is refused, told why.
    let unset = cl.node_with(0, &[]).await;
    let log = refused_start(&cl.dir.path().join("unset"), &cl.node_env(None)).await;
    assert!(log.contains("server.node_id is not set"), "{log}");
    // The first node still serves.
    assert!(cl.home(&a, 1).await.is_empty());
    drop((a, unset));
    cl.clean().await;
}

/// `kill -9` of a node in the middle of its deliveries, then a restart
/// under the same id: the new run takes back the jobs its dead run held at
/// once (a start epoch in the lease), not after the lease (60 s here), and
/// every follower gets every item exactly once.
async fn a_restarted_node_takes_its_jobs_back(backend: &'static str) {
    const AUTHOR: u64 = 7;
    let cl = Cluster::create_on(backend).await;
    let slow = [("TIDEWAY_FANOUT__CHUNK_SIZE", "1"), ("TIDEWAY_FANOUT__LEASE", "60s")];
    let a = cl.node_with(1, &slow).await;
    let followers: Vec<u64> = (1000..1200).collect();
    for &f in &followers {
        cl.follow(&a, f, AUTHOR).await;
        assert!(cl.home(&a, f).await.is_empty());
    }
    let mut items = Vec::new();
    for _ in 0..5 {
        items.push(cl.post(&a, AUTHOR).await);
    }
    // Kill once its worker holds a job: the oldest follower (chunks walk
    // followers oldest first, one per step here) has the first item.
    let deadline = Instant::now() + Duration::from_secs(60);
    while cl.home(&a, followers[0]).await.is_empty() {
        assert!(Instant::now() < deadline, "node 1 never started delivering");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(a); // kill -9, mid-delivery
    // Another node, started after the kill to watch the deployment's
    // backlog: it delivers any job the dead run had not claimed yet; the
    // ones that run held stay, leased to it.
    let watcher = cl.node_with(2, &slow).await;
    let mut left = cl.pending(&watcher).await;
    let mut steady = 0;
    while steady < 15 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = cl.pending(&watcher).await;
        steady = if now == left { steady + 1 } else { 0 };
        left = now;
    }
    assert!(left > 0, "the kill came after the deliveries: nothing to take back");
    let restarted = Instant::now();
    let a = cl.node_with(1, &slow).await;
    let deadline = restarted + Duration::from_secs(20);
    while cl.pending(&watcher).await > 0 {
        assert!(Instant::now() < deadline, "the restarted node did not take its jobs back within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "{backend}: {left} jobs held at the kill, all delivered {} ms after the restart began (lease 60 s)",
        restarted.elapsed().as_millis()
    );
    let mut want = items.clone();
    want.reverse();
    for &f in &followers {
        assert_eq!(cl.home(&a, f).await, want, "follower {f}: every item exactly once");
    }
    drop((a, watcher));
    cl.clean().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_takes_its_jobs_back_on_postgres() {
    a_restarted_node_takes_its_jobs_back("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_takes_its_jobs_back_on_mariadb() {
    a_restarted_node_takes_its_jobs_back("mysql").await;
}

/// A node whose clock runs 10 minutes ahead (libfaketime, which the test
/// command installs): not ready and refusing writes, saying why; reads
/// still served; the offset shown in its metrics; a correct node beside it
/// takes the writes, dated by the right clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_clock_is_ahead_refuses_writes() {
    let faketime = env("TIDEWAY_TEST_FAKETIME");
    let cl = Cluster::create().await;
    let good = cl.node(1).await;
    let ahead = cl
        .node_alive(
            2,
            &[("LD_PRELOAD", faketime.as_str()), ("FAKETIME", "+10m"), ("FAKETIME_DONT_FAKE_MONOTONIC", "1")],
        )
        .await;
    let r = cl.c.get(format!("{}/readyz", ahead.base)).send().await.expect("readyz");
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let why: Value = r.json().await.expect("json");
    assert!(why["error"]["message"].as_str().is_some_and(|m| m.contains("600.0 s ahead of the database")), "{why}");
    let r =
        cl.c.post(format!("{}/v1/items", ahead.base))
            .json(&json!({"author": "3", "body": {"text": "from the future"}}))
            .send()
            .await
            .expect("post");
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let e: Value = r.json().await.expect("json");
    assert_eq!(e["error"]["code"], json!("unavailable"));
    assert!(e["error"]["message"].as_str().is_some_and(|m| m.contains("server.max_clock_offset")), "{e}");
    let r = cl.c.put(format!("{}/v1/users/4/following/3", ahead.base)).send().await.expect("follow");
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "every write");
    let metrics =
        cl.c.get(format!("{}/metrics", ahead.base)).send().await.expect("metrics").text().await.expect("text");
    let offset: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tideway_clock_offset_seconds ")?.parse().ok())
        .expect("tideway_clock_offset_seconds");
    assert!((offset - 600.0).abs() < 5.0, "offset {offset}");
    // The correct node takes the write; the skewed one serves the read.
    cl.follow(&good, 4, 3).await;
    let id = cl.post(&good, 3).await;
    let dated = tideway_core::ids::key_time(id.parse::<u64>().expect("id")).0;
    assert!((dated - tideway_core::Millis::now().0).abs() < 5_000, "dated by the right clock");
    cl.home_becomes(&ahead, 4, std::slice::from_ref(&id)).await;
    drop((good, ahead));
    cl.clean().await;
}

/// A node whose link to PostgreSQL is slow (+150 ms each way, through a
/// proxy) while four writers post through it: readiness means the database
/// answers a trivial statement within the bound, asked on a session of its
/// own, so it stays ready all along (it flapped when its probe queued
/// behind the writes on the shared pool), and every post is acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_database_link_leaves_the_node_ready() {
    use tideway_store_sql::fault_link::{Fault, FaultLink};
    let cl = Cluster::create().await;
    let link = FaultLink::start(FaultLink::target_of(&cl.db.url).expect("address")).await.expect("proxy");
    let url = link.url_through(&cl.db.url);
    let a = cl.node_with(1, &[("TIDEWAY_STORAGE__URL", url.as_str())]).await;
    cl.follow(&a, 100, 1).await;
    link.set(Fault::Delay(Duration::from_millis(150)));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (1..=4u64)
        .map(|w| {
            let (c, base, stop) = (cl.c.clone(), a.base.clone(), stop.clone());
            tokio::spawn(async move {
                let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
                let mut slowest = Duration::ZERO;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t0 = Instant::now();
                    let r = c
                        .post(format!("{base}/v1/items"))
                        .json(&json!({"author": w.to_string(), "body": {"text": "slow link"}}))
                        .send()
                        .await
                        .expect("post");
                    slowest = slowest.max(t0.elapsed());
                    *statuses.entry(r.status().as_u16()).or_default() += 1;
                }
                (statuses, slowest)
            })
        })
        .collect();
    let (mut probes, mut unready) = (0, Vec::new());
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let r = cl.c.get(format!("{}/readyz", a.base)).timeout(Duration::from_secs(1)).send().await.expect("readyz");
        probes += 1;
        if r.status() != StatusCode::OK {
            unready.push(r.text().await.unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut posted = 0;
    for w in writers {
        let (statuses, slowest) = w.await.expect("writer");
        eprintln!("writer: statuses {statuses:?}, slowest {slowest:?}");
        assert_eq!(statuses.keys().copied().collect::<Vec<_>>(), vec![201], "every post acknowledged: {statuses:?}");
        posted += statuses.values().sum::<usize>();
    }
    eprintln!("+150 ms each way: {probes} probes, {} unready; {posted} posts", unready.len());
    assert!(unready.is_empty(), "{} of {probes} probes unready: {unready:?}", unready.len());
    assert!(posted >= 8, "the writers got through: {posted} posts");
    link.set(Fault::Pass);
    drop(a);
    cl.clean().await;
}
