//! The follow graph, blocks and mutes.

#[allow(unused_imports)]
use super::*;

/// The follow graph, blocks and mutes.
#[async_trait]
pub trait Graph: Send + Sync {
    /// Follows every target in one storage round, and applies, in the same
    /// atomic write, the ops of `notify` whose user ([`Op::user`]) is a
    /// target it newly follows (`Followed`): a follow that stood already
    /// was stored with its own.
    ///
    /// [`Op::user`]: tideway_core::notify::Op::user
    async fn follow_many_notifying(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Vec<FollowStatus>>;
    /// [`Graph::follow_many_notifying`] with no notifications.
    async fn follow_many(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
    ) -> Result<Vec<FollowStatus>> {
        self.follow_many_notifying(user, targets, at, max_following, &[]).await
    }
    /// Removes the follow, with `notify` in the same atomic write when
    /// there was one to remove. Returns whether an edge was removed.
    async fn unfollow_notifying(
        &self,
        user: UserId,
        target: UserId,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool>;
    /// [`Graph::unfollow_notifying`] with no notifications.
    async fn unfollow(&self, user: UserId, target: UserId) -> Result<bool> {
        self.unfollow_notifying(user, target, &[]).await
    }
    /// Blocks (removing follows both ways) or unblocks.
    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()>;
    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()>;
    /// Everyone `user` follows (at most `graph.max_following`).
    async fn followees(&self, user: UserId) -> Result<Vec<UserId>>;
    /// [`Graph::followees`] and the version of that set, read together,
    /// when the engine keeps one: it moves at every change of the set, so
    /// a node may keep a copy of the list and check it with
    /// [`PageQuery::followees_of`]. The version covers the user's own
    /// relations too ([`OwnRelations`]: blocks both ways, mutes, whether
    /// anything was inserted into their home), read with the list where
    /// they are few enough to keep. No version (the provided answer, and
    /// the in-process engines', which keep no copies): keep no copy.
    async fn followees_versioned(&self, user: UserId) -> Result<Followees> {
        Ok(Followees { list: self.followees(user).await?, version: None, own: None })
    }
    /// The version of `user`'s followee set and own relations (see
    /// [`Graph::followees_versioned`]), when the engine keeps one.
    async fn followees_version(&self, _user: UserId) -> Result<Option<u64>> {
        Ok(None)
    }
    /// A page of a list, newest first, after the `(since, id)` position.
    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>>;
    /// Followers in order of follow after the position `after`: the chunks
    /// of a fan-out job.
    async fn followers_chunk(&self, user: UserId, after: Option<FollowerPos>, limit: usize)
    -> Result<Vec<FollowerPos>>;
    /// The relation of `user` to each of `others`.
    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>>;
    /// [`Graph::relations`] without the follows: the blocks both ways and
    /// the mutes, `following` and `followed_by` false. What a home page asks
    /// (it walks `F(user)` and knows whom the viewer follows); an engine in
    /// process answers it without reading the others' follow lists.
    async fn relations_unfollowed(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        let mut rels = self.relations(user, others).await?;
        for r in &mut rels {
            (r.following, r.followed_by) = (false, false);
        }
        Ok(rels)
    }
    async fn counts(&self, user: UserId) -> Result<UserCounts>;
    /// Store-wide counters; fails when storage cannot take writes (readiness).
    async fn stats(&self) -> Result<StoreStats>;
    /// Fails when storage cannot take writes and will not recover without a
    /// restart (liveness).
    async fn health(&self) -> Result<()>;
}

/// A follower's position in the followers of a user: followers are walked in
/// order of follow time, then id.
pub type FollowerPos = (Millis, UserId);
