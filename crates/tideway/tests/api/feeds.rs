use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn home_pages_walk_both_ways_without_gap_or_duplicate() {
    let s = spawn_with(|c| c.timeline.max_len = 5).await;
    s.follow(1, 2).await;
    s.follow(1, 3).await;
    let mut posted = Vec::new();
    for i in 0..12 {
        posted.push(s.post_item(2 + (i % 2), json!({"body": {"n": i}})).await);
    }
    s.post_item(4, json!({})).await; // not followed
    s.drained().await;
    posted.reverse(); // newest first
    let mut seen = Vec::new();
    let mut query = "limit=5".to_owned();
    loop {
        let (ids, page) = s.home_ids(1, &query).await;
        seen.extend(ids);
        match page["next_cursor"].as_str() {
            Some(c) => query = format!("limit=5&before={c}"),
            None => break,
        }
    }
    assert_eq!(seen, posted, "older pages cross the inbox cap (5) seamlessly");
    // Newer from the oldest entry back to the top.
    let (_, p11) = s.home_ids(1, "limit=11").await;
    let c11 = p11["entries"][10]["cursor"].as_str().expect("cursor").to_owned();
    let (last, _) = s.home_ids(1, &format!("limit=1&before={c11}")).await;
    assert_eq!(last, vec![posted[11].clone()]);
    let (_, p) = s.home_ids(1, "limit=12").await;
    let bottom = p["entries"][11]["cursor"].as_str().expect("cursor").to_owned();
    let (newer, page) = s.home_ids(1, &format!("limit=4&after={bottom}")).await;
    assert_eq!(newer, posted[7..11].to_vec(), "the 4 entries right after the cursor, newest first");
    let prev = page["prev_cursor"].as_str().expect("prev");
    let (newer2, _) = s.home_ids(1, &format!("limit=100&after={prev}")).await;
    assert_eq!(newer2, posted[0..7].to_vec());

    // A new post shows on the next poll of `after`.
    let top = p["entries"][0]["cursor"].as_str().expect("cursor").to_owned();
    let fresh = s.post_item(3, json!({})).await;
    s.drained().await;
    let (polled, _) = s.home_ids(1, &format!("after={top}")).await;
    assert_eq!(polled, vec![fresh]);
    s.stop().await;
}

#[tokio::test]
async fn reposts_merge_into_one_entry_and_state_changes_apply_on_read() {
    let s = spawn().await;
    s.follow(1, 2).await;
    s.follow(1, 3).await;
    let orig = s.post_item(4, json!({"body": {"t": "original"}})).await;
    let (_, r2) = s.post("/v1/items", json!({"author": "2", "repost_of": orig})).await;
    let (_, r3) = s.post("/v1/items", json!({"author": "3", "repost_of": orig})).await;
    s.drained().await;
    let (ids, page) = s.home_ids(1, "").await;
    assert_eq!(ids, vec![orig.clone()], "one entry per original");
    let e = &page["entries"][0];
    assert_eq!(e["reason"], json!("repost"));
    assert_eq!(
        e["sources"].as_array().map(|a| a.iter().map(|s| s["user"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("2"), json!("3")])
    );
    assert_eq!(e["sources"][0]["item"], r2["item"]["id"]);
    // Following the author moves the entry to the original's own time.
    s.follow(1, 4).await;
    let (_, page) = s.home_ids(1, "").await;
    assert_eq!(page["entries"][0]["reason"], json!("authored"));
    // Muting a reposter drops their source; deleting the original removes the entry.
    s.put("/v1/users/1/mutes/2").await;
    let (_, page) = s.home_ids(1, "").await;
    assert_eq!(page["entries"][0]["sources"].as_array().map(Vec::len), Some(1));
    assert_eq!(page["entries"][0]["sources"][0]["item"], r3["item"]["id"]);
    s.delete(&format!("/v1/items/{orig}")).await;
    let (ids, _) = s.home_ids(1, "").await;
    assert!(ids.is_empty());
    s.stop().await;
}

#[tokio::test]
async fn unfollow_block_and_visibility_apply_on_the_next_read() {
    let s = spawn().await;
    s.follow(1, 2).await;
    let a = s.post_item(2, json!({})).await;
    let b = s.post_item(2, json!({"visibility": "followers"})).await;
    s.drained().await;
    assert_eq!(s.home_ids(1, "").await.0, vec![b.clone(), a.clone()]);
    s.patch(&format!("/v1/items/{b}"), json!({"visibility": "mentioned"})).await;
    assert_eq!(s.home_ids(1, "").await.0, vec![a.clone()]);
    s.delete("/v1/users/1/following/2").await;
    assert!(s.home_ids(1, "").await.0.is_empty());
    s.follow(1, 2).await;
    assert_eq!(s.home_ids(1, "").await.0, vec![a.clone()], "following brings the followee's items in");
    s.put("/v1/users/2/blocks/1").await;
    assert!(s.home_ids(1, "").await.0.is_empty());
    s.stop().await;
}

#[tokio::test]
async fn profile_and_direct_inserts() {
    let s = spawn().await;
    let own = s.post_item(5, json!({})).await;
    let other = s.post_item(6, json!({})).await;
    let hidden = s.post_item(6, json!({"visibility": "followers"})).await;
    s.post("/v1/items", json!({"author": "5", "repost_of": other})).await;
    let card = s.post_item(7, json!({"kind": "user", "body": {"suggest": "6"}})).await;
    let (st, p) = s.get("/v1/users/5/profile").await;
    assert_eq!(st, StatusCode::OK, "{p}");
    let ids: Vec<&str> =
        p["entries"].as_array().expect("e").iter().map(|e| e["item"]["id"].as_str().expect("id")).collect();
    assert_eq!(ids, vec![other.as_str(), own.as_str()]);
    assert_eq!(p["entries"][0]["reason"], json!("repost"));
    let (_, p6) = s.get("/v1/users/6/profile?viewer=6").await;
    assert_eq!(p6["entries"].as_array().map(Vec::len), Some(2), "the author sees their followers-only item");
    let (_, p6) = s.get("/v1/users/6/profile").await;
    assert_eq!(p6["entries"][0]["item"]["id"], json!(other), "no viewer: public only ({hidden} hidden)");
    s.put("/v1/users/6/blocks/8").await;
    let (_, pb) = s.get("/v1/users/6/profile?viewer=8").await;
    assert_eq!(pb["entries"], json!([]), "a block empties the profile");

    // Cards reach a home only by insertion.
    s.follow(1, 7).await;
    s.drained().await;
    assert!(s.home_ids(1, "").await.0.is_empty());
    let (st, v) = s.post("/v1/users/1/home/entries", json!({"item": card})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["entry"]["reason"], json!("inserted"));
    let (ids, page) = s.home_ids(1, "").await;
    assert_eq!(ids, vec![card.clone()]);
    // Both cursors name the same position (the page's also knows its rank).
    let other = s.post_item(7, json!({"kind": "user"})).await;
    s.post("/v1/users/1/home/entries", json!({"item": other})).await;
    for c in [&v["entry"]["cursor"], &page["entries"][0]["cursor"]] {
        let (after, _) = s.home_ids(1, &format!("after={}", c.as_str().expect("cursor"))).await;
        assert_eq!(after, vec![other.clone()]);
    }
    assert_error(&s.post("/v1/users/1/home/entries", json!({"item": "424242"})).await, 404, "not_found");
    s.delete(&format!("/v1/items/{card}")).await;
    s.delete(&format!("/v1/items/{other}")).await;
    assert!(s.home_ids(1, "").await.0.is_empty());
    assert_error(&s.post("/v1/users/1/home/entries", json!({"item": card})).await, 404, "not_found");
    s.stop().await;
}

#[tokio::test]
async fn operations_endpoints() {
    let s = spawn().await;
    s.follow(1, 2).await;
    s.home_ids(1, "").await; // gives user 1 an inbox
    s.post_item(2, json!({})).await;
    s.drained().await;
    let (st, v) = s.get("/v1/stats").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!((v["users"].clone(), v["items"].clone(), v["follows"].clone()), (json!(2), json!(1), json!(1)));
    assert_eq!(v["fanout"]["pending"], json!(0));
    assert_eq!(v["fanout"]["delivered_total"], json!(1));
    let (_, u) = s.get("/v1/users/1").await;
    assert_eq!((u["active"].clone(), u["hot"].clone()), (json!(true), json!(false)));
    assert!(u["last_active_at"].is_string());
    assert_eq!(s.get("/healthz").await, (StatusCode::OK, json!({"status": "ok"})));
    assert_eq!(s.get("/readyz").await, (StatusCode::OK, json!({"status": "ready"})));
    let (st, text) = s.raw(reqwest::Method::GET, "/metrics", None).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    // The OpenAPI document lists every route of the router.
    let (st, doc) = s.get("/openapi.json").await;
    assert_eq!(st, StatusCode::OK);
    for path in [
        "/v1/items",
        "/v1/items/{id}",
        "/v1/users/{u}",
        "/v1/users/{u}/following",
        "/v1/users/{u}/following/{t}",
        "/v1/users/{u}/followers",
        "/v1/users/{u}/relationships",
        "/v1/users/{u}/blocks/{t}",
        "/v1/users/{u}/mutes/{t}",
        "/v1/users/{u}/home",
        "/v1/users/{u}/home/entries",
        "/v1/users/{u}/profile",
        "/v1/stats",
        "/healthz",
        "/readyz",
        "/metrics",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} missing from /openapi.json");
    }
    s.stop().await;
}

#[tokio::test]
async fn hot_authors_are_pulled_at_once_and_activity_is_reported() {
    let s = spawn_with(|c| {
        c.fanout.hot_followers = 2;
        c.fanout.active_window = tideway_config::HumanDuration(std::time::Duration::from_millis(300));
    })
    .await;
    for f in [1, 3] {
        s.follow(f, 2).await;
        s.home_ids(f, "").await; // both readers have inboxes
    }
    let (_, u) = s.get("/v1/users/2").await;
    assert_eq!(u["hot"], json!(true));
    let id = s.post_item(2, json!({"body": {"t": "celebrity"}})).await;
    // No fan-out job: the followers' pages merge the author's outbox on read.
    let (_, stats) = s.get("/v1/stats").await;
    assert_eq!(stats["fanout"]["pending"], json!(0));
    assert_eq!(stats["fanout"]["delivered_total"], json!(0));
    for f in [1, 3] {
        assert_eq!(s.home_ids(f, "").await.0, vec![id.clone()]);
    }
    // Below the threshold again: pushed as usual, and the earlier post stays.
    s.delete("/v1/users/3/following/2").await;
    let id2 = s.post_item(2, json!({})).await;
    s.drained().await;
    assert_eq!(s.home_ids(1, "").await.0, vec![id2, id]);
    let (_, u1) = s.get("/v1/users/1").await;
    assert_eq!(u1["active"], json!(true));
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (_, u1) = s.get("/v1/users/1").await;
    assert_eq!(u1["active"], json!(false), "{u1}");
    s.stop().await;
}

#[tokio::test]
async fn a_clean_restart_restores_inboxes_from_the_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let d1 = data.clone();
    let s = spawn_with(move |c| c.storage.data_dir = d1).await;
    s.follow(1, 2).await;
    s.home_ids(1, "").await;
    let id = s.post_item(2, json!({})).await;
    s.drained().await;
    s.stop().await;
    assert!(data.join("inboxes.snapshot").exists(), "written at the clean shutdown");
    let d2 = data.clone();
    let s = spawn_with(move |c| c.storage.data_dir = d2).await;
    // The first answer comes after start-up, which loaded the snapshot.
    let (_, stats) = s.get("/v1/stats").await;
    assert!(!data.join("inboxes.snapshot").exists(), "used once");
    assert_eq!(stats["inboxes"]["count"], json!(1), "restored before any read: {stats}");
    assert_eq!(stats["inboxes"]["entries"], json!(1));
    assert_eq!(s.home_ids(1, "").await.0, vec![id]);
    s.stop().await;
}
