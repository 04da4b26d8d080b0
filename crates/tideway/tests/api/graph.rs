use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn follow_unfollow_lists_and_counts() {
    let s = spawn().await;
    for t in [2, 3, 4] {
        s.follow(1, t).await;
    }
    s.follow(5, 2).await;
    let (st, v) = s.put("/v1/users/1/following/2").await;
    assert_eq!(st, StatusCode::OK, "following again is idempotent: {v}");
    assert_eq!(v["following"], json!(true));
    let (_, u) = s.get("/v1/users/1").await;
    assert_eq!((u["following_count"].clone(), u["followers_count"].clone()), (json!(3), json!(0)));
    let (_, u2) = s.get("/v1/users/2").await;
    assert_eq!(u2["followers_count"], json!(2));

    // Newest first, paged by cursor with no gap and no duplicate.
    let (st, p1) = s.get("/v1/users/1/following?limit=2").await;
    assert_eq!(st, StatusCode::OK, "{p1}");
    let ids1: Vec<&str> =
        p1["users"].as_array().expect("users").iter().map(|u| u["id"].as_str().expect("id")).collect();
    assert_eq!(ids1, vec!["4", "3"]);
    let c = p1["next_cursor"].as_str().expect("cursor");
    let (_, p2) = s.get(&format!("/v1/users/1/following?limit=2&cursor={c}")).await;
    let ids2: Vec<&str> =
        p2["users"].as_array().expect("users").iter().map(|u| u["id"].as_str().expect("id")).collect();
    assert_eq!(ids2, vec!["2"]);
    assert_eq!(p2["next_cursor"], json!(null));
    let (_, f) = s.get("/v1/users/2/followers").await;
    assert_eq!(f["users"].as_array().map(Vec::len), Some(2));
    // A following cursor is not a followers cursor.
    assert_error(&s.get(&format!("/v1/users/1/followers?cursor={c}")).await, 400, "invalid_cursor");

    assert_eq!(s.delete("/v1/users/1/following/3").await.0, StatusCode::NO_CONTENT);
    assert_eq!(s.delete("/v1/users/1/following/3").await.0, StatusCode::NO_CONTENT, "idempotent");
    let (_, r) = s.get("/v1/users/1/relationships?targets=2,3,5").await;
    assert_eq!(
        r["relationships"][0],
        json!({"target": "2", "following": true, "followed_by": false, "blocking": false, "blocked_by": false, "muting": false})
    );
    assert_eq!(r["relationships"][1]["following"], json!(false));
    assert_error(&s.put("/v1/users/1/following/1").await, 400, "invalid_argument");
    s.stop().await;
}

#[tokio::test]
async fn blocks_remove_follows_both_ways_and_forbid_new_ones() {
    let s = spawn().await;
    s.follow(1, 2).await;
    s.follow(2, 1).await;
    let (st, v) = s.put("/v1/users/1/blocks/2").await;
    assert_eq!((st, v), (StatusCode::OK, json!({"blocking": true})));
    let (_, r) = s.get("/v1/users/1/relationships?targets=2").await;
    assert_eq!(
        r["relationships"][0],
        json!({"target": "2", "following": false, "followed_by": false, "blocking": true, "blocked_by": false, "muting": false})
    );
    assert_error(&s.put("/v1/users/2/following/1").await, 403, "forbidden");
    assert_error(&s.put("/v1/users/1/following/2").await, 403, "forbidden");
    assert_eq!(s.delete("/v1/users/1/blocks/2").await.0, StatusCode::NO_CONTENT);
    s.follow(2, 1).await;
    let (st, v) = s.put("/v1/users/1/mutes/2").await;
    assert_eq!((st, v), (StatusCode::OK, json!({"muting": true})));
    let (_, r) = s.get("/v1/users/1/relationships?targets=2").await;
    assert_eq!(r["relationships"][0]["muting"], json!(true));
    assert_eq!(r["relationships"][0]["followed_by"], json!(true), "a mute keeps follows");
    assert_eq!(s.delete("/v1/users/1/mutes/2").await.0, StatusCode::NO_CONTENT);
    assert_error(&s.put("/v1/users/1/blocks/1").await, 400, "invalid_argument");
    s.stop().await;
}

#[tokio::test]
async fn batch_follow_reports_each_target_and_the_limit_holds() {
    let s = spawn_with(|c| c.graph.max_following = 3).await;
    s.follow(1, 2).await;
    s.put("/v1/users/9/blocks/1").await;
    let (st, v) = s.post("/v1/users/1/following", json!({"targets": ["2", "9", "3", "4", "5"]})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let statuses: Vec<(&str, &str)> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (r["target"].as_str().expect("t"), r["status"].as_str().expect("s")))
        .collect();
    assert_eq!(
        statuses,
        vec![("2", "already"), ("9", "blocked"), ("3", "followed"), ("4", "followed"), ("5", "limit")]
    );
    assert_error(&s.put("/v1/users/1/following/6").await, 422, "limit_exceeded");
    let (_, u) = s.get("/v1/users/1").await;
    assert_eq!(u["following_count"], json!(3));
    s.stop().await;
}
