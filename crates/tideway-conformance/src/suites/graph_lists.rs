//! The `graph_lists` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Graph` lists and relations: followers and following newest first,
/// paged by `(since, id)`; fan-out chunks oldest first, resumed after a
/// position; relations both ways; a block removes follows both ways and
/// refuses new ones until lifted; mutes.
pub async fn graph_lists(b: &dyn Backend) {
    use tideway_store::{FollowStatus, ListKind};
    let u = UserId;
    let at = |ms: i64, id: u64| (u(id), Millis(ms));
    b.follow_many(u(10), &[u(1), u(2), u(3)], Millis(100), 10).await.expect("follow");
    b.follow_many(u(11), &[u(1)], Millis(101), 10).await.expect("follow");
    b.follow_many(u(12), &[u(1)], Millis(102), 10).await.expect("follow");
    let list = async |user: u64, which, after, limit| b.list(u(user), which, after, limit).await.expect("list");
    assert_eq!(list(1, ListKind::Followers, None, 10).await, vec![at(102, 12), at(101, 11), at(100, 10)]);
    assert_eq!(
        list(1, ListKind::Followers, Some((Millis(101), u(11))), 10).await,
        vec![at(100, 10)],
        "after a position"
    );
    assert_eq!(list(1, ListKind::Followers, None, 1).await, vec![at(102, 12)], "a limit");
    assert_eq!(list(10, ListKind::Following, None, 2).await, vec![at(100, 3), at(100, 2)], "ties by id, newest first");
    assert_eq!(list(99, ListKind::Followers, None, 10).await, vec![], "an unknown user");
    let chunk = async |after, limit| b.followers_chunk(u(1), after, limit).await.expect("chunk");
    assert_eq!(chunk(None, 2).await, vec![(Millis(100), u(10)), (Millis(101), u(11))], "oldest first");
    assert_eq!(chunk(Some((Millis(101), u(11))), 10).await, vec![(Millis(102), u(12))], "resumed after a position");
    let mut followees = b.followees(u(10)).await.expect("followees");
    followees.sort_unstable();
    assert_eq!(followees, vec![u(1), u(2), u(3)]);

    b.follow_many(u(1), &[u(10)], Millis(103), 10).await.expect("follow back");
    let r = b.relations(u(10), &[u(1), u(11), u(99)]).await.expect("relations");
    assert!(r[0].following && r[0].followed_by && !r[0].blocking && !r[0].blocked_by && !r[0].muting);
    assert!(!r[1].following && !r[1].followed_by, "no relation to 11");
    assert_eq!(r[2], tideway_core::Relation::default(), "nor to an unknown user");

    b.set_block(u(1), u(10), true, Millis(104)).await.expect("block");
    assert!(b.relations(u(1), &[u(10)]).await.expect("relations")[0].blocking);
    let r = b.relations(u(10), &[u(1)]).await.expect("relations")[0];
    assert!(r.blocked_by && !r.following && !r.followed_by, "the block removed both follows: {r:?}");
    assert_eq!(list(1, ListKind::Followers, None, 10).await, vec![at(102, 12), at(101, 11)]);
    assert_eq!(b.follow_many(u(10), &[u(1)], Millis(105), 10).await.expect("follow"), vec![FollowStatus::Blocked]);
    b.set_block(u(1), u(10), false, Millis(106)).await.expect("unblock");
    assert!(!b.relations(u(10), &[u(1)]).await.expect("relations")[0].blocked_by);
    assert_eq!(
        b.follow_many(u(10), &[u(1)], Millis(107), 10).await.expect("follow"),
        vec![FollowStatus::Followed(Millis(107))]
    );
    assert_eq!(list(1, ListKind::Followers, None, 1).await, vec![at(107, 10)], "a new follow, at its time");

    b.set_mute(u(10), u(2), true, Millis(108)).await.expect("mute");
    assert!(b.relations(u(10), &[u(2)]).await.expect("relations")[0].muting);
    assert!(!b.relations(u(2), &[u(10)]).await.expect("relations")[0].muting, "a mute is one way");
    b.set_mute(u(10), u(2), false, Millis(109)).await.expect("unmute");
    assert!(!b.relations(u(10), &[u(2)]).await.expect("relations")[0].muting);
    assert!(b.unfollow(u(10), u(2)).await.expect("unfollow"));
    assert_eq!(list(2, ListKind::Followers, None, 10).await, vec![]);
}
