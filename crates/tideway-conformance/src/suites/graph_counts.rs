//! The `graph_counts` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Graph::counts`: following, followers and live items follow every write
/// that changes them — follows (repeated, refused at the limit or by a
/// block), unfollows, a block removing follows both ways, items created and
/// deleted.
pub async fn graph_counts(b: &dyn Backend) {
    use tideway_store::{FollowStatus, UserCounts};
    let u = |n: u64| UserId(n);
    let counts = async |n: u64| b.counts(u(n)).await.expect("counts");
    assert_eq!(counts(1).await, UserCounts::default(), "an unknown user counts nothing");
    let st = b.follow_many(u(1), &[u(2), u(3), u(4), u(2)], Millis(10), 3).await.expect("follow");
    assert_eq!(st[3], FollowStatus::Already(Millis(10)));
    b.follow_many(u(2), &[u(3)], Millis(11), 3).await.expect("follow");
    assert!(matches!(b.follow_many(u(1), &[u(5)], Millis(12), 3).await.expect("follow")[0], FollowStatus::Limit));
    assert_eq!(counts(1).await, UserCounts { following: 3, followers: 0, items: 0 });
    assert_eq!(counts(3).await, UserCounts { following: 0, followers: 2, items: 0 });
    assert!(b.unfollow(u(1), u(4)).await.expect("unfollow"));
    assert!(!b.unfollow(u(1), u(4)).await.expect("unfollow again"), "nothing to remove");
    assert_eq!((counts(1).await.following, counts(4).await.followers), (2, 0));
    b.follow_many(u(3), &[u(1)], Millis(13), 3).await.expect("follow back");
    b.set_block(u(1), u(3), true, Millis(14)).await.expect("block");
    assert_eq!(counts(1).await, UserCounts { following: 1, followers: 0, items: 0 }, "1 → 3 and 3 → 1 removed");
    assert_eq!(counts(3).await, UserCounts { following: 0, followers: 1, items: 0 });
    for id in [5001, 5002, 5003] {
        created(b, id, 2, false).await;
    }
    b.update_item(ItemId(5002), &ItemChange::Delete).await.expect("delete").expect("existed");
    b.update_item(ItemId(5002), &ItemChange::Delete).await.expect("delete again");
    b.update_item(ItemId(5001), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch");
    assert_eq!(counts(2).await, UserCounts { following: 1, followers: 1, items: 2 });
}
