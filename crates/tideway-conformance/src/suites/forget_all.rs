//! The `forget_all` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Hub::forget_all`: the shared half forgets what it kept (inboxes, hot
/// marks, activity, removal notes, tokens), and works on as before.
pub async fn forget_all(b: &dyn Backend) {
    use tideway_store::{FactKey, Removal};
    let (u, author) = (UserId(1), UserId(2));
    b.finish_rebuild(u, &[10, 20], 0).await.expect("an inbox");
    b.mark_unpushed(author, 30).await.expect("a mark");
    b.touch(u, Millis(1_000)).await.expect("a read");
    let at = Millis::now();
    b.note_removals(&[Removal::Item { author, item: ItemId(20), key: Some(20) }], at, 60_000).await.expect("a note");
    let keys = [FactKey::Item(ItemId(20))];
    b.mint_fact_tokens(&keys).await.expect("mint");
    let before = b.fact_tokens(&keys).await.expect("tokens");
    b.forget_all().await.expect("forget");
    assert_eq!(b.inbox_floor(u).await.expect("floor"), None, "the inbox is gone");
    assert_eq!(b.unpushed_keys(&[author]).await.expect("marks"), vec![None], "the mark is gone");
    assert_eq!(b.last_active(&[u]).await.expect("activity"), vec![None], "the activity is gone");
    let removed = b.removed_since(u, &[author], Millis(0)).await.expect("notes");
    assert!(removed.items.is_empty() && removed.others.is_empty(), "the notes are gone: {removed:?}");
    b.mint_fact_tokens(&keys).await.expect("mint");
    let after = b.fact_tokens(&keys).await.expect("tokens");
    assert!(before[0].is_none() || after[0] != before[0], "no token comes back: {before:?} then {after:?}");
    b.finish_rebuild(u, &[40], 0).await.expect("an inbox again");
    assert_eq!(b.inbox_floor(u).await.expect("floor"), Some(0), "and works on");
}
