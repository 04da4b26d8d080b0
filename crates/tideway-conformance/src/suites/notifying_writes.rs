//! The `notifying_writes` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// The writes that carry their cause's notifications (`*_notifying`): a
/// create applies them when it stores the item, never for an idempotent
/// repeat or a taken id; an update when it changes the item; a follow those
/// of the targets it newly follows; an unfollow when it removes one. And
/// `Notifications::stored_causes`: every item (deleted too), follow and
/// reaction once, in pages, each kind from its start.
pub async fn notifying_writes(b: &dyn Backend) {
    use tideway_core::notify::{Notice, Op, Verb};
    use tideway_store::{CausePos, FollowStatus, StoredCause};
    let u = UserId;
    let stand = |user: u64, verb: Verb, actor: u64, at: i64, open: u64| Op::Stand {
        notice: Notice { user: u(user), verb, actor: u(actor), at: Millis(at), stands: true, about: None },
        open,
    };
    let groups = async |user: u64| {
        let p = b.notifications(u(user), None, 50).await.expect("notifications");
        p.groups.iter().map(|g| (g.id, g.verb.clone(), g.actor_count)).collect::<Vec<_>>()
    };

    // A mention stored with its item.
    let mut post = Item::new(ItemId(100), u(2), ItemKind::Post);
    post.mentions = vec![u(1)];
    post.idempotency_key = Some("k".into());
    let mention = [stand(1, Verb::Mention { item: ItemId(100) }, 2, 100, 7000)];
    let made = b.create_item_notifying(post.clone(), false, Millis(100), &mention).await.expect("create");
    assert!(matches!(made, CreateOutcome::Created(_)), "{made:?}");
    assert_eq!(groups(1).await, vec![(7000, Verb::Mention { item: ItemId(100) }, 1)], "the mention, with its item");
    // A repeat (same idempotency key, a new id) and a taken id apply nothing.
    let mut again = post.clone();
    again.id = ItemId(101);
    let other = [stand(1, Verb::Mention { item: ItemId(101) }, 2, 101, 7001)];
    let repeat = b.create_item_notifying(again, false, Millis(101), &other).await.expect("repeat");
    assert!(matches!(repeat, CreateOutcome::Existing(ref i) if i.id == ItemId(100)), "{repeat:?}");
    let mut taken = Item::new(ItemId(100), u(3), ItemKind::Post);
    taken.mentions = vec![u(1)];
    let taken_ops = [stand(1, Verb::Mention { item: ItemId(100) }, 3, 100, 7002)];
    assert!(b.create_item_notifying(taken, false, Millis(100), &taken_ops).await.is_err(), "the id is taken");
    assert_eq!(groups(1).await.len(), 1, "a repeat and a refused create notify no one");

    // A delete's ops go with it, and only when it deletes.
    let forget = [Op::Forget { user: u(1), item: ItemId(100) }];
    // (a like about item 100, which a `Forget` of it would take along)
    let like = Notice {
        user: u(1),
        verb: Verb::Reaction { item: ItemId(100), kind: "like".into() },
        actor: u(5),
        at: Millis(110),
        stands: true,
        about: Some(ItemId(100)),
    };
    b.notify(&[Op::Stand { notice: like, open: 7003 }]).await.expect("a like about 100");
    let fall = [Op::Fall { user: u(1), verb: Verb::Mention { item: ItemId(100) }, actor: u(2), at: Millis(100) }];
    assert!(b.update_item_notifying(ItemId(100), &ItemChange::Delete, &fall).await.expect("delete").is_some());
    assert_eq!(groups(1).await.len(), 1, "the mention fell with the delete; the like stands");
    assert!(b.update_item_notifying(ItemId(100), &ItemChange::Delete, &forget).await.expect("again").is_none());
    assert_eq!(groups(1).await.len(), 1, "a delete of a deleted item applies nothing");

    // Follows: only the newly followed targets' ops.
    b.follow_many(u(3), &[u(4)], Millis(120), 100).await.expect("an earlier follow");
    let follow_ops = [stand(4, Verb::Follow, 3, 130, 7010), stand(6, Verb::Follow, 3, 130, 7011)];
    let st = b.follow_many_notifying(u(3), &[u(4), u(6)], Millis(130), 100, &follow_ops).await.expect("follow");
    assert_eq!(st, vec![FollowStatus::Already(Millis(120)), FollowStatus::Followed(Millis(130))]);
    assert!(groups(4).await.is_empty(), "a follow that stood already notifies nothing anew");
    assert_eq!(groups(6).await, vec![(7011, Verb::Follow, 1)], "the new follow, with its notification");
    // Unfollow: its fall goes with it, only when it removes the follow.
    let unfollow = [Op::Fall { user: u(6), verb: Verb::Follow, actor: u(3), at: Millis(140) }];
    assert!(b.unfollow_notifying(u(3), u(6), &unfollow).await.expect("unfollow"));
    assert!(groups(6).await.is_empty(), "the follow's event fell with it");
    b.notify(&[stand(6, Verb::Follow, 3, 150, 7012)]).await.expect("an event with no follow under it");
    assert!(!b.unfollow_notifying(u(3), u(6), &unfollow).await.expect("no follow to remove"));
    assert_eq!(groups(6).await.len(), 1, "an unfollow that removed nothing applies nothing");

    // What is stored, scanned in pages of two.
    b.create_item(Item::new(ItemId(90), u(7), ItemKind::Post), false, Millis(90)).await.expect("item 90");
    b.set_reaction(ItemId(90), u(8), "like", true, &[]).await.expect("like");
    b.set_reaction(ItemId(90), u(8), "wow", true, &[]).await.expect("wow");
    b.set_reaction(ItemId(100), u(9), "like", true, &[]).await.expect("like of the deleted");
    b.set_reaction(ItemId(90), u(9), "like", false, &[]).await.expect("nothing to take back");
    let mut scanned = Vec::new();
    for start in [CausePos::Items(None), CausePos::Follows(None), CausePos::Reactions(None)] {
        let mut pos = start;
        loop {
            let page = b.stored_causes(&pos, 2).await.expect("stored causes");
            assert!(page.len() <= 2, "{page:?}");
            let Some(last) = page.last() else { break };
            assert_eq!(std::mem::discriminant(&last.pos()), std::mem::discriminant(&pos), "one kind a page");
            pos = last.pos();
            scanned.extend(page);
        }
    }
    let items: Vec<(u64, bool)> = scanned
        .iter()
        .filter_map(|c| match c {
            StoredCause::Item(i) => Some((i.id.0, i.deleted)),
            _ => None,
        })
        .collect();
    assert_eq!(items, vec![(90, false), (100, true)], "every item once, deleted ones too");
    let mentions = scanned.iter().find_map(|c| match c {
        StoredCause::Item(i) if i.id == ItemId(100) => Some(i.mentions.clone()),
        _ => None,
    });
    assert_eq!(mentions, Some(vec![u(1)]), "an item comes with what it names");
    let follows: Vec<(u64, u64, i64)> = scanned
        .iter()
        .filter_map(|c| match c {
            StoredCause::Follow { from, to, since } => Some((from.0, to.0, since.0)),
            _ => None,
        })
        .collect();
    assert_eq!(follows, vec![(3, 4, 120)], "every follow standing, with its time");
    let mut reactions: Vec<(u64, u64, String)> = scanned
        .iter()
        .filter_map(|c| match c {
            StoredCause::Reaction { item, user, kind } => Some((item.0, user.0, kind.clone())),
            _ => None,
        })
        .collect();
    let in_order = reactions.clone();
    reactions.sort();
    assert_eq!(in_order, reactions, "reactions in (item, user, kind) order");
    assert_eq!(
        reactions,
        vec![(90, 8, "like".to_owned()), (90, 8, "wow".to_owned()), (100, 9, "like".to_owned())],
        "every reaction standing, each kind its own"
    );
}
