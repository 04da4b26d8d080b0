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
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;
use tideway_core::entry::AppearanceKind;
use tideway_core::entry::{home_entry, profile_entry};
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{Entry, Item, ItemId, Key, Millis, PostingFeed, Relation, UserId};
use tideway_store::copies::RecordCopies;
use tideway_store::{
    Backend, InboxRead, ItemCounts, OwnRelations, PageFacts, PageQuery, Promotion, Record, ViewerMarks,
};

mod sources;
mod walk;
pub use sources::*;
pub use walk::*;

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
        cache: Option<&'a RecordCopies>,
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
        cache: Option<&'a RecordCopies>,
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
