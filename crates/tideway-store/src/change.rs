//! The unit of durability: every write is a list of [`Change`]s, persisted
//! atomically by the journal and then applied to the in-memory index.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Millis, UserId};

/// A follower's position in the followers of a user: followers are walked in
/// order of follow time, then id.
pub type FollowerPos = (Millis, UserId);
/// A directed edge kind of the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeKind {
    Follow,
    Block,
    Mute,
}

/// A stored record: an item, or the insertion of an item into one home.
/// Both are named by a key from the same id generator, so a feed position
/// resolves to exactly one record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Item(Arc<Item>),
    Insert { key: Key, user: UserId, item: ItemId },
}

/// A durable fan-out job: deliver `key` (an item of `author`) to the inboxes
/// of `author`'s followers. `cursor` is the last follower already delivered
/// (followers are walked in id order), so a restart resumes there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub key: Key,
    pub author: UserId,
    /// The last follower delivered to (`[since, id]`), if any.
    pub cursor: Option<FollowerPos>,
    pub created: Millis,
}

/// A promoted item: shown in home pages after every `every` organic entries
/// while `starts_at <= now < ends_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promotion {
    pub id: Key,
    pub item: ItemId,
    pub every: u32,
    pub starts_at: Millis,
    pub ends_at: Millis,
}

impl Promotion {
    /// Of `list`, the promotions running at `at`, by id.
    pub fn running(list: &[Promotion], at: Millis) -> Vec<Promotion> {
        let mut out: Vec<Promotion> = list.iter().filter(|p| p.runs_at(at)).cloned().collect();
        out.sort_unstable_by_key(|p| p.id);
        out
    }

    /// Whether it runs at `now` (`starts_at <= now < ends_at`).
    pub fn runs_at(&self, now: Millis) -> bool {
        self.starts_at <= now && now < self.ends_at
    }
}

/// A user's counters, kept whole so that a user's page of counts (and the
/// hot-author decision of every post) is one read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub following: u64,
    pub followers: u64,
    /// Non-deleted items authored.
    pub items: u64,
    /// The newest key in the user's outbox (deleted items keep their
    /// place there): 0 when it is empty, [`Head::NEWEST_UNKNOWN`] when the
    /// counters were stored before this was kept. An outbox merge skips a
    /// followee whose newest key cannot place (`Store::outbox_merge`).
    #[serde(default = "newest_unknown")]
    pub newest: Key,
}

fn newest_unknown() -> Key {
    Head::NEWEST_UNKNOWN
}

impl Head {
    /// `newest` of counters stored without it (it is then not known).
    pub const NEWEST_UNKNOWN: Key = Key::MAX;
}

/// Store-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Users named by any change.
    pub users: u64,
    /// Non-deleted items.
    pub items_live: u64,
    pub follows: u64,
    /// The largest item, insertion, promotion or session key (the id generator
    /// starts above it).
    pub max_key: Key,
}

/// One durable change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Creates an item.
    PutItem(Arc<Item>),
    /// Replaces a live item (a patch, or a soft delete with `deleted`).
    UpdateItem(Arc<Item>),
    PutInsert {
        key: Key,
        user: UserId,
        item: ItemId,
    },
    PutEdge {
        kind: EdgeKind,
        from: UserId,
        to: UserId,
        since: Millis,
    },
    DelEdge {
        kind: EdgeKind,
        from: UserId,
        to: UserId,
        /// When the edge was made (a journal that indexes follows by time
        /// finds the entry to remove with it).
        since: Millis,
    },
    PutJob(Job),
    DelJob(Key),
    /// `user` reacted to `item` with `kind` (`on`), or took it back.
    SetReaction {
        item: ItemId,
        user: UserId,
        kind: String,
        on: bool,
    },
    PutPromotion(Promotion),
    /// A user's counters after the changes before it (lazy journals keep
    /// them; derived by the store, never decided).
    PutHead(UserId, Head),
    /// The store-wide counters after the changes before it (likewise).
    PutCounters(Counters),
    /// A change to a user's notifications (their book decides its group).
    Notify(tideway_core::notify::Op),
    /// A user's mark moves forward to `to`.
    NotifyMark {
        user: UserId,
        mark: tideway_core::notify::Mark,
        to: Millis,
    },
    /// What a notification change wrote, for journals that keep books as
    /// rows (derived by the store, never decided).
    NoteRow(crate::notebook::Row),
    /// A live session, new or after a step.
    PutSession(tideway_core::live::Session),
}
