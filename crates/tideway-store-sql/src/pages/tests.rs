//! MySQL's page statement keeps its plan when its sessions estimate
//! from statistics: no branch scans the items.

use super::my_page_text;
use crate::SqlStore;
use crate::testing::FreshDatabase;
use sqlx::{Connection, Row};
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::{PageQuery, Pages};

#[test]
fn gathered_reposts_are_whole_or_none() {
    use super::gathered_reposts;
    let r = |u: u64, i: u64| (UserId(u), ItemId(i));
    let read = |t: &str| gathered_reposts(t).expect("a well-formed text");
    assert_eq!(read("0;"), Some(vec![]));
    assert_eq!(read(""), Some(vec![]));
    assert_eq!(read("2;7:5000.,8:5001."), Some(vec![r(7, 5000), r(8, 5001)]));
    // Cut short by the server's length: a pair missing, or cut inside
    // one (inside a number too).
    assert_eq!(read("3;7:5000.,8:5001."), None);
    assert_eq!(read("2;7:5000.,8:50"), None);
    assert_eq!(read("2;7:5000.,8:"), None);
    assert_eq!(read("2;7:5000.,8"), None);
    assert!(gathered_reposts("x;7:5000.").is_err());
}

#[tokio::test]
async fn mysql_page_statement_scans_no_items() {
    let var = "TIDEWAY_TEST_MYSQL_URL";
    let db = FreshDatabase::from_env(var).await;
    let store = SqlStore::connect(&db.url).await.expect("connect");
    // 4,000 posts by 200 authors, and a viewer's repost of one of them:
    // most rows of `tw_items_reposts` are no repost.
    let rows: Vec<String> =
        (1..=4000u64).map(|i| format!("({i}, {}, 1, NULL, NULL, NULL, '{{}}', '{{}}')", 1 + i % 200)).collect();
    db.execute(&[
        format!(
            "INSERT INTO tw_items (id, author, live, repost_of, reply_to, idem, record, body) VALUES {}",
            rows.join(", ")
        ),
        // Reposts of 3999 by the viewer (7) and five more: more than
        // a row's text gathers in this crate's tests (read after the
        // statement then); of 3998 one by a reposter, which fits, and
        // one by a user who is none (150); of 3997, counted with more
        // than a page gathers, two by reposters and one by 160.
        "INSERT INTO tw_items (id, author, live, repost_of, reply_to, idem, record, body) \
         VALUES (5000, 7, 1, 3999, NULL, NULL, '{}', '{}'), (5001, 8, 1, 3999, NULL, NULL, '{}', '{}'), \
         (5002, 9, 1, 3999, NULL, NULL, '{}', '{}'), (5003, 10, 1, 3999, NULL, NULL, '{}', '{}'), \
         (5004, 11, 1, 3999, NULL, NULL, '{}', '{}'), (5005, 12, 1, 3999, NULL, NULL, '{}', '{}'), \
         (5006, 20, 1, 3998, NULL, NULL, '{}', '{}'), (5007, 150, 1, 3998, NULL, NULL, '{}', '{}'), \
         (5008, 30, 1, 3997, NULL, NULL, '{}', '{}'), (5009, 31, 1, 3997, NULL, NULL, '{}', '{}'), \
         (5010, 160, 1, 3997, NULL, NULL, '{}', '{}')"
            .to_owned(),
        "INSERT INTO tw_item_counts (item, what, n) VALUES (3999, 'p', 6), (3998, 'p', 2), (3997, 'p', 1000)"
            .to_owned(),
        "ANALYZE TABLE tw_items".to_owned(),
    ])
    .await
    .expect("rows");
    let originals: Vec<ItemId> = (3951..=4000).rev().map(ItemId).collect();
    let reposters: Vec<UserId> = (1..=100).map(UserId).collect();
    let related: Vec<UserId> = (101..=150).map(UserId).collect();
    let held: Vec<(ItemId, u32)> = originals.iter().map(|i| (*i, 0)).collect();
    let q = PageQuery {
        originals: &originals,
        reposters: &reposters,
        inserts_of: Some(UserId(7)),
        viewer: Some(UserId(7)),
        related: &related,
        follows_known: false,
        relations_known: false,
        hydrate: &originals,
        held: &held,
        held_at: None,
        followees_of: Some(UserId(7)),
        promotions_at: Some(Millis(1)),
    };
    // With the viewer's own relations held by the node, and no
    // insertions there, the text reads neither.
    let known = PageQuery { relations_known: true, inserts_of: None, ..q };
    let lean = my_page_text(&known, Some(Millis(1))).expect("a statement");
    assert!(!["tw_blocks", "tw_mutes", "tw_inserts"].iter().any(|t| lean.contains(t)), "{lean}");
    assert!(my_page_text(&q, Some(Millis(1))).expect("a statement").contains("tw_mutes"));
    // With the node's copy of the promotions, the text reads their
    // version alone.
    let held = my_page_text(&known, None).expect("a statement");
    assert!(!held.contains("tw_promotions") && held.contains("pv"), "{held}");
    let alone = PageQuery { promotions_at: Some(Millis(1)), ..PageQuery::default() };
    assert!(my_page_text(&alone, None).expect("the version asked").contains("tw_epoch"));
    // The plan, as the page's sessions make it.
    let text = my_page_text(&q, Some(Millis(1))).expect("a statement");
    let mut c = sqlx::AnyConnection::connect(&db.url).await.expect("connect");
    sqlx::query("SET SESSION eq_range_index_dive_limit = 1").execute(&mut c).await.expect("set");
    let plan = sqlx::raw_sql(&format!("EXPLAIN {text}")).fetch_all(&mut c).await.expect("explain");
    // (The other tables are empty here, where a scan is the cheapest.)
    let mut keys = Vec::new();
    for row in &plan {
        let table: Option<String> = row.try_get("table").expect("table");
        if table.as_deref() != Some("tw_items") {
            continue;
        }
        let access: Option<String> = row.try_get("type").expect("type");
        let key: Option<String> = row.try_get("key").expect("key");
        assert_ne!(access.as_deref(), Some("ALL"), "a branch scans tw_items: {text}");
        keys.push(key.unwrap_or_default());
    }
    keys.sort();
    assert_eq!(keys, ["PRIMARY", "tw_items_reposts"], "the held copies by id, the reposts by original");
    // The viewer's own repost is found among those gathered, not by a
    // subquery of its own.
    assert!(!text.contains("tw_items.author = 7"), "{text}");
    c.close().await.expect("close");
    // And the statement tells what it finds: the viewer's repost, as a
    // reposter's and as the viewer's own (here cut short in the text,
    // so read after), and the reposts gathered in a row's text or, cut
    // short there, read after.
    let f = store.page_facts(&q).await.expect("page_facts");
    let by = |u: u64, i: u64| (UserId(u), ItemId(i));
    assert_eq!(f.reposts[1], vec![by(7, 5000), by(8, 5001), by(9, 5002), by(10, 5003), by(11, 5004), by(12, 5005)]);
    assert_eq!(f.reposts[2], vec![by(20, 5006)], "a repost by someone the reader does not follow is left out");
    assert_eq!(f.reposts[3], vec![by(30, 5008), by(31, 5009)], "read after, by the reposters");
    assert!(f.reposts.iter().enumerate().all(|(i, r)| r.is_empty() || (1..=3).contains(&i)));
    assert!(!lean.contains("IN (1,2,3"), "the reposters are not listed: {lean}");
    assert_eq!(f.hydrated[1].0.reposts, 6);
    assert_eq!(f.hydrated[1].1.as_ref().map(|m| m.reposted), Some(true));
    assert_eq!(f.hydrated[2].1.as_ref().map(|m| m.reposted), Some(false));
    assert_eq!(f.stale, Vec::<ItemId>::new());
    store.close().await;
    db.drop().await.expect("drop the database");
}

/// A page's promotions are those running at its time, stored by any node
/// (a node's copy of them stands before the store: `tideway_store::copies`).
async fn a_page_reads_the_promotions_running_at_its_time(var: &str) {
    use tideway_store::{Items, Promotion};
    let db = FreshDatabase::from_env(var).await;
    let (a, b) = (SqlStore::connect(&db.url).await.expect("a"), SqlStore::connect(&db.url).await.expect("b"));
    let p = |id: u64, starts: i64, ends: i64| Promotion {
        id,
        item: ItemId(id * 10),
        every: 3,
        starts_at: Millis(starts),
        ends_at: Millis(ends),
    };
    let at = async |t: i64| {
        let q = PageQuery { promotions_at: Some(Millis(t)), ..PageQuery::default() };
        let told = a.page_facts(&q).await.expect("page_facts").promotions.expect("asked");
        assert_eq!(told, a.active_promotions(Millis(t)).await.expect("active"), "at {t}");
        told
    };
    assert!(at(200).await.is_empty());
    b.create_promotion(p(1, 100, 300)).await.expect("promotion");
    assert_eq!(at(200).await, vec![p(1, 100, 300)], "stored by the other node, seen at once");
    assert_eq!(at(250).await, vec![p(1, 100, 300)]);
    assert!(at(300).await.is_empty(), "the end is exclusive");
    b.create_promotion(p(3, 400, 500)).await.expect("promotion");
    b.create_promotion(p(2, 350, 450)).await.expect("promotion");
    assert_eq!(at(420).await, vec![p(2, 350, 450), p(3, 400, 500)], "by id");
    assert_eq!(at(150).await, vec![p(1, 100, 300)], "before the copy: read");
    assert_eq!(at(460).await, vec![p(3, 400, 500)]);
    a.close().await;
    b.close().await;
    db.drop().await.expect("drop the database");
}

#[tokio::test]
async fn a_page_reads_the_promotions_running_at_its_time_on_postgres() {
    a_page_reads_the_promotions_running_at_its_time("TIDEWAY_TEST_POSTGRES_URL").await;
}

#[tokio::test]
async fn a_page_reads_the_promotions_running_at_its_time_on_mysql() {
    a_page_reads_the_promotions_running_at_its_time("TIDEWAY_TEST_MYSQL_URL").await;
}
