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
//! these facts goes through [`FactLayer`], which names what it changes
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
use std::future::Future;
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Millis, UserId};

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

/// The writes that change the facts pages read and the page's read, over
/// a durable half and the shared half's tokens (see the module's text).
pub struct FactLayer {
    durable: Arc<dyn Durable>,
    shared: Arc<dyn Shared>,
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

impl FactLayer {
    pub fn new(durable: Arc<dyn Durable>, shared: Arc<dyn Shared>, bytes: u64) -> Self {
        let bytes = bytes.max(1 << 12);
        let items = usize::try_from(bytes / COPY_BASE as u64).unwrap_or(usize::MAX).max(16);
        Self {
            durable,
            shared,
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

    /// Runs `write` as a change of `keys`' facts: begun before (when the
    /// shared half is away, the write goes on without it: `trust.rs`), ended after whatever it
    /// answered (a failure there leaves the change in flight until it
    /// lapses: pages read those facts meanwhile, so the write stands).
    async fn changing<T>(&self, keys: &[FactKey], write: impl Future<Output = Result<T>>) -> Result<T> {
        if keys.is_empty() {
            return write.await;
        }
        match self.shared.begin_fact_change(keys).await {
            Ok(()) => {}
            // The shared half is away: the write goes on without it, which
            // then no node trusts until it is dropped (`trust.rs`).
            Err(e) if e.is_unavailable() => {
                tracing::debug!(error = %e, ?keys, "a change of facts goes on without the shared half");
                return crate::trust::without_shared(self.shared.as_ref(), write).await;
            }
            Err(e) => return Err(e),
        }
        let out = write.await;
        if let Err(e) = self.shared.end_fact_change(keys).await {
            tracing::warn!(error = %e, ?keys, "a change of facts pages read could not be ended; it lapses");
        }
        out
    }

    /// The items whose facts `item`'s creation or delete changes.
    fn parents(item: &Item) -> impl Iterator<Item = FactKey> {
        [item.reply_to, item.repost_of].into_iter().flatten().map(FactKey::Item)
    }

    pub async fn create_item_notifying(
        &self,
        item: Item,
        fan_out: bool,
        now: Millis,
        notify: &[tideway_core::notify::Op],
    ) -> Result<CreateOutcome> {
        let parents: Vec<FactKey> = Self::parents(&item).collect();
        self.changing(&parents, self.durable.create_item_notifying(item, fan_out, now, notify)).await
    }

    pub async fn update_item_notifying(
        &self,
        id: ItemId,
        change: &ItemChange,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Option<Arc<Item>>> {
        // Every patch and delete moves the item epoch; a delete the
        // counts of the item and of its parents.
        let mut keys = vec![FactKey::Records];
        if matches!(change, ItemChange::Delete) {
            keys.push(FactKey::Item(id));
            if let Some(Some(crate::Record::Item(i))) = self.durable.records(&[id.0]).await?.pop() {
                keys.extend(Self::parents(&i));
            }
        }
        self.changing(&keys, self.durable.update_item_notifying(id, change, notify)).await
    }

    pub async fn set_reaction(
        &self,
        item: ItemId,
        user: UserId,
        kind: &str,
        on: bool,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool> {
        self.changing(&[FactKey::Item(item)], self.durable.set_reaction(item, user, kind, on, notify)).await
    }

    pub async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.changing(&[FactKey::Promotions], self.durable.create_promotion(p)).await
    }

    pub async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.changing(&[FactKey::Followees(user)], self.durable.insert_home(user, item, key)).await
    }

    pub async fn follow_many_notifying(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Vec<FollowStatus>> {
        let write = self.durable.follow_many_notifying(user, targets, at, max_following, notify);
        self.changing(&[FactKey::Followees(user)], write).await
    }

    pub async fn unfollow_notifying(
        &self,
        user: UserId,
        target: UserId,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool> {
        self.changing(&[FactKey::Followees(user)], self.durable.unfollow_notifying(user, target, notify)).await
    }

    pub async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        let keys = [FactKey::Followees(user), FactKey::Followees(target)];
        self.changing(&keys, self.durable.set_block(user, target, on, at)).await
    }

    pub async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.changing(&[FactKey::Followees(user)], self.durable.set_mute(user, target, on, at)).await
    }

    /// [`Pages::page_facts`]: what current copies hold is taken from them,
    /// the rest asked of the durable half in one call (none when nothing
    /// is left to ask).
    pub async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        if q.asks_nothing() {
            return self.durable.page_facts(q).await;
        }
        let mut keys: Vec<FactKey> = q.hydrate.iter().chain(q.originals).map(|&i| FactKey::Item(i)).collect();
        keys.extend(q.followees_of.map(FactKey::Followees));
        keys.push(FactKey::Records);
        if q.promotions_at.is_some() {
            keys.push(FactKey::Promotions);
        }
        keys.sort_unstable();
        keys.dedup();
        let tokens = match self.shared.fact_tokens(&keys).await {
            Ok(tokens) => Tokens { keys, tokens },
            Err(e) => {
                // (the shared half is away: every fact from the durable one)
                tracing::debug!(error = %e, "fact tokens not read; the page's facts are read whole");
                return self.durable.page_facts(q).await;
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
            self.durable.page_facts(&narrowed),
            async {
                match read_promotions {
                    Some(at) => self.durable.promotions_not_ended(at).await.map(Some),
                    None => Ok(None),
                }
            },
            self.shared.mint_fact_tokens(&unminted)
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

#[cfg(test)]
mod tests {
    use crate::traits::*;
    use crate::{MemoryStore, Promotion, Split};
    use std::sync::Arc;
    use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};

    /// Two nodes on one durable half and one shared half.
    fn nodes() -> (Split, Split, Arc<MemoryStore>, Arc<MemoryStore>) {
        let durable = Arc::new(MemoryStore::in_memory(64));
        let shared = Arc::new(MemoryStore::in_memory(64));
        let a = Split::new(durable.clone(), shared.clone());
        let b = Split::new(durable.clone(), shared.clone());
        (a, b, durable, shared)
    }

    async fn counts(node: &Split, item: ItemId, viewer: UserId) -> (ItemCounts, Option<ViewerMarks>) {
        let hydrate = [item];
        let q = PageQuery { viewer: Some(viewer), hydrate: &hydrate, ..Default::default() };
        node.page_facts(&q).await.expect("facts").hydrated.remove(0)
    }

    fn likes(n: u64) -> ItemCounts {
        ItemCounts { reactions: vec![("like".into(), n)], ..Default::default() }
    }

    #[tokio::test]
    async fn a_change_on_one_node_shows_on_the_other() {
        let (a, b, durable, _) = nodes();
        let item = ItemId(10);
        durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
        let viewer = UserId(7);
        assert_eq!(counts(&a, item, viewer).await.0, ItemCounts::default());
        assert_eq!(a.facts.copies(), 1, "the page's facts are kept");
        b.set_reaction(item, UserId(2), "like", true, &[]).await.expect("like on b");
        assert_eq!(counts(&a, item, viewer).await.0, likes(1), "a sees b's like");
        b.set_reaction(item, viewer, "like", true, &[]).await.expect("the viewer likes, on b");
        let mine = ViewerMarks { reactions: vec!["like".into()], ..Default::default() };
        assert_eq!(counts(&a, item, viewer).await, (likes(2), Some(mine.clone())));
        assert_eq!(counts(&a, item, UserId(8)).await, (likes(2), Some(ViewerMarks::default())), "another viewer");
        assert_eq!(counts(&a, item, viewer).await, (likes(2), Some(mine)), "both viewers' marks kept");
    }

    #[tokio::test]
    async fn a_copy_is_taken_only_while_its_token_stands() {
        let (a, _, durable, shared) = nodes();
        let item = ItemId(10);
        durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
        let viewer = UserId(7);
        assert_eq!(counts(&a, item, viewer).await.0, ItemCounts::default());
        // A write that bypasses the layer (which no node makes) is not
        // seen while the token stands: the page took its copy.
        durable.set_reaction(item, UserId(2), "like", true, &[]).await.expect("like, unannounced");
        assert_eq!(counts(&a, item, viewer).await.0, ItemCounts::default(), "the copy is taken");
        // A change in flight (a node that wrote and died before its end):
        // the facts are read, and not kept.
        shared.begin_fact_change(&[FactKey::Item(item)]).await.expect("begin");
        durable.set_reaction(item, UserId(3), "like", true, &[]).await.expect("like in flight");
        assert_eq!(counts(&a, item, viewer).await.0, likes(2), "read while a change is in flight");
        durable.set_reaction(item, UserId(4), "like", true, &[]).await.expect("another, in flight");
        assert_eq!(counts(&a, item, viewer).await.0, likes(3), "and not kept");
        shared.end_fact_change(&[FactKey::Item(item)]).await.expect("end");
        assert_eq!(counts(&a, item, viewer).await.0, likes(3));
    }

    #[tokio::test]
    async fn reposts_of_an_original_counted_none_are_not_asked() {
        let (a, b, durable, _) = nodes();
        let (x, y) = (ItemId(10), ItemId(11));
        for i in [x, y] {
            durable
                .create_item(Item::new(i, UserId(1), ItemKind::Post), false, Millis(i.0 as i64))
                .await
                .expect("post");
        }
        let reposters = [UserId(5)];
        let page = async |node: &Split| {
            let ids = [x, y];
            let q = PageQuery {
                originals: &ids,
                reposters: &reposters,
                viewer: Some(UserId(9)),
                hydrate: &ids,
                ..Default::default()
            };
            node.page_facts(&q).await.expect("facts").reposts
        };
        assert_eq!(page(&a).await, vec![vec![], vec![]]);
        assert_eq!(page(&a).await, vec![vec![], vec![]], "from the copies");
        let mut repost = Item::new(ItemId(12), UserId(5), ItemKind::Repost);
        repost.repost_of = Some(y);
        b.create_item(repost, false, Millis(12)).await.expect("a repost, on b");
        assert_eq!(page(&a).await, vec![vec![], vec![(UserId(5), ItemId(12))]], "the repost shows on a");
        b.update_item(ItemId(12), &ItemChange::Delete).await.expect("deleted, on b");
        assert_eq!(page(&a).await, vec![vec![], vec![]], "and its delete");
    }

    /// A promotion running from 0 on.
    fn promotion(id: u64, item: ItemId) -> Promotion {
        Promotion { id, item, every: 3, starts_at: Millis(0), ends_at: Millis(i64::MAX) }
    }

    #[tokio::test]
    async fn a_warm_page_asks_the_durable_half_nothing() {
        let (a, b, durable, _) = nodes();
        let item = ItemId(10);
        durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
        b.create_promotion(promotion(1, item)).await.expect("a promotion, on b");
        let page = async |node: &Split| {
            let hydrate = [item];
            let q = PageQuery {
                viewer: Some(UserId(7)),
                hydrate: &hydrate,
                originals: &hydrate,
                reposters: &[UserId(5)],
                relations_known: true,
                follows_known: true,
                promotions_at: Some(Millis(100)),
                ..Default::default()
            };
            let f = node.page_facts(&q).await.expect("facts");
            (f.hydrated[0].0.clone(), f.promotions.expect("asked").iter().map(|p| p.id).collect::<Vec<_>>())
        };
        assert_eq!(page(&a).await, (ItemCounts::default(), vec![1]));
        // Writes that bypass the layer (which no node makes) are not seen:
        // the page asked the durable half nothing.
        durable.set_reaction(item, UserId(2), "like", true, &[]).await.expect("like, unannounced");
        durable.create_promotion(promotion(2, item)).await.expect("a promotion, unannounced");
        assert_eq!(page(&a).await, (ItemCounts::default(), vec![1]), "all from the copies");
        b.create_promotion(promotion(3, item)).await.expect("a promotion, on b");
        // (the in-process tokens are one generation: every copy is read again)
        assert_eq!(page(&a).await.1, vec![1, 2, 3], "the promotions read again");
        b.set_reaction(item, UserId(3), "like", true, &[]).await.expect("a like, on b");
        assert_eq!(page(&a).await, (likes(2), vec![1, 2, 3]), "the counts read again");
    }

    #[tokio::test]
    async fn promotions_are_kept_from_a_time_on() {
        let (a, b, durable, _) = nodes();
        let item = ItemId(10);
        durable.create_item(Item::new(item, UserId(1), ItemKind::Post), false, Millis(10)).await.expect("post");
        let later = Promotion { id: 1, item, every: 3, starts_at: Millis(500), ends_at: Millis(900) };
        b.create_promotion(later).await.expect("a later promotion");
        let at = async |t: i64| {
            let q = PageQuery { promotions_at: Some(Millis(t)), ..Default::default() };
            a.page_facts(&q).await.expect("facts").promotions.expect("asked").len()
        };
        assert_eq!(at(100).await, 0, "not yet");
        assert_eq!(at(600).await, 1, "running, from the copy taken at 100");
        assert_eq!(at(900).await, 0, "ended");
        assert_eq!(at(50).await, 0, "before the copy's time: read again");
        assert_eq!(at(700).await, 1);
    }
}
