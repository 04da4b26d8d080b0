//! Fresh databases for tests and benchmarks: each gets a database of its
//! own on a shared server, dropped when done, so runs never see each other.

use sqlx::Connection;
use tideway_store::{Result, StoreError};

fn io(e: sqlx::Error) -> StoreError {
    StoreError::unavailable(tideway_store::Engine::Postgres, e)
}

/// A new, empty database on the server of `base` (a URL naming any
/// existing database); [`FreshDatabase::drop`] removes it.
pub struct FreshDatabase {
    base: String,
    name: String,
    /// The URL of the new database.
    pub url: String,
}

impl FreshDatabase {
    pub async fn create(base: &str) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let name = format!("tw_test_{:016x}", rand_u64());
        let mut c = sqlx::AnyConnection::connect(base).await.map_err(io)?;
        sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut c).await.map_err(io)?;
        c.close().await.map_err(io)?;
        let (server, _) = base
            .rsplit_once('/')
            .ok_or_else(|| StoreError::config("the test database URL", format!("{base:?} names no database")))?;
        Ok(Self { base: base.to_owned(), url: format!("{server}/{name}"), name })
    }

    /// A new database on the server named by the environment variable
    /// `var` (a test's engine, from `scripts/services.sh up`). Panics when
    /// it is not set or the database cannot be made: for tests only.
    pub async fn from_env(var: &str) -> Self {
        let Ok(base) = std::env::var(var) else {
            panic!("{var} is not set: start the engines with `eval \"$(scripts/services.sh up)\"`")
        };
        Self::create(&base).await.expect("a fresh database")
    }

    /// Runs statements on the new database, in order, on one connection (bulk
    /// loads of tests and benchmarks: rows written as a migration would).
    pub async fn execute(&self, statements: &[String]) -> Result<()> {
        let mut c = sqlx::AnyConnection::connect(&self.url).await.map_err(io)?;
        for stmt in statements {
            sqlx::query(stmt).execute(&mut c).await.map_err(io)?;
        }
        c.close().await.map_err(io)
    }

    /// The statements that make `n` users, `first..first + n`, follow `star`
    /// (PostgreSQL: `generate_series`). `since` is the follow time as SQL over
    /// the follower `g`: a constant, or `g` itself (a spread of times).
    pub fn followers_sql(star: u64, first: u64, n: u64, since: &str) -> Vec<String> {
        let last = first + n - 1;
        vec![
            format!(
                "INSERT INTO tw_follows (follower, followee, since) SELECT g, {star}, {since} FROM generate_series({first}, {last}) g"
            ),
            format!(
                "INSERT INTO tw_followers (followee, since, follower) SELECT {star}, {since}, g FROM generate_series({first}, {last}) g"
            ),
            format!("INSERT INTO tw_users (id, following) SELECT g, 1 FROM generate_series({first}, {last}) g"),
            format!("INSERT INTO tw_users (id, followers) VALUES ({star}, {n})"),
            "ANALYZE".to_owned(),
        ]
    }

    /// Drops the database (its connections must be closed first on MySQL;
    /// PostgreSQL's are closed by force).
    pub async fn drop(self) -> Result<()> {
        let mut c = sqlx::AnyConnection::connect(&self.base).await.map_err(io)?;
        let force = if self.base.starts_with("postgres") { " WITH (FORCE)" } else { "" };
        sqlx::query(&format!("DROP DATABASE {}{force}", self.name)).execute(&mut c).await.map_err(io)?;
        c.close().await.map_err(io)?;
        Ok(())
    }
}

/// A random number for names, from the clock and the process (no RNG crate
/// needed for this).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    h.finish()
}
