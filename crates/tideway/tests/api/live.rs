//! The live feed over HTTP (SPEC section 5): a session's life and its wrong
//! steps, the order (live, upcoming, replay), the snapshot that later pages
//! read while sessions change state, hidden anchors, expiry (`410`), who may
//! act, and bad input.

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

fn in_ms(ms: i64) -> String {
    tideway_core::Millis(tideway_core::Millis::now().0 + ms).to_rfc3339()
}

async fn create(s: &TestServer, anchor: u64, start_in_ms: i64) -> String {
    let (st, v) = s
        .post(
            "/v1/live",
            json!({"anchor": anchor.to_string(), "scheduled_start": in_ms(start_in_ms), "body": {"t": anchor}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["session"]["state"], json!("upcoming"), "{v}");
    v["session"]["id"].as_str().expect("id").to_owned()
}

async fn step(s: &TestServer, id: &str, which: &str) -> Value {
    let (st, v) = s.post(&format!("/v1/live/{id}/{which}"), json!({})).await;
    assert_eq!(st, StatusCode::OK, "{which} {id}: {v}");
    v["session"].clone()
}

/// A walk of `u`'s live feed at `limit`: every page's session ids (with
/// state), in order.
async fn walk(s: &TestServer, u: u64, limit: usize) -> Vec<Vec<(String, String)>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("?limit={limit}&cursor={c}"),
            None => format!("?limit={limit}"),
        };
        let (st, v) = s.get(&format!("/v1/users/{u}/live{q}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        pages.push(ids(&v));
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return pages,
        }
        assert!(pages.len() < 50, "runaway live paging");
    }
}

fn ids(v: &Value) -> Vec<(String, String)> {
    v["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["session"]["id"].as_str().expect("id").to_owned(),
                e["session"]["state"].as_str().expect("state").to_owned(),
            )
        })
        .collect()
}

fn tick() -> tokio::time::Sleep {
    tokio::time::sleep(std::time::Duration::from_millis(3))
}

#[tokio::test]
async fn a_session_lives_once_and_wrong_steps_are_conflicts() {
    let s = spawn().await;
    let id = create(&s, 1, 60_000).await;
    assert_error(&s.post(&format!("/v1/live/{id}/end"), json!({})).await, 409, "conflict");
    let live = step(&s, &id, "start").await;
    assert_eq!((live["state"].clone(), live["ended_at"].clone()), (json!("live"), Value::Null));
    assert!(live["started_at"].is_string(), "{live}");
    assert_error(&s.post(&format!("/v1/live/{id}/start"), json!({})).await, 409, "conflict");
    let ended = step(&s, &id, "end").await;
    assert_eq!(ended["state"], json!("replay"));
    assert_eq!((ended["body"].clone(), ended["anchor"].clone()), (json!({"t": 1}), json!("1")));
    assert!(ended["ended_at"].as_str() >= ended["started_at"].as_str(), "{ended}");
    assert_error(&s.post(&format!("/v1/live/{id}/end"), json!({})).await, 409, "conflict");
    assert_error(&s.post(&format!("/v1/live/{id}/start"), json!({})).await, 409, "conflict");
    assert_error(&s.post("/v1/live/424242/start", json!({})).await, 404, "not_found");
    s.stop().await;
}

#[tokio::test]
async fn live_then_upcoming_then_replay_each_once_while_states_change() {
    let s = spawn().await;
    // Viewer 10 follows anchors 1..=6.
    for a in 1..=6 {
        s.follow(10, a).await;
    }
    // Ended: e1 (anchor 1), then e2 (anchor 2).
    let e1 = create(&s, 1, 1000).await;
    step(&s, &e1, "start").await;
    step(&s, &e1, "end").await;
    tick().await;
    let e2 = create(&s, 2, 1000).await;
    step(&s, &e2, "start").await;
    step(&s, &e2, "end").await;
    // Live: l3 then l4 (newest start first: l4, l3).
    let l3 = create(&s, 3, 1000).await;
    step(&s, &l3, "start").await;
    tick().await;
    let l4 = create(&s, 4, 1000).await;
    step(&s, &l4, "start").await;
    // Upcoming: u5 in 2 hours, u6 in 1 hour (soonest first: u6, u5).
    let u5 = create(&s, 5, 7_200_000).await;
    let u6 = create(&s, 6, 3_600_000).await;
    // Someone the viewer does not follow: never shown.
    let other = create(&s, 9, 1000).await;
    step(&s, &other, "start").await;

    let sid = |x: &str, st: &str| (x.to_owned(), st.to_owned());
    let want = vec![
        sid(&l4, "live"),
        sid(&l3, "live"),
        sid(&u6, "upcoming"),
        sid(&u5, "upcoming"),
        sid(&e2, "replay"),
        sid(&e1, "replay"),
    ];
    for limit in [1, 2, 4, 6, 20] {
        let pages = walk(&s, 10, limit).await;
        assert_eq!(pages.concat(), want, "limit {limit}");
        assert!(pages.iter().all(|p| p.len() <= limit));
    }

    // States change mid-walk: the walk shows each session once, as its
    // snapshot holds it; a session that ends meanwhile is not in replay again.
    let (_, first) = s.get("/v1/users/10/live?limit=2").await;
    assert_eq!(ids(&first), want[..2]);
    step(&s, &l3, "end").await;
    step(&s, &u6, "start").await;
    let new = create(&s, 1, 1000).await;
    step(&s, &new, "start").await;
    let mut rest = Vec::new();
    let mut cursor = first["next_cursor"].as_str().expect("more").to_owned();
    loop {
        let (st, v) = s.get(&format!("/v1/users/10/live?limit=2&cursor={cursor}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        rest.extend(ids(&v));
        match v["next_cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(rest, want[2..], "the snapshot's states; l3's end and the new session wait for the next walk");
    // A fresh walk sees the new states.
    let now = walk(&s, 10, 20).await.concat();
    assert_eq!(
        now,
        vec![
            sid(&new, "live"),
            sid(&u6, "live"),
            sid(&l4, "live"),
            sid(&u5, "upcoming"),
            sid(&l3, "replay"),
            sid(&e2, "replay"),
            sid(&e1, "replay"),
        ]
    );

    // Hidden anchors are left out: a mute, a block either way.
    assert_eq!(s.put("/v1/users/10/mutes/4").await.0, StatusCode::OK);
    assert_eq!(s.put("/v1/users/2/blocks/10").await.0, StatusCode::OK);
    let hidden = walk(&s, 10, 3).await.concat();
    assert!(!hidden.iter().any(|(id, _)| id == &l4 || id == &e2), "{hidden:?}");
    assert_eq!(hidden.len(), 5);
    s.stop().await;
}

#[tokio::test]
async fn a_walk_expires_after_the_snapshot_ttl() {
    let s = spawn_with(|c| c.live.snapshot_ttl = tideway_config::HumanDuration(std::time::Duration::from_millis(300)))
        .await;
    for a in 1..=3 {
        s.follow(10, a).await;
        create(&s, a, 60_000).await;
    }
    let (_, v) = s.get("/v1/users/10/live?limit=1").await;
    let c = v["next_cursor"].as_str().expect("more").to_owned();
    let (st, v2) = s.get(&format!("/v1/users/10/live?limit=1&cursor={c}")).await;
    assert_eq!(st, StatusCode::OK, "{v2}");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_error(&s.get(&format!("/v1/users/10/live?limit=1&cursor={c}")).await, 410, "cursor_expired");
    assert_eq!(s.get("/v1/users/10/live?limit=1").await.0, StatusCode::OK, "starting over works");
    s.stop().await;
}

#[tokio::test]
async fn only_the_anchor_acts_and_a_viewer_reads_only_their_own_feed() {
    let mut s = spawn_authed().await;
    s.token = Some(user_token(1));
    let id = create(&s, 1, 1000).await;
    assert_error(&s.post("/v1/live", json!({"anchor": "2", "scheduled_start": in_ms(1000)})).await, 403, "forbidden");
    s.token = Some(user_token(2));
    assert_error(&s.post(&format!("/v1/live/{id}/start"), json!({})).await, 403, "forbidden");
    assert_error(&s.get("/v1/users/1/live").await, 403, "forbidden");
    assert_eq!(s.get("/v1/users/2/live").await.0, StatusCode::OK);
    s.token = Some(user_token(1));
    step(&s, &id, "start").await;
    s.token = Some(KEY.into());
    step(&s, &id, "end").await;
    s.stop().await;
}

#[tokio::test]
async fn bad_live_input_is_refused_whole() {
    let s = spawn().await;
    let bad = [
        json!({"anchor": "1"}),
        json!({"anchor": "1", "scheduled_start": "tomorrow"}),
        json!({"anchor": "1", "scheduled_start": in_ms(-3 * 86_400_000)}),
        json!({"anchor": "1", "scheduled_start": in_ms(400 * 86_400_000)}),
        json!({"anchor": "0", "scheduled_start": in_ms(1000)}),
        json!({"anchor": "1", "scheduled_start": in_ms(1000), "extra": 1}),
        json!({"anchor": "1", "scheduled_start": in_ms(1000), "body": "text"}),
    ];
    for b in bad {
        assert_error(&s.post("/v1/live", b.clone()).await, 400, "invalid_argument");
    }
    let big = json!({"anchor": "1", "scheduled_start": in_ms(1000), "body": {"t": "x".repeat(17 * 1024)}});
    assert_eq!(s.post("/v1/live", big).await.0.as_u16(), 413);
    assert_error(&s.post("/v1/live/abc/start", json!({})).await, 400, "invalid_argument");
    assert_error(&s.get("/v1/users/1/live?cursor=garbage").await, 400, "invalid_cursor");
    assert_error(&s.get("/v1/users/1/live?limit=0").await, 400, "invalid_argument");
    // A cursor of another viewer's walk, or of another feed.
    s.follow(10, 1).await;
    for _ in 0..2 {
        create(&s, 1, 1000).await;
    }
    let (_, v) = s.get("/v1/users/10/live?limit=1").await;
    let c = v["next_cursor"].as_str().expect("more");
    assert_error(&s.get(&format!("/v1/users/11/live?cursor={c}")).await, 400, "invalid_cursor");
    let (_, home) = s.get("/v1/users/10/home").await;
    if let Some(hc) = home["prev_cursor"].as_str() {
        assert_error(&s.get(&format!("/v1/users/10/live?cursor={hc}")).await, 400, "invalid_cursor");
    }
    let (_, list) = s.get("/v1/users/10/live").await;
    assert_eq!(list["entries"].as_array().map(Vec::len), Some(2), "nothing was written by the bad requests");
    s.stop().await;
}

#[tokio::test]
async fn an_anchor_has_at_most_a_hundred_open_sessions() {
    let s = spawn().await;
    let mut first = String::new();
    for i in 0..100 {
        let id = create(&s, 1, 1000 + i).await;
        if i == 0 {
            first = id;
        }
    }
    assert_error(
        &s.post("/v1/live", json!({"anchor": "1", "scheduled_start": in_ms(5000)})).await,
        422,
        "limit_exceeded",
    );
    step(&s, &first, "start").await;
    step(&s, &first, "end").await;
    create(&s, 1, 5000).await;
    s.stop().await;
}
