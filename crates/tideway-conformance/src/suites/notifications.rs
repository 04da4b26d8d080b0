//! The `notifications` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Notifications`: events gather in the newest unread group of their key
/// and open a new one once it is read; replies and mentions are groups of
/// their own; a group shows its 5 newest visible actors, their exact count
/// and its newest time; undoing, forgetting a deleted item and hiding take
/// actors out (and unhiding puts them back); an actor hidden by the graph
/// when the event starts is kept hidden; pages walk each group once below a
/// cursor; marks only move forward, `up_to` names the user's own group, and
/// the counts above them are exact; ops apply once however often they are
/// sent; two writers of one key at once make one group.
pub async fn notifications(b: &dyn Backend) {
    use tideway_core::notify::{Mark, Notice, Op, Verb};
    let u = UserId;
    let like = |item: u64| Verb::Reaction { item: ItemId(item), kind: "like".into() };
    let stand = |user: u64, verb: Verb, actor: u64, at: i64, open: u64| {
        let about = match &verb {
            Verb::Reaction { item, .. } | Verb::Repost { item } => Some(*item),
            Verb::Reply { .. } => Some(ItemId(900)),
            _ => None,
        };
        Op::Stand { notice: Notice { user: u(user), verb, actor: u(actor), at: Millis(at), stands: true, about }, open }
    };
    let page = async |user: u64, before: Option<(Millis, u64)>, limit: usize| {
        b.notifications(u(user), before, limit).await.expect("notifications")
    };
    let shape = |p: &tideway_store::NotifyPage| {
        p.groups
            .iter()
            .map(|g| (g.id, g.actors.iter().map(|a| a.0).collect::<Vec<_>>(), g.actor_count, g.latest_at.0))
            .collect::<Vec<_>>()
    };

    let empty = page(1, None, 10).await;
    assert!(empty.groups.is_empty() && empty.unseen == 0 && empty.unread == 0, "{empty:?}");
    assert!(b.mark_notifications(u(1), Mark::Read, None).await.expect("mark"), "nothing to mark is no error");

    // Seven likes of item 900 gather; the group shows the 5 newest.
    let likes: Vec<Op> = (2..=8).map(|a| stand(1, like(900), a, 100 + a as i64, 5000 + a)).collect();
    b.notify(&likes).await.expect("likes");
    b.notify(&likes[..2]).await.expect("sent again");
    let p = page(1, None, 10).await;
    assert_eq!(shape(&p), vec![(5002, vec![8, 7, 6, 5, 4], 7, 108)], "one group, opened by the first like");
    assert_eq!((p.unseen, p.unread), (1, 1));

    // A follow and a reply, each its own group; a mention too.
    b.notify(&[
        stand(1, Verb::Follow, 3, 110, 5010),
        stand(1, Verb::Reply { item: ItemId(901) }, 4, 111, 5011),
        stand(1, Verb::Mention { item: ItemId(902) }, 5, 112, 5012),
        stand(1, Verb::Mention { item: ItemId(903) }, 5, 113, 5013),
    ])
    .await
    .expect("more");
    let p = page(1, None, 10).await;
    assert_eq!(p.groups.iter().map(|g| g.id).collect::<Vec<_>>(), vec![5013, 5012, 5011, 5010, 5002]);
    assert_eq!(p.groups[2].verb, Verb::Reply { item: ItemId(901) });
    assert_eq!((p.unseen, p.unread), (5, 5));

    // Pages walk below a cursor, each group once.
    let first = page(1, None, 2).await;
    let last = first.groups.last().expect("two groups");
    let rest = page(1, Some((last.latest_at, last.id)), 10).await;
    assert_eq!(rest.groups.iter().map(|g| g.id).collect::<Vec<_>>(), vec![5011, 5010, 5002]);

    // Seen up to the follow group: the groups at or below its time are seen.
    assert!(b.mark_notifications(u(1), Mark::Seen, Some(5010)).await.expect("seen"));
    let p = page(1, None, 10).await;
    assert_eq!((p.seen, p.unseen, p.unread), (Millis(110), 3, 5));
    // Marks never move back; a foreign or unknown group is refused.
    assert!(b.mark_notifications(u(1), Mark::Seen, Some(5002)).await.expect("older"));
    assert_eq!(page(1, None, 10).await.seen, Millis(110), "an older up_to changes nothing");
    b.notify(&[stand(2, Verb::Follow, 9, 50, 5020)]).await.expect("user 2");
    assert!(!b.mark_notifications(u(1), Mark::Read, Some(5020)).await.expect("foreign"), "user 2's group");
    assert!(!b.mark_notifications(u(1), Mark::Read, Some(424242)).await.expect("unknown"));
    assert_eq!(page(1, None, 10).await.unread, 5, "a refused mark moves nothing");

    // Read everything: a new like opens a new group; the read one stays.
    assert!(b.mark_notifications(u(1), Mark::Read, None).await.expect("read"));
    assert_eq!(page(1, None, 10).await.unread, 0);
    b.notify(&[stand(1, like(900), 9, 120, 5030), stand(1, like(900), 10, 121, 5031)]).await.expect("after read");
    let p = page(1, None, 10).await;
    assert_eq!(shape(&p)[0], (5030, vec![10, 9], 2, 121), "a new group after the read");
    assert_eq!(shape(&p)[5], (5002, vec![8, 7, 6, 5, 4], 7, 108), "the read group as it was");
    assert_eq!((p.unseen, p.unread), (4, 1));

    // Undo: the newest actor of the read group takes their like back.
    b.notify(&[Op::Fall { user: u(1), verb: like(900), actor: u(8), at: Millis(500) }]).await.expect("unlike");
    b.notify(&[Op::Fall { user: u(1), verb: like(900), actor: u(8), at: Millis(500) }]).await.expect("again");
    // A fall of an event older than the standing one (a delete sent again
    // after its actor acted anew) leaves the standing one.
    b.notify(&[Op::Fall { user: u(1), verb: like(900), actor: u(7), at: Millis(100) }]).await.expect("an older fall");
    let g = page(1, None, 10).await.groups.into_iter().find(|g| g.id == 5002).expect("still shown");
    assert_eq!((g.actors.clone(), g.actor_count, g.latest_at), (vec![u(7), u(6), u(5), u(4), u(3)], 6, Millis(107)));

    // Hiding an actor takes them out everywhere; unhiding puts them back.
    b.notify(&[Op::Hide { user: u(1), actor: u(5), hidden: true }]).await.expect("hide");
    let p = page(1, None, 10).await;
    assert!(p.groups.iter().all(|g| g.id != 5012 && g.id != 5013), "the mentions by 5 are hidden");
    let g = p.groups.iter().find(|g| g.id == 5002).expect("shown");
    assert_eq!((g.actor_count, g.actors.clone()), (5, vec![u(7), u(6), u(4), u(3), u(2)]));
    assert_eq!((p.unseen, p.unread), (2, 1), "hidden groups leave the counts");
    b.notify(&[Op::Hide { user: u(1), actor: u(5), hidden: false }]).await.expect("unhide");
    assert_eq!(page(1, None, 10).await.groups.len(), 6);

    // A deleted item takes every event about it along.
    b.notify(&[Op::Forget { user: u(1), item: ItemId(900) }]).await.expect("forget");
    let p = page(1, None, 10).await;
    assert_eq!(
        p.groups.iter().map(|g| g.id).collect::<Vec<_>>(),
        vec![5013, 5012, 5010],
        "likes and the reply to 900 gone"
    );
    assert_eq!((p.unseen, p.unread), (2, 0));
    // Marking up to a group with nothing standing moves to its last time.
    assert!(b.mark_notifications(u(1), Mark::Seen, Some(5030)).await.expect("emptied group"));
    assert_eq!(page(1, None, 10).await.seen, Millis(121));

    // The graph hides an actor whose event starts while blocked or muted.
    b.set_mute(u(3), u(11), true, Millis(130)).await.expect("mute");
    b.set_block(u(12), u(3), true, Millis(130)).await.expect("block");
    b.notify(&[
        stand(3, Verb::Follow, 11, 131, 5040),
        stand(3, Verb::Follow, 12, 132, 5041),
        stand(3, Verb::Follow, 13, 133, 5042),
    ])
    .await
    .expect("follows");
    let p = page(3, None, 10).await;
    // Hidden events stand in no group's count, so 13 opens a group of its own.
    assert_eq!(shape(&p), vec![(5042, vec![13], 1, 133)], "muted 11 and blocking 12 are hidden");
    b.notify(&[Op::Hide { user: u(3), actor: u(11), hidden: false }]).await.expect("unmute");
    assert_eq!(shape(&page(3, None, 10).await), vec![(5042, vec![13], 1, 133), (5040, vec![11], 1, 131)]);

    // Two writers of one key at once make one group.
    let (one, other) = ([stand(4, like(950), 2, 200, 5050)], [stand(4, like(950), 3, 201, 5051)]);
    let (x, y) = tokio::join!(b.notify(&one), b.notify(&other));
    x.expect("one");
    y.expect("other");
    let p = page(4, None, 10).await;
    assert_eq!(p.groups.len(), 1, "{p:?}");
    assert_eq!((p.groups[0].actor_count, p.unread), (2, 1));
}
