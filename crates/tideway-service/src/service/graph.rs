//! The follow graph: follows (with the inbox backfill), blocks, mutes,
//! the following and followers lists, relationships.

use super::ServiceOptions;
use super::effects::Effects;
use super::node::Node;
use super::notifications::NotificationService;
use crate::error::{Result, ServiceError};
use crate::view::*;
use std::sync::Arc;
use tideway_core::cursor::{Cursor, FeedScope};
use tideway_core::limits::{MAX_BATCH_FOLLOW, MAX_BATCH_IDS, page_limit};
use tideway_core::notify::Cause;
use tideway_core::{Millis, Relation, UserId};
use tideway_store::{Backend, FollowStatus, ListKind, Removal};

/// The follow graph: follows (with the inbox backfill), blocks, mutes, the
/// follow lists, relationships. Holds the backend, the node (the clock),
/// the notification ops follows carry and the after-effects of writes.
pub struct GraphService {
    backend: Arc<dyn Backend>,
    node: Arc<Node>,
    notifications: NotificationService,
    effects: Arc<Effects>,
    max_following: usize,
    /// How many keys a follow brings into an inbox (`timeline.max_len`).
    max_len: usize,
}

impl GraphService {
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        node: Arc<Node>,
        notifications: NotificationService,
        effects: Arc<Effects>,
        opts: &ServiceOptions,
    ) -> Self {
        Self { backend, node, notifications, effects, max_following: opts.max_following, max_len: opts.max_len }
    }

    /// Follows many targets in one storage round; brings their recent items
    /// into the follower's inbox.
    pub async fn follow_many(&self, user: UserId, targets: &[UserId]) -> Result<Vec<(UserId, FollowStatus)>> {
        if targets.len() > MAX_BATCH_FOLLOW {
            return Err(ServiceError::invalid("targets", format!("at most {MAX_BATCH_FOLLOW} targets per call")));
        }
        if targets.contains(&user) {
            return Err(ServiceError::invalid("targets", "a user cannot follow themselves"));
        }
        // The follows' notifications go in the same atomic write (the
        // backend keeps those of the targets it newly follows).
        let at = self.node.write_now()?;
        let causes: Vec<Cause<'_>> =
            targets.iter().map(|t| Cause::Follow { from: user, to: *t, at, stands: true }).collect();
        let notify = self.notifications.ops(&causes)?;
        let statuses = self.backend.follow_many_notifying(user, targets, at, self.max_following, &notify).await?;
        self.effects.signal(vec![tideway_store::Signal::Home(user)]).await;
        // Every follow that stands is backfilled, a repeat too. The
        // backfill runs after the follow is stored: a node killed between
        // the two (`kill -9`) leaves a follow whose posts from before it
        // never reach the inbox (their jobs read the followers before it),
        // and the client's retry of the unanswered request finds it
        // `Already` (issue 64). Merging an outbox again is idempotent.
        let mut new: Vec<UserId> = targets
            .iter()
            .zip(&statuses)
            .filter(|(_, s)| matches!(s, FollowStatus::Followed(_) | FollowStatus::Already(_)))
            .map(|(t, _)| *t)
            .collect();
        new.sort_unstable();
        new.dedup();
        if !new.is_empty()
            && let Err(e) = super::feeds::backfill_inbox(self.backend.as_ref(), user, &new, self.max_len).await
        {
            // The follows are stored; an inbox that missed the backfill would
            // lack their items, so it goes, and the next read rebuilds it.
            // If the shared half cannot be reached to drop it either, no
            // node trusts the shared half from the answer on
            // (`tideway_store::trust`); and if even that cannot be
            // recorded, the follow answers 503 and its retry backfills.
            tracing::warn!(user = user.0, error = %e, "follow backfill failed: dropping the inbox");
            if let Err(e) = self.backend.drop_inbox(user).await {
                tracing::warn!(user = user.0, error = %e, "an inbox missed a backfill: the shared half is no longer trusted");
                if let Err(e) = self.effects.distrust_shared().await {
                    metrics::counter!("tideway_inbox_backfill_lost_total").increment(1);
                    return Err(e);
                }
            }
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
                self.max_following
            ))),
        }
    }

    pub async fn unfollow(&self, user: UserId, target: UserId) -> Result<()> {
        // The follow's event falls in the same atomic write.
        let at = self.node.clock.now();
        let notify = self.notifications.ops(&[Cause::Follow { from: user, to: target, at, stands: false }])?;
        self.backend.unfollow_notifying(user, target, &notify).await?;
        self.effects.note_removals(&[Removal::Relation { user, other: target }]).await;
        self.effects.signal(vec![tideway_store::Signal::Home(user)]).await;
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
        let at = self.node.write_now()?;
        self.backend.set_block(user, target, on, at).await?;
        if on {
            self.effects
                .note_removals(&[
                    Removal::Relation { user, other: target },
                    Removal::Relation { user: target, other: user },
                ])
                .await;
        }
        self.effects.signal(vec![tideway_store::Signal::Home(user), tideway_store::Signal::Home(target)]).await;
        if on {
            // A block removes the follows both ways: their events fall.
            self.notifications
                .notify(&[
                    Cause::Follow { from: user, to: target, at, stands: false },
                    Cause::Follow { from: target, to: user, at, stands: false },
                ])
                .await?;
        }
        self.notifications.hidden(user, target).await
    }

    pub async fn set_mute(&self, user: UserId, target: UserId, on: bool) -> Result<()> {
        Self::check_not_self(user, target, "mute")?;
        self.backend.set_mute(user, target, on, self.node.write_now()?).await?;
        if on {
            self.effects.note_removals(&[Removal::Relation { user, other: target }]).await;
        }
        self.effects.signal(vec![tideway_store::Signal::Home(user)]).await;
        self.notifications.hidden(user, target).await
    }

    /// A page of a follow list (`limit` as asked: `None` is the default).
    pub async fn list(
        &self,
        user: UserId,
        which: ListKind,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<UserPage> {
        let limit = page_limit(limit)?;
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
}
