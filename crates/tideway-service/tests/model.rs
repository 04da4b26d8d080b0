//! Model-based test: random sequences of every write the API offers, over a
//! few users with a tiny inbox cap, hot-author thresholds crossed both ways
//! and readers going inactive, against the in-memory and the embedded
//! backends (with restarts). After the fan-out queue drains, every page of
//! every home and profile — walked older and newer, at several page sizes —
//! must equal the SPEC's pull definition computed by the plain reference
//! implementation below, which shares no code with the service.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use tideway_core::live::{Move, Phase, Session};
use tideway_core::{ItemId, ItemKind, Millis, NewItem, UserId, Visibility};
use tideway_engines::Opened;
use tideway_service::config::{BackendKind, SyncKind};
use tideway_service::{FanoutWorker, FeedService, ManualClock, Page, PageRequest, ServiceError, ServiceOptions};
use tideway_store::{Backend, Counted};

const USERS: u64 = 6;

#[derive(Clone, Debug)]
struct MItem {
    id: u64,
    author: u64,
    card: bool,
    vis: Visibility,
    mentions: Vec<u64>,
    tags: Vec<&'static str>,
    object: Option<&'static str>,
    repost_of: Option<u64>,
    reply_to: Option<u64>,
    reply_to_author: Option<u64>,
    deleted: bool,
}

/// The reference: plain sets and a brute-force reading of SPEC section 2.
#[derive(Default)]
struct Model {
    items: BTreeMap<u64, MItem>,
    follows: HashSet<(u64, u64)>,
    blocks: HashSet<(u64, u64)>,
    mutes: HashSet<(u64, u64)>,
    /// (user, key, item)
    inserts: Vec<(u64, u64, u64)>,
    max_following: usize,
    /// (item, user, kind)
    reactions: HashSet<(u64, u64, &'static str)>,
    /// (id, item, every, starts_at, ends_at)
    promotions: Vec<(u64, u64, u32, i64, i64)>,
    /// Notification groups, in the order they were opened.
    ngroups: Vec<MGroup>,
    /// The newest start of each event (user, what, actor): only it may stand.
    nlatest: std::collections::HashMap<(u64, Ident, u64), u64>,
    /// Each user's (seen, read) marks.
    marks: std::collections::HashMap<u64, (i64, i64)>,
    nseq: u64,
    /// Live sessions by id.
    sessions: BTreeMap<u64, Session>,
    /// Live feed walks under way.
    walks: Vec<MWalk>,
}

/// A live feed walk: its viewer, the cursor of its next page, its snapshot
/// as the reference took it, and where the next page starts.
#[derive(Clone, Debug)]
struct MWalk {
    viewer: u64,
    limit: usize,
    cursor: String,
    taken: i64,
    snap: Vec<(u64, Phase)>,
    at: MPos,
    /// Its snapshot was lost (a restart that loses the shared half).
    lost: bool,
}

/// A position of the reference's walk: the next snapshot index, or below
/// this (end, id) in the replay part.
#[derive(Clone, Copy, Debug, PartialEq)]
enum MPos {
    Snap(usize),
    Replay(i64, u64),
}

/// The live feed's snapshot time to live in the model (test clock ms).
const LIVE_TTL_MS: i64 = 60;

/// What the live walks met, over every run of the process: later pages,
/// expired walks, sessions shown in a state older than their current one,
/// replays (the memory test asserts each happened).
static LIVE_SEEN: [std::sync::atomic::AtomicU64; 4] = [const { std::sync::atomic::AtomicU64::new(0) }; 4];

fn live_seen(what: usize, n: u64) {
    LIVE_SEEN[what].fetch_add(n, std::sync::atomic::Ordering::Relaxed);
}

/// What a notification event is about, as the reference tells events apart.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Ident {
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
type GKey = (&'static str, Option<u64>, Option<&'static str>);

impl Ident {
    fn key(&self) -> GKey {
        match self {
            Ident::Follow => ("follow", None, None),
            Ident::Reaction(i, k) => ("reaction", Some(*i), Some(k)),
            Ident::Repost(o, _) => ("repost", Some(*o), None),
            Ident::Reply(r) => ("reply", Some(*r), None),
            Ident::Mention(i) => ("mention", Some(*i), None),
        }
    }
    fn gathers(&self) -> bool {
        matches!(self, Ident::Follow | Ident::Reaction(..) | Ident::Repost(..))
    }
}

#[derive(Clone, Debug)]
struct MEvent {
    ident: Ident,
    actor: u64,
    at: i64,
    seq: u64,
}

#[derive(Clone, Debug)]
struct MGroup {
    user: u64,
    key: GKey,
    seq: u64,
    events: Vec<MEvent>,
}

/// A notification group as compared: (key, latest_at, actors, actor_count, seen, read).
type NRow = (GKey, i64, Vec<u64>, u64, bool, bool);

type Row = (u64, &'static str, Vec<(u64, u64)>);

impl Model {
    /// SPEC section 5, brute force: the snapshot `viewer` takes now (the
    /// open sessions of whom they follow: live by newest start, then
    /// upcoming by soonest start; ties by id).
    fn live_snapshot(&self, viewer: u64) -> Vec<(u64, Phase)> {
        let mut open: Vec<&Session> =
            self.sessions.values().filter(|s| self.follows(viewer, s.anchor.0) && s.ended_at.is_none()).collect();
        open.sort_by_key(|s| match s.started_at {
            Some(t) => (0, -t.0, u64::MAX - s.id),
            None => (1, s.scheduled_start.0, s.id),
        });
        open.iter().map(|s| (s.id, if s.started_at.is_some() { Phase::Live } else { Phase::Upcoming })).collect()
    }

    /// The rest of a walk from `at`, each entry with the position after it.
    fn live_rest(&self, w: &MWalk, at: MPos) -> Vec<(Session, MPos)> {
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

    fn follows(&self, a: u64, b: u64) -> bool {
        self.follows.contains(&(a, b))
    }
    fn blocked(&self, a: u64, b: u64) -> bool {
        self.blocks.contains(&(a, b)) || self.blocks.contains(&(b, a))
    }
    fn hidden(&self, a: u64, v: u64, with_mutes: bool) -> bool {
        a != v && (self.blocked(a, v) || (with_mutes && self.mutes.contains(&(v, a))))
    }
    fn in_f(&self, u: u64, x: u64) -> bool {
        x == u || self.follows(u, x)
    }
    fn visible(&self, o: &MItem, v: Option<u64>) -> bool {
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
    fn live_reposts(&self, o: u64) -> Vec<&MItem> {
        self.items.values().filter(|r| r.repost_of == Some(o) && !r.deleted).collect()
    }

    fn entry(mut apps: Vec<(u64, &'static str)>, o: u64, mut sources: Vec<(u64, u64)>) -> Option<(u64, Row)> {
        apps.sort();
        sources.sort_by_key(|s| s.1);
        apps.first().map(|&(k, why)| (k, (o, why, sources)))
    }

    /// (reactions per kind, the viewer's kinds, replies, reposts) of an item.
    fn hydration(&self, o: u64, viewer: u64) -> (Vec<(String, u64)>, Vec<String>, u64, u64) {
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
    fn promos_for(&self, u: u64, now: i64) -> Vec<(u64, u32)> {
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

    fn home(&self, u: u64) -> Vec<Row> {
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
    fn postings(&self, holds: impl Fn(&MItem) -> bool, shows: impl Fn(&MItem) -> bool) -> Vec<Row> {
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
    fn mentions(&self, u: u64) -> Vec<Row> {
        self.postings(|i| i.mentions.contains(&u), |i| self.visible(i, Some(u)) && !self.hidden(i.author, u, true))
    }

    /// tag(t) / object(o) seen by v: public items that hold it, minus hidden(author, v).
    fn tagged(&self, holds: impl Fn(&MItem) -> bool, v: Option<u64>) -> Vec<Row> {
        self.postings(holds, |i| i.vis == Visibility::Public && v.is_none_or(|v| !self.hidden(i.author, v, true)))
    }

    /// Whether a notification event of `user` stands now (SPEC section 2),
    /// its actor not hidden from the user.
    fn stands(&self, user: u64, e: &MEvent) -> bool {
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
    fn summary(&self, g: &MGroup) -> Option<(i64, Vec<u64>, u64)> {
        let mut ev: Vec<(i64, u64)> =
            g.events.iter().filter(|e| self.stands(g.user, e)).map(|e| (e.at, e.actor)).collect();
        ev.sort_unstable_by(|a, b| b.cmp(a));
        let first = ev.first()?.0;
        Some((first, ev.iter().take(5).map(|e| e.1).collect(), ev.len() as u64))
    }

    /// notifications(u): the groups shown, newest first, and the numbers
    /// above the seen and read marks.
    fn notifications(&self, u: u64) -> (Vec<NRow>, u64, u64) {
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
    fn start(&mut self, user: u64, ident: Ident, actor: u64, at: i64) {
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

    fn profile(&self, a: u64, v: Option<u64>) -> Vec<Row> {
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

/// The pages of a walk from the top with promotions woven in: after organic
/// entry k (1-based from the top) when k % every == 0, each promotion at most
/// once per page, `limit` rows a page, an organic row cut off going to the
/// next page.
fn expected_pages(organic: &[Row], promos: &[(u64, u32)], limit: usize) -> Vec<Vec<Row>> {
    let mut pages = Vec::new();
    let mut s = 0;
    loop {
        let mut rows: Vec<Row> = Vec::new();
        let mut used = vec![false; promos.len()];
        for (off, row) in organic[s..organic.len().min(s + limit)].iter().enumerate() {
            let k = s + off + 1;
            rows.push(row.clone());
            for (i, &(item, every)) in promos.iter().enumerate() {
                if !used[i] && k % every as usize == 0 {
                    used[i] = true;
                    rows.push((item, "promoted", vec![]));
                }
            }
        }
        rows.truncate(limit);
        let taken = rows.iter().filter(|r| r.1 != "promoted").count();
        pages.push(rows);
        s += taken;
        if s >= organic.len() {
            return pages;
        }
    }
}

fn rows_of(p: &Page) -> Vec<Row> {
    p.entries
        .iter()
        .map(|e| {
            (e.item.item.id.0, e.reason.as_str(), e.sources.iter().map(|s| (s.user.0, s.item.0)).collect::<Vec<_>>())
        })
        .collect()
}

/// Walks a feed older to the end, then newer back to the top, checking both
/// against `want` (organic) and the older walk page by page against `pages`
/// (with promotions), and that `limit` is honoured.
async fn check_feed(
    what: &str,
    want: &[Row],
    pages: &[Vec<Row>],
    limit: usize,
    read: impl AsyncFn(&PageRequest) -> Page,
) {
    let organic = |rows: Vec<Row>| -> Vec<Row> { rows.into_iter().filter(|r| r.1 != "promoted").collect() };
    let mut got_pages: Vec<Vec<Row>> = Vec::new();
    let mut req = PageRequest { limit: Some(limit), ..Default::default() };
    let mut last_cursor = None;
    loop {
        let page = read(&req).await;
        let rows = rows_of(&page);
        assert!(rows.len() <= limit, "{what}: page of {} > limit {limit}", rows.len());
        if page.next_cursor.is_some() {
            assert_eq!(rows.len(), limit, "{what}: short page with a next cursor");
        }
        if let Some(e) = page.entries.iter().rev().find(|e| e.reason.as_str() != "promoted") {
            last_cursor = Some(e.cursor.clone());
        }
        got_pages.push(rows);
        match page.next_cursor {
            Some(c) => req = PageRequest { limit: Some(limit), before: Some(c), after: None },
            None => break,
        }
        assert!(got_pages.len() <= want.len() + 2, "{what}: runaway paging");
    }
    let got: Vec<Row> = organic(got_pages.iter().flatten().cloned().collect());
    assert_eq!(got, want, "{what}: walking older with limit {limit}");
    assert_eq!(got_pages, pages, "{what}: pages with promotions, limit {limit}");
    // Newer, from the bottom entry back up to the top.
    let Some(bottom) = last_cursor else { return };
    let mut up: Vec<Row> = vec![want[want.len() - 1].clone()];
    let mut after = bottom;
    loop {
        let page = read(&PageRequest { limit: Some(limit), before: None, after: Some(after.clone()) }).await;
        let rows = rows_of(&page);
        assert!(rows.len() <= limit, "{what}: newer page over limit");
        let rows = organic(rows);
        if rows.is_empty() {
            break;
        }
        let mut merged = rows;
        merged.extend(up);
        up = merged;
        after = page.prev_cursor.clone().expect("a non-empty page has a prev cursor");
        assert!(up.len() <= want.len() + 1, "{what}: runaway newer paging");
    }
    assert_eq!(up, want, "{what}: walking newer with limit {limit}");
}

/// Every entry's counts and viewer marks equal the model's.
fn check_hydration(what: &str, m: &Model, viewer: u64, page: &Page) {
    for e in &page.entries {
        let o = e.item.item.id.0;
        let (per, mine, replies, reposts) = m.hydration(o, viewer);
        let c = &e.item.counts;
        assert_eq!((&c.reactions, c.replies, c.reposts), (&per, replies, reposts), "{what}: counts of {o}");
        let marks = e.item.viewer.as_ref().expect("a home page has a viewer");
        assert_eq!(marks.reactions, mine, "{what}: viewer reactions on {o}");
        assert_eq!(marks.reposted, m.live_reposts(o).iter().any(|r| r.author == viewer), "{what}: reposted {o}");
    }
}

/// How much of the embedded index stays loaded.
#[derive(Clone, Copy, PartialEq)]
enum Held {
    /// The default budget: what is loaded stays, here.
    Kept,
    /// Every loaded unit dropped before each storage call: every read loads
    /// from disk.
    Cold,
    /// A budget of one byte: each load and write lets go of every holder
    /// not used since the last pass, writes in flight included.
    Tiny,
}

enum Kind {
    Memory,
    /// The embedded store, its index held as [`Held`] says.
    Fjall(tempfile::TempDir, Held),
    /// Two nodes on one SQL database and one Redis (a fresh database and key
    /// prefix per run); calls alternate between the nodes.
    Scaled {
        db: String,
        redis: String,
        prefix: String,
    },
}

struct Harness {
    kind: Kind,
    clock: Arc<ManualClock>,
    opts: ServiceOptions,
    /// One node, or two for `Kind::Scaled` (each with its worker).
    nodes: Vec<(Arc<FeedService>, FanoutWorker)>,
    /// Which node the next call goes to.
    turn: std::sync::atomic::AtomicUsize,
}

impl Harness {
    async fn new(kind: Kind, opts: ServiceOptions) -> Self {
        let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
        let mut h = Harness { kind, clock, opts, nodes: Vec::new(), turn: Default::default() };
        let n = if matches!(h.kind, Kind::Scaled { .. }) { 2 } else { 1 };
        for i in 0..n {
            let node = h.node(i).await;
            h.nodes.push(node);
        }
        h
    }
    /// Starts node `i` (node ids differ, as a deployment's must).
    async fn node(&self, i: usize) -> (Arc<FeedService>, FanoutWorker) {
        // Opened as `tideway serve` opens them (tideway_engines::open).
        let mut cfg = tideway_service::Config::default();
        cfg.timeline.max_len = self.opts.max_len;
        cfg.storage.sync = SyncKind::Buffer;
        match &self.kind {
            Kind::Memory => cfg.storage.backend = BackendKind::Memory,
            Kind::Fjall(dir, held) => {
                cfg.storage.data_dir = dir.path().to_owned();
                if *held == Held::Tiny {
                    cfg.storage.index_size = tideway_service::config::ByteSize(1);
                }
            }
            Kind::Scaled { db, redis, prefix } => {
                cfg.storage.backend =
                    if db.starts_with("postgres") { BackendKind::Postgres } else { BackendKind::Mysql };
                cfg.storage.url = Some(db.clone());
                cfg.redis.urls = vec![redis.clone()];
                cfg.redis.prefix = prefix.clone();
            }
        }
        let opened = tideway_engines::open(&cfg).await.expect("open the backend");
        let backend: Arc<dyn Backend> = match (&self.kind, opened) {
            // Every loaded unit dropped before each call: reads load from disk.
            (Kind::Fjall(_, Held::Cold), Opened::Embedded(store)) => {
                let evict = store.clone();
                Arc::new(Counted::new(store).before_each(move || evict.evict_all()))
            }
            (_, opened) => opened.backend(),
        };
        // Nodes on shared engines wake the workers in the background, as
        // in production.
        let background_signals = matches!(self.kind, Kind::Scaled { .. });
        let opts = ServiceOptions { node_id: i as u16 + 1, background_signals, ..self.opts.clone() };
        let svc = Arc::new(FeedService::new(backend, opts, self.clock.clone()).await.expect("service"));
        let worker = FanoutWorker::new(svc.clone());
        (svc, worker)
    }
    /// A restart: `clean` ones go through the inbox snapshot (warm inboxes,
    /// hot authors' unpushed keys); the others lose every inbox. With two
    /// nodes, one node restarts, and an unclean restart also flushes Redis.
    async fn restart(&mut self, clean: bool, which: usize) {
        if let Kind::Scaled { redis, prefix, .. } = &self.kind {
            if !clean {
                let mut ro = tideway_store_redis::RedisOptions::new(vec![redis.clone()], self.opts.max_len);
                ro.prefix = prefix.clone();
                let r = tideway_store_redis::RedisShared::connect(ro).await.expect("redis");
                r.purge().await.expect("flush");
            }
            let i = which % self.nodes.len();
            self.nodes[i] = self.node(i).await;
            // The restarted node's worker has a new id: the jobs its old one
            // held wait out their lease (a restart that takes that long),
            // then any worker resumes them from their checkpoints.
            self.clock.advance(self.opts.lease_ms + 1);
            return;
        }
        let snap = match &self.kind {
            Kind::Fjall(dir, _) => dir.path().join("inboxes.snapshot"),
            _ => return,
        };
        if clean {
            self.svc().save_snapshot(&snap).await.expect("snapshot");
        }
        self.nodes.clear();
        let node = self.node(0).await;
        self.nodes.push(node);
        let loaded = self.svc().load_snapshot(&snap).await.expect("load snapshot");
        assert_eq!(loaded.is_some(), clean);
    }
    fn pick(&self) -> &(Arc<FeedService>, FanoutWorker) {
        let t = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.nodes[t % self.nodes.len()]
    }
    fn svc(&self) -> &FeedService {
        &self.pick().0
    }
    fn worker(&self) -> &FanoutWorker {
        &self.pick().1
    }
    /// Runs every node's worker until no job is pending (a job leased to
    /// one node's worker is finished by that worker).
    async fn drain(&self) {
        for _ in 0..2 {
            for (_, w) in &self.nodes {
                w.drain().await.expect("drain");
            }
        }
        let left = self.nodes[0].0.backend().pending_jobs(10).await.expect("pending");
        assert!(left.is_empty(), "fan-out jobs left after draining every node: {left:?}");
    }
}

fn post(author: u64, kind: ItemKind, vis: Visibility, mentions: Vec<u64>) -> NewItem {
    NewItem {
        visibility: vis,
        mentions: mentions.into_iter().map(UserId).collect(),
        ..NewItem::new(UserId(author), kind)
    }
}

fn pick_vis(rng: &mut StdRng) -> Visibility {
    match rng.random_range(0..6) {
        0 => Visibility::Followers,
        1 => Visibility::Mentioned,
        _ => Visibility::Public,
    }
}

fn kind_of(e: &ServiceError) -> &'static str {
    match e {
        ServiceError::NotFound(_) => "not_found",
        ServiceError::Forbidden(_) => "forbidden",
        ServiceError::LimitExceeded(_) => "limit",
        ServiceError::Invalid(_) => "invalid",
        ServiceError::Conflict(_) => "conflict",
        ServiceError::Store(_) => "store",
        ServiceError::Expired(_) => "expired",
        ServiceError::NodeUnavailable(_) => "node",
    }
}

async fn check_all(h: &Harness, m: &Model, ctx: &str) {
    h.drain().await;
    let now = h.svc().node().now().0;
    for u in 1..=USERS {
        let want = m.home(u);
        let promos = m.promos_for(u, now);
        for limit in [1, 2, 3, 7] {
            let pages = expected_pages(&want, &promos, limit);
            check_feed(&format!("{ctx} home({u})"), &want, &pages, limit, async |r: &PageRequest| {
                h.svc().feeds.home(UserId(u), r).await.expect("home")
            })
            .await;
        }
        let all =
            h.svc().feeds.home(UserId(u), &PageRequest { limit: Some(100), ..Default::default() }).await.expect("home");
        check_hydration(&format!("{ctx} home({u})"), m, u, &all);
        let want = m.mentions(u);
        for limit in [2, 5] {
            let pages = expected_pages(&want, &[], limit);
            check_feed(&format!("{ctx} mentions({u})"), &want, &pages, limit, async |r: &PageRequest| {
                h.svc().feeds.mentions(UserId(u), r).await.expect("mentions")
            })
            .await;
        }
        for v in [None, Some(1), Some(u % USERS + 1)] {
            let want = m.profile(u, v);
            for limit in [2, 5] {
                let pages = expected_pages(&want, &[], limit);
                check_feed(&format!("{ctx} profile({u}) by {v:?}"), &want, &pages, limit, async |r: &PageRequest| {
                    h.svc().feeds.profile(UserId(u), v.map(UserId), r).await.expect("profile")
                })
                .await;
            }
        }
    }
}

/// The tags and objects posts carry (a few, so feeds hold many items).
const TAGS: [&str; 2] = ["rust", "db"];
const OBJECTS: [&str; 2] = ["1", "2"];

/// Every tag and object feed, by every kind of viewer, walked both ways.
async fn check_postings(h: &Harness, m: &Model, ctx: &str) {
    for v in [None, Some(1), Some(2)] {
        for t in TAGS {
            let want = m.tagged(|i| i.tags.contains(&t), v);
            for limit in [2, 5] {
                let pages = expected_pages(&want, &[], limit);
                // Asked in capitals: matched lowercased.
                let asked = if limit == 2 { t.to_uppercase() } else { t.to_owned() };
                check_feed(&format!("{ctx} tag({t}) by {v:?}"), &want, &pages, limit, async |r: &PageRequest| {
                    h.svc().feeds.tag_feed(&asked, v.map(UserId), r).await.expect("tag")
                })
                .await;
            }
        }
        for o in OBJECTS {
            let want = m.tagged(|i| i.object == Some(o), v);
            let pages = expected_pages(&want, &[], 3);
            check_feed(&format!("{ctx} object(book, {o}) by {v:?}"), &want, &pages, 3, async |r: &PageRequest| {
                h.svc().feeds.object_feed("book", o, v.map(UserId), r).await.expect("object")
            })
            .await;
        }
    }
}

/// A service group as the reference compares it.
fn nrow(g: &tideway_service::NotificationGroup) -> NRow {
    use tideway_core::notify::Verb;
    let kind: Option<&'static str> = match &g.verb {
        Verb::Reaction { kind, .. } => Some(if kind == "like" { "like" } else { "wow" }),
        _ => None,
    };
    (
        (g.verb.name(), g.verb.item().map(|i| i.0), kind),
        g.latest_at.0,
        g.actors.iter().map(|a| a.0).collect(),
        g.actor_count,
        g.seen,
        g.read,
    )
}

/// Every user's notifications, walked page by page at two sizes: each group
/// once, whole, with its item, and the exact counts on every page.
async fn check_notifications(h: &Harness, m: &Model, ctx: &str) {
    for u in 1..=USERS {
        let (want, unseen, unread) = m.notifications(u);
        for limit in [2, 5] {
            let mut got = Vec::new();
            let mut before: Option<String> = None;
            loop {
                let page =
                    h.svc().notifications.page(UserId(u), Some(limit), before.as_deref()).await.expect("notifications");
                assert!(page.groups.len() <= limit, "{ctx}: notifications({u}) over limit");
                assert_eq!((page.unseen, page.unread), (unseen, unread), "{ctx}: notifications({u}) counts");
                for g in &page.groups {
                    assert_eq!(
                        g.item.as_ref().map(|i| i.item.id),
                        g.verb.item(),
                        "{ctx}: notifications({u}) group {} shows its item",
                        g.id
                    );
                }
                got.extend(page.groups.iter().map(nrow));
                match page.next_cursor {
                    Some(c) => before = Some(c),
                    None => break,
                }
                assert!(got.len() <= want.len() + limit, "{ctx}: runaway notification paging");
            }
            assert_eq!(got, want, "{ctx}: notifications({u}) with limit {limit}");
        }
    }
}

async fn run(seed: u64, kind: Kind, ops: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Caps of 2 to 4 entries: pages cross the push/pull seam constantly.
    let max_len = 2 + (seed % 3) as usize;
    // Half the seeds: authors with 2+ followers are hot (pulled, not pushed),
    // so authors cross the threshold both ways all the time. A third: readers
    // go inactive after 30 ms of the test clock and sweeps drop their inboxes.
    let hot_followers = if seed.is_multiple_of(2) { 2 } else { u64::MAX };
    let active_window_ms = if seed.is_multiple_of(3) { 30 } else { i64::MAX };
    let opts = ServiceOptions {
        max_len,
        max_following: 4,
        chunk_size: 2,
        hot_followers,
        active_window_ms,
        // Some seeds run a worker step's chunks side by side (as on shared
        // engines), the others one after the other.
        chunks_in_flight: if seed % 4 < 2 { 1 } else { 4 },
        // Pages read counts ahead on half the seeds (both hot and cold ones).
        read_ahead: matches!(seed % 4, 1 | 2),
        // Nodes keep copies of item records on half the seeds, checked by
        // every page (on the others only the store's own caches serve);
        // a few of those with a cache so small it keeps hardly any.
        item_cache_bytes: match seed % 6 {
            0 | 2 => 4 << 20,
            4 => 1,
            _ => 0,
        },
        // With copies, nodes mark a reader active once a minute at most
        // where readers never go inactive (a thousandth of the window, as
        // the server derives it: nothing with a 30 ms window).
        touch_every_ms: if seed.is_multiple_of(6) && active_window_ms == i64::MAX { 60_000 } else { 0 },
        // Some seeds reuse an author's hot decision for a minute of the test
        // clock while authors cross the threshold both ways: pages must not
        // care which way an item went.
        hot_decision_ms: if seed % 6 == 2 { 60_000 } else { 0 },
        snapshot_ttl_ms: LIVE_TTL_MS,
        ..ServiceOptions::default()
    };
    let restartable = matches!(kind, Kind::Fjall(..) | Kind::Scaled { .. });
    let mut h = Harness::new(kind, opts).await;
    let mut m = Model { max_following: 4, ..Model::default() };
    for step in 0..ops {
        h.clock.advance(rng.random_range(1..5));
        let a = rng.random_range(1..=USERS);
        let b = rng.random_range(1..=USERS);
        let any_item = |rng: &mut StdRng, m: &Model| -> Option<u64> {
            if m.items.is_empty() {
                return None;
            }
            let ids: Vec<u64> = m.items.keys().copied().collect();
            Some(ids[rng.random_range(0..ids.len())])
        };
        let ctx = format!("seed {seed} step {step}");
        match rng.random_range(0..150) {
            0..=14 => {
                // follow
                if a == b {
                    continue;
                }
                let want = if m.follows(a, b) {
                    Ok(())
                } else if m.blocked(a, b) {
                    Err("forbidden")
                } else if m.follows.iter().filter(|(f, _)| *f == a).count() >= m.max_following {
                    Err("limit")
                } else {
                    Ok(())
                };
                let got = h.svc().graph.follow(UserId(a), UserId(b)).await.map(|_| ()).map_err(|e| kind_of(&e));
                assert_eq!(got, want, "{ctx}: follow {a}->{b}");
                if got.is_ok() && m.follows.insert((a, b)) {
                    m.start(b, Ident::Follow, a, h.svc().node().now().0);
                }
            }
            15..=19 => {
                // batch follow
                let targets: Vec<u64> =
                    (0..rng.random_range(1..5)).map(|_| rng.random_range(1..=USERS)).filter(|t| *t != a).collect();
                let res = h
                    .svc()
                    .graph
                    .follow_many(UserId(a), &targets.iter().map(|t| UserId(*t)).collect::<Vec<_>>())
                    .await
                    .expect("batch");
                for (t, st) in res {
                    let t = t.0;
                    let ok = matches!(
                        st,
                        tideway_store::FollowStatus::Followed(_) | tideway_store::FollowStatus::Already(_)
                    );
                    if let tideway_store::FollowStatus::Followed(at) = st {
                        assert!(!m.follows(a, t) && !m.blocked(a, t), "{ctx}: batch followed {t} wrongly");
                        m.follows.insert((a, t));
                        m.start(t, Ident::Follow, a, at.0);
                    }
                    if !ok {
                        assert!(
                            m.blocked(a, t) || m.follows.iter().filter(|(f, _)| *f == a).count() >= m.max_following
                        );
                    }
                }
            }
            20..=27 => {
                // unfollow
                h.svc().graph.unfollow(UserId(a), UserId(b)).await.expect("unfollow");
                m.follows.remove(&(a, b));
            }
            28..=45 => {
                // post (sometimes a card)
                let card = rng.random_bool(0.1);
                let vis = pick_vis(&mut rng);
                let mentions: Vec<u64> = if rng.random_bool(0.3) { vec![b] } else { vec![] };
                let kind = if card { ItemKind::User } else { ItemKind::Post };
                let tags: Vec<&'static str> = TAGS.iter().copied().filter(|_| rng.random_bool(0.4)).collect();
                let object =
                    if rng.random_bool(0.3) { Some(OBJECTS[rng.random_range(0..OBJECTS.len())]) } else { None };
                let mut new = post(a, kind, vis, mentions.clone());
                // Tags as written (any case): feeds match them lowercased.
                new.tags = tags
                    .iter()
                    .map(|t| if rng.random_bool(0.5) { t.to_uppercase() } else { (*t).to_owned() })
                    .collect();
                new.object = object.map(|o| tideway_core::ObjectRef { kind: "book".into(), id: o.into() });
                let (v, created) = h.svc().items.create_item(new).await.expect("post");
                assert!(created);
                let id = v.item.id.0;
                m.items.insert(
                    id,
                    MItem {
                        id,
                        author: a,
                        card,
                        vis,
                        mentions: mentions.clone(),
                        tags: tags.clone(),
                        object,
                        repost_of: None,
                        reply_to: None,
                        reply_to_author: None,
                        deleted: false,
                    },
                );
                for u in mentions.clone() {
                    m.start(u, Ident::Mention(id), a, item_time(id));
                }
            }
            46..=57 => {
                // repost
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let target = m.items[&t].clone();
                let orig = target.repost_of.map_or(target.clone(), |o| m.items[&o].clone());
                let want = if target.deleted || orig.deleted {
                    Err("not_found")
                } else if orig.vis != Visibility::Public || m.blocked(a, orig.author) {
                    Err("forbidden")
                } else {
                    Ok(())
                };
                let mut n = post(a, ItemKind::Repost, Visibility::Public, vec![]);
                n.repost_of = Some(ItemId(t));
                let got = h.svc().items.create_item(n).await;
                match (&got, want) {
                    (Ok((v, created)), Ok(())) => {
                        let existing = m
                            .items
                            .values()
                            .find(|r| r.author == a && r.repost_of == Some(orig.id) && !r.deleted)
                            .map(|r| r.id);
                        assert_eq!(
                            v.item.repost_of,
                            Some(ItemId(orig.id)),
                            "{ctx}: repost of a repost reposts the original"
                        );
                        match existing {
                            Some(e) => assert!(!created && v.item.id.0 == e, "{ctx}: repeated repost is idempotent"),
                            None => {
                                assert!(*created);
                                let id = v.item.id.0;
                                m.items.insert(
                                    id,
                                    MItem {
                                        id,
                                        author: a,
                                        card: false,
                                        vis: Visibility::Public,
                                        mentions: vec![],
                                        tags: vec![],
                                        object: None,
                                        repost_of: Some(orig.id),
                                        reply_to: None,
                                        reply_to_author: None,
                                        deleted: false,
                                    },
                                );
                                m.start(orig.author, Ident::Repost(orig.id, id), a, item_time(id));
                            }
                        }
                    }
                    (Err(e), Err(w)) => assert_eq!(kind_of(e), w, "{ctx}: repost error"),
                    (g, w) => panic!("{ctx}: repost {a} of {t}: got {g:?}, want {w:?}"),
                }
            }
            58..=65 => {
                // reply
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let parent = m.items[&t].clone();
                let want = if parent.deleted {
                    Err("not_found")
                } else if a != parent.author && m.blocked(a, parent.author) {
                    Err("forbidden")
                } else if !m.visible(&parent, Some(a)) {
                    Err("not_found")
                } else {
                    Ok(())
                };
                let vis = pick_vis(&mut rng);
                let mut n = post(a, ItemKind::Reply, vis, vec![]);
                n.reply_to = Some(ItemId(t));
                match (h.svc().items.create_item(n).await, want) {
                    (Ok((v, _)), Ok(())) => {
                        let id = v.item.id.0;
                        m.items.insert(
                            id,
                            MItem {
                                id,
                                author: a,
                                card: false,
                                vis,
                                mentions: vec![],
                                tags: vec![],
                                object: None,
                                repost_of: None,
                                reply_to: Some(t),
                                reply_to_author: Some(parent.author),
                                deleted: false,
                            },
                        );
                        m.start(parent.author, Ident::Reply(id), a, item_time(id));
                    }
                    (Err(e), Err(w)) => assert_eq!(kind_of(&e), w, "{ctx}: reply error"),
                    (g, w) => panic!("{ctx}: reply: got {g:?}, want {w:?}"),
                }
            }
            66..=71 => {
                // delete
                let Some(t) = any_item(&mut rng, &m) else { continue };
                h.svc().items.delete_item(ItemId(t), None).await.expect("delete");
                if let Some(i) = m.items.get_mut(&t) {
                    i.deleted = true;
                }
            }
            72..=76 => {
                // change visibility of an original
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let it = m.items[&t].clone();
                if it.repost_of.is_some() {
                    continue;
                }
                let vis = pick_vis(&mut rng);
                let got = h.svc().items.patch_item(ItemId(t), None, Some(vis), None).await.map_err(|e| kind_of(&e));
                if it.deleted {
                    assert_eq!(got.err(), Some("not_found"));
                } else {
                    assert!(got.is_ok(), "{ctx}: patch");
                    if let Some(i) = m.items.get_mut(&t) {
                        i.vis = vis;
                    }
                }
            }
            77..=80 => {
                if a == b {
                    continue;
                }
                let on = rng.random_bool(0.6);
                h.svc().graph.set_block(UserId(a), UserId(b), on).await.expect("block");
                if on {
                    m.blocks.insert((a, b));
                    m.follows.remove(&(a, b));
                    m.follows.remove(&(b, a));
                } else {
                    m.blocks.remove(&(a, b));
                }
            }
            81..=84 => {
                if a == b {
                    continue;
                }
                let on = rng.random_bool(0.6);
                h.svc().graph.set_mute(UserId(a), UserId(b), on).await.expect("mute");
                if on {
                    m.mutes.insert((a, b));
                } else {
                    m.mutes.remove(&(a, b));
                }
            }
            85..=88 => {
                // direct insert
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let got = h.svc().feeds.insert_home(UserId(a), ItemId(t)).await;
                // Only what the owner may see can be inserted (else 404, as unknown).
                let o = &m.items[&t];
                if o.deleted || !m.visible(o, Some(a)) || m.blocked(a, o.author) {
                    assert_eq!(got.map(|_| ()).map_err(|e| kind_of(&e)), Err("not_found"));
                } else {
                    let entry = got.expect("insert");
                    let key = tideway_core::Cursor::decode(&entry.cursor, &tideway_core::FeedScope::Home(a))
                        .expect("the entry's cursor")
                        .key;
                    m.inserts.push((a, key, t));
                }
            }
            89..=93 => {
                // a read: creates or uses the inbox while deliveries may lag
                let _ = h
                    .svc()
                    .feeds
                    .home(UserId(a), &PageRequest { limit: Some(2), ..Default::default() })
                    .await
                    .expect("home");
            }
            94..=96 => {
                let _ = h.worker().step().await.expect("step");
            }
            97 => {
                if rng.random_bool(0.5) {
                    h.svc().backend().drop_inbox(UserId(a)).await.expect("drop");
                } else {
                    h.svc().sweep_inactive().await.expect("sweep");
                }
            }
            98 => {
                if restartable {
                    let clean = rng.random_bool(0.5);
                    h.restart(clean, rng.random_range(0..2)).await;
                    // Snapshots live in the shared half: one process's go
                    // with it; Redis keeps them unless flushed.
                    let kept = clean && matches!(h.kind, Kind::Scaled { .. });
                    for w in &mut m.walks {
                        w.lost |= !kept;
                    }
                }
            }
            99..=107 => {
                // react / take back
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let kind: &'static str = if rng.random_bool(0.7) { "like" } else { "wow" };
                let on = rng.random_bool(0.7);
                let it = m.items[&t].clone();
                let want = if it.deleted || !m.visible(&it, Some(a)) {
                    Err("not_found")
                } else if on && a != it.author && m.blocked(a, it.author) {
                    Err("forbidden")
                } else {
                    Ok(())
                };
                let got = h.svc().items.react(ItemId(t), UserId(a), kind, on).await.map_err(|e| kind_of(&e));
                assert_eq!(got.as_ref().map(|_| ()).map_err(|e| *e), want, "{ctx}: react {a} {kind} {on} on {t}");
                if got.is_ok() {
                    if on {
                        if m.reactions.insert((t, a, kind)) {
                            m.start(it.author, Ident::Reaction(t, kind), a, h.svc().node().now().0);
                        }
                    } else {
                        m.reactions.remove(&(t, a, kind));
                    }
                    let n = m.reactions.iter().filter(|r| r.0 == t && r.2 == kind).count() as u64;
                    assert_eq!(got.map(|c| c.of_kind(kind)), Ok(n), "{ctx}: counts after react");
                }
            }
            112..=117 => {
                // move a notification mark: to a listed group, or to the newest
                use tideway_core::notify::Mark;
                let which = if rng.random_bool(0.5) { Mark::Read } else { Mark::Seen };
                let (rows, _, _) = m.notifications(a);
                let k = (!rows.is_empty() && rng.random_bool(0.6)).then(|| rng.random_range(0..rows.len()));
                let up_to = match k {
                    Some(k) => {
                        let page = h.svc().notifications.page(UserId(a), Some(100), None).await.expect("notifications");
                        assert_eq!(page.groups.len(), rows.len(), "{ctx}: notifications({a}) before a mark");
                        Some(page.groups[k].id)
                    }
                    None => None,
                };
                h.svc().notifications.mark(UserId(a), which, up_to).await.expect("mark");
                let to = match k {
                    Some(k) => Some(rows[k].1),
                    None => rows.first().map(|r| r.1),
                };
                if let Some(to) = to {
                    let mark = m.marks.entry(a).or_insert((i64::MIN, i64::MIN));
                    match which {
                        Mark::Seen => mark.0 = mark.0.max(to),
                        Mark::Read => mark.1 = mark.1.max(to),
                    }
                }
            }
            108..=111 => {
                // promote an item for a while
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let now = h.svc().node().now().0;
                let (every, start, end) =
                    (rng.random_range(1..=3u32), now - rng.random_range(0..5), now + rng.random_range(1..150));
                let got = h.svc().items.create_promotion(ItemId(t), every, Millis(start), Millis(end)).await;
                if m.items[&t].deleted {
                    assert_eq!(got.map(|_| ()).map_err(|e| kind_of(&e)), Err("not_found"));
                } else {
                    let p = got.expect("promotion");
                    m.promotions.push((p.id, t, every, start, end));
                }
            }
            118..=125 => {
                // an anchor plans a session
                let now = h.svc().node().now().0;
                let at = now + rng.random_range(-5..50);
                let mut body = serde_json::Map::new();
                body.insert("n".into(), serde_json::json!(step));
                let body = tideway_core::Body::new(&body);
                let s =
                    h.svc().live.create_session(UserId(a), Millis(at), body.clone()).await.expect("create a session");
                assert_eq!(
                    (s.anchor, s.scheduled_start, s.started_at, s.ended_at, &s.body),
                    (UserId(a), Millis(at), None, None, &body),
                    "{ctx}: a new session"
                );
                m.sessions.insert(s.id, s);
            }
            126..=133 => {
                // start or end a session (or an unknown one)
                let ids: Vec<u64> = m.sessions.keys().copied().collect();
                let id =
                    if ids.is_empty() || rng.random_bool(0.05) { 424_242 } else { ids[rng.random_range(0..ids.len())] };
                let step_ = if rng.random_bool(0.5) { Move::Start } else { Move::End };
                let now = h.svc().node().now();
                let want = match m.sessions.get(&id) {
                    None => Err("not_found"),
                    Some(s) => match (step_, s.started_at, s.ended_at) {
                        (Move::Start, None, None) => Ok(Session { started_at: Some(now), ..s.clone() }),
                        (Move::End, Some(t), None) => Ok(Session { ended_at: Some(now.max(t)), ..s.clone() }),
                        _ => Err("conflict"),
                    },
                };
                let got = h.svc().live.move_session(id, step_).await.map_err(|e| kind_of(&e));
                assert_eq!(got, want, "{ctx}: {step_:?} session {id}");
                if let Ok(s) = got {
                    m.sessions.insert(id, s);
                }
            }
            134..=141 => {
                // a viewer opens their live feed
                let limit = rng.random_range(1..=3);
                let taken = h.svc().node().now().0;
                let mut w = MWalk {
                    viewer: a,
                    limit,
                    cursor: String::new(),
                    taken,
                    snap: m.live_snapshot(a),
                    at: MPos::Snap(0),
                    lost: false,
                };
                let page = h.svc().live.page(UserId(a), None, Some(limit)).await.expect("live page");
                if live_step(&m, &mut w, page, &ctx) {
                    m.walks.push(w);
                }
            }
            142..=149 => {
                // a walk goes on (or finds its snapshot expired)
                if m.walks.is_empty() {
                    continue;
                }
                let i = rng.random_range(0..m.walks.len());
                let mut w = m.walks.remove(i);
                let now = h.svc().node().now().0;
                let got = h.svc().live.page(UserId(w.viewer), Some(&w.cursor), Some(w.limit)).await;
                if w.lost || now - w.taken > LIVE_TTL_MS {
                    assert_eq!(got.map(|_| ()).map_err(|e| kind_of(&e)), Err("expired"), "{ctx}: an expired walk");
                    live_seen(1, 1);
                } else if live_step(&m, &mut w, got.expect("live page"), &ctx) {
                    m.walks.push(w);
                }
            }
            _ => unreachable!("drawn from 0..150"),
        }
        if step % 60 == 59 {
            check_all(&h, &m, &format!("seed {seed} step {step}")).await;
            check_postings(&h, &m, &format!("seed {seed} step {step}")).await;
            check_notifications(&h, &m, &format!("seed {seed} step {step}")).await;
        }
    }
    check_all(&h, &m, &format!("seed {seed} end")).await;
    check_postings(&h, &m, &format!("seed {seed} end")).await;
    check_notifications(&h, &m, &format!("seed {seed} end")).await;
}

/// Checks a live page against the reference's walk and moves the walk on;
/// whether the walk goes on.
fn live_step(m: &Model, w: &mut MWalk, page: tideway_service::LivePage, ctx: &str) -> bool {
    let rest = m.live_rest(w, w.at);
    let want: Vec<Session> = rest.iter().take(w.limit).map(|(s, _)| s.clone()).collect();
    assert_eq!(page.entries, want, "{ctx}: live page of {} from {:?} (snapshot {:?})", w.viewer, w.at, w.snap);
    let more = rest.len() > w.limit;
    assert_eq!(page.next_cursor.is_some(), more, "{ctx}: live next_cursor");
    if w.at != MPos::Snap(0) {
        live_seen(0, 1);
    }
    live_seen(2, want.iter().filter(|s| m.sessions[&s.id] != **s).count() as u64);
    live_seen(3, rest.iter().take(w.limit).filter(|(_, p)| matches!(p, MPos::Replay(..))).count() as u64);
    match page.next_cursor {
        Some(c) => {
            w.at = rest[w.limit - 1].1;
            w.cursor = c;
            true
        }
        None => false,
    }
}

/// An item's time: the one its id carries.
fn item_time(id: u64) -> i64 {
    tideway_core::ids::key_time(id).0
}

#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_in_memory() {
    for seed in 0..120 {
        run(seed, Kind::Memory, 240).await;
    }
    // The live walks met what they are there for.
    let seen: Vec<u64> = LIVE_SEEN.iter().map(|n| n.load(std::sync::atomic::Ordering::Relaxed)).collect();
    eprintln!("live walks: later pages, expired, shown in an older state, replays: {seen:?}");
    assert!(seen.iter().all(|n| *n > 0), "some live walk case never happened: {seen:?}");
}

#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_embedded_with_restarts() {
    for seed in 1000..1020 {
        run(seed, Kind::Fjall(tempfile::tempdir().expect("tempdir"), Held::Kept), 200).await;
    }
}

/// The embedded store, every storage call loading what it reads from disk
/// (the lazy index's loads, everywhere, against the model).
#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_embedded_loading_every_call() {
    for seed in 1100..1108 {
        run(seed, Kind::Fjall(tempfile::tempdir().expect("tempdir"), Held::Cold), 200).await;
    }
}

/// The embedded store with an index budget of one byte: loaded units are
/// let go all the time, between a write and its fsync too, and pages must
/// still equal the model.
#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_embedded_under_a_tiny_index_budget() {
    for seed in 1200..1208 {
        run(seed, Kind::Fjall(tempfile::tempdir().expect("tempdir"), Held::Tiny), 200).await;
    }
}

/// Two nodes on PostgreSQL or MariaDB and one Redis, calls spread over both,
/// nodes restarting and Redis flushed in the middle (the engines come from
/// `scripts/services.sh up`).
async fn scaled(var: &str, seeds: std::ops::Range<u64>) {
    let base =
        std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run `eval \"$(scripts/services.sh up)\"`"));
    let redis = std::env::var("TIDEWAY_TEST_REDIS_URL").expect("TIDEWAY_TEST_REDIS_URL is not set");
    for seed in seeds {
        let db = tideway_store_sql::testing::FreshDatabase::create(&base).await.expect("a fresh database");
        let prefix = format!("model{seed}x{}:", std::process::id());
        run(seed, Kind::Scaled { db: db.url.clone(), redis: redis.clone(), prefix: prefix.clone() }, 200).await;
        let mut ro = tideway_store_redis::RedisOptions::new(vec![redis.clone()], 4);
        ro.prefix = prefix;
        tideway_store_redis::RedisShared::connect(ro).await.expect("redis").purge().await.expect("purge");
        db.drop().await.expect("drop the database");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_postgres_and_redis_serve_the_pull_definition() {
    scaled("TIDEWAY_TEST_POSTGRES_URL", 2000..2006).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_mariadb_and_redis_serve_the_pull_definition() {
    scaled("TIDEWAY_TEST_MYSQL_URL", 3000..3006).await;
}
