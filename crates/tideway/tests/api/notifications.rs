//! Notifications over HTTP: groups as SPEC section 2 defines them (what
//! gathers, what opens a new group once read, undo, hiding, deletes), the
//! seen and read marks with their exact counts, paging, and bad input.

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn notifications(s: &TestServer, u: u64, query: &str) -> Value {
    let (st, v) = s.get(&format!("/v1/users/{u}/notifications?{query}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    v
}

/// Each group as (verb, actors, actor_count).
fn shape(v: &Value) -> Vec<(String, Vec<String>, u64)> {
    v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            let actors = g["actors"].as_array().expect("actors").iter().map(|a| a.as_str().expect("id").to_owned());
            (g["verb"].as_str().expect("verb").to_owned(), actors.collect(), g["actor_count"].as_u64().expect("count"))
        })
        .collect()
}

fn strs(ids: &[u64]) -> Vec<String> {
    ids.iter().map(u64::to_string).collect()
}

#[tokio::test]
async fn groups_gather_close_on_read_and_follow_every_undo() {
    let s = spawn().await;
    let post = s.post_item(1, json!({"body": {"t": "hello"}})).await;
    for u in [2, 3, 4] {
        assert_eq!(s.put(&format!("/v1/items/{post}/reactions/like/{u}")).await.0, StatusCode::OK);
    }
    // A repeated like changes nothing; one's own like notifies no one.
    assert_eq!(s.put(&format!("/v1/items/{post}/reactions/like/4")).await.0, StatusCode::OK);
    assert_eq!(s.put(&format!("/v1/items/{post}/reactions/like/1")).await.0, StatusCode::OK);
    let v = notifications(&s, 1, "").await;
    assert_eq!(shape(&v), vec![("reaction".into(), strs(&[4, 3, 2]), 3)], "{v}");
    let g = &v["groups"][0];
    assert_eq!((g["kind"].clone(), g["item"]["id"].clone()), (json!("like"), json!(post)));
    assert!(g["item"]["viewer"]["reactions"].is_array(), "hydrated for the user: {g}");
    assert_eq!(
        (g["seen"].clone(), g["read"].clone(), v["unseen"].clone(), v["unread"].clone()),
        (json!(false), json!(false), json!(1), json!(1))
    );

    // A follow, a reply and a mention: each its own group, newest first.
    // (A few milliseconds apart: a mark covers every group at its time.)
    let tick = || tokio::time::sleep(std::time::Duration::from_millis(3));
    tick().await;
    s.follow(5, 1).await;
    tick().await;
    let reply = s.post_item(6, json!({"reply_to": post})).await;
    tick().await;
    let mention = s.post_item(7, json!({"mentions": ["1"]})).await;
    tick().await;
    let v = notifications(&s, 1, "").await;
    let verbs: Vec<String> = shape(&v).into_iter().map(|g| g.0).collect();
    assert_eq!(verbs, ["mention", "reply", "follow", "reaction"]);
    assert_eq!(
        (v["groups"][0]["item"]["id"].clone(), v["groups"][1]["item"]["id"].clone()),
        (json!(mention), json!(reply))
    );
    assert!(v["groups"][2].get("item").is_none(), "a follow has no item");
    assert_eq!((v["unseen"].clone(), v["unread"].clone()), (json!(4), json!(4)));

    // Read everything: the next like opens a new group; the read one stays.
    assert_eq!(s.post("/v1/users/1/notifications/read", json!({})).await.0, StatusCode::NO_CONTENT);
    assert_eq!(notifications(&s, 1, "").await["unread"], json!(0));
    assert_eq!(s.put(&format!("/v1/items/{post}/reactions/like/8")).await.0, StatusCode::OK);
    let v = notifications(&s, 1, "").await;
    let sh = shape(&v);
    assert_eq!(sh[0], ("reaction".into(), strs(&[8]), 1));
    assert_eq!(sh[4], ("reaction".into(), strs(&[4, 3, 2]), 3), "the read group as it was");
    assert_eq!((v["groups"][0]["read"].clone(), v["groups"][1]["read"].clone()), (json!(false), json!(true)));
    assert_eq!((v["unseen"].clone(), v["unread"].clone()), (json!(5), json!(1)));

    // Seen up to the follow group: it and everything older are seen.
    let follow_group = v["groups"][3]["id"].as_str().expect("id").to_owned();
    let (st, _) = s.post("/v1/users/1/notifications/seen", json!({"up_to": follow_group})).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let v = notifications(&s, 1, "").await;
    let seen: Vec<bool> = v["groups"].as_array().expect("groups").iter().map(|g| g["seen"] == json!(true)).collect();
    assert_eq!(seen, [false, false, false, true, true]);
    assert_eq!(v["unseen"], json!(3));

    // Undo: an unlike, a block (its follow falls too), an unblock.
    assert_eq!(s.delete(&format!("/v1/items/{post}/reactions/like/4")).await.0, StatusCode::NO_CONTENT);
    assert_eq!(s.put("/v1/users/1/blocks/3").await.0, StatusCode::OK);
    assert_eq!(s.put("/v1/users/1/blocks/5").await.0, StatusCode::OK);
    let sh = shape(&notifications(&s, 1, "").await);
    assert_eq!(sh.iter().map(|g| g.0.as_str()).collect::<Vec<_>>(), ["reaction", "mention", "reply", "reaction"]);
    assert_eq!(sh[3], ("reaction".into(), strs(&[2]), 1), "3 is hidden, 4 unliked");
    assert_eq!(s.delete("/v1/users/1/blocks/3").await.0, StatusCode::NO_CONTENT);
    assert_eq!(shape(&notifications(&s, 1, "").await)[3], ("reaction".into(), strs(&[3, 2]), 2), "unblocked");
    // Muting hides too.
    assert_eq!(s.put("/v1/users/1/mutes/7").await.0, StatusCode::OK);
    assert_eq!(shape(&notifications(&s, 1, "").await).len(), 3);
    assert_eq!(s.delete("/v1/users/1/mutes/7").await.0, StatusCode::NO_CONTENT);

    // Deleting the mention takes its group; deleting the post takes the
    // likes and the reply to it.
    assert_eq!(s.delete(&format!("/v1/items/{mention}")).await.0, StatusCode::NO_CONTENT);
    assert_eq!(shape(&notifications(&s, 1, "").await).len(), 3);
    assert_eq!(s.delete(&format!("/v1/items/{post}")).await.0, StatusCode::NO_CONTENT);
    let v = notifications(&s, 1, "").await;
    assert!(shape(&v).is_empty(), "{v}");
    assert_eq!((v["unseen"].clone(), v["unread"].clone()), (json!(0), json!(0)));
    s.stop().await;
}

#[tokio::test]
async fn pages_walk_each_group_once_and_marks_only_move_forward() {
    let s = spawn().await;
    for u in 2..=8 {
        s.follow(u, 1).await;
        s.post_item(u, json!({"mentions": ["1"]})).await;
    }
    // One follow group (7 actors, 5 shown) and 7 mention groups.
    let all = notifications(&s, 1, "").await;
    assert_eq!(all["groups"].as_array().expect("groups").len(), 8);
    let follow =
        all["groups"].as_array().expect("groups").iter().find(|g| g["verb"] == json!("follow")).expect("follow");
    assert_eq!((follow["actor_count"].clone(), follow["actors"].clone()), (json!(7), json!(strs(&[8, 7, 6, 5, 4]))));
    let mut walked = Vec::new();
    let mut query = "limit=3".to_owned();
    loop {
        let v = notifications(&s, 1, &query).await;
        walked.extend(v["groups"].as_array().expect("groups").iter().map(|g| g["id"].clone()));
        match v["next_cursor"].as_str() {
            Some(c) => query = format!("limit=3&before={c}"),
            None => break,
        }
    }
    let expected: Vec<Value> = all["groups"].as_array().expect("groups").iter().map(|g| g["id"].clone()).collect();
    assert_eq!(walked, expected, "every group once, in order");

    // An older up_to after a newer one changes nothing.
    let newest = expected[0].as_str().expect("id");
    let oldest = expected[7].as_str().expect("id");
    assert_eq!(s.post("/v1/users/1/notifications/read", json!({"up_to": newest})).await.0, StatusCode::NO_CONTENT);
    assert_eq!(s.post("/v1/users/1/notifications/read", json!({"up_to": oldest})).await.0, StatusCode::NO_CONTENT);
    assert_eq!(notifications(&s, 1, "").await["unread"], json!(0));
    // The body may be left out.
    let (st, _) = s.raw(reqwest::Method::POST, "/v1/users/1/notifications/seen", None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    assert_eq!(notifications(&s, 1, "").await["unseen"], json!(0));
    s.stop().await;
}

#[tokio::test]
async fn notifications_refuse_bad_input() {
    let s = spawn().await;
    s.follow(2, 1).await;
    s.follow(1, 2).await;
    let theirs = notifications(&s, 2, "").await["groups"][0]["id"].as_str().expect("a group").to_owned();
    assert_error(&s.post("/v1/users/1/notifications/read", json!({"up_to": theirs})).await, 404, "not_found");
    assert_error(&s.post("/v1/users/1/notifications/seen", json!({"up_to": "424242"})).await, 404, "not_found");
    assert_error(&s.post("/v1/users/1/notifications/seen", json!({"up_to": "abc"})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/users/1/notifications/seen", json!({"up_to": 5})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/users/1/notifications/seen", json!({"upto": "5"})).await, 400, "invalid_argument");
    assert_error(&s.post("/v1/users/1/notifications/seen", json!([1])).await, 400, "invalid_argument");
    let (st, body) = s.raw(reqwest::Method::POST, "/v1/users/1/notifications/read", Some(("text/plain", "x"))).await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    for path in ["/v1/users/0/notifications", "/v1/users/x/notifications", "/v1/users/1/notifications?limit=0"] {
        assert_error(&s.get(path).await, 400, "invalid_argument");
    }
    assert_error(&s.get("/v1/users/1/notifications?before=garbage").await, 400, "invalid_cursor");
    // A cursor of another user's notifications, or of another feed.
    for u in 3..=5 {
        s.post_item(u, json!({"mentions": ["2"]})).await;
    }
    let v = notifications(&s, 2, "limit=1").await;
    let c = v["next_cursor"].as_str().expect("more").to_owned();
    assert_error(&s.get(&format!("/v1/users/1/notifications?before={c}")).await, 400, "invalid_cursor");
    assert_error(&s.get(&format!("/v1/users/2/home?before={c}")).await, 400, "invalid_cursor");
    assert_eq!(
        notifications(&s, 2, &format!("before={c}")).await["groups"].as_array().map(Vec::len),
        Some(3),
        "theirs"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_user_token_reads_and_marks_only_its_own_notifications() {
    let mut s = spawn_authed().await;
    s.token = Some(KEY.into());
    s.follow(2, 1).await;
    s.token = Some(user_token(1));
    assert_eq!(notifications(&s, 1, "").await["unread"], json!(1));
    assert_eq!(s.post("/v1/users/1/notifications/read", json!({})).await.0, StatusCode::NO_CONTENT);
    s.token = Some(user_token(2));
    assert_error(&s.get("/v1/users/1/notifications").await, 403, "forbidden");
    assert_error(&s.post("/v1/users/1/notifications/seen", json!({})).await, 403, "forbidden");
    s.token = None;
    assert_error(&s.get("/v1/users/1/notifications").await, 401, "unauthenticated");
    s.stop().await;
}
