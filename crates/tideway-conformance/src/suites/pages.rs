//! The `pages` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Pages::page_facts`: everything a page asks beside its records in one
/// call, each answer what the trait it comes from answers alone; and the
/// check of held copies: every patch and delete moves an item's `rev`, so a
/// copy of an older `rev`, of a deleted item or of an unknown id is stale.
pub async fn pages(b: &dyn Backend) {
    use tideway_store::{ItemCounts, PageQuery, ViewerMarks};
    let u = UserId;
    let (viewer, a2, a3, a4, a5) = (u(1), u(2), u(3), u(4), u(5));
    b.follow_many(viewer, &[a2, a3, a5], Millis(1), 100).await.expect("follow");
    b.follow_many(a2, &[viewer], Millis(2), 100).await.expect("follow back");
    b.set_block(a4, viewer, true, Millis(3)).await.expect("block");
    b.set_mute(viewer, a5, true, Millis(4)).await.expect("mute");
    let (x, y, z) = (ItemId(8001), ItemId(8002), ItemId(8005));
    created(b, x.0, 2, false).await;
    created(b, y.0, 3, false).await;
    created(b, z.0, 2, false).await;
    assert!(matches!(linked(b, 8003, 3, Some(x.0), None).await, CreateOutcome::Created(_)));
    assert!(matches!(linked(b, 8004, 1, Some(y.0), None).await, CreateOutcome::Created(_)));
    assert!(matches!(linked(b, 8006, 5, Some(x.0), None).await, CreateOutcome::Created(_)));
    b.insert_home(viewer, y, 8010).await.expect("insert");
    assert!(b.set_reaction(x, viewer, "like", true, &[]).await.expect("react"));
    assert!(b.set_reaction(x, a2, "like", true, &[]).await.expect("react"));
    assert!(b.set_reaction(x, a3, "x_wow", true, &[]).await.expect("react"));
    let patched = b
        .update_item(x, &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(patched.rev, 1, "a patch moves rev");
    let deleted = b.update_item(z, &ItemChange::Delete).await.expect("delete").expect("exists");
    assert_eq!(deleted.rev, 1, "a delete moves rev");
    match b.records(&[x.0, y.0]).await.expect("records").as_slice() {
        [Some(tideway_store::Record::Item(i)), Some(tideway_store::Record::Item(j))] => {
            assert_eq!((i.rev, j.rev), (1, 0), "rev is stored")
        }
        other => panic!("records: {other:?}"),
    }

    let originals = [x, y, ItemId(8999)];
    let reposters = [a2, a3, viewer, a5];
    let related = [a2, a4, u(77)];
    let q = PageQuery {
        originals: &originals,
        reposters: &reposters,
        inserts_of: Some(viewer),
        viewer: Some(viewer),
        related: &related,
        hydrate: &[x, y],
        held: &[(x, 0), (y, 0), (z, 0), (ItemId(8999), 0), (ItemId(8003), 0)],
        ..Default::default()
    };
    let f = b.page_facts(&q).await.expect("page_facts");
    // Each answer is its own trait's...
    assert_eq!(f.reposts, b.reposts_by(&originals, &reposters).await.expect("reposts_by"));
    assert_eq!(f.inserted, b.inserted_keys(viewer, &originals).await.expect("inserted_keys"));
    // (the reposters found, a3 and a5 but not the viewer, after the related)
    let (listed, rels): (Vec<UserId>, Vec<tideway_core::Relation>) = f.relations.iter().copied().unzip();
    assert_eq!(listed, vec![a2, a4, u(77), a3, a5], "the related users, then the reposters found by id");
    assert_eq!(rels, b.relations(viewer, &listed).await.expect("relations"));
    assert_eq!(f.hydrated, b.hydration(&[x, y], Some(viewer)).await.expect("hydration"));
    // ... and what the data says.
    assert_eq!(f.reposts[0], vec![(a3, ItemId(8003)), (a5, ItemId(8006))], "reposts by reposters, id order");
    assert_eq!(f.reposts[1], vec![(viewer, ItemId(8004))]);
    assert!(f.reposts[2].is_empty());
    assert_eq!(f.inserted, vec![None, Some(8010), None]);
    assert!(rels[0].following && rels[0].followed_by && !rels[0].muting);
    assert!(rels[1].blocked_by && !rels[1].blocking && !rels[1].following);
    assert_eq!(rels[2], tideway_core::Relation::default(), "an unknown user is related to nothing");
    assert!(rels[3].following && !rels[3].followed_by && !rels[3].muting);
    assert!(rels[4].muting && rels[4].following);
    assert_eq!(
        f.hydrated[0],
        (
            ItemCounts { replies: 0, reposts: 2, reactions: vec![("like".into(), 2), ("x_wow".into(), 1)] },
            Some(ViewerMarks { reposted: false, reactions: vec!["like".into()] })
        )
    );
    assert_eq!(f.hydrated[1].1, Some(ViewerMarks { reposted: true, reactions: vec![] }));
    assert_eq!(f.stale, vec![x, z, ItemId(8999)], "patched, deleted and unknown copies are stale");
    // With the viewer's follows known to the caller: the same relations
    // but for following and followed_by, which say false.
    let f2 = b.page_facts(&PageQuery { follows_known: true, ..q }).await.expect("page_facts");
    let cleared: Vec<(UserId, tideway_core::Relation)> = f
        .relations
        .iter()
        .map(|(u, r)| (*u, tideway_core::Relation { following: false, followed_by: false, ..*r }))
        .collect();
    assert_eq!(f2.relations, cleared, "blocks and mutes told, follows not");
    let unfollowed = b.relations_unfollowed(viewer, &listed).await.expect("relations_unfollowed");
    assert_eq!(listed.iter().copied().zip(unfollowed).collect::<Vec<_>>(), cleared, "the same, asked alone");
    assert_eq!((f2.reposts, f2.hydrated), (f.reposts.clone(), f.hydrated.clone()));
    // With the viewer's own relations held by the caller: none read, the
    // rest the same.
    let f3 = b.page_facts(&PageQuery { follows_known: true, relations_known: true, ..q }).await.expect("page_facts");
    assert!(f3.relations.is_empty(), "relations known: none told");
    assert_eq!((f3.reposts, f3.inserted, f3.hydrated), (f.reposts.clone(), f.inserted.clone(), f.hydrated.clone()));

    let q = PageQuery { held: &[(x, 1), (z, 1), (y, 0), (ItemId(8999), 1)], ..Default::default() };
    let stale = b.page_facts(&q).await.expect("page_facts").stale;
    assert_eq!(stale, vec![ItemId(8999)], "copies of the stored rev (a tombstone's too) are current");

    // The item epoch, where the engine keeps one: moved by every patch and
    // delete, so copies current at it are current while it stands (and not
    // checked one by one); once it moved, each is checked again. Engines
    // without one check every copy.
    let q = PageQuery { held: &[(y, 0)], ..Default::default() };
    let before = b.page_facts(&q).await.expect("page_facts").items_epoch;
    let at = PageQuery { held_at: before, ..q };
    assert!(b.page_facts(&at).await.expect("page_facts").stale.is_empty(), "unchanged: current");
    b.update_item(y, &ItemChange::Patch { body: None, visibility: None }).await.expect("patch").expect("exists");
    let f = b.page_facts(&at).await.expect("page_facts");
    assert_eq!(f.stale, vec![y], "a copy from before a patch is stale, whatever epoch it is sent with");
    match (before, f.items_epoch) {
        (Some(e0), Some(e1)) => assert!(e1 > e0 && e0 > 0, "a patch moves the epoch: {e0} -> {e1}"),
        (None, None) => {}
        other => panic!("an engine keeps an item epoch or not: {other:?}"),
    }
    let held_now = [(y, 1)];
    let now = PageQuery { held: &held_now, held_at: f.items_epoch, ..Default::default() };
    assert!(b.page_facts(&now).await.expect("page_facts").stale.is_empty(), "the new copy is current");
    assert_eq!(b.page_facts(&now).await.expect("page_facts").items_epoch, f.items_epoch, "reads do not move it");

    // Without a viewer: no relations, counts without marks.
    let q = PageQuery { originals: &[x], reposters: &[a3], hydrate: &[x], related: &related, ..Default::default() };
    let f = b.page_facts(&q).await.expect("page_facts");
    assert_eq!((f.relations.len(), f.inserted.len()), (0, 0));
    assert_eq!(f.reposts, vec![vec![(a3, ItemId(8003))]]);
    assert_eq!(f.hydrated[0].1, None, "no viewer, no marks");
    assert_eq!(b.page_facts(&PageQuery::default()).await.expect("empty"), tideway_store::PageFacts::default());

    // The version of a followee set and own relations, where the engine
    // keeps one: read with them, told by the page's call, moved by every
    // change of them (a block removes follows both ways and changes both
    // users' blocks; a mute the muter's; an insertion its owner's) and by
    // nothing else.
    let others = [viewer, a2, a3, a4, a5, u(6), u(77)];
    let version = |user| async move {
        let q = PageQuery { followees_of: Some(user), ..Default::default() };
        let told = b.page_facts(&q).await.expect("page_facts").followees_version;
        assert_eq!(told, b.followees_version(user).await.expect("followees_version"), "the call tells the version");
        let read = b.followees_versioned(user).await.expect("followees_versioned");
        assert_eq!(read.list, b.followees(user).await.expect("followees"), "the list of the version");
        assert_eq!(read.version, told, "read with the list");
        match &read.own {
            Some(own) => {
                let rels = b.relations_unfollowed(user, &others).await.expect("relations_unfollowed");
                for (o, r) in others.iter().zip(rels) {
                    if *o != user {
                        assert_eq!(own.relation(*o), r, "own relations of {user:?} to {o:?}");
                    }
                }
                let inserted = b.inserts(user, KeyRange::ALL, Direction::Older, 1).await.expect("inserts");
                assert_eq!(own.inserts, !inserted.is_empty(), "whether {user:?} has insertions");
            }
            None => assert_eq!(read.version, None, "own relations are read where a version is kept"),
        }
        (read.version, read.own)
    };
    let (v0, own) = version(viewer).await;
    if v0.is_some() {
        let own = own.expect("few relations: read");
        assert!(own.mutes.contains(&a5) && own.blocked_by.contains(&a4) && own.inserts, "{own:?}");
        b.set_mute(viewer, a4, true, Millis(5)).await.expect("mute");
        let (v1, own) = version(viewer).await;
        assert_ne!(v1, v0, "a mute moves it");
        assert!(own.expect("read").mutes.contains(&a4));
        b.follow_many(a4, &[a5], Millis(5), 100).await.expect("someone else follows");
        b.set_mute(a4, viewer, true, Millis(5)).await.expect("someone else mutes");
        assert_eq!(version(viewer).await.0, v1, "another's follow or mute leaves it");
        b.follow_many(viewer, &[u(6)], Millis(6), 100).await.expect("follow");
        let v2 = version(viewer).await.0;
        assert_ne!(v2, v1, "a follow moves it");
        assert!(b.unfollow(viewer, u(6)).await.expect("unfollow"));
        let v3 = version(viewer).await.0;
        assert!(![v0, v1, v2].contains(&v3), "an unfollow moves it, never back to an earlier one");
        let v4 = version(a2).await.0;
        b.set_block(viewer, a2, true, Millis(7)).await.expect("block");
        assert_ne!(version(viewer).await.0, v3, "a block moves the blocker's");
        let (v5, own) = version(a2).await;
        assert_ne!(v5, v4, "... and the blocked one's");
        assert!(own.expect("read").blocked_by.contains(&viewer));
        b.set_block(viewer, a2, false, Millis(8)).await.expect("unblock");
        assert_ne!(version(a2).await.0, v5, "an unblock moves it");
        let (v6, own) = version(a3).await;
        assert!(!own.expect("read").inserts);
        b.insert_home(a3, y, 8011).await.expect("insert");
        let (v7, own) = version(a3).await;
        assert!(v7 != v6 && own.expect("read").inserts, "an insertion moves its owner's");
        assert_eq!(version(u(4321)).await, (Some(0), Some(Default::default())), "a user never seen is at version 0");
    } else {
        assert_eq!(version(u(4321)).await, (None, None), "an engine keeps a version for everyone or no one");
    }
    assert!(b.page_facts(&PageQuery::default()).await.expect("empty").promotions.is_none(), "not asked");

    // The running promotions, asked with the page's facts.
    let p = |id: u64, starts: i64, ends: i64| tideway_store::Promotion {
        id,
        item: x,
        every: 4,
        starts_at: Millis(starts),
        ends_at: Millis(ends),
    };
    for q in [p(8102, 100, 300), p(8101, 150, 250), p(8103, 400, 500)] {
        b.create_promotion(q).await.expect("promotion");
    }
    let at = |t: i64| async move {
        let q = PageQuery { originals: &[x], promotions_at: Some(Millis(t)), ..Default::default() };
        let told = b.page_facts(&q).await.expect("page_facts").promotions.expect("asked");
        assert_eq!(told, b.active_promotions(Millis(t)).await.expect("active"), "the call tells the running ones");
        told
    };
    assert_eq!(at(200).await, vec![p(8101, 150, 250), p(8102, 100, 300)], "running at 200, by id");
    assert_eq!(at(250).await, vec![p(8102, 100, 300)], "the end is exclusive");
    assert!(at(99).await.is_empty());
}
