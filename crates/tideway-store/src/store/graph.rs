//! [`Graph`] on a [`Store`]: follows, blocks, mutes, lists and counts.
//! What a follow does is decided by [`rules::follow`].

use super::Store;
use super::journal::{Journal, disk};
use crate::change::{Change, EdgeKind};
use crate::rules::{self, FollowFact};
use crate::state::Unit;
use crate::traits::*;
use async_trait::async_trait;
use tideway_core::notify::Op;
use tideway_core::{Millis, Relation, UserId};

#[async_trait]
impl<J: Journal> Graph for Store<J> {
    async fn follow_many_notifying(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
        notify: &[Op],
    ) -> Result<Vec<FollowStatus>> {
        self.commit(|st, need| {
            let following = st.user_or_need(Unit::Head(user), need).map_or(0, |u| u.head.following as usize);
            let decided = rules::follow(targets, at, following, max_following, |t| {
                if let Some(since) = st.follow_since(user, t, need) {
                    FollowFact::Following(since)
                } else if st.relation_of(user, t, need).blocked_either_way() {
                    FollowFact::Blocked
                } else {
                    FollowFact::Free
                }
            });
            let mut changes: Vec<Change> = decided
                .new
                .iter()
                .map(|&t| Change::PutEdge { kind: EdgeKind::Follow, from: user, to: t, since: at })
                .collect();
            // The new follows' notifications in the same journal write.
            changes.extend(rules::notify_of_new(notify, &decided.new).map(Change::Notify));
            let statuses = decided.statuses;
            Ok((statuses, changes))
        })
        .await
    }

    async fn unfollow_notifying(&self, user: UserId, target: UserId, notify: &[Op]) -> Result<bool> {
        self.commit(|st, need| match st.follow_since(user, target, need) {
            Some(since) => {
                let mut changes = vec![Change::DelEdge { kind: EdgeKind::Follow, from: user, to: target, since }];
                changes.extend(notify.iter().cloned().map(Change::Notify));
                Ok((true, changes))
            }
            None => Ok((false, vec![])),
        })
        .await
    }

    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.commit(|st, need| {
            let mut changes = Vec::new();
            let blocking = st.has_edge(EdgeKind::Block, user, target, need);
            if on {
                if !blocking {
                    changes.push(Change::PutEdge { kind: EdgeKind::Block, from: user, to: target, since: at });
                }
                for (a, b) in [(user, target), (target, user)] {
                    if let Some(since) = st.follow_since(a, b, need) {
                        changes.push(Change::DelEdge { kind: EdgeKind::Follow, from: a, to: b, since });
                    }
                }
            } else if blocking {
                changes.push(Change::DelEdge { kind: EdgeKind::Block, from: user, to: target, since: at });
            }
            Ok(((), changes))
        })
        .await
    }

    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.commit(|st, need| {
            let has = st.has_edge(EdgeKind::Mute, user, target, need);
            let changes = match (on, has) {
                (true, false) => vec![Change::PutEdge { kind: EdgeKind::Mute, from: user, to: target, since: at }],
                (false, true) => vec![Change::DelEdge { kind: EdgeKind::Mute, from: user, to: target, since: at }],
                _ => vec![],
            };
            Ok(((), changes))
        })
        .await
    }

    async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
        self.read(|st, need| {
            let f = st.user_or_need(Unit::Out(user), need).map(|u| u.following.iter().map(|e| e.0).collect());
            // A reader's page next asks who blocks them: loaded in the same
            // read of the disk.
            if !need.is_empty() && !st.loaded(Unit::BlockedBy(user)) {
                need.push(Unit::BlockedBy(user));
            }
            f.unwrap_or_default()
        })
        .await
    }

    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>> {
        let page = match which {
            ListKind::Following => {
                self.read(|st, need| {
                    let Some(u) = st.user_or_need(Unit::Out(user), need) else { return Some(vec![]) };
                    Some(u.following_by_time.iter_before_rev(after.as_ref()).take(limit).copied().collect())
                })
                .await?
            }
            ListKind::Followers => {
                self.followers_in_memory(user, |f| f.iter_before_rev(after.as_ref()).take(limit).copied().collect())
                    .await?
            }
        };
        let page = match page {
            Some(p) => p,
            None => self.read_off_runtime(limit, move |j| disk(j)?.followers_range(user, after, false, limit)).await?,
        };
        Ok(page.into_iter().map(|(since, id)| (id, since)).collect())
    }

    async fn followers_chunk(
        &self,
        user: UserId,
        after: Option<FollowerPos>,
        limit: usize,
    ) -> Result<Vec<FollowerPos>> {
        match self.followers_in_memory(user, |f| f.iter_after(after.as_ref()).take(limit).copied().collect()).await? {
            Some(chunk) => Ok(chunk),
            None => self.read_off_runtime(limit, move |j| disk(j)?.followers_range(user, after, true, limit)).await,
        }
    }

    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        // `followed_by` is the other user's side: their out edges load too
        // (a page's authors' follow lists: the graph is what memory keeps).
        self.read(|st, need| {
            others
                .iter()
                .map(|o| Relation {
                    followed_by: st.followed_by(user, *o).unwrap_or_else(|unit| {
                        need.push(unit);
                        false
                    }),
                    ..st.relation_of(user, *o, need)
                })
                .collect()
        })
        .await
    }

    async fn relations_unfollowed(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        // The viewer's own units only: no other user's follow list loads.
        self.read(|st, need| {
            let out = st.user_or_need(Unit::Out(user), need);
            let by = st.user_or_need(Unit::BlockedBy(user), need);
            others
                .iter()
                .map(|o| Relation {
                    blocking: out.is_some_and(|s| s.blocking.contains(o)),
                    blocked_by: by.is_some_and(|s| s.blocked_by.contains(o)),
                    muting: out.is_some_and(|s| s.muting.contains(o)),
                    ..Relation::default()
                })
                .collect()
        })
        .await
    }

    async fn counts(&self, user: UserId) -> Result<UserCounts> {
        self.read(|st, need| {
            st.user_or_need(Unit::Head(user), need)
                .map(|u| UserCounts { following: u.head.following, followers: u.head.followers, items: u.head.items })
                .unwrap_or_default()
        })
        .await
    }

    async fn health(&self) -> Result<()> {
        self.check_failed()?;
        self.journal.health()
    }

    async fn stats(&self) -> Result<StoreStats> {
        self.health().await?;
        let index = self.index_stats();
        let st = self.state.read();
        Ok(StoreStats {
            users: st.counters.users,
            items: st.counters.items_live,
            follows: st.counters.follows,
            pending_jobs: st.jobs.len(),
            oldest_job: st.jobs.oldest(),
            max_key: st.counters.max_key,
            index,
        })
    }
}
