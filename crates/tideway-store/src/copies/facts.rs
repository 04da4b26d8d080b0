//! A node's copies of the facts a page reads, for a [`Split`](crate::Split)
//! backend: each item's counts and viewers' marks on it, each reader's
//! followee-set version, the item epoch and the promotions not ended,
//! kept from the pages that read them and taken by later pages while the
//! shared half's [`FactTokens`] say they are current. A warm page then asks
//! the durable half (one SQL statement) only for what its copies lack,
//! and when they lack nothing, asks it nothing.
//!
//! What is guaranteed: a page never shows an item's counts or a viewer's
//! marks as they were before a change acknowledged before the page began,
//! on any node, and never checks a copy of a record or of a followee list
//! against a version older than such a change. Every write that changes
//! these facts goes through [`NodeCopies`](super::NodeCopies), which names what it changes
//! ([`FactKey`]): a reaction (the item), a repost or reply (its parents),
//! a delete (the item, its parents, the records), a patch (the records),
//! a follow, unfollow, mute or insertion (the user's followee set), a
//! block (both users'), a promotion (the promotions). It begins a change
//! of those keys in the shared half before it writes and ends it after,
//! before it answers. A page reads the tokens first, then the facts it
//! lacks; a copy is kept with the token read before the read that filled
//! it and taken only while the token is still that one. So a copy taken
//! was filled after every change that had ended when the page read its
//! tokens: a change in flight shows no token (the page reads the facts),
//! and one that ended moved it. A change whose writer died between its two
//! calls stays in flight until the shared engine lets it lapse (Redis:
//! `tideway-store-redis`'s `tokens.rs`), so those facts are read from the
//! durable half meanwhile. When the shared half cannot be asked, a page
//! reads every fact from the durable half and keeps nothing, and a write
//! that cannot begin its change goes on without it, after the durable half
//! recorded that no node may trust the shared half until it is dropped
//! (`trust.rs`): its tokens say nothing of that write.
//!
//! The marks are per viewer: an item's copy keeps those of a few viewers
//! (each viewer's own reactions and reposts change the item's counts, so
//! the item's token covers them); an item that no one reposted or reacted
//! to has no marks for anyone, which is most items.

use crate::Promotion;
use crate::traits::*;
use parking_lot::Mutex;
use std::sync::Arc;
use tideway_core::{ItemId, Millis, UserId};

/// The facts of one item as of a token.
#[derive(Debug)]
struct Copy {
    token: u64,
    counts: ItemCounts,
    /// Viewers' marks on the item, the newest last (at most [`VIEWERS`]).
    marks: Vec<(UserId, ViewerMarks)>,
}

impl Copy {
    /// The counts say no one reposted or reacted: every viewer's marks are
    /// none.
    fn unmarked(&self) -> bool {
        self.counts.reposts == 0 && self.counts.reactions.is_empty()
    }

    /// The viewer's marks from the copy (`None`: not kept).
    fn marks_of(&self, viewer: Option<UserId>) -> Option<Option<ViewerMarks>> {
        let Some(v) = viewer else { return Some(None) };
        if self.unmarked() {
            return Some(Some(ViewerMarks::default()));
        }
        self.marks.iter().find(|(u, _)| *u == v).map(|(_, m)| Some(m.clone()))
    }
}

/// Viewers' marks kept per item (the oldest go first).
const VIEWERS: usize = 8;

/// Weighs a copy by an estimate of its memory.
#[derive(Clone)]
struct Weight;

impl quick_cache::Weighter<ItemId, Arc<Copy>> for Weight {
    fn weight(&self, _: &ItemId, c: &Arc<Copy>) -> u64 {
        let reactions: usize = c.counts.reactions.iter().map(|(k, _)| 40 + k.len()).sum();
        let marks: usize =
            c.marks.iter().map(|(_, m)| 48 + m.reactions.iter().map(|k| 24 + k.len()).sum::<usize>()).sum();
        (COPY_BASE + reactions + marks) as u64
    }
}

/// A copy's own memory with its slot in the cache.
const COPY_BASE: usize = 120;

/// The memory the copies of one node may take (about 100,000 items
/// without reactions, or as many followee-set versions).
pub const FACT_COPIES_BYTES: u64 = 16 << 20;

/// The promotions not ended at `from`, as of a token.
struct HeldPromotions {
    token: u64,
    from: Millis,
    list: Arc<[Promotion]>,
}

/// Copies of the facts a page reads, each under the token it was read
/// with (see the module's text).
pub struct FactCopies {
    copies: quick_cache::sync::Cache<ItemId, Arc<Copy>, Weight>,
    /// Followee-set versions by user (`None`: the durable half keeps
    /// none), each with its token.
    versions: quick_cache::sync::Cache<UserId, (u64, Option<u64>)>,
    /// The item epoch with its token (an engine that keeps none leaves
    /// it `None`).
    epoch: Mutex<Option<(u64, u64)>>,
    promotions: Mutex<Option<HeldPromotions>>,
}

/// What a page's tokens say, key by key.
struct Tokens {
    keys: Vec<FactKey>,
    tokens: Vec<Option<u64>>,
}

impl Tokens {
    fn of(&self, key: FactKey) -> Option<u64> {
        self.keys.binary_search(&key).ok().and_then(|p| self.tokens[p])
    }
}

impl FactCopies {
    pub fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 12);
        let items = usize::try_from(bytes / COPY_BASE as u64).unwrap_or(usize::MAX).max(16);
        Self {
            copies: quick_cache::sync::Cache::with_weighter(items, bytes * 3 / 4, Weight),
            versions: quick_cache::sync::Cache::new((items / 4).max(16)),
            epoch: Mutex::new(None),
            promotions: Mutex::new(None),
        }
    }

    /// How many items' copies this node holds.
    pub fn copies(&self) -> usize {
        self.copies.len()
    }

    /// [`Pages::page_facts`]: what current copies hold is taken from them,
    /// the rest asked of the durable half in one call (none when nothing
    /// is left to ask).
    pub async fn page_facts(&self, inner: &dyn Backend, q: &PageQuery<'_>) -> Result<PageFacts> {
        if q.asks_nothing() {
            return inner.page_facts(q).await;
        }
        let mut keys: Vec<FactKey> = q.hydrate.iter().chain(q.originals).map(|&i| FactKey::Item(i)).collect();
        keys.extend(q.followees_of.map(FactKey::Followees));
        keys.push(FactKey::Records);
        if q.promotions_at.is_some() {
            keys.push(FactKey::Promotions);
        }
        keys.sort_unstable();
        keys.dedup();
        let tokens = match inner.fact_tokens(&keys).await {
            Ok(tokens) => Tokens { keys, tokens },
            Err(e) => {
                // (the shared half is away: every fact from the durable one)
                tracing::debug!(error = %e, "fact tokens not read; the page's facts are read whole");
                return inner.page_facts(q).await;
            }
        };
        let current = |i: ItemId| -> Option<Arc<Copy>> {
            let t = tokens.of(FactKey::Item(i))?;
            self.copies.get(&i).filter(|c| c.token == t)
        };
        // The hydrated items taken from copies, and those asked.
        let mut hydrated: Vec<Option<(ItemCounts, Option<ViewerMarks>)>> = Vec::with_capacity(q.hydrate.len());
        let mut hydrate_asked: Vec<ItemId> = Vec::new();
        for &i in q.hydrate {
            let taken = current(i).and_then(|c| c.marks_of(q.viewer).map(|m| (c.counts.clone(), m)));
            if taken.is_none() {
                hydrate_asked.push(i);
            }
            hydrated.push(taken);
        }
        // The originals not asked, whose reposts are none: without the
        // insertions asked (those are per original too), every original
        // when no reposter is asked, else each whose copy counts no repost.
        let none: Vec<bool> = q
            .originals
            .iter()
            .map(|&o| {
                q.inserts_of.is_none() && (q.reposters.is_empty() || current(o).is_some_and(|c| c.counts.reposts == 0))
            })
            .collect();
        let originals_asked: Vec<ItemId> =
            q.originals.iter().zip(&none).filter(|(_, n)| !**n).map(|(&o, _)| o).collect();
        // The epoch, the followee-set version and the promotions from their
        // copies.
        let epoch = (*self.epoch.lock()).filter(|(t, _)| Some(*t) == tokens.of(FactKey::Records)).map(|(_, n)| n);
        let version = q.followees_of.and_then(|u| {
            let t = tokens.of(FactKey::Followees(u))?;
            self.versions.get(&u).filter(|(held, _)| *held == t).map(|(_, v)| v)
        });
        let promotions = q.promotions_at.and_then(|at| {
            let t = tokens.of(FactKey::Promotions)?;
            let held = self.promotions.lock();
            held.as_ref().filter(|h| h.token == t && h.from <= at).map(|h| Promotion::running(&h.list, at))
        });
        // The durable half is asked nothing when the copies hold it all: no
        // count, repost, insertion or relation left to read, the held
        // records current at the epoch that stands.
        let held_current = q.held.is_empty() || (epoch.is_some() && q.held_at == epoch);
        let all_held = hydrate_asked.is_empty()
            && originals_asked.is_empty()
            && (q.viewer.is_none() || q.relations_known)
            && held_current
            && (q.followees_of.is_none() || version.is_some())
            && (q.promotions_at.is_none() || promotions.is_some());
        if all_held {
            return Ok(PageFacts {
                reposts: vec![Vec::new(); q.originals.len()],
                inserted: Vec::new(),
                relations: Vec::new(),
                hydrated: hydrated.into_iter().map(Option::unwrap_or_default).collect(),
                stale: Vec::new(),
                followees_version: version.flatten(),
                promotions,
                items_epoch: epoch,
            });
        }
        // Else one call for the rest; the promotions, when their copy is
        // not current, read beside it whole (those not ended), to keep.
        let narrowed = PageQuery { originals: &originals_asked, hydrate: &hydrate_asked, promotions_at: None, ..*q };
        let read_promotions = q.promotions_at.filter(|_| promotions.is_none());
        // Keys without a token (none yet, or a change in flight) get one
        // beside the read: not kept from this read, kept from the next.
        let unminted: Vec<FactKey> =
            tokens.keys.iter().zip(&tokens.tokens).filter(|(_, t)| t.is_none()).map(|(k, _)| *k).collect();
        let (f, list, minted) = tokio::join!(
            inner.page_facts(&narrowed),
            async {
                match read_promotions {
                    Some(at) => inner.promotions_not_ended(at).await.map(Some),
                    None => Ok(None),
                }
            },
            async { if unminted.is_empty() { Ok(()) } else { inner.mint_fact_tokens(&unminted).await } }
        );
        if let Err(e) = minted {
            tracing::debug!(error = %e, "fact tokens not minted; the next page mints them");
        }
        let (mut f, list) = (f?, list?);
        f.promotions = match (promotions, list) {
            (Some(p), _) => Some(p),
            (None, Some(list)) => {
                let at = q.promotions_at.unwrap_or(Millis(i64::MIN));
                let running = Promotion::running(&list, at);
                if let Some(token) = tokens.of(FactKey::Promotions) {
                    *self.promotions.lock() = Some(HeldPromotions { token, from: at, list: list.into() });
                }
                Some(running)
            }
            (None, None) => None,
        };
        // Keep what was read, under the tokens read before it.
        if let (Some(token), Some(n)) = (tokens.of(FactKey::Records), f.items_epoch) {
            *self.epoch.lock() = Some((token, n));
        }
        if let Some((u, token)) = q.followees_of.and_then(|u| Some((u, tokens.of(FactKey::Followees(u))?))) {
            self.versions.insert(u, (token, f.followees_version));
        }
        for (&i, (counts, marks)) in hydrate_asked.iter().zip(&f.hydrated) {
            let Some(token) = tokens.of(FactKey::Item(i)) else { continue };
            let mut copy = match self.copies.get(&i) {
                Some(c) if c.token == token => Copy { token, counts: c.counts.clone(), marks: c.marks.clone() },
                _ => Copy { token, counts: counts.clone(), marks: Vec::new() },
            };
            if let (Some(v), Some(m)) = (q.viewer, marks)
                && !copy.unmarked()
                && !copy.marks.iter().any(|(u, _)| *u == v)
            {
                if copy.marks.len() >= VIEWERS {
                    copy.marks.remove(0);
                }
                copy.marks.push((v, m.clone()));
            }
            self.copies.insert(i, Arc::new(copy));
        }
        let mut read = std::mem::take(&mut f.hydrated).into_iter();
        f.hydrated = hydrated.into_iter().map(|h| h.or_else(|| read.next()).unwrap_or_default()).collect();
        if originals_asked.len() != q.originals.len() {
            let mut reposts = std::mem::take(&mut f.reposts).into_iter();
            for n in none {
                f.reposts.push(if n { Vec::new() } else { reposts.next().unwrap_or_default() });
            }
            // (the insertions are asked only with every original)
            f.inserted.clear();
        }
        Ok(f)
    }
}
