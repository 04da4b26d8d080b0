use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test]
async fn reactions_are_idempotent_counted_per_kind_and_hydrated() {
    let s = spawn().await;
    let id = s.post_item(1, json!({})).await;
    let like = |u: u64| format!("/v1/items/{id}/reactions/like/{u}");
    let (st, v) = s.put(&like(2)).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["counts"]["likes"], json!(1));
    assert_eq!(s.put(&like(2)).await.1["counts"]["likes"], json!(1), "idempotent");
    s.put(&like(3)).await;
    let (_, v) = s.put(&format!("/v1/items/{id}/reactions/x_clap/2")).await;
    assert_eq!(v["counts"], json!({"likes": 2, "replies": 0, "reposts": 0, "reactions": {"like": 2, "x_clap": 1}}));
    // The viewer's own reactions, on the item and on feeds.
    let (_, item) = s.get(&format!("/v1/items/{id}?viewer=2")).await;
    assert_eq!(item["item"]["viewer"]["reactions"], json!(["like", "x_clap"]));
    s.follow(2, 1).await;
    s.drained().await;
    let (_, page) = s.home_ids(2, "").await;
    assert_eq!(page["entries"][0]["item"]["viewer"]["reactions"], json!(["like", "x_clap"]));
    assert_eq!(page["entries"][0]["item"]["counts"]["likes"], json!(2));
    assert_eq!(s.delete(&like(2)).await.0, StatusCode::NO_CONTENT);
    assert_eq!(s.delete(&like(2)).await.0, StatusCode::NO_CONTENT, "idempotent");
    let (_, item) = s.get(&format!("/v1/items/{id}?viewer=2")).await;
    assert_eq!(item["item"]["counts"]["reactions"], json!({"like": 1, "x_clap": 1}));
    assert_eq!(item["item"]["viewer"]["reactions"], json!(["x_clap"]));
    s.stop().await;
}

#[tokio::test]
async fn reaction_bad_input_deleted_items_and_blocks() {
    let s = spawn().await;
    let id = s.post_item(1, json!({})).await;
    for bad in ["Like", "1like", "a-b", "x".repeat(33).as_str(), "l%20ike"] {
        assert_error(&s.put(&format!("/v1/items/{id}/reactions/{bad}/2")).await, 400, "invalid_argument");
    }
    assert_error(&s.put(&format!("/v1/items/{id}/reactions/like/0")).await, 400, "invalid_argument");
    assert_error(&s.put("/v1/items/424242/reactions/like/2").await, 404, "not_found");
    s.put("/v1/users/1/blocks/3").await;
    assert_error(&s.put(&format!("/v1/items/{id}/reactions/like/3")).await, 403, "forbidden");
    // The liker's own block of the author separates them as well.
    s.put("/v1/users/4/blocks/1").await;
    assert_error(&s.put(&format!("/v1/items/{id}/reactions/like/4")).await, 403, "forbidden");
    // A block does not keep anyone from taking a reaction back.
    assert_eq!(s.delete(&format!("/v1/items/{id}/reactions/like/4")).await.0, StatusCode::NO_CONTENT);
    // A followers-only item: a follower reacts, anyone else finds no item.
    let followers = s.post_item(1, json!({"visibility": "followers"})).await;
    assert_eq!(s.put("/v1/users/5/following/1").await.0, StatusCode::OK);
    let (status, counts) = s.put(&format!("/v1/items/{followers}/reactions/like/5")).await;
    assert_eq!(status, StatusCode::OK, "body: {counts}");
    assert_error(&s.put(&format!("/v1/items/{followers}/reactions/like/2")).await, 404, "not_found");
    let hidden = s.post_item(1, json!({"visibility": "mentioned"})).await;
    assert_error(&s.put(&format!("/v1/items/{hidden}/reactions/like/2")).await, 404, "not_found");
    s.delete(&format!("/v1/items/{id}")).await;
    assert_error(&s.put(&format!("/v1/items/{id}/reactions/like/2")).await, 404, "not_found");
    assert_error(&s.delete(&format!("/v1/items/{id}/reactions/like/2")).await, 404, "not_found");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_likes_of_one_item_are_counted_exactly() {
    let s = spawn().await;
    let id = s.post_item(1, json!({})).await;
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let (c, base, id) = (s.client.clone(), s.base.clone(), id.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..50u64 {
                let u = 1000 + w * 100 + i;
                let r = c.put(format!("{base}/v1/items/{id}/reactions/like/{u}")).send().await.expect("put");
                assert_eq!(r.status(), StatusCode::OK);
                if i % 5 == 0 {
                    // Some users change their mind, concurrently with others liking.
                    let r = c.delete(format!("{base}/v1/items/{id}/reactions/like/{u}")).send().await.expect("del");
                    assert_eq!(r.status(), StatusCode::NO_CONTENT);
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let (_, v) = s.get(&format!("/v1/items/{id}")).await;
    assert_eq!(v["item"]["counts"]["likes"], json!(8 * 40));
    s.stop().await;
}
