//! Every bad input gets a 4xx JSON error with a stable code, never a 500
//! or a plain-text body.

use crate::helpers::*;
use reqwest::Method;
use serde_json::{Value, json};

async fn raw_error(s: &TestServer, method: Method, path: &str, body: Option<(&str, &str)>, status: u16, code: &str) {
    let (st, text) = s.raw(method.clone(), path, body).await;
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{method} {path}: not a JSON body: {text:?}"));
    assert_error(&(st, v), status, code);
}

#[tokio::test]
async fn malformed_and_unknown_json_is_rejected() {
    let s = spawn().await;
    let json_ct = "application/json";
    for (method, path) in [
        (Method::POST, "/v1/items"),
        (Method::PATCH, "/v1/items/1"),
        (Method::POST, "/v1/users/1/following"),
        (Method::POST, "/v1/users/1/home/entries"),
    ] {
        raw_error(&s, method.clone(), path, Some((json_ct, "{\"author\":")), 400, "invalid_argument").await;
        raw_error(&s, method.clone(), path, Some((json_ct, "[1,2]")), 400, "invalid_argument").await;
        raw_error(&s, method.clone(), path, Some((json_ct, "{\"surprise\": 1}")), 400, "invalid_argument").await;
        raw_error(&s, method.clone(), path, Some(("text/plain", "{}")), 400, "invalid_argument").await;
        raw_error(&s, method, path, None, 400, "invalid_argument").await;
    }
    assert_error(&s.post("/v1/items", json!({"author": 1})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/items", json!({"author": "1", "body": [1]})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/items", json!({"author": "1", "tags": "rust"})).await, 400, "invalid_argument");
    assert_error(
        &s.post("/v1/items", json!({"author": "1", "object": {"type": "book"}})).await,
        400,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/items", json!({"author": "1", "object": {"type": "Book!", "id": "1"}})).await,
        400,
        "invalid_argument",
    );
    assert_error(&s.post("/v1/items", json!({"author": "1", "mentions": ["x"]})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/items", json!({"author": "1", "idempotency_key": ""})).await, 400, "invalid_argument");
    s.stop().await;
}

#[tokio::test]
async fn bad_ids_are_400() {
    let s = spawn().await;
    for bad in ["0", "-1", "abc", "1.5", "99999999999999999999", "9223372036854775808"] {
        assert_error(&s.get(&format!("/v1/users/{bad}/home")).await, 400, "invalid_argument");
        assert_error(&s.get(&format!("/v1/items/{bad}")).await, 400, "invalid_argument");
        assert_error(&s.put(&format!("/v1/users/1/following/{bad}")).await, 400, "invalid_argument");
        assert_error(&s.post("/v1/items", json!({"author": bad})).await, 400, "invalid_argument");
    }
    assert_error(&s.get("/v1/items?ids=1,x").await, 400, "invalid_argument");
    assert_error(&s.get("/v1/items").await, 400, "invalid_argument");
    assert_error(&s.get("/v1/users/1/relationships?targets=").await, 400, "invalid_argument");
    assert_error(&s.get("/v1/users/1/profile?viewer=zero").await, 400, "invalid_argument");
    s.stop().await;
}

#[tokio::test]
async fn oversize_and_over_limit_inputs() {
    let s = spawn().await;
    let big = "x".repeat(17 * 1024);
    assert_error(&s.post("/v1/items", json!({"author": "1", "body": {"t": big}})).await, 413, "payload_too_large");
    let huge = "x".repeat(70 * 1024);
    assert_error(&s.post("/v1/items", json!({"author": "1", "body": {"t": huge}})).await, 413, "payload_too_large");
    let id = s.post_item(1, json!({})).await;
    assert_error(&s.patch(&format!("/v1/items/{id}"), json!({"body": {"t": big}})).await, 413, "payload_too_large");
    let targets: Vec<String> = (2..1003).map(|i| i.to_string()).collect();
    assert_error(&s.post("/v1/users/1/following", json!({"targets": targets})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/users/1/following", json!({"targets": ["1"]})).await, 400, "invalid_argument");
    let ids: Vec<String> = (1..=101).map(|i| i.to_string()).collect();
    assert_error(&s.get(&format!("/v1/items?ids={}", ids.join(","))).await, 400, "invalid_argument");
    assert_error(
        &s.get(&format!("/v1/users/1/relationships?targets={}", ids.join(","))).await,
        400,
        "invalid_argument",
    );
    let tags: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    assert_error(&s.post("/v1/items", json!({"author": "1", "tags": tags})).await, 400, "invalid_argument");
    let mentions: Vec<String> = (1..=51).map(|i| i.to_string()).collect();
    assert_error(&s.post("/v1/items", json!({"author": "1", "mentions": mentions})).await, 400, "invalid_argument");
    // Nothing partial was written by the refused batch.
    let (_, u) = s.get("/v1/users/1").await;
    assert_eq!(u["following_count"], json!(0));
    s.stop().await;
}

#[tokio::test]
async fn bad_pages_and_cursors() {
    let s = spawn().await;
    s.follow(1, 2).await;
    s.follow(3, 2).await;
    for i in 0..3 {
        s.post_item(2, json!({"body": {"i": i}})).await;
    }
    s.drained().await;
    let (_, p1) = s.home_ids(1, "limit=1").await;
    let c1 = p1["entries"][0]["cursor"].as_str().expect("cursor").to_owned();
    let (_, prof) = s.get("/v1/users/2/profile?limit=1").await;
    let cp = prof["entries"][0]["cursor"].as_str().expect("cursor").to_owned();
    // The cursor with its last character changed (to one it is not).
    let last = if c1.ends_with('x') { 'y' } else { 'x' };
    let tampered = format!("{}{last}", &c1[..c1.len() - 1]);
    for q in ["before=garbage", "after=%%%", "before=AAAA", &format!("before={cp}"), &format!("after={tampered}")] {
        assert_error(&s.get(&format!("/v1/users/1/home?{q}")).await, 400, "invalid_cursor");
    }
    // User 1's cursor is foreign to user 3's home.
    assert_error(&s.get(&format!("/v1/users/3/home?before={c1}")).await, 400, "invalid_cursor");
    assert_error(&s.get(&format!("/v1/users/1/home?before={c1}&after={c1}")).await, 400, "invalid_argument");
    for l in ["0", "101", "-1", "ten", ""] {
        assert_error(&s.get(&format!("/v1/users/1/home?limit={l}")).await, 400, "invalid_argument");
    }
    // A cursor stays valid after the entry it points at is deleted.
    let id = p1["entries"][0]["item"]["id"].as_str().expect("id").to_owned();
    s.delete(&format!("/v1/items/{id}")).await;
    let (ids, _) = s.home_ids(1, &format!("before={c1}")).await;
    assert_eq!(ids.len(), 2);
    s.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods() {
    let s = spawn().await;
    raw_error(&s, Method::GET, "/v2/items", None, 404, "not_found").await;
    raw_error(&s, Method::GET, "/v1/users/1/nothing", None, 404, "not_found").await;
    raw_error(&s, Method::DELETE, "/v1/stats", None, 405, "method_not_allowed").await;
    raw_error(&s, Method::POST, "/v1/users/1/home", Some(("application/json", "{}")), 405, "method_not_allowed").await;
    raw_error(&s, Method::PUT, "/v1/items", None, 405, "method_not_allowed").await;
    s.stop().await;
}
