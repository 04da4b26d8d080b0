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

/// A viewer with more blocks, blockers and mutes than a page's statement
/// reads whole (up to 1,000 of each) still gets every
/// relation a page asks for, the reposters found included; and a viewer
/// with 1,500 insertions, those of the batch's originals (a statement that
/// read a viewer's insertions whole, capped as the relations are, would
/// need its list after).
async fn many_blocks(base: &str) {
    use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};
    use tideway_store::{Graph, Items, PageQuery, Pages};
    let db = FreshDatabase::create(base).await.expect("a fresh database");
    let store = SqlStore::connect(&db.url).await.expect("connect");
    let viewer = UserId(1);
    // 1,500 blocks of the viewer and as many blockers, written as rows.
    let mut c = sqlx::AnyConnection::connect(&db.url).await.expect("connect");
    let blocks: Vec<String> = (10_000..11_500).map(|t| format!("(1, {t}, 1)")).collect();
    let blockers: Vec<String> = (20_000..21_500).map(|t| format!("({t}, 1, 1)")).collect();
    let mutes: Vec<String> = (30_000..31_500).map(|t| format!("(1, {t}, 1)")).collect();
    // 1,500 items inserted into the viewer's home, and one of the page's
    // originals (after them in item order).
    let mut inserts: Vec<String> = (0..1500u64).map(|i| format!("({}, 1, {})", 1000 + i, 100_000 + i)).collect();
    inserts.push("(7, 1, 200000)".to_owned());
    sqlx::query(&format!("INSERT INTO tw_inserts (k, user_id, item) VALUES {}", inserts.join(", ")))
        .execute(&mut c)
        .await
        .expect("insertions");
    for (table, rows) in [("tw_blocks", &blocks), ("tw_blocks", &blockers), ("tw_mutes", &mutes)] {
        sqlx::query(&format!("INSERT INTO {table} (user_id, target, since) VALUES {}", rows.join(", ")))
            .execute(&mut c)
            .await
            .expect("rows");
    }
    c.close().await.expect("close");
    // An original by a blocked author, reposted by a muted followee.
    store.follow_many(viewer, &[UserId(31_499)], Millis(1), 100).await.expect("follow");
    let original = Item::new(ItemId(500), UserId(11_499), ItemKind::Post);
    store.create_item(original, false, Millis(500)).await.expect("original");
    let mut repost = Item::new(ItemId(501), UserId(31_499), ItemKind::Repost);
    repost.repost_of = Some(ItemId(500));
    store.create_item(repost, false, Millis(501)).await.expect("repost");
    let related = [UserId(11_499), UserId(21_499), UserId(5)];
    let q = PageQuery {
        originals: &[ItemId(500), ItemId(200_000)],
        reposters: &[UserId(31_499)],
        inserts_of: Some(viewer),
        viewer: Some(viewer),
        related: &related,
        follows_known: true,
        ..PageQuery::default()
    };
    let f = store.page_facts(&q).await.expect("page_facts");
    let who: Vec<UserId> = f.relations.iter().map(|(u, _)| *u).collect();
    assert_eq!(who, vec![UserId(11_499), UserId(21_499), UserId(5), UserId(31_499)]);
    let r: Vec<(bool, bool, bool)> = f.relations.iter().map(|(_, r)| (r.blocking, r.blocked_by, r.muting)).collect();
    assert_eq!(r, vec![(true, false, false), (false, true, false), (false, false, false), (false, false, true)]);
    assert_eq!(f.inserted, vec![None, Some(7)]);
    assert_eq!(f.reposts, vec![vec![(UserId(31_499), ItemId(501))], vec![]]);
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(many_blocks: postgres_pages_tell_relations_past_many_blocks, mysql_pages_tell_relations_past_many_blocks);

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
    assert!(store.set_reaction(ItemId(1), UserId(7), "wow", true, &[]).await.expect("react"));
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

/// A database at schema version 7 is upgraded with the notification tables:
/// events gather, a page shows them, a mark counts them as read.
async fn upgrade_adds_notifications(base: &str) {
    use tideway_core::notify::{Mark, Notice, Op, Verb};
    use tideway_core::{ItemId, Millis, UserId};
    use tideway_store::Notifications;
    let (db, c) = at_version(base, 7).await;
    c.close().await.expect("close");
    let store = SqlStore::connect(&db.url).await.expect("upgrade");
    let like = |actor: u64, at: i64| Op::Stand {
        notice: Notice {
            user: UserId(1),
            verb: Verb::Reaction { item: ItemId(9), kind: "like".into() },
            actor: UserId(actor),
            at: Millis(at),
            stands: true,
            about: Some(ItemId(9)),
        },
        open: 100 + actor,
    };
    store.notify(&[like(2, 10), like(3, 20)]).await.expect("notify");
    let p = store.notifications(UserId(1), None, 10).await.expect("page");
    assert_eq!(p.groups.iter().map(|g| (g.id, g.actor_count, g.latest_at)).collect::<Vec<_>>(), [(102, 2, Millis(20))]);
    assert_eq!(p.unread, 1);
    assert!(store.mark_notifications(UserId(1), Mark::Read, None).await.expect("mark"));
    assert_eq!(store.notifications(UserId(1), None, 10).await.expect("page").unread, 0);
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(upgrade_adds_notifications: postgres_upgrade_adds_notifications, mysql_upgrade_adds_notifications);

/// A database at schema version 8 is upgraded with the live session
/// tables: a session is created, started, ended and read back.
async fn upgrade_adds_live_sessions(base: &str) {
    use tideway_core::live::{Move, Phase, Session};
    use tideway_core::{Millis, UserId};
    use tideway_store::{Live, Moved};
    let (db, c) = at_version(base, 8).await;
    c.close().await.expect("close");
    let store = SqlStore::connect(&db.url).await.expect("upgrade");
    assert!(
        store.create_session(Session::new(77, UserId(1), Millis(10), Default::default()), 5).await.expect("create")
    );
    assert!(matches!(store.move_session(77, Move::Start, Millis(20)).await.expect("start"), Moved::Done(_)));
    assert!(matches!(store.move_session(77, Move::End, Millis(30)).await.expect("end"), Moved::Done(_)));
    let ended = store.ended_sessions(&[UserId(1)], (Millis(i64::MAX), 0), 5).await.expect("ended");
    assert_eq!(ended.iter().map(|s| (s.id, s.phase())).collect::<Vec<_>>(), [(77, Phase::Replay)]);
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(upgrade_adds_live_sessions: postgres_upgrade_adds_live_sessions, mysql_upgrade_adds_live_sessions);

/// Random notification ops, marks and pages, on the engine and on the
/// embedded engines' `Book` side by side: every page (with its marks and
/// counts) and every mark's answer is the same. Event times go back and
/// forth, so a group's newest event leaves it in every way.
async fn notifications_agree_with_the_book(base: &str) {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, HashSet};
    use tideway_core::notify::{Mark, Notice, Op, Verb};
    use tideway_core::{ItemId, Millis, UserId};
    use tideway_store::notebook::Book;
    use tideway_store::{Graph, Notifications};
    let db = FreshDatabase::create(base).await.expect("a fresh database");
    let store = SqlStore::connect(&db.url).await.expect("connect");
    let mut books: BTreeMap<u64, Book> = BTreeMap::new();
    let mut muted: HashSet<(u64, u64)> = HashSet::new();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut next_id = 1000u64;
    let mut sent: Vec<Op> = Vec::new();
    let mut forgotten: HashSet<(u64, u64)> = HashSet::new();
    let users = [1u64, 2];
    for step in 0..400 {
        let verb = |rng: &mut SmallRng| match rng.random_range(0..5) {
            0 => Verb::Follow,
            1 => Verb::Reaction {
                item: ItemId(rng.random_range(1..4)),
                kind: ["like", "wow"][rng.random_range(0..2)].into(),
            },
            2 => Verb::Repost { item: ItemId(rng.random_range(1..4)) },
            3 => Verb::Reply { item: ItemId(rng.random_range(10..14)) },
            _ => Verb::Mention { item: ItemId(rng.random_range(20..24)) },
        };
        let user = users[rng.random_range(0..users.len())];
        let actor = rng.random_range(10..17u64);
        match rng.random_range(0..20) {
            0..=11 => {
                // A call of 1 to 3 ops, for either user.
                let mut ops = Vec::new();
                for _ in 0..rng.random_range(1..4) {
                    let user = users[rng.random_range(0..users.len())];
                    let actor = rng.random_range(10..17u64);
                    let v = verb(&mut rng);
                    ops.push(match rng.random_range(0..10) {
                        0..=5 => {
                            next_id += 1;
                            let about = match &v {
                                Verb::Reaction { item, .. } | Verb::Repost { item } => Some(*item),
                                Verb::Reply { .. } => Some(ItemId(rng.random_range(1..4))),
                                _ => None,
                            };
                            let at = Millis(rng.random_range(0..60) * 10);
                            let notice =
                                Notice { user: UserId(user), verb: v, actor: UserId(actor), at, stands: true, about };
                            // Now and then an op sent before, sent again (its
                            // group may exist, emptied, or have newer ones);
                            // not about an item forgotten since (the Book
                            // forgets which groups were about it: a second
                            // Forget would not reach the event).
                            let again = match sent.len() {
                                n if n > 0 && rng.random_range(0..6) == 0 => Some(sent[rng.random_range(0..n)].clone()),
                                _ => None,
                            };
                            let op = match again {
                                Some(Op::Stand { notice: n, open })
                                    if !n.about.is_some_and(|i| forgotten.contains(&(n.user.0, i.0))) =>
                                {
                                    Op::Stand { notice: n, open }
                                }
                                _ => Op::Stand { notice, open: next_id },
                            };
                            sent.push(op.clone());
                            op
                        }
                        6..=7 => Op::Fall {
                            user: UserId(user),
                            verb: v,
                            actor: UserId(actor),
                            // Mostly at or after the event's time (it falls), now and then before.
                            at: Millis(rng.random_range(0..70) * 10),
                        },
                        8 => {
                            let item = rng.random_range(1..4);
                            forgotten.insert((user, item));
                            Op::Forget { user: UserId(user), item: ItemId(item) }
                        }
                        _ => Op::Hide { user: UserId(user), actor: UserId(actor), hidden: rng.random_bool(0.5) },
                    });
                }
                store.notify(&ops).await.expect("notify");
                for op in &ops {
                    let u = op.user().0;
                    let book = books.entry(u).or_default();
                    book.apply(op, |a| muted.contains(&(u, a.0)), &mut Vec::new());
                }
            }
            12..=13 => {
                let on = rng.random_bool(0.5);
                store.set_mute(UserId(user), UserId(actor), on, Millis(1)).await.expect("mute");
                if on {
                    muted.insert((user, actor));
                } else {
                    muted.remove(&(user, actor));
                }
            }
            _ => {
                let mark = if rng.random_bool(0.5) { Mark::Seen } else { Mark::Read };
                let up_to = match rng.random_range(0..3) {
                    0 => None,
                    _ => Some(next_id - rng.random_range(0..40)),
                };
                let got = store.mark_notifications(UserId(user), mark, up_to).await.expect("mark");
                let book = books.entry(user).or_default();
                let want = match up_to {
                    Some(id) if !book.has_group(id) => false,
                    _ => {
                        if let Some(to) = book.mark_target(up_to) {
                            book.mark(UserId(user), mark, to, &mut Vec::new());
                        }
                        true
                    }
                };
                assert_eq!(got, want, "step {step}: mark {mark:?} up to {up_to:?} of {user}");
            }
        }
        for u in users {
            let book = books.entry(u).or_default();
            let want = book.page(None, 100);
            assert_eq!(store.notifications(UserId(u), None, 100).await.expect("page"), want, "step {step}: user {u}");
            // A page below a cursor in the middle.
            if let Some(g) = want.groups.get(want.groups.len() / 2) {
                let before = Some((g.latest_at, g.id));
                let got = store.notifications(UserId(u), before, 3).await.expect("page");
                assert_eq!(got, book.page(before, 3), "step {step}: user {u} below {before:?}");
            }
        }
    }
    assert!(books.values().map(|b| b.page(None, 100).groups.len()).sum::<usize>() > 5, "the run made groups");
    store.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(
    notifications_agree_with_the_book: postgres_notifications_agree_with_the_book,
    mysql_notifications_agree_with_the_book
);

/// Likes of one item sent to several nodes at once, for a user with no
/// notifications yet: one group holds them all, counted once as unread.
async fn one_group_of_racing_likes(base: &str) {
    use tideway_core::notify::{Notice, Op, Verb};
    use tideway_core::{ItemId, Millis, UserId};
    use tideway_store::Notifications;
    let db = FreshDatabase::create(base).await.expect("a fresh database");
    let first = SqlStore::connect(&db.url).await.expect("connect");
    let mut racers = tokio::task::JoinSet::new();
    for n in 0..12u64 {
        let url = db.url.clone();
        racers.spawn(async move {
            let node = SqlStore::connect(&url).await.expect("connect");
            let notice = Notice {
                user: UserId(1),
                verb: Verb::Reaction { item: ItemId(9), kind: "like".into() },
                actor: UserId(10 + n),
                at: Millis(100 + n as i64),
                stands: true,
                about: Some(ItemId(9)),
            };
            node.notify(&[Op::Stand { notice, open: 1000 + n }]).await.expect("notify");
            node.close().await;
        });
    }
    while let Some(done) = racers.join_next().await {
        done.expect("task");
    }
    let p = first.notifications(UserId(1), None, 10).await.expect("page");
    assert_eq!(p.groups.len(), 1, "{p:?}");
    assert_eq!((p.groups[0].actor_count, p.groups[0].latest_at, p.unread, p.unseen), (12, Millis(111), 1, 1));
    assert_eq!(p.groups[0].actors, [21, 20, 19, 18, 17].map(UserId));
    first.close().await;
    db.drop().await.expect("drop the database");
}

on_both_engines!(
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    one_group_of_racing_likes: postgres_makes_one_group_of_racing_likes, mysql_makes_one_group_of_racing_likes
);
