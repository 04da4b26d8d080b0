//! A page's walk: batches of keys judged into entries, what was told, and the asks a page makes of storage at once.

use super::*;

/// What an evaluator knows about the records of a batch.
pub(super) struct Batch {
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
pub(super) async fn read_records(
    backend: &dyn Backend,
    cache: Option<&RecordCopies>,
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

pub(super) async fn load_batch(
    backend: &dyn Backend,
    cache: Option<&RecordCopies>,
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
pub(super) async fn checked<'c, F, Fut>(cache: Option<&'c RecordCopies>, run: F) -> Result<Vec<Found>>
where
    F: Fn(Option<&'c RecordCopies>) -> Fut,
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
    pub(super) fn early(&self, n: usize) -> Vec<ItemId> {
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
    pub(super) fn original_items(&self) -> impl Iterator<Item = &Arc<Item>> {
        self.items.iter().flatten()
    }
}

/// Counts and marks of `ids` read ahead (nothing when `ids` is empty).
pub(super) async fn hydrate_ahead(
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

pub(super) async fn relations_of(
    backend: &dyn Backend,
    viewer: UserId,
    users: HashSet<UserId>,
) -> Result<HashMap<UserId, Relation>> {
    let users: Vec<UserId> = users.into_iter().collect();
    let rels = backend.relations(viewer, &users).await?;
    Ok(users.into_iter().zip(rels).collect())
}

/// What the page's one call tells of a batch, as the entry rule reads it.
pub(super) struct Told {
    reposts: Vec<Vec<(UserId, ItemId)>>,
    inserted: Vec<Option<Key>>,
    rels: HashMap<UserId, Relation>,
    hydrated: HashMap<ItemId, Hydrated>,
}

impl Told {
    /// Asks `q` in one call (one statement on SQL); `Err` names the held
    /// copies that were stale.
    pub(super) async fn ask(
        backend: &dyn Backend,
        cache: Option<&RecordCopies>,
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

    pub(super) fn rel(&self, x: UserId) -> Relation {
        self.rels.get(&x).copied().unwrap_or_default()
    }
}

impl Batch {
    /// The entries of `keys` by `rule` (given an original and its index in
    /// `originals`): each at the key the rule puts it.
    pub(super) fn entries(
        &self,
        keys: &[Key],
        told: &Told,
        rule: impl Fn(&Item, usize) -> Option<Entry>,
    ) -> Vec<Found> {
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

    pub(super) fn answered(&self) -> std::sync::MutexGuard<'_, Option<Asked>> {
        self.answered.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `q` asking what is not answered yet.
    pub(super) fn onto<'q>(&self, q: PageQuery<'q>) -> PageQuery<'q> {
        if self.answered().is_some() {
            return q;
        }
        PageQuery { followees_of: self.followees_of, promotions_at: self.promotions_at, ..q }
    }

    /// Keeps the answer of a call that asked (`q`, from [`PageAsks::onto`]).
    pub(super) fn keep(&self, q: &PageQuery<'_>, f: &PageFacts) {
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
    cache: Option<&RecordCopies>,
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
    cache: Option<&RecordCopies>,
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
