//! [`Book`]: one user's notifications in memory — the groups, the events
//! standing in them, the two marks and the counts above them — changed by
//! [`Op`]s under the rules of `tideway_core::notify`. The memory and
//! embedded backends keep one per user in their index; the embedded store
//! persists the [`Row`]s every change reports and rebuilds a book from
//! them ([`Book::from_rows`]). The SQL engines keep the same rows as
//! tables and apply the same rules in a transaction.
//!
//! Costs: an event standing or falling is O(log n) in the group's events;
//! a page is O(limit); the `unseen`/`unread` counts are kept, not counted
//! (a mark that moves counts the groups it passes, each once per time it
//! rose above it, so O(1) amortized per event).

use crate::traits::{GroupView, NotifyPage};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;
use std::ops::Bound;
use tideway_core::notify::{Mark, NEVER, NewestGroup, Op, Placement, SHOWN_ACTORS, Verb, place};
use tideway_core::{ItemId, Millis, UserId};

/// A standing event: in which group, since when, and whether its actor is
/// hidden from the user now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    pub group: u64,
    pub at: Millis,
    pub hidden: bool,
}

/// A group's fixed facts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupHead {
    pub verb: Verb,
    /// The item whose deletion ends its events.
    pub about: Option<ItemId>,
    /// The `latest_at` it had when it last had one (a mark `up_to` a group
    /// with nothing standing moves there).
    pub last_at: Millis,
}

/// What a change wrote, for a journal that keeps books as rows.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// An event of `actor` with `verb` in `user`'s book; `None`: gone.
    Event {
        user: UserId,
        verb: Verb,
        actor: UserId,
        event: Option<Event>,
    },
    Group {
        user: UserId,
        id: u64,
        head: GroupHead,
    },
    Marks {
        user: UserId,
        seen: Millis,
        read: Millis,
    },
}

#[derive(Debug, Clone)]
struct Group {
    head: GroupHead,
    /// Standing events of visible actors, by (time, actor).
    shown: BTreeSet<(Millis, UserId)>,
    /// Standing events of hidden actors.
    hidden: BTreeSet<(Millis, UserId)>,
}

impl Group {
    fn latest(&self) -> Option<Millis> {
        self.shown.last().map(|e| e.0)
    }
}

/// One user's notifications.
#[derive(Debug, Clone)]
pub struct Book {
    seen: Millis,
    read: Millis,
    groups: FxHashMap<u64, Group>,
    /// Groups with a visible standing event, by (`latest_at`, id).
    order: BTreeSet<(Millis, u64)>,
    /// The newest group of each gathering key.
    newest: FxHashMap<Verb, u64>,
    events: FxHashMap<(Verb, UserId), Event>,
    by_actor: FxHashMap<UserId, FxHashSet<Verb>>,
    by_about: FxHashMap<ItemId, Vec<u64>>,
    /// Groups in `order` above each mark.
    unseen: u64,
    unread: u64,
}

impl Default for Book {
    fn default() -> Self {
        Self {
            seen: NEVER,
            read: NEVER,
            groups: FxHashMap::default(),
            order: BTreeSet::new(),
            newest: FxHashMap::default(),
            events: FxHashMap::default(),
            by_actor: FxHashMap::default(),
            by_about: FxHashMap::default(),
            unseen: 0,
            unread: 0,
        }
    }
}

impl Book {
    /// A book from its stored rows (any order).
    pub fn from_rows(
        marks: Option<(Millis, Millis)>,
        groups: impl IntoIterator<Item = (u64, GroupHead)>,
        events: impl IntoIterator<Item = (Verb, UserId, Event)>,
    ) -> Self {
        let mut b = Book::default();
        if let Some((seen, read)) = marks {
            b.seen = seen;
            b.read = read;
        }
        for (id, head) in groups {
            b.add_group(id, head);
        }
        for (verb, actor, ev) in events {
            let Some(g) = b.groups.get_mut(&ev.group) else { continue };
            if ev.hidden { &mut g.hidden } else { &mut g.shown }.insert((ev.at, actor));
            b.by_actor.entry(actor).or_default().insert(verb.clone());
            b.events.insert((verb, actor), ev);
        }
        let shown: Vec<(Millis, u64)> = b.groups.iter().filter_map(|(id, g)| g.latest().map(|at| (at, *id))).collect();
        for (at, id) in shown {
            b.reorder(id, None, Some(at));
        }
        b
    }

    fn add_group(&mut self, id: u64, head: GroupHead) {
        if head.verb.gathers() {
            let newest = self.newest.entry(head.verb.clone()).or_insert(id);
            *newest = (*newest).max(id);
        }
        if let Some(about) = head.about {
            self.by_about.entry(about).or_default().push(id);
        }
        self.groups.insert(id, Group { head, shown: BTreeSet::new(), hidden: BTreeSet::new() });
    }

    /// Moves group `id` in the order from `old` to `new` (its `latest_at`
    /// before and after), keeping the counts above the marks.
    fn reorder(&mut self, id: u64, old: Option<Millis>, new: Option<Millis>) {
        if old == new {
            return;
        }
        if let Some(at) = old {
            self.order.remove(&(at, id));
            self.unseen -= u64::from(at > self.seen);
            self.unread -= u64::from(at > self.read);
        }
        if let Some(at) = new {
            self.order.insert((at, id));
            self.unseen += u64::from(at > self.seen);
            self.unread += u64::from(at > self.read);
        }
    }

    /// Changes group `id` by `f`, keeping the order and counts; reports its
    /// head when its `last_at` moved.
    fn change_group(&mut self, user: UserId, id: u64, rows: &mut Vec<Row>, f: impl FnOnce(&mut Group)) {
        let Some(g) = self.groups.get_mut(&id) else { return };
        let old = g.latest();
        f(g);
        let new = g.latest();
        if let Some(at) = new
            && at != g.head.last_at
        {
            g.head.last_at = at;
            rows.push(Row::Group { user, id, head: g.head.clone() });
        }
        self.reorder(id, old, new);
    }

    /// Applies one op of this book's user; `hidden(actor)` says whether an
    /// actor is hidden from the user now (for an event that starts).
    pub fn apply(&mut self, op: &Op, hidden: impl Fn(UserId) -> bool, rows: &mut Vec<Row>) {
        let user = op.user();
        match op {
            Op::Stand { notice, open } => {
                let key = (notice.verb.clone(), notice.actor);
                if self.events.contains_key(&key) {
                    return;
                }
                let newest = self.newest.get(&notice.verb).and_then(|id| {
                    let g = self.groups.get(id)?;
                    Some(NewestGroup {
                        id: *id,
                        latest_at: g.latest().unwrap_or(NEVER),
                        standing: g.shown.len() as u64,
                    })
                });
                let id = match place(&notice.verb, newest, self.read) {
                    Placement::Join(id) => id,
                    Placement::Open => {
                        if !self.groups.contains_key(open) {
                            let head = GroupHead { verb: notice.verb.clone(), about: notice.about, last_at: notice.at };
                            rows.push(Row::Group { user, id: *open, head: head.clone() });
                            self.add_group(*open, head);
                        }
                        *open
                    }
                };
                let ev = Event { group: id, at: notice.at, hidden: hidden(notice.actor) };
                self.change_group(user, id, rows, |g| {
                    if ev.hidden { &mut g.hidden } else { &mut g.shown }.insert((ev.at, notice.actor));
                });
                self.by_actor.entry(notice.actor).or_default().insert(notice.verb.clone());
                self.events.insert(key, ev);
                rows.push(Row::Event { user, verb: notice.verb.clone(), actor: notice.actor, event: Some(ev) });
            }
            Op::Fall { verb, actor, at, .. } => self.fall(user, verb, *actor, *at, rows),
            Op::Forget { item, .. } => {
                // The groups stay indexed: a group may take events again (an
                // op sent again reuses the group it opened).
                for id in self.by_about.get(item).cloned().unwrap_or_default() {
                    let Some(g) = self.groups.get(&id) else { continue };
                    let verb = g.head.verb.clone();
                    let actors: Vec<UserId> = g.shown.iter().chain(g.hidden.iter()).map(|e| e.1).collect();
                    for actor in actors {
                        self.fall(user, &verb, actor, Millis(i64::MAX), rows);
                    }
                }
            }
            Op::Hide { actor, hidden, .. } => {
                let verbs: Vec<Verb> =
                    self.by_actor.get(actor).map(|v| v.iter().cloned().collect()).unwrap_or_default();
                for verb in verbs {
                    let key = (verb, *actor);
                    let Some(ev) = self.events.get_mut(&key) else { continue };
                    if ev.hidden == *hidden {
                        continue;
                    }
                    ev.hidden = *hidden;
                    let ev = *ev;
                    self.change_group(user, ev.group, rows, |g| {
                        let (from, to) =
                            if ev.hidden { (&mut g.shown, &mut g.hidden) } else { (&mut g.hidden, &mut g.shown) };
                        from.remove(&(ev.at, *actor));
                        to.insert((ev.at, *actor));
                    });
                    rows.push(Row::Event { user, verb: key.0, actor: *actor, event: Some(ev) });
                }
            }
        }
    }

    /// The event of `actor` falls if it stands from `at` or before.
    fn fall(&mut self, user: UserId, verb: &Verb, actor: UserId, at: Millis, rows: &mut Vec<Row>) {
        let key = (verb.clone(), actor);
        if self.events.get(&key).is_none_or(|ev| ev.at > at) {
            return;
        }
        let Some(ev) = self.events.remove(&key) else { return };
        if let Some(verbs) = self.by_actor.get_mut(&actor) {
            verbs.remove(verb);
            if verbs.is_empty() {
                self.by_actor.remove(&actor);
            }
        }
        self.change_group(user, ev.group, rows, |g| {
            g.shown.remove(&(ev.at, actor));
            g.hidden.remove(&(ev.at, actor));
        });
        rows.push(Row::Event { user, verb: verb.clone(), actor, event: None });
    }

    /// Whether `id` is a group of this book.
    pub fn has_group(&self, id: u64) -> bool {
        self.groups.contains_key(&id)
    }

    /// Where a mark moves: to group `up_to`'s `latest_at` (its last one if
    /// nothing stands in it now), or to the newest group's; `None` when
    /// there is nothing to move to. The caller checked that `up_to` is here.
    pub fn mark_target(&self, up_to: Option<u64>) -> Option<Millis> {
        match up_to {
            Some(id) => self.groups.get(&id).map(|g| g.latest().unwrap_or(g.head.last_at)),
            None => self.order.last().map(|e| e.0),
        }
    }

    /// Moves a mark forward to `to` (never back).
    pub fn mark(&mut self, user: UserId, which: Mark, to: Millis, rows: &mut Vec<Row>) {
        let mark = match which {
            Mark::Seen => self.seen,
            Mark::Read => self.read,
        };
        if to <= mark {
            return;
        }
        let passed =
            self.order.range((Bound::Excluded((mark, u64::MAX)), Bound::Included((to, u64::MAX)))).count() as u64;
        match which {
            Mark::Seen => {
                self.seen = to;
                self.unseen -= passed;
            }
            Mark::Read => {
                self.read = to;
                self.unread -= passed;
            }
        }
        rows.push(Row::Marks { user, seen: self.seen, read: self.read });
    }

    /// A page of groups, newest first, below `before` (`(latest_at, id)`).
    pub fn page(&self, before: Option<(Millis, u64)>, limit: usize) -> NotifyPage {
        let upper = before.map_or(Bound::Unbounded, Bound::Excluded);
        let groups = self
            .order
            .range((Bound::Unbounded, upper))
            .rev()
            .take(limit)
            .filter_map(|&(latest_at, id)| {
                let g = self.groups.get(&id)?;
                Some(GroupView {
                    id,
                    verb: g.head.verb.clone(),
                    actors: g.shown.iter().rev().take(SHOWN_ACTORS).map(|e| e.1).collect(),
                    actor_count: g.shown.len() as u64,
                    latest_at,
                })
            })
            .collect();
        NotifyPage { groups, seen: self.seen, read: self.read, unseen: self.unseen, unread: self.unread }
    }

    /// Bytes this book takes (an estimate, for the index's budget).
    pub fn approx_bytes(&self) -> usize {
        256 + self.events.len() * 160 + self.groups.len() * 200 + self.by_about.len() * 64
    }

    /// Standing events kept (for memory reports).
    pub fn events(&self) -> usize {
        self.events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::notify::Notice;

    fn like(item: u64, actor: u64, at: i64, open: u64) -> Op {
        Op::Stand {
            notice: Notice {
                user: UserId(1),
                verb: Verb::Reaction { item: ItemId(item), kind: "like".into() },
                actor: UserId(actor),
                at: Millis(at),
                stands: true,
                about: Some(ItemId(item)),
            },
            open,
        }
    }

    fn apply(b: &mut Book, op: Op, rows: &mut Vec<Row>) {
        b.apply(&op, |a| a == UserId(66), rows);
    }

    #[test]
    fn a_book_keeps_its_counts_and_comes_back_from_its_rows() {
        let mut b = Book::default();
        let mut rows = Vec::new();
        for (actor, at) in [(2, 10), (3, 20), (66, 25), (4, 30)] {
            apply(&mut b, like(9, actor, at, 100 + actor), &mut rows);
        }
        let p = b.page(None, 10);
        assert_eq!(p.groups.len(), 1, "{p:?}");
        assert_eq!((p.groups[0].id, p.groups[0].actor_count, p.unread), (102, 3, 1));
        assert_eq!(p.groups[0].actors, [4, 3, 2].map(UserId));
        b.mark(UserId(1), Mark::Read, b.mark_target(None).expect("a group"), &mut rows);
        assert_eq!(b.page(None, 10).unread, 0);
        apply(&mut b, like(9, 5, 40, 105), &mut rows);
        apply(&mut b, like(8, 5, 41, 106), &mut rows);
        let p = b.page(None, 10);
        assert_eq!(p.groups.iter().map(|g| g.id).collect::<Vec<_>>(), [106, 105, 102], "read: a new group");
        assert_eq!((p.unread, p.unseen), (2, 3));
        apply(&mut b, Op::Hide { user: UserId(1), actor: UserId(66), hidden: false }, &mut rows);
        apply(
            &mut b,
            Op::Fall {
                user: UserId(1),
                verb: Verb::Reaction { item: ItemId(9), kind: "like".into() },
                actor: UserId(4),
                at: Millis(1000),
            },
            &mut rows,
        );
        apply(&mut b, Op::Forget { user: UserId(1), item: ItemId(8) }, &mut rows);
        let p = b.page(None, 10);
        assert_eq!(
            p.groups.iter().map(|g| (g.id, g.actor_count, g.latest_at)).collect::<Vec<_>>(),
            [(105, 1, Millis(40)), (102, 3, Millis(25))]
        );
        assert_eq!((p.unread, p.unseen), (1, 2));
        // The rows give the same book back.
        let mut marks = None;
        let mut groups = FxHashMap::default();
        let mut events = FxHashMap::default();
        for r in rows {
            match r {
                Row::Marks { seen, read, .. } => marks = Some((seen, read)),
                Row::Group { id, head, .. } => {
                    groups.insert(id, head);
                }
                Row::Event { verb, actor, event: Some(e), .. } => {
                    events.insert((verb, actor), e);
                }
                Row::Event { verb, actor, event: None, .. } => {
                    events.remove(&(verb, actor));
                }
            }
        }
        let again = Book::from_rows(marks, groups, events.into_iter().map(|((v, a), e)| (v, a, e)));
        assert_eq!(again.page(None, 10), b.page(None, 10));
        assert_eq!(again.page(Some((Millis(40), 105)), 10).groups.len(), 1, "a page below a cursor");
    }
}
