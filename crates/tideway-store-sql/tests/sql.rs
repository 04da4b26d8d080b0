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

/// `$check` against each engine's server (`TIDEWAY_TEST_POSTGRES_URL`,
/// `TIDEWAY_TEST_MYSQL_URL`), as one test each, under the test attribute
/// given (`#[tokio::test]` when none is).
macro_rules! on_both_engines {
    ($check:ident: $pg:ident, $my:ident) => {
        on_both_engines!(#[tokio::test] $check: $pg, $my);
    };
    (#[$test:meta] $check:ident: $pg:ident, $my:ident) => {
        #[$test]
        async fn $pg() {
            $check(&env("TIDEWAY_TEST_POSTGRES_URL")).await;
        }
        #[$test]
        async fn $my() {
            $check(&env("TIDEWAY_TEST_MYSQL_URL")).await;
        }
    };
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
        Err(e @ StoreError::Config { .. }) => {
            let m = e.to_string();
            assert!(m.contains("TIDEWAY_STORAGE__URL") && m.contains("999"), "{m}");
        }
        Err(e) => panic!("{e}"),
    }
    a.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(schema_is_checked: postgres_schema_is_checked, mysql_schema_is_checked);

#[tokio::test]
async fn a_bad_url_is_refused_naming_the_setting() {
    for url in ["http://example/db", "postgres://nobody@127.0.0.1:1/db", "mysql://root@127.0.0.1:1/db"] {
        match SqlStore::connect(url).await {
            Ok(_) => panic!("{url} connected"),
            Err(e) => assert!(e.to_string().contains("TIDEWAY_STORAGE__URL"), "{url}: {e}"),
        }
    }
}

/// Reposts of one item by one user sent to several nodes at once: exactly one
/// is stored, the others answer with it.
async fn one_live_repost(base: &str) {
    use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};
    use tideway_store::{CreateOutcome, Items};
    let db = FreshDatabase::create(base).await.expect("a fresh database");
    let original = Item::new(ItemId(1 << 22), UserId(1), ItemKind::Post);
    let first = SqlStore::connect(&db.url).await.expect("connect");
    first.create_item(original, false, Millis(1)).await.expect("original");
    let mut racers = tokio::task::JoinSet::new();
    for n in 0..12u64 {
        let url = db.url.clone();
        racers.spawn(async move {
            let node = SqlStore::connect(&url).await.expect("connect");
            let repost = Item {
                repost_of: Some(ItemId(1 << 22)),
                ..Item::new(ItemId((2 + n) << 22), UserId(2), ItemKind::Post)
            };
            let out = node.create_item(repost, false, Millis(2)).await.expect("repost");
            node.close().await;
            out
        });
    }
    let mut created = 0;
    while let Some(out) = racers.join_next().await {
        match out.expect("task") {
            CreateOutcome::Created(_) => created += 1,
            CreateOutcome::AlreadyReposted(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(created, 1, "one live repost per user and item");
    first.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    one_live_repost: postgres_keeps_one_live_repost, mysql_keeps_one_live_repost
);

/// A fresh database with the schema at `version`, and a connection to it.
async fn at_version(base: &str, version: i64) -> (FreshDatabase, sqlx::AnyConnection) {
    use tideway_store_sql::{Dialect, schema};
    let dialect = Dialect::of_url(base).expect("a SQL URL");
    let db = FreshDatabase::create(base).await.expect("a fresh database");
    let mut c = sqlx::AnyConnection::connect(&db.url).await.expect("connect");
    sqlx::query("CREATE TABLE tw_schema (version BIGINT NOT NULL)").execute(&mut c).await.expect("schema table");
    for (v, stmts) in schema::MIGRATIONS.iter().filter(|(v, _)| *v <= version) {
        for s in stmts.iter().filter_map(|s| schema::render(s, dialect)) {
            sqlx::query(&s).execute(&mut c).await.unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
        sqlx::query(&format!("INSERT INTO tw_schema (version) VALUES ({v})")).execute(&mut c).await.expect("v");
    }
    (db, c)
}

/// An item's record as the store writes it (JSON, without its body).
fn record_of(item: tideway_core::Item) -> String {
    serde_json::to_string(&item).expect("json").replace('\'', "''")
}

/// A database at schema version 6 with items in it is upgraded: every item
/// stored before is posted to its mention, tag and object feeds (their
/// fields are inside the records), and later items are posted as written.
async fn upgrade_posts_items(base: &str) {
    use tideway_core::merge::{Direction, KeyRange};
    use tideway_core::{Item, ItemId, ItemKind, ObjectRef, PostingFeed, UserId};
    use tideway_store::{Items, Postings};
    let (db, mut c) = at_version(base, 6).await;
    for id in 1..=5u64 {
        let mut item =
            Item::new(ItemId(id), UserId(10 + id % 2), if id == 4 { ItemKind::Repost } else { ItemKind::Post });
        item.tags = if id % 2 == 1 { vec!["rust".into()] } else { vec!["db".into()] };
        item.mentions = vec![UserId(7)];
        item.object = (id < 3).then(|| ObjectRef { kind: "book".into(), id: "1".into() });
        let record = record_of(item);
        sqlx::query(&format!(
            "INSERT INTO tw_items (id, author, live, record, body) VALUES ({id}, {}, 1, '{record}', '{{}}')",
            10 + id % 2
        ))
        .execute(&mut c)
        .await
        .expect("item");
    }
    c.close().await.expect("close");
    let store = SqlStore::connect(&db.url).await.expect("upgrade");
    let feed =
        async |f: PostingFeed| store.postings(f.id(), KeyRange::ALL, Direction::Older, 10).await.expect("postings");
    assert_eq!(feed(PostingFeed::Tag("rust".into())).await, vec![5, 3, 1]);
    assert_eq!(feed(PostingFeed::Tag("db".into())).await, vec![2], "a repost is not posted");
    assert_eq!(feed(PostingFeed::Mentions(UserId(7))).await, vec![5, 3, 2, 1]);
    assert_eq!(feed(PostingFeed::Object { kind: "book".into(), id: "1".into() }).await, vec![2, 1]);
    let mut later = Item::new(ItemId(9), UserId(10), ItemKind::Post);
    later.tags = vec!["rust".into()];
    store.create_item(later, false, tideway_core::Millis(9)).await.expect("create");
    assert_eq!(feed(PostingFeed::Tag("rust".into())).await, vec![9, 5, 3, 1]);
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(upgrade_posts_items: postgres_upgrade_posts_items, mysql_upgrade_posts_items);

/// A database at schema version 4 with replies, reposts and reactions is
/// upgraded: the counts a page reads are kept from then on, starting from
/// what the rows say (deleted replies and reposts not counted).
async fn upgrade_counts_items(base: &str) {
    use tideway_core::{ItemId, UserId};
    use tideway_store::{ItemCounts, Items};
    let (db, mut c) = at_version(base, 4).await;
    for (id, live, repost_of, reply_to) in
        [(1, 1, "NULL", "NULL"), (2, 1, "NULL", "1"), (3, 0, "NULL", "1"), (4, 1, "1", "NULL"), (5, 0, "1", "NULL")]
    {
        let record = record_of(tideway_core::Item::new(ItemId(id), UserId(id), tideway_core::ItemKind::Post));
        sqlx::query(&format!(
            "INSERT INTO tw_items (id, author, live, repost_of, reply_to, record, body) \
             VALUES ({id}, {id}, {live}, {repost_of}, {reply_to}, '{record}', '{{}}')"
        ))
        .execute(&mut c)
        .await
        .expect("item");
    }
    for (user, kind) in [(5, "like"), (6, "like"), (6, "wow")] {
        sqlx::query(&format!("INSERT INTO tw_reactions (item, user_id, kind) VALUES (1, {user}, '{kind}')"))
            .execute(&mut c)
            .await
            .expect("reaction");
    }
    c.close().await.expect("close");
    let store = SqlStore::connect(&db.url).await.expect("upgrade");
    let counts = |replies, reposts, reactions: &[(&str, u64)]| ItemCounts {
        replies,
        reposts,
        reactions: reactions.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect(),
    };
    let h = store.hydration(&[ItemId(1)], None).await.expect("hydration");
    assert_eq!(h[0].0, counts(1, 1, &[("like", 2), ("wow", 1)]), "the counts the rows say");
    assert!(store.set_reaction(ItemId(1), UserId(7), "wow", true).await.expect("react"));
    let h = store.hydration(&[ItemId(1)], None).await.expect("hydration");
    assert_eq!(h[0].0, counts(1, 1, &[("like", 2), ("wow", 2)]), "kept by the writes after the upgrade");
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(upgrade_counts_items: postgres_upgrade_counts_items, mysql_upgrade_counts_items);

/// A database at schema version 3 with follows in it is upgraded: the graph
/// moves into 16 partitions by user id, both ways, and every follow is still
/// there, from both sides.
async fn upgrade_partitions_the_graph(base: &str) {
    use tideway_core::{Millis, UserId};
    use tideway_store::{Graph, ListKind};
    use tideway_store_sql::Dialect;
    let dialect = Dialect::of_url(base).expect("a SQL URL");
    let (db, mut c) = at_version(base, 3).await;
    for (f, t) in [(1, 2), (1, 3), (4, 2)] {
        sqlx::query(&format!("INSERT INTO tw_follows (follower, followee, since) VALUES ({f}, {t}, {f}{t})"))
            .execute(&mut c)
            .await
            .expect("follow");
        sqlx::query(&format!("INSERT INTO tw_followers (followee, since, follower) VALUES ({t}, {f}{t}, {f})"))
            .execute(&mut c)
            .await
            .expect("follower");
    }
    let store = SqlStore::connect(&db.url).await.expect("upgrade");
    let partitions = match dialect {
        Dialect::Postgres => {
            "SELECT COUNT(*) FROM pg_inherits WHERE inhparent IN ('tw_follows'::regclass, 'tw_followers'::regclass)"
        }
        Dialect::MySql => {
            "SELECT COUNT(*) FROM information_schema.partitions WHERE table_schema = DATABASE() \
             AND table_name IN ('tw_follows', 'tw_followers') AND partition_name IS NOT NULL"
        }
    };
    let n: i64 = sqlx::Row::get(&sqlx::query(partitions).fetch_one(&mut c).await.expect("partitions"), 0);
    assert_eq!(n, 32, "16 partitions each way");
    c.close().await.expect("close");
    assert_eq!(store.followees(UserId(1)).await.expect("followees"), vec![UserId(2), UserId(3)]);
    let followers = store.list(UserId(2), ListKind::Followers, None, 10).await.expect("followers");
    assert_eq!(followers, vec![(UserId(4), Millis(42)), (UserId(1), Millis(12))], "newest first");
    assert_eq!(store.followers_chunk(UserId(2), None, 10).await.expect("chunk").len(), 2);
    store.follow_many(UserId(5), &[UserId(2)], Millis(99), 10).await.expect("a follow after the upgrade");
    assert_eq!(store.followers_chunk(UserId(2), None, 10).await.expect("chunk").len(), 3);
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(upgrade_partitions_the_graph: postgres_upgrade_partitions_the_graph, mysql_upgrade_partitions_the_graph);
