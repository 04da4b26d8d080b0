//! Notifications (SPEC section 2): what others did to a user or their items,
//! as groups. The pure part, shared by every engine and the tests'
//! reference: which group an event joins, and what a group shows.
//!
//! - **Events** stand while their cause stands: `follow` (a follows u),
//!   `reaction` (a's reaction of a kind on a non-deleted item of u),
//!   `repost`, `reply` (a's non-deleted repost of / reply to a non-deleted
//!   item of u), `mention` (a's non-deleted item that mentions u, visible to
//!   u). Undoing the cause (unfollow, taking a reaction back, deleting the
//!   repost, the reply or the item) takes the event out of its group.
//! - **Grouping**: follows, reactions (per item and kind) and reposts (per
//!   item) share a group key; a new event joins the newest group of its key
//!   while that group is unread and has an event standing, else it opens a
//!   new group ([`place`]). A reply or a mention is a group of its own.
//! - **Showing** ([`summarize`]): the distinct actors whose event stands and
//!   who are not hidden from the user (blocks either way, the user's mutes,
//!   applied at read time), the 5 newest first, their exact count, and the
//!   time of the newest; a group with none is not shown.
//! - **Marks**: `seen` and `read` only move forward ([`advance_mark`]); a
//!   group is seen (read) when its `latest_at` is at or below the mark.

use crate::ids::{ItemId, UserId};
use crate::time::Millis;

/// How many actors a group shows.
pub const SHOWN_ACTORS: usize = 5;

/// What an event is; a gathering verb is also the key of its groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(tag = "verb", rename_all = "snake_case")]
pub enum Verb {
    Follow,
    Reaction {
        item: ItemId,
        kind: String,
    },
    Repost {
        item: ItemId,
    },
    /// `item` is the reply.
    Reply {
        item: ItemId,
    },
    /// `item` is the mentioning item.
    Mention {
        item: ItemId,
    },
}

impl Verb {
    /// The verb as the API names it.
    pub fn name(&self) -> &'static str {
        match self {
            Verb::Follow => "follow",
            Verb::Reaction { .. } => "reaction",
            Verb::Repost { .. } => "repost",
            Verb::Reply { .. } => "reply",
            Verb::Mention { .. } => "mention",
        }
    }

    /// The item a group of this verb shows (none for follows).
    pub fn item(&self) -> Option<ItemId> {
        match self {
            Verb::Follow => None,
            Verb::Reaction { item, .. } | Verb::Repost { item } | Verb::Reply { item } | Verb::Mention { item } => {
                Some(*item)
            }
        }
    }

    /// Whether events of this verb gather in groups (replies and mentions
    /// are each a group of their own).
    pub fn gathers(&self) -> bool {
        matches!(self, Verb::Follow | Verb::Reaction { .. } | Verb::Repost { .. })
    }
}

/// The newest group of an event's key, as the engine found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewestGroup {
    pub id: u64,
    /// The time of its newest standing event (whoever the actor).
    pub latest_at: Millis,
    /// Events standing in it now.
    pub standing: u64,
}

/// Where a new event goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Into this existing group.
    Join(u64),
    /// Into a new group.
    Open,
}

/// Decides where a new event of `verb` goes: into the newest group of its
/// key while that group is unread (its `latest_at` above the `read` mark)
/// and has an event standing; else into a new group. So a group the user
/// has read stays as it was, and what happens after gathers anew.
pub fn place(verb: &Verb, newest: Option<NewestGroup>, read: Millis) -> Placement {
    match newest {
        Some(g) if verb.gathers() && g.standing > 0 && g.latest_at > read => Placement::Join(g.id),
        _ => Placement::Open,
    }
}

/// What a group shows: `None` when no event stands that the user may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Distinct actors whose event stands and who are not hidden.
    pub actor_count: u64,
    /// The newest of them, newest first (at most [`SHOWN_ACTORS`]).
    pub actors: Vec<UserId>,
    /// The time of the newest of their events.
    pub latest_at: Millis,
}

/// Summarizes a group from its standing events `(actor, at)`, newest first,
/// skipping actors `hidden` from the user. An actor with several standing
/// events in one group counts once, at its newest.
pub fn summarize(
    standing_newest_first: impl IntoIterator<Item = (UserId, Millis)>,
    hidden: impl Fn(UserId) -> bool,
) -> Option<Summary> {
    let mut actors: Vec<UserId> = Vec::new();
    let mut count = 0u64;
    let mut latest: Option<Millis> = None;
    let mut seen = std::collections::HashSet::new();
    for (a, at) in standing_newest_first {
        if hidden(a) || !seen.insert(a) {
            continue;
        }
        count += 1;
        latest.get_or_insert(at);
        if actors.len() < SHOWN_ACTORS {
            actors.push(a);
        }
    }
    latest.map(|latest_at| Summary { actor_count: count, actors, latest_at })
}

/// What an event does to a user's notifications: it stands from now, or it
/// no longer stands (its cause was undone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Whose notifications.
    pub user: UserId,
    pub verb: Verb,
    pub actor: UserId,
    pub at: Millis,
    /// `true`: the event stands from `at`; `false`: it is taken out.
    pub stands: bool,
    /// The item whose deletion ends the event (and every other of its
    /// group): the item reacted to or reposted, the item replied to.
    pub about: Option<ItemId>,
}

/// One change to the stored notifications: what a write does to them, as
/// [`ops`] decides it. Engines apply a list of them in one atomic write per
/// user, deciding the grouping ([`place`]) from what they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The event stands from `notice.at` (an event already standing is
    /// kept as it is: applying twice is applying once). `open` is the id
    /// of the group it opens, if [`place`] opens one: ids come from the
    /// item id generator, so they are unique across users and nodes and
    /// sort by time.
    Stand { notice: Notice, open: u64 },
    /// The event no longer stands (its cause was undone), if it stands
    /// from `at` or before: a repost deleted (again: deletes are repeated)
    /// after its reposter reposted the same original anew takes only its
    /// own event along, not the newer one.
    Fall { user: UserId, verb: Verb, actor: UserId, at: Millis },
    /// `item` of `user` was deleted: every event about it (reactions to it,
    /// reposts of it, replies to it) falls.
    Forget { user: UserId, item: ItemId },
    /// `actor` became hidden from `user` (a block either way, `user`'s
    /// mute) or visible again: their events stay stored, and are shown,
    /// counted and ordered by again only while visible.
    Hide { user: UserId, actor: UserId, hidden: bool },
}

impl Op {
    /// Whose notifications it changes.
    pub fn user(&self) -> UserId {
        match self {
            Op::Stand { notice, .. } => notice.user,
            Op::Fall { user, .. } | Op::Forget { user, .. } | Op::Hide { user, .. } => *user,
        }
    }
}

/// A write that may make or unmake notifications, with the facts they
/// need (engines know them when they write).
#[derive(Debug, Clone)]
pub enum Cause<'a> {
    /// A new item, or one deleted (`stands: false`): a reply notifies the
    /// author of its parent, a repost the author of its original, and every
    /// mention its user.
    Item { item: &'a crate::item::Item, parent_author: Option<UserId>, original_author: Option<UserId>, stands: bool },
    /// `from` follows (or no longer follows) `to`.
    Follow { from: UserId, to: UserId, at: Millis, stands: bool },
    /// `user` reacted (or took it back) on `item` of `author`.
    Reaction { item: ItemId, author: UserId, user: UserId, kind: &'a str, at: Millis, stands: bool },
    /// Whether `actor` is hidden from `user` changed (or may have: a block,
    /// an unblock, a mute or an unmute), and is now `hidden`.
    Hidden { user: UserId, actor: UserId, hidden: bool },
}

/// The notification events a write makes or unmakes: the one routing rule
/// of notifications. Nobody is notified of their own acts. An item's time is
/// its creation time (its id's); undoing names the same event.
pub fn notices(cause: &Cause<'_>, item_at: impl Fn(ItemId) -> Millis) -> Vec<Notice> {
    let mut out = Vec::new();
    let mut push = |user: UserId, verb: Verb, actor: UserId, at: Millis, stands: bool, about: Option<ItemId>| {
        if user != actor {
            out.push(Notice { user, verb, actor, at, stands, about });
        }
    };
    match cause {
        Cause::Item { item, parent_author, original_author, stands } => {
            let at = item_at(item.id);
            if let (Some(parent), Some(p)) = (item.reply_to, parent_author) {
                push(*p, Verb::Reply { item: item.id }, item.author, at, *stands, Some(parent));
            }
            if let (Some(o), Some(a)) = (item.repost_of, original_author) {
                push(*a, Verb::Repost { item: o }, item.author, at, *stands, Some(o));
            }
            if item.repost_of.is_none() {
                for m in &item.mentions {
                    push(*m, Verb::Mention { item: item.id }, item.author, at, *stands, None);
                }
            }
        }
        Cause::Follow { from, to, at, stands } => push(*to, Verb::Follow, *from, *at, *stands, None),
        Cause::Reaction { item, author, user, kind, at, stands } => {
            push(*author, Verb::Reaction { item: *item, kind: (*kind).to_owned() }, *user, *at, *stands, Some(*item))
        }
        Cause::Hidden { .. } => {}
    }
    out
}

/// The routing rule of notifications: what a write does to the stored
/// notifications. Events that stand from now open their group (if they
/// open one) with an id from `next_id`; undone ones fall; a deleted item
/// takes every event about it along; a change of who is hidden re-hides.
pub fn ops(cause: &Cause<'_>, item_at: impl Fn(ItemId) -> Millis, mut next_id: impl FnMut() -> u64) -> Vec<Op> {
    let mut out: Vec<Op> = notices(cause, item_at)
        .into_iter()
        .map(|n| {
            if n.stands {
                Op::Stand { notice: n, open: next_id() }
            } else {
                Op::Fall { user: n.user, verb: n.verb, actor: n.actor, at: n.at }
            }
        })
        .collect();
    match cause {
        Cause::Item { item, stands: false, .. } => out.push(Op::Forget { user: item.author, item: item.id }),
        Cause::Hidden { user, actor, hidden } if user != actor => {
            out.push(Op::Hide { user: *user, actor: *actor, hidden: *hidden })
        }
        _ => {}
    }
    out
}

/// A user's two marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Seen,
    Read,
}

/// The time before every event: where marks start.
pub const NEVER: Millis = Millis(i64::MIN);

/// A mark moved to `to`: it only moves forward.
pub fn advance_mark(mark: Millis, to: Millis) -> Millis {
    mark.max(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(id: u64, latest: i64, standing: u64) -> Option<NewestGroup> {
        Some(NewestGroup { id, latest_at: Millis(latest), standing })
    }

    #[test]
    fn events_join_the_newest_unread_group_of_their_key() {
        let like = Verb::Reaction { item: ItemId(9), kind: "like".into() };
        assert_eq!(place(&like, None, Millis(0)), Placement::Open, "the first");
        assert_eq!(place(&like, g(3, 100, 2), Millis(50)), Placement::Join(3), "unread: joins");
        assert_eq!(place(&like, g(3, 100, 2), Millis(100)), Placement::Open, "read: a new group");
        assert_eq!(place(&like, g(3, 100, 0), Millis(0)), Placement::Open, "nothing standing: a new group");
        assert_eq!(place(&Verb::Follow, g(4, 100, 1), Millis(0)), Placement::Join(4));
        assert_eq!(place(&Verb::Repost { item: ItemId(9) }, g(5, 100, 1), Millis(0)), Placement::Join(5));
        // Replies and mentions never gather.
        assert_eq!(place(&Verb::Reply { item: ItemId(10) }, g(6, 100, 1), Millis(0)), Placement::Open);
        assert_eq!(place(&Verb::Mention { item: ItemId(11) }, g(7, 100, 1), Millis(0)), Placement::Open);
    }

    #[test]
    fn a_group_shows_its_newest_visible_actors_and_their_exact_count() {
        let ev: Vec<(UserId, Millis)> = (1..=8).rev().map(|a| (UserId(a), Millis(a as i64 * 10))).collect();
        let s = summarize(ev.clone(), |_| false).expect("shown");
        assert_eq!(s.actor_count, 8);
        assert_eq!(s.actors, [8, 7, 6, 5, 4].map(UserId));
        assert_eq!(s.latest_at, Millis(80));
        // Hidden actors are left out: count, actors and latest_at.
        let s = summarize(ev.clone(), |a| a == UserId(8) || a == UserId(6)).expect("shown");
        assert_eq!(
            (s.actor_count, s.actors.clone(), s.latest_at),
            (6, [7, 5, 4, 3, 2].map(UserId).to_vec(), Millis(70))
        );
        assert_eq!(summarize(ev, |_| true), None, "all hidden: not shown");
        assert_eq!(summarize(Vec::new(), |_| false), None, "nothing standing: not shown");
        // An actor listed twice counts once, at its newest (engines pass each
        // actor's standing event; this keeps a summary exact regardless).
        let twice = vec![(UserId(1), Millis(30)), (UserId(2), Millis(20)), (UserId(1), Millis(10))];
        let s = summarize(twice, |_| false).expect("shown");
        assert_eq!((s.actor_count, s.actors), (2, vec![UserId(1), UserId(2)]));
    }

    #[test]
    fn each_write_notifies_whom_the_spec_says_and_never_the_actor() {
        use crate::item::{Item, ItemKind};
        let at = |_: ItemId| Millis(77);
        let mut reply = Item::new(ItemId(20), UserId(2), ItemKind::Reply);
        reply.reply_to = Some(ItemId(10));
        reply.mentions = vec![UserId(3), UserId(2)];
        let n = notices(
            &Cause::Item { item: &reply, parent_author: Some(UserId(1)), original_author: None, stands: true },
            at,
        );
        assert_eq!(
            n,
            vec![
                Notice {
                    user: UserId(1),
                    verb: Verb::Reply { item: ItemId(20) },
                    actor: UserId(2),
                    at: Millis(77),
                    stands: true,
                    about: Some(ItemId(10))
                },
                Notice {
                    user: UserId(3),
                    verb: Verb::Mention { item: ItemId(20) },
                    actor: UserId(2),
                    at: Millis(77),
                    stands: true,
                    about: None
                },
            ],
            "the parent's author and the mentioned, not the author mentioning themselves"
        );
        let mut repost = Item::new(ItemId(21), UserId(4), ItemKind::Repost);
        repost.repost_of = Some(ItemId(10));
        repost.mentions = vec![UserId(5)];
        let n = notices(
            &Cause::Item { item: &repost, parent_author: None, original_author: Some(UserId(1)), stands: false },
            at,
        );
        assert_eq!(
            n,
            vec![Notice {
                user: UserId(1),
                verb: Verb::Repost { item: ItemId(10) },
                actor: UserId(4),
                at: Millis(77),
                stands: false,
                about: Some(ItemId(10))
            }]
        );
        let n = notices(&Cause::Follow { from: UserId(1), to: UserId(1), at: Millis(5), stands: true }, at);
        assert!(n.is_empty(), "no notice of one's own acts");
        let n = notices(
            &Cause::Reaction {
                item: ItemId(10),
                author: UserId(1),
                user: UserId(6),
                kind: "like",
                at: Millis(9),
                stands: true,
            },
            at,
        );
        assert_eq!(n[0].verb, Verb::Reaction { item: ItemId(10), kind: "like".into() });
        assert_eq!((n[0].user, n[0].actor), (UserId(1), UserId(6)));
    }

    #[test]
    fn a_deleted_item_takes_its_events_along_and_hiding_re_hides() {
        use crate::item::{Item, ItemKind};
        let mut n = 100;
        let mut next = || {
            n += 1;
            n
        };
        let mut reply = Item::new(ItemId(20), UserId(2), ItemKind::Reply);
        reply.reply_to = Some(ItemId(10));
        let made = ops(
            &Cause::Item { item: &reply, parent_author: Some(UserId(1)), original_author: None, stands: true },
            |_| Millis(5),
            &mut next,
        );
        assert!(
            matches!(&made[..], [Op::Stand { notice, open: 101 }] if notice.about == Some(ItemId(10)) && notice.user == UserId(1)),
            "{made:?}"
        );
        let undone = ops(
            &Cause::Item { item: &reply, parent_author: Some(UserId(1)), original_author: None, stands: false },
            |_| Millis(5),
            &mut next,
        );
        assert_eq!(
            undone,
            vec![
                Op::Fall { user: UserId(1), verb: Verb::Reply { item: ItemId(20) }, actor: UserId(2), at: Millis(5) },
                Op::Forget { user: UserId(2), item: ItemId(20) },
            ],
            "the reply's own event falls, and whatever was about the reply"
        );
        assert_eq!(
            ops(&Cause::Hidden { user: UserId(1), actor: UserId(2), hidden: true }, |_| Millis(0), &mut next),
            vec![Op::Hide { user: UserId(1), actor: UserId(2), hidden: true }]
        );
        assert!(
            ops(&Cause::Hidden { user: UserId(1), actor: UserId(1), hidden: true }, |_| Millis(0), &mut next)
                .is_empty()
        );
        assert_eq!(made[0].user(), UserId(1));
    }

    #[test]
    fn marks_only_move_forward() {
        assert_eq!(advance_mark(Millis(50), Millis(40)), Millis(50));
        assert_eq!(advance_mark(Millis(50), Millis(60)), Millis(60));
    }

    #[test]
    fn verbs_name_their_item() {
        assert_eq!(Verb::Follow.item(), None);
        assert_eq!(Verb::Reply { item: ItemId(3) }.item(), Some(ItemId(3)));
        assert_eq!(Verb::Reaction { item: ItemId(4), kind: "wow".into() }.name(), "reaction");
    }
}
