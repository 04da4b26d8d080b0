//! The unit of durability: every write is a list of [`Change`]s, persisted
//! atomically by the journal and then applied to the in-memory index.

use crate::traits::{Job, Promotion};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tideway_core::{Item, ItemId, Key, Millis, UserId};

/// A directed edge kind of the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeKind {
    Follow,
    Block,
    Mute,
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
    /// The outbox's newest keys, ascending, in `recent[..recent_len]`: the
    /// newest [`Head::RECENT`], or the whole outbox when it holds fewer.
    /// `recent_len` is [`Head::RECENT_UNKNOWN`] when the counters were
    /// stored before these were kept. An outbox merge takes them in place
    /// of the outbox when they hold what it takes (`Store::outbox_merge`).
    #[serde(default)]
    pub recent: [Key; Head::RECENT],
    #[serde(default = "recent_unknown")]
    pub recent_len: u8,
}

fn newest_unknown() -> Key {
    Head::NEWEST_UNKNOWN
}

fn recent_unknown() -> u8 {
    Head::RECENT_UNKNOWN
}

impl Head {
    /// `newest` of counters stored without it (it is then not known).
    pub const NEWEST_UNKNOWN: Key = Key::MAX;
    /// How many of the outbox's newest keys the counters keep: a rebuild's
    /// merge of 100 keys from dozens of followees takes fewer than this
    /// from most of them, whose outboxes it then leaves on disk.
    pub const RECENT: usize = 8;
    /// `recent_len` of counters stored without them.
    pub const RECENT_UNKNOWN: u8 = u8::MAX;

    /// The outbox's newest keys, ascending (all of them when fewer than
    /// [`Head::RECENT`]), if they are known.
    pub fn recent(&self) -> Option<&[Key]> {
        self.recent.get(..usize::from(self.recent_len))
    }

    /// Notes that `key` entered the outbox (a key it holds is a no-op).
    pub fn note_key(&mut self, key: Key) {
        self.newest = self.newest.max(key);
        let Some(held) = self.recent() else { return };
        let n = held.len();
        let at = held.partition_point(|&k| k < key);
        if held.get(at) == Some(&key) {
            return;
        }
        if n < Self::RECENT {
            // All of the outbox is here: the key joins it.
            self.recent.copy_within(at..n, at + 1);
            self.recent[at] = key;
            self.recent_len += 1;
        } else if at > 0 {
            // Newer than the oldest kept: that one leaves (an older key
            // than all kept changes nothing they say).
            self.recent.copy_within(1..at, 0);
            self.recent[at - 1] = key;
        }
    }

    /// Learns the recent keys from the outbox's newest keys (`tail`,
    /// ascending: the whole outbox, or at least its newest
    /// [`Head::RECENT`]), if they were not known.
    pub fn learn_recent(&mut self, tail: &[Key]) {
        if self.recent_len == Self::RECENT_UNKNOWN {
            let from = tail.len().saturating_sub(Self::RECENT);
            let keep = &tail[from..];
            self.recent[..keep.len()].copy_from_slice(keep);
            self.recent_len = keep.len() as u8;
        }
    }
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
