//! The domain of tideway, with no I/O: identifiers, time, items and their
//! validation, the visibility and hiding rules, opaque cursors, the sorted
//! merge of several sources, and the rule that decides which entry of a feed
//! an appearance of an item belongs to.
//!
//! Everything here is a pure type or function so that the storage backends,
//! the service and the reference model in the tests all share one meaning.

pub mod body;
pub mod cursor;
pub mod entry;
pub mod error;
pub mod ids;
pub mod item;
pub mod limits;
pub mod live;
pub mod merge;
pub mod notify;
pub mod posting;
pub mod promote;
pub mod time;

pub use body::Body;
pub use cursor::{Cursor, CursorEncoder, FeedScope, LiveCursor};
pub use entry::{Appearance, AppearanceKind, Entry, FollowStatus, ListKind, Relation};
pub use error::DomainError;
pub use ids::{IdGenerator, ItemId, Key, UserId};
pub use item::{Item, ItemKind, NewItem, ObjectRef, Visibility};
pub use posting::PostingFeed;
pub use time::Millis;
