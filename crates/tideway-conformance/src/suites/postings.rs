//! The `postings` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Postings`: a new item is posted, in its own write, to the feed of each
/// user it mentions, each of its tags and its object; a repost is not;
/// postings stay after a delete or a visibility change (pages filter);
/// feeds are read by range, in either direction, within a limit, and never
/// mix; an item created again (an idempotent repeat) is posted once.
pub async fn postings(b: &dyn Backend) {
    use tideway_core::{ObjectRef, PostingFeed};
    let post = async |id: u64, author: u64, tags: &[&str], mentions: &[u64], object: Option<(&str, &str)>| {
        let mut i = Item::new(ItemId(id), UserId(author), ItemKind::Post);
        i.tags = tags.iter().map(|t| (*t).to_owned()).collect();
        i.mentions = mentions.iter().map(|m| UserId(*m)).collect();
        i.object = object.map(|(k, id)| ObjectRef { kind: k.into(), id: id.into() });
        i.idempotency_key = Some(format!("p{id}"));
        b.create_item(i, false, Millis(id as i64)).await.expect("create")
    };
    post(8001, 31, &["rust"], &[41], Some(("book", "1"))).await;
    post(8002, 32, &["rust", "db"], &[], None).await;
    post(8003, 31, &[], &[41, 42], Some(("book", "1"))).await;
    post(8004, 33, &["db"], &[42], Some(("book", "2"))).await;
    post(8005, 32, &["rust"], &[41], None).await;
    // An idempotent repeat writes nothing new.
    let again = post(8099, 32, &["rust"], &[41], None).await;
    assert!(matches!(again, CreateOutcome::Created(_)), "a new key");
    let repeat = {
        let mut i = Item::new(ItemId(8100), UserId(32), ItemKind::Post);
        i.tags = vec!["rust".into()];
        i.idempotency_key = Some("p8005".into());
        b.create_item(i, false, Millis(8100)).await.expect("repeat")
    };
    assert!(matches!(repeat, CreateOutcome::Existing(ref e) if e.id == ItemId(8005)), "{repeat:?}");
    // A repost carries no postings of its own.
    let mut repost = Item::new(ItemId(8006), UserId(34), ItemKind::Repost);
    repost.repost_of = Some(ItemId(8001));
    repost.mentions = vec![UserId(41)];
    repost.tags = vec!["rust".into()];
    b.create_item(repost, false, Millis(8006)).await.expect("repost");
    // Deleted and re-scoped items keep their postings.
    b.update_item(ItemId(8002), &ItemChange::Delete).await.expect("delete").expect("existed");
    b.update_item(ItemId(8004), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("existed");

    let feed = async |f: PostingFeed, range, dir, limit| b.postings(f.id(), range, dir, limit).await.expect("postings");
    let rust = || PostingFeed::Tag("rust".into());
    assert_eq!(feed(rust(), KeyRange::ALL, Direction::Older, 10).await, vec![8099, 8005, 8002, 8001]);
    assert_eq!(feed(rust(), KeyRange::ALL, Direction::Newer, 2).await, vec![8001, 8002], "oldest first, limited");
    let r = KeyRange { above: Some(8001), below: Some(8099) };
    assert_eq!(feed(rust(), r, Direction::Older, 10).await, vec![8005, 8002], "bounds are exclusive");
    assert_eq!(feed(PostingFeed::Tag("db".into()), KeyRange::ALL, Direction::Older, 10).await, vec![8004, 8002]);
    assert_eq!(
        feed(PostingFeed::Mentions(UserId(41)), KeyRange::ALL, Direction::Older, 10).await,
        vec![8099, 8005, 8003, 8001]
    );
    assert_eq!(feed(PostingFeed::Mentions(UserId(42)), KeyRange::ALL, Direction::Newer, 10).await, vec![8003, 8004]);
    let book = |id: &str| PostingFeed::Object { kind: "book".into(), id: id.into() };
    assert_eq!(feed(book("1"), KeyRange::ALL, Direction::Older, 10).await, vec![8003, 8001]);
    assert_eq!(feed(book("2"), KeyRange::ALL, Direction::Older, 10).await, vec![8004]);
    assert!(feed(book("3"), KeyRange::ALL, Direction::Older, 10).await.is_empty(), "an unknown feed is empty");
    assert!(feed(rust(), KeyRange::ALL, Direction::Older, 0).await.is_empty(), "limit 0");
    assert!(feed(PostingFeed::Mentions(UserId(31)), KeyRange::ALL, Direction::Older, 10).await.is_empty());
}
