use crate::helpers::*;
use jsonwebtoken::{EncodingKey, Header, encode};
use reqwest::StatusCode;
use serde_json::json;

fn token(sub: &str, exp_from_now: i64) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs() as i64;
    encode(
        &Header::default(),
        &json!({"sub": sub, "exp": now + exp_from_now}),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("encode")
}

#[tokio::test]
async fn server_keys_and_user_tokens() {
    let mut s = spawn_authed().await;
    assert_error(&s.get("/v1/users/1/home").await, 401, "unauthenticated");
    s.token = Some("wrong-key".into());
    assert_error(&s.get("/v1/users/1/home").await, 401, "unauthenticated");
    s.token = Some(token("1", -120));
    assert_error(&s.get("/v1/users/1/home").await, 401, "unauthenticated");
    let (st, text) = s.raw(reqwest::Method::GET, "/v1/stats", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED, "{text}");

    // A user token acts only as its user.
    s.token = Some(token("1", 600));
    assert_eq!(s.get("/v1/users/1/home").await.0, StatusCode::OK);
    assert_error(&s.get("/v1/users/2/home").await, 403, "forbidden");
    assert_error(&s.put("/v1/users/2/following/3").await, 403, "forbidden");
    assert_error(&s.post("/v1/items", json!({"author": "2"})).await, 403, "forbidden");
    let mine = s.post_item(1, json!({})).await;
    s.follow(1, 2).await;
    assert_error(&s.get("/v1/users/2/profile?viewer=3").await, 403, "forbidden");

    // The server key may act as anyone, but only the author changes an item
    // when a user token acts.
    s.token = Some(KEY.into());
    let theirs = s.post_item(2, json!({})).await;
    s.token = Some(token("1", 600));
    assert_error(&s.delete(&format!("/v1/items/{theirs}")).await, 403, "forbidden");
    assert_error(&s.patch(&format!("/v1/items/{theirs}"), json!({"visibility": "followers"})).await, 403, "forbidden");
    assert_eq!(s.delete(&format!("/v1/items/{mine}")).await.0, StatusCode::NO_CONTENT);
    s.token = Some(KEY.into());
    assert_eq!(s.delete(&format!("/v1/items/{theirs}")).await.0, StatusCode::NO_CONTENT);
    // Health stays open for probes.
    s.token = None;
    assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
    s.stop().await;
}

#[test]
fn an_open_server_refuses_a_public_address() {
    let mut c = tideway_service::Config::default();
    c.server.listen = "0.0.0.0:8080".parse().expect("addr");
    assert!(c.check().is_err_and(|e| e.contains("loopback")));
    c.auth.server_keys = vec![KEY.into()];
    assert!(c.check().is_ok());
}
