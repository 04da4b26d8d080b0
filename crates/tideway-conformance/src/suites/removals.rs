//! The `removals` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Removals`: every note at or after the time asked, for the user asked
/// (the others they lost) or the authors asked (their items, with the
/// appearance that went), once each; nothing for others or from before.
pub async fn removals(b: &dyn Backend) {
    use tideway_store::{Removal, Removed};
    let u = UserId;
    let item = |author: u64, item: u64, key: Option<u64>| Removal::Item { author: u(author), item: ItemId(item), key };
    let sorted = |mut r: Removed| {
        r.items.sort();
        r.others.sort();
        r
    };
    assert_eq!(b.removed_since(u(1), &[u(2), u(3)], Millis(0)).await.expect("empty"), Removed::default());
    b.note_removals(&[item(2, 20, Some(20))], Millis(1_000), 60_000).await.expect("an item");
    b.note_removals(
        &[item(3, 30, None), item(3, 31, Some(35)), Removal::Relation { user: u(1), other: u(4) }],
        Millis(2_000),
        60_000,
    )
    .await
    .expect("items and a relation");
    b.note_removals(&[item(2, 21, Some(21)), item(2, 20, Some(20))], Millis(1_500), 60_000).await.expect("again");
    assert_eq!(
        sorted(b.removed_since(u(1), &[], Millis(0)).await.expect("the user's")),
        Removed { items: vec![], others: vec![u(4)] }
    );
    assert_eq!(
        sorted(b.removed_since(u(9), &[u(2), u(3), u(5)], Millis(1_000)).await.expect("the authors'")),
        Removed {
            items: vec![(ItemId(20), Some(20)), (ItemId(21), Some(21)), (ItemId(30), None), (ItemId(31), Some(35)),],
            others: vec![]
        },
        "each item once, at its newest note"
    );
    assert_eq!(
        sorted(b.removed_since(u(1), &[u(2), u(3)], Millis(1_600)).await.expect("since")),
        Removed { items: vec![(ItemId(30), None), (ItemId(31), Some(35))], others: vec![u(4)] },
        "notes before the time asked are left out"
    );
    assert_eq!(b.removed_since(u(9), &[u(4), u(5)], Millis(0)).await.expect("others"), Removed::default());
    let many: Vec<UserId> = (100..2100).map(UserId).collect();
    assert_eq!(b.removed_since(u(9), &many, Millis(0)).await.expect("2,000 authors"), Removed::default());
    // Notes far older than the newest are forgotten.
    b.note_removals(&[item(2, 22, None)], Millis(200_000), 60_000).await.expect("much later");
    assert_eq!(
        b.removed_since(u(9), &[u(2)], Millis(0)).await.expect("pruned").items,
        vec![(ItemId(22), None)],
        "only the notes within the window of the newest"
    );
}
