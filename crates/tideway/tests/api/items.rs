use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn create_get_patch_delete() {
    let s = spawn().await;
    let (st, v) = s
        .post(
            "/v1/items",
            json!({"author": "7", "body": {"text": "hi"}, "tags": ["Rust", "rust"], "mentions": ["8"],
            "object": {"type": "book", "id": "42"}, "visibility": "followers"}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let item = &v["item"];
    let id = item["id"].as_str().expect("id").to_owned();
    assert_eq!(item["author"], json!("7"));
    assert_eq!(item["kind"], json!("post"));
    assert_eq!(item["tags"], json!(["rust"]));
    assert_eq!(item["mentions"], json!(["8"]));
    assert_eq!(item["object"], json!({"type": "book", "id": "42"}));
    assert!(item["created_at"].as_str().is_some_and(|t| t.ends_with('Z') && t.len() == 24), "{item}");
    assert_eq!(item["counts"]["replies"], json!(0));

    // followers-only: the server's own read (no viewer) sees every item; a
    // stranger does not; the mentioned user does.
    assert_eq!(s.get(&format!("/v1/items/{id}")).await.0, StatusCode::OK);
    assert_error(&s.get(&format!("/v1/items/{id}?viewer=9")).await, 404, "not_found");
    let (st, v) = s.get(&format!("/v1/items/{id}?viewer=8")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["item"]["viewer"]["reposted"], json!(false));

    let (st, v) =
        s.patch(&format!("/v1/items/{id}"), json!({"visibility": "public", "body": {"text": "edited"}})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["item"]["body"]["text"], json!("edited"));
    let (st, _) = s.get(&format!("/v1/items/{id}?viewer=9")).await;
    assert_eq!(st, StatusCode::OK, "public now");

    assert_eq!(s.delete(&format!("/v1/items/{id}")).await.0, StatusCode::NO_CONTENT);
    assert_eq!(s.delete(&format!("/v1/items/{id}")).await.0, StatusCode::NO_CONTENT, "idempotent");
    assert_error(&s.get(&format!("/v1/items/{id}")).await, 404, "not_found");
    assert_error(&s.patch(&format!("/v1/items/{id}"), json!({"visibility": "public"})).await, 404, "not_found");
    assert_error(&s.delete("/v1/items/12345").await, 404, "not_found");
    s.stop().await;
}

#[tokio::test]
async fn batch_get_keeps_order_and_omits_deleted() {
    let s = spawn().await;
    let a = s.post_item(1, json!({})).await;
    let b = s.post_item(1, json!({})).await;
    let c = s.post_item(1, json!({})).await;
    s.delete(&format!("/v1/items/{b}")).await;
    let (st, v) = s.get(&format!("/v1/items?ids={c},{b},{a},999")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let ids: Vec<&str> = v["items"].as_array().expect("items").iter().map(|i| i["id"].as_str().expect("id")).collect();
    assert_eq!(ids, vec![c.as_str(), a.as_str()]);
    s.stop().await;
}

#[tokio::test]
async fn idempotency_keys_and_repeated_reposts_return_the_first_item() {
    let s = spawn().await;
    let body = json!({"author": "1", "idempotency_key": "abc", "body": {"n": 1}});
    let (st1, v1) = s.post("/v1/items", body.clone()).await;
    let (st2, v2) = s.post("/v1/items", body).await;
    assert_eq!((st1, st2), (StatusCode::CREATED, StatusCode::OK));
    assert_eq!(v1["item"]["id"], v2["item"]["id"]);
    // The same key of another author is another item.
    let (st3, v3) = s.post("/v1/items", json!({"author": "2", "idempotency_key": "abc"})).await;
    assert_eq!(st3, StatusCode::CREATED);
    assert_ne!(v3["item"]["id"], v1["item"]["id"]);

    let orig = v1["item"]["id"].as_str().expect("id").to_owned();
    let (st, r1) = s.post("/v1/items", json!({"author": "3", "repost_of": orig})).await;
    assert_eq!(st, StatusCode::CREATED, "{r1}");
    assert_eq!(r1["item"]["kind"], json!("repost"));
    let r1id = r1["item"]["id"].as_str().expect("id").to_owned();
    let (st, r2) = s.post("/v1/items", json!({"author": "3", "repost_of": orig})).await;
    assert_eq!((st, &r2["item"]["id"]), (StatusCode::OK, &r1["item"]["id"]), "reposting twice is idempotent");
    // A repost of a repost reposts the original.
    let (st, r3) = s.post("/v1/items", json!({"author": "4", "repost_of": r1id})).await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(r3["item"]["repost_of"], json!(orig));
    let (_, v) = s.get(&format!("/v1/items/{orig}?viewer=3")).await;
    assert_eq!(v["item"]["counts"]["reposts"], json!(2));
    assert_eq!(v["item"]["viewer"]["reposted"], json!(true));
    s.stop().await;
}

#[tokio::test]
async fn repost_and_reply_rules() {
    let s = spawn().await;
    let private = s.post_item(1, json!({"visibility": "followers"})).await;
    assert_error(&s.post("/v1/items", json!({"author": "2", "repost_of": private})).await, 403, "forbidden");
    let public = s.post_item(1, json!({})).await;
    assert_eq!(s.put("/v1/users/1/blocks/2").await.0, StatusCode::OK);
    assert_error(&s.post("/v1/items", json!({"author": "2", "repost_of": public})).await, 403, "forbidden");
    assert_error(&s.post("/v1/items", json!({"author": "2", "reply_to": public})).await, 403, "forbidden");
    let (st, v) = s.post("/v1/items", json!({"author": "3", "reply_to": public, "body": {"t": "re"}})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["item"]["kind"], json!("reply"));
    let (_, p) = s.get(&format!("/v1/items/{public}")).await;
    assert_eq!(p["item"]["counts"]["replies"], json!(1));
    s.delete(&format!("/v1/items/{public}")).await;
    assert_error(&s.post("/v1/items", json!({"author": "3", "reply_to": public})).await, 404, "not_found");
    assert_error(&s.post("/v1/items", json!({"author": "3", "repost_of": public})).await, 404, "not_found");
    assert_error(&s.post("/v1/items", json!({"author": "3", "repost_of": "777"})).await, 404, "not_found");
    s.stop().await;
}

#[tokio::test]
async fn imported_items_keep_their_time_and_kinds_are_checked() {
    let s = spawn().await;
    let (st, v) = s.post("/v1/items", json!({"author": "1", "created_at": "2024-02-03T04:05:06.789Z"})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["item"]["created_at"], json!("2024-02-03T04:05:06.789Z"));
    for kind in ["user", "ad", "x-book_review"] {
        let (st, v) = s.post("/v1/items", json!({"author": "1", "kind": kind})).await;
        assert_eq!(st, StatusCode::CREATED, "{kind}: {v}");
        assert_eq!(v["item"]["kind"], json!(kind));
    }
    assert_error(&s.post("/v1/items", json!({"author": "1", "kind": "story"})).await, 400, "invalid_argument");
    assert_error(
        &s.post("/v1/items", json!({"author": "1", "created_at": "yesterday"})).await,
        400,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/items", json!({"author": "1", "created_at": "1999-01-01T00:00:00Z"})).await,
        400,
        "invalid_argument",
    );
    assert_error(&s.post("/v1/items", json!({"author": "1", "visibility": "secret"})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/items", json!({"author": "1", "kind": "repost"})).await, 400, "invalid_argument");
    s.stop().await;
}
