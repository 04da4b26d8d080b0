use super::*;

/// Most users block, mute and are blocked by no one: each of those sets
/// is a word until it holds someone, and is freed when emptied.
#[test]
fn relation_sets_take_a_word_until_they_hold_someone() {
    assert_eq!(std::mem::size_of::<IdSet>(), 8);
    let mut set = IdSet::default();
    assert!(!set.contains(&UserId(1)) && set.is_empty() && set.heap_bytes() == 0);
    assert!(set.insert(UserId(1)) && !set.insert(UserId(1)), "a second insert is no change");
    assert!(set.insert(UserId(2)));
    assert!(set.contains(&UserId(1)) && set.contains(&UserId(2)) && !set.contains(&UserId(3)));
    assert_eq!(set.len(), 2);
    assert!(set.heap_bytes() > 0);
    assert!(!set.remove(&UserId(3)));
    assert!(set.remove(&UserId(1)) && set.contains(&UserId(2)));
    assert!(set.remove(&UserId(2)) && !set.remove(&UserId(2)));
    assert!(set.0.is_none() && set.heap_bytes() == 0, "the last one out frees the set");
    let loaded: IdSet = [UserId(4), UserId(5), UserId(4)].into_iter().collect();
    assert!(loaded.len() == 2 && loaded.contains(&UserId(5)));
    let none: IdSet = std::iter::empty().collect();
    assert!(none.0.is_none());
    // A user's state stays in the allocator's 320-byte class (it was 376
    // bytes, in the 384 class, with three empty hash sets).
    assert!(std::mem::size_of::<UserState>() <= 320, "{}", std::mem::size_of::<UserState>());
}

#[test]
fn an_outbox_tail_answers_only_what_it_holds() {
    let union = |a: &[Key], b: &[Key]| merge_sorted(&[a, b], KeyRange::ALL, Direction::Newer, usize::MAX);
    assert_eq!(union(&[1, 3, 5, 9], &[2, 3, 6]), vec![1, 2, 3, 5, 6, 9]);
    assert_eq!(union(&[], &[4]), vec![4]);
    // Every key from 10 on is held (and one older, written meanwhile).
    let u = UserState { outbox: vec![2, 10, 12, 14, 16], outbox_from: 10, ..UserState::default() };
    let older = |below: Option<Key>, limit| u.outbox_answers(KeyRange { above: None, below }, Direction::Older, limit);
    assert!(older(None, 4) && !older(None, 5), "four keys from 10 on answer four, not five");
    assert!(older(Some(14), 2) && !older(Some(14), 3));
    assert!(!older(Some(10), 1), "below the tail nothing is known");
    let above = |a: Key, dir| u.outbox_answers(KeyRange { above: Some(a), below: None }, dir, 100);
    assert!(above(9, Direction::Newer) && above(9, Direction::Older), "every key above 9 is held");
    assert!(!above(8, Direction::Newer), "a key 9 may be missing");
    let whole = UserState { outbox: vec![1], ..UserState::default() };
    assert!(whole.outbox_answers(KeyRange::ALL, Direction::Newer, 100));
}
use tideway_core::{ItemKind, Visibility};

#[test]
fn fresh_items_are_the_latest_above_the_floor() {
    let mut f = FreshItems::above(10);
    f.created(ItemId(10));
    assert!(!f.contains(ItemId(10)), "at the floor: its unit may be on disk");
    let n = 2 * FRESH_KEPT as u64 + 100;
    for i in 11..=n {
        f.created(ItemId(i));
    }
    assert!(f.contains(ItemId(n)) && f.contains(ItemId(n + 1 - FRESH_KEPT as u64)), "the latest generation");
    assert!(!f.contains(ItemId(11)), "the oldest are forgotten");
    assert!(f.ids.len() + f.older.len() <= 2 * FRESH_KEPT);
    f.seen(ItemId(n + 5));
    assert!(f.contains(ItemId(n)), "another item's unit seen: this one is still empty");
    f.seen(ItemId(n));
    assert!(!f.contains(ItemId(n)), "its own unit seen");
    f.created(ItemId(n + 3));
    assert!(!f.contains(ItemId(n + 3)), "below the risen floor");
    f.created(ItemId(n + 6));
    assert!(f.contains(ItemId(n + 6)));
}

fn item(id: u64, author: u64, repost_of: Option<u64>) -> Arc<Item> {
    Arc::new(Item {
        id: ItemId(id),
        author: UserId(author),
        kind: if repost_of.is_some() { ItemKind::Repost } else { ItemKind::Post },
        body: tideway_core::Body::default(),
        visibility: Visibility::Public,
        tags: vec![],
        mentions: vec![],
        object: None,
        repost_of: repost_of.map(ItemId),
        reply_to: None,
        reply_to_author: None,
        idempotency_key: None,
        deleted: false,
        rev: 0,
    })
}

fn apply(s: &mut State, c: Change) -> Applied {
    let mut ap = Applied::default();
    s.apply(c, &mut ap);
    ap
}

#[test]
fn applying_twice_is_the_same_as_once() {
    let changes = vec![
        Change::PutItem(item(1, 1, None)),
        Change::PutItem(item(2, 2, Some(1))),
        Change::PutEdge { kind: EdgeKind::Follow, from: UserId(3), to: UserId(1), since: Millis(5) },
    ];
    let mut once = State::eager();
    let mut twice = State::eager();
    for c in &changes {
        apply(&mut once, c.clone());
        apply(&mut twice, c.clone());
        apply(&mut twice, c.clone());
    }
    assert_eq!(once.counters, twice.counters);
    assert_eq!(twice.counters.items_live, 2);
    assert_eq!(twice.counters.users, 3);
    let mut recent = [0; Head::RECENT];
    recent[0] = 1;
    assert_eq!(
        twice.users[&UserId(1)].head,
        Head { following: 0, followers: 1, items: 1, newest: 1, recent, recent_len: 1 }
    );
    assert_eq!(twice.reposts.get(&ItemId(1)).map(Vec::len), Some(1));
    assert_eq!(twice.users[&UserId(1)].outbox, vec![1]);
}

#[test]
fn deleting_a_repost_removes_it_from_the_index() {
    let mut s = State::eager();
    apply(&mut s, Change::PutItem(item(1, 1, None)));
    apply(&mut s, Change::PutItem(item(2, 2, Some(1))));
    let mut gone = (*item(2, 2, Some(1))).clone();
    gone.deleted = true;
    apply(&mut s, Change::PutItem(Arc::new(gone)));
    assert!(!s.reposts.contains_key(&ItemId(1)));
    assert!(!s.repost_by.contains_key(&(UserId(2), ItemId(1))));
    assert_eq!(s.counters.items_live, 1);
    assert_eq!(s.users[&UserId(2)].outbox, vec![2], "a tombstone keeps its outbox place");
}

#[test]
fn a_lazy_index_skips_what_is_not_loaded_and_notes_it() {
    let mut s = State::lazy(Counters { users: 2, ..Counters::default() }, JobWindow::default(), vec![]);
    for u in [1, 3] {
        s.install(Unit::Head(UserId(u)), UnitData::Head(Some(Head::default())));
    }
    s.install(Unit::Out(UserId(3)), UnitData::Out { following: vec![], blocking: vec![], muting: vec![] });
    let follow = Change::PutEdge { kind: EdgeKind::Follow, from: UserId(3), to: UserId(1), since: Millis(5) };
    let mut need = Vec::new();
    s.required(std::slice::from_ref(&follow), &mut need);
    assert!(need.is_empty(), "{need:?}");
    let ap = apply(&mut s, follow);
    assert_eq!(ap.skipped, vec![Unit::Followers(UserId(1))], "the followee's followers are not loaded");
    assert_eq!(s.users[&UserId(1)].head.followers, 1, "its counters are");
    assert_eq!(s.counters.users, 2, "both were known");
    let derived = s.derived(&ap);
    assert!(derived.contains(&Change::PutHead(UserId(1), Head { followers: 1, ..Head::default() })));
    assert!(derived.contains(&Change::PutCounters(s.counters)));

    s.note_skips(&ap.skipped, 7, 6);
    assert_eq!(s.skipped_since(Unit::Followers(UserId(1)), 6), Some(7), "a load that read before 7 retries");
    assert_eq!(s.skipped_since(Unit::Followers(UserId(1)), 7), None, "one that read after installs");
    assert_eq!(s.skipped_since(Unit::Followers(UserId(2)), 0), None);
    let mut need = Vec::new();
    assert!(s.user_or_need(Unit::Followers(UserId(1)), &mut need).is_none());
    assert_eq!(need, vec![Unit::Followers(UserId(1))]);
}

#[test]
fn a_user_never_named_has_every_unit_loaded_with_their_head() {
    let mut s = State::lazy(Counters::default(), JobWindow::default(), vec![]);
    s.install(Unit::Head(UserId(9)), UnitData::Head(None));
    for unit in [Unit::Out(UserId(9)), Unit::Followers(UserId(9)), Unit::Outbox(UserId(9)), Unit::Inserts(UserId(9))] {
        assert!(s.loaded(unit), "{unit:?}");
    }
    assert!(!s.users[&UserId(9)].known, "not counted until a change names them");
    let ap = apply(&mut s, Change::PutEdge { kind: EdgeKind::Mute, from: UserId(9), to: UserId(9), since: Millis(1) });
    assert!(ap.skipped.is_empty());
    assert_eq!(s.counters.users, 1);
}

#[test]
fn over_the_budget_what_was_not_used_since_the_last_pass_goes() {
    let mut s = State::lazy(Counters::default(), JobWindow::default(), vec![]);
    s.set_budget(1);
    let users: Vec<UserId> = (1..=10).map(UserId).collect();
    for &u in &users {
        s.install(Unit::Head(u), UnitData::Head(Some(Head::default())));
        s.install(Unit::Outbox(u), UnitData::Outbox { keys: vec![u.0 << 22], from: 0 });
    }
    let with_item = ItemId(77);
    s.install(
        Unit::Item(with_item),
        UnitData::Item {
            reposts: vec![(UserId(5), ItemId(78))],
            replies: 2,
            reactions: vec![(UserId(6), "like".into())],
        },
    );
    let (bytes, holders, _) = s.residency();
    assert_eq!(holders, 11);
    assert!(bytes > 11 * 48, "{bytes}");
    // What a call loaded itself is never let go by that call.
    assert!(s.evict_over_budget(0).is_empty());
    // Everything was just loaded (marked): the first pass only unmarks.
    let mark = s.residency_mark();
    assert!(s.evict_over_budget(mark).is_empty());
    // A read uses user 3 and the item; the next pass lets the rest go.
    let mut need = Vec::new();
    assert!(s.user_or_need(Unit::Outbox(UserId(3)), &mut need).is_some());
    assert!(s.item_or_need(with_item, &mut need) && need.is_empty());
    let mark = s.residency_mark();
    let gone = s.evict_over_budget(mark);
    assert_eq!(gone.len(), 9 * 2, "head and outbox of nine users: {gone:?}");
    assert!(gone.contains(&Unit::Outbox(UserId(1))) && !gone.contains(&Unit::Outbox(UserId(3))));
    assert!(s.loaded(Unit::Outbox(UserId(3))) && !s.loaded(Unit::Head(UserId(4))));
    // Not used again: the pass after lets the item go, with its reposts,
    // replies and reactions.
    let mark = s.residency_mark();
    let gone = s.evict_over_budget(mark);
    let mark = s.residency_mark();
    let gone: Vec<Unit> = gone.into_iter().chain(s.evict_over_budget(mark)).collect();
    assert!(gone.contains(&Unit::Item(with_item)), "{gone:?}");
    assert!(s.reposts.is_empty() && s.repost_by.is_empty() && s.replies.is_empty());
    assert!(s.reactions.counts(with_item).is_empty());
    assert_eq!(s.residency().1, 0, "nothing left");
    assert_eq!(s.residency().0, 0, "and no bytes counted");
    assert_eq!(s.residency().2, 11, "eleven holders let go");
}

#[test]
fn pruned_skips_make_older_loads_retry() {
    let s = State::lazy(Counters::default(), JobWindow::default(), vec![]);
    let units: Vec<Unit> = (0..=SKIPS_KEPT as u64).map(|u| Unit::Outbox(UserId(u))).collect();
    s.note_skips(&units, 10, 10);
    assert_eq!(s.skipped_since(Unit::Outbox(UserId(1)), 9), Some(10), "pruned, but a load from before retries");
    assert_eq!(s.skipped_since(Unit::Outbox(UserId(1)), 10), None);
}
