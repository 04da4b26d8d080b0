//! The `fact_tokens` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `FactTokens`: an item's token stands until a change of its facts
/// begins; is absent while any change begun has not ended; and is new once
/// the last one ends (also after an end with nothing begun: a change that
/// lapsed). And the pages of a backend built on them show every change of
/// the counts and marks acknowledged before, read on a second node too.
pub async fn fact_tokens(b: &dyn Backend) {
    use tideway_store::FactKey;
    let (x, y) = (FactKey::Item(ItemId(9001)), FactKey::Followees(UserId(9002)));
    b.mint_fact_tokens(&[x, y]).await.expect("mint");
    let first = b.fact_tokens(&[x, y]).await.expect("tokens");
    let (tx, ty) = (first[0].expect("x has a token"), first[1].expect("y has a token"));
    assert_eq!(b.fact_tokens(&[y, x]).await.expect("again"), vec![Some(ty), Some(tx)], "tokens stand");
    b.mint_fact_tokens(&[x, y]).await.expect("mint again");
    assert_eq!(b.fact_tokens(&[x, y]).await.expect("minted twice"), vec![Some(tx), Some(ty)], "minting keeps a token");
    b.begin_fact_change(&[x]).await.expect("begin");
    assert_eq!(b.fact_tokens(&[x]).await.expect("changing"), vec![None], "no token while x changes");
    b.mint_fact_tokens(&[x]).await.expect("mint while changing");
    assert_eq!(b.fact_tokens(&[x]).await.expect("changing"), vec![None], "minting leaves a change in flight");
    b.begin_fact_change(&[x]).await.expect("a second change");
    b.end_fact_change(&[x]).await.expect("the first ends");
    assert_eq!(b.fact_tokens(&[x]).await.expect("one left"), vec![None], "none while a change is in flight");
    b.end_fact_change(&[x]).await.expect("the second ends");
    let after = b.fact_tokens(&[x]).await.expect("ended")[0].expect("a token once every change ended");
    assert_ne!(after, tx, "a new token after a change");
    assert_eq!(b.fact_tokens(&[x]).await.expect("stands")[0], Some(after));
    // An end with nothing begun (the change lapsed) still moves the token.
    b.end_fact_change(&[x]).await.expect("a late end");
    let late = b.fact_tokens(&[x]).await.expect("after a late end")[0].expect("a token");
    assert!(late != after && late != tx, "a late end moves the token to a new one");
    assert!(b.fact_tokens(&[]).await.expect("none asked").is_empty());

    let (records, promotions) = (FactKey::Records, FactKey::Promotions);
    b.mint_fact_tokens(&[records, promotions]).await.expect("mint");
    let global = b.fact_tokens(&[records, promotions]).await.expect("global keys");
    assert!(global.iter().all(Option::is_some));
    b.begin_fact_change(&[records]).await.expect("begin");
    assert_eq!(b.fact_tokens(&[records, promotions]).await.expect("one changing")[0], None);
    b.end_fact_change(&[records]).await.expect("end");
    assert!(b.fact_tokens(&[records]).await.expect("ended")[0].is_some_and(|t| Some(t) != global[0]));

    // Pages through the layer: counts and marks read, kept, and changed.
    use tideway_store::{ItemCounts, PageQuery, ViewerMarks};
    let (viewer, other, author) = (UserId(1), UserId(2), UserId(3));
    let item = ItemId(9100);
    created(b, item.0, author.0, false).await;
    let page = |v: UserId| async move {
        let hydrate = [item];
        let q = PageQuery { viewer: Some(v), hydrate: &hydrate, originals: &hydrate, ..Default::default() };
        b.page_facts(&q).await.expect("facts").hydrated.remove(0)
    };
    let none = (ItemCounts::default(), Some(ViewerMarks::default()));
    assert_eq!(page(viewer).await, none);
    assert_eq!(page(viewer).await, none, "twice");
    assert!(b.set_reaction(item, viewer, "like", true, &[]).await.expect("like"));
    let liked = ItemCounts { reactions: vec![("like".into(), 1)], ..Default::default() };
    let mine = ViewerMarks { reactions: vec!["like".into()], ..Default::default() };
    assert_eq!(page(viewer).await, (liked.clone(), Some(mine.clone())), "the like shows");
    assert_eq!(page(other).await, (liked.clone(), Some(ViewerMarks::default())), "to another viewer");
    assert_eq!(page(viewer).await, (liked.clone(), Some(mine.clone())), "and again");
    assert!(matches!(linked(b, 9101, other.0, Some(item.0), None).await, CreateOutcome::Created(_)));
    let reposted = ItemCounts { reposts: 1, ..liked.clone() };
    assert_eq!(page(other).await, (reposted.clone(), Some(ViewerMarks { reposted: true, reactions: vec![] })));
    assert_eq!(page(viewer).await, (reposted, Some(mine)));
    b.update_item(ItemId(9101), &ItemChange::Delete).await.expect("the repost deleted");
    b.set_reaction(item, viewer, "like", false, &[]).await.expect("unlike");
    assert_eq!(page(other).await, none, "the delete and the unlike show");
    assert_eq!(page(viewer).await, none);
    // Promotions asked beside them: each one stored is on the next page.
    let promoted = async |at: i64| {
        let q = PageQuery { promotions_at: Some(Millis(at)), ..Default::default() };
        let mut ids: Vec<u64> =
            b.page_facts(&q).await.expect("facts").promotions.expect("asked").iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids
    };
    let promotion = |id: u64, starts: i64| tideway_store::Promotion {
        id,
        item,
        every: 3,
        starts_at: Millis(starts),
        ends_at: Millis(10_000),
    };
    assert!(promoted(100).await.is_empty());
    b.create_promotion(promotion(1, 0)).await.expect("a promotion");
    assert_eq!(promoted(100).await, vec![1]);
    b.create_promotion(promotion(2, 500)).await.expect("a later one");
    assert_eq!(promoted(100).await, vec![1], "not yet running");
    assert_eq!(promoted(600).await, vec![1, 2]);
    assert!(promoted(10_000).await.is_empty(), "ended");
}
