//! The connections of a page's one statement (`pages.rs`), lent without the
//! pool's pings.
//!
//! sqlx's pool pings a connection when it lends it and again when it takes
//! it back (0.8: on every release, to flush what a cancelled call may have
//! left): two round trips beside the page's one, 12% of a node's CPU on a
//! warm page over HTTP (`perf`, docs/benchmarks.md). Here a connection is
//! lent as it is, and taken back only when its statement finished: a call
//! dropped midway (a request timeout) drops the connection it held, so no
//! connection with a half-read answer is ever lent again. A connection that
//! went away while idle (the database restarted, or closed it) shows as an
//! I/O error on its next statement, which is then run once more on a new
//! connection: page statements only read. A session opened before the
//! store's fence was raised (`session.rs`: a write found the server unable
//! to take writes, a failover under way) is closed instead of lent: reads
//! go to whichever server the address leads to now, not to the old one.

use crate::session::Fence;
use parking_lot::Mutex;
use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use sqlx::{Connection, Execute, Executor};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

pub(crate) struct PageConns {
    url: String,
    /// Its sessions' bounds (`session.rs`) are this dialect's.
    dialect: crate::Dialect,
    /// Run on each new session before it reads a page (its settings).
    setup: Vec<String>,
    /// Sessions not lent now, with when each was opened.
    idle: Mutex<Vec<(AnyConnection, Instant)>>,
    /// The store's: sessions opened before its last raise are not lent.
    fence: Arc<Fence>,
    /// One permit a session: at most this many at once.
    permits: Semaphore,
    /// How long a call waits for a permit before it fails (as the pool's
    /// `acquire_timeout`).
    wait: Duration,
}

impl PageConns {
    /// At most `max` sessions, each opened when first needed.
    pub(crate) fn new(
        url: &str,
        dialect: crate::Dialect,
        setup: Vec<String>,
        max: usize,
        wait: Duration,
        fence: Arc<Fence>,
    ) -> Self {
        let (url, idle) = (url.to_owned(), Mutex::new(Vec::new()));
        Self { url, dialect, setup, idle, fence, permits: Semaphore::new(max), wait }
    }

    /// An idle session opened after the fence's last raise, if any (the
    /// ones opened before are closed, without a word to their server).
    fn idle_session(&self) -> Option<(AnyConnection, Instant)> {
        let mut idle = self.idle.lock();
        while let Some((conn, opened)) = idle.pop() {
            if !self.fence.stale(opened.elapsed()) {
                return Some((conn, opened));
            }
        }
        None
    }

    /// A new session, set up; within the wait (a database that does not
    /// answer is as unavailable as a pool with no session free).
    async fn open(&self) -> sqlx::Result<(AnyConnection, Instant)> {
        let open = async {
            let opened = Instant::now();
            let mut conn = AnyConnection::connect(&self.url).await?;
            crate::session::bound(&mut conn, self.dialect).await?;
            for sql in &self.setup {
                conn.execute(sqlx::raw_sql(sql)).await?;
            }
            Ok((conn, opened))
        };
        tokio::time::timeout(self.wait, open).await.unwrap_or(Err(sqlx::Error::PoolTimedOut))
    }

    /// The rows of the statement `make` builds, run on a session: an idle
    /// one, or a new one. A session whose statement failed is closed (its
    /// state is in doubt; failures are rare); when it was an idle one, the
    /// statement is built and run once more on a new session.
    pub(crate) async fn fetch_all<'q, E>(&self, make: impl Fn() -> E) -> sqlx::Result<Vec<AnyRow>>
    where
        E: 'q + Execute<'q, sqlx::Any>,
    {
        let _permit = match tokio::time::timeout(self.wait, self.permits.acquire()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(sqlx::Error::PoolClosed),
            Err(_) => return Err(sqlx::Error::PoolTimedOut),
        };
        let held = self.idle_session();
        let reused = held.is_some();
        let (mut conn, mut opened) = match held {
            Some(c) => c,
            None => self.open().await?,
        };
        let mut answer = conn.fetch_all(make()).await;
        if reused && answer.is_err() {
            drop(conn);
            (conn, opened) = self.open().await?;
            answer = conn.fetch_all(make()).await;
        }
        if answer.is_ok() {
            self.idle.lock().push((conn, opened));
        }
        answer
    }

    /// Closes the idle sessions; calls after it fail (a session lent now
    /// is closed when the set is dropped).
    pub(crate) async fn close(&self) {
        self.permits.close();
        let idle = std::mem::take(&mut *self.idle.lock());
        for (conn, _) in idle {
            let _ = conn.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PageConns;
    use crate::session::Fence;
    use crate::testing::FreshDatabase;
    use sqlx::{Connection, Executor, Row};
    use std::sync::Arc;
    use std::time::Duration;

    fn dialect_of(url: &str) -> crate::Dialect {
        crate::Dialect::of_url(url).expect("a SQL URL")
    }

    /// The session's own id, as the server names it.
    async fn session(conns: &PageConns, sql: &str) -> i64 {
        let rows = conns.fetch_all(|| sqlx::raw_sql(sql)).await.expect("a page's read");
        rows[0].try_get::<i64, _>(0).expect("an id")
    }

    /// `me`: the statement answering the session's id; `kill`: the one that
    /// ends a session by id; `sleep`: one that takes two seconds.
    async fn sessions_are_lent_again_unless_in_doubt(var: &str, me: &str, kill: &str, sleep: &str) {
        let db = FreshDatabase::from_env(var).await;
        let fence = Arc::new(Fence::new());
        let conns = PageConns::new(&db.url, dialect_of(&db.url), vec![], 2, Duration::from_secs(3), fence.clone());
        // One session lent again and again, no ping between.
        let first = session(&conns, me).await;
        assert_eq!(session(&conns, me).await, first, "the idle session is lent again");
        // Ended by the server while idle (a restart, a timeout): the next
        // read is answered all the same, on a new session.
        let mut other = sqlx::AnyConnection::connect(&db.url).await.expect("connect");
        other.execute(sqlx::raw_sql(&kill.replace("{id}", &first.to_string()))).await.expect("kill");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = session(&conns, me).await;
        assert_ne!(second, first, "a new session after the old one was ended");
        // A read dropped midway (a request's timeout) drops its session:
        // its answer may be half read.
        let slow = conns.fetch_all(|| sqlx::raw_sql(sleep));
        assert!(tokio::time::timeout(Duration::from_millis(200), slow).await.is_err());
        assert!(conns.idle.lock().is_empty(), "the session of a dropped read is not kept");
        let third = session(&conns, me).await;
        assert_ne!(third, second);
        // Once the store's fence is raised (a write met a server that cannot
        // take writes: a failover under way), the sessions opened before it
        // are not lent again: a read goes through the address anew.
        assert_eq!(session(&conns, me).await, third, "lent again while no fence stands");
        fence.raise();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let fourth = session(&conns, me).await;
        assert_ne!(fourth, third, "a session opened before the fence is not lent");
        assert_eq!(session(&conns, me).await, fourth, "one opened after it is");
        // A statement the database refuses drops the session, and the
        // refusal is the answer (run once more on a new session first).
        let bad = conns.fetch_all(|| sqlx::raw_sql("SELECT no_such_column FROM no_such_table")).await;
        assert!(matches!(bad, Err(sqlx::Error::Database(_))), "{:?}", bad.err());
        assert!(conns.idle.lock().is_empty());
        // At most `max` sessions at once; the others wait (here past the
        // wait: a timeout, as the pool's).
        let short =
            PageConns::new(&db.url, dialect_of(&db.url), vec![], 1, Duration::from_millis(300), Arc::new(Fence::new()));
        let (held, waiting) = tokio::join!(short.fetch_all(|| sqlx::raw_sql(sleep)), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            short.fetch_all(|| sqlx::raw_sql(me)).await
        });
        assert!(held.is_ok());
        assert!(matches!(waiting, Err(sqlx::Error::PoolTimedOut)), "{:?}", waiting.err());
        conns.close().await;
        short.close().await;
        other.close().await.expect("close");
        db.drop().await.expect("drop");
    }

    #[tokio::test]
    async fn postgres_sessions_are_lent_again_unless_in_doubt() {
        sessions_are_lent_again_unless_in_doubt(
            "TIDEWAY_TEST_POSTGRES_URL",
            "SELECT pg_backend_pid()::int8",
            "SELECT pg_terminate_backend({id})",
            "SELECT pg_sleep(1)",
        )
        .await;
    }

    #[tokio::test]
    async fn mysql_sessions_are_lent_again_unless_in_doubt() {
        sessions_are_lent_again_unless_in_doubt(
            "TIDEWAY_TEST_MYSQL_URL",
            "SELECT CAST(CONNECTION_ID() AS SIGNED)",
            "KILL {id}",
            "SELECT SLEEP(1)",
        )
        .await;
    }
}
