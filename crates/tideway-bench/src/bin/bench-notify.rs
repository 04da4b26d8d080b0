//! Notifications under load, beside a Mastodon-style notifications table on
//! PostgreSQL measured in the same process:
//!
//! 1. **A hot item**: `--likes` likes by distinct users from `--like-threads`
//!    writers on one item, through the service (each like stores the
//!    reaction, then its notification), while its owner reads their
//!    notifications (a page of 20 with the counts) in a loop: likes/s and
//!    the read's p50/p99. The baseline inserts a favourite row and a
//!    notification row per like in one transaction, and its reader runs the
//!    grouped page query (groups of the newest 40 notifications, an
//!    ungrouped one a group of its own, each group's count and 5 newest
//!    accounts aggregated over its rows) and the unread count capped at 100,
//!    as Mastodon's API does.
//! 2. **Unread counts at `--groups` groups**: a user with that many groups
//!    (mentions, a group each), the read mark halfway: a page of 20 with its
//!    exact `unseen`/`unread` counts; beside the baseline's capped count,
//!    its exact count, and its grouped page.
//!
//! Tideway runs on the embedded store and, with `--postgres`, on PostgreSQL
//! + Redis (`--redis`). Each figure is printed beside its baseline as a ratio.
//!
//! ```text
//! eval "$(scripts/services.sh up)"
//! cargo run --release -p tideway-bench --bin bench-notify -- \
//!     --postgres "$TIDEWAY_TEST_POSTGRES_URL" --redis "$TIDEWAY_TEST_REDIS_URL" \
//!     [--likes 20000] [--like-threads 4] [--groups 100000] [--reads 2000]
//! ```

#![allow(clippy::print_stdout, reason = "a command whose output is its report")]

use clap::Parser;
use hdrhistogram::Histogram;
use sqlx::{Connection, Executor, PgConnection};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tideway_config::SyncKind;
use tideway_core::notify::{Mark, Notice, Op, Verb};
use tideway_core::{ItemId, ItemKind, Millis, NewItem, UserId};
use tideway_service::FeedService;
use tideway_store_sql::testing::FreshDatabase;

use tideway_bench::setup;

use tideway_bench::measure;

use measure::{hist, percentiles};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
struct Args {
    #[arg(long, default_value_t = 20_000)]
    likes: usize,
    #[arg(long, default_value_t = 4)]
    like_threads: usize,
    #[arg(long, default_value_t = 100_000)]
    groups: u64,
    /// Reads of each measured page or count.
    #[arg(long, default_value_t = 2000)]
    reads: usize,
    /// A PostgreSQL server (a fresh database is made on it): the baseline,
    /// and tideway on PostgreSQL + Redis.
    #[arg(long)]
    postgres: Option<String>,
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
}

type Res<T> = Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// What one engine measured.
struct Figures {
    likes_per_sec: f64,
    read_while_liking: Histogram<u64>,
    page_at_groups: Histogram<u64>,
}

/// Both phases on one engine.
async fn tideway(args: &Args, svc: Arc<FeedService>, db: Option<&FreshDatabase>) -> Res<Figures> {
    let owner = UserId(1);
    let (item, _) = svc.items.create_item(NewItem::new(owner, ItemKind::Post)).await.map_err(err)?;
    let item = item.item.id;
    // Likes from several writers while the owner reads.
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (svc, done) = (svc.clone(), done.clone());
        tokio::spawn(async move {
            let mut h = hist()?;
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                let page = svc.notifications.page(owner, Some(20), None).await.map_err(err)?;
                h.record(t.elapsed().as_nanos() as u64).map_err(err)?;
                std::hint::black_box(page);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok::<_, String>(h)
        })
    };
    let per = args.likes / args.like_threads.max(1);
    let t = Instant::now();
    let writers: Vec<_> = (0..args.like_threads.max(1))
        .map(|w| {
            let svc = svc.clone();
            tokio::spawn(async move {
                for i in 0..per {
                    let user = UserId(1_000_000 + (w * per + i) as u64);
                    svc.items.react(item, user, "like", true).await.map_err(err)?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for w in writers {
        w.await.map_err(err)??;
    }
    let likes_per_sec = (per * args.like_threads.max(1)) as f64 / t.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let read_while_liking = reader.await.map_err(err)??;
    let page = svc.notifications.page(owner, Some(20), None).await.map_err(err)?;
    let count = page.groups.first().map_or(0, |g| g.actor_count);
    if count != (per * args.like_threads.max(1)) as u64 || page.groups.len() != 1 {
        return Err(format!("the hot item's group counts {count} likes in {} groups", page.groups.len()));
    }
    // A user with many groups, read halfway.
    let backend = svc.backend();
    let heavy = UserId(2);
    let t = Instant::now();
    let mut ops = Vec::with_capacity(1000);
    for g in 1..=args.groups {
        ops.push(Op::Stand {
            notice: Notice {
                user: heavy,
                verb: Verb::Mention { item: ItemId(g) },
                actor: UserId(10 + g % 1000),
                at: Millis(1_700_000_000_000 + g as i64),
                stands: true,
                about: None,
            },
            open: g,
        });
        if ops.len() == 1000 || g == args.groups {
            backend.notify(&ops).await.map_err(err)?;
            ops.clear();
        }
        if g == args.groups / 2 {
            backend.mark_notifications(heavy, Mark::Read, Some(g)).await.map_err(err)?;
        }
    }
    eprintln!("    {} groups written in {:.1} s", args.groups, t.elapsed().as_secs_f64());
    // The planner's statistics, as autovacuum has them within a minute (the
    // baseline's table is analyzed too).
    if let Some(db) = db {
        db.execute(&["ANALYZE".to_owned()]).await.map_err(err)?;
    }
    let mut page_at_groups = hist()?;
    for _ in 0..args.reads {
        let t = Instant::now();
        let page = svc.notifications.page(heavy, Some(20), None).await.map_err(err)?;
        page_at_groups.record(t.elapsed().as_nanos() as u64).map_err(err)?;
        if page.unread != args.groups - args.groups / 2 || page.unseen != args.groups {
            return Err(format!("counts {} unseen, {} unread", page.unseen, page.unread));
        }
    }
    Ok(Figures { likes_per_sec, read_while_liking, page_at_groups })
}

/// The Mastodon-style baseline on a fresh PostgreSQL database.
struct Baseline {
    likes_per_sec: f64,
    grouped_while_liking: Histogram<u64>,
    capped_while_liking: Histogram<u64>,
    capped_at_groups: Histogram<u64>,
    exact_at_groups: Histogram<u64>,
    grouped_at_groups: Histogram<u64>,
}

/// The newest 40 notifications' groups (an ungrouped one is a group of its
/// own), each with its count and 5 newest accounts over all its rows.
const GROUPED: &str = "WITH recent AS (SELECT id, group_key FROM m_notifications \
       WHERE account_id = $1 ORDER BY id DESC LIMIT 40) \
     SELECT COALESCE(n.group_key, 'n' || n.id) AS k, max(n.id) AS latest, count(*) AS n, \
       (array_agg(n.from_account_id ORDER BY n.id DESC))[1:5] AS sample \
     FROM m_notifications n WHERE n.account_id = $1 \
       AND (n.group_key IN (SELECT group_key FROM recent WHERE group_key IS NOT NULL) \
            OR n.id IN (SELECT id FROM recent WHERE group_key IS NULL)) \
     GROUP BY 1 ORDER BY latest DESC LIMIT 20";
const CAPPED: &str = "SELECT count(*) FROM (SELECT 1 FROM m_notifications \
     WHERE account_id = $1 AND id > $2 LIMIT 100) t";
const EXACT: &str = "SELECT count(*) FROM m_notifications WHERE account_id = $1 AND id > $2";

async fn timed(c: &mut PgConnection, sql: &str, a: i64, b: Option<i64>, h: &mut Histogram<u64>) -> Res<()> {
    let t = Instant::now();
    let q = sqlx::query(sql).bind(a);
    let q = match b {
        Some(b) => q.bind(b),
        None => q,
    };
    std::hint::black_box(q.fetch_all(&mut *c).await.map_err(err)?);
    h.record(t.elapsed().as_nanos() as u64).map_err(err)
}

async fn baseline(args: &Args, url: &str) -> Res<Baseline> {
    let mut c = PgConnection::connect(url).await.map_err(err)?;
    c.execute(
        "CREATE TABLE m_favourites (id BIGSERIAL PRIMARY KEY, account_id BIGINT NOT NULL, status_id BIGINT NOT NULL);
         CREATE UNIQUE INDEX ON m_favourites (account_id, status_id);
         CREATE TABLE m_notifications (id BIGSERIAL PRIMARY KEY, account_id BIGINT NOT NULL,
             from_account_id BIGINT NOT NULL, type TEXT NOT NULL, activity_id BIGINT NOT NULL,
             group_key TEXT, created_at TIMESTAMP NOT NULL DEFAULT now());
         CREATE INDEX ON m_notifications (account_id, id DESC);
         CREATE INDEX ON m_notifications (account_id, group_key, id DESC)",
    )
    .await
    .map_err(err)?;
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (url, done) = (url.to_owned(), done.clone());
        tokio::spawn(async move {
            let mut c = PgConnection::connect(&url).await.map_err(err)?;
            let (mut grouped, mut capped) = (hist()?, hist()?);
            while !done.load(Ordering::Relaxed) {
                timed(&mut c, GROUPED, 1, None, &mut grouped).await?;
                timed(&mut c, CAPPED, 1, Some(0), &mut capped).await?;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Ok::<_, String>((grouped, capped))
        })
    };
    let threads = args.like_threads.max(1);
    let per = args.likes / threads;
    let t = Instant::now();
    let writers: Vec<_> = (0..threads)
        .map(|w| {
            let url = url.to_owned();
            tokio::spawn(async move {
                let mut c = PgConnection::connect(&url).await.map_err(err)?;
                for i in 0..per {
                    let user = 1_000_000 + (w * per + i) as i64;
                    let mut tx = c.begin().await.map_err(err)?;
                    let fav: (i64,) =
                        sqlx::query_as("INSERT INTO m_favourites (account_id, status_id) VALUES ($1, 7) RETURNING id")
                            .bind(user)
                            .fetch_one(&mut *tx)
                            .await
                            .map_err(err)?;
                    sqlx::query(
                        "INSERT INTO m_notifications (account_id, from_account_id, type, activity_id, group_key) \
                         VALUES (1, $1, 'favourite', $2, 'favourite-7')",
                    )
                    .bind(user)
                    .bind(fav.0)
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
                    tx.commit().await.map_err(err)?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for w in writers {
        w.await.map_err(err)??;
    }
    let likes_per_sec = (per * threads) as f64 / t.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let (grouped_while_liking, capped_while_liking) = reader.await.map_err(err)??;
    // A user with many notifications, each a group of its own, read halfway.
    sqlx::query(
        "INSERT INTO m_notifications (account_id, from_account_id, type, activity_id, group_key) \
         SELECT 2, 10 + g % 1000, 'mention', g, NULL FROM generate_series(1, $1) g",
    )
    .bind(args.groups as i64)
    .execute(&mut c)
    .await
    .map_err(err)?;
    c.execute("ANALYZE m_notifications").await.map_err(err)?;
    let (half,): (i64,) =
        sqlx::query_as("SELECT id FROM m_notifications WHERE account_id = 2 ORDER BY id LIMIT 1 OFFSET $1")
            .bind((args.groups / 2) as i64)
            .fetch_one(&mut c)
            .await
            .map_err(err)?;
    let (mut capped_at_groups, mut exact_at_groups, mut grouped_at_groups) = (hist()?, hist()?, hist()?);
    for _ in 0..args.reads {
        timed(&mut c, CAPPED, 2, Some(half), &mut capped_at_groups).await?;
        timed(&mut c, EXACT, 2, Some(half), &mut exact_at_groups).await?;
        timed(&mut c, GROUPED, 2, None, &mut grouped_at_groups).await?;
    }
    Ok(Baseline {
        likes_per_sec,
        grouped_while_liking,
        capped_while_liking,
        capped_at_groups,
        exact_at_groups,
        grouped_at_groups,
    })
}

fn report(name: &str, f: &Figures, b: Option<&Baseline>) {
    println!("## tideway, {name}");
    let ratio = |ours: f64, theirs: f64| format!("×{:.2}", ours / theirs);
    let rate = b.map_or(String::new(), |b| {
        format!("   baseline {:.0}/s → {}", b.likes_per_sec, ratio(f.likes_per_sec, b.likes_per_sec))
    });
    println!("likes/s on one hot item, owner reading: {:.0}/s{rate}", f.likes_per_sec);
    let r = &f.read_while_liking;
    println!(
        "  owner's page of 20 while liked: p50 {:.0} µs, p99 {:.0} µs ({} reads)",
        percentiles(r).0,
        percentiles(r).1,
        r.len()
    );
    if let Some(b) = b {
        let (g, c) = (&b.grouped_while_liking, &b.capped_while_liking);
        println!(
            "  baseline grouped page p50 {:.0} / p99 {:.0} µs, capped unread count p50 {:.0} / p99 {:.0} µs; \
             p99 ours / (grouped + capped) ×{:.3}",
            percentiles(g).0,
            percentiles(g).1,
            percentiles(c).0,
            percentiles(c).1,
            percentiles(r).1 / (percentiles(g).1 + percentiles(c).1)
        );
    }
    let p = &f.page_at_groups;
    println!(
        "page of 20 with exact unseen/unread at many groups: p50 {:.0} µs, p99 {:.0} µs",
        percentiles(p).0,
        percentiles(p).1
    );
    if let Some(b) = b {
        for (what, h) in [
            ("capped (100) count", &b.capped_at_groups),
            ("exact count", &b.exact_at_groups),
            ("grouped page", &b.grouped_at_groups),
        ] {
            println!(
                "  baseline {what}: p50 {:.0} µs, p99 {:.0} µs → ours ×{:.3} at p50",
                percentiles(h).0,
                percentiles(h).1,
                percentiles(p).0 / percentiles(h).0
            );
        }
    }
}

fn main() -> Res<()> {
    // Before the runtime starts its threads (mimalloc's options are not
    // synchronized).
    tideway_engines::allocator::tune();
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(err)?.block_on(run())
}

async fn run() -> Res<()> {
    let args = Args::parse();
    let db = match &args.postgres {
        Some(base) => Some(FreshDatabase::create(base).await.map_err(err)?),
        None => None,
    };
    let base = match &db {
        Some(db) => {
            eprintln!("baseline: a Mastodon-style table on PostgreSQL");
            Some(baseline(&args, &db.url).await?)
        }
        None => None,
    };
    eprintln!("tideway: embedded");
    let dir = tempfile::tempdir().map_err(err)?;
    let cfg = setup::embedded(dir.path(), SyncKind::Fsync);
    let embedded = tideway(&args, setup::service(&cfg).await?, None).await?;
    let shared = match &args.postgres {
        Some(base_url) => {
            eprintln!("tideway: PostgreSQL + Redis");
            let pgdb = FreshDatabase::create(base_url).await.map_err(err)?;
            let cfg = setup::postgres(&pgdb.url, &args.redis, format!("benchnotify{}:", std::process::id()));
            let f = tideway(&args, setup::service(&cfg).await?, Some(&pgdb)).await?;
            pgdb.drop().await.map_err(err)?;
            Some(f)
        }
        None => None,
    };
    println!(
        "# notifications: {} likes from {} writers, {} groups, {} reads",
        args.likes, args.like_threads, args.groups, args.reads
    );
    report("embedded (fsync)", &embedded, base.as_ref());
    if let Some(f) = &shared {
        report("PostgreSQL + Redis", f, base.as_ref());
    }
    if let Some(db) = db {
        db.drop().await.map_err(err)?;
    }
    Ok(())
}
