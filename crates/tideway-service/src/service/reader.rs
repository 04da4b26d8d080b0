//! Reading items and what a page shows beside them (counts, the viewer's
//! marks, bodies a backend keeps apart): the one read path every concern
//! that shows items shares.

use crate::error::{Result, ServiceError};
use crate::view::ItemView;
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Relation, UserId, Visibility};
use tideway_store::Backend;

/// What [`ItemReader::access`] finds between a user and an item.
pub(crate) struct Access {
    /// The item's visibility lets the user see it.
    pub visible: bool,
    /// A block stands between the user and the item's author.
    pub blocked: bool,
}

/// Reads items and hydrates them, and decides who may see one; holds only
/// the backend.
pub struct ItemReader {
    backend: Arc<dyn Backend>,
}

impl ItemReader {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// The item `id`, or 404 when it is unknown or deleted.
    pub(crate) async fn live_item(&self, id: ItemId) -> Result<Arc<Item>> {
        match self.load_item(id).await? {
            Some(i) if !i.deleted => Ok(i),
            _ => Err(ServiceError::NotFound(format!("item {id} does not exist or was deleted"))),
        }
    }

    pub(crate) async fn relation(&self, user: UserId, other: UserId) -> Result<Relation> {
        if user == other {
            return Ok(Relation::default());
        }
        Ok(self.backend.relations(user, &[other]).await?.pop().unwrap_or_default())
    }

    /// Whether a block stands between `user` and `other` (either way), read
    /// from `other`'s side: their own blocks and blockers. Many users acting
    /// on one author's items then read the same rows, which a lazy store
    /// loads once, where each user's own side would load every user's.
    pub(crate) async fn blocked_between(&self, user: UserId, other: UserId) -> Result<bool> {
        if user == other {
            return Ok(false);
        }
        let rel = self.backend.relations_unfollowed(other, &[user]).await?.pop().unwrap_or_default();
        Ok(rel.blocked_either_way())
    }

    /// Whether `user` may see `item`, and whether a block separates them
    /// from its author. Only a followers-only item that does not name
    /// `user` needs their follow, read from their side; everything else is
    /// read from the author's ([`Self::blocked_between`]).
    pub(crate) async fn access(&self, user: UserId, item: &Item) -> Result<Access> {
        if item.visibility == Visibility::Followers && user != item.author && !item.mentions_user(user) {
            let rel = self.relation(user, item.author).await?;
            return Ok(Access {
                visible: item.visible_to(Some(user), rel.following),
                blocked: rel.blocked_either_way(),
            });
        }
        Ok(Access {
            visible: item.visible_to(Some(user), false),
            blocked: self.blocked_between(user, item.author).await?,
        })
    }

    pub(crate) async fn load_item(&self, id: ItemId) -> Result<Option<Arc<Item>>> {
        Ok(match self.backend.records(&[id.0]).await?.pop().flatten() {
            Some(tideway_store::Record::Item(i)) => Some(i),
            _ => None,
        })
    }

    /// The items named by `ids`, in order; `None` for unknown or deleted ones.
    pub(crate) async fn live_items(&self, ids: &[ItemId]) -> Result<Vec<Option<Arc<Item>>>> {
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

    pub(crate) async fn hydrate_one(&self, item: Arc<Item>, viewer: Option<UserId>) -> Result<ItemView> {
        self.hydrate(vec![item], viewer)
            .await?
            .pop()
            .ok_or_else(|| ServiceError::NotFound("item vanished while being read".into()))
    }

    /// Counts and viewer marks for many items in one storage call.
    pub(crate) async fn hydrate(&self, items: Vec<Arc<Item>>, viewer: Option<UserId>) -> Result<Vec<ItemView>> {
        let known = vec![None; items.len()];
        self.hydrate_known(items, known, viewer).await
    }

    /// [`Self::hydrate`], given the counts and marks already read of some
    /// items (`known`, in order): one storage call for the others, none if
    /// there are none.
    pub(crate) async fn hydrate_known(
        &self,
        items: Vec<Arc<Item>>,
        mut known: Vec<Option<crate::feed::Hydrated>>,
        viewer: Option<UserId>,
    ) -> Result<Vec<ItemView>> {
        let ids: Vec<ItemId> = items.iter().zip(&known).filter(|(_, k)| k.is_none()).map(|(i, _)| i.id).collect();
        if !ids.is_empty() {
            let read = self.backend.hydration(&ids, viewer).await?;
            debug_assert_eq!(read.len(), ids.len(), "one hydration per item");
            let mut read = read.into_iter();
            for k in known.iter_mut().filter(|k| k.is_none()) {
                *k = read.next();
            }
        }
        let hydration = known.into_iter().map(|k| k.unwrap_or_default());
        // Bodies a backend left out of the records (the embedded store keeps
        // them on disk): one call for the page; none when every record came
        // whole (the SQL store reads them in the same query).
        let stripped: Vec<ItemId> =
            items.iter().filter(|i| tideway_store::is_stripped(&i.body)).map(|i| i.id).collect();
        let mut bodies: std::collections::HashMap<ItemId, tideway_core::Body> = std::collections::HashMap::new();
        if !stripped.is_empty() {
            for (id, b) in stripped.iter().zip(self.backend.bodies(&stripped).await?) {
                if let Some(b) = b {
                    bodies.insert(*id, b);
                }
            }
        }
        Ok(items
            .into_iter()
            .zip(hydration)
            .map(|(item, (counts, viewer))| ItemView {
                body: if bodies.is_empty() { None } else { bodies.remove(&item.id) },
                item,
                counts,
                viewer,
            })
            .collect())
    }
}
