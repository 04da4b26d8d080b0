//! Walking a feed page.
//!
//! A page is computed from a *source* of candidate keys in walk order and an
//! *evaluator* that turns a batch of keys into entries. A key yields an entry
//! only when it is the entry's earliest valid appearance (see
//! `tideway_core::entry`), so every entry is emitted exactly once however
//! many appearances it has and whichever source (inbox or outboxes) holds
//! them. Filtering may drop keys, so the walk pulls batches until the page
//! has `limit + 1` entries (the extra one tells whether more exist) or the
//! source runs dry: `limit` is honoured.
//!
//! Home's source reads the inbox for keys above its floor and merges the
//! outboxes of `F(u)` (plus `u`'s insertions) at or below it. Because the
//! boundary is a key and both sides obey the same entry rule, the seam
//! between push and pull has no gap and no duplicate.

use crate::error::Result;
use crate::item_cache::ItemCache;
use async_trait::async_trait;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;
use tideway_core::entry::AppearanceKind;
use tideway_core::entry::{home_entry, profile_entry};
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{Entry, Item, ItemId, Key, Millis, PostingFeed, Relation, UserId};
use tideway_store::{
    Backend, InboxRead, ItemCounts, OwnRelations, PageFacts, PageQuery, Promotion, Record, ViewerMarks,
};

/// What a page shows of an item beside the item itself: its counts and the
/// viewer's marks.
pub type Hydrated = (ItemCounts, Option<ViewerMarks>);

/// Candidate keys of a feed in walk order.
#[async_trait]
pub trait KeySource: Send {
    /// The next keys beyond those already returned; empty when exhausted.
    async fn next_batch(&mut self, n: usize) -> Result<Vec<Key>>;
}

/// Turns a batch of keys into entries: the entry rule of one feed.
///
/// With `read_ahead`, an evaluator also reads the counts and marks of the
/// items it will likely show, beside the reads of the entry rule (on remote
/// engines a call in parallel costs nothing, one in sequence a round trip);
/// without, the page reads them once it knows its entries.
pub enum Evaluator<'a> {
    /// Home of `user`, whose `F(user)` is `f_list` (by id).
    Home {
        backend: &'a dyn Backend,
        cache: Option<&'a ItemCache>,
        user: UserId,
        f_list: &'a [UserId],
        /// `user`'s own relations, read with `f_list` under its version
        /// (the page's call then reads none).
        own: Option<&'a OwnRelations>,
        read_ahead: bool,
        /// What the page's first call also asks (its answer kept there).
        asks: Option<&'a PageAsks>,
    },
    /// Profile of `author` seen by `viewer`.
    Profile {
        backend: &'a dyn Backend,
        cache: Option<&'a ItemCache>,
        author: UserId,
        viewer: Option<UserId>,
        read_ahead: bool,
    },
    /// A mention, tag or object feed seen by `viewer` (for mentions: the
    /// user mentioned).
    Postings { backend: &'a dyn Backend, feed: &'a PostingFeed, viewer: Option<UserId>, read_ahead: bool },
}

impl Evaluator<'_> {
    /// Whether the evaluator's pages read ahead: on engines a round trip
    /// away ([`tideway_store::Profile::reads_ahead`]).
    pub fn reads_ahead(&self) -> bool {
        match *self {
            Evaluator::Home { read_ahead, .. }
            | Evaluator::Profile { read_ahead, .. }
            | Evaluator::Postings { read_ahead, .. } => read_ahead,
        }
    }

    /// The entries of `keys`; `want` is how many more the page needs. Home
    /// and profile read ahead the counts and marks of every candidate's item
    /// (they come in the page's one statement: a few more rows in it, where
    /// an entry found beyond the first `want` candidates, as after filtered
    /// reposts, would cost a round trip more); posting feeds those of the
    /// first `want` candidates.
    pub async fn evaluate(&self, keys: &[Key], want: usize) -> Result<Vec<Found>> {
        match *self {
            Evaluator::Home { backend, cache, user, f_list, own, read_ahead, asks } => {
                let ahead = if read_ahead { keys.len() } else { 0 };
                checked(cache, |cache| evaluate_home(backend, cache, user, (f_list, own), keys, ahead, asks)).await
            }
            Evaluator::Profile { backend, cache, author, viewer, read_ahead } => {
                let ahead = if read_ahead { keys.len() } else { 0 };
                checked(cache, |cache| evaluate_profile(backend, cache, author, viewer, keys, ahead)).await
            }
            Evaluator::Postings { backend, feed, viewer, read_ahead } => {
                let ahead = if read_ahead { want } else { 0 };
                evaluate_postings(backend, feed, viewer, keys, ahead).await
            }
        }
    }
}

/// An entry together with the original item it shows, and that item's
/// counts and marks when they were read ahead.
#[derive(Debug, Clone)]
pub struct Found {
    pub entry: Entry,
    pub item: Arc<Item>,
    pub hydrated: Option<Hydrated>,
}

/// How many keys a page asks of its source in its `round`th batch (0: the
/// first) when it needs `need` more entries (the one that says whether more
/// exist included). Some keys are filtered out (reposts of an original shown
/// further down, hidden authors), so a batch may fall short and another
/// follows.
///
/// Pages that read ahead (`read_ahead`: on engines a round trip away) ask
/// twice what they need and 8 more, so that one batch mostly does and a
/// page's calls do not depend on its size. In one process a batch costs no
/// wait and every key read is work (its record looked up, the entry rule
/// run, its facts asked): what is needed and one more, doubling with each
/// batch after the first (one that fell short says many keys are filtered,
/// so a page behind a muted author's 400 posts takes 5 batches, not 20). On
/// the Twitter graph this read 18 keys for a first page of 20 instead of 37,
/// in ×0.70 of the time (docs/benchmarks.md, 2026-12-06).
pub fn batch_size(need: usize, round: u32, read_ahead: bool) -> usize {
    if read_ahead { need * 2 + 8 } else { (need + 1) << round.min(6) }
}

/// Walks `source`, collecting up to `limit + 1` entries in walk order.
/// Returns the entries (at most `limit`) and whether more exist.
pub async fn walk(source: &mut dyn KeySource, evaluator: &Evaluator<'_>, limit: usize) -> Result<(Vec<Found>, bool)> {
    let mut out: Vec<Found> = Vec::with_capacity(limit + 1);
    let read_ahead = evaluator.reads_ahead();
    let mut round = 0;
    while out.len() <= limit {
        let need = limit + 1 - out.len();
        let keys = source.next_batch(batch_size(need, round, read_ahead)).await?;
        if keys.is_empty() {
            break;
        }
        round += 1;
        out.extend(evaluator.evaluate(&keys, need).await?);
    }
    let more = out.len() > limit;
    out.truncate(limit);
    Ok((out, more))
}

/// Keys of several outboxes (and optionally one user's insertions) merged.
pub struct PullSource<'a> {
    pub backend: &'a dyn Backend,
    pub authors: &'a [UserId],
    pub inserts_of: Option<UserId>,
    pub dir: Direction,
    /// Exclusive bound in walk direction (`below` for Older, `above` for Newer).
    pub bound: Option<Key>,
    /// Exclusive outer limit (for Newer: the floor + 1 of an inbox).
    pub stop: Option<Key>,
}

impl PullSource<'_> {
    fn range(&self) -> KeyRange {
        match self.dir {
            Direction::Older => KeyRange { above: self.stop, below: self.bound },
            Direction::Newer => KeyRange { above: self.bound, below: self.stop },
        }
    }
}

#[async_trait]
impl KeySource for PullSource<'_> {
    async fn next_batch(&mut self, n: usize) -> Result<Vec<Key>> {
        let range = self.range();
        if range.is_empty() {
            return Ok(vec![]);
        }
        let mut keys = self.backend.outbox_merge(self.authors, range, self.dir, n).await?;
        if let Some(u) = self.inserts_of {
            let ins = self.backend.inserts(u, range, self.dir, n).await?;
            if !ins.is_empty() {
                let mut a = keys;
                a.sort_unstable();
                let mut b = ins;
                b.sort_unstable();
                keys = merge_sorted(&[&a, &b], KeyRange::ALL, self.dir, n);
            }
        }
        if let Some(&last) = keys.last() {
            self.bound = Some(last);
        }
        Ok(keys)
    }
}

/// Merges two key lists given in walk order, without duplicates, up to `n`.
fn merge_walk(a: Vec<Key>, b: Vec<Key>, dir: Direction, n: usize) -> Vec<Key> {
    if b.is_empty() {
        return a;
    }
    let (mut a, mut b) = (a, b);
    a.sort_unstable();
    b.sort_unstable();
    merge_sorted(&[&a, &b], KeyRange::ALL, dir, n)
}

/// Home's source: the inbox above its floor, merged with the outboxes of the
/// followed authors whose items were not pushed (hot authors); the outboxes
/// of everyone in `F(u)` at or below the floor.
pub struct HomeSource<'a> {
    pub backend: &'a dyn Backend,
    pub user: UserId,
    pub authors: &'a [UserId],
    /// Followed authors with unpushed items above the floor: pulled on read.
    pub pulled: &'a [UserId],
    pub dir: Direction,
    pub bound: Option<Key>,
    /// The inbox is absent or done with: only the outboxes remain.
    pull_only: bool,
    /// The first inbox read toward older keys, made ahead (beside the page's
    /// earlier reads) for the range of [`Self::first_read`]: the size it was
    /// made for, and what it returned. Taken by the first such batch.
    ahead: Option<(usize, tideway_store::Result<Option<InboxRead>>)>,
}

impl<'a> HomeSource<'a> {
    pub fn new(
        backend: &'a dyn Backend,
        user: UserId,
        authors: &'a [UserId],
        pulled: &'a [UserId],
        dir: Direction,
        bound: Option<Key>,
    ) -> Self {
        Self { backend, user, authors, pulled, dir, bound, pull_only: false, ahead: None }
    }

    /// The inbox read of the first batch toward older keys, made ahead:
    /// used by the first batch if it asks for exactly that.
    pub fn read_ahead(mut self, n: usize, read: tideway_store::Result<Option<InboxRead>>) -> Self {
        self.ahead = Some((n, read));
        self
    }

    /// The range and size of the first batch's inbox read toward older keys.
    pub fn first_read(bound: Option<Key>, n: usize) -> (KeyRange, usize) {
        (KeyRange { above: None, below: bound }, n)
    }

    /// A source that reads no inbox: every key from the outboxes (and the
    /// reader's insertions), when the inboxes are unavailable.
    pub fn pull_only(
        backend: &'a dyn Backend,
        user: UserId,
        authors: &'a [UserId],
        dir: Direction,
        bound: Option<Key>,
    ) -> Self {
        Self { backend, user, authors, pulled: &[], dir, bound, pull_only: true, ahead: None }
    }

    /// Keys of the pulled authors in `range` above `floor`.
    async fn pulled_above(&self, floor: Key, range: KeyRange, n: usize) -> Result<Vec<Key>> {
        if self.pulled.is_empty() {
            return Ok(vec![]);
        }
        let range = KeyRange { above: Some(range.above.map_or(floor, |a| a.max(floor))), below: range.below };
        Ok(self.backend.outbox_merge(self.pulled, range, self.dir, n).await?)
    }

    async fn pull(&mut self, stop: Option<Key>, n: usize) -> Result<Vec<Key>> {
        let mut p = PullSource {
            backend: self.backend,
            authors: self.authors,
            inserts_of: Some(self.user),
            dir: self.dir,
            bound: self.bound,
            stop,
        };
        let keys = p.next_batch(n).await?;
        self.bound = p.bound;
        Ok(keys)
    }
}

#[async_trait]
impl KeySource for HomeSource<'_> {
    async fn next_batch(&mut self, n: usize) -> Result<Vec<Key>> {
        loop {
            match self.dir {
                Direction::Older => {
                    if self.pull_only {
                        return self.pull(None, n).await;
                    }
                    let (range, _) = Self::first_read(self.bound, n);
                    let read = match self.ahead.take() {
                        // Taken on the first batch: the bound is still the
                        // one the read was made for.
                        Some((m, read)) if m == n => read,
                        _ => self.backend.read_inbox(self.user, range, Direction::Older, n).await,
                    };
                    let read = match read {
                        Ok(read) => read,
                        // The inbox became unreachable mid-page: the outboxes
                        // below the bound hold every key it would have had.
                        Err(e) => {
                            tracing::warn!(error = %e, "inbox read failed: pulling the rest of the page");
                            None
                        }
                    };
                    match read {
                        Some(r) if !r.keys.is_empty() || !self.pulled.is_empty() => {
                            let extra = self.pulled_above(r.floor, range, n).await?;
                            let keys = merge_walk(r.keys, extra, Direction::Older, n);
                            if let Some(&last) = keys.last() {
                                self.bound = Some(last);
                                return Ok(keys);
                            }
                            let below = r.floor.saturating_add(1);
                            self.bound = Some(self.bound.map_or(below, |b| b.min(below)));
                            self.pull_only = true;
                        }
                        Some(r) => {
                            // Nothing left above the floor: continue below it.
                            let below = r.floor.saturating_add(1);
                            self.bound = Some(self.bound.map_or(below, |b| b.min(below)));
                            self.pull_only = true;
                        }
                        None => self.pull_only = true,
                    }
                }
                Direction::Newer => {
                    let floor =
                        if self.pull_only { None } else { self.backend.inbox_floor(self.user).await.ok().flatten() };
                    let Some(floor) = floor else {
                        self.pull_only = true;
                        return self.pull(None, n).await;
                    };
                    if self.bound.unwrap_or(0) < floor {
                        let keys = self.pull(Some(floor.saturating_add(1)), n).await?;
                        if !keys.is_empty() {
                            return Ok(keys);
                        }
                        self.bound = Some(floor);
                        continue;
                    }
                    let range = KeyRange { above: self.bound, below: None };
                    match self.backend.read_inbox(self.user, range, Direction::Newer, n).await.ok().flatten() {
                        None => self.pull_only = true,
                        // The floor rose since it was read: pull up to it first.
                        Some(r) if r.floor > self.bound.unwrap_or(0) => continue,
                        Some(r) => {
                            let extra = self.pulled_above(r.floor, range, n).await?;
                            let keys = merge_walk(r.keys, extra, Direction::Newer, n);
                            if let Some(&last) = keys.last() {
                                self.bound = Some(last);
                            }
                            return Ok(keys);
                        }
                    }
                }
            }
        }
    }
}

/// What an evaluator knows about the records of a batch.
struct Batch {
    /// For each key, the original it is an appearance of (its index in
    /// `originals`).
    originals_of: Vec<Option<usize>>,
    /// The originals of the batch's keys, each once, in the order first met.
    originals: Vec<ItemId>,
    /// Each original's item, where it exists (beside `originals`).
    items: Vec<Option<Arc<Item>>>,
    /// The item records taken from the node's cache, with their `rev` and
    /// the item epoch they were current at: the page's facts check them.
    held: Vec<(ItemId, u32, u64)>,
}

/// The records of `keys`: copies from `cache` where it holds them (noted
/// in `held`), the rest read (and kept in `cache`).
async fn read_records(
    backend: &dyn Backend,
    cache: Option<&ItemCache>,
    keys: &[Key],
    held: &mut Vec<(ItemId, u32, u64)>,
) -> Result<Vec<Option<Record>>> {
    let Some(cache) = cache else { return Ok(backend.records(keys).await?) };
    // (taken before the read: what is read is current at it or later)
    let epoch = cache.epoch();
    let mut out: Vec<Option<Record>> = Vec::with_capacity(keys.len());
    for k in keys {
        out.push(cache.get(*k).map(|(r, at)| {
            if let Record::Item(i) = &r {
                held.push((i.id, i.rev, at));
            }
            r
        }));
    }
    let missing: Vec<Key> = keys.iter().zip(&out).filter(|(_, r)| r.is_none()).map(|(k, _)| *k).collect();
    if !missing.is_empty() {
        let mut read = backend.records(&missing).await?.into_iter();
        for (k, slot) in keys.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                *slot = read.next().flatten();
                if let Some(r) = slot {
                    cache.put(*k, r, epoch);
                }
            }
        }
    }
    Ok(out)
}

async fn load_batch(
    backend: &dyn Backend,
    cache: Option<&ItemCache>,
    keys: &[Key],
    insert_owner: Option<UserId>,
) -> Result<Batch> {
    let mut held = Vec::new();
    let recs = read_records(backend, cache, keys, &mut held).await?;
    let mut originals_of = Vec::with_capacity(keys.len());
    let mut originals: Vec<ItemId> = Vec::with_capacity(keys.len());
    let mut items: Vec<Option<Arc<Item>>> = Vec::with_capacity(keys.len());
    // (a batch's few originals: one small map, no map per item)
    let mut index: HashMap<ItemId, usize> = HashMap::with_capacity_and_hasher(keys.len(), Default::default());
    for rec in recs {
        let (orig, item) = match rec {
            Some(Record::Item(i)) => (i.repost_of.unwrap_or(i.id), Some(i)),
            Some(Record::Insert { user, item, .. }) if Some(user) == insert_owner => (item, None),
            _ => {
                originals_of.push(None);
                continue;
            }
        };
        let at = *index.entry(orig).or_insert_with(|| {
            originals.push(orig);
            items.push(None);
            originals.len() - 1
        });
        // (a repost's own record is not its original's)
        if let Some(i) = item.filter(|i| i.id == orig) {
            items[at] = Some(i);
        }
        originals_of.push(Some(at));
    }
    let missing: Vec<usize> = (0..originals.len()).filter(|&at| items[at].is_none()).collect();
    if !missing.is_empty() {
        let keys: Vec<Key> = missing.iter().map(|&at| originals[at].0).collect();
        let read = read_records(backend, cache, &keys, &mut held).await?;
        for (at, rec) in missing.into_iter().zip(read) {
            if let Some(Record::Item(i)) = rec {
                items[at] = Some(i);
            }
        }
    }
    held.sort_unstable();
    held.dedup();
    Ok(Batch { originals_of, originals, items, held })
}

/// Runs an evaluation that takes records from `cache` until none of those
/// it took was stale (`Err(stale)`: they are forgotten, so the next run
/// reads them); after two such runs, one without the cache.
async fn checked<'c, F, Fut>(cache: Option<&'c ItemCache>, run: F) -> Result<Vec<Found>>
where
    F: Fn(Option<&'c ItemCache>) -> Fut,
    Fut: std::future::Future<Output = Result<std::result::Result<Vec<Found>, Vec<ItemId>>>>,
{
    let mut cache = cache;
    let mut runs = 0;
    loop {
        match run(cache).await? {
            Ok(found) => return Ok(found),
            Err(stale) => {
                if let Some(c) = cache {
                    for id in stale {
                        c.forget(id);
                    }
                }
                runs += 1;
                if runs >= 2 {
                    // (a run without the cache holds no copy: never stale)
                    cache = None;
                }
            }
        }
    }
}

impl Batch {
    /// The known originals of the first `n` keys, in order: the items a page
    /// will most likely show.
    fn early(&self, n: usize) -> Vec<ItemId> {
        let mut seen: HashSet<usize> = HashSet::default();
        self.originals_of
            .iter()
            .take(n)
            .flatten()
            .filter(|&&at| self.items[at].is_some() && seen.insert(at))
            .map(|&at| self.originals[at])
            .collect()
    }

    /// The items of the originals that exist.
    fn original_items(&self) -> impl Iterator<Item = &Arc<Item>> {
        self.items.iter().flatten()
    }
}

/// Counts and marks of `ids` read ahead (nothing when `ids` is empty).
async fn hydrate_ahead(
    backend: &dyn Backend,
    ids: &[ItemId],
    viewer: Option<UserId>,
) -> Result<HashMap<ItemId, Hydrated>> {
    if ids.is_empty() {
        return Ok(HashMap::default());
    }
    let h = backend.hydration(ids, viewer).await?;
    Ok(ids.iter().copied().zip(h).collect())
}

async fn relations_of(
    backend: &dyn Backend,
    viewer: UserId,
    users: HashSet<UserId>,
) -> Result<HashMap<UserId, Relation>> {
    let users: Vec<UserId> = users.into_iter().collect();
    let rels = backend.relations(viewer, &users).await?;
    Ok(users.into_iter().zip(rels).collect())
}

/// What the page's one call tells of a batch, as the entry rule reads it.
struct Told {
    reposts: Vec<Vec<(UserId, ItemId)>>,
    inserted: Vec<Option<Key>>,
    rels: HashMap<UserId, Relation>,
    hydrated: HashMap<ItemId, Hydrated>,
}

impl Told {
    /// Asks `q` in one call (one statement on SQL); `Err` names the held
    /// copies that were stale.
    async fn ask(
        backend: &dyn Backend,
        cache: Option<&ItemCache>,
        b: &Batch,
        q: PageQuery<'_>,
        asks: Option<&PageAsks>,
    ) -> Result<std::result::Result<Told, Vec<ItemId>>> {
        let held: Vec<(ItemId, u32)> = b.held.iter().map(|(id, rev, _)| (*id, *rev)).collect();
        // (0: kept before this node saw any epoch, so checked)
        let held_at = b.held.iter().map(|(_, _, at)| *at).min().filter(|at| *at > 0);
        let q = PageQuery { held: &held, held_at, ..q };
        let f = backend.page_facts(&q).await?;
        if let Some(a) = asks {
            a.keep(&q, &f);
        }
        if !f.stale.is_empty() {
            return Ok(Err(f.stale));
        }
        if let (Some(c), Some(now)) = (cache, f.items_epoch) {
            c.checked(now, &b.held);
        }
        Ok(Ok(Told {
            reposts: f.reposts,
            inserted: f.inserted,
            rels: f.relations.into_iter().collect(),
            hydrated: q.hydrate.iter().copied().zip(f.hydrated).collect(),
        }))
    }

    fn rel(&self, x: UserId) -> Relation {
        self.rels.get(&x).copied().unwrap_or_default()
    }
}

impl Batch {
    /// The entries of `keys` by `rule` (given an original and its index in
    /// `originals`): each at the key the rule puts it.
    fn entries(&self, keys: &[Key], told: &Told, rule: impl Fn(&Item, usize) -> Option<Entry>) -> Vec<Found> {
        let mut out = Vec::new();
        for (key, orig) in keys.iter().zip(&self.originals_of) {
            let Some(idx) = *orig else { continue };
            let Some(item) = &self.items[idx] else { continue };
            if let Some(e) = rule(item, idx)
                && e.key == *key
            {
                out.push(Found {
                    entry: e,
                    item: item.clone(),
                    hydrated: told.hydrated.get(&self.originals[idx]).cloned(),
                });
            }
        }
        out
    }
}

/// What a home page asks of its first call beside its batch's facts: the
/// version of the viewer's followee set (when the page walks a node's copy
/// of the list) and the promotions running. The answer is kept here; a page
/// whose walk made no call asks it alone ([`PageAsks::answer`]).
pub struct PageAsks {
    pub followees_of: Option<UserId>,
    pub promotions_at: Option<Millis>,
    answered: std::sync::Mutex<Option<Asked>>,
}

/// What [`PageAsks`] learnt.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    pub followees_version: Option<u64>,
    pub promotions: Vec<Promotion>,
}

impl PageAsks {
    pub fn new(followees_of: Option<UserId>, promotions_at: Option<Millis>) -> Self {
        PageAsks { followees_of, promotions_at, answered: std::sync::Mutex::new(None) }
    }

    fn answered(&self) -> std::sync::MutexGuard<'_, Option<Asked>> {
        self.answered.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `q` asking what is not answered yet.
    fn onto<'q>(&self, q: PageQuery<'q>) -> PageQuery<'q> {
        if self.answered().is_some() {
            return q;
        }
        PageQuery { followees_of: self.followees_of, promotions_at: self.promotions_at, ..q }
    }

    /// Keeps the answer of a call that asked (`q`, from [`PageAsks::onto`]).
    fn keep(&self, q: &PageQuery<'_>, f: &PageFacts) {
        if q.followees_of.is_some() || q.promotions_at.is_some() {
            *self.answered() = Some(Asked {
                followees_version: f.followees_version,
                promotions: f.promotions.clone().unwrap_or_default(),
            });
        }
    }

    /// The answer, asked alone when no call of the walk asked it.
    pub async fn answer(&self, backend: &dyn Backend) -> Result<Asked> {
        if let Some(a) = self.answered().clone() {
            return Ok(a);
        }
        let q = self.onto(PageQuery::default());
        let f = backend.page_facts(&q).await?;
        self.keep(&q, &f);
        Ok(self.answered().clone().unwrap_or_default())
    }
}

/// Evaluates a batch of home keys of `user`, whose `F(user)` is `f_list`
/// (and whose own relations `own`, when the caller holds them); `Err`
/// names the copies taken from `cache` that were stale.
pub async fn evaluate_home(
    backend: &dyn Backend,
    cache: Option<&ItemCache>,
    user: UserId,
    (f_list, own): (&[UserId], Option<&OwnRelations>),
    keys: &[Key],
    ahead: usize,
    asks: Option<&PageAsks>,
) -> Result<std::result::Result<Vec<Found>, Vec<ItemId>>> {
    let b = load_batch(backend, cache, keys, Some(user)).await?;
    let early = b.early(ahead);
    // Everything else the rule needs in one call, the reposters' relations
    // with the authors'.
    let related: Vec<UserId> =
        b.original_items().map(|i| i.author).filter(|a| *a != user).collect::<HashSet<_>>().into_iter().collect();
    let q = PageQuery {
        originals: &b.originals,
        reposters: f_list,
        // (with the own relations known: only where there are any)
        inserts_of: Some(user).filter(|_| own.is_none_or(|o| o.inserts)),
        viewer: Some(user),
        related: &related,
        // (following is `F(user)`: the page walks it)
        follows_known: true,
        relations_known: own.is_some(),
        hydrate: &early,
        ..PageQuery::default()
    };
    let q = match asks {
        Some(a) => a.onto(q),
        None => q,
    };
    let told = match Told::ask(backend, cache, &b, q, asks).await? {
        Ok(t) => t,
        Err(stale) => return Ok(Err(stale)),
    };
    debug_assert!(f_list.is_sorted(), "F(u) is by id");
    let in_f = |x: UserId| f_list.binary_search(&x).is_ok();
    let rel = |x: UserId| Relation {
        following: in_f(x),
        ..match own {
            Some(o) => o.relation(x),
            None => told.rel(x),
        }
    };
    // (none asked: no insertions)
    let inserted = |idx: usize| told.inserted.get(idx).copied().flatten();
    Ok(Ok(b.entries(keys, &told, |item, idx| home_entry(item, user, &in_f, &rel, &told.reposts[idx], inserted(idx)))))
}

/// Evaluates a batch of profile keys of `author` seen by `viewer`; `Err`
/// names the copies taken from `cache` that were stale.
pub async fn evaluate_profile(
    backend: &dyn Backend,
    cache: Option<&ItemCache>,
    author: UserId,
    viewer: Option<UserId>,
    keys: &[Key],
    ahead: usize,
) -> Result<std::result::Result<Vec<Found>, Vec<ItemId>>> {
    let b = load_batch(backend, cache, keys, None).await?;
    let early = b.early(ahead);
    let related: Vec<UserId> = match viewer {
        Some(v) => {
            let people: HashSet<UserId> = b.original_items().map(|i| i.author).filter(|a| *a != v).collect();
            people.into_iter().collect()
        }
        None => vec![],
    };
    let q = PageQuery {
        originals: &b.originals,
        reposters: &[author],
        inserts_of: None,
        viewer,
        related: &related,
        hydrate: &early,
        ..PageQuery::default()
    };
    let told = match Told::ask(backend, cache, &b, q, None).await? {
        Ok(t) => t,
        Err(stale) => return Ok(Err(stale)),
    };
    let rel = |x: UserId| told.rel(x);
    Ok(Ok(b.entries(keys, &told, |item, idx| profile_entry(item, author, viewer, &rel, &told.reposts[idx]))))
}

/// A mention, tag or object feed's keys: one range of its postings.
pub struct PostingSource<'a> {
    pub backend: &'a dyn Backend,
    /// The feed's id (`PostingFeed::id`).
    pub feed: u64,
    pub dir: Direction,
    /// Exclusive bound in walk direction.
    pub bound: Option<Key>,
}

#[async_trait]
impl KeySource for PostingSource<'_> {
    async fn next_batch(&mut self, n: usize) -> Result<Vec<Key>> {
        let range = match self.dir {
            Direction::Older => KeyRange { above: None, below: self.bound },
            Direction::Newer => KeyRange { above: self.bound, below: None },
        };
        let keys = self.backend.postings(self.feed, range, self.dir, n).await?;
        if let Some(&last) = keys.last() {
            self.bound = Some(last);
        }
        Ok(keys)
    }
}

/// Evaluates a batch of a posting feed's keys: each item, as it is now,
/// that the feed shows `viewer` (`PostingFeed::shows`) is an entry of its
/// own, at its own key.
pub async fn evaluate_postings(
    backend: &dyn Backend,
    feed: &PostingFeed,
    viewer: Option<UserId>,
    keys: &[Key],
    ahead: usize,
) -> Result<Vec<Found>> {
    let items: Vec<Option<Arc<Item>>> = backend
        .records(keys)
        .await?
        .into_iter()
        .map(|r| match r {
            Some(Record::Item(i)) if !i.deleted && feed.holds(&i) => Some(i),
            _ => None,
        })
        .collect();
    let early: Vec<ItemId> = items.iter().flatten().take(ahead).map(|i| i.id).collect();
    let (rels, hydrated) = tokio::try_join!(
        async {
            match viewer {
                Some(v) => {
                    relations_of(backend, v, items.iter().flatten().map(|i| i.author).filter(|a| *a != v).collect())
                        .await
                }
                None => Ok(HashMap::default()),
            }
        },
        hydrate_ahead(backend, &early, viewer),
    )?;
    Ok(items
        .into_iter()
        .zip(keys)
        .filter_map(|(item, key)| {
            let item = item?;
            let rel = rels.get(&item.author).copied().unwrap_or_default();
            feed.shows(&item, viewer, rel).then(|| Found {
                entry: Entry { key: *key, reason: AppearanceKind::Authored, original: item.id, sources: vec![] },
                hydrated: hydrated.get(&item.id).cloned(),
                item,
            })
        })
        .collect())
}
