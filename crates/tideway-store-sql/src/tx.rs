//! Errors, transactions and plain reads.
//!
//! Every driver error becomes [`StoreError::Unavailable`], classified from
//! the engine's own codes: a transaction the engine rolled back for a
//! deadlock or a serialization failure (PostgreSQL SQLSTATE 40001 / 40P01,
//! MySQL errors 1213 / 1205) is `retryable`, and [`SqlStore::retrying`] runs
//! it again; anything else (a lost connection, a pool timeout) is answered
//! `503` as it is. A refusal because the server cannot take writes now (a
//! standby, a server shutting down: [`off_primary`]) is answered `503` too,
//! and raises the store's [`Fence`]: the sessions opened before are not lent
//! again, so the next ones go through the address to whichever server is
//! the primary by then.

use crate::rows::{Bind, bound, int};
use crate::session::Fence;
use crate::{Dialect, SqlStore};
use sqlx::any::AnyRow;
use std::time::Duration;
use tideway_store::{Result, StoreError};

/// A transaction on the pool.
pub(crate) type Tx = sqlx::Transaction<'static, sqlx::Any>;

/// Attempts at a transaction that met a deadlock.
const RETRIES: u32 = 5;

/// Whether the engine rolled the statement's transaction back so that it
/// may be run again: a deadlock, a serialization failure, a lock wait that
/// timed out. Read from the engine's error code, never from its message.
fn rolled_back(dialect: Dialect, e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = e else { return false };
    match dialect {
        Dialect::Postgres => match db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
            Some(pg) => matches!(pg.code(), "40001" | "40P01"),
            None => matches!(db.code().as_deref(), Some("40001" | "40P01")),
        },
        Dialect::MySql => match db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
            // ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT.
            Some(my) => matches!(my.number(), 1213 | 1205),
            None => db.code().as_deref() == Some("40001"),
        },
    }
}

/// Whether the engine refused because its server cannot take writes now:
/// it is a standby or was made read-only (PostgreSQL SQLSTATE 25006; MySQL
/// 1290 `--read-only`, 1792 a read-only transaction, 1836 read-only mode),
/// or it is shutting down or starting up (57P01, 57P02, 57P03; MySQL 1053).
/// Nothing was done (a refusal, not a broken link), and the session's server
/// may no longer be the one its address leads to.
pub(crate) fn off_primary(dialect: Dialect, e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(db) = e else { return false };
    match dialect {
        Dialect::Postgres => matches!(db.code().as_deref(), Some("25006" | "57P01" | "57P02" | "57P03")),
        Dialect::MySql => db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|my| matches!(my.number(), 1290 | 1792 | 1836 | 1053)),
    }
}

/// A driver error as a store error of this dialect's engine; one that says
/// the server cannot take writes now raises `fence`.
pub(crate) fn classify(dialect: Dialect, fence: &Fence, e: sqlx::Error) -> StoreError {
    if off_primary(dialect, &e) {
        fence.raise();
    }
    StoreError::Unavailable { engine: dialect.engine(), retryable: rolled_back(dialect, &e), source: Box::new(e) }
}

/// A driver's result as a store's: its error classified ([`classify`]) by
/// the store's dialect, raising its fence. What every call on the driver
/// outside the helpers below ends in.
pub(crate) trait OrUnavailable<T> {
    fn or_unavailable(self, store: &SqlStore) -> Result<T>;
}

impl<T> OrUnavailable<T> for std::result::Result<T, sqlx::Error> {
    fn or_unavailable(self, store: &SqlStore) -> Result<T> {
        self.map_err(|e| classify(store.dialect, &store.fence, e))
    }
}

/// Whether a failed call may have been acted on by the engine all the same:
/// the link broke (an I/O or protocol failure) after the request may have
/// gone out, so a commit may have happened whose answer was lost. An
/// engine's own refusal, or a pool with no session to lend, did nothing.
pub(crate) fn in_doubt(e: &StoreError) -> bool {
    let StoreError::Unavailable { source, .. } = e else { return false };
    matches!(
        source.downcast_ref::<sqlx::Error>(),
        Some(sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) | sqlx::Error::WorkerCrashed)
    )
}

/// Whether a unique index refused a row.
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.kind() == sqlx::error::ErrorKind::UniqueViolation)
}

/// Runs `attempt_once` (a whole transaction: begin, statements, commit)
/// again, after a short growing pause, while the engine rolls it back as
/// retryable (up to 5 times). The one retry loop of this store.
pub(crate) async fn retry_transaction<T, F, Fut>(mut attempt_once: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempt = 0;
    loop {
        match attempt_once().await {
            Err(e) if e.is_retryable() && attempt < RETRIES => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(2 << attempt)).await;
            }
            done => return done,
        }
    }
}

impl SqlStore {
    /// Maps a driver error of this store (a closure of its own, as callers
    /// may keep it beyond a borrow of the store).
    pub(crate) fn err(&self) -> impl Fn(sqlx::Error) -> StoreError + use<> {
        let (dialect, fence) = (self.dialect, std::sync::Arc::clone(&self.fence));
        move |e| classify(dialect, &fence, e)
    }

    /// Begins a transaction.
    pub(crate) async fn begin(&self) -> Result<Tx> {
        self.pool.begin().await.or_unavailable(self)
    }

    /// Commits a transaction.
    pub(crate) async fn commit(&self, tx: Tx) -> Result<()> {
        tx.commit().await.or_unavailable(self)
    }

    /// Runs `attempt_once` (a whole transaction) again while the engine
    /// rolls it back as retryable: [`retry_transaction`].
    pub(crate) async fn retrying<T, F, Fut>(&self, attempt_once: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        retry_transaction(attempt_once).await
    }

    /// Reads the rows of `sql` (with `?` placeholders) bound to `binds`.
    pub(crate) async fn fetch(&self, sql: &str, binds: &[i64]) -> Result<Vec<AnyRow>> {
        let binds: Vec<Bind<'_>> = binds.iter().map(|b| Bind::Int(*b)).collect();
        self.rows(sql, &binds).await
    }

    /// Reads the rows of `sql` (with `?` placeholders) bound to `binds`.
    pub(crate) async fn rows(&self, sql: &str, binds: &[Bind<'_>]) -> Result<Vec<AnyRow>> {
        let sql = self.q(sql);
        bound(&sql, binds).fetch_all(&self.pool).await.or_unavailable(self)
    }

    /// Runs `sql` (with `?` placeholders) bound to `binds` on the pool;
    /// the rows it changed.
    pub(crate) async fn exec(&self, sql: &str, binds: &[Bind<'_>]) -> Result<u64> {
        let sql = self.q(sql);
        Ok(bound(&sql, binds).execute(&self.pool).await.or_unavailable(self)?.rows_affected())
    }

    /// The rows of `sql` (with `?` placeholders) bound to `binds`, within `tx`.
    pub(crate) async fn rows_in(&self, tx: &mut Tx, sql: &str, binds: &[Bind<'_>]) -> Result<Vec<AnyRow>> {
        let sql = self.q(sql);
        bound(&sql, binds).fetch_all(&mut **tx).await.or_unavailable(self)
    }

    /// Runs `sql` (with `?` placeholders) bound to `binds` within `tx`; the
    /// rows it changed.
    pub(crate) async fn exec_in(&self, tx: &mut Tx, sql: &str, binds: &[Bind<'_>]) -> Result<u64> {
        let sql = self.q(sql);
        Ok(bound(&sql, binds).execute(&mut **tx).await.or_unavailable(self)?.rows_affected())
    }

    /// The first column of the first row of `sql`, as a count.
    pub(crate) async fn count(&self, sql: &str, binds: &[i64]) -> Result<u64> {
        let rows = self.fetch(sql, binds).await?;
        Ok(match rows.first() {
            Some(r) => int(r, 0)?.max(0) as u64,
            None => 0,
        })
    }
}

#[cfg(test)]
mod tests {
    //! Errors classified from real servers' codes: a deadlock provoked on
    //! each engine is retryable, a unique violation is recognised, and
    //! other errors are neither.

    use super::*;
    use crate::testing::FreshDatabase;
    use sqlx::{AnyConnection, Connection};

    async fn exec(c: &mut AnyConnection, sql: &str) -> std::result::Result<(), sqlx::Error> {
        sqlx::query(sql).execute(c).await.map(|_| ())
    }

    async fn classified_from_codes(var: &str) {
        let db = FreshDatabase::from_env(var).await;
        let dialect = Dialect::of_url(&db.url).expect("a SQL URL");
        sqlx::any::install_default_drivers();
        let mut a = AnyConnection::connect(&db.url).await.expect("connect");
        let mut b = AnyConnection::connect(&db.url).await.expect("connect");
        exec(&mut a, "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL)").await.expect("table");
        exec(&mut a, "INSERT INTO t (id, v) VALUES (1, 0), (2, 0)").await.expect("rows");

        let fence = Fence::new();
        let dup = exec(&mut a, "INSERT INTO t (id, v) VALUES (1, 0)").await.expect_err("a duplicate key");
        assert!(is_unique_violation(&dup), "{dup}");
        assert!(!classify(dialect, &fence, dup).is_retryable());
        let bad = exec(&mut a, "SELECT nothing FROM nowhere").await.expect_err("an unknown table");
        assert!(!is_unique_violation(&bad) && !off_primary(dialect, &bad));
        let bad = classify(dialect, &fence, bad);
        assert!(bad.is_unavailable() && !bad.is_retryable(), "{bad}");
        assert!(!fence.stale(Duration::from_secs(3600)), "no refusal said the server cannot take writes");

        // A write refused as a standby refuses it (here a read-only
        // transaction: the same code): unavailable, nothing done, and every
        // session opened before is stale.
        let read_only = match dialect {
            Dialect::Postgres => "BEGIN READ ONLY",
            Dialect::MySql => "START TRANSACTION READ ONLY",
        };
        exec(&mut a, read_only).await.expect("a read-only transaction");
        let refused = exec(&mut a, "INSERT INTO t (id, v) VALUES (3, 0)").await.expect_err("a read-only write");
        assert!(off_primary(dialect, &refused), "{refused}");
        let refused = classify(dialect, &fence, refused);
        assert!(refused.is_unavailable() && !refused.is_retryable() && !in_doubt(&refused), "{refused}");
        exec(&mut a, "ROLLBACK").await.expect("rollback");
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(fence.stale(Duration::from_secs(1)), "a session opened before the refusal is stale");
        assert!(!fence.stale(Duration::ZERO), "a session opened after it is not");

        // A deadlock: each transaction holds one row and asks for the other.
        exec(&mut a, "BEGIN").await.expect("begin");
        exec(&mut b, "BEGIN").await.expect("begin");
        exec(&mut a, "UPDATE t SET v = 1 WHERE id = 1").await.expect("a locks 1");
        exec(&mut b, "UPDATE t SET v = 1 WHERE id = 2").await.expect("b locks 2");
        let (ra, rb) = tokio::join!(
            exec(&mut a, "UPDATE t SET v = 2 WHERE id = 2"),
            exec(&mut b, "UPDATE t SET v = 2 WHERE id = 1")
        );
        let failed: Vec<sqlx::Error> = [ra, rb].into_iter().filter_map(|r| r.err()).collect();
        assert_eq!(failed.len(), 1, "exactly one side is chosen as the deadlock victim: {failed:?}");
        let victim = classify(dialect, &fence, failed.into_iter().next().expect("one"));
        assert!(victim.is_retryable(), "a deadlock is retryable: {victim}");
        let _ = exec(&mut a, "ROLLBACK").await;
        let _ = exec(&mut b, "ROLLBACK").await;
        let _ = a.close().await;
        let _ = b.close().await;
        db.drop().await.expect("drop the database");
    }

    #[tokio::test]
    async fn postgres_errors_are_classified_from_codes() {
        classified_from_codes("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test]
    async fn mysql_errors_are_classified_from_codes() {
        classified_from_codes("TIDEWAY_TEST_MYSQL_URL").await;
    }
}
