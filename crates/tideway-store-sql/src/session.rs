//! The bounds every session tideway opens sets on itself, so that a node
//! cut off or killed mid-transaction cannot hold locks another node needs
//! for longer than [`IDLE_IN_TRANSACTION`], and no statement waits on a lock
//! longer than [`LOCK_WAIT`] or runs longer than [`STATEMENT`].
//!
//! A node behind a dead link leaves its transaction open on the server: the
//! server sees a session idle inside a transaction, holding its row locks,
//! and without a bound keeps it until TCP gives up (two hours of keepalive
//! by default). With these settings the server ends that session itself
//! after [`IDLE_IN_TRANSACTION`] (PostgreSQL `idle_in_transaction_session_timeout`,
//! MariaDB `idle_transaction_timeout`), rolling its transaction back: an
//! unacknowledged write is undone, never half-applied. PostgreSQL also
//! probes an idle peer with TCP keepalives after [`KEEPALIVE_IDLE_S`] and
//! drops it after [`KEEPALIVE_COUNT`] unanswered probes.
//!
//! tideway's own transactions never wait between statements longer than a
//! round trip and a little work, so a healthy node never meets the idle
//! bound; a lock wait beyond [`LOCK_WAIT`] fails the statement (a `503`, or
//! retried where the engine calls it retryable), which is longer than the
//! idle bound: a node waiting on a dead node's lock gets it once the dead
//! node's session is ended. MySQL (not MariaDB) has no idle-in-transaction
//! bound: there `wait_timeout` ends any idle session after [`MYSQL_WAIT_S`].
//!
//! On the node's side, a connection given back to the pool must answer a
//! ping within [`RELEASE_PING`] or it is dropped (sqlx's own ping there has
//! no bound, and behind a dark link would hold the pool's slot for minutes).
//!
//! Migrations run on a session of their own without these bounds (an index
//! on a large table may take longer than [`STATEMENT`]).
//!
//! After a failover the address a session was opened through (a virtual IP,
//! a DNS name, a proxy) leads to the promoted standby, but a session opened
//! before may still be on a server that cannot take writes: a standby that
//! was not promoted, a server made read-only, one shutting down. The first
//! session that meets such a refusal raises the store's [`Fence`], and every
//! session opened before it is closed when next lent or given back: the
//! next ones are opened through the address again.

use crate::Dialect;
use sqlx::{AnyConnection, Executor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a session may sit idle inside a transaction before the server
/// ends it (and rolls the transaction back).
pub const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(3);
/// How long a statement waits for a lock before it fails.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);
/// How long one statement may run before the server cancels it.
pub const STATEMENT: Duration = Duration::from_secs(30);
/// PostgreSQL: seconds of silence before the server probes its peer.
pub const KEEPALIVE_IDLE_S: u32 = 10;
/// How long a connection given back to the pool may take to answer its
/// ping before it is dropped (`lib.rs`).
pub const RELEASE_PING: std::time::Duration = std::time::Duration::from_secs(2);
/// PostgreSQL: seconds between probes.
pub const KEEPALIVE_INTERVAL_S: u32 = 5;
/// PostgreSQL: unanswered probes before the server drops the session.
pub const KEEPALIVE_COUNT: u32 = 3;
/// MySQL (no idle-in-transaction bound): seconds any idle session is kept.
pub const MYSQL_WAIT_S: u32 = 60;

/// MariaDB's "unknown system variable": the server is MySQL.
const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// The statements that set the bounds on a new PostgreSQL session (one text).
fn postgres() -> String {
    format!(
        "SET idle_in_transaction_session_timeout = {}; SET lock_timeout = {}; SET statement_timeout = {}; \
         SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}; SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}; \
         SET tcp_keepalives_count = {KEEPALIVE_COUNT}",
        IDLE_IN_TRANSACTION.as_millis(),
        LOCK_WAIT.as_millis(),
        STATEMENT.as_millis()
    )
}

/// The same on MariaDB (seconds).
fn mariadb() -> String {
    format!(
        "SET SESSION idle_transaction_timeout = {}, innodb_lock_wait_timeout = {}, max_statement_time = {}",
        IDLE_IN_TRANSACTION.as_secs(),
        LOCK_WAIT.as_secs(),
        STATEMENT.as_secs()
    )
}

/// The same on MySQL, which lacks the first and bounds only reads' time.
fn mysql() -> String {
    format!(
        "SET SESSION wait_timeout = {MYSQL_WAIT_S}, innodb_lock_wait_timeout = {}, max_execution_time = {}",
        LOCK_WAIT.as_secs(),
        STATEMENT.as_millis()
    )
}

/// When a session of the store last found its server unable to take writes
/// (`tx::off_primary`): sessions opened before then are not lent again.
#[derive(Debug)]
pub(crate) struct Fence {
    origin: Instant,
    /// Milliseconds from `origin` to the last raise, plus one; 0: never.
    raised: AtomicU64,
}

impl Fence {
    pub(crate) fn new() -> Self {
        Self { origin: Instant::now(), raised: AtomicU64::new(0) }
    }

    fn now(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64 + 1
    }

    /// A session found its server unable to take writes, now. Logged once
    /// for a run of refusals (again after 10 s without one): each refusal
    /// is also logged with its 503.
    pub(crate) fn raise(&self) {
        let now = self.now();
        let before = self.raised.fetch_max(now, Ordering::Relaxed);
        if before == 0 || now.saturating_sub(before) > 10_000 {
            tracing::warn!(
                "the database refused a write as read-only or going away (a standby, or a failover under way): \
                 every session opened before is closed and opened again through storage.url"
            );
        }
    }

    /// Whether a session opened `age` ago was opened before the last raise
    /// (within the same millisecond counts as before: it is closed, and a
    /// new one opened, which costs only a connection).
    pub(crate) fn stale(&self, age: Duration) -> bool {
        let raised = self.raised.load(Ordering::Relaxed);
        raised != 0 && self.now().saturating_sub(age.as_millis() as u64) <= raised
    }
}

/// Sets the bounds on a new session of `dialect`.
pub(crate) async fn bound(conn: &mut AnyConnection, dialect: Dialect) -> sqlx::Result<()> {
    match dialect {
        Dialect::Postgres => conn.execute(sqlx::raw_sql(&postgres())).await.map(drop),
        Dialect::MySql => match conn.execute(sqlx::raw_sql(&mariadb())).await {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(db))
                if db
                    .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|e| e.number() == ER_UNKNOWN_SYSTEM_VARIABLE) =>
            {
                conn.execute(sqlx::raw_sql(&mysql())).await.map(drop)
            }
            Err(e) => Err(e),
        },
    }
}

/// Lifts the bounds on a session that runs migrations.
pub(crate) async fn unbound(conn: &mut AnyConnection, dialect: Dialect) -> sqlx::Result<()> {
    let sql = match dialect {
        Dialect::Postgres => {
            "SET statement_timeout = 0; SET lock_timeout = 0; SET idle_in_transaction_session_timeout = 0"
        }
        Dialect::MySql => "SET SESSION innodb_lock_wait_timeout = DEFAULT",
    };
    conn.execute(sqlx::raw_sql(sql)).await.map(drop)?;
    if dialect == Dialect::MySql {
        // (each alone: the one a server lacks fails without the others)
        for sql in ["SET SESSION max_statement_time = 0", "SET SESSION max_execution_time = 0"] {
            let _ = conn.execute(sqlx::raw_sql(sql)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The bounds hold on real servers: a session left idle inside a
    //! transaction holding a row lock is ended by the server within the
    //! bound, and another session then takes the lock; the settings read
    //! back as set on every new session of the pool.

    use crate::SqlStore;
    use crate::testing::FreshDatabase;
    use sqlx::{AnyConnection, Connection, Executor, Row};
    use std::time::{Duration, Instant};

    async fn idle_transactions_end(var: &str) {
        let db = FreshDatabase::from_env(var).await;
        let store = SqlStore::connect(&db.url).await.expect("connect");
        let dialect = store.dialect();
        sqlx::any::install_default_drivers();
        let mut setup = AnyConnection::connect(&db.url).await.expect("connect");
        setup.execute("CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL)").await.expect("table");
        setup.execute("INSERT INTO t (id, v) VALUES (1, 0)").await.expect("row");
        // A node's session: bounded, it locks the row, then goes silent.
        let mut cut = AnyConnection::connect(&db.url).await.expect("connect");
        super::bound(&mut cut, dialect).await.expect("bounds");
        cut.execute("BEGIN").await.expect("begin");
        cut.execute("UPDATE t SET v = 1 WHERE id = 1").await.expect("lock the row");
        // Another node's session waits for the lock, and gets it once the
        // server has ended the silent one: within the idle bound and the
        // lock wait, with the silent one's write rolled back.
        let mut other = AnyConnection::connect(&db.url).await.expect("connect");
        super::bound(&mut other, dialect).await.expect("bounds");
        let t0 = Instant::now();
        other.execute("UPDATE t SET v = v + 10 WHERE id = 1").await.expect("the lock is let go");
        let waited = t0.elapsed();
        assert!(
            waited >= super::IDLE_IN_TRANSACTION - Duration::from_millis(500)
                && waited < super::IDLE_IN_TRANSACTION + Duration::from_secs(2),
            "waited {waited:?} for a dead session's lock"
        );
        let v: i64 = other.fetch_one("SELECT v FROM t WHERE id = 1").await.expect("read").try_get(0).expect("v");
        assert_eq!(v, 10, "the ended session's write was rolled back");
        assert!(cut.execute("COMMIT").await.is_err(), "the silent session was ended by the server");
        // The pool's sessions carry the bounds.
        let lock: String = match dialect {
            crate::Dialect::Postgres => {
                sqlx::query_scalar("SHOW idle_in_transaction_session_timeout").fetch_one(&store.pool).await
            }
            crate::Dialect::MySql => sqlx::query_scalar("SELECT CAST(@@SESSION.idle_transaction_timeout AS CHAR)")
                .fetch_one(&store.pool)
                .await
                .map(|s: String| s + "s"),
        }
        .expect("read the setting");
        assert_eq!(lock, "3s", "the pool's sessions are bounded");
        let _ = other.close().await;
        let _ = setup.close().await;
        store.close().await;
        db.drop().await.expect("drop the database");
    }

    /// A failover as one store sees it: its address (a proxy) is moved to
    /// the standby, and every write is refused there as read-only
    /// (unavailable, nothing done; posts too, whose batches classify their
    /// own errors). Then the address is moved back to the primary without
    /// ending the connections open (as a changed DNS name: they stay on the
    /// standby): the next write is done, on a new session, because the
    /// refusals closed the sessions on the standby instead of lending them
    /// again. (Without the fence it is refused: a session opened on a
    /// standby stays one until the server is promoted.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_sessions_on_a_standby_are_left_once_it_refuses_a_write() {
        use crate::fault_link::FaultLink;
        use crate::standby::{Pair, Replication};
        use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};
        use tideway_store::{Graph, Items};
        let Some(bin) = crate::standby::binaries() else {
            eprintln!(
                "SKIPPED: no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql, \
                 or scripts/services.sh up)"
            );
            return;
        };
        let pair = Pair::start(bin, Replication::Synchronous).await.expect("a primary and its standby");
        let link = FaultLink::start(pair.primary.addr()).await.expect("proxy");
        let store = SqlStore::connect(&link.url_through(&pair.primary.url("postgres"))).await.expect("connect");
        store.set_block(UserId(1), UserId(2), true, Millis(1)).await.expect("a write on the primary");

        link.retarget(pair.standby.addr(), true);
        // A read is served there (a session opened on the standby, kept).
        store.counts(UserId(1)).await.expect("a read on the standby");
        let blocks = (10..14).map(|u| store.set_block(UserId(u), UserId(2), true, Millis(2)));
        let post = store.create_item(Item::new(ItemId(7), UserId(3), ItemKind::Post), true, Millis(3));
        let (blocks, post) = tokio::join!(futures_util::future::join_all(blocks), post);
        for refused in blocks.into_iter().map(|r| r.map(drop)).chain([post.map(drop)]) {
            let e = refused.expect_err("a write on a standby is refused");
            assert!(e.is_unavailable() && !e.is_retryable(), "{e}");
            assert!(e.chain().contains("read-only"), "refused as read-only: {}", e.chain());
        }

        link.retarget(pair.primary.addr(), false);
        store.set_block(UserId(20), UserId(2), true, Millis(4)).await.expect("the next write goes to the primary");
        store.create_item(Item::new(ItemId(8), UserId(3), ItemKind::Post), true, Millis(5)).await.expect("a post too");
        let on_primary = pair
            .sql(false, "postgres", "SELECT count(*) FROM tw_blocks WHERE target = 2")
            .await
            .expect("the primary's blocks");
        assert_eq!(on_primary, "2", "the first block and the one after the move, nothing of the refused ones");
        store.close().await;
    }

    #[tokio::test]
    async fn postgres_a_silent_transaction_lets_go_of_its_locks() {
        idle_transactions_end("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test]
    async fn mysql_a_silent_transaction_lets_go_of_its_locks() {
        idle_transactions_end("TIDEWAY_TEST_MYSQL_URL").await;
    }
}
