//! The in-memory index: edges, jobs and the per-item keys and counters the
//! feeds read, organised for those reads. It changes only through
//! [`State::apply`], on every write (and, for what the journal replays, at
//! start-up).
//!
//! Item records live here whole in the in-memory backend. A backend whose
//! journal keeps them ([`State::items_elsewhere`]) holds a record here only
//! from its write until it is durable; after that the journal and a bounded
//! cache serve it, and the index keeps 8 bytes of it (its outbox key) plus
//! its share of the counters.

use crate::blocks::SortedBlocks;
use crate::change::{Change, EdgeKind, Job, Promotion, Record};
use crate::reactions::ReactionIndex;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Millis, Relation, UserId};

/// Everything known about one user.
#[derive(Debug, Default)]
pub struct UserState {
    /// Whom this user follows, by id, with the time of each follow.
    pub following: SortedBlocks<(UserId, Millis)>,
    /// The same follows ordered by time, for the following list.
    pub following_by_time: SortedBlocks<(Millis, UserId)>,
    /// Followers ordered by time of follow: the followers list pages it
    /// newest first and fan-out chunks walk it oldest first with a
    /// resumable `(since, id)` cursor. Whether `other` follows this user is
    /// answered by `other`'s `following`, so no id-ordered copy is kept.
    pub followers: SortedBlocks<(Millis, UserId)>,
    pub blocking: FxHashSet<UserId>,
    pub blocked_by: FxHashSet<UserId>,
    pub muting: FxHashSet<UserId>,
    /// Keys of the items this user authored (reposts included), ascending.
    pub outbox: Vec<Key>,
    /// Insertion keys into this user's home, ascending.
    pub inserts: Vec<Key>,
    /// Non-deleted items authored.
    pub items: u64,
}

/// The whole in-memory index.
#[derive(Debug, Default)]
pub struct State {
    /// Home insertions, and items (all of them, or with
    /// [`State::items_elsewhere`] only those not yet durable).
    pub records: FxHashMap<Key, Record>,
    /// Item records are kept by the journal, not here: `records` holds an
    /// item only until it is durable, `idempotency` only its pending keys,
    /// and a replaced item is known to have been live.
    pub items_elsewhere: bool,
    pub users: FxHashMap<UserId, UserState>,
    /// Non-deleted reposts of each original.
    pub reposts: FxHashMap<ItemId, Vec<(UserId, ItemId)>>,
    /// The non-deleted repost of an original by a user.
    pub repost_by: FxHashMap<(UserId, ItemId), ItemId>,
    /// Non-deleted replies to each item.
    pub replies: FxHashMap<ItemId, u64>,
    pub idempotency: FxHashMap<(UserId, String), ItemId>,
    /// The earliest insertion key of an item into a user's home.
    pub first_insert: FxHashMap<(UserId, ItemId), Key>,
    pub jobs: BTreeMap<Key, Job>,
    pub items_live: u64,
    pub follows: u64,
    /// The largest item or insertion key.
    pub max_key: Key,
    /// Reactions, with their own sharded locks (changed under a read lock of
    /// the state, so a hot item does not serialise on the state lock).
    pub reactions: ReactionIndex,
    pub promotions: BTreeMap<Key, Promotion>,
}

fn insert_sorted(v: &mut Vec<Key>, k: Key) {
    match v.last() {
        Some(&last) if k > last => v.push(k),
        None => v.push(k),
        _ => {
            if let Err(pos) = v.binary_search(&k) {
                v.insert(pos, k);
            }
        }
    }
}

impl UserState {
    /// When this user followed `other`, if they do.
    pub fn follows(&self, other: UserId) -> Option<Millis> {
        self.following.get_by(|e| e.0.cmp(&other)).map(|e| e.1)
    }

    /// Drops the follow of `other` from this user's side; its time if any.
    fn unfollow(&mut self, other: UserId) -> Option<Millis> {
        let (_, since) = self.following.remove_by(|e| e.0.cmp(&other))?;
        self.following_by_time.remove(&(since, other));
        Some(since)
    }

    /// Heap bytes of this user's follow edges (both directions).
    pub fn graph_bytes(&self) -> usize {
        self.following.heap_bytes() + self.following_by_time.heap_bytes() + self.followers.heap_bytes()
    }
}

impl State {
    /// Heap bytes of the follow graph (walks every user: for reports, not
    /// for hot paths).
    pub fn graph_bytes(&self) -> usize {
        self.users.values().map(UserState::graph_bytes).sum()
    }

    pub fn user(&self, u: UserId) -> Option<&UserState> {
        self.users.get(&u)
    }

    fn user_mut(&mut self, u: UserId) -> &mut UserState {
        self.users.entry(u).or_default()
    }

    pub fn item(&self, id: ItemId) -> Option<&Arc<Item>> {
        match self.records.get(&id.0) {
            Some(Record::Item(i)) => Some(i),
            _ => None,
        }
    }

    pub fn has_edge(&self, kind: EdgeKind, from: UserId, to: UserId) -> bool {
        self.users.get(&from).is_some_and(|s| match kind {
            EdgeKind::Follow => s.follows(to).is_some(),
            EdgeKind::Block => s.blocking.contains(&to),
            EdgeKind::Mute => s.muting.contains(&to),
        })
    }

    pub fn follow_since(&self, from: UserId, to: UserId) -> Option<Millis> {
        self.users.get(&from).and_then(|s| s.follows(to))
    }

    pub fn relation(&self, u: UserId, other: UserId) -> Relation {
        match self.users.get(&u) {
            None => Relation::default(),
            Some(s) => Relation {
                following: s.follows(other).is_some(),
                followed_by: self.users.get(&other).is_some_and(|o| o.follows(u).is_some()),
                blocking: s.blocking.contains(&other),
                blocked_by: s.blocked_by.contains(&other),
                muting: s.muting.contains(&other),
            },
        }
    }

    /// Applies one change. Changes are idempotent (replaying one twice
    /// leaves the same state), which makes journal replay safe.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::PutItem(item) => {
                let prev = self.records.insert(item.id.0, Record::Item(item.clone()));
                let prev_live = match prev {
                    Some(Record::Item(p)) if !self.items_elsewhere => Some(!p.deleted),
                    _ => None,
                };
                self.put_item(item, prev_live);
            }
            Change::UpdateItem(item) => {
                let prev = self.records.insert(item.id.0, Record::Item(item.clone()));
                let prev_live = match prev {
                    Some(Record::Item(p)) => !p.deleted,
                    // Only a live item is ever updated.
                    _ => true,
                };
                self.put_item(item, Some(prev_live));
            }
            Change::PutInsert { key, user, item } => {
                self.max_key = self.max_key.max(key);
                self.records.insert(key, Record::Insert { key, user, item });
                insert_sorted(&mut self.user_mut(user).inserts, key);
                let first = self.first_insert.entry((user, item)).or_insert(key);
                *first = (*first).min(key);
            }
            Change::PutEdge { kind, from, to, since } => self.put_edge(kind, from, to, since),
            Change::DelEdge { kind, from, to } => self.del_edge(kind, from, to),
            Change::PutJob(job) => {
                self.jobs.insert(job.key, job);
            }
            Change::DelJob(key) => {
                self.jobs.remove(&key);
            }
            Change::SetReaction { item, user, kind, on } => {
                self.reactions.set(item, user, &kind, on);
            }
            Change::PutPromotion(p) => {
                self.max_key = self.max_key.max(p.id);
                self.promotions.insert(p.id, p);
            }
        }
    }

    /// Indexes an item already placed in `records`; `prev_live` says whether
    /// the record it replaced was live (`None`: there was none).
    fn put_item(&mut self, item: Arc<Item>, prev_live: Option<bool>) {
        self.max_key = self.max_key.max(item.id.0);
        let was_live = prev_live.unwrap_or(false);
        let is_live = !item.deleted;
        if prev_live.is_none() {
            insert_sorted(&mut self.user_mut(item.author).outbox, item.id.0);
            if let Some(k) = &item.idempotency_key {
                self.idempotency.insert((item.author, k.clone()), item.id);
            }
        }
        if was_live == is_live {
            return;
        }
        let delta: i64 = if is_live { 1 } else { -1 };
        self.count_item(&item, delta);
    }

    /// Loads one item's outbox key from a journal's persisted index (keys of
    /// one author in ascending order).
    pub fn load_outbox_key(&mut self, author: UserId, id: ItemId, live: bool) {
        self.max_key = self.max_key.max(id.0);
        let u = self.user_mut(author);
        insert_sorted(&mut u.outbox, id.0);
        if live {
            u.items += 1;
            self.items_live += 1;
        }
    }

    /// Drops the spare capacity of every outbox (after loading them).
    pub fn shrink_outboxes(&mut self) {
        for u in self.users.values_mut() {
            u.outbox.shrink_to_fit();
        }
    }

    /// Loads one live repost from a journal's persisted index.
    pub fn load_repost(&mut self, original: ItemId, author: UserId, repost: ItemId) {
        self.reposts.entry(original).or_default().push((author, repost));
        self.repost_by.insert((author, original), repost);
    }

    /// Loads one live reply from a journal's persisted index.
    pub fn load_reply(&mut self, parent: ItemId) {
        *self.replies.entry(parent).or_default() += 1;
    }

    /// Counts an item in or out (`delta` ±1): live items, reposts, replies.
    fn count_item(&mut self, item: &Item, delta: i64) {
        let is_live = delta > 0;
        self.items_live = self.items_live.saturating_add_signed(delta);
        let u = self.user_mut(item.author);
        u.items = u.items.saturating_add_signed(delta);
        if let Some(orig) = item.repost_of {
            let list = self.reposts.entry(orig).or_default();
            if is_live {
                list.push((item.author, item.id));
                self.repost_by.insert((item.author, orig), item.id);
            } else {
                list.retain(|(_, r)| *r != item.id);
                if list.is_empty() {
                    self.reposts.remove(&orig);
                }
                if self.repost_by.get(&(item.author, orig)) == Some(&item.id) {
                    self.repost_by.remove(&(item.author, orig));
                }
            }
        }
        if let Some(parent) = item.reply_to {
            let n = self.replies.entry(parent).or_default();
            *n = n.saturating_add_signed(delta);
        }
    }

    fn put_edge(&mut self, kind: EdgeKind, from: UserId, to: UserId, since: Millis) {
        match kind {
            EdgeKind::Follow => {
                let f = self.user_mut(from);
                let old = f.unfollow(to);
                f.following.insert((to, since));
                f.following_by_time.insert((since, to));
                let t = self.user_mut(to);
                if let Some(old) = old {
                    t.followers.remove(&(old, from));
                } else {
                    self.follows += 1;
                }
                self.user_mut(to).followers.insert((since, from));
            }
            EdgeKind::Block => {
                self.user_mut(from).blocking.insert(to);
                self.user_mut(to).blocked_by.insert(from);
            }
            EdgeKind::Mute => {
                self.user_mut(from).muting.insert(to);
                self.user_mut(to);
            }
        }
    }

    fn del_edge(&mut self, kind: EdgeKind, from: UserId, to: UserId) {
        match kind {
            EdgeKind::Follow => {
                if let Some(old) = self.user_mut(from).unfollow(to) {
                    self.user_mut(to).followers.remove(&(old, from));
                    self.follows = self.follows.saturating_sub(1);
                }
            }
            EdgeKind::Block => {
                self.user_mut(from).blocking.remove(&to);
                self.user_mut(to).blocked_by.remove(&from);
            }
            EdgeKind::Mute => {
                self.user_mut(from).muting.remove(&to);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::{ItemKind, Visibility};

    fn item(id: u64, author: u64, repost_of: Option<u64>) -> Arc<Item> {
        Arc::new(Item {
            id: ItemId(id),
            author: UserId(author),
            kind: if repost_of.is_some() { ItemKind::Repost } else { ItemKind::Post },
            body: tideway_core::Body::default(),
            visibility: Visibility::Public,
            tags: vec![],
            mentions: vec![],
            object: None,
            repost_of: repost_of.map(ItemId),
            reply_to: None,
            reply_to_author: None,
            idempotency_key: None,
            deleted: false,
        })
    }

    #[test]
    fn applying_twice_is_the_same_as_once() {
        let changes = vec![
            Change::PutItem(item(1, 1, None)),
            Change::PutItem(item(2, 2, Some(1))),
            Change::PutEdge { kind: EdgeKind::Follow, from: UserId(3), to: UserId(1), since: Millis(5) },
        ];
        let mut once = State::default();
        let mut twice = State::default();
        for c in &changes {
            once.apply(c.clone());
            twice.apply(c.clone());
            twice.apply(c.clone());
        }
        assert_eq!(once.follows, twice.follows);
        assert_eq!(once.items_live, 2);
        assert_eq!(twice.items_live, 2);
        assert_eq!(twice.reposts.get(&ItemId(1)).map(Vec::len), Some(1));
        assert_eq!(twice.users[&UserId(1)].outbox, vec![1]);
    }

    #[test]
    fn deleting_a_repost_removes_it_from_the_index() {
        let mut s = State::default();
        s.apply(Change::PutItem(item(1, 1, None)));
        s.apply(Change::PutItem(item(2, 2, Some(1))));
        let mut gone = (*item(2, 2, Some(1))).clone();
        gone.deleted = true;
        s.apply(Change::PutItem(Arc::new(gone)));
        assert!(!s.reposts.contains_key(&ItemId(1)));
        assert!(!s.repost_by.contains_key(&(UserId(2), ItemId(1))));
        assert_eq!(s.items_live, 1);
        assert_eq!(s.users[&UserId(2)].outbox, vec![2], "a tombstone keeps its outbox place");
    }
}
