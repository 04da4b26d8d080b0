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
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tideway_core::entry::AppearanceKind;
use tideway_core::entry::{home_entry, profile_entry};
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{Entry, Item, ItemId, Key, PostingFeed, Relation, UserId};
use tideway_store::{Backend, InboxRead, ItemCounts, Record, ViewerMarks};

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
    /// Home of `user`, whose `F(user)` is `f_list` (and `f_set`).
    Home { backend: &'a dyn Backend, user: UserId, f_list: &'a [UserId], f_set: &'a HashSet<UserId>, read_ahead: bool },
    /// Profile of `author` seen by `viewer`.
    Profile { backend: &'a dyn Backend, author: UserId, viewer: Option<UserId>, read_ahead: bool },
    /// A mention, tag or object feed seen by `viewer` (for mentions: the
    /// user mentioned).
    Postings { backend: &'a dyn Backend, feed: &'a PostingFeed, viewer: Option<UserId>, read_ahead: bool },
}

impl Evaluator<'_> {
    /// The entries of `keys`; `want` is how many more the page needs (the
    /// items read ahead are those of the first `want` candidates).
    pub async fn evaluate(&self, keys: &[Key], want: usize) -> Result<Vec<Found>> {
        match *self {
            Evaluator::Home { backend, user, f_list, f_set, read_ahead } => {
                let ahead = if read_ahead { want } else { 0 };
                evaluate_home(backend, user, f_list, f_set, keys, ahead).await
            }
            Evaluator::Profile { backend, author, viewer, read_ahead } => {
                let ahead = if read_ahead { want } else { 0 };
                evaluate_profile(backend, author, viewer, keys, ahead).await
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

/// Keys asked of a source when `need` more entries are wanted: a little more
/// than needed, as some keys will be filtered.
pub fn batch_size(need: usize) -> usize {
    need * 2 + 8
}

/// Walks `source`, collecting up to `limit + 1` entries in walk order.
/// Returns the entries (at most `limit`) and whether more exist.
pub async fn walk(source: &mut dyn KeySource, evaluator: &Evaluator<'_>, limit: usize) -> Result<(Vec<Found>, bool)> {
    let mut out: Vec<Found> = Vec::with_capacity(limit + 1);
    while out.len() <= limit {
        let need = limit + 1 - out.len();
        let keys = source.next_batch(batch_size(need)).await?;
        if keys.is_empty() {
            break;
        }
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
    /// For each key, the original it is an appearance of.
    originals_of: Vec<Option<ItemId>>,
    originals: Vec<ItemId>,
    items: HashMap<ItemId, Arc<Item>>,
}

async fn load_batch(backend: &dyn Backend, keys: &[Key], insert_owner: Option<UserId>) -> Result<Batch> {
    let recs = backend.records(keys).await?;
    let mut originals_of = Vec::with_capacity(keys.len());
    let mut items: HashMap<ItemId, Arc<Item>> = HashMap::new();
    let mut originals: Vec<ItemId> = Vec::new();
    let mut seen: HashSet<ItemId> = HashSet::new();
    for rec in recs {
        let orig = match rec {
            Some(Record::Item(i)) => {
                let o = i.repost_of.unwrap_or(i.id);
                items.insert(i.id, i);
                Some(o)
            }
            Some(Record::Insert { user, item, .. }) if Some(user) == insert_owner => Some(item),
            _ => None,
        };
        if let Some(o) = orig
            && seen.insert(o)
        {
            originals.push(o);
        }
        originals_of.push(orig);
    }
    let missing: Vec<Key> = originals.iter().filter(|o| !items.contains_key(o)).map(|o| o.0).collect();
    if !missing.is_empty() {
        for rec in backend.records(&missing).await?.into_iter().flatten() {
            if let Record::Item(i) = rec {
                items.insert(i.id, i);
            }
        }
    }
    Ok(Batch { originals_of, originals, items })
}

impl Batch {
    /// The known originals of the first `n` keys, in order: the items a page
    /// will most likely show.
    fn early(&self, n: usize) -> Vec<ItemId> {
        let mut seen: HashSet<ItemId> = HashSet::new();
        self.originals_of
            .iter()
            .take(n)
            .flatten()
            .filter(|o| self.items.contains_key(o) && seen.insert(**o))
            .copied()
            .collect()
    }
}

/// Counts and marks of `ids` read ahead (nothing when `ids` is empty).
async fn hydrate_ahead(
    backend: &dyn Backend,
    ids: &[ItemId],
    viewer: Option<UserId>,
) -> Result<HashMap<ItemId, Hydrated>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
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

/// Evaluates a batch of home keys of `user`, whose `F(user)` is `f_list`.
pub async fn evaluate_home(
    backend: &dyn Backend,
    user: UserId,
    f_list: &[UserId],
    f_set: &HashSet<UserId>,
    keys: &[Key],
    ahead: usize,
) -> Result<Vec<Found>> {
    let b = load_batch(backend, keys, Some(user)).await?;
    let early = b.early(ahead);
    // The authors' relations are read beside the reposts; only reposters
    // not among the authors need a second read (on remote engines every
    // sequential call is a round trip).
    let mut authors: HashSet<UserId> = b.originals.iter().filter_map(|o| b.items.get(o)).map(|i| i.author).collect();
    authors.remove(&user);
    let (reposts, inserted, mut rels, hydrated) = tokio::try_join!(
        async { Ok(backend.reposts_by(&b.originals, f_list).await?) },
        async { Ok(backend.inserted_keys(user, &b.originals).await?) },
        relations_of(backend, user, authors.clone()),
        hydrate_ahead(backend, &early, Some(user)),
    )?;
    let reposters: HashSet<UserId> =
        reposts.iter().flatten().map(|(u, _)| *u).filter(|u| *u != user && !authors.contains(u)).collect();
    if !reposters.is_empty() {
        rels.extend(relations_of(backend, user, reposters).await?);
    }
    let rel = |x: UserId| rels.get(&x).copied().unwrap_or_default();
    let in_f = |x: UserId| f_set.contains(&x);
    let per_orig: HashMap<ItemId, usize> = b.originals.iter().enumerate().map(|(i, o)| (*o, i)).collect();
    let mut out = Vec::new();
    for (key, orig) in keys.iter().zip(&b.originals_of) {
        let Some(o) = orig else { continue };
        let (Some(item), Some(&idx)) = (b.items.get(o), per_orig.get(o)) else { continue };
        if let Some(e) = home_entry(item, user, &in_f, &rel, &reposts[idx], inserted[idx])
            && e.key == *key
        {
            out.push(Found { entry: e, item: item.clone(), hydrated: hydrated.get(o).cloned() });
        }
    }
    Ok(out)
}

/// Evaluates a batch of profile keys of `author` seen by `viewer`.
pub async fn evaluate_profile(
    backend: &dyn Backend,
    author: UserId,
    viewer: Option<UserId>,
    keys: &[Key],
    ahead: usize,
) -> Result<Vec<Found>> {
    let b = load_batch(backend, keys, None).await?;
    let early = b.early(ahead);
    let (reposts, rels, hydrated) = tokio::try_join!(
        async { Ok(backend.reposts_by(&b.originals, &[author]).await?) },
        async {
            match viewer {
                Some(v) => {
                    let people: HashSet<UserId> = b
                        .originals
                        .iter()
                        .filter_map(|o| b.items.get(o))
                        .map(|i| i.author)
                        .filter(|a| *a != v)
                        .collect();
                    relations_of(backend, v, people).await
                }
                None => Ok(HashMap::new()),
            }
        },
        hydrate_ahead(backend, &early, viewer),
    )?;
    let rel = |x: UserId| rels.get(&x).copied().unwrap_or_default();
    let per_orig: HashMap<ItemId, usize> = b.originals.iter().enumerate().map(|(i, o)| (*o, i)).collect();
    let mut out = Vec::new();
    for (key, orig) in keys.iter().zip(&b.originals_of) {
        let Some(o) = orig else { continue };
        let (Some(item), Some(&idx)) = (b.items.get(o), per_orig.get(o)) else { continue };
        if let Some(e) = profile_entry(item, author, viewer, &rel, &reposts[idx])
            && e.key == *key
        {
            out.push(Found { entry: e, item: item.clone(), hydrated: hydrated.get(o).cloned() });
        }
    }
    Ok(out)
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
                None => Ok(HashMap::new()),
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
