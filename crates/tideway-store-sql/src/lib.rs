//! The durable half of a scaled-out deployment on PostgreSQL or MySQL /
//! MariaDB: items, the follow graph, blocks and mutes, reactions, home
//! insertions, promotions, notifications and fan-out jobs with leases
//! ([`Items`], [`Graph`], [`Notifications`], [`Jobs`]). It is the source of
//! truth: every node reads and writes it, and the shared half (Redis) is
//! rebuilt from it.
//!
//! One implementation serves both engines through sqlx's `Any` driver; the
//! SQL is written once with `?` placeholders (numbered for PostgreSQL) and
//! only the statements that differ (insert-or-ignore, upserts, what a post
//! writes, schema types) are rendered per dialect. The schema is versioned
//! ([`schema`]): a node applies missing migrations at start and refuses a
//! database of a newer version.
//!
//! Where things are:
//!
//! | file | what |
//! |---|---|
//! | `dialect.rs` | [`Dialect`] and the statements spelled per dialect (insert-or-ignore, upserts) |
//! | `rows.rs` | the one bind vocabulary (`Bind`) and columns: keys as BIGINTs, typed column reads, padded `IN` lists, item rows |
//! | `tx.rs` | errors classified from the engines' codes (`OrUnavailable`), the retry of a transaction, reads and writes bound to `Bind`s |
//! | `session.rs` | the bounds every session sets: idle in a transaction, lock waits, statements, keepalives; the fence that drops sessions on a server that cannot take writes (a failover) |
//! | `items.rs` | [`Items`]: creates (rules in `tideway_store::rules`), updates, records, outboxes, reposts, insertions |
//! | `post_writes.rs` | what a post writes, described once (its row built by the rules, the tables it goes to), rendered per dialect for one post or a batch |
//! | `posts.rs` | plain posts queued and written in batches: one statement (PostgreSQL) or one transaction (MySQL) for all queued |
//! | `reactions.rs` | reactions, kept per-item counts, a page's hydration; promotions |
//! | `graph.rs` | [`Graph`]: follows both ways, blocks, mutes, lists, relations, per-user counters |
//! | `notifications/` | [`Notifications`]: groups placed by `tideway_core::notify::place` under per-key locks (`write.rs`), moves folded into counts (`fold.rs`), pages, marks and the stored causes (`mod.rs`) |
//! | `pages.rs` | [`Pages`]: a page's facts in one statement |
//! | `page_conns.rs` | the page statement's sessions, lent without the pool's pings |
//! | `jobs.rs` | [`Jobs`]: fan-out jobs, leases (`FOR UPDATE SKIP LOCKED`), checkpoints |
//! | `stats.rs` | store-wide counts and health |
//! | `schema.rs` | the versioned migrations and how they are applied |
//! | `testing.rs` | a fresh database per test |
//! | `fault_link.rs`, `standby.rs` | for tests: a TCP proxy that faults a link or moves to another server; a PostgreSQL primary with a streaming standby |
//!
//! [`Items`]: tideway_store::Items
//! [`Graph`]: tideway_store::Graph
//! [`Jobs`]: tideway_store::Jobs
//! [`Pages`]: tideway_store::Pages
//! [`Notifications`]: tideway_store::Notifications

mod dialect;
pub mod fault_link;
mod graph;
mod items;
mod jobs;
mod live;
mod notifications;
mod page_conns;
mod pages;
mod post_writes;
mod posts;
mod reactions;
mod rows;
pub mod schema;
pub mod session;
pub mod standby;
mod stats;
pub mod testing;
mod tx;

pub use dialect::Dialect;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use std::time::{Duration, Instant};
use tideway_store::{Result, StoreError, StoreStats};

/// The setting that names the database, as messages spell it.
const SETTING: &str = "storage.url (TIDEWAY_STORAGE__URL)";

/// Every MySQL session's isolation: InnoDB's default (repeatable read)
/// takes gap locks that make concurrent job claims and checkpoints
/// deadlock; read committed is PostgreSQL's default and what the queries
/// are written for.
const MY_READ_COMMITTED: &str = "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED";

/// The error of a pool that cannot reach the database at `url`.
fn cannot_connect(url: &str) -> impl Fn(sqlx::Error) -> StoreError + '_ {
    move |e| StoreError::Config {
        setting: SETTING,
        message: format!("cannot connect to {}: {e}", tideway_store::redact_url(url)),
        source: Some(Box::new(e)),
    }
}

/// Items, graph and jobs on a SQL database.
pub struct SqlStore {
    pool: AnyPool,
    /// The connections of a page's one statement (`pages.rs`), whose
    /// sessions plan it once, generically (PostgreSQL), or estimate its
    /// `IN` lists from index statistics (MySQL); lent without pings
    /// (`page_conns.rs`).
    pages: page_conns::PageConns,
    dialect: Dialect,
    /// The readiness probe's one session (`Jobs::clock`): a trivial
    /// statement that no busy pool delays, so a slow but answering
    /// database keeps its nodes ready.
    probe: page_conns::PageConns,
    /// Plain posts waiting to be written together (`posts.rs`).
    posts: std::sync::Arc<posts::PostQueue>,
    /// The store-wide counts and when they were read (see `stats.rs`).
    stats: tokio::sync::Mutex<Option<(Instant, StoreStats)>>,
    /// Notification writes that moved a group, counted to fold every so
    /// many (`notifications.rs`).
    moves_written: std::sync::atomic::AtomicU64,
    /// Raised when a session finds its server unable to take writes (a
    /// standby, one shutting down: a failover under way); the sessions
    /// opened before are closed, not lent (`session.rs`).
    fence: std::sync::Arc<session::Fence>,
}

impl SqlStore {
    /// Connects, checks the schema version and applies missing migrations.
    /// Errors name the setting to fix (`storage.url`).
    pub async fn connect(url: &str) -> Result<Self> {
        let dialect = Dialect::of_url(url)
            .ok_or_else(|| StoreError::config(SETTING, format!("{url:?} is not a postgres:// or mysql:// URL")))?;
        sqlx::any::install_default_drivers();
        let mysql = dialect == Dialect::MySql;
        let fence = std::sync::Arc::new(session::Fence::new());
        let (lent, released) = (fence.clone(), fence.clone());
        let pool = AnyPoolOptions::new()
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if mysql {
                        sqlx::query(MY_READ_COMMITTED).execute(&mut *conn).await?;
                    }
                    session::bound(conn, dialect).await
                })
            })
            // sqlx pings a connection given back to the pool, with no
            // bound: behind a link that went dark the ping waits on TCP's
            // retransmissions (minutes, even after the link heals), holding
            // its slot, and sixteen of them empty the pool. This ping first,
            // within a bound, drops such a connection at once (an error
            // makes sqlx close it without a word to the server); one that
            // answered is then pinged again by sqlx, a round trip later.
            // A session opened before the fence was raised is closed, in
            // both directions: the address may lead elsewhere by now.
            .before_acquire(move |_, meta| {
                let fresh = !lent.stale(meta.age);
                Box::pin(async move { Ok(fresh) })
            })
            .after_release(move |conn, meta| {
                let stale = released.stale(meta.age);
                Box::pin(async move {
                    if stale {
                        return Ok(false);
                    }
                    match tokio::time::timeout(session::RELEASE_PING, sqlx::Connection::ping(conn)).await {
                        Ok(answered) => answered.map(|()| true),
                        Err(_) => Err(sqlx::Error::PoolTimedOut),
                    }
                })
            })
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(3))
            .connect(url)
            .await
            .map_err(cannot_connect(url))?;
        // The page's statement (pages.rs) has connections of its own.
        // PostgreSQL planned its many branches anew at every execution (a
        // custom plan, ~0.6-1 ms, against ~0.1-0.3 ms of running it): its
        // sessions plan generically, once per connection, and the statement
        // is written so that one plan suits every list length. MariaDB
        // optimizes every execution and, below `eq_range_index_dive_limit`
        // (200) values, dives into the index once per value of every `IN`
        // list to estimate it: the statement's cost grew with its lists.
        // Its sessions estimate from the index statistics instead (limit
        // 1), and the statement forces the one index whose statistics
        // mislead (`tw_items_reposts`: most items are no repost). Every
        // other statement keeps the defaults (the graph's range reads run
        // faster on custom plans).
        let setup = if mysql {
            // (and gather an original's reposts in one text up to a length
            // of their own: `pages::REPOSTS_TEXT_MAX`)
            vec![
                MY_READ_COMMITTED.to_owned(),
                format!(
                    "SET SESSION eq_range_index_dive_limit = 1, group_concat_max_len = {}",
                    pages::REPOSTS_TEXT_MAX
                ),
            ]
        } else {
            vec!["SET plan_cache_mode = force_generic_plan".to_owned()]
        };
        let pages = page_conns::PageConns::new(url, dialect, setup, 8, Duration::from_secs(3), fence.clone());
        let posts = posts::PostQueue::new(pool.clone(), dialect, fence.clone());
        let probe = page_conns::PageConns::new(url, dialect, vec![], 1, Duration::from_secs(2), fence.clone());
        let store = Self {
            pool,
            pages,
            dialect,
            probe,
            posts,
            stats: tokio::sync::Mutex::new(None),
            moves_written: std::sync::atomic::AtomicU64::new(0),
            fence,
        };
        schema::migrate(&store.pool, dialect).await.map_err(|e| StoreError::config(SETTING, e))?;
        Ok(store)
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Closes every connection (tests drop their database after).
    pub async fn close(&self) {
        self.pool.close().await;
        self.pages.close().await;
        self.probe.close().await;
    }
}

/// Every call is a round trip to the database.
impl tideway_store::Profiled for SqlStore {
    fn profile(&self) -> tideway_store::Profile {
        tideway_store::Profile::REMOTE
    }
}
