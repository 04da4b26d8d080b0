//! The seeds' design (and Mastodon's), driven through `bench-nodes`' workload
//! on the same engines: the baseline the shared backends are measured against.
//!
//! - Items in SQL (`s_items`, by id, indexed by author), the follow graph both
//!   ways (`s_follows` by follower, `s_followers` by followee).
//! - A post is one durable `INSERT` and a job pushed to a Redis list (the task
//!   queue: Sidekiq's shape).
//! - Fan-out pops jobs (`FANOUT_LANES` at a time), reads the author's followers
//!   in one query and writes each follower's sorted set, `ZADD` then
//!   `ZREMRANGEBYRANK` to 800, pipelined by chunks of 1,000 followers.
//! - A page is `ZREVRANGE 0 19` and the 20 items by id from SQL.
//! - A returning reader whose timeline is gone gets it regenerated as
//!   Mastodon's `populate_home` does (up to 400 recent items of every
//!   followee, one query each), then the page; Mastodon runs that in a worker
//!   and answers 206 until it ends, here the reader waits for it.
//!
//! Simpler than either tideway backend on purpose (no counts, viewer marks,
//! blocks, mutes or cursors on the page): it is the floor the seeds pay.

use super::{Args, Figures, pct};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::AsyncCommands;
use sqlx::AnyPool;
use sqlx::Row;
use sqlx::any::AnyPoolOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tideway_store_sql::Dialect;
use tideway_store_sql::testing::FreshDatabase;

const CAP: i64 = 800;
const CHUNK: usize = 1000;
const FANOUT_LANES: usize = 4;
/// Items of each followee a regeneration reads (Mastodon: `MAX_ITEMS / 2`).
const REGENERATE_PER_FOLLOWEE: usize = 400;

fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The engines.
#[derive(Clone)]
struct Engines {
    pool: AnyPool,
    dialect: Dialect,
    redis: redis::aio::MultiplexedConnection,
    prefix: String,
}

impl Engines {
    fn q(&self, sql: &str) -> String {
        self.dialect.placeholders(sql)
    }

    /// The first column of `sql` (one `?`, bound to `arg`) as integers.
    async fn ids(&self, sql: &str, arg: i64) -> Result<Vec<i64>, String> {
        let rows = sqlx::query(&self.q(sql)).bind(arg).fetch_all(&self.pool).await.map_err(s)?;
        rows.iter().map(|r| r.try_get(0)).collect::<Result<_, _>>().map_err(s)
    }

    fn timeline(&self, user: u64) -> String {
        format!("{}tl:{user}", self.prefix)
    }

    fn jobs(&self) -> String {
        format!("{}jobs", self.prefix)
    }

    /// The first page: the timeline's newest `limit` ids, then their items.
    async fn page(&self, user: u64, limit: isize) -> Result<Vec<(i64, i64, String)>, String> {
        let mut r = self.redis.clone();
        let ids: Vec<i64> = r.zrevrange(self.timeline(user), 0, limit - 1).await.map_err(s)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let rows = sqlx::query(&format!("SELECT id, author, body FROM s_items WHERE id IN ({list})"))
            .fetch_all(&self.pool)
            .await
            .map_err(s)?;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            // MySQL long text reaches the `Any` driver as a BLOB.
            let body = match row.try_get::<String, _>(2) {
                Ok(b) => b,
                Err(_) => String::from_utf8(row.try_get::<Vec<u8>, _>(2).map_err(s)?).map_err(s)?,
            };
            items.push((row.try_get(0).map_err(s)?, row.try_get(1).map_err(s)?, body));
        }
        items.sort_unstable_by_key(|i: &(i64, i64, String)| std::cmp::Reverse(i.0));
        Ok(items)
    }

    /// Mastodon's `populate_home`: every followee's recent items into the
    /// timeline, trimmed to the cap.
    async fn regenerate(&self, user: u64) -> Result<(), String> {
        let followees = self.ids("SELECT followee FROM s_follows WHERE follower = ?", user as i64).await?;
        let key = self.timeline(user);
        let mut r = self.redis.clone();
        let sql = format!("SELECT id FROM s_items WHERE author = ? ORDER BY id DESC LIMIT {REGENERATE_PER_FOLLOWEE}");
        for f in followees {
            let ids = self.ids(&sql, f).await?;
            if ids.is_empty() {
                continue;
            }
            let mut pipe = redis::pipe();
            let members: Vec<(i64, i64)> = ids.iter().map(|&i| (i, i)).collect();
            pipe.zadd_multiple(&key, &members).ignore();
            pipe.cmd("ZREMRANGEBYRANK").arg(&key).arg(0).arg(-CAP - 1).ignore();
            pipe.query_async::<()>(&mut r).await.map_err(s)?;
        }
        Ok(())
    }

    /// `follower` follows `targets`: both copies of the graph, one transaction.
    async fn follow(&self, follower: i64, targets: &[i64]) -> Result<(), String> {
        if targets.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await.map_err(s)?;
        let fwd = targets.iter().map(|f| format!("({follower},{f})")).collect::<Vec<_>>().join(",");
        let rev = targets.iter().map(|f| format!("({f},{follower})")).collect::<Vec<_>>().join(",");
        sqlx::query(&format!("INSERT INTO s_follows (follower, followee) VALUES {fwd}"))
            .execute(&mut *tx)
            .await
            .map_err(s)?;
        sqlx::query(&format!("INSERT INTO s_followers (followee, follower) VALUES {rev}"))
            .execute(&mut *tx)
            .await
            .map_err(s)?;
        tx.commit().await.map_err(s)
    }

    /// A post: the durable row, then its fan-out job on the queue.
    async fn post(&self, id: i64, author: i64, body: &str) -> Result<(), String> {
        let insert = self.q("INSERT INTO s_items (id, author, created, body) VALUES (?, ?, ?, ?)");
        let now = tideway_core::Millis::now().0;
        sqlx::query(&insert).bind(id).bind(author).bind(now).bind(body).execute(&self.pool).await.map_err(s)?;
        let mut r = self.redis.clone();
        let () = r.rpush(self.jobs(), format!("{author}:{id}")).await.map_err(s)?;
        Ok(())
    }

    /// One fan-out lane: pops and delivers jobs until the queue is empty.
    /// Returns the deliveries made.
    async fn drain(&self) -> Result<usize, String> {
        let mut r = self.redis.clone();
        let mut delivered = 0;
        loop {
            let job: Option<String> = r.lpop(self.jobs(), None).await.map_err(s)?;
            let Some(job) = job else { return Ok(delivered) };
            let (a, id) = job.split_once(':').ok_or("bad job")?;
            delivered += self.deliver(a.parse().map_err(s)?, id.parse().map_err(s)?).await?;
        }
    }

    /// Delivers one job: the author's followers, chunk by chunk.
    async fn deliver(&self, author: i64, id: i64) -> Result<usize, String> {
        let followers = self.ids("SELECT follower FROM s_followers WHERE followee = ?", author).await?;
        let mut r = self.redis.clone();
        for chunk in followers.chunks(CHUNK) {
            let mut pipe = redis::pipe();
            for f in chunk {
                let k = self.timeline(*f as u64);
                pipe.cmd("ZADD").arg(&k).arg(id).arg(id).ignore();
                pipe.cmd("ZREMRANGEBYRANK").arg(&k).arg(0).arg(-CAP - 1).ignore();
            }
            pipe.query_async::<()>(&mut r).await.map_err(s)?;
        }
        Ok(followers.len())
    }
}

/// The seeds' tables.
fn schema(dialect: Dialect) -> Vec<String> {
    let (text, table) = if dialect == Dialect::Postgres {
        ("TEXT", "")
    } else {
        ("LONGTEXT", " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
    };
    vec![
        format!(
            "CREATE TABLE s_items (id BIGINT NOT NULL PRIMARY KEY, author BIGINT NOT NULL, \
             created BIGINT NOT NULL, body {text} NOT NULL){table}"
        ),
        "CREATE INDEX s_items_author ON s_items (author, id)".to_owned(),
        format!(
            "CREATE TABLE s_follows (follower BIGINT NOT NULL, followee BIGINT NOT NULL, \
             PRIMARY KEY (follower, followee)){table}"
        ),
        format!(
            "CREATE TABLE s_followers (followee BIGINT NOT NULL, follower BIGINT NOT NULL, \
             PRIMARY KEY (followee, follower)){table}"
        ),
    ]
}

/// Runs `bench-nodes`' workload on the seeds' design.
pub async fn run(args: &Args) -> Result<Figures, String> {
    sqlx::any::install_default_drivers();
    let db = FreshDatabase::create(&args.sql).await.map_err(s)?;
    let figures = workload(args, &db.url).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    db.drop().await.map_err(s)?;
    figures
}

async fn workload(args: &Args, url: &str) -> Result<Figures, String> {
    let dialect = Dialect::of_url(&args.sql).ok_or("--sql: not a postgres:// or mysql:// URL")?;
    let pool = AnyPoolOptions::new().max_connections(args.writers as u32 + 4).connect(url).await.map_err(s)?;
    let client = redis::Client::open(args.redis.as_str()).map_err(s)?;
    let redis = client.get_multiplexed_async_connection().await.map_err(s)?;
    let e = Engines { pool, dialect, redis, prefix: format!("seeds{}:", std::process::id()) };
    for stmt in schema(dialect) {
        sqlx::query(&stmt).execute(&e.pool).await.map_err(s)?;
    }

    // The same follows as the tideway runs (same seed, same draws).
    let mut rng = SmallRng::seed_from_u64(args.seed);
    let readers: Vec<u64> = (args.authors + 1..=args.authors + args.users).collect();
    eprintln!("  follows: {} users × {}", readers.len(), args.follows);
    for r in &readers {
        let mut t: Vec<u64> = (0..args.follows).map(|_| rng.random_range(1..=args.authors)).collect();
        t.sort_unstable();
        t.dedup();
        let t: Vec<i64> = t.iter().map(|&f| f as i64).collect();
        e.follow(*r as i64, &t).await?;
    }

    eprintln!("  posts: {} by {} writers", args.posts, args.writers);
    let next = Arc::new(AtomicU64::new(1 << 40));
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..args.writers {
        let (e, next) = (e.clone(), next.clone());
        let (n, authors, seed) = (args.posts / args.writers, args.authors, args.seed + w as u64);
        tasks.spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed);
            for _ in 0..n {
                let a = rng.random_range(1..=authors) as i64;
                let id = next.fetch_add(1, Ordering::Relaxed) as i64;
                e.post(id, a, "{}").await?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.map_err(s)??;
    }
    let posts_per_sec = (args.posts / args.writers * args.writers) as f64 / t.elapsed().as_secs_f64();

    eprintln!("  fan-out ({FANOUT_LANES} jobs at a time)");
    let t = Instant::now();
    let mut lanes = tokio::task::JoinSet::new();
    for _ in 0..FANOUT_LANES {
        let e = e.clone();
        lanes.spawn(async move { e.drain().await });
    }
    let mut delivered = 0;
    while let Some(r) = lanes.join_next().await {
        delivered += r.map_err(s)??;
    }
    let deliveries_per_sec = delivered as f64 / t.elapsed().as_secs_f64();

    // The same readers in the same order twice: the second pass reads
    // pages read before (on tideway, with the page's facts copied).
    let mut passes = Vec::with_capacity(2);
    for pass in ["warm reads", "warm reads again"] {
        eprintln!("  {pass}");
        let mut h = Histogram::<u64>::new(3).map_err(s)?;
        let mut rng = SmallRng::seed_from_u64(7);
        let mut shown = 0usize;
        for _ in 0..args.reads {
            let r = readers[rng.random_range(0..readers.len())];
            let t = Instant::now();
            let page = e.page(r, 20).await?;
            h.record(t.elapsed().as_nanos() as u64).map_err(s)?;
            shown += page.len();
        }
        if shown == 0 && args.reads > 0 {
            return Err("seeds: every warm page was empty".to_owned());
        }
        passes.push(pct(&h));
    }
    let (warm, again) = (passes[0], passes[1]);

    eprintln!("  returning readers (every timeline lost, regenerated as populate_home does)");
    let mut r = e.redis.clone();
    let keys: Vec<String> = readers.iter().map(|u| e.timeline(*u)).collect();
    for chunk in keys.chunks(1000) {
        let () = redis::cmd("DEL").arg(chunk).query_async(&mut r).await.map_err(s)?;
    }
    let mut h = Histogram::<u64>::new(3).map_err(s)?;
    for reader in readers.iter().take(args.reads.min(readers.len())) {
        let t = Instant::now();
        let mut page = e.page(*reader, 20).await?;
        if page.is_empty() {
            e.regenerate(*reader).await?;
            page = e.page(*reader, 20).await?;
        }
        h.record(t.elapsed().as_nanos() as u64).map_err(s)?;
        std::hint::black_box(page);
    }
    let returning = pct(&h);
    for chunk in keys.chunks(1000) {
        let () = redis::cmd("DEL").arg(chunk).query_async(&mut r).await.map_err(s)?;
    }
    e.pool.close().await;
    Ok(Figures { posts_per_sec, deliveries_per_sec, warm, again, returning })
}

/// The seeds' design behind HTTP, for `scripts/bench-http.sh`: the part of
/// tideway's API its populate script and its home reads use, on the database
/// of `--sql` (tables created when absent) and keys under `--prefix`.
///
/// - `POST /v1/users/{u}/following` `{"targets": [...]}`: both graph copies.
/// - `POST /v1/items` `{"author", "body"}`: the row, then the job.
/// - `GET /v1/users/{u}/home?limit=N`: `ZREVRANGE`, then the items by id; a
///   reader without a timeline gets it regenerated first (waited for).
/// - `GET /backlog`: fan-out jobs not yet taken (the script waits for 0).
/// - `GET /readyz`.
///
/// `FANOUT_LANES` tasks take jobs with `BLPOP`, each on its own connection.
pub async fn serve(args: &Args, listen: &str) -> Result<(), String> {
    use axum::extract::{Path, Query, State};
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use std::collections::HashMap;

    type Shared = State<Arc<(Engines, AtomicU64)>>;
    type Answer = Result<axum::response::Response, (StatusCode, String)>;
    let fail = |e: String| (StatusCode::INTERNAL_SERVER_ERROR, e);
    let bad = |e: &str| (StatusCode::BAD_REQUEST, e.to_owned());

    sqlx::any::install_default_drivers();
    let dialect = Dialect::of_url(&args.sql).ok_or("--sql: not a postgres:// or mysql:// URL")?;
    let pool = AnyPoolOptions::new().max_connections(32).connect(&args.sql).await.map_err(s)?;
    let client = redis::Client::open(args.redis.as_str()).map_err(s)?;
    let redis = client.get_multiplexed_async_connection().await.map_err(s)?;
    let e = Engines { pool, dialect, redis, prefix: args.prefix.clone() };
    if sqlx::query("SELECT 1 FROM s_items LIMIT 1").fetch_optional(&e.pool).await.is_err() {
        for stmt in schema(dialect) {
            sqlx::query(&stmt).execute(&e.pool).await.map_err(s)?;
        }
    }
    for _ in 0..FANOUT_LANES {
        let (e, mut conn) = (e.clone(), client.get_multiplexed_async_connection().await.map_err(s)?);
        tokio::spawn(async move {
            loop {
                let job: Result<Option<(String, String)>, _> = conn.blpop(e.jobs(), 1.0).await;
                let Ok(Some((_, job))) = job else { continue };
                let Some((a, id)) = job.split_once(':') else { continue };
                if let (Ok(a), Ok(id)) = (a.parse(), id.parse())
                    && let Err(err) = e.deliver(a, id).await
                {
                    eprintln!("seeds: job {job} failed: {err}");
                }
            }
        });
    }
    // Ids: time-ordered and unique across restarts, as a snowflake's.
    let next = AtomicU64::new((tideway_core::Millis::now().0 as u64) << 22);
    let state = Arc::new((e, next));

    let follow = move |State(st): Shared, Path(u): Path<i64>, body: axum::Json<serde_json::Value>| async move {
        let targets = body["targets"].as_array().ok_or_else(|| bad("targets: a list"))?;
        let targets = targets
            .iter()
            .map(|t| t.as_str().and_then(|t| t.parse().ok()).or_else(|| t.as_i64()))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| bad("targets: user ids"))?;
        st.0.follow(u, &targets).await.map_err(fail)?;
        Answer::Ok(StatusCode::NO_CONTENT.into_response())
    };
    let create = move |State(st): Shared, body: axum::Json<serde_json::Value>| async move {
        let author = body["author"].as_str().and_then(|a| a.parse().ok()).ok_or_else(|| bad("author: a user id"))?;
        let id = st.1.fetch_add(1, Ordering::Relaxed) as i64;
        st.0.post(id, author, &body["body"].to_string()).await.map_err(fail)?;
        Answer::Ok((StatusCode::CREATED, axum::Json(serde_json::json!({ "id": id.to_string() }))).into_response())
    };
    let home = move |State(st): Shared, Path(u): Path<u64>, Query(q): Query<HashMap<String, String>>| async move {
        let limit = q.get("limit").and_then(|l| l.parse::<isize>().ok()).unwrap_or(20).clamp(1, 100);
        let mut page = st.0.page(u, limit).await.map_err(fail)?;
        if page.is_empty() {
            st.0.regenerate(u).await.map_err(fail)?;
            page = st.0.page(u, limit).await.map_err(fail)?;
        }
        // The bodies are JSON this server wrote: spliced in as they are.
        let mut out = String::with_capacity(64 + page.iter().map(|p| p.2.len() + 64).sum::<usize>());
        out.push_str("{\"entries\":[");
        for (i, (id, author, body)) in page.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("{{\"id\":\"{id}\",\"author\":\"{author}\",\"body\":{body}}}"));
        }
        out.push_str("]}");
        Answer::Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response())
    };
    let backlog = move |State(st): Shared| async move {
        let mut r = st.0.redis.clone();
        let n: u64 = r.llen(st.0.jobs()).await.map_err(|e| fail(e.to_string()))?;
        Answer::Ok(n.to_string().into_response())
    };
    let app = axum::Router::new()
        .route("/v1/users/{u}/following", post(follow))
        .route("/v1/items", post(create))
        .route("/v1/users/{u}/home", get(home))
        .route("/backlog", get(backlog))
        .route("/readyz", get(|| async { "ok" }))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(s)?;
    eprintln!("seeds' design serving on {listen}");
    axum::serve(listener, app).await.map_err(s)
}
