//! [`FeedService`]: one method per API operation, over a storage backend.

use crate::clock::Clock;
use crate::config::Config;
use crate::error::{Result, ServiceError};
use crate::feed::{Evaluator, Found, HomeSource, PullSource, walk};
use crate::view::*;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tideway_core::cursor::{Cursor, FeedScope};
use tideway_core::limits::{DEFAULT_PAGE, MAX_BATCH_FOLLOW, MAX_BATCH_IDS, MAX_PAGE};
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{IdGenerator, Item, ItemId, ItemKind, Key, Millis, NewItem, Relation, UserId, Visibility};
use tideway_store::{Backend, CreateOutcome, FollowStatus, ItemChange, ItemCounts, ListKind, Promotion, StoreError};
use tokio::sync::Notify;

/// Ids tried for one new item before giving up (a collision only happens
/// for imported times; each one makes the allocator jump further).
const MAX_ID_ATTEMPTS: u32 = 1024;

/// Settings the service needs (a subset of [`Config`]).
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    pub max_len: usize,
    pub max_following: usize,
    pub hot_followers: u64,
    pub active_window_ms: i64,
    pub chunk_size: usize,
    pub node_id: u16,
    /// How far ahead of the server clock an imported `created_at` may be.
    pub max_clock_skew_ms: i64,
    /// How long a fan-out worker holds a job it claimed without progress.
    pub lease_ms: i64,
}

impl ServiceOptions {
    pub fn from_config(c: &Config) -> Self {
        Self {
            max_len: c.timeline.max_len,
            max_following: c.graph.max_following,
            hot_followers: c.fanout.hot_followers,
            active_window_ms: i64::try_from(c.fanout.active_window.0.as_millis()).unwrap_or(i64::MAX),
            chunk_size: c.fanout.chunk_size,
            node_id: c.server.node_id,
            max_clock_skew_ms: i64::try_from(c.items.max_clock_skew.0.as_millis()).unwrap_or(i64::MAX),
            lease_ms: i64::try_from(c.fanout.lease.0.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self::from_config(&Config::default())
    }
}

/// The feed service.
pub struct FeedService {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) opts: ServiceOptions,
    clock: Arc<dyn Clock>,
    ids: IdGenerator,
    /// Wakes the fan-out worker when a job is enqueued.
    pub(crate) work: Notify,
    pub(crate) delivered_total: AtomicU64,
    /// Deliveries per wall-clock second, the last 16 seconds (second, count).
    delivery_rate: Mutex<[(u64, u64); 16]>,
}

/// The parsed direction and bound of a page request.
struct PageSpec {
    limit: usize,
    dir: Direction,
    cursor: Option<Key>,
    /// The organic position (1 = top) of the cursor's entry, as the cursor
    /// carries it: promotions are placed "after every N organic entries,
    /// counted from the top" across pages. 0 without a cursor.
    index: i64,
}

/// A cursor's key and organic position.
fn cursor_of(s: &str, scope: &FeedScope<'_>) -> Result<(Option<Key>, i64)> {
    let c = Cursor::decode(s, scope)?;
    Ok((Some(c.key), c.aux as i64))
}

fn page_spec(req: &PageRequest, scope: &FeedScope<'_>) -> Result<PageSpec> {
    let limit = if req.limit == 0 { DEFAULT_PAGE } else { req.limit };
    if limit > MAX_PAGE {
        return Err(ServiceError::invalid("limit", format!("must be 1..={MAX_PAGE}")));
    }
    let (dir, (cursor, index)) = match (&req.before, &req.after) {
        (Some(_), Some(_)) => return Err(ServiceError::invalid("before", "give before or after, not both")),
        (Some(b), None) => (Direction::Older, cursor_of(b, scope)?),
        (None, Some(a)) => (Direction::Newer, cursor_of(a, scope)?),
        (None, None) => (Direction::Older, (None, 0)),
    };
    Ok(PageSpec { limit, dir, cursor, index })
}

impl FeedService {
    pub async fn new(backend: Arc<dyn Backend>, opts: ServiceOptions, clock: Arc<dyn Clock>) -> Result<Self> {
        let ids = IdGenerator::new(opts.node_id)?;
        ids.observe(backend.stats().await?.max_key);
        Ok(Self {
            backend,
            opts,
            clock,
            ids,
            work: Notify::new(),
            delivered_total: AtomicU64::new(0),
            delivery_rate: Mutex::new([(0, 0); 16]),
        })
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn options(&self) -> &ServiceOptions {
        &self.opts
    }

    pub fn now(&self) -> Millis {
        self.clock.now()
    }

    // ---------------------------------------------------------------- items

    async fn load_item(&self, id: ItemId) -> Result<Option<Arc<Item>>> {
        Ok(match self.backend.records(&[id.0]).await?.pop().flatten() {
            Some(tideway_store::Record::Item(i)) => Some(i),
            _ => None,
        })
    }

    /// The items named by `ids`, in order; `None` for unknown or deleted ones.
    async fn live_items(&self, ids: &[ItemId]) -> Result<Vec<Option<Arc<Item>>>> {
        let keys: Vec<Key> = ids.iter().map(|i| i.0).collect();
        Ok(self
            .backend
            .records(&keys)
            .await?
            .into_iter()
            .map(|r| match r {
                Some(tideway_store::Record::Item(i)) if !i.deleted => Some(i),
                _ => None,
            })
            .collect())
    }

    async fn live_item(&self, id: ItemId) -> Result<Arc<Item>> {
        match self.load_item(id).await? {
            Some(i) if !i.deleted => Ok(i),
            _ => Err(ServiceError::NotFound(format!("item {id} does not exist or was deleted"))),
        }
    }

    async fn relation(&self, user: UserId, other: UserId) -> Result<Relation> {
        if user == other {
            return Ok(Relation::default());
        }
        Ok(self.backend.relations(user, &[other]).await?.pop().unwrap_or_default())
    }

    /// Creates an item. Returns the item and whether it was new (false: an
    /// idempotent repeat, or a repeated repost).
    pub async fn create_item(&self, new: NewItem) -> Result<(ItemView, bool)> {
        let mut new = new.validated()?;
        let author = new.author;
        let mut reply_to_author = None;
        if let Some(target) = new.repost_of {
            let mut original = self.live_item(target).await?;
            if let Some(inner) = original.repost_of {
                original = self.live_item(inner).await?; // a repost of a repost reposts the original
            }
            if original.visibility != Visibility::Public {
                return Err(ServiceError::Forbidden(format!(
                    "item {} is not public and cannot be reposted",
                    original.id
                )));
            }
            if self.relation(author, original.author).await?.blocked_either_way() {
                return Err(ServiceError::Forbidden(format!(
                    "a block separates user {author} from the author of item {}",
                    original.id
                )));
            }
            new.repost_of = Some(original.id);
        }
        if let Some(parent_id) = new.reply_to {
            let parent = self.live_item(parent_id).await?;
            let rel = self.relation(author, parent.author).await?;
            if rel.blocked_either_way() {
                return Err(ServiceError::Forbidden(format!(
                    "a block separates user {author} from the author of item {parent_id}"
                )));
            }
            if !parent.visible_to(Some(author), rel.following) {
                return Err(ServiceError::NotFound(format!("item {parent_id} does not exist or was deleted")));
            }
            reply_to_author = Some(parent.author);
        }
        let now = self.clock.now();
        if let Some(t) = new.created_at {
            // Imports are of the past. A time a little ahead (the app's clock
            // runs fast) is taken as now; further ahead would sit above every
            // newer item and hide new posts from pollers.
            if t.0 > now.0.saturating_add(self.opts.max_clock_skew_ms) {
                return Err(ServiceError::invalid(
                    "created_at",
                    format!(
                        "{t} is ahead of the server clock ({now}) by more than items.max_clock_skew ({} ms); \
                         created_at is for importing the past",
                        self.opts.max_clock_skew_ms
                    ),
                ));
            }
            if t > now {
                new.created_at = None;
            }
        }
        // Hot authors are not pushed: their followers pull them on read.
        let hot = !new.kind.is_card() && self.backend.counts(author).await?.followers >= self.opts.hot_followers;
        let fan_out = !new.kind.is_card() && !hot;
        let mut attempt = 0;
        let outcome = loop {
            let id = match new.created_at {
                Some(t) => self.ids.at(t)?,
                None => self.ids.next(now)?,
            };
            let item = Item {
                id: ItemId(id),
                author,
                kind: new.kind.clone(),
                body: new.body.clone(),
                visibility: new.visibility,
                tags: new.tags.clone(),
                mentions: new.mentions.clone(),
                object: new.object.clone(),
                repost_of: new.repost_of,
                reply_to: new.reply_to,
                reply_to_author,
                idempotency_key: new.idempotency_key.clone(),
                deleted: false,
            };
            match self.backend.create_item(item, fan_out, now).await {
                Err(StoreError::IdTaken(key)) if attempt < MAX_ID_ATTEMPTS => {
                    self.ids.taken(key);
                    attempt += 1;
                }
                Err(StoreError::IdTaken(key)) => {
                    return Err(ServiceError::Conflict(format!(
                        "no free item id found near {} after {MAX_ID_ATTEMPTS} tries; retry",
                        tideway_core::ids::key_time(key)
                    )));
                }
                other => break other?,
            }
        };
        match outcome {
            CreateOutcome::Created(item) => {
                if fan_out || hot {
                    // The author's own home sees the item at once; followers
                    // get it from the worker, or pull it if the author is hot.
                    self.backend.deliver(item.id.0, &[author]).await?;
                }
                if fan_out {
                    self.work.notify_one();
                }
                if hot {
                    // Readers whose inbox floor is below this key pull the
                    // author's outbox (HotAuthors is shared by every node).
                    self.backend.mark_unpushed(author, item.id.0).await?;
                    metrics::counter!("tideway_items_pulled_total").increment(1);
                }
                metrics::counter!("tideway_items_created_total").increment(1);
                Ok((self.hydrate_one(item, Some(author)).await?, true))
            }
            CreateOutcome::Existing(item) if item.deleted => Err(ServiceError::Conflict(format!(
                "idempotency key was used by item {}, which has since been deleted",
                item.id
            ))),
            CreateOutcome::Existing(item) | CreateOutcome::AlreadyReposted(item) => {
                Ok((self.hydrate_one(item, Some(author)).await?, false))
            }
        }
    }

    /// Checks that `actor` (when a user token acts) is the author.
    fn check_author(item: &Item, actor: Option<UserId>) -> Result<()> {
        match actor {
            Some(a) if a != item.author => Err(ServiceError::Forbidden(format!(
                "only the author (user {}) may change item {}",
                item.author, item.id
            ))),
            _ => Ok(()),
        }
    }

    /// An item as `viewer` sees it: 404 when it is deleted, unknown, not
    /// visible to the viewer or separated from them by a block. Without a
    /// viewer (the app's server key reading on its own behalf) every
    /// non-deleted item is returned, whatever its visibility.
    pub async fn get_item(&self, id: ItemId, viewer: Option<UserId>) -> Result<ItemView> {
        let item = self.live_item(id).await?;
        if let Some(v) = viewer {
            let rel = self.relation(v, item.author).await?;
            if !item.visible_to(Some(v), rel.following) || rel.blocked_either_way() {
                return Err(ServiceError::NotFound(format!("item {id} does not exist or was deleted")));
            }
        }
        self.hydrate_one(item, viewer).await
    }

    /// Items in the order asked; deleted and unknown ones omitted, and with a
    /// viewer those the viewer cannot see (no viewer: the server's own read,
    /// every non-deleted item).
    pub async fn get_items(&self, ids: &[ItemId], viewer: Option<UserId>) -> Result<Vec<ItemView>> {
        if ids.len() > MAX_BATCH_IDS {
            return Err(ServiceError::invalid("ids", format!("at most {MAX_BATCH_IDS} ids")));
        }
        let items: Vec<Arc<Item>> = self.live_items(ids).await?.into_iter().flatten().collect();
        let visible: Vec<Arc<Item>> = match viewer {
            None => items,
            Some(v) => {
                let authors: Vec<UserId> = items.iter().map(|i| i.author).collect();
                let rels = self.backend.relations(v, &authors).await?;
                items
                    .into_iter()
                    .zip(rels)
                    .filter(|(i, r)| {
                        let r = if i.author == v { Relation::default() } else { *r };
                        i.visible_to(Some(v), r.following) && !r.blocked_either_way()
                    })
                    .map(|(i, _)| i)
                    .collect()
            }
        };
        self.hydrate(visible, viewer).await
    }

    pub async fn patch_item(
        &self,
        id: ItemId,
        body: Option<serde_json::Map<String, serde_json::Value>>,
        visibility: Option<Visibility>,
        actor: Option<UserId>,
    ) -> Result<ItemView> {
        let item = self.live_item(id).await?;
        Self::check_author(&item, actor)?;
        if let Some(b) = &body {
            tideway_core::item::check_body(b)?;
        }
        if item.kind == ItemKind::Repost && visibility.is_some_and(|v| v != Visibility::Public) {
            return Err(ServiceError::invalid("visibility", "a repost is always public"));
        }
        let updated = self
            .backend
            .update_item(id, &ItemChange::Patch { body, visibility })
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("item {id} does not exist or was deleted")))?;
        self.hydrate_one(updated, actor).await
    }

    /// Soft-deletes an item; deleting a deleted item is a no-op.
    pub async fn delete_item(&self, id: ItemId, actor: Option<UserId>) -> Result<()> {
        match self.load_item(id).await? {
            None => Err(ServiceError::NotFound(format!("item {id} does not exist"))),
            Some(i) if i.deleted => Self::check_author(&i, actor),
            Some(i) => {
                Self::check_author(&i, actor)?;
                self.backend.update_item(id, &ItemChange::Delete).await?;
                Ok(())
            }
        }
    }

    async fn hydrate_one(&self, item: Arc<Item>, viewer: Option<UserId>) -> Result<ItemView> {
        self.hydrate(vec![item], viewer)
            .await?
            .pop()
            .ok_or_else(|| ServiceError::NotFound("item vanished while being read".into()))
    }

    /// Counts and viewer marks for many items in one storage call.
    async fn hydrate(&self, items: Vec<Arc<Item>>, viewer: Option<UserId>) -> Result<Vec<ItemView>> {
        let ids: Vec<ItemId> = items.iter().map(|i| i.id).collect();
        let hydration = self.backend.hydration(&ids, viewer).await?;
        Ok(items.into_iter().zip(hydration).map(|(item, (counts, viewer))| ItemView { item, counts, viewer }).collect())
    }

    /// Turns walked entries into a page: positions, cursors, promotions (home
    /// only: `promos` are the promoted items the viewer may see), hydration.
    async fn finish_page(
        &self,
        spec: &PageSpec,
        (mut found, more): (Vec<Found>, bool),
        scope: &FeedScope<'_>,
        viewer: Option<UserId>,
        promos: &[(Promotion, Arc<Item>)],
    ) -> Result<Page> {
        let enc = |k: Key, index: i64| Cursor { key: k, aux: index as u64 }.encode(scope);
        if spec.dir == Direction::Newer {
            found.reverse();
        }
        // Organic positions from the top of the feed, newest first.
        let m = found.len() as i64;
        let index_at = |p: usize| match spec.dir {
            Direction::Older => spec.index + 1 + p as i64,
            Direction::Newer => spec.index - (m - p as i64),
        };
        // Weave promotions in: after organic entry k when k % every == 0,
        // each promotion at most once per page, never with a cursor of its own.
        let mut rows: Vec<(Option<Found>, usize, i64)> = Vec::with_capacity(found.len() + promos.len());
        let mut used = vec![false; promos.len()];
        for (p, f) in found.into_iter().enumerate() {
            let k = index_at(p);
            rows.push((Some(f), p, k));
            for (i, (promo, _)) in promos.iter().enumerate() {
                if !used[i] && k > 0 && k % i64::from(promo.every.max(1)) == 0 {
                    used[i] = true;
                    rows.push((None, i, k));
                }
            }
        }
        // `limit` counts every entry: cut the side away from the cursor.
        // `cut`: an organic entry was left for the next page (dropping only
        // promotions must not announce a page that would be empty).
        // Newer pages keep the organic entries nearest the cursor: promotions
        // give way first, then the newest organic entries (the next poll).
        let mut cut = false;
        if rows.len() > spec.limit {
            match spec.dir {
                Direction::Older => cut = rows.drain(spec.limit..).any(|r| r.0.is_some()),
                Direction::Newer => {
                    while rows.len() > spec.limit {
                        let at = rows.iter().position(|r| r.0.is_none()).unwrap_or(0);
                        rows.remove(at);
                    }
                }
            }
        }
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
        // One hydration call for the organic items and the promoted ones.
        let items: Vec<Arc<Item>> = rows
            .iter()
            .map(|(f, i, _)| match f {
                Some(f) => f.item.clone(),
                None => promos[*i].1.clone(),
            })
            .collect();
        let views = self.hydrate(items, viewer).await?;
        let mut last_cursor = spec.cursor.map(|c| enc(c, spec.index)).unwrap_or_default();
        let entries = rows
            .into_iter()
            .zip(views)
            .map(|((f, _, k), item)| match f {
                Some(f) => {
                    last_cursor = enc(f.entry.key, k);
                    EntryView {
                        cursor: last_cursor.clone(),
                        reason: f.entry.reason.into(),
                        item,
                        sources: f.entry.sources,
                    }
                }
                None => EntryView { cursor: last_cursor.clone(), reason: Reason::Promoted, item, sources: vec![] },
            })
            .collect();
        Ok(Page { entries, next_cursor: next, prev_cursor: prev })
    }

    /// The running promotions whose items `user` may see in home.
    async fn promotions_for(&self, user: UserId) -> Result<Vec<(Promotion, Arc<Item>)>> {
        let promos = self.backend.active_promotions(self.clock.now()).await?;
        if promos.is_empty() {
            return Ok(vec![]);
        }
        let ids: Vec<ItemId> = promos.iter().map(|p| p.item).collect();
        let items = self.live_items(&ids).await?;
        let authors: Vec<UserId> = items.iter().flatten().map(|i| i.author).collect();
        let rels: HashMap<UserId, Relation> =
            authors.iter().copied().zip(self.backend.relations(user, &authors).await?).collect();
        Ok(promos
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
            .collect())
    }

    /// Registers a promoted item.
    pub async fn create_promotion(
        &self,
        item: ItemId,
        every: u32,
        starts_at: Millis,
        ends_at: Millis,
    ) -> Result<Promotion> {
        if every == 0 || every > 1000 {
            return Err(ServiceError::invalid("every", "must be 1..=1000 organic entries"));
        }
        if ends_at <= starts_at {
            return Err(ServiceError::invalid("ends_at", "must be after starts_at"));
        }
        self.live_item(item).await?;
        let p = Promotion { id: self.ids.next(self.clock.now())?, item, every, starts_at, ends_at };
        self.backend.create_promotion(p.clone()).await?;
        Ok(p)
    }

    /// Sets (`on`) or clears one reaction of `user` to `item`; returns the
    /// item's counts after the change.
    pub async fn react(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> Result<ItemCounts> {
        let valid = kind.len() <= 32
            && kind.starts_with(|c: char| c.is_ascii_lowercase())
            && kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(ServiceError::invalid(
                "kind",
                format!("{kind:?} must match [a-z][a-z0-9_]{{0,31}} (like, or an app kind)"),
            ));
        }
        let it = self.live_item(item).await?;
        let rel = self.relation(user, it.author).await?;
        if !it.visible_to(Some(user), rel.following) {
            return Err(ServiceError::NotFound(format!("item {item} does not exist or was deleted")));
        }
        if on && rel.blocked_either_way() {
            return Err(ServiceError::Forbidden(format!(
                "a block separates user {user} from the author of item {item}"
            )));
        }
        self.backend.set_reaction(item, user, kind, on).await?;
        metrics::counter!("tideway_reactions_total").increment(1);
        Ok(self.backend.hydration(&[item], None).await?.pop().map(|(c, _)| c).unwrap_or_default())
    }

    // ---------------------------------------------------------------- feeds

    /// `F(u)`: the users `u` follows, and `u`.
    async fn sources_of(&self, user: UserId) -> Result<Vec<UserId>> {
        let mut f = self.backend.followees(user).await?;
        f.push(user);
        Ok(f)
    }

    /// Makes sure `user` has an inbox, rebuilding it from the outboxes of
    /// `F(user)` (at most `max_len` keys of work) when it is absent.
    async fn ensure_inbox(&self, user: UserId, f_list: &[UserId]) -> Result<()> {
        if self.backend.inbox_floor(user).await?.is_some() {
            return Ok(());
        }
        self.backend.begin_rebuild(user).await?;
        let n = self.opts.max_len;
        let mut outbox = self.backend.outbox_merge(f_list, KeyRange::ALL, Direction::Older, n).await?;
        let mut inserts = self.backend.inserts(user, KeyRange::ALL, Direction::Older, n).await?;
        outbox.reverse();
        inserts.reverse();
        let keys = merge_sorted(&[&outbox, &inserts], KeyRange::ALL, Direction::Older, n);
        // Complete above the floor: everything, unless the cap cut it short.
        let floor = if keys.len() >= n { keys.last().map_or(0, |k| k.saturating_sub(1)) } else { 0 };
        self.backend.finish_rebuild(user, &keys, floor).await?;
        metrics::counter!("tideway_inbox_rebuilds_total").increment(1);
        Ok(())
    }

    /// A page of `home(user).await`. Reading marks the user active.
    pub async fn home(&self, user: UserId, req: &PageRequest) -> Result<Page> {
        let scope = FeedScope::Home(user.0);
        let spec = page_spec(req, &scope)?;
        self.backend.touch(user, self.clock.now()).await?;
        let f_list = self.sources_of(user).await?;
        let f_set: HashSet<UserId> = f_list.iter().copied().collect();
        self.ensure_inbox(user, &f_list).await?;
        let floor = self.backend.inbox_floor(user).await?.unwrap_or(0);
        let pulled = self.backend.unpushed_above(&f_list, floor).await?;
        let backend = self.backend.as_ref();
        let mut source = HomeSource::new(backend, user, &f_list, &pulled, spec.dir, spec.cursor);
        let eval = Evaluator::Home { backend, user, f_list: &f_list, f_set: &f_set };
        let walked = walk(&mut source, &eval, spec.limit).await?;
        let promos = self.promotions_for(user).await?;
        self.finish_page(&spec, walked, &scope, Some(user), &promos).await
    }

    /// A page of `profile(author).await` seen by `viewer`.
    pub async fn profile(&self, author: UserId, viewer: Option<UserId>, req: &PageRequest) -> Result<Page> {
        let scope = FeedScope::Profile(author.0);
        let spec = page_spec(req, &scope)?;
        if let Some(v) = viewer
            && self.relation(v, author).await?.blocked_either_way()
        {
            return self.finish_page(&spec, (vec![], false), &scope, viewer, &[]).await;
        }
        let backend = self.backend.as_ref();
        let authors = [author];
        let mut source =
            PullSource { backend, authors: &authors, inserts_of: None, dir: spec.dir, bound: spec.cursor, stop: None };
        let eval = Evaluator::Profile { backend, author, viewer };
        let walked = walk(&mut source, &eval, spec.limit).await?;
        self.finish_page(&spec, walked, &scope, viewer, &[]).await
    }

    /// Inserts an item directly into `user`'s home (a card, a system message).
    /// Returns the item and the key (feed position) of the insertion.
    /// The item must be one `user` may see (visible to them, no block
    /// between them and its author): anything else answers 404, exactly as
    /// an unknown id, so an insert never reveals an item its owner could not
    /// read. An item of an author `user` mutes is accepted and stays hidden
    /// from the home while the mute lasts, like the author's other items.
    pub async fn insert_home(&self, user: UserId, item: ItemId) -> Result<(ItemView, Key)> {
        let it = self.live_item(item).await?;
        let rel = self.relation(user, it.author).await?;
        if !it.visible_to(Some(user), rel.following) || rel.blocked_either_way() {
            return Err(ServiceError::NotFound(format!("item {item} does not exist or was deleted")));
        }
        let now = self.clock.now();
        let key = self.ids.next(now)?;
        self.backend.insert_home(user, item, key).await?;
        self.backend.deliver(key, &[user]).await?;
        Ok((self.hydrate_one(it, Some(user)).await?, key))
    }

    // ---------------------------------------------------------------- graph

    /// Follows many targets in one storage round; brings their recent items
    /// into the follower's inbox.
    pub async fn follow_many(&self, user: UserId, targets: &[UserId]) -> Result<Vec<(UserId, FollowStatus)>> {
        if targets.len() > MAX_BATCH_FOLLOW {
            return Err(ServiceError::invalid("targets", format!("at most {MAX_BATCH_FOLLOW} targets per call")));
        }
        if targets.contains(&user) {
            return Err(ServiceError::invalid("targets", "a user cannot follow themselves"));
        }
        let statuses = self.backend.follow_many(user, targets, self.clock.now(), self.opts.max_following).await?;
        let new: Vec<UserId> = targets
            .iter()
            .zip(&statuses)
            .filter(|(_, s)| matches!(s, FollowStatus::Followed(_)))
            .map(|(t, _)| *t)
            .collect();
        if !new.is_empty()
            && let Some(floor) = self.backend.inbox_floor(user).await?
        {
            let range = KeyRange { above: Some(floor), below: None };
            let keys = self.backend.outbox_merge(&new, range, Direction::Older, self.opts.max_len).await?;
            // Cut short at max_len keys, the backfill is complete only down to
            // its oldest key: below that, pages pull from the outboxes.
            let complete_above = match keys.last() {
                Some(&oldest) if keys.len() >= self.opts.max_len => oldest.saturating_sub(1),
                _ => floor,
            };
            self.backend.merge_inbox(user, &keys, complete_above).await?;
        }
        Ok(targets.iter().copied().zip(statuses).collect())
    }

    /// Follows one target: `Ok(since)`, or the reason it was refused.
    pub async fn follow(&self, user: UserId, target: UserId) -> Result<Millis> {
        if user == target {
            return Err(ServiceError::invalid("target", "a user cannot follow themselves"));
        }
        match self.follow_many(user, &[target]).await?.pop().map(|(_, s)| s) {
            Some(FollowStatus::Followed(t) | FollowStatus::Already(t)) => Ok(t),
            Some(FollowStatus::Blocked) => {
                Err(ServiceError::Forbidden(format!("a block separates users {user} and {target}")))
            }
            Some(FollowStatus::Limit) | None => Err(ServiceError::LimitExceeded(format!(
                "user {user} already follows {} users, the most allowed (graph.max_following)",
                self.opts.max_following
            ))),
        }
    }

    pub async fn unfollow(&self, user: UserId, target: UserId) -> Result<()> {
        self.backend.unfollow(user, target).await?;
        Ok(())
    }

    fn check_not_self(user: UserId, target: UserId, what: &str) -> Result<()> {
        if user == target {
            return Err(ServiceError::invalid("target", format!("a user cannot {what} themselves")));
        }
        Ok(())
    }

    pub async fn set_block(&self, user: UserId, target: UserId, on: bool) -> Result<()> {
        Self::check_not_self(user, target, "block")?;
        self.backend.set_block(user, target, on, self.clock.now()).await?;
        Ok(())
    }

    pub async fn set_mute(&self, user: UserId, target: UserId, on: bool) -> Result<()> {
        Self::check_not_self(user, target, "mute")?;
        self.backend.set_mute(user, target, on, self.clock.now()).await?;
        Ok(())
    }

    pub async fn list(&self, user: UserId, which: ListKind, limit: usize, cursor: Option<&str>) -> Result<UserPage> {
        let limit = if limit == 0 { DEFAULT_PAGE } else { limit };
        if limit > MAX_PAGE {
            return Err(ServiceError::invalid("limit", format!("must be 1..={MAX_PAGE}")));
        }
        let scope = match which {
            ListKind::Following => FeedScope::Following(user.0),
            ListKind::Followers => FeedScope::Followers(user.0),
        };
        let after = match cursor {
            Some(c) => {
                let c = Cursor::decode(c, &scope)?;
                Some((Millis(i64::try_from(c.key).unwrap_or(i64::MAX)), UserId(c.aux)))
            }
            None => None,
        };
        let mut users = self.backend.list(user, which, after, limit + 1).await?;
        let more = users.len() > limit;
        users.truncate(limit);
        let next_cursor = if more {
            users
                .last()
                .map(|(id, since)| Cursor { key: u64::try_from(since.0).unwrap_or(0), aux: id.0 }.encode(&scope))
        } else {
            None
        };
        Ok(UserPage { users, next_cursor })
    }

    pub async fn relationships(&self, user: UserId, targets: &[UserId]) -> Result<Vec<Relation>> {
        if targets.len() > MAX_BATCH_IDS {
            return Err(ServiceError::invalid("targets", format!("at most {MAX_BATCH_IDS} targets")));
        }
        Ok(self.backend.relations(user, targets).await?)
    }

    /// Counts deliveries for the rate shown in `/v1/stats`.
    pub(crate) fn record_deliveries(&self, n: usize) {
        self.delivered_total.fetch_add(n as u64, Ordering::Relaxed);
        let sec = (Millis::now().0 / 1000) as u64;
        let mut r = self.delivery_rate.lock();
        let slot = &mut r[(sec % 16) as usize];
        if slot.0 != sec {
            *slot = (sec, 0);
        }
        slot.1 += n as u64;
    }

    /// Deliveries per second over the last 10 full seconds.
    fn deliveries_per_sec(&self) -> u64 {
        let sec = (Millis::now().0 / 1000) as u64;
        let r = self.delivery_rate.lock();
        r.iter().filter(|(s, _)| *s < sec && *s + 10 >= sec).map(|(_, n)| n).sum::<u64>() / 10
    }

    /// Hot authors' newest unpushed keys (for the snapshot).
    pub async fn unpushed_snapshot(&self) -> Result<Vec<(UserId, Key)>> {
        Ok(self.backend.export_unpushed().await?)
    }

    /// Readers' last activity (for the snapshot).
    pub async fn activity_snapshot(&self) -> Result<Vec<(UserId, Millis)>> {
        Ok(self.backend.export_activity().await?)
    }

    /// Restores the shared state a snapshot carried.
    pub(crate) async fn restore_memory(
        &self,
        unpushed: Vec<(UserId, Key)>,
        active: Vec<(UserId, Millis)>,
    ) -> Result<()> {
        self.backend.import_unpushed(&unpushed).await?;
        self.backend.import_activity(&active).await?;
        Ok(())
    }

    /// Drops the inboxes of readers inactive for longer than
    /// `fanout.active_window`: they stop receiving pushes, and their next read
    /// rebuilds the inbox. Returns how many were dropped.
    pub async fn sweep_inactive(&self) -> Result<usize> {
        let now = self.clock.now();
        let stale = self.backend.inactive_before(Millis(now.0.saturating_sub(self.opts.active_window_ms))).await?;
        let mut dropped = 0;
        for u in stale {
            if self.backend.inbox_floor(u).await?.is_some() {
                self.backend.drop_inbox(u).await?;
                dropped += 1;
            }
        }
        if dropped > 0 {
            metrics::counter!("tideway_inboxes_dropped_total").increment(dropped as u64);
        }
        Ok(dropped)
    }

    pub async fn user(&self, user: UserId) -> Result<UserView> {
        let c = self.backend.counts(user).await?;
        let last = self.backend.last_active(&[user]).await?.pop().flatten();
        let now = self.clock.now();
        Ok(UserView {
            id: user,
            following: c.following,
            followers: c.followers,
            items: c.items,
            hot: c.followers >= self.opts.hot_followers,
            active: last.is_some_and(|t| now.0 - t.0 <= self.opts.active_window_ms),
            last_active_at: last,
        })
    }

    /// Fails when storage cannot take writes until the process restarts
    /// (after a write failed to reach the disk): the liveness probe.
    pub async fn health(&self) -> Result<()> {
        Ok(self.backend.health().await?)
    }

    pub async fn stats(&self) -> Result<StatsView> {
        let s = self.backend.stats().await?;
        let ib = self.backend.inbox_stats().await?;
        let now = self.clock.now();
        Ok(StatsView {
            users: s.users,
            items: s.items,
            follows: s.follows,
            pending: s.pending_jobs,
            delivered_total: self.delivered_total.load(Ordering::Relaxed),
            deliveries_per_sec: self.deliveries_per_sec(),
            oldest_pending_ms: s.oldest_job.map_or(0, |t| u64::try_from(now.0 - t.0).unwrap_or(0)),
            inboxes: ib.inboxes,
            inbox_entries: ib.entries,
            inbox_bytes: ib.bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SystemClock;
    use tideway_store::Store;

    #[tokio::test]
    async fn the_delivery_rate_counts_the_last_ten_full_seconds() {
        let svc = FeedService::new(Arc::new(Store::in_memory(10)), ServiceOptions::default(), Arc::new(SystemClock))
            .await
            .expect("service");
        svc.record_deliveries(1000);
        svc.record_deliveries(500);
        // The current second is not full yet: it counts once it has passed.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(svc.deliveries_per_sec(), 150);
        assert_eq!(svc.stats().await.expect("stats").delivered_total, 1500);
    }
}
