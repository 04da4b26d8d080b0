//! The durable half on real servers: every conformance suite against
//! PostgreSQL and MariaDB (with the shared half on Redis, as a scaled-out
//! node runs), each suite in a fresh database that is dropped after; the
//! schema checks at start. `scripts/services.sh up` starts the servers and
//! names them in TIDEWAY_TEST_POSTGRES_URL, TIDEWAY_TEST_MYSQL_URL and
//! TIDEWAY_TEST_REDIS_URL (scripts/test.sh does this).

use sqlx::Connection;
use std::sync::Arc;
use tideway_conformance::{INBOX_CAP, SUITES};
use tideway_store::{Split, StoreError};
use tideway_store_redis::{RedisOptions, RedisShared};
use tideway_store_sql::SqlStore;
use tideway_store_sql::testing::FreshDatabase;

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: start the engines with `eval \"$(scripts/services.sh up)\"` (scripts/test.sh does)")
    })
}

async fn redis() -> Arc<RedisShared> {
    let mut opts = RedisOptions::new(vec![env("TIDEWAY_TEST_REDIS_URL")], INBOX_CAP);
    opts.prefix = format!("sqltest{}:", rand::random::<u64>());
    Arc::new(RedisShared::connect(opts).await.expect("redis"))
}

async fn conforms(base: &str, name: &str) {
    for (suite, check) in SUITES {
        eprintln!("{name} + redis: {suite}");
        let db = FreshDatabase::create(base).await.expect("a fresh database");
        let sql = Arc::new(SqlStore::connect(&db.url).await.expect("connect"));
        let shared = redis().await;
        check(&Split::new(sql.clone(), shared.clone())).await;
        shared.purge().await.expect("purge");
        sql.close().await;
        db.drop().await.expect("drop the database");
    }
}

#[tokio::test]
async fn postgres_conforms() {
    conforms(&env("TIDEWAY_TEST_POSTGRES_URL"), "postgres").await;
}

#[tokio::test]
async fn mysql_conforms() {
    conforms(&env("TIDEWAY_TEST_MYSQL_URL"), "mariadb").await;
}

/// A second node on the same database applies no migration twice, and a
/// database of a newer schema is refused, naming the setting.
async fn schema_is_checked(base: &str) {
    let db = FreshDatabase::create(base).await.expect("a fresh database");
    let a = SqlStore::connect(&db.url).await.expect("first node");
    let b = SqlStore::connect(&db.url).await.expect("second node on a migrated database");
    b.close().await;
    let mut c = sqlx::AnyConnection::connect(&db.url).await.expect("connect");
    sqlx::query("INSERT INTO tw_schema (version) VALUES (999)").execute(&mut c).await.expect("bump");
    c.close().await.expect("close");
    match SqlStore::connect(&db.url).await {
        Ok(_) => panic!("a newer schema was accepted"),
        Err(StoreError::Io(m)) => {
            assert!(m.contains("TIDEWAY_STORAGE__URL") && m.contains("999"), "{m}");
        }
        Err(e) => panic!("{e}"),
    }
    a.close().await;
    db.drop().await.expect("drop the database");
}

#[tokio::test]
async fn postgres_schema_is_checked() {
    schema_is_checked(&env("TIDEWAY_TEST_POSTGRES_URL")).await;
}

#[tokio::test]
async fn mysql_schema_is_checked() {
    schema_is_checked(&env("TIDEWAY_TEST_MYSQL_URL")).await;
}

#[tokio::test]
async fn a_bad_url_is_refused_naming_the_setting() {
    for url in ["http://example/db", "postgres://nobody@127.0.0.1:1/db", "mysql://root@127.0.0.1:1/db"] {
        match SqlStore::connect(url).await {
            Ok(_) => panic!("{url} connected"),
            Err(e) => assert!(e.to_string().contains("TIDEWAY_STORAGE__URL"), "{url}: {e}"),
        }
    }
}
