//! The mention, tag and object feeds over HTTP: their meaning (SPEC
//! section 2) on a real server, their cursors, and their bad input.

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn ids(v: &Value) -> Vec<String> {
    v["entries"].as_array().expect("entries").iter().map(|e| e["item"]["id"].as_str().expect("id").to_owned()).collect()
}

async fn page(s: &TestServer, path: &str) -> (Vec<String>, Value) {
    let (st, v) = s.get(path).await;
    assert_eq!(st, StatusCode::OK, "{path}: {v}");
    (ids(&v), v)
}

#[tokio::test]
async fn mentions_tags_and_objects_are_the_items_as_they_are_now() {
    let s = spawn().await;
    let a = s.post_item(1, json!({"tags": ["Rust"], "mentions": ["7"], "object": {"type": "book", "id": "1"}})).await;
    let b = s.post_item(2, json!({"tags": ["rust", "db"], "mentions": ["7"], "visibility": "followers"})).await;
    let c = s.post_item(3, json!({"tags": ["rust"]})).await;
    // A repost is not posted: it shows its original, which is.
    let (st, _) = s.post("/v1/items", json!({"author": "4", "repost_of": a, "tags": ["rust"]})).await;
    assert_eq!(st, StatusCode::CREATED);

    // Tags are matched lowercased; only public items; newest first.
    assert_eq!(page(&s, "/v1/tags/rust/feed").await.0, vec![c.clone(), a.clone()]);
    assert_eq!(page(&s, "/v1/tags/RuSt/feed").await.0, vec![c.clone(), a.clone()]);
    assert!(page(&s, "/v1/tags/db/feed").await.0.is_empty(), "a followers-only item is in no tag feed");
    assert_eq!(page(&s, "/v1/objects/book/1/feed").await.0, vec![a.clone()]);
    assert!(page(&s, "/v1/objects/book/2/feed").await.0.is_empty());
    // Mentions: what the mentioned user may see (a followers-only item that
    // mentions them included), hydrated for them.
    let (m, v) = page(&s, "/v1/users/7/mentions").await;
    assert_eq!(m, vec![b.clone(), a.clone()]);
    assert_eq!(v["entries"][0]["reason"], json!("authored"));
    assert!(v["entries"][0]["item"]["viewer"].is_object(), "hydrated for the user mentioned: {v}");

    // A viewer's mutes and blocks apply on the next read.
    assert_eq!(s.put("/v1/users/7/mutes/3").await.0, StatusCode::OK);
    assert_eq!(page(&s, "/v1/tags/rust/feed?viewer=7").await.0, vec![a.clone()]);
    assert_eq!(page(&s, "/v1/tags/rust/feed").await.0, vec![c.clone(), a.clone()], "no viewer: nothing hidden");
    assert_eq!(s.put("/v1/users/7/blocks/1").await.0, StatusCode::OK);
    assert_eq!(page(&s, "/v1/users/7/mentions").await.0, vec![b.clone()]);
    assert_eq!(s.delete("/v1/users/7/blocks/1").await.0, StatusCode::NO_CONTENT);
    // Deletes and visibility changes too.
    assert_eq!(s.delete(&format!("/v1/items/{c}")).await.0, StatusCode::NO_CONTENT);
    assert_eq!(page(&s, "/v1/tags/rust/feed").await.0, vec![a.clone()]);
    assert_eq!(s.patch(&format!("/v1/items/{b}"), json!({"visibility": "public"})).await.0, StatusCode::OK);
    assert_eq!(page(&s, "/v1/tags/db/feed").await.0, vec![b.clone()], "public now");

    // Cursors: limit honoured, older and newer pages, and foreign ones refused.
    for i in 0..5 {
        s.post_item(5, json!({"tags": ["paged"], "body": {"i": i}})).await;
    }
    let (first, v) = page(&s, "/v1/tags/paged/feed?limit=2").await;
    assert_eq!(first.len(), 2);
    let next = v["next_cursor"].as_str().expect("more").to_owned();
    let (second, v2) = page(&s, &format!("/v1/tags/paged/feed?limit=2&before={next}")).await;
    assert_eq!(second.len(), 2);
    assert!(second.iter().all(|i| !first.contains(i)), "no duplicate");
    let prev = v2["prev_cursor"].as_str().expect("prev").to_owned();
    assert_eq!(page(&s, &format!("/v1/tags/paged/feed?limit=5&after={prev}")).await.0, first, "newer page");
    assert_error(&s.get(&format!("/v1/tags/rust/feed?before={next}")).await, 400, "invalid_cursor");
    assert_error(&s.get(&format!("/v1/users/7/mentions?before={next}")).await, 400, "invalid_cursor");
    assert_error(&s.get(&format!("/v1/objects/book/1/feed?after={next}")).await, 400, "invalid_cursor");
    s.stop().await;
}

#[tokio::test]
async fn posting_feeds_refuse_bad_input() {
    let s = spawn().await;
    let long = "a".repeat(65);
    for path in [
        format!("/v1/tags/{long}/feed"),
        "/v1/tags/has%20space/feed".to_owned(),
        "/v1/objects/Book/1/feed".to_owned(),
        format!("/v1/objects/book/{}/feed", "x".repeat(129)),
        "/v1/objects/book/a%2Fb/feed".to_owned(),
        "/v1/users/abc/mentions".to_owned(),
        "/v1/users/0/mentions".to_owned(),
        "/v1/tags/rust/feed?limit=0".to_owned(),
        "/v1/tags/rust/feed?limit=101".to_owned(),
        "/v1/tags/rust/feed?viewer=x".to_owned(),
        "/v1/users/7/mentions?viewer=8".to_owned(),
        "/v1/tags/rust/feed?before=garbage".to_owned(),
    ] {
        let code = if path.contains("before=") { "invalid_cursor" } else { "invalid_argument" };
        assert_error(&s.get(&path).await, 400, code);
    }
    assert_eq!(page(&s, &format!("/v1/tags/{}/feed", "a".repeat(64))).await.0.len(), 0, "64 bytes is a tag");
    s.stop().await;
}

#[tokio::test]
async fn mentions_are_read_as_their_user_and_other_feeds_by_anyone() {
    let mut s = spawn_authed().await;
    s.token = Some(KEY.into());
    let id = s.post_item(1, json!({"tags": ["rust"], "mentions": ["7"], "visibility": "mentioned"})).await;
    assert_eq!(page(&s, "/v1/users/7/mentions").await.0, vec![id.clone()], "a server key reads any");
    s.token = Some(user_token(7));
    assert_eq!(page(&s, "/v1/users/7/mentions").await.0, vec![id.clone()]);
    assert_error(&s.get("/v1/users/8/mentions").await, 403, "forbidden");
    assert_error(&s.get("/v1/users/7/mentions?viewer=8").await, 403, "forbidden");
    s.token = Some(user_token(8));
    assert!(page(&s, "/v1/tags/rust/feed").await.0.is_empty(), "mentioned-only: in no tag feed");
    assert_error(&s.get("/v1/users/7/mentions").await, 403, "forbidden");
    s.token = None;
    assert_error(&s.get("/v1/tags/rust/feed").await, 401, "unauthenticated");
    s.stop().await;
}
