//! The copies' rules, on two nodes over one durable and one shared half.

use super::NodeCopies;
use crate::traits::*;
use crate::{MemoryStore, Promotion, Split};
use std::sync::Arc;
use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};

/// Two nodes on one durable half and one shared half.
fn nodes() -> (NodeCopies, NodeCopies, Arc<MemoryStore>, Arc<MemoryStore>) {
    let durable = Arc::new(MemoryStore::in_memory(64));
    let shared = Arc::new(MemoryStore::in_memory(64));
    let node = || NodeCopies::new(Arc::new(Split::new(durable.clone(), shared.clone())), 1 << 20);
    let (a, b) = (node(), node());
    (a, b, durable, shared)
}

async fn counts(node: &NodeCopies, item: ItemId, viewer: UserId) -> (ItemCounts, Option<ViewerMarks>) {
    let hydrate = [item];
    let q = PageQuery { viewer: Some(viewer), hydrate: &hydrate, ..Default::default() };
    node.page_facts(&q).await.expect("facts").hydrated.remove(0)
}

fn likes(n: u64) -> ItemCounts {
    ItemCounts { reactions: vec![("like".into(), n)], ..Default::default() }
}

#[tokio::test]
async fn a_change_on_one_node_shows_on_the_other() {
    let (a, b, durable, _) = nodes();
    let item = ItemId(10);
    durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
    let viewer = UserId(7);
    assert_eq!(counts(&a, item, viewer).await.0, ItemCounts::default());
    assert_eq!(a.fact_copies(), 1, "the page's facts are kept");
    b.set_reaction(item, UserId(2), "like", true, &[]).await.expect("like on b");
    assert_eq!(counts(&a, item, viewer).await.0, likes(1), "a sees b's like");
    b.set_reaction(item, viewer, "like", true, &[]).await.expect("the viewer likes, on b");
    let mine = ViewerMarks { reactions: vec!["like".into()], ..Default::default() };
    assert_eq!(counts(&a, item, viewer).await, (likes(2), Some(mine.clone())));
    assert_eq!(counts(&a, item, UserId(8)).await, (likes(2), Some(ViewerMarks::default())), "another viewer");
    assert_eq!(counts(&a, item, viewer).await, (likes(2), Some(mine)), "both viewers' marks kept");
}

#[tokio::test]
async fn a_copy_is_taken_only_while_its_token_stands() {
    let (a, _, durable, shared) = nodes();
    let item = ItemId(10);
    durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
    let viewer = UserId(7);
    assert_eq!(counts(&a, item, viewer).await.0, ItemCounts::default());
    // A write that bypasses the layer (which no node makes) is not
    // seen while the token stands: the page took its copy.
    durable.set_reaction(item, UserId(2), "like", true, &[]).await.expect("like, unannounced");
    assert_eq!(counts(&a, item, viewer).await.0, ItemCounts::default(), "the copy is taken");
    // A change in flight (a node that wrote and died before its end):
    // the facts are read, and not kept.
    shared.begin_fact_change(&[FactKey::Item(item)]).await.expect("begin");
    durable.set_reaction(item, UserId(3), "like", true, &[]).await.expect("like in flight");
    assert_eq!(counts(&a, item, viewer).await.0, likes(2), "read while a change is in flight");
    durable.set_reaction(item, UserId(4), "like", true, &[]).await.expect("another, in flight");
    assert_eq!(counts(&a, item, viewer).await.0, likes(3), "and not kept");
    shared.end_fact_change(&[FactKey::Item(item)]).await.expect("end");
    assert_eq!(counts(&a, item, viewer).await.0, likes(3));
}

#[tokio::test]
async fn reposts_of_an_original_counted_none_are_not_asked() {
    let (a, b, durable, _) = nodes();
    let (x, y) = (ItemId(10), ItemId(11));
    for i in [x, y] {
        durable.create_item(Item::new(i, UserId(1), ItemKind::Post), false, Millis(i.0 as i64)).await.expect("post");
    }
    let reposters = [UserId(5)];
    let page = async |node: &NodeCopies| {
        let ids = [x, y];
        let q = PageQuery {
            originals: &ids,
            reposters: &reposters,
            viewer: Some(UserId(9)),
            hydrate: &ids,
            ..Default::default()
        };
        node.page_facts(&q).await.expect("facts").reposts
    };
    assert_eq!(page(&a).await, vec![vec![], vec![]]);
    assert_eq!(page(&a).await, vec![vec![], vec![]], "from the copies");
    let mut repost = Item::new(ItemId(12), UserId(5), ItemKind::Repost);
    repost.repost_of = Some(y);
    b.create_item(repost, false, Millis(12)).await.expect("a repost, on b");
    assert_eq!(page(&a).await, vec![vec![], vec![(UserId(5), ItemId(12))]], "the repost shows on a");
    b.update_item(ItemId(12), &ItemChange::Delete).await.expect("deleted, on b");
    assert_eq!(page(&a).await, vec![vec![], vec![]], "and its delete");
}

/// A promotion running from 0 on.
fn promotion(id: u64, item: ItemId) -> Promotion {
    Promotion { id, item, every: 3, starts_at: Millis(0), ends_at: Millis(i64::MAX) }
}

#[tokio::test]
async fn a_warm_page_asks_the_durable_half_nothing() {
    let (a, b, durable, _) = nodes();
    let item = ItemId(10);
    durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
    b.create_promotion(promotion(1, item)).await.expect("a promotion, on b");
    let page = async |node: &NodeCopies| {
        let hydrate = [item];
        let q = PageQuery {
            viewer: Some(UserId(7)),
            hydrate: &hydrate,
            originals: &hydrate,
            reposters: &[UserId(5)],
            relations_known: true,
            follows_known: true,
            promotions_at: Some(Millis(100)),
            ..Default::default()
        };
        let f = node.page_facts(&q).await.expect("facts");
        (f.hydrated[0].0.clone(), f.promotions.expect("asked").iter().map(|p| p.id).collect::<Vec<_>>())
    };
    assert_eq!(page(&a).await, (ItemCounts::default(), vec![1]));
    // Writes that bypass the layer (which no node makes) are not seen:
    // the page asked the durable half nothing.
    durable.set_reaction(item, UserId(2), "like", true, &[]).await.expect("like, unannounced");
    durable.create_promotion(promotion(2, item)).await.expect("a promotion, unannounced");
    assert_eq!(page(&a).await, (ItemCounts::default(), vec![1]), "all from the copies");
    b.create_promotion(promotion(3, item)).await.expect("a promotion, on b");
    // (the in-process tokens are one generation: every copy is read again)
    assert_eq!(page(&a).await.1, vec![1, 2, 3], "the promotions read again");
    b.set_reaction(item, UserId(3), "like", true, &[]).await.expect("a like, on b");
    assert_eq!(page(&a).await, (likes(2), vec![1, 2, 3]), "the counts read again");
}

#[tokio::test]
async fn promotions_are_kept_from_a_time_on() {
    let (a, b, durable, _) = nodes();
    let item = ItemId(10);
    durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
    let later = Promotion { id: 1, item, every: 3, starts_at: Millis(500), ends_at: Millis(900) };
    b.create_promotion(later).await.expect("a later promotion");
    let at = async |t: i64| {
        let q = PageQuery { promotions_at: Some(Millis(t)), ..Default::default() };
        a.page_facts(&q).await.expect("facts").promotions.expect("asked").len()
    };
    assert_eq!(at(100).await, 0, "not yet");
    assert_eq!(at(600).await, 1, "running, from the copy taken at 100");
    assert_eq!(at(900).await, 0, "ended");
    assert_eq!(at(50).await, 0, "before the copy's time: read again");
    assert_eq!(at(700).await, 1);
}
