//! A node's copies of users' followee lists and own relations, each kept
//! with the version of the set it was read at. A home page takes its
//! viewer's list here and has the version checked by the page's one call
//! (`PageQuery::followees_of`): the one validity rule of these copies.

use crate::OwnRelations;
use std::sync::Arc;
use tideway_core::UserId;

/// A node's copy of a user's followee list and own relations, at the
/// version they were read at.
#[derive(Clone)]
pub struct FolloweeCopy {
    pub version: u64,
    /// `F(u)`: whom the user follows, and the user, by id.
    pub list: Arc<[UserId]>,
    /// `None` when the engine reads none with the list (too many).
    pub own: Option<Arc<OwnRelations>>,
}

/// Weighs a copy by its ids and the slot.
#[derive(Clone)]
struct ListWeight;

impl quick_cache::Weighter<UserId, FolloweeCopy> for ListWeight {
    fn weight(&self, _: &UserId, c: &FolloweeCopy) -> u64 {
        let own = c.own.as_ref().map_or(0, |o| 64 + (o.blocks.len() + o.blocked_by.len() + o.mutes.len()) * 8);
        (96 + c.list.len() * 8 + own) as u64
    }
}

/// A node's copies of followee lists and own relations (blocks both ways,
/// mutes, whether the user has insertions), each with the version of the
/// set it was read at (`Graph::followees_versioned`), for engines that keep
/// one.
///
/// What is guaranteed: a home page never walks a followee list, nor
/// filters by own relations, older than a change of them acknowledged
/// before the page began, on any node. The page
/// takes its viewer's list here and has its version checked by the page's
/// one call (`PageQuery::followees_of`); when the version moved, the page
/// forgets the copy and begins again with the list read anew. A page that
/// writes from the list (an absent inbox rebuilt from the outboxes of
/// everyone in it) reads it anew first: a write is not undone by beginning
/// again. A follow change on this node forgets the copy at once (no second
/// walk then).
pub struct FolloweeCopies {
    lists: quick_cache::sync::Cache<UserId, FolloweeCopy, ListWeight>,
}

impl FolloweeCopies {
    /// Copies of about `bytes` (at least 64 KiB).
    pub fn new(bytes: u64) -> Self {
        let bytes = bytes.max(1 << 16);
        let lists = usize::try_from(bytes / 1024).unwrap_or(usize::MAX).max(16);
        FolloweeCopies { lists: quick_cache::sync::Cache::with_weighter(lists, bytes, ListWeight) }
    }

    /// The copy of `user`'s list and own relations.
    pub fn get(&self, user: UserId) -> Option<FolloweeCopy> {
        self.lists.get(&user)
    }

    pub fn put(&self, user: UserId, copy: FolloweeCopy) {
        self.lists.insert(user, copy);
    }

    /// Forgets `user`'s copy (the list changed, or may have).
    pub fn forget(&self, user: UserId) {
        self.lists.remove(&user);
    }
}
