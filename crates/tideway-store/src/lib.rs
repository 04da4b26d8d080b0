//! Storage for tideway: the narrow, batch-shaped traits the service calls
//! ([`Items`], [`Graph`], [`Jobs`], [`Inboxes`]), and [`Store`], which
//! implements them over an in-memory index plus a [`Journal`] that makes
//! every change durable before it is acknowledged.
//!
//! * With [`NoJournal`] a `Store` is the in-memory backend of the tests.
//! * `tideway-store-fjall` provides the durable journal of the embedded
//!   default; the index is then lazy: it loads each part (a user's edges,
//!   an author's outbox, an item's reactions…) from the journal on first
//!   use, so start-up reads only a few counters.
//! * [`Split`] puts the durable traits and the shared ones (inboxes,
//!   activity, hot authors) on two engines: `tideway-store-redis` provides
//!   the shared half on Redis or a Redis Cluster.
//!
//! Every trait method is one call per page or per fan-out chunk (never one
//! call per item), so that a Redis pipeline or one SQL statement can
//! implement it in a remote backend.

pub mod blocks;
pub mod change;
pub mod components;
pub mod counted;
pub mod error;
mod forward;
pub mod inbox;
pub mod profile;
pub mod reactions;
pub mod rules;
pub mod split;
pub mod state;
pub mod store;
pub mod traits;

pub use blocks::SortedBlocks;
pub use change::{Change, Counters, EdgeKind, Head, Job, Promotion, Record};
pub use counted::Counted;
pub use error::{BoxError, Engine, StoreError};
pub use inbox::{InboxRead, InboxSet, InboxStats};
pub use profile::{Profile, Profiled};
pub use split::{Durable, Shared, Split};
pub use state::{Applied, State, Unit, UnitData};
pub use store::{DEFAULT_BODY_CACHE, Disk, Journal, NoJournal, Store, Stored, Ticket, is_stripped, stripped_body};
pub use traits::*;
