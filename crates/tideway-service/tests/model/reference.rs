//! The reference: a plain model of every feed's definition (SPEC), sharing
//! no code with the service, and the notifications and live sessions it
//! expects.

use super::*;

pub(crate) const USERS: u64 = 6;

#[derive(Clone, Debug)]
pub(crate) struct MItem {
    pub(crate) id: u64,
    pub(crate) author: u64,
    pub(crate) card: bool,
    pub(crate) vis: Visibility,
    pub(crate) mentions: Vec<u64>,
    pub(crate) tags: Vec<&'static str>,
    pub(crate) object: Option<&'static str>,
    pub(crate) repost_of: Option<u64>,
    pub(crate) reply_to: Option<u64>,
    pub(crate) reply_to_author: Option<u64>,
    pub(crate) deleted: bool,
}

/// The reference: plain sets and a brute-force reading of SPEC section 2.
#[derive(Default)]
pub(crate) struct Model {
    pub(crate) items: BTreeMap<u64, MItem>,
    pub(crate) follows: HashSet<(u64, u64)>,
    pub(crate) blocks: HashSet<(u64, u64)>,
    pub(crate) mutes: HashSet<(u64, u64)>,
    /// (user, key, item)
    pub(crate) inserts: Vec<(u64, u64, u64)>,
    pub(crate) max_following: usize,
    /// (item, user, kind)
    pub(crate) reactions: HashSet<(u64, u64, &'static str)>,
    /// (id, item, every, starts_at, ends_at)
    pub(crate) promotions: Vec<(u64, u64, u32, i64, i64)>,
    /// Notification groups, in the order they were opened.
    pub(crate) ngroups: Vec<MGroup>,
    /// The newest start of each event (user, what, actor): only it may stand.
    pub(crate) nlatest: std::collections::HashMap<(u64, Ident, u64), u64>,
    /// Each user's (seen, read) marks.
    pub(crate) marks: std::collections::HashMap<u64, (i64, i64)>,
    pub(crate) nseq: u64,
    /// Live sessions by id.
    pub(crate) sessions: BTreeMap<u64, Session>,
    /// Live feed walks under way.
    pub(crate) walks: Vec<MWalk>,
}

/// A live feed walk: its viewer, the cursor of its next page, its snapshot
/// as the reference took it, and where the next page starts.
#[derive(Clone, Debug)]
pub(crate) struct MWalk {
    pub(crate) viewer: u64,
    pub(crate) limit: usize,
    pub(crate) cursor: String,
    pub(crate) taken: i64,
    pub(crate) snap: Vec<(u64, Phase)>,
    pub(crate) at: MPos,
    /// Its snapshot was lost (a restart that loses the shared half).
    pub(crate) lost: bool,
}

/// A position of the reference's walk: the next snapshot index, or below
/// this (end, id) in the replay part.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum MPos {
    Snap(usize),
    Replay(i64, u64),
}

/// The live feed's snapshot time to live in the model (test clock ms).
pub(crate) const LIVE_TTL_MS: i64 = 60;

/// What the live walks met, over every run of the process: later pages,
/// expired walks, sessions shown in a state older than their current one,
/// replays (the memory test asserts each happened).
pub(crate) static LIVE_SEEN: [std::sync::atomic::AtomicU64; 4] = [const { std::sync::atomic::AtomicU64::new(0) }; 4];

pub(crate) fn live_seen(what: usize, n: u64) {
    LIVE_SEEN[what].fetch_add(n, std::sync::atomic::Ordering::Relaxed);
}

/// What a notification event is about, as the reference tells events apart.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Ident {
    Follow,
    /// (item, kind)
    Reaction(u64, &'static str),
    /// (original, the repost)
    Repost(u64, u64),
    /// The reply.
    Reply(u64),
    /// The mentioning item.
    Mention(u64),
}

/// A group's key: verb, item, kind.
pub(crate) type GKey = (&'static str, Option<u64>, Option<&'static str>);

impl Ident {
    pub(crate) fn key(&self) -> GKey {
        match self {
            Ident::Follow => ("follow", None, None),
            Ident::Reaction(i, k) => ("reaction", Some(*i), Some(k)),
            Ident::Repost(o, _) => ("repost", Some(*o), None),
            Ident::Reply(r) => ("reply", Some(*r), None),
            Ident::Mention(i) => ("mention", Some(*i), None),
        }
    }
    pub(crate) fn gathers(&self) -> bool {
        matches!(self, Ident::Follow | Ident::Reaction(..) | Ident::Repost(..))
    }
}

#[derive(Clone, Debug)]
pub(crate) struct MEvent {
    pub(crate) ident: Ident,
    pub(crate) actor: u64,
    pub(crate) at: i64,
    pub(crate) seq: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct MGroup {
    pub(crate) user: u64,
    pub(crate) key: GKey,
    pub(crate) seq: u64,
    pub(crate) events: Vec<MEvent>,
}

/// A notification group as compared: (key, latest_at, actors, actor_count, seen, read).
pub(crate) type NRow = (GKey, i64, Vec<u64>, u64, bool, bool);

pub(crate) type Row = (u64, &'static str, Vec<(u64, u64)>);

impl Model {
    /// SPEC section 5, brute force: the snapshot `viewer` takes now (the
    /// open sessions of whom they follow: live by newest start, then
    /// upcoming by soonest start; ties by id).
    pub(crate) fn live_snapshot(&self, viewer: u64) -> Vec<(u64, Phase)> {
        let mut open: Vec<&Session> =
            self.sessions.values().filter(|s| self.follows(viewer, s.anchor.0) && s.ended_at.is_none()).collect();
        open.sort_by_key(|s| match s.started_at {
            Some(t) => (0, -t.0, u64::MAX - s.id),
            None => (1, s.scheduled_start.0, s.id),
        });
        open.iter().map(|s| (s.id, if s.started_at.is_some() { Phase::Live } else { Phase::Upcoming })).collect()
    }

    /// The rest of a walk from `at`, each entry with the position after it.
    pub(crate) fn live_rest(&self, w: &MWalk, at: MPos) -> Vec<(Session, MPos)> {
        let v = w.viewer;
        let mut out = Vec::new();
        if let MPos::Snap(from) = at {
            for (i, (id, phase)) in w.snap.iter().enumerate().skip(from) {
                let s = &self.sessions[id];
                if self.hidden(s.anchor.0, v, true) {
                    continue;
                }
                let mut shown = s.clone();
                if *phase != Phase::Replay {
                    shown.ended_at = None;
                }
                if *phase == Phase::Upcoming {
                    shown.started_at = None;
                }
                out.push((shown, MPos::Snap(i + 1)));
            }
        }
        let below = match at {
            MPos::Snap(_) => (w.taken, u64::MAX),
            MPos::Replay(t, id) => (t, id),
        };
        let mut replay: Vec<&Session> = self
            .sessions
            .values()
            .filter(|s| {
                s.ended_at.is_some_and(|e| (e.0, s.id) < below && e.0 <= w.taken)
                    && self.follows(v, s.anchor.0)
                    && !self.hidden(s.anchor.0, v, true)
                    && !w.snap.iter().any(|(id, _)| *id == s.id)
            })
            .collect();
        replay.sort_by_key(|s| std::cmp::Reverse((s.ended_at, s.id)));
        out.extend(replay.into_iter().map(|s| (s.clone(), MPos::Replay(s.ended_at.map_or(0, |e| e.0), s.id))));
        out
    }

    pub(crate) fn follows(&self, a: u64, b: u64) -> bool {
        self.follows.contains(&(a, b))
    }
    pub(crate) fn blocked(&self, a: u64, b: u64) -> bool {
        self.blocks.contains(&(a, b)) || self.blocks.contains(&(b, a))
    }
    pub(crate) fn hidden(&self, a: u64, v: u64, with_mutes: bool) -> bool {
        a != v && (self.blocked(a, v) || (with_mutes && self.mutes.contains(&(v, a))))
    }
    pub(crate) fn in_f(&self, u: u64, x: u64) -> bool {
        x == u || self.follows(u, x)
    }
    pub(crate) fn visible(&self, o: &MItem, v: Option<u64>) -> bool {
        if o.deleted {
            return false;
        }
        match (o.vis, v) {
            (Visibility::Public, _) => true,
            (_, None) => false,
            (Visibility::Followers, Some(v)) => v == o.author || self.follows(v, o.author) || o.mentions.contains(&v),
            (Visibility::Mentioned, Some(v)) => v == o.author || o.mentions.contains(&v),
        }
    }
    pub(crate) fn live_reposts(&self, o: u64) -> Vec<&MItem> {
        self.items.values().filter(|r| r.repost_of == Some(o) && !r.deleted).collect()
    }

    pub(crate) fn entry(
        mut apps: Vec<(u64, &'static str)>,
        o: u64,
        mut sources: Vec<(u64, u64)>,
    ) -> Option<(u64, Row)> {
        apps.sort();
        sources.sort_by_key(|s| s.1);
        apps.first().map(|&(k, why)| (k, (o, why, sources)))
    }

    /// (reactions per kind, the viewer's kinds, replies, reposts) of an item.
    pub(crate) fn hydration(&self, o: u64, viewer: u64) -> (Vec<(String, u64)>, Vec<String>, u64, u64) {
        let mut per: BTreeMap<String, u64> = BTreeMap::new();
        let mut mine = Vec::new();
        for &(i, u, k) in &self.reactions {
            if i == o {
                *per.entry(k.to_owned()).or_default() += 1;
                if u == viewer {
                    mine.push(k.to_owned());
                }
            }
        }
        mine.sort();
        let replies = self.items.values().filter(|r| r.reply_to == Some(o) && !r.deleted).count() as u64;
        let reposts = self.live_reposts(o).len() as u64;
        (per.into_iter().collect(), mine, replies, reposts)
    }

    /// Promoted items `u` may see at `now`, in promotion order: (item, every).
    pub(crate) fn promos_for(&self, u: u64, now: i64) -> Vec<(u64, u32)> {
        let mut ps: Vec<&(u64, u64, u32, i64, i64)> = self.promotions.iter().collect();
        ps.sort();
        ps.into_iter()
            .filter(|(_, item, _, start, end)| {
                let o = &self.items[item];
                *start <= now && now < *end && self.visible(o, Some(u)) && !self.hidden(o.author, u, true)
            })
            .map(|&(_, item, every, _, _)| (item, every))
            .collect()
    }

    pub(crate) fn home(&self, u: u64) -> Vec<Row> {
        let mut rows = Vec::new();
        for o in self.items.values().filter(|o| o.repost_of.is_none()) {
            if !self.visible(o, Some(u)) || self.hidden(o.author, u, true) {
                continue;
            }
            let mut apps = Vec::new();
            if !o.card && self.in_f(u, o.author) && o.reply_to_author.is_none_or(|p| self.in_f(u, p)) {
                apps.push((o.id, "authored"));
            }
            let mut sources = Vec::new();
            for r in self.live_reposts(o.id) {
                if self.in_f(u, r.author) && !self.hidden(r.author, u, true) {
                    apps.push((r.id, "repost"));
                    sources.push((r.author, r.id));
                }
            }
            for &(who, key, item) in &self.inserts {
                if who == u && item == o.id {
                    apps.push((key, "inserted"));
                }
            }
            rows.extend(Self::entry(apps, o.id, sources));
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        rows.into_iter().map(|(_, r)| r).collect()
    }

    /// A posting feed's rows: the items (never reposts) it holds and shows,
    /// newest first, each an entry of its own.
    pub(crate) fn postings(&self, holds: impl Fn(&MItem) -> bool, shows: impl Fn(&MItem) -> bool) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .items
            .values()
            .filter(|i| i.repost_of.is_none() && !i.deleted && holds(i) && shows(i))
            .map(|i| (i.id, "authored", vec![]))
            .collect();
        rows.reverse();
        rows
    }

    /// mentions(u): items that mention u, visible(i, u), not hidden(author, u).
    pub(crate) fn mentions(&self, u: u64) -> Vec<Row> {
        self.postings(|i| i.mentions.contains(&u), |i| self.visible(i, Some(u)) && !self.hidden(i.author, u, true))
    }

    /// tag(t) / object(o) seen by v: public items that hold it, minus hidden(author, v).
    pub(crate) fn tagged(&self, holds: impl Fn(&MItem) -> bool, v: Option<u64>) -> Vec<Row> {
        self.postings(holds, |i| i.vis == Visibility::Public && v.is_none_or(|v| !self.hidden(i.author, v, true)))
    }

    /// Whether a notification event of `user` stands now (SPEC section 2),
    /// its actor not hidden from the user.
    pub(crate) fn stands(&self, user: u64, e: &MEvent) -> bool {
        if e.actor == user
            || self.hidden(e.actor, user, true)
            || self.nlatest.get(&(user, e.ident.clone(), e.actor)) != Some(&e.seq)
        {
            return false;
        }
        let live = |i: u64| self.items.get(&i).is_some_and(|x| !x.deleted);
        match &e.ident {
            Ident::Follow => self.follows(e.actor, user),
            Ident::Reaction(i, k) => {
                self.reactions.contains(&(*i, e.actor, *k)) && live(*i) && self.items[i].author == user
            }
            Ident::Repost(o, r) => live(*o) && live(*r),
            Ident::Reply(r) => live(*r) && self.items[r].reply_to.is_some_and(live),
            Ident::Mention(i) => live(*i) && self.visible(&self.items[i], Some(user)),
        }
    }

    /// (latest_at, the 5 newest actors, actor_count) of a group; `None`
    /// when nothing in it stands.
    pub(crate) fn summary(&self, g: &MGroup) -> Option<(i64, Vec<u64>, u64)> {
        let mut ev: Vec<(i64, u64)> =
            g.events.iter().filter(|e| self.stands(g.user, e)).map(|e| (e.at, e.actor)).collect();
        ev.sort_unstable_by(|a, b| b.cmp(a));
        let first = ev.first()?.0;
        Some((first, ev.iter().take(5).map(|e| e.1).collect(), ev.len() as u64))
    }

    /// notifications(u): the groups shown, newest first, and the numbers
    /// above the seen and read marks.
    pub(crate) fn notifications(&self, u: u64) -> (Vec<NRow>, u64, u64) {
        let (seen, read) = self.marks.get(&u).copied().unwrap_or((i64::MIN, i64::MIN));
        let mut rows: Vec<(i64, u64, NRow)> = self
            .ngroups
            .iter()
            .filter(|g| g.user == u)
            .filter_map(|g| {
                let (at, actors, n) = self.summary(g)?;
                Some((at, g.seq, (g.key, at, actors, n, at <= seen, at <= read)))
            })
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse((r.0, r.1)));
        let unseen = rows.iter().filter(|r| !r.2.4).count() as u64;
        let unread = rows.iter().filter(|r| !r.2.5).count() as u64;
        (rows.into_iter().map(|r| r.2).collect(), unseen, unread)
    }

    /// A notification event starts: it joins the newest group of its key
    /// while that group shows something and is unread, else opens one.
    pub(crate) fn start(&mut self, user: u64, ident: Ident, actor: u64, at: i64) {
        if user == actor {
            return;
        }
        let read = self.marks.get(&user).map_or(i64::MIN, |m| m.1);
        let key = ident.key();
        // The new start supersedes any earlier one of the same event (a
        // follow after an unfollow): that one no longer stands.
        self.nseq += 1;
        self.nlatest.insert((user, ident.clone(), actor), self.nseq);
        let join = if ident.gathers() {
            self.ngroups
                .iter()
                .rposition(|g| g.user == user && g.key == key)
                .filter(|&gi| self.summary(&self.ngroups[gi]).is_some_and(|s| s.0 > read))
        } else {
            None
        };
        let e = MEvent { ident, actor, at, seq: self.nseq };
        match join {
            Some(gi) => self.ngroups[gi].events.push(e),
            None => self.ngroups.push(MGroup { user, key, seq: self.nseq, events: vec![e] }),
        }
    }

    pub(crate) fn profile(&self, a: u64, v: Option<u64>) -> Vec<Row> {
        if v.is_some_and(|v| v != a && self.blocked(a, v)) {
            return vec![];
        }
        let mut rows = Vec::new();
        for o in self.items.values().filter(|o| o.repost_of.is_none()) {
            if !self.visible(o, v) || v.is_some_and(|v| self.hidden(o.author, v, false)) {
                continue;
            }
            let mut apps = Vec::new();
            if o.author == a && !o.card {
                apps.push((o.id, "authored"));
            }
            let mut sources = Vec::new();
            for r in self.live_reposts(o.id) {
                if r.author == a {
                    apps.push((r.id, "repost"));
                    sources.push((r.author, r.id));
                }
            }
            rows.extend(Self::entry(apps, o.id, sources));
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        rows.into_iter().map(|(_, r)| r).collect()
    }
}
