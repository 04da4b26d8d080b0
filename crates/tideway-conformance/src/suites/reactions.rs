//! The `reactions` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Items::set_reaction` and `Items::hydration`: reactions are idempotent
/// per (item, user, kind); a page's counts per kind (sorted, positive only),
/// replies and live reposts, and the viewer's own marks, in one call; one
/// live repost per user and original.
pub async fn reactions(b: &dyn Backend) {
    use tideway_store::{ItemCounts, ViewerMarks};
    let u = UserId;
    created(b, 6000, 1, false).await;
    assert!(b.set_reaction(ItemId(6000), u(2), "like", true, &[]).await.expect("react"));
    assert!(!b.set_reaction(ItemId(6000), u(2), "like", true, &[]).await.expect("react again"), "idempotent");
    assert!(b.set_reaction(ItemId(6000), u(3), "like", true, &[]).await.expect("react"));
    assert!(b.set_reaction(ItemId(6000), u(3), "x_wow", true, &[]).await.expect("react"));
    assert!(b.set_reaction(ItemId(6000), u(2), "like", false, &[]).await.expect("take back"));
    assert!(!b.set_reaction(ItemId(6000), u(2), "like", false, &[]).await.expect("take back again"), "idempotent");
    let first = match linked(b, 6002, 4, Some(6000), None).await {
        CreateOutcome::Created(i) => i,
        other => panic!("the first repost: {other:?}"),
    };
    assert_eq!(linked(b, 6003, 4, Some(6000), None).await, CreateOutcome::AlreadyReposted(first), "one repost a user");
    assert!(matches!(linked(b, 6004, 5, None, Some((6000, 1))).await, CreateOutcome::Created(_)));
    let h = b.hydration(&[ItemId(6000), ItemId(6999)], Some(u(3))).await.expect("hydration");
    assert_eq!(
        h[0],
        (
            ItemCounts { replies: 1, reposts: 1, reactions: vec![("like".into(), 1), ("x_wow".into(), 1)] },
            Some(ViewerMarks { reposted: false, reactions: vec!["like".into(), "x_wow".into()] })
        )
    );
    assert_eq!(h[1], (ItemCounts::default(), Some(ViewerMarks::default())), "an unknown item counts nothing");
    let h = b.hydration(&[ItemId(6000)], Some(u(4))).await.expect("hydration");
    assert_eq!(h[0].1, Some(ViewerMarks { reposted: true, reactions: vec![] }));
    assert_eq!(b.hydration(&[ItemId(6000)], None).await.expect("hydration")[0].1, None, "no viewer, no marks");
    b.update_item(ItemId(6002), &ItemChange::Delete).await.expect("delete").expect("existed");
    b.update_item(ItemId(6004), &ItemChange::Delete).await.expect("delete").expect("existed");
    let h = b.hydration(&[ItemId(6000)], Some(u(4))).await.expect("hydration");
    assert_eq!((h[0].0.replies, h[0].0.reposts, h[0].1.as_ref().map(|m| m.reposted)), (0, 0, Some(false)));
    assert!(matches!(linked(b, 6005, 4, Some(6000), None).await, CreateOutcome::Created(_)), "may repost again");
    assert!(b.set_reaction(ItemId(6000), u(3), "like", false, &[]).await.expect("take back"));
    let h = b.hydration(&[ItemId(6000)], Some(u(3))).await.expect("hydration");
    assert_eq!(
        (h[0].0.reactions.clone(), h[0].0.reposts),
        (vec![("x_wow".into(), 1)], 1),
        "a count at zero is left out"
    );

    // Counts stay exact when many writers change one item's at once (on
    // SQL the counts are rows the writes keep, so they contend).
    created(b, 6100, 1, false).await;
    let likes = (10..42).map(|x| b.set_reaction(ItemId(6100), u(x), "like", true, &[]));
    assert!(futures_util::future::join_all(likes).await.into_iter().all(|r| r.expect("react")));
    let replies = (0..8u64).map(|x| async move {
        let reply = linked(b, 6101 + x, 50 + x, None, Some((6100, 1))).await;
        let repost = linked(b, 6201 + x, 50 + x, Some(6100), None).await;
        (reply, repost)
    });
    for (reply, repost) in futures_util::future::join_all(replies).await {
        assert!(matches!((reply, repost), (CreateOutcome::Created(_), CreateOutcome::Created(_))));
    }
    let changes = (10..26).map(|x| b.set_reaction(ItemId(6100), u(x), "like", false, &[]));
    let deletes = (0..3u64).map(|x| b.update_item(ItemId(6101 + x), &ItemChange::Delete));
    let (changes, deletes) =
        tokio::join!(futures_util::future::join_all(changes), futures_util::future::join_all(deletes));
    assert!(changes.into_iter().all(|r| r.expect("take back")));
    assert!(deletes.into_iter().all(|r| r.expect("delete").is_some()));
    let h = b.hydration(&[ItemId(6100)], None).await.expect("hydration");
    assert_eq!(
        (h[0].0.reactions.clone(), h[0].0.replies, h[0].0.reposts),
        (vec![("like".into(), 16)], 5, 8),
        "counts after concurrent writes"
    );

    // A reaction carries its notification ops: applied with it, and again
    // (as once) by a repeat that changes no reaction, which is how a repeat
    // completes a call that failed between the two.
    use tideway_core::notify::{Notice, Op, Verb};
    let liked = |actor: u64, at: i64, open: u64| Op::Stand {
        notice: Notice {
            user: u(1),
            verb: Verb::Reaction { item: ItemId(6100), kind: "like".into() },
            actor: u(actor),
            at: Millis(at),
            stands: true,
            about: Some(ItemId(6100)),
        },
        open,
    };
    let groups = async || {
        let p = b.notifications(u(1), None, 10).await.expect("notifications");
        p.groups
            .iter()
            .map(|g| (g.id, g.actors.iter().map(|a| a.0).collect::<Vec<_>>(), g.actor_count))
            .collect::<Vec<_>>()
    };
    assert!(b.set_reaction(ItemId(6100), u(60), "like", true, &[liked(60, 200, 7000)]).await.expect("react"));
    assert_eq!(groups().await, vec![(7000, vec![60], 1)], "the reaction's notification");
    assert!(!b.set_reaction(ItemId(6100), u(60), "like", true, &[liked(60, 200, 7001)]).await.expect("again"));
    assert_eq!(groups().await, vec![(7000, vec![60], 1)], "a repeat adds nothing");
    // (as if the notification of user 61's like had failed)
    assert!(b.set_reaction(ItemId(6100), u(61), "like", true, &[]).await.expect("react"));
    assert!(!b.set_reaction(ItemId(6100), u(61), "like", true, &[liked(61, 201, 7002)]).await.expect("repeat"));
    assert_eq!(groups().await, vec![(7000, vec![61, 60], 2)], "ops applied though the reaction did not change");
    let likes = (62..78).map(|x| b.set_reaction(ItemId(6100), u(x), "like", true, &[]));
    assert!(futures_util::future::join_all(likes).await.into_iter().all(|r| r.expect("react")));
    let notes = (62..78).map(|x| async move {
        b.set_reaction(ItemId(6100), u(x), "like", true, &[liked(x, 300 + x as i64, 7100 + x)]).await
    });
    assert!(futures_util::future::join_all(notes).await.into_iter().all(|r| !r.expect("repeat")));
    assert_eq!(groups().await[0].2, 18, "every concurrent call's notification, in one group");
    let h = b.hydration(&[ItemId(6100)], None).await.expect("hydration");
    assert_eq!(h[0].0.reactions, vec![("like".into(), 34)], "16 + 2 + 16 likes");
}
