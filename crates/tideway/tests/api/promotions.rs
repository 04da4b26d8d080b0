use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn ts(offset_s: i64) -> String {
    tideway_core::Millis(tideway_core::Millis::now().0 + offset_s * 1000).to_rfc3339()
}

/// Walks home older to the end: every entry as (item id, reason).
async fn walk(s: &TestServer, u: u64, limit: usize) -> Vec<Vec<(String, String)>> {
    let mut pages = Vec::new();
    let mut q = format!("limit={limit}");
    loop {
        let (_, page) = s.home_ids(u, &q).await;
        let rows: Vec<(String, String)> = page["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| (e["item"]["id"].as_str().expect("id").to_owned(), e["reason"].as_str().expect("r").to_owned()))
            .collect();
        assert!(rows.len() <= limit);
        pages.push(rows);
        match page["next_cursor"].as_str() {
            Some(c) => q = format!("limit={limit}&before={c}"),
            None => return pages,
        }
    }
}

#[tokio::test]
async fn promotions_are_woven_in_without_taking_positions() {
    let s = spawn().await;
    s.follow(1, 2).await;
    let mut organic = Vec::new();
    for i in 0..10 {
        organic.push(s.post_item(2, json!({"body": {"i": i}})).await);
    }
    organic.reverse();
    let ad = s.post_item(9, json!({"kind": "ad", "body": {"buy": "now"}})).await;
    s.drained().await;
    let (st, v) =
        s.post("/v1/promotions", json!({"item": ad, "every": 3, "starts_at": ts(-60), "ends_at": ts(3600)})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["promotion"]["every"], json!(3));

    // One page of 6: organic 1..=3, the ad, organic 4..=5 (the ad counts within limit;
    // at most once per page, so not again after organic 6).
    let pages = walk(&s, 1, 6).await;
    let first: Vec<&str> = pages[0].iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(first, vec!["authored", "authored", "authored", "promoted", "authored", "authored"]);
    assert_eq!(pages[0][3].0, ad);
    // Positions count from the top across pages: the next page holds organic
    // 6..=10 and the ad again after organic 6 and 9 only once.
    let second: Vec<&str> = pages[1].iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(second, vec!["authored", "promoted", "authored", "authored", "authored", "authored"]);
    // Stripped of promotions, the walk is exactly the organic feed.
    let stripped: Vec<String> =
        pages.iter().flatten().filter(|(_, r)| r != "promoted").map(|(id, _)| id.clone()).collect();
    assert_eq!(stripped, organic);
    // A promoted entry's cursor continues right after the organic entry before it.
    let (_, page) = s.home_ids(1, "limit=4").await;
    assert_eq!(page["entries"][3]["reason"], json!("promoted"));
    let c = page["entries"][3]["cursor"].as_str().expect("cursor");
    let (after_ad, _) = s.home_ids(1, &format!("limit=1&before={c}")).await;
    assert_eq!(after_ad, vec![organic[3].clone()]);
    s.stop().await;
}

#[tokio::test]
async fn expired_hidden_and_deleted_promotions_stop_showing() {
    let s = spawn().await;
    s.follow(1, 2).await;
    for _ in 0..4 {
        s.post_item(2, json!({})).await;
    }
    let gone = s.post_item(9, json!({"kind": "ad"})).await;
    let past = s.post_item(9, json!({"kind": "ad"})).await;
    let blocked = s.post_item(8, json!({"kind": "ad"})).await;
    s.drained().await;
    for (item, start, end) in [(&gone, -60, 3600), (&past, -7200, -3600), (&blocked, -60, 3600)] {
        let (st, v) = s
            .post("/v1/promotions", json!({"item": item, "every": 1, "starts_at": ts(start), "ends_at": ts(end)}))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
    }
    s.put("/v1/users/1/blocks/8").await;
    let reasons = |p: &Value| -> Vec<String> {
        p["entries"].as_array().expect("e").iter().map(|e| e["reason"].as_str().expect("r").to_owned()).collect()
    };
    let (_, page) = s.home_ids(1, "limit=10").await;
    assert_eq!(reasons(&page).iter().filter(|r| *r == "promoted").count(), 1, "{page}");
    s.delete(&format!("/v1/items/{gone}")).await;
    let (_, page) = s.home_ids(1, "limit=10").await;
    assert_eq!(reasons(&page), vec!["authored"; 4]);
    s.stop().await;
}

#[tokio::test]
async fn promotion_bad_input() {
    let mut s = spawn_with(|c| {
        c.auth.server_keys = vec!["server-key-0123456789".into()];
        c.auth.jwt_secret = Some("jwt-secret-0123456789".into());
    })
    .await;
    s.token = Some("server-key-0123456789".into());
    let ad = s.post_item(9, json!({"kind": "ad"})).await;
    let p = |every: u32, a: i64, b: i64| json!({"item": ad, "every": every, "starts_at": ts(a), "ends_at": ts(b)});
    assert_error(&s.post("/v1/promotions", p(3, 60, 0)).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/promotions", p(3, 60, 60)).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/promotions", p(0, 0, 60)).await, 400, "invalid_argument");
    assert_error(
        &s.post("/v1/promotions", json!({"item": "424242", "every": 3, "starts_at": ts(0), "ends_at": ts(60)})).await,
        404,
        "not_found",
    );
    assert_error(
        &s.post("/v1/promotions", json!({"item": ad, "every": 3, "starts_at": "soon", "ends_at": ts(60)})).await,
        400,
        "invalid_argument",
    );
    assert_error(
        &s.post("/v1/promotions", json!({"item": ad, "every": -1, "starts_at": ts(0), "ends_at": ts(60)})).await,
        400,
        "invalid_argument",
    );
    assert_error(&s.post("/v1/promotions", json!({"item": ad, "every": 3})).await, 400, "invalid_argument");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("t").as_secs();
    s.token = Some(
        jsonwebtoken::encode(
            &jsonwebtoken::Header::default(),
            &json!({"sub": "9", "exp": now + 600}),
            &jsonwebtoken::EncodingKey::from_secret(b"jwt-secret-0123456789"),
        )
        .expect("jwt"),
    );
    assert_error(&s.post("/v1/promotions", p(3, 0, 60)).await, 403, "forbidden");
    s.stop().await;
}
