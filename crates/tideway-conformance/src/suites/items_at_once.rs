//! The `items_at_once` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Items::create_item`, many at once (a backend may write them together):
/// each is stored whole with its postings, its author's item counter, its
/// parent's reply count and, when asked, its fan-out job; an id already
/// taken fails that create alone, and every other of its moment is stored.
pub async fn items_at_once(b: &dyn Backend) {
    use tideway_core::PostingFeed;
    created(b, 9000, 70, false).await;
    created(b, 9001, 71, false).await;
    let item = |n: u64| {
        let mut i = Item::new(ItemId(9100 + n), UserId(80 + n % 5), ItemKind::Post);
        if n.is_multiple_of(3) {
            i.kind = ItemKind::Reply;
            i.reply_to = Some(ItemId(if n.is_multiple_of(2) { 9000 } else { 9001 }));
            i.reply_to_author = Some(UserId(if n.is_multiple_of(2) { 70 } else { 71 }));
        }
        if n.is_multiple_of(4) {
            i.tags = vec!["both".into(), format!("t{}", n % 8)];
        }
        if n.is_multiple_of(5) {
            i.mentions = vec![UserId(99)];
        }
        i.body = tideway_core::Body::new(
            serde_json::json!({ "text": format!("é \"{n}\"\n😀"), "n": n }).as_object().expect("an object"),
        );
        i
    };
    let n = 40u64;
    // Half at the moment one create reuses a taken id, half alone.
    let creates = |r: std::ops::Range<u64>| {
        futures_util::future::join_all(r.map(|n| b.create_item(item(n), n.is_multiple_of(2), Millis(9100 + n as i64))))
    };
    let taken = b.create_item(Item::new(ItemId(9000), UserId(88), ItemKind::Post), true, Millis(9000));
    let (mut outcomes, taken) = tokio::join!(creates(0..n / 2), taken);
    assert!(matches!(taken, Err(tideway_store::StoreError::IdTaken(9000))), "the taken id fails alone: {taken:?}");
    outcomes.extend(creates(n / 2..n).await);
    for (n, o) in outcomes.into_iter().enumerate() {
        match o.expect("create_item") {
            CreateOutcome::Created(i) => assert_eq!(i.id, ItemId(9100 + n as u64)),
            other => panic!("create {n} did not create: {other:?}"),
        }
    }

    let ids: Vec<Key> = (0..n).map(|n| 9100 + n).collect();
    let records = b.records(&ids).await.expect("records");
    for (n, r) in records.into_iter().enumerate() {
        match r {
            Some(tideway_store::Record::Item(i)) => {
                let want = item(n as u64);
                assert_eq!(
                    (i.author, i.reply_to, &i.tags, &i.mentions, i.deleted),
                    (want.author, want.reply_to, &want.tags, &want.mentions, false),
                    "item {n}"
                );
            }
            other => panic!("item {n} is stored: {other:?}"),
        }
    }
    let bodies = b.bodies(&ids.iter().map(|i| ItemId(*i)).collect::<Vec<_>>()).await.expect("bodies");
    for (n, body) in bodies.into_iter().enumerate() {
        assert_eq!(body.as_ref(), Some(&item(n as u64).body), "body {n}, unicode and escapes kept");
    }
    assert_eq!(b.counts(UserId(88)).await.expect("counts").items, 0, "the failed create counted nothing");
    for a in 80..85 {
        assert_eq!(b.counts(UserId(a)).await.expect("counts").items, n / 5, "items of author {a}");
    }
    let replies = b.hydration(&[ItemId(9000), ItemId(9001)], None).await.expect("hydration");
    let want = |even: bool| (0..n).filter(|n| n.is_multiple_of(3) && (n.is_multiple_of(2)) == even).count() as u64;
    assert_eq!((replies[0].0.replies, replies[1].0.replies), (want(true), want(false)), "reply counts");

    let feed = async |f: PostingFeed| b.postings(f.id(), KeyRange::ALL, Direction::Newer, 100).await.expect("postings");
    let tagged: Vec<Key> = (0..n).filter(|n| n.is_multiple_of(4)).map(|n| 9100 + n).collect();
    assert_eq!(feed(PostingFeed::Tag("both".into())).await, tagged);
    assert_eq!(feed(PostingFeed::Tag("t4".into())).await, vec![9104, 9112, 9120, 9128, 9136]);
    let mentioned: Vec<Key> = (0..n).filter(|n| n.is_multiple_of(5)).map(|n| 9100 + n).collect();
    assert_eq!(feed(PostingFeed::Mentions(UserId(99))).await, mentioned);

    // Every job, claimed and completed until none is left (a backend may
    // hold only a window of its jobs at a time).
    let worker = tideway_store::rules::worker_id(1, 1);
    let mut jobs: Vec<(Key, UserId, Millis)> = vec![];
    for _ in 0..=n {
        let claimed = b.claim_jobs(worker, Millis(20_000), 60_000, 100).await.expect("claim");
        if claimed.is_empty() {
            break;
        }
        let done: Vec<JobProgress> = claimed.iter().map(|j| JobProgress::Complete(j.key)).collect();
        b.advance(worker, &done).await.expect("complete");
        jobs.extend(claimed.iter().map(|j| (j.key, j.author, j.created)));
    }
    jobs.sort_unstable();
    let want: Vec<(Key, UserId, Millis)> = (0..n)
        .filter(|n| n.is_multiple_of(2))
        .map(|n| (9100 + n, UserId(80 + n % 5), Millis(9100 + n as i64)))
        .collect();
    assert_eq!(jobs, want, "a job for each fan-out, none for the others or the failed create");
}
