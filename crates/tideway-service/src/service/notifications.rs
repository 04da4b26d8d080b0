//! Notifications (SPEC section 2): what others did to a user or their
//! items, as groups, with `seen` and `read` marks.
//!
//! Every write that makes or unmakes an event (a post, reply, repost or
//! mention; a reaction; a follow; a delete; a block or a mute) is followed,
//! before it is answered, by the notification ops that
//! `tideway_core::notify::ops` derives from it, applied by the backend in
//! one atomic write per user. The ops are idempotent: a request retried
//! after a failure between the two writes (the cause stored, its
//! notification not) sends them again and completes them. A reaction hands
//! its ops to the backend with the reaction itself (`Items::set_reaction`),
//! which makes both durable with one wait.

use super::FeedService;
use crate::error::{Result, ServiceError};
use crate::view::{NotificationGroup, NotificationsPage};
use std::collections::HashMap;
use tideway_core::cursor::{Cursor, FeedScope};
use tideway_core::ids::key_time;
use tideway_core::limits::page_limit;
use tideway_core::notify::{Cause, Mark, Op};
use tideway_core::{ItemId, Millis, UserId};

impl FeedService {
    /// Applies what `causes` do to the notifications, in one backend call
    /// (none when they notify no one).
    pub(super) async fn notify(&self, causes: &[Cause<'_>]) -> Result<()> {
        let ops = self.notify_ops(causes)?;
        if !ops.is_empty() {
            self.backend.notify(&ops).await?;
        }
        Ok(())
    }

    /// The notification ops of `causes` (ids drawn now), for a write that
    /// applies them itself (a reaction journals its own with it).
    pub(super) fn notify_ops(&self, causes: &[Cause<'_>]) -> Result<Vec<Op>> {
        let now = self.clock.now();
        let mut failed = None;
        let mut ops = Vec::new();
        for cause in causes {
            ops.extend(tideway_core::notify::ops(
                cause,
                |id| key_time(id.0),
                || {
                    self.ids.next(now).unwrap_or_else(|e| {
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
    pub(super) async fn notify_hidden(&self, a: UserId, b: UserId) -> Result<()> {
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

    /// A page of `user`'s notification groups, newest first, below the
    /// `before` cursor; each group's item hydrated for the user.
    pub async fn notifications(
        &self,
        user: UserId,
        limit: Option<usize>,
        before: Option<&str>,
    ) -> Result<NotificationsPage> {
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
        let items: Vec<_> = self.live_items(&ids).await?.into_iter().flatten().collect();
        let views: HashMap<ItemId, _> =
            self.hydrate(items, Some(user)).await?.into_iter().map(|v| (v.item.id, v)).collect();
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
    pub async fn mark_notifications(&self, user: UserId, mark: Mark, up_to: Option<u64>) -> Result<()> {
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
