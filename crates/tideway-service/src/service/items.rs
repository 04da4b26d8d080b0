//! Items: create, read, patch, delete, hydration, reactions and promotions.

use super::effects::Effects;
use super::node::Node;
use super::notifications::NotificationService;
use super::reader::ItemReader;
use super::{MAX_ID_ATTEMPTS, ServiceOptions, shared_away};
use crate::error::{Result, ServiceError};
use crate::view::*;
use std::sync::Arc;
use tideway_core::limits::MAX_BATCH_IDS;
use tideway_core::notify::Cause;
use tideway_core::{Item, ItemId, ItemKind, Millis, NewItem, Relation, UserId, Visibility};
use tideway_store::{
    Backend, CreateOutcome, ItemChange, ItemCounts, Promotion, Removal, Signal, StoreError, ViewerMarks,
};

/// Items and what is done to them: create (with the hot-author decision and
/// the own-inbox delivery), read, patch, delete, reactions and promotions.
/// Holds the backend, the node (clock and ids), the item reader, the
/// notification ops every write carries, the after-effects of writes, and
/// this node's recent hot-author decisions.
pub struct ItemService {
    backend: Arc<dyn Backend>,
    node: Arc<Node>,
    reader: Arc<ItemReader>,
    notifications: NotificationService,
    effects: Arc<Effects>,
    /// Authors' hot decisions and when this node made them
    /// (`hot_decision_ms` > 0).
    hot_decisions: Option<quick_cache::sync::Cache<UserId, (bool, i64)>>,
    hot_decision_ms: i64,
    hot_followers: u64,
    max_clock_skew_ms: i64,
}

impl ItemService {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        node: Arc<Node>,
        reader: Arc<ItemReader>,
        notifications: NotificationService,
        effects: Arc<Effects>,
        opts: &ServiceOptions,
    ) -> Self {
        Self {
            backend,
            node,
            reader,
            notifications,
            effects,
            hot_decisions: (opts.hot_decision_ms > 0).then(|| quick_cache::sync::Cache::new(1 << 16)),
            hot_decision_ms: opts.hot_decision_ms,
            hot_followers: opts.hot_followers,
            max_clock_skew_ms: opts.max_clock_skew_ms,
        }
    }

    /// This node's recent decision whether `author` is hot (within
    /// `hot_decision_ms`), which spares a post the read of the author's
    /// follower count. Either decision makes correct pages (a pushed item
    /// reaches inboxes, an unpushed one is pulled by readers past the mark);
    /// the decision only picks the cheaper way, and it follows the count
    /// within that time.
    fn hot_decided(&self, author: UserId) -> Option<bool> {
        let (hot, at) = self.hot_decisions.as_ref()?.get(&author)?;
        let now = self.node.clock.now().0;
        (now >= at && now - at < self.hot_decision_ms).then_some(hot)
    }

    fn decided_hot(&self, author: UserId, hot: bool) {
        if let Some(d) = &self.hot_decisions {
            d.insert(author, (hot, self.node.clock.now().0));
        }
    }

    /// Creates an item. Returns the item and whether it was new (false: an
    /// idempotent repeat, or a repeated repost).
    pub async fn create_item(&self, new: NewItem) -> Result<(ItemView, bool)> {
        let mut new = new.validated()?;
        let author = new.author;
        let mut reply_to_author = None;
        let mut original_author = None;
        if let Some(target) = new.repost_of {
            let mut original = self.reader.live_item(target).await?;
            if let Some(inner) = original.repost_of {
                original = self.reader.live_item(inner).await?; // a repost of a repost reposts the original
            }
            if original.visibility != Visibility::Public {
                return Err(ServiceError::Forbidden(format!(
                    "item {} is not public and cannot be reposted",
                    original.id
                )));
            }
            if self.reader.blocked_between(author, original.author).await? {
                return Err(ServiceError::Forbidden(format!(
                    "a block separates user {author} from the author of item {}",
                    original.id
                )));
            }
            new.repost_of = Some(original.id);
            original_author = Some(original.author);
        }
        if let Some(parent_id) = new.reply_to {
            let parent = self.reader.live_item(parent_id).await?;
            let access = self.reader.access(author, &parent).await?;
            if access.blocked {
                return Err(ServiceError::Forbidden(format!(
                    "a block separates user {author} from the author of item {parent_id}"
                )));
            }
            if !access.visible {
                return Err(ServiceError::NotFound(format!("item {parent_id} does not exist or was deleted")));
            }
            reply_to_author = Some(parent.author);
        }
        let now = self.node.write_now()?;
        if let Some(t) = new.created_at {
            // Imports are of the past. A time a little ahead (the app's clock
            // runs fast) is taken as now; further ahead would sit above every
            // newer item and hide new posts from pollers.
            if t.0 > now.0.saturating_add(self.max_clock_skew_ms) {
                return Err(ServiceError::invalid(
                    "created_at",
                    format!(
                        "{t} is ahead of the server clock ({now}) by more than items.max_clock_skew ({} ms); \
                         created_at is for importing the past",
                        self.max_clock_skew_ms
                    ),
                ));
            }
            if t > now {
                new.created_at = None;
            }
        }
        // Every item but a card goes into its author's own inbox; hot
        // authors' items go nowhere else (their followers pull them on read).
        let card = new.kind.is_card();
        let mut hot_known: Option<bool> = self.hot_decided(author);
        let mut attempt = 0;
        let mut missed_shared = false;
        let outcome = loop {
            let id = match new.created_at {
                Some(t) => self.node.ids.at(t)?,
                None => self.node.ids.next(now)?,
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
                rev: 0,
            };
            // Shared state first (the author's own inbox, the hot-author
            // mark): both are safe ahead of the item (a page skips an inbox
            // key without a record, and a mark only makes readers pull an
            // outbox that has nothing new yet), and a shared half that
            // cannot be reached is known before anything durable is
            // written: the post then goes on without it, which no node
            // trusts until it is dropped (`tideway_store::trust`). The
            // own-inbox delivery goes beside the read of the author's
            // follower count (on remote engines each is a round trip).
            let own_inbox = async { if card { Ok(0) } else { self.backend.deliver(id, &[author]).await } };
            let (hot, delivered) = match hot_known {
                Some(hot) => (hot, own_inbox.await),
                None => {
                    let (counts, delivered) = tokio::join!(self.backend.counts(author), own_inbox);
                    let hot = !card && counts?.followers >= self.hot_followers;
                    hot_known = Some(hot);
                    if !card {
                        self.decided_hot(author, hot);
                    }
                    (hot, delivered)
                }
            };
            let mut missed = shared_away(delivered.map(|_| ()))?;
            let fan_out = !card && !hot;
            if hot && !missed {
                missed = shared_away(self.backend.mark_unpushed(author, id).await)?;
            }
            missed_shared = missed_shared || missed;
            // Whom it notifies, stored in the same atomic write as the item.
            let cause = Cause::Item { item: &item, parent_author: reply_to_author, original_author, stands: true };
            let notify = self.notifications.ops(&[cause])?;
            let create = self.backend.create_item_notifying(item, fan_out, now, &notify);
            let created = if missed {
                tideway_store::trust::without_shared(self.backend.as_ref(), create).await
            } else {
                create.await
            };
            match created {
                Err(StoreError::IdTaken(key)) if attempt < MAX_ID_ATTEMPTS => {
                    self.node.ids.taken(key);
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
                // The own inbox again, now that the item is stored. The
                // delivery before the store finds no inbox when the author
                // has none yet, and a rebuild that read the outboxes before
                // the store committed (a home read of the author's beside
                // the post: on PostgreSQL a batch can wait a second on a
                // deadlock) then makes one without the item, for good:
                // fan-out never delivers to the author (issue 64). An inbox
                // ignores a key it holds. If this fails the inbox goes, and
                // the next read rebuilds it from the outboxes.
                // (A post that went on without the shared half has nothing
                // more to tell it: it is dropped before it is trusted again.)
                if !card
                    && !missed_shared
                    && let Err(e) = self.backend.deliver(item.id.0, &[author]).await
                {
                    tracing::warn!(user = author.0, error = %e, "own-inbox delivery after the store failed: dropping the inbox");
                    if let Err(e) = self.backend.drop_inbox(author).await {
                        tracing::warn!(user = author.0, error = %e, "an inbox missed its own post: the shared half is no longer trusted");
                        if let Err(e) = self.effects.distrust_shared().await {
                            // (the post is stored: answered, as a retry would post it again)
                            tracing::error!(user = author.0, error = %e, "the shared half missed a post and could not be distrusted");
                            metrics::counter!("tideway_shared_misses_unrecorded_total").increment(1);
                        }
                    }
                }
                // The author's own home had the item before it was stored;
                // followers get it from the worker, or pull it if the author
                // is hot (readers whose inbox floor is below its key pull the
                // outboxes of marked authors; the marks are shared by every node).
                // Wake the workers of every node (the hub is shared). A lost
                // signal only waits for a worker's next poll: the write,
                // already durable, does not fail with it.
                let hot = hot_known == Some(true);
                let mut signals = vec![Signal::Author(author)];
                if !card && !hot {
                    signals.push(Signal::Work);
                }
                self.effects.signal(signals).await;
                if hot {
                    metrics::counter!("tideway_items_pulled_total").increment(1);
                }
                metrics::counter!("tideway_items_created_total").increment(1);
                if tideway_store::is_stripped(&item.body) {
                    return Ok((self.reader.hydrate_one(item, Some(author)).await?, true));
                }
                // A new item has no replies, reposts or reactions yet, and its
                // author no marks on it: no storage call to say so.
                let viewer = Some(ViewerMarks::default());
                Ok((ItemView { item, body: None, counts: ItemCounts::default(), viewer }, true))
            }
            CreateOutcome::Existing(item) if item.deleted => Err(ServiceError::Conflict(format!(
                "idempotency key was used by item {}, which has since been deleted",
                item.id
            ))),
            CreateOutcome::Existing(item) | CreateOutcome::AlreadyReposted(item) => {
                Ok((self.reader.hydrate_one(item, Some(author)).await?, false))
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
        let item = self.reader.live_item(id).await?;
        if let Some(v) = viewer {
            let access = self.reader.access(v, &item).await?;
            if !access.visible || access.blocked {
                return Err(ServiceError::NotFound(format!("item {id} does not exist or was deleted")));
            }
        }
        self.reader.hydrate_one(item, viewer).await
    }

    /// Items in the order asked; deleted and unknown ones omitted, and with a
    /// viewer those the viewer cannot see (no viewer: the server's own read,
    /// every non-deleted item).
    pub async fn get_items(&self, ids: &[ItemId], viewer: Option<UserId>) -> Result<Vec<ItemView>> {
        if ids.len() > MAX_BATCH_IDS {
            return Err(ServiceError::invalid("ids", format!("at most {MAX_BATCH_IDS} ids")));
        }
        let items: Vec<Arc<Item>> = self.reader.live_items(ids).await?.into_iter().flatten().collect();
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
        self.reader.hydrate(visible, viewer).await
    }

    pub async fn patch_item(
        &self,
        id: ItemId,
        body: Option<tideway_core::Body>,
        visibility: Option<Visibility>,
        actor: Option<UserId>,
    ) -> Result<ItemView> {
        let item = self.reader.live_item(id).await?;
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
        if visibility.is_some() {
            let original = updated.repost_of.unwrap_or(updated.id);
            self.effects.note_removals(&[Removal::Item { author: updated.author, item: original, key: None }]).await;
        }
        self.effects.signal(vec![Signal::Gone(updated.author), Signal::Item(id)]).await;
        self.reader.hydrate_one(updated, actor).await
    }

    /// Soft-deletes an item, its notifications falling in the same atomic
    /// write; deleting a deleted item is a no-op.
    pub async fn delete_item(&self, id: ItemId, actor: Option<UserId>) -> Result<()> {
        let item = match self.reader.load_item(id).await? {
            None => return Err(ServiceError::NotFound(format!("item {id} does not exist"))),
            Some(i) => i,
        };
        Self::check_author(&item, actor)?;
        if !item.deleted {
            let original_author = self.author_of(item.repost_of).await?;
            let cause =
                Cause::Item { item: &item, parent_author: item.reply_to_author, original_author, stands: false };
            let notify = self.notifications.ops(&[cause])?;
            self.backend.update_item_notifying(id, &ItemChange::Delete, &notify).await?;
            let original = item.repost_of.unwrap_or(item.id);
            self.effects
                .note_removals(&[Removal::Item { author: item.author, item: original, key: Some(item.id.0) }])
                .await;
            self.effects.signal(vec![Signal::Gone(item.author), Signal::Item(id)]).await;
        }
        Ok(())
    }

    /// The author of an item, if there is one and it is known.
    async fn author_of(&self, id: Option<ItemId>) -> Result<Option<UserId>> {
        Ok(match id {
            Some(id) => self.reader.load_item(id).await?.map(|i| i.author),
            None => None,
        })
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
        self.reader.live_item(item).await?;
        let p = Promotion { id: self.node.ids.next(self.node.write_now()?)?, item, every, starts_at, ends_at };
        self.backend.create_promotion(p.clone()).await?;
        Ok(p)
    }

    /// Sets (`on`) or clears one reaction of `user` to `item`; returns the
    /// item's counts after the change.
    pub async fn react(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> Result<ItemCounts> {
        self.node.check_clock()?;
        let valid = kind.len() <= 32
            && kind.starts_with(|c: char| c.is_ascii_lowercase())
            && kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !valid {
            return Err(ServiceError::invalid(
                "kind",
                format!("{kind:?} must match [a-z][a-z0-9_]{{0,31}} (like, or an app kind)"),
            ));
        }
        let it = self.reader.live_item(item).await?;
        let access = self.reader.access(user, &it).await?;
        if !access.visible {
            return Err(ServiceError::NotFound(format!("item {item} does not exist or was deleted")));
        }
        if on && access.blocked {
            return Err(ServiceError::Forbidden(format!(
                "a block separates user {user} from the author of item {item}"
            )));
        }
        // Applied even when the reaction did not change: a repeat completes
        // a request whose notification failed after the reaction was stored.
        let at = self.node.clock.now();
        let notes =
            self.notifications.ops(&[Cause::Reaction { item, author: it.author, user, kind, at, stands: on }])?;
        self.backend.set_reaction(item, user, kind, on, &notes).await?;
        metrics::counter!("tideway_reactions_total").increment(1);
        Ok(self.backend.hydration(&[item], None).await?.pop().map(|(c, _)| c).unwrap_or_default())
    }
}
