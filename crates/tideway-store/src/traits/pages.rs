//! What a page reads in one call, and the rules of its reads.

#[allow(unused_imports)]
use super::*;

/// What [`Graph::followees_versioned`] reads of a user at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followees {
    /// Everyone the user follows.
    pub list: Vec<UserId>,
    /// The version of the list and of `own` (`None`: the engine keeps
    /// none, and a node keeps no copy).
    pub version: Option<u64>,
    /// The user's own relations, at the same version; `None` when the
    /// engine keeps no version or the user has more of them than it reads
    /// at once (a page's call then reads them, as without a copy).
    pub own: Option<OwnRelations>,
}

/// A user's own side of the relations a home page asks of every author and
/// reposter it shows, and whether the page must look for insertions: what
/// a node keeps beside its copy of the user's followee list, under the
/// same version ([`Graph::followees_versioned`]), so that a page's call
/// need not read them ([`PageQuery::relations_known`]). Every change of
/// them moves the version: a block or unblock both users', a mute or
/// unmute the muter's, an insertion its owner's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnRelations {
    /// Whom the user blocks, by id.
    pub blocks: Vec<UserId>,
    /// Who blocks the user, by id.
    pub blocked_by: Vec<UserId>,
    /// Whom the user mutes, by id.
    pub mutes: Vec<UserId>,
    /// Anything was ever inserted into the user's home.
    pub inserts: bool,
}

impl OwnRelations {
    /// The most users of each list an engine reads into a copy (a user with
    /// more keeps none: their pages read their relations each time).
    pub const MAX_EACH: usize = 1000;

    /// The user's relation to `other` as [`Graph::relations_unfollowed`]
    /// answers it (follows false: the page walks the followee list).
    pub fn relation(&self, other: UserId) -> Relation {
        let has = |list: &[UserId]| list.binary_search(&other).is_ok();
        Relation {
            following: false,
            followed_by: false,
            blocking: has(&self.blocks),
            blocked_by: has(&self.blocked_by),
            muting: has(&self.mutes),
        }
    }

    /// Puts each list in id order (as [`OwnRelations::relation`] reads
    /// them), without repeats.
    pub fn sorted(mut self) -> Self {
        for list in [&mut self.blocks, &mut self.blocked_by, &mut self.mutes] {
            list.sort_unstable();
            list.dedup();
        }
        self
    }
}

/// What a page needs to know of a batch of records beside the records
/// themselves (the entry rule's reads, the counts and marks read ahead),
/// asked at once: see [`Pages::page_facts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PageQuery<'a> {
    /// The originals of the batch: their reposts by `reposters`, and with
    /// `inserts_of` that user's insertions of them.
    pub originals: &'a [ItemId],
    pub reposters: &'a [UserId],
    pub inserts_of: Option<UserId>,
    /// The viewer: `related` (and the reposters found) are read as
    /// relations of it, `hydrate` with its marks (none without a viewer).
    pub viewer: Option<UserId>,
    pub related: &'a [UserId],
    /// The caller knows whom the viewer follows (a home page walks `F(u)`):
    /// the relations then need not say `following` or `followed_by`, and
    /// say `false` there (blocks and mutes as always).
    pub follows_known: bool,
    /// The caller holds the viewer's [`OwnRelations`] (checked by this
    /// page's `followees_of`): the engine reads no relations, and
    /// [`PageFacts::relations`] is empty.
    pub relations_known: bool,
    /// Items whose counts (and the viewer's marks) are read.
    pub hydrate: &'a [ItemId],
    /// Item records a node holds a copy of, with the `rev` of its copy:
    /// each one whose stored `rev` is another (it was patched or deleted
    /// since the copy was taken) or that is unknown is named in
    /// [`PageFacts::stale`].
    pub held: &'a [(ItemId, u32)],
    /// Every held copy was current at this item epoch of the store
    /// ([`PageFacts::items_epoch`], or later): an engine that keeps the
    /// epoch checks them only if it moved since (a patch or delete moves
    /// it in its own transaction, so a copy current then is current still).
    /// `None`: check them.
    pub held_at: Option<u64>,
    /// With a user: [`PageFacts::followees_version`] is the version of that
    /// user's followee set ([`Graph::followees_version`]), so a node's copy
    /// of the list is checked by the page's one call.
    pub followees_of: Option<UserId>,
    /// With a time: [`PageFacts::promotions`] are the promotions running
    /// then ([`Items::active_promotions`]).
    pub promotions_at: Option<Millis>,
}

impl PageQuery<'_> {
    /// Whether the query asks nothing an engine reads (no list, no
    /// version, no promotions): its answer is the empty one.
    pub fn asks_nothing(&self) -> bool {
        self.originals.is_empty()
            && self.related.is_empty()
            && self.hydrate.is_empty()
            && self.held.is_empty()
            && self.followees_of.is_none()
            && self.promotions_at.is_none()
    }
}

/// The answers to a [`PageQuery`], each in the order of its list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageFacts {
    /// Per original, its non-deleted reposts by the reposters (id order).
    pub reposts: Vec<Vec<(UserId, ItemId)>>,
    /// Per original, the earliest key of its insertion (empty without
    /// `inserts_of`).
    pub inserted: Vec<Option<Key>>,
    /// With a viewer, its relation to each related user, in order, then to
    /// each reposter found (in `reposts`) that is neither related nor the
    /// viewer, by id: the entry rule asks of both. Empty without a viewer.
    pub relations: Vec<(UserId, Relation)>,
    pub hydrated: Vec<(ItemCounts, Option<ViewerMarks>)>,
    /// The held records that are not current, in the order held.
    pub stale: Vec<ItemId>,
    /// With `followees_of`, the version of that user's followee set (`None`
    /// also when the engine keeps none).
    pub followees_version: Option<u64>,
    /// With `promotions_at`, the promotions running then (`None` without).
    pub promotions: Option<Vec<Promotion>>,
    /// The store's item epoch as of this answer, where the engine keeps one
    /// (SQL; in-process engines hold no copies and keep none): a count of
    /// every patch and delete, moved in the change's own transaction. The
    /// held copies not named stale are current at it.
    pub items_epoch: Option<u64>,
}

/// A page's reads in one call. The provided method asks the other traits,
/// side by side (what an engine in process answers at once); an engine
/// behind a round trip answers all of it in one (one SQL statement).
#[async_trait]
pub trait Pages: Items + Graph {
    /// Everything `q` asks, as of one moment of the store (on SQL: one
    /// statement's snapshot, so a held record found current is current
    /// with the counts read beside it).
    async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
        facts_by_parts(self, q).await
    }
}

/// [`Pages::page_facts`] from the other traits' methods, side by side.
pub async fn facts_by_parts<P: Items + Graph + ?Sized>(p: &P, q: &PageQuery<'_>) -> Result<PageFacts> {
    // (without the follows when the caller knows them)
    let relations_of = async |v: UserId, others: &[UserId]| {
        if q.follows_known { p.relations_unfollowed(v, others).await } else { p.relations(v, others).await }
    };
    let held_ids: Vec<Key> = q.held.iter().map(|(i, _)| i.0).collect();
    let (reposts, inserted, relations, hydrated, held, followees_version, promotions) = tokio::try_join!(
        async {
            if q.originals.is_empty() || q.reposters.is_empty() {
                Ok(vec![Vec::new(); q.originals.len()])
            } else {
                p.reposts_by(q.originals, q.reposters).await
            }
        },
        async {
            match q.inserts_of {
                Some(u) if !q.originals.is_empty() => p.inserted_keys(u, q.originals).await,
                _ => Ok(vec![]),
            }
        },
        async {
            match q.viewer {
                Some(v) if !q.related.is_empty() && !q.relations_known => relations_of(v, q.related).await,
                _ => Ok(vec![]),
            }
        },
        async { if q.hydrate.is_empty() { Ok(vec![]) } else { p.hydration(q.hydrate, q.viewer).await } },
        async { if held_ids.is_empty() { Ok(vec![]) } else { p.records(&held_ids).await } },
        async {
            match q.followees_of {
                Some(u) => p.followees_version(u).await,
                None => Ok(None),
            }
        },
        async {
            match q.promotions_at {
                Some(now) => p.active_promotions(now).await.map(Some),
                None => Ok(None),
            }
        },
    )?;
    let stale = q
        .held
        .iter()
        .zip(held)
        .filter(|((_, rev), rec)| !matches!(rec, Some(Record::Item(i)) if i.rev == *rev))
        .map(|((id, _), _)| *id)
        .collect();
    let mut relations: Vec<(UserId, Relation)> = q.related.iter().copied().zip(relations).collect();
    if let Some(v) = q.viewer.filter(|_| !q.relations_known) {
        let extra = reposters_beyond(&reposts, q.related, v);
        if !extra.is_empty() {
            relations.extend(extra.iter().copied().zip(relations_of(v, &extra).await?));
        }
    }
    Ok(PageFacts { reposts, inserted, relations, hydrated, stale, followees_version, promotions, items_epoch: None })
}

/// Of `authors`, those whose key of [`HotAuthors::unpushed_keys`] is above
/// `floor`, in order: what [`HotAuthors::unpushed_above`] answers.
pub fn unpushed_above_floor(authors: &[UserId], keys: &[Option<Key>], floor: Key) -> Vec<UserId> {
    authors.iter().zip(keys).filter(|(_, k)| k.is_some_and(|k| k > floor)).map(|(a, _)| *a).collect()
}

/// The reposters in `reposts` that are neither in `related` nor `viewer`,
/// by id (the relations [`PageFacts`] adds after the related users').
pub fn reposters_beyond(reposts: &[Vec<(UserId, ItemId)>], related: &[UserId], viewer: UserId) -> Vec<UserId> {
    let mut extra: Vec<UserId> =
        reposts.iter().flatten().map(|(u, _)| *u).filter(|u| *u != viewer && !related.contains(u)).collect();
    extra.sort_unstable();
    extra.dedup();
    extra
}
