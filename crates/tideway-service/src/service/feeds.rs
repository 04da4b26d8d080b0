//! Feed pages: home (inbox above the floor, outboxes below), profile,
//! promotions woven in, direct home insertions, inbox rebuilds.

use super::ServiceOptions;
use super::effects::Effects;
use super::node::Node;
use super::reader::ItemReader;
use crate::error::{Result, ServiceError};
use crate::feed::{Evaluator, Found, HomeSource, Hydrated, PageAsks, PullSource, batch_size, walk};
use crate::touches::RecentTouches;
use crate::view::*;
use std::collections::HashMap;
use std::sync::Arc;
use tideway_core::cursor::{Cursor, CursorEncoder, FeedScope};
use tideway_core::limits::page_limit;
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::promote::{Slot, weave};
use tideway_core::{Item, ItemId, Key, Relation, UserId};
use tideway_store::NodeCopies;
use tideway_store::copies::{FolloweeCopy, RecordCopies};
use tideway_store::{Backend, InboxRead, Promotion};

/// A running promotion the viewer may see, its item, and the item's counts
/// and marks when they were read ahead.
pub(super) type Promoted = (Promotion, Arc<Item>, Option<Hydrated>);

/// The feeds' pages: home (inbox above the floor, outboxes below, with
/// promotions woven in), profile, and the posting feeds (`postings.rs`);
/// direct home insertions and inbox rebuilds. Holds the backend, the node,
/// the item reader, the after-effects of writes, and this node's copies
/// (item records, followee lists, recent activity marks).
pub struct FeedsService {
    pub(super) backend: Arc<dyn Backend>,
    node: Arc<Node>,
    pub(super) reader: Arc<ItemReader>,
    effects: Arc<Effects>,
    /// This node's copies (engines a round trip away), which `backend`
    /// stands behind: a page takes records and followee lists from them
    /// and has its one call check them.
    copies: Option<NodeCopies>,
    /// Whom this node marked active lately (`touch_every_ms` > 0).
    touches: Option<RecentTouches>,
    /// Whether pages read ahead ([`ServiceOptions::read_ahead`]).
    pub(super) read_ahead: bool,
    max_len: usize,
}

impl FeedsService {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        node: Arc<Node>,
        reader: Arc<ItemReader>,
        effects: Arc<Effects>,
        copies: Option<NodeCopies>,
        opts: &ServiceOptions,
    ) -> Self {
        Self {
            backend,
            node,
            reader,
            effects,
            copies,
            touches: (opts.touch_every_ms > 0).then(|| RecentTouches::new(opts.touch_every_ms)),
            read_ahead: opts.read_ahead,
            max_len: opts.max_len,
        }
    }

    fn record_copies(&self) -> Option<&RecordCopies> {
        self.copies.as_ref().map(NodeCopies::records)
    }

    fn followee_copies(&self) -> Option<&tideway_store::copies::FolloweeCopies> {
        self.copies.as_ref().map(NodeCopies::followees)
    }

    /// Turns walked entries into a page: positions, cursors, promotions (home
    /// only: `promos` are the promoted items the viewer may see), hydration.
    pub(super) async fn finish_page(
        &self,
        spec: &PageSpec,
        (mut found, more): (Vec<Found>, bool),
        scope: &FeedScope<'_>,
        viewer: Option<UserId>,
        promos: &[Promoted],
    ) -> Result<Page> {
        let encoder = CursorEncoder::new(scope);
        let enc = |k: Key, index: i64| encoder.encode(Cursor { key: k, aux: index as u64 });
        if spec.dir == Direction::Newer {
            found.reverse();
        }
        // Organic positions from the top of the feed, newest first.
        let m = found.len() as i64;
        let index_at = |p: usize| match spec.dir {
            Direction::Older => spec.index + 1 + p as i64,
            Direction::Newer => spec.index - (m - p as i64),
        };
        // Promotions woven in (tideway_core::promote: positions only).
        let positions: Vec<i64> = (0..found.len()).map(index_at).collect();
        let every: Vec<u32> = promos.iter().map(|(p, ..)| p.every).collect();
        let woven = weave(&positions, &every, spec.limit, spec.dir);
        let cut = woven.cut;
        let mut found: Vec<Option<Found>> = found.into_iter().map(Some).collect();
        let rows: Vec<(Option<Found>, usize, i64)> = woven
            .rows
            .into_iter()
            .map(|(slot, k)| match slot {
                Slot::Organic(p) => (found[p].take(), p, k),
                Slot::Promoted(i) => (None, i, k),
            })
            .collect();
        let organic: Vec<(Key, i64)> = rows.iter().filter_map(|r| r.0.as_ref().map(|f| (f.entry.key, r.2))).collect();
        let (next, prev) = match spec.dir {
            Direction::Older => {
                let next = if more || cut { organic.last().map(|&(k, i)| enc(k, i)) } else { None };
                let prev = match (organic.first(), spec.cursor) {
                    (Some(&(k, i)), _) => Some(enc(k, i)),
                    (None, Some(c)) => Some(enc(c.saturating_sub(1), spec.index)),
                    (None, None) => None,
                };
                (next, prev)
            }
            Direction::Newer => {
                let c = spec.cursor.unwrap_or(0);
                let prev = Some(organic.first().map_or_else(|| enc(c, spec.index), |&(k, i)| enc(k, i)));
                let next =
                    Some(organic.last().map_or_else(|| enc(c.saturating_add(1), spec.index), |&(k, i)| enc(k, i)));
                (next, prev)
            }
        };
        // One hydration call for the organic items and the promoted ones
        // (none when every one was read ahead).
        let (items, known): (Vec<Arc<Item>>, Vec<Option<Hydrated>>) = rows
            .iter()
            .map(|(f, i, _)| match f {
                Some(f) => (f.item.clone(), f.hydrated.clone()),
                None => (promos[*i].1.clone(), promos[*i].2.clone()),
            })
            .unzip();
        let views = self.reader.hydrate_known(items, known, viewer).await?;
        // A promoted entry takes the cursor of the organic one before it.
        let mut entries: Vec<EntryView> = Vec::with_capacity(rows.len());
        for ((f, _, k), item) in rows.into_iter().zip(views) {
            entries.push(match f {
                Some(f) => EntryView {
                    key: f.entry.key,
                    cursor: enc(f.entry.key, k),
                    reason: f.entry.reason.into(),
                    item,
                    sources: f.entry.sources,
                },
                None => {
                    let (key, cursor) = match entries.last() {
                        Some(before) => (before.key, before.cursor.clone()),
                        None => (spec.cursor.unwrap_or(0), spec.cursor.map(|c| enc(c, spec.index)).unwrap_or_default()),
                    };
                    EntryView { key, cursor, reason: Reason::Promoted, item, sources: vec![] }
                }
            });
        }
        Ok(Page { entries, next_cursor: next, prev_cursor: prev })
    }

    /// Of the running promotions `promos`, those whose items `user` may
    /// see in home (with their counts and marks when the service reads
    /// ahead).
    pub(super) async fn promotions_for(&self, user: UserId, promos: Vec<Promotion>) -> Result<Vec<Promoted>> {
        if promos.is_empty() {
            return Ok(vec![]);
        }
        let ids: Vec<ItemId> = promos.iter().map(|p| p.item).collect();
        let items = self.reader.live_items(&ids).await?;
        let authors: Vec<UserId> = items.iter().flatten().map(|i| i.author).collect();
        let rels: HashMap<UserId, Relation> =
            authors.iter().copied().zip(self.backend.relations(user, &authors).await?).collect();
        let shown: Vec<(Promotion, Arc<Item>)> = promos
            .into_iter()
            .zip(items)
            .filter_map(|(p, i)| i.map(|i| (p, i)))
            .filter(|(_, i)| {
                let r = if i.author == user {
                    Relation::default()
                } else {
                    rels.get(&i.author).copied().unwrap_or_default()
                };
                i.visible_to(Some(user), r.following) && !r.hidden(true)
            })
            .collect();
        let hydrated = if self.read_ahead && !shown.is_empty() {
            let ids: Vec<ItemId> = shown.iter().map(|(_, i)| i.id).collect();
            self.backend.hydration(&ids, Some(user)).await?.into_iter().map(Some).collect()
        } else {
            vec![None; shown.len()]
        };
        Ok(shown.into_iter().zip(hydrated).map(|((p, i), h)| (p, i, h)).collect())
    }

    /// `F(u)` as a home page walks it (the users `u` follows, and `u`) with
    /// `u`'s own relations where the engine reads them with it, and whether
    /// it is this node's copy (whose version the page has checked), with
    /// the version when it was read from an engine that keeps one. `held`:
    /// this node's copy, as the page looked it up. Own relations read now
    /// are used as they are (read after the page began; a change
    /// acknowledged before it is in them).
    async fn home_sources(
        &self,
        user: UserId,
        held: Option<&FolloweeCopy>,
    ) -> tideway_store::Result<(FolloweeCopy, Copied)> {
        if let Some(copy) = held {
            return Ok((copy.clone(), Copied::Held(copy.version)));
        }
        let read = self.backend.followees_versioned(user).await?;
        let copy = FolloweeCopy {
            version: read.version.unwrap_or(0),
            list: with_self(read.list, user).into(),
            own: read.own.map(Arc::new),
        };
        if let (Some(c), Some(_)) = (self.followee_copies(), read.version) {
            c.put(user, copy.clone());
        }
        Ok((copy, Copied::Read))
    }

    /// Marks `user` active, unless this node did lately (`touch_every_ms`).
    async fn touch_reader(&self, user: UserId) -> tideway_store::Result<()> {
        let now = self.node.shared_now();
        if let Some(t) = &self.touches
            && t.recent(user, now.0)
        {
            return Ok(());
        }
        self.backend.touch(user, now).await?;
        if let Some(t) = &self.touches {
            t.note(user, now.0);
        }
        Ok(())
    }

    /// `F(u)`: the users `u` follows, and `u`, by id.
    pub(super) async fn sources_of(&self, user: UserId) -> Result<Vec<UserId>> {
        Ok(with_self(self.backend.followees(user).await?, user))
    }

    /// Makes sure `user` has an inbox, rebuilding it from the outboxes of
    /// `F(user)` (at most [`REBUILD_KEYS`] keys of work) when it is absent.
    /// Returns the inbox's floor.
    pub(super) async fn ensure_inbox(&self, user: UserId, f_list: &[UserId]) -> Result<Key> {
        if let Some(floor) = self.backend.inbox_floor(user).await? {
            return Ok(floor);
        }
        self.backend.begin_rebuild(user).await?;
        let n = self.max_len.min(REBUILD_KEYS);
        // Side by side: on the embedded store each may read the disk.
        let (outbox, inserts) = tokio::join!(
            self.backend.outbox_merge(f_list, KeyRange::ALL, Direction::Older, n),
            self.backend.inserts(user, KeyRange::ALL, Direction::Older, n)
        );
        let (mut outbox, mut inserts) = (outbox?, inserts?);
        outbox.reverse();
        inserts.reverse();
        let keys = merge_sorted(&[&outbox, &inserts], KeyRange::ALL, Direction::Older, n);
        // Complete above the floor: everything, unless the cap cut it short.
        let floor = if keys.len() >= n { keys.last().map_or(0, |k| k.saturating_sub(1)) } else { 0 };
        self.backend.finish_rebuild(user, &keys, floor).await?;
        metrics::counter!("tideway_inbox_rebuilds_total").increment(1);
        // A follow stored after `f_list` was read found this inbox absent or
        // building and left it to the rebuild, which did not read that
        // followee's outbox: those items would be missing above the floor
        // for good (issue 64). So the list is read again now the inbox is
        // ready (a follow stored later backfills it itself), and the
        // followees it gained are backfilled here.
        let now = self.sources_of(user).await?;
        let gained: Vec<UserId> = now.into_iter().filter(|u| f_list.binary_search(u).is_err()).collect();
        if !gained.is_empty() {
            backfill_inbox(self.backend.as_ref(), user, &gained, self.max_len).await?;
        }
        // Deliveries during the rebuild may have raised it.
        Ok(self.backend.inbox_floor(user).await?.unwrap_or(floor))
    }

    /// Makes sure `user`'s inbox exists (`first`: what the page's first
    /// read of it found, run beside the other first reads of the page) and
    /// returns the followed authors whose unpushed items are above its
    /// floor (from `marks`, the hot authors' keys read beside the inbox,
    /// when the page had them), and the first batch's inbox read when that
    /// was it.
    async fn prepare_inbox(
        &self,
        user: UserId,
        f_list: &[UserId],
        touched: tideway_store::Result<()>,
        first: tideway_store::Result<FirstInbox>,
        marks: Option<tideway_store::Result<Vec<Option<Key>>>>,
    ) -> Result<(Vec<UserId>, Option<tideway_store::Result<Option<InboxRead>>>)> {
        touched?;
        let above = async |floor: Key| -> Result<Vec<UserId>> {
            Ok(match marks {
                Some(keys) => tideway_store::unpushed_above_floor(f_list, &keys?, floor),
                None => self.backend.unpushed_above(f_list, floor).await?,
            })
        };
        match first? {
            FirstInbox::Read(Some(read)) => Ok((above(read.floor).await?, Some(Ok(Some(read))))),
            FirstInbox::Floor(Some(floor)) => Ok((above(floor).await?, None)),
            FirstInbox::Read(None) | FirstInbox::Floor(None) => {
                let floor = self.ensure_inbox(user, f_list).await?;
                Ok((above(floor).await?, None))
            }
        }
    }

    /// A page of `home(user).await`. Reading marks the user active.
    pub async fn home(&self, user: UserId, req: &PageRequest) -> Result<Page> {
        self.home_read(user, req, HomeRead::Page).await
    }

    /// A page of `home(user)` pulled from the outboxes of whom they follow
    /// (and their insertions): the definition itself, with no inbox and so
    /// no delivery lag; no promotions woven in, no activity mark. What the
    /// home stream reads near the top, where fan-out may not have delivered
    /// yet. The same path as [`FeedsService::home`], on this node's copy of
    /// the followee list, checked by the page's call.
    pub(crate) async fn home_pulled(&self, user: UserId, req: &PageRequest) -> Result<Page> {
        self.home_read(user, req, HomeRead::Pulled).await
    }

    async fn home_read(&self, user: UserId, req: &PageRequest, read: HomeRead) -> Result<Page> {
        let scope = FeedScope::Home(user.0);
        let spec = page_spec(req, &scope)?;
        // A page walked on this node's copy of the followee list that the
        // page's call found moved is walked again on the list read anew.
        loop {
            if let Some(page) = self.home_once(user, &spec, &scope, read).await? {
                return Ok(page);
            }
        }
    }

    /// One walk of a home page; `None` when it walked a copy of the
    /// followee list that is no longer current (forgotten, then).
    async fn home_once(
        &self,
        user: UserId,
        spec: &PageSpec,
        scope: &FeedScope<'_>,
        read: HomeRead,
    ) -> Result<Option<Page>> {
        let held = self.followee_copies().and_then(|c| c.get(user));
        let first_n = batch_size(spec.limit + 1, 0, self.read_ahead);
        let (FolloweeCopy { list: f_list, own, .. }, copied, inbox) = match read {
            HomeRead::Pulled => {
                let (copy, copied) = self.home_sources(user, held.as_ref()).await?;
                (copy, copied, None)
            }
            HomeRead::Page => match self.home_inbox(user, spec, held.as_ref(), first_n).await? {
                Some(read) => read,
                None => return Ok(None),
            },
        };
        let backend = self.backend.as_ref();
        let mut source = match inbox {
            Some((ref pulled, ahead)) => {
                let source = HomeSource::new(backend, user, &f_list, pulled, spec.dir, spec.cursor);
                match ahead {
                    Some(read) => source.read_ahead(first_n, read),
                    None => source,
                }
            }
            None => HomeSource::pull_only(backend, user, &f_list, spec.dir, spec.cursor),
        };
        // The page's call also checks the copy of the list and reads the
        // running promotions (no call of their own).
        let held = match copied {
            Copied::Held(_) => Some(user),
            Copied::Read => None,
        };
        let promotions_at = (read == HomeRead::Page).then(|| self.node.clock.now());
        let asks = (held.is_some() || promotions_at.is_some()).then(|| PageAsks::new(held, promotions_at));
        let eval = Evaluator::Home {
            backend,
            cache: self.record_copies(),
            user,
            f_list: &f_list,
            own: own.as_deref(),
            read_ahead: self.read_ahead,
            asks: asks.as_ref(),
        };
        let walked = walk(&mut source, &eval, spec.limit).await?;
        let asked = match &asks {
            Some(asks) => asks.answer(backend).await?,
            None => Default::default(),
        };
        if let Copied::Held(version) = copied
            && asked.followees_version != Some(version)
        {
            if let Some(c) = self.followee_copies() {
                c.forget(user);
            }
            metrics::counter!("tideway_followee_copies_stale_total").increment(1);
            return Ok(None);
        }
        let promos = self.promotions_for(user, asked.promotions).await?;
        Ok(Some(self.finish_page(spec, walked, scope, Some(user), &promos).await?))
    }

    /// A home page's first reads and its inbox made ready: `F(u)` (this
    /// node's copy, or read), and the authors whose unpushed items are above
    /// the inbox's floor with the first batch's read (`None` inside when the
    /// inbox cannot be read: the page is pulled). `None` when the inbox
    /// must be rebuilt while the page holds a copy of the list (the page
    /// begins again on the list read anew).
    async fn home_inbox(
        &self,
        user: UserId,
        spec: &PageSpec,
        held: Option<&FolloweeCopy>,
        first_n: usize,
    ) -> Result<Option<HomeInbox>> {
        // Three independent first reads at once: on remote engines each is a
        // round trip (the followees none when this node holds a copy; the
        // activity mark none when this node made it lately). An older-ward
        // page's first inbox read is one of them: it carries the floor (one
        // read of the inbox, not two).
        let first = (spec.dir == Direction::Older).then(|| HomeSource::first_read(spec.cursor, first_n));
        let inbox = async {
            match first {
                Some((range, n)) => {
                    self.backend.read_inbox(user, range, Direction::Older, n).await.map(FirstInbox::Read)
                }
                None => self.backend.inbox_floor(user).await.map(FirstInbox::Floor),
            }
        };
        // With this node's copy of the list, F(u) is known before any read:
        // the hot authors' marks are read beside the inbox, not after it
        // (filtered by its floor here), one round trip fewer.
        let marks = async {
            match held {
                Some(copy) => Some(self.backend.unpushed_keys(&copy.list).await),
                None => None,
            }
        };
        let (sources, touched, first, marks) =
            tokio::join!(self.home_sources(user, held), self.touch_reader(user), inbox, marks);
        let (copy, copied) = sources?;
        // An absent inbox is rebuilt from the outboxes of the list: a write,
        // which a copy the page's call later finds moved could not undo.
        // Rebuilds take the list as it is read now.
        if let Copied::Held(_) = copied
            && matches!(first, Ok(FirstInbox::Read(None) | FirstInbox::Floor(None)))
        {
            if let Some(c) = self.followee_copies() {
                c.forget(user);
            }
            return Ok(None);
        }
        // Inboxes, activity and hot-author marks are shared state that may
        // be unreachable (a Redis outage): the page is then pulled from the
        // outboxes, exactly as defined, only slower.
        let pulled = match self.prepare_inbox(user, &copy.list, touched, first, marks).await {
            Ok(pulled) => Some(pulled),
            Err(e) => {
                tracing::warn!(user = user.0, error = %e, "inboxes unavailable: pulling the home page");
                metrics::counter!("tideway_home_pulled_on_error_total").increment(1);
                None
            }
        };
        Ok(Some((copy, copied, pulled)))
    }

    /// The entries of `home(user)` above `after` (pulled, as
    /// [`FeedsService::home_pulled`] reads them), newest first, each exactly
    /// as the first page of the home shows it now: its cursor carries its
    /// organic rank from the top (1 = the top), as a page read from the top
    /// gives it, not a rank counted from `after`. What the home stream
    /// sends as `entry` events. Reads up to the top, page after page.
    pub(crate) async fn home_above(&self, user: UserId, after: &str) -> Result<Vec<EntryView>> {
        let mut pages: Vec<Vec<EntryView>> = Vec::new();
        let mut from = after.to_owned();
        loop {
            let req = PageRequest { limit: Some(HOME_ABOVE_PAGE), after: Some(from.clone()), ..PageRequest::default() };
            let page = self.home_pulled(user, &req).await?;
            let full = page.entries.len() >= HOME_ABOVE_PAGE;
            let newest = page.entries.first().map(|e| e.cursor.clone());
            pages.push(page.entries);
            match newest {
                Some(c) if full => from = c,
                _ => break,
            }
        }
        // Newest first: the last page read is the top.
        let scope = FeedScope::Home(user.0);
        let encoder = CursorEncoder::new(&scope);
        let mut out: Vec<EntryView> = pages.into_iter().rev().flatten().collect();
        for (rank, e) in out.iter_mut().enumerate() {
            e.cursor = encoder.encode(Cursor { key: e.key, aux: rank as u64 + 1 });
        }
        Ok(out)
    }

    /// A page of `profile(author).await` seen by `viewer`.
    pub async fn profile(&self, author: UserId, viewer: Option<UserId>, req: &PageRequest) -> Result<Page> {
        let scope = FeedScope::Profile(author.0);
        let spec = page_spec(req, &scope)?;
        if let Some(v) = viewer
            && self.reader.blocked_between(v, author).await?
        {
            return self.finish_page(&spec, (vec![], false), &scope, viewer, &[]).await;
        }
        let backend = self.backend.as_ref();
        let authors = [author];
        let mut source =
            PullSource { backend, authors: &authors, inserts_of: None, dir: spec.dir, bound: spec.cursor, stop: None };
        let eval =
            Evaluator::Profile { backend, cache: self.record_copies(), author, viewer, read_ahead: self.read_ahead };
        let walked = walk(&mut source, &eval, spec.limit).await?;
        self.finish_page(&spec, walked, &scope, viewer, &[]).await
    }

    /// Inserts an item directly into `user`'s home (a card, a system message)
    /// now: the entry, with its cursor. The item must be one `user` may see (visible to them, no block
    /// between them and its author): anything else answers 404, exactly as
    /// an unknown id, so an insert never reveals an item its owner could not
    /// read. An item of an author `user` mutes is accepted and stays hidden
    /// from the home while the mute lasts, like the author's other items.
    pub async fn insert_home(&self, user: UserId, item: ItemId) -> Result<EntryView> {
        let it = self.reader.live_item(item).await?;
        let access = self.reader.access(user, &it).await?;
        if !access.visible || access.blocked {
            return Err(ServiceError::NotFound(format!("item {item} does not exist or was deleted")));
        }
        let now = self.node.write_now()?;
        let key = self.node.ids.next(now)?;
        // The inbox first: if the durable write fails, the inbox holds a
        // key without a record, which pages skip. If the shared half is
        // away, the insert goes on without it (`tideway_store::trust`).
        let insert = self.backend.insert_home(user, item, key);
        if super::shared_away(self.backend.deliver(key, &[user]).await.map(|_| ()))? {
            tideway_store::trust::without_shared(self.backend.as_ref(), insert).await?;
        } else {
            insert.await?;
        }
        self.effects.signal(vec![tideway_store::Signal::Home(user)]).await;
        let view = self.reader.hydrate_one(it, Some(user)).await?;
        let cursor = Cursor::new(key).encode(&FeedScope::Home(user.0));
        Ok(EntryView { key, cursor, reason: Reason::Inserted, item: view, sources: vec![] })
    }
}

/// The parsed direction and bound of a page request.
pub(super) struct PageSpec {
    pub(super) limit: usize,
    pub(super) dir: Direction,
    pub(super) cursor: Option<Key>,
    /// The organic position (1 = top) of the cursor's entry, as the cursor
    /// carries it: promotions are placed "after every N organic entries,
    /// counted from the top" across pages. 0 without a cursor.
    pub(super) index: i64,
}

/// A cursor's key and organic position.
fn cursor_of(s: &str, scope: &FeedScope<'_>) -> Result<(Option<Key>, i64)> {
    let c = Cursor::decode(s, scope)?;
    Ok((Some(c.key), c.aux as i64))
}

pub(super) fn page_spec(req: &PageRequest, scope: &FeedScope<'_>) -> Result<PageSpec> {
    let limit = page_limit(req.limit)?;
    let (dir, (cursor, index)) = match (&req.before, &req.after) {
        (Some(_), Some(_)) => return Err(ServiceError::invalid("before", "give before or after, not both")),
        (Some(b), None) => (Direction::Older, cursor_of(b, scope)?),
        (None, Some(a)) => (Direction::Newer, cursor_of(a, scope)?),
        (None, None) => (Direction::Older, (None, 0)),
    };
    Ok(PageSpec { limit, dir, cursor, index })
}

/// The most keys a rebuild puts in an inbox (at most `timeline.max_len`):
/// a first page needs a few dozen, and the fewer, the fewer followees'
/// outboxes a lazy store reads (`Store::outbox_merge` leaves out those
/// that cannot place). The inbox is complete above the floor this sets; a
/// page below it is pulled from the outboxes, and fan-out fills it from
/// the top up to the cap.
pub(crate) const REBUILD_KEYS: usize = 100;

/// The page size [`FeedsService::home_above`] reads with.
const HOME_ABOVE_PAGE: usize = 100;

/// `F(u)` from the users `u` follows: with `u`, by id (a page asks whether
/// someone is in it by a binary search; engines list followees in any order).
fn with_self(mut f: Vec<UserId>, user: UserId) -> Vec<UserId> {
    // (in order already as the in-process engines list them: no sort per page)
    if !f.is_sorted() {
        f.sort_unstable();
        f.dedup();
    }
    if let Err(at) = f.binary_search(&user) {
        f.insert(at, user);
    }
    f
}

/// How a home page is read: as the feed's pages are (the inbox above its
/// floor, the outboxes below, promotions woven in; reading marks the
/// reader active), or pulled from the outboxes alone (no delivery lag, no
/// promotions, no mark: what the home stream reads).
#[derive(Clone, Copy, PartialEq, Eq)]
enum HomeRead {
    Page,
    Pulled,
}

/// A home page's `F(u)` and where it came from, and its ready inbox: the
/// authors whose unpushed items are above the floor, with the first
/// batch's read (`None`: the inbox cannot be read, the page is pulled).
type HomeInbox = (FolloweeCopy, Copied, Option<(Vec<UserId>, Option<tideway_store::Result<Option<InboxRead>>>)>);

/// Whether a home page's followee list is this node's copy (of that
/// version) or was read for the page.
enum Copied {
    Held(u64),
    Read,
}

/// What a home page's first read of the inbox found: the first batch
/// (older-ward pages, which start at the top or below a cursor) or the
/// floor alone (newer-ward pages); `None` when the inbox is absent.
enum FirstInbox {
    Read(Option<InboxRead>),
    Floor(Option<Key>),
}

/// Brings the recent items of newly followed authors into `user`'s inbox,
/// if present. Runs after the follows are durable, so an item posted in
/// between is either in the outboxes read here or delivered by its job.
pub(super) async fn backfill_inbox(backend: &dyn Backend, user: UserId, new: &[UserId], max_len: usize) -> Result<()> {
    let Some(floor) = backend.inbox_floor(user).await? else {
        return Ok(());
    };
    let range = KeyRange { above: Some(floor), below: None };
    let keys = backend.outbox_merge(new, range, Direction::Older, max_len).await?;
    // Cut short at max_len keys, the backfill is complete only down to
    // its oldest key: below that, pages pull from the outboxes.
    let complete_above = match keys.last() {
        Some(&oldest) if keys.len() >= max_len => oldest.saturating_sub(1),
        _ => floor,
    };
    backend.merge_inbox(user, &keys, complete_above).await?;
    Ok(())
}
