//! The lock per group key on real servers: a transaction left open
//! holding one key's notification (as a node cut off mid-write leaves
//! it) holds no other key of that user, nor their marks; and the counts
//! stay exact through writes and marks at once from two nodes.

use crate::SqlStore;
use crate::testing::FreshDatabase;
use std::time::Duration;
use tideway_core::notify::{Mark, Notice, Op, Verb};
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::Notifications;

/// Far below the lock wait (`session::LOCK_WAIT`, 5 s): a write that
/// took longer waited on the held lock.
const PROMPT: Duration = Duration::from_secs(2);

/// `call`'s answer, which came well within the lock wait.
async fn prompt<T>(what: &str, call: impl std::future::Future<Output = tideway_store::Result<T>>) -> T {
    match tokio::time::timeout(PROMPT, call).await {
        Ok(answer) => answer.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => panic!("{what} waited on the held key"),
    }
}

fn like(user: u64, item: u64, actor: u64, at: i64, open: u64) -> Op {
    let notice = Notice {
        user: UserId(user),
        verb: Verb::Reaction { item: ItemId(item), kind: "like".into() },
        actor: UserId(actor),
        at: Millis(at),
        stands: true,
        about: Some(ItemId(item)),
    };
    Op::Stand { notice, open }
}

async fn a_held_key_holds_only_itself(var: &str) {
    let db = FreshDatabase::from_env(var).await;
    let (cut, healthy) =
        (SqlStore::connect(&db.url).await.expect("connect"), SqlStore::connect(&db.url).await.expect("connect"));
    let owner = UserId(1);
    // The cut node's like of item 9 (key A): written, not committed.
    let mut held = cut.begin().await.expect("begin");
    cut.notify_in(&mut held, &[like(1, 9, 10, 300, 100)]).await.expect("a like, held");

    // The healthy node's like of item 8 (key B) of the same owner, its
    // page and both marks answer at once.
    if std::env::var("DEBUG_LOCKS").is_ok() {
        let url = db.url.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            use sqlx::{Connection, Row};
            let mut c = sqlx::AnyConnection::connect(&url).await.expect("c");
            let r = sqlx::query("SHOW ENGINE INNODB STATUS").fetch_one(&mut c).await.expect("st");
            let st: String = r.try_get(2).expect("s");
            eprintln!("{st}");
        });
    }
    prompt("a like of another key", healthy.notify(&[like(1, 8, 11, 200, 101)])).await;
    let page = prompt("a page", healthy.notifications(owner, None, 10)).await;
    assert_eq!((page.groups.len(), page.unseen, page.unread), (1, 1, 1), "{page:?}");
    assert!(prompt("a seen mark", healthy.mark_notifications(owner, Mark::Seen, None)).await);

    // A like of the held key waits for it (the lock is real) …
    let same = {
        let url = db.url.clone();
        tokio::spawn(async move {
            let node = SqlStore::connect(&url).await.expect("connect");
            let r = node.notify(&[like(1, 9, 12, 310, 102)]).await;
            node.close().await;
            r
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!same.is_finished(), "a like of the held key went past its lock");
    // … and joins the held like's group once it commits.
    cut.commit(held).await.expect("commit the held like");
    same.await.expect("task").expect("the like of the held key");

    let page = healthy.notifications(owner, None, 10).await.expect("page");
    let shown: Vec<(u64, Vec<UserId>, Millis)> =
        page.groups.iter().map(|g| (g.actor_count, g.actors.clone(), g.latest_at)).collect();
    assert_eq!(shown, [(2, vec![UserId(12), UserId(10)], Millis(310)), (1, vec![UserId(11)], Millis(200))], "{page:?}");
    // Seen up to 200: the group at 310 is unseen; nothing is read.
    assert_eq!((page.seen, page.unseen, page.unread), (Millis(200), 1, 2), "{page:?}");
    assert!(healthy.mark_notifications(owner, Mark::Read, None).await.expect("read"));
    let page = cut.notifications(owner, None, 10).await.expect("page");
    assert_eq!((page.read, page.unseen, page.unread), (Millis(310), 1, 0), "{page:?}");
    cut.close().await;
    healthy.close().await;
    db.drop().await.expect("drop the database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_held_notification_key_holds_only_itself() {
    a_held_key_holds_only_itself("TIDEWAY_TEST_POSTGRES_URL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_held_notification_key_holds_only_itself() {
    a_held_key_holds_only_itself("TIDEWAY_TEST_MYSQL_URL").await;
}

/// Writers on two nodes like and unlike items of one owner while marks
/// move: once they are done, each count is the number of shown groups
/// above its mark.
async fn counts_stay_exact_at_once(var: &str) {
    let db = FreshDatabase::from_env(var).await;
    let nodes = [
        std::sync::Arc::new(SqlStore::connect(&db.url).await.expect("connect")),
        std::sync::Arc::new(SqlStore::connect(&db.url).await.expect("connect")),
    ];
    let owner = UserId(1);
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..4u64 {
        let node = nodes[w as usize % 2].clone();
        writers.spawn(async move {
            for n in 0..60u64 {
                let (item, actor, at) = (1 + (n * 7 + w) % 6, 10 + (n + w * 3) % 8, (w * 1000 + n * 10) as i64);
                let op = match (n + w) % 5 {
                    0 => Op::Fall {
                        user: owner,
                        verb: Verb::Reaction { item: ItemId(item), kind: "like".into() },
                        actor: UserId(actor),
                        at: Millis(i64::MAX),
                    },
                    _ => like(1, item, actor, at, 10_000 * (w + 1) + n),
                };
                node.notify(&[op]).await.expect("notify");
                if n % 9 == 4 {
                    let mark = if w % 2 == 0 { Mark::Seen } else { Mark::Read };
                    node.mark_notifications(owner, mark, None).await.expect("mark");
                }
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.expect("writer");
    }
    for node in &nodes {
        let page = node.notifications(owner, None, 1000).await.expect("page");
        let above = |mark: Millis| page.groups.iter().filter(|g| g.latest_at > mark).count() as u64;
        assert_eq!((page.unseen, page.unread), (above(page.seen), above(page.read)), "{page:?}");
        assert!(page.seen > Millis(0) && page.read > Millis(0), "the marks moved: {page:?}");
    }
    for node in nodes {
        node.close().await;
    }
    db.drop().await.expect("drop the database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_notification_counts_stay_exact_at_once() {
    counts_stay_exact_at_once("TIDEWAY_TEST_POSTGRES_URL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_notification_counts_stay_exact_at_once() {
    counts_stay_exact_at_once("TIDEWAY_TEST_MYSQL_URL").await;
}
