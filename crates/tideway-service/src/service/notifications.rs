//! Notifications (SPEC section 2): what others did to a user or their
//! items, as groups, with `seen` and `read` marks.
//!
//! Every write that makes or unmakes an event (a post, reply, repost or
//! mention; a reaction; a follow or unfollow; a delete) hands the
//! notification ops that `tideway_core::notify::ops` derives from it to
//! the backend with the write itself (`Items::create_item_notifying`,
//! `update_item_notifying`, `set_reaction`, `Graph::follow_many_notifying`,
//! `unfollow_notifying`): the cause and its notifications are one atomic
//! write on every engine, so no crash leaves one without the other. A
//! block or mute re-evaluates who is hidden after it is stored, in a write
//! of its own; its ops are idempotent, and a retried request completes
//! them. What was stored before notifications existed (or by `tideway
//! import`) gets its notifications from `tideway admin backfill-notifications`
//! ([`NotificationService::backfill`]).

use super::node::Node;
use super::reader::ItemReader;
use crate::error::{Result, ServiceError};
use crate::view::{NotificationGroup, NotificationsPage};
use std::collections::HashMap;
use std::sync::Arc;
use tideway_core::cursor::{Cursor, FeedScope};
use tideway_core::ids::key_time;
use tideway_core::limits::page_limit;
use tideway_core::notify::{Cause, Mark, Op};
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::{Backend, CausePos, StoredCause};

/// Stored causes read a page by a backfill.
const BACKFILL_PAGE: usize = 500;
/// Notification ops applied a call by a backfill.
const BACKFILL_OPS: usize = 200;

/// What [`NotificationService::backfill`] has read and applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backfilled {
    pub items: u64,
    pub follows: u64,
    pub reactions: u64,
    /// Notification ops applied (an event already standing is kept).
    pub ops: u64,
}

/// Notifications: the ops each cause carries, pages, marks, the backfill.
/// Holds the backend, the node (ids for the groups it opens) and the item
/// reader (a page's items), nothing else; cheap to clone (the item and
/// graph services hold one for the ops their writes carry).
#[derive(Clone)]
pub struct NotificationService {
    backend: Arc<dyn Backend>,
    node: Arc<Node>,
    reader: Arc<ItemReader>,
}

impl NotificationService {
    pub(crate) fn new(backend: Arc<dyn Backend>, node: Arc<Node>, reader: Arc<ItemReader>) -> Self {
        Self { backend, node, reader }
    }

    /// Applies what `causes` do to the notifications, in one backend call
    /// (none when they notify no one): for a write that is not itself
    /// stored with them (a block's follows falling).
    pub(crate) async fn notify(&self, causes: &[Cause<'_>]) -> Result<()> {
        let ops = self.ops(causes)?;
        if !ops.is_empty() {
            self.backend.notify(&ops).await?;
        }
        Ok(())
    }

    /// The notification ops of `causes` (ids drawn now), for the write
    /// that carries them.
    pub(crate) fn ops(&self, causes: &[Cause<'_>]) -> Result<Vec<Op>> {
        let now = self.node.clock.now();
        let mut failed = None;
        let mut ops = Vec::new();
        for cause in causes {
            ops.extend(tideway_core::notify::ops(
                cause,
                |id| key_time(id.0),
                || {
                    self.node.ids.next(now).unwrap_or_else(|e| {
                        failed.get_or_insert(e);
                        0
                    })
                },
            ));
        }
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(ops),
        }
    }

    /// Re-evaluates whether `a` and `b` are hidden from each other's
    /// notifications after a block, unblock, mute or unmute between them.
    pub(crate) async fn hidden(&self, a: UserId, b: UserId) -> Result<()> {
        let (only_b, only_a) = ([b], [a]);
        let (rels, back) = tokio::join!(self.backend.relations(a, &only_b), self.backend.relations(b, &only_a));
        let (rels, back) = (rels?, back?);
        let (Some(ab), Some(ba)) = (rels.first(), back.first()) else { return Ok(()) };
        let blocked = ab.blocked_either_way();
        let mut ops = tideway_core::notify::ops(
            &Cause::Hidden { user: a, actor: b, hidden: blocked || ab.muting },
            |_| Millis(0),
            || 0,
        );
        ops.extend(tideway_core::notify::ops(
            &Cause::Hidden { user: b, actor: a, hidden: blocked || ba.muting },
            |_| Millis(0),
            || 0,
        ));
        self.backend.notify(&ops).await?;
        Ok(())
    }

    /// Gives notifications to everything stored that notifies someone:
    /// items, follows and reactions stored before notifications existed,
    /// or written by `tideway import`. Idempotent (an event that stands is
    /// kept as it is), so it may run again, and beside nodes that serve:
    /// what they write meanwhile comes with its own. Events about a
    /// deleted item stay out (its delete took them). A reaction is placed
    /// at its item's time: no engine keeps a reaction's. `progress` is
    /// called after every page.
    pub async fn backfill(&self, mut progress: impl FnMut(&Backfilled)) -> Result<Backfilled> {
        let mut done = Backfilled::default();
        for start in [CausePos::Items(None), CausePos::Follows(None), CausePos::Reactions(None)] {
            let mut pos = start;
            loop {
                let page = self.backend.stored_causes(&pos, BACKFILL_PAGE).await?;
                let Some(last) = page.last() else { break };
                pos = last.pos();
                let ops = self.backfill_ops(&page, &mut done).await?;
                for chunk in ops.chunks(BACKFILL_OPS) {
                    self.backend.notify(chunk).await?;
                }
                done.ops += ops.len() as u64;
                progress(&done);
            }
        }
        Ok(done)
    }

    /// The notification ops of one page of stored causes.
    async fn backfill_ops(&self, page: &[StoredCause], done: &mut Backfilled) -> Result<Vec<Op>> {
        // The items these name (parents, originals, reacted to): their
        // authors, and whether they were deleted.
        let mut named: Vec<u64> = page
            .iter()
            .flat_map(|c| match c {
                StoredCause::Item(i) => vec![i.reply_to, i.repost_of],
                StoredCause::Reaction { item, .. } => vec![Some(*item)],
                StoredCause::Follow { .. } => vec![],
            })
            .flatten()
            .map(|i| i.0)
            .collect();
        named.sort_unstable();
        named.dedup();
        let records = self.backend.records(&named).await?;
        let live_author: HashMap<ItemId, UserId> = records
            .into_iter()
            .flatten()
            .filter_map(|r| match r {
                tideway_store::Record::Item(i) if !i.deleted => Some((i.id, i.author)),
                _ => None,
            })
            .collect();
        let live = |id: Option<ItemId>| id.and_then(|i| live_author.get(&i).copied());
        let mut causes = Vec::with_capacity(page.len());
        for c in page {
            match c {
                StoredCause::Item(item) => {
                    done.items += 1;
                    causes.push(Cause::Item {
                        item,
                        parent_author: live(item.reply_to),
                        original_author: live(item.repost_of),
                        stands: !item.deleted,
                    });
                }
                StoredCause::Follow { from, to, since } => {
                    done.follows += 1;
                    causes.push(Cause::Follow { from: *from, to: *to, at: *since, stands: true });
                }
                StoredCause::Reaction { item, user, kind } => {
                    done.reactions += 1;
                    if let Some(author) = live(Some(*item)) {
                        let at = key_time(item.0);
                        causes.push(Cause::Reaction { item: *item, author, user: *user, kind, at, stands: true });
                    }
                }
            }
        }
        // A deleted item's notifications fell with it: only its own
        // `Forget` is kept (a delete done before notifications existed).
        let mut ops = self.ops(&causes)?;
        ops.retain(|op| !matches!(op, Op::Fall { .. }));
        Ok(ops)
    }

    /// A page of `user`'s notification groups, newest first, below the
    /// `before` cursor; each group's item hydrated for the user.
    pub async fn page(&self, user: UserId, limit: Option<usize>, before: Option<&str>) -> Result<NotificationsPage> {
        let limit = page_limit(limit)?;
        let scope = FeedScope::Notifications(user.0);
        let before = before.map(|c| Cursor::decode(c, &scope)).transpose()?.map(|c| (Millis(c.key as i64), c.aux));
        let mut page = self.backend.notifications(user, before, limit + 1).await?;
        let more = page.groups.len() > limit;
        page.groups.truncate(limit);
        let next_cursor = if more {
            page.groups.last().map(|g| Cursor { key: g.latest_at.0 as u64, aux: g.id }.encode(&scope))
        } else {
            None
        };
        // The page's items, read and hydrated in one call each.
        let mut ids: Vec<ItemId> = page.groups.iter().filter_map(|g| g.verb.item()).collect();
        ids.sort_unstable();
        ids.dedup();
        let items: Vec<_> = self.reader.live_items(&ids).await?.into_iter().flatten().collect();
        let views: HashMap<ItemId, _> =
            self.reader.hydrate(items, Some(user)).await?.into_iter().map(|v| (v.item.id, v)).collect();
        let groups = page
            .groups
            .into_iter()
            .map(|g| NotificationGroup {
                item: g.verb.item().and_then(|i| views.get(&i).cloned()),
                seen: g.latest_at <= page.seen,
                read: g.latest_at <= page.read,
                id: g.id,
                verb: g.verb,
                actors: g.actors,
                actor_count: g.actor_count,
                latest_at: g.latest_at,
            })
            .collect();
        Ok(NotificationsPage { groups, unseen: page.unseen, unread: page.unread, next_cursor })
    }

    /// Moves `user`'s `seen` or `read` mark forward: to group `up_to`'s
    /// `latest_at`, or to the newest group's. `NotFound` when `up_to` is
    /// not one of the user's groups.
    pub async fn mark(&self, user: UserId, mark: Mark, up_to: Option<u64>) -> Result<()> {
        if self.backend.mark_notifications(user, mark, up_to).await? {
            Ok(())
        } else {
            Err(ServiceError::NotFound(format!(
                "group {} is not one of user {user}'s notification groups",
                up_to.unwrap_or_default()
            )))
        }
    }
}
