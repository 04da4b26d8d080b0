//! Which entry of a feed an item makes, and where it sorts.
//!
//! A feed holds one entry per *original* item. Each original can *appear*
//! several times (authored, reposted by someone, inserted directly); the entry
//! sorts at its earliest valid appearance, its `reason` is that appearance's
//! kind, and its `sources` are the valid repost appearances, oldest first.
//! These functions decide that from the item, the viewer's relations and the
//! reposts/insertions of the item — the same code serves the pushed inbox,
//! the pulled outboxes and the brute-force reference model of the tests.

use crate::ids::{ItemId, Key, UserId};
use crate::item::Item;
use crate::time::Millis;

/// The viewer's relation to another user (both directions of follows, and
/// the viewer's blocks and mutes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Relation {
    /// viewer follows other
    pub following: bool,
    /// other follows viewer
    pub followed_by: bool,
    /// viewer blocks other
    pub blocking: bool,
    /// other blocks viewer
    pub blocked_by: bool,
    /// viewer mutes other
    pub muting: bool,
}

/// What a follow of one target did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowStatus {
    Followed(Millis),
    Already(Millis),
    /// A block separates the two users.
    Blocked,
    /// The follower is at `graph.max_following`.
    Limit,
}

/// Which list of a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Following,
    Followers,
}

impl Relation {
    /// `hidden(a, v)`: a block in either direction, or (where mutes apply) a mute.
    pub fn hidden(&self, with_mutes: bool) -> bool {
        self.blocking || self.blocked_by || (with_mutes && self.muting)
    }

    pub fn blocked_either_way(&self) -> bool {
        self.blocking || self.blocked_by
    }
}

/// Why an entry is in a feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AppearanceKind {
    Authored,
    Repost,
    Inserted,
}

impl AppearanceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Authored => "authored",
            Self::Repost => "repost",
            Self::Inserted => "inserted",
        }
    }
}

/// One appearance of an original item in a feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appearance {
    pub key: Key,
    pub kind: AppearanceKind,
}

/// A repost that shows in an entry: who reposted, and the repost item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub user: UserId,
    pub item: ItemId,
}

/// One entry of a feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The sort key: the key of the earliest valid appearance.
    pub key: Key,
    pub reason: AppearanceKind,
    pub original: ItemId,
    /// Valid repost appearances, oldest first.
    pub sources: Vec<Source>,
}

fn assemble(o: &Item, authored: bool, mut reposts: Vec<Source>, inserted: Option<Key>) -> Option<Entry> {
    reposts.sort_by_key(|s| s.item);
    let mut best: Option<Appearance> = None;
    let mut consider = |key: Key, kind| {
        if best.is_none_or(|b| key < b.key) {
            best = Some(Appearance { key, kind });
        }
    };
    if authored {
        consider(o.id.0, AppearanceKind::Authored);
    }
    if let Some(first) = reposts.first() {
        consider(first.item.0, AppearanceKind::Repost);
    }
    if let Some(k) = inserted {
        consider(k, AppearanceKind::Inserted);
    }
    best.map(|b| Entry { key: b.key, reason: b.kind, original: o.id, sources: reposts })
}

/// The entry of `o` in `home(viewer)`, if it has one.
///
/// * `in_f(x)`: x is the viewer or someone the viewer follows (`F(viewer)`).
/// * `rel(x)`: the viewer's relation to x.
/// * `reposts`: non-deleted reposts of `o` as (reposter, repost id); any
///   superset of those by members of `F(viewer)` will do, the rest are
///   filtered here.
/// * `inserted`: the earliest key at which `o` was inserted into this home.
pub fn home_entry(
    o: &Item,
    viewer: UserId,
    in_f: &dyn Fn(UserId) -> bool,
    rel: &dyn Fn(UserId) -> Relation,
    reposts: &[(UserId, ItemId)],
    inserted: Option<Key>,
) -> Option<Entry> {
    if o.repost_of.is_some() {
        return None; // a repost item is never an entry of its own
    }
    let author_rel = if o.author == viewer { Relation::default() } else { rel(o.author) };
    if !o.visible_to(Some(viewer), author_rel.following) || author_rel.hidden(true) {
        return None;
    }
    let authored = !o.kind.is_card() && in_f(o.author) && o.reply_to_author.is_none_or(in_f);
    let sources: Vec<Source> = reposts
        .iter()
        .filter(|(who, _)| in_f(*who) && (*who == viewer || !rel(*who).hidden(true)))
        .map(|&(user, item)| Source { user, item })
        .collect();
    assemble(o, authored, sources, inserted)
}

/// The entry of `o` in `profile(a)` as seen by `viewer` (`None`: the server
/// reading without a viewer, who sees public items only).
///
/// * `a_reposts`: non-deleted reposts of `o` by `a` (others are filtered).
/// * `rel(x)`: the viewer's relation to x (unused without a viewer).
///
/// The caller returns an empty feed when `a` and the viewer are separated
/// by a block; mutes do not apply to profiles.
pub fn profile_entry(
    o: &Item,
    a: UserId,
    viewer: Option<UserId>,
    rel: &dyn Fn(UserId) -> Relation,
    a_reposts: &[(UserId, ItemId)],
) -> Option<Entry> {
    if o.repost_of.is_some() {
        return None;
    }
    let author_rel = match viewer {
        Some(v) if v != o.author => rel(o.author),
        _ => Relation::default(),
    };
    if !o.visible_to(viewer, author_rel.following) || author_rel.blocked_either_way() {
        return None;
    }
    let authored = o.author == a && !o.kind.is_card();
    let sources: Vec<Source> =
        a_reposts.iter().filter(|(who, _)| *who == a).map(|&(user, item)| Source { user, item }).collect();
    assemble(o, authored, sources, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{ItemKind, Visibility};

    fn item(id: u64, author: u64) -> Item {
        Item::new(ItemId(id), UserId(author), ItemKind::Post)
    }

    const U: UserId = UserId(1);

    #[test]
    fn earliest_appearance_wins_and_sources_are_oldest_first() {
        let o = item(10, 2);
        let in_f = |x: UserId| [1, 2, 3, 4].contains(&x.0);
        let rel = |x: UserId| Relation { following: x.0 != 1, ..Relation::default() };
        let reposts = [(UserId(4), ItemId(30)), (UserId(3), ItemId(20)), (UserId(9), ItemId(15))];
        let e = home_entry(&o, U, &in_f, &rel, &reposts, None).expect("entry");
        assert_eq!((e.key, e.reason), (10, AppearanceKind::Authored));
        assert_eq!(e.sources.iter().map(|s| s.item.0).collect::<Vec<_>>(), vec![20, 30]);
        // The author unfollowed: the entry moves to the first repost.
        let in_f2 = |x: UserId| [1, 3, 4].contains(&x.0);
        let rel2 = |x: UserId| Relation { following: [3, 4].contains(&x.0), ..Relation::default() };
        let e = home_entry(&o, U, &in_f2, &rel2, &reposts, None).expect("entry");
        assert_eq!((e.key, e.reason), (20, AppearanceKind::Repost));
        // An earlier insertion beats both.
        let e = home_entry(&o, U, &in_f2, &rel2, &reposts, Some(12)).expect("entry");
        assert_eq!((e.key, e.reason), (12, AppearanceKind::Inserted));
    }

    #[test]
    fn muted_reposter_and_blocked_author_are_hidden() {
        let o = item(10, 2);
        let in_f = |x: UserId| [1, 3].contains(&x.0);
        let muting3 = |x: UserId| Relation { following: x.0 == 3, muting: x.0 == 3, ..Relation::default() };
        assert_eq!(home_entry(&o, U, &in_f, &muting3, &[(UserId(3), ItemId(20))], None), None);
        let blocks_author = |x: UserId| Relation { following: x.0 == 3, blocked_by: x.0 == 2, ..Relation::default() };
        assert_eq!(home_entry(&o, U, &in_f, &blocks_author, &[(UserId(3), ItemId(20))], None), None);
    }

    #[test]
    fn cards_come_only_by_insertion_and_replies_need_the_parent_author() {
        let mut card = item(10, 2);
        card.kind = ItemKind::User;
        let in_f = |x: UserId| [1, 2].contains(&x.0);
        let rel = |x: UserId| Relation { following: x.0 == 2, ..Relation::default() };
        assert_eq!(home_entry(&card, U, &in_f, &rel, &[], None), None);
        assert_eq!(home_entry(&card, U, &in_f, &rel, &[], Some(50)).map(|e| e.reason), Some(AppearanceKind::Inserted));
        let mut reply = item(11, 2);
        reply.kind = ItemKind::Reply;
        reply.reply_to = Some(ItemId(5));
        reply.reply_to_author = Some(UserId(7));
        assert_eq!(home_entry(&reply, U, &in_f, &rel, &[], None), None);
        let in_f7 = |x: UserId| [1, 2, 7].contains(&x.0);
        assert!(home_entry(&reply, U, &in_f7, &rel, &[], None).is_some());
    }

    #[test]
    fn profile_ignores_mutes_but_not_blocks() {
        let o = item(10, 2);
        let a = UserId(3);
        let muting = |_: UserId| Relation { muting: true, ..Relation::default() };
        let e = profile_entry(&o, a, Some(U), &muting, &[(a, ItemId(20))]).expect("entry");
        assert_eq!((e.key, e.reason), (20, AppearanceKind::Repost));
        let blocking = |_: UserId| Relation { blocking: true, ..Relation::default() };
        assert_eq!(profile_entry(&o, a, Some(U), &blocking, &[(a, ItemId(20))]), None);
        let mut f = item(12, 3);
        f.visibility = Visibility::Followers;
        assert_eq!(profile_entry(&f, a, None, &muting, &[]), None);
        assert!(profile_entry(&f, a, Some(a), &muting, &[]).is_some());
    }
}
