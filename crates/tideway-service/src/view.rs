//! What the service returns: hydrated items, feed pages, users.

use std::sync::Arc;
use tideway_core::entry::Source;
use tideway_core::{AppearanceKind, Item, Millis, UserId};
pub use tideway_store::{ItemCounts, Promotion, ViewerMarks};

/// An item with its counts and, when there is a viewer, the viewer's marks.
#[derive(Debug, Clone)]
pub struct ItemView {
    pub item: Arc<Item>,
    /// The item's body when the record came without it (the embedded index
    /// may keep items without theirs); `None`: the item's own. A page does
    /// not touch a body it only passes on ([`ItemView::body`]).
    pub(crate) body: Option<tideway_core::Body>,
    pub counts: ItemCounts,
    pub viewer: Option<ViewerMarks>,
}

impl ItemView {
    /// The item's body.
    pub fn body(&self) -> &tideway_core::Body {
        self.body.as_ref().unwrap_or(&self.item.body)
    }
}

/// Views compare their items whole, as they did when every view held its
/// body, and the bodies they show: whether that body is held by the view or
/// by its item does not matter.
impl PartialEq for ItemView {
    fn eq(&self, other: &Self) -> bool {
        self.item == other.item
            && self.body() == other.body()
            && self.counts == other.counts
            && self.viewer == other.viewer
    }
}

/// Why an entry is on a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Authored,
    Repost,
    Inserted,
    /// A promotion woven in at read time; takes no cursor position.
    Promoted,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Authored => "authored",
            Self::Repost => "repost",
            Self::Inserted => "inserted",
            Self::Promoted => "promoted",
        }
    }
}

impl From<AppearanceKind> for Reason {
    fn from(k: AppearanceKind) -> Self {
        match k {
            AppearanceKind::Authored => Self::Authored,
            AppearanceKind::Repost => Self::Repost,
            AppearanceKind::Inserted => Self::Inserted,
        }
    }
}

/// One entry of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryView {
    /// The entry's place in its feed, as its cursor carries it (a promoted
    /// entry: the organic one's before it).
    pub key: tideway_core::Key,
    pub cursor: String,
    pub reason: Reason,
    pub item: ItemView,
    pub sources: Vec<Source>,
}

/// A page of a feed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    pub entries: Vec<EntryView>,
    pub next_cursor: Option<String>,
    pub prev_cursor: Option<String>,
}

/// A page request: at most one of `before` / `after`; `limit` as asked
/// (`None`: the default; checked by `tideway_core::limits::page_limit`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageRequest {
    pub limit: Option<usize>,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// A page of a follow list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserPage {
    pub users: Vec<(UserId, Millis)>,
    pub next_cursor: Option<String>,
}

/// `GET /v1/users/{u}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserView {
    pub id: UserId,
    pub following: u64,
    pub followers: u64,
    pub items: u64,
    pub hot: bool,
    pub active: bool,
    pub last_active_at: Option<Millis>,
}

/// `GET /v1/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsView {
    pub users: u64,
    pub items: u64,
    pub follows: u64,
    pub pending: u64,
    pub delivered_total: u64,
    /// Deliveries per second over the last 10 seconds.
    pub deliveries_per_sec: u64,
    pub oldest_pending_ms: u64,
    /// The inboxes' figures; `None` when the shared engine did not answer.
    pub inboxes: Option<tideway_store::InboxStats>,
    /// The embedded index's residency (`None` on other backends).
    pub index: Option<tideway_store::IndexStats>,
}

/// A notification group as a page shows it (SPEC section 2).
#[derive(Debug, Clone, PartialEq)]
pub struct NotificationGroup {
    pub id: u64,
    /// What happened (and to which item).
    pub verb: tideway_core::notify::Verb,
    /// The newest actors, newest first (at most 5).
    pub actors: Vec<UserId>,
    pub actor_count: u64,
    /// The item acted on (for a reply or a mention: the reply or the
    /// mentioning item), hydrated for the user; `None` for follows, or if
    /// it went while the page was read.
    pub item: Option<ItemView>,
    pub latest_at: Millis,
    pub seen: bool,
    pub read: bool,
}

/// A page of notification groups with the counts above the marks.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NotificationsPage {
    pub groups: Vec<NotificationGroup>,
    pub unseen: u64,
    pub unread: u64,
    pub next_cursor: Option<String>,
}

/// A page of a viewer's live feed (SPEC section 5): sessions as the
/// snapshot holds them, then replays.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LivePage {
    pub entries: Vec<tideway_core::live::Session>,
    pub next_cursor: Option<String>,
}
