//! Faults on the links between nodes and engines (issue 64's proof): two
//! nodes on one PostgreSQL (or MariaDB) database and one Redis, node a's links to both
//! through a fault-injecting proxy (`tideway_store_sql::fault_link`), six
//! writers posting through both nodes while a's links go dark, slow,
//! reset, lose the engine's answer after it acted, and while a loses Redis.
//! Every other post mentions a reader. Then a history check: every
//! acknowledged post stored exactly once, no post stored twice whatever the
//! client saw, every home equal to the definition through both nodes, and
//! every reader's notifications exactly the stored posts that mention them; node b (healthy links) never refused a
//! write, and a stayed ready at +150 ms each way. The same history check
//! on a Redis Cluster, each primary behind a proxy: one primary's links
//! dark, another's resetting, every primary's dark; every write taken.
//! Figures per fault on stderr.

use crate::crash::Proc;
use crate::nodes::Cluster;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tideway_store_sql::fault_link::{Fault, FaultLink};

/// Authors 1..=6; readers 100..=103 follow three each.
const AUTHORS: u64 = 6;
const READERS: [u64; 4] = [100, 101, 102, 103];

fn followed(reader: u64) -> Vec<u64> {
    (1..=AUTHORS).filter(|a| (a + reader).is_multiple_of(2)).collect()
}

/// The reader a writer's post mentions: every other post mentions one (a
/// post that notifies is written with its notification, outside the batch
/// of plain posts), the others mention no one.
fn mentioned(writer: u64, i: u64) -> Option<u64> {
    i.is_multiple_of(2).then(|| READERS[((writer + i / 2) % READERS.len() as u64) as usize])
}

/// The reader a post's marker (`{node}{writer}-{i}`) mentions.
fn mentioned_by(marker: &str) -> Option<u64> {
    let (w, i) = marker.get(1..)?.split_once('-')?;
    mentioned(w.parse().ok()?, i.parse().ok()?)
}

/// What a phase does to the links as it starts.
type Step<'a> = Box<dyn Fn() + 'a>;

/// What one writer saw in one phase.
#[derive(Default, Debug)]
struct Seen {
    statuses: BTreeMap<String, usize>,
    slowest: Duration,
}

#[derive(Default)]
struct History {
    /// Marker → id, for posts acknowledged.
    acked: HashMap<String, String>,
    /// (node, phase) → what the writers saw.
    seen: BTreeMap<(char, usize), Seen>,
}

async fn writer(
    c: reqwest::Client,
    node: char,
    base: String,
    w: u64,
    phase: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    h: Arc<std::sync::Mutex<History>>,
) {
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let marker = format!("{node}{w}-{i}");
        let author = 1 + (w + i) % AUTHORS;
        let p = phase.load(Ordering::Relaxed);
        let t0 = Instant::now();
        let mentions: Vec<String> = mentioned(w, i).iter().map(u64::to_string).collect();
        let r = c
            .post(format!("{base}/v1/items"))
            .json(&json!({"author": author.to_string(), "body": {"text": marker}, "mentions": mentions}))
            .timeout(Duration::from_secs(20))
            .send()
            .await;
        let took = t0.elapsed();
        let (status, id) = match r {
            Ok(r) => {
                let s = r.status();
                let v: Value = r.json().await.unwrap_or(Value::Null);
                (s.as_u16().to_string(), v["item"]["id"].as_str().map(str::to_owned))
            }
            Err(e) => (if e.is_timeout() { "timeout".into() } else { "transport".into() }, None),
        };
        {
            let mut h = h.lock().expect("lock");
            if status == "201" {
                h.acked.insert(marker, id.expect("an id"));
            }
            let s = h.seen.entry((node, p)).or_default();
            *s.statuses.entry(status).or_default() += 1;
            s.slowest = s.slowest.max(took);
        }
        tokio::time::sleep(Duration::from_millis(80)).await;
    }
}

/// Every entry id of a feed at `path` (all pages).
async fn walk(c: &reqwest::Client, base: &str, path: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}{path}?limit=100");
        if let Some(c) = &cursor {
            url.push_str(&format!("&before={c}"));
        }
        let r = c.get(url).send().await.expect("page");
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let v: Value = r.json().await.expect("json");
        for e in v["entries"].as_array().expect("entries") {
            let id = e["item"]["id"].as_str().expect("id").to_owned();
            let text = e["item"]["body"]["text"].as_str().unwrap_or_default().to_owned();
            out.push((id, text));
        }
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

/// The items of `user`'s mention groups (all pages); any other group fails.
async fn mention_groups(c: &reqwest::Client, base: &str, user: u64) -> Vec<String> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/v1/users/{user}/notifications?limit=100");
        if let Some(c) = &cursor {
            url.push_str(&format!("&before={c}"));
        }
        let r = c.get(url).send().await.expect("notifications");
        assert_eq!(r.status(), StatusCode::OK);
        let v: Value = r.json().await.expect("json");
        for g in v["groups"].as_array().expect("groups") {
            assert_eq!(g["verb"], json!("mention"), "{g}");
            out.push(g["item"]["id"].as_str().expect("a mention's item").to_owned());
        }
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

async fn ready(c: &reqwest::Client, node: &Proc) -> bool {
    let r = c.get(format!("{}/readyz", node.base)).timeout(Duration::from_secs(1)).send().await;
    r.is_ok_and(|r| r.status() == StatusCode::OK)
}

/// Six writers, three through each node, posting until stopped; the phase
/// they are in is what `phase` says.
struct Load {
    phase: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    history: Arc<std::sync::Mutex<History>>,
    writers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(c: &reqwest::Client, a: &Proc, b: &Proc) -> Self {
        let (phase, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let history = Arc::new(std::sync::Mutex::new(History::default()));
        let mut writers = Vec::new();
        for (node, base) in [('a', &a.base), ('b', &b.base)] {
            for w in 0..3 {
                let args = (c.clone(), node, base.clone(), w, phase.clone(), stop.clone(), history.clone());
                writers.push(tokio::spawn(writer(args.0, args.1, args.2, args.3, args.4, args.5, args.6)));
            }
        }
        Self { phase, stop, history, writers }
    }

    /// Stops the writers; what they saw.
    async fn stop(self) -> History {
        self.stop.store(true, Ordering::Relaxed);
        for w in self.writers {
            w.await.expect("writer");
        }
        std::mem::take(&mut *self.history.lock().expect("lock"))
    }
}

/// The readers follow their authors (through b).
async fn follow(c: &reqwest::Client, b: &Proc) {
    for r in READERS {
        let targets: Vec<String> = followed(r).iter().map(u64::to_string).collect();
        let resp = c.post(format!("{}/v1/users/{r}/following", b.base)).json(&json!({"targets": targets})).send().await;
        assert!(resp.expect("follow").status().is_success());
    }
}

/// How long `node` takes to be ready again (within 15 s).
async fn ready_again(c: &reqwest::Client, node: &Proc, after: &str) -> Option<Duration> {
    let healed = Instant::now();
    while healed.elapsed() < Duration::from_secs(15) {
        if ready(c, node).await {
            return Some(healed.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = c.get(format!("{}/readyz", node.base)).send().await.expect("readyz");
    eprintln!("after {after}: /readyz {} {}", r.status(), r.text().await.unwrap_or_default());
    None
}

/// The history check both proofs end with, once fan-out has settled:
/// every acknowledged post stored once, no post stored twice, every home
/// the definition and every reader's mentions the stored posts that
/// mention them, through both nodes.
async fn check_history(cl: &Cluster, c: &reqwest::Client, a: &Proc, b: &Proc, h: &History) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while cl.pending(b).await > 0 {
        assert!(Instant::now() < deadline, "fan-out never settled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut stored: HashMap<String, Vec<String>> = HashMap::new();
    let mut profiles: HashMap<u64, Vec<String>> = HashMap::new();
    for author in 1..=AUTHORS {
        let items = walk(c, &b.base, &format!("/v1/users/{author}/profile")).await;
        for (id, text) in &items {
            stored.entry(text.clone()).or_default().push(id.clone());
        }
        profiles.insert(author, items.into_iter().map(|(id, _)| id).collect());
    }
    let twice: Vec<_> = stored.iter().filter(|(_, ids)| ids.len() > 1).collect();
    eprintln!("{} posts stored, {} acknowledged, {} stored twice", stored.len(), h.acked.len(), twice.len());
    assert!(twice.is_empty(), "posts stored more than once: {twice:?}");
    for (marker, id) in &h.acked {
        assert_eq!(stored.get(marker), Some(&vec![id.clone()]), "acknowledged post {marker} is stored once, as {id}");
    }
    for r in READERS {
        let mut want: Vec<&String> = followed(r).iter().flat_map(|a| &profiles[a]).collect();
        want.sort_by_key(|id| std::cmp::Reverse(id.parse::<u64>().expect("id")));
        for node in [a, b] {
            let got = walk(c, &node.base, &format!("/v1/users/{r}/home")).await;
            let got: Vec<&String> = got.iter().map(|(id, _)| id).collect();
            assert_eq!(got, want, "home({r}) on {} is the definition", node.base);
        }
    }
    // Mentions never gather: every stored post that mentions a reader is
    // one mention group of theirs, and nothing else is.
    for r in READERS {
        let mut want: Vec<String> = stored
            .iter()
            .filter(|(marker, _)| mentioned_by(marker) == Some(r))
            .flat_map(|(_, ids)| ids.clone())
            .collect();
        want.sort();
        assert!(!want.is_empty(), "reader {r} was mentioned");
        for node in [a, b] {
            let mut got = mention_groups(c, &node.base, r).await;
            got.sort();
            assert_eq!(got, want, "reader {r}'s mentions on {} are the stored posts that mention them", node.base);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_once_through_faults_on_the_links_to_postgres_and_redis() {
    every_write_once_through_faults_on("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_once_through_faults_on_the_links_to_mariadb_and_redis() {
    every_write_once_through_faults_on("mysql").await;
}

/// The proof on `engine` (`postgres` or `mysql`) and one Redis.
async fn every_write_once_through_faults_on(engine: &'static str) {
    let cl = Cluster::create_on(engine).await;
    let redis = std::env::var("TIDEWAY_TEST_REDIS_URL").expect("TIDEWAY_TEST_REDIS_URL: run scripts/services.sh up");
    let db_link = FaultLink::start(FaultLink::target_of(&cl.db.url).expect("db address")).await.expect("proxy");
    let redis_link = FaultLink::start(FaultLink::target_of(&redis).expect("redis address")).await.expect("proxy");
    let (db_a, redis_a) = (db_link.url_through(&cl.db.url), redis_link.url_through(&redis));
    let a =
        cl.node_with(1, &[("TIDEWAY_STORAGE__URL", db_a.as_str()), ("TIDEWAY_REDIS__URLS", redis_a.as_str())]).await;
    let b = cl.node_with(2, &[("TIDEWAY_REDIS__URLS", redis.as_str())]).await;
    let c = cl.c.clone();
    follow(&c, &b).await;
    let load = Load::start(&c, &a, &b);
    // The phases: each fault on a's links for a while, then healed.
    let faults: [(&str, Step<'_>); 7] = [
        ("healthy", Box::new(|| {})),
        ("database link dark", Box::new(|| db_link.set(Fault::Blackhole))),
        ("database link +150 ms each way", Box::new(|| db_link.set(Fault::Delay(Duration::from_millis(150))))),
        ("database link resets", Box::new(|| db_link.set(Fault::Reset))),
        (
            "answers lost after the database acted",
            Box::new(|| db_link.lose_answers_to(&[b"COMMIT", b"INSERT INTO tw_items"], 6)),
        ),
        ("Redis link dark", Box::new(|| redis_link.set(Fault::Blackhole))),
        ("healed", Box::new(|| {})),
    ];
    let mut recovery: Vec<(String, Option<Duration>)> = Vec::new();
    let mut unready_at_delay = (0usize, 0usize);
    let mut without_redis = None;
    for (p, (name, start)) in faults.iter().enumerate() {
        load.phase.store(p, Ordering::Relaxed);
        start();
        let until = Instant::now() + Duration::from_millis(3_000);
        if p == 5 {
            // One post of its own through a without Redis (the writers'
            // may all have begun before the phase).
            tokio::time::sleep(Duration::from_millis(300)).await;
            let t0 = Instant::now();
            let r = c
                .post(format!("{}/v1/items", a.base))
                .json(&json!({"author": "1", "body": {"text": "without Redis"}}))
                .timeout(Duration::from_secs(20))
                .send()
                .await
                .expect("a post through a without Redis");
            without_redis = Some((r.status(), t0.elapsed()));
        }
        while Instant::now() < until {
            if p == 2 {
                unready_at_delay.0 += 1;
                if !ready(&c, &a).await {
                    unready_at_delay.1 += 1;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        db_link.set(Fault::Pass);
        db_link.lose_answers_to(&[], 0);
        redis_link.set(Fault::Pass);
        recovery.push((name.to_string(), ready_again(&c, &a, name).await));
    }
    let h = load.stop().await;
    for ((node, p), s) in &h.seen {
        eprintln!("{:<40} node {node}: {:?}, slowest {:?}", faults[*p].0, s.statuses, s.slowest);
    }
    for (name, back) in &recovery {
        eprintln!("{name:<40} a ready again after the heal in {back:?}");
    }
    eprintln!("a unready in {} of {} probes at +150 ms each way", unready_at_delay.1, unready_at_delay.0);
    let lost = db_link.answers_lost();
    eprintln!("answers lost after the database acted: {lost}");
    eprintln!("a post through a without Redis: {without_redis:?}");

    check_history(&cl, &c, &a, &b, &h).await;
    // The healthy node never refused; a took writes through the Redis outage.
    for ((node, p), s) in &h.seen {
        if *node == 'b' {
            assert_eq!(s.statuses.keys().collect::<Vec<_>>(), vec!["201"], "b refused in {}: {s:?}", faults[*p].0);
        }
    }
    if let Some(s) = h.seen.get(&('a', 5)) {
        assert_eq!(s.statuses.keys().collect::<Vec<_>>(), vec!["201"], "a's writers without Redis: {s:?}");
    }
    let (status, took) = without_redis.expect("the post without Redis");
    assert_eq!(status, StatusCode::CREATED, "a post through a without Redis, in {took:?}");
    assert_eq!(unready_at_delay.1, 0, "a stayed ready at +150 ms each way");
    assert!(lost > 0, "the phase that loses answers after the engine acted lost none: the proof did not try it");
    drop((a, b));
    let mut ro = tideway_store_redis::RedisOptions::new(vec![redis.clone()], 800);
    ro.prefix = cl.prefix.clone();
    if let Ok(r) = tideway_store_redis::RedisShared::connect(ro).await {
        let _ = r.purge().await;
    }
    cl.clean().await;
}

/// The proof on a Redis Cluster: one PostgreSQL database and a private
/// cluster of three primaries that announces a proxy before each primary,
/// so both nodes reach every primary through its proxy (`CLUSTER SLOTS`
/// and redirections name the proxies). The faults: one primary's links
/// dark, another's resetting, then every primary's links dark. Both nodes
/// take every write throughout (the shared half is a cache), stay ready,
/// and the history holds: every acknowledged post once, homes and
/// mentions the definition through both nodes once the links heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_once_through_faults_on_the_links_to_a_redis_cluster() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut links = Vec::new();
    let mut announce = Vec::new();
    for _ in 0..3 {
        let port = crate::crash::free_port();
        let link = FaultLink::start(([127, 0, 0, 1], port).into()).await.expect("proxy");
        announce.push((port, link.addr().port()));
        links.push(link);
    }
    let cluster = crate::daemons::redis_cluster_announcing(tmp.path(), 0, &announce);
    let urls: Vec<String> = links.iter().map(|l| format!("redis://{}", l.addr())).collect();
    let urls = urls.join(",");
    let cl = Cluster::create_on("postgres").await;
    let a = cl.node_with(1, &[("TIDEWAY_REDIS__URLS", urls.as_str())]).await;
    let b = cl.node_with(2, &[("TIDEWAY_REDIS__URLS", urls.as_str())]).await;
    let c = cl.c.clone();
    follow(&c, &b).await;
    let load = Load::start(&c, &a, &b);
    let every = |f: Fault| links.iter().for_each(|l| l.set(f));
    let faults: [(&str, Step<'_>); 5] = [
        ("healthy", Box::new(|| {})),
        ("one primary's links dark", Box::new(|| links[0].set(Fault::Blackhole))),
        ("another primary's links reset", Box::new(|| links[1].set(Fault::Reset))),
        ("every primary's links dark", Box::new(|| every(Fault::Blackhole))),
        ("healed", Box::new(|| {})),
    ];
    let (mut probes, mut unready) = (0usize, Vec::new());
    let mut recovery: Vec<(String, [Option<Duration>; 2])> = Vec::new();
    for (p, (name, start)) in faults.iter().enumerate() {
        load.phase.store(p, Ordering::Relaxed);
        start();
        let until = Instant::now() + Duration::from_millis(4_000);
        while Instant::now() < until {
            for node in [&a, &b] {
                probes += 1;
                if !ready(&c, node).await {
                    unready.push((name.to_string(), node.base.clone()));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        every(Fault::Pass);
        recovery.push((name.to_string(), [ready_again(&c, &a, name).await, ready_again(&c, &b, name).await]));
    }
    let h = load.stop().await;
    for ((node, p), s) in &h.seen {
        eprintln!("{:<40} node {node}: {:?}, slowest {:?}", faults[*p].0, s.statuses, s.slowest);
    }
    for (name, back) in &recovery {
        eprintln!("{name:<40} ready again after the heal in {back:?} (a, b)");
    }
    eprintln!("unready in {} of {probes} probes", unready.len());

    check_history(&cl, &c, &a, &b, &h).await;
    for ((node, p), s) in &h.seen {
        assert_eq!(s.statuses.keys().collect::<Vec<_>>(), vec!["201"], "{node} refused in {}: {s:?}", faults[*p].0);
    }
    assert!(unready.is_empty(), "a node was unready with Redis away: {unready:?}");
    drop((a, b, cluster));
    cl.clean().await;
}
