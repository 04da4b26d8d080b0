//! Storage for tideway: the narrow, batch-shaped traits the service calls
//! ([`Items`], [`Graph`], [`Jobs`], [`Inboxes`]), and [`Store`], which
//! implements them over an in-memory index plus a [`Journal`] that makes
//! every change durable before it is acknowledged.
//!
//! * With [`NoJournal`] a `Store` is the in-memory backend of the tests
//!   ([`MemoryStore`]).
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
//!
//! Where things are:
//!
//! * `traits/`: the storage traits, a file per concern with its types: [`Items`], [`Postings`],
//!   [`Graph`], [`Notifications`], [`Live`], [`Snapshots`], [`Jobs`], [`Activity`], [`HotAuthors`],
//!   [`Removals`], [`FactTokens`], [`Inboxes`], [`Hub`], [`Pages`]; the types they share beside
//!   them ([`Record`], [`Job`], [`Promotion`], [`SharedTrust`]); [`Backend`], [`Durable`] and
//!   [`Shared`] in its `mod.rs`.
//! * `error.rs`: [`StoreError`]: what went wrong, and what the caller can do about it.
//! * `change.rs`: [`Change`], the unit of durability, and the counters it writes.
//! * `rules.rs`: the rules every engine applies (create, follow, job progress, postings), decided once.
//! * `state/`: [`State`], the in-memory index, eager or lazy (loaded unit by unit): a
//!   file a layer (units and their loading, the budget, applying changes).
//! * `blocks.rs`: [`SortedBlocks`], the ordered sets the follow graph is kept in.
//! * `reactions.rs`: who reacted to what, and the counts.
//! * `inbox.rs`: [`InboxSet`], the home inboxes in memory.
//! * `components.rs`: the in-process activity, hot authors, job leases and event hub.
//! * `store/mod.rs`: [`Store`]: the index behind one lock, and the write path (decide, journal, apply, sync).
//! * `store/journal.rs`: [`Journal`] and [`Disk`], what a store writes to and reads back from.
//! * `store/caches.rs`: the bounded caches of records and bodies of a lazy store.
//! * `store/load.rs`: lazy loading of units, and the reads past the index to the caches and the disk.
//! * `store/items.rs`, `store/postings.rs`, `store/graph.rs`, `store/jobs.rs`: the [`Items`], [`Postings`],
//!   [`Graph`] and [`Jobs`] impls of [`Store`].
//! * `store/shared.rs`: the [`Activity`], [`HotAuthors`], [`Inboxes`] and [`Hub`] impls of [`Store`].
//! * `memory.rs`: the memory backend, [`MemoryStore`] = `Store<NoJournal>`.
//! * `split.rs`: [`Split`], one backend made of a durable and a shared engine.
//! * `trust.rs`: [`trust::Trusted`], the shared half under a lease, and writes without it.
//! * `copies/`: [`NodeCopies`], a node's copies (facts, records, followee lists) as a backend wrapping another.
//! * `forward.rs`: the macro that forwards every trait method, for [`Split`], [`NodeCopies`] and [`Counted`].
//! * `counted.rs`: [`Counted`], a backend that counts the calls made through it.
//! * `profile.rs`: [`Profile`], what a backend is like, as its engines report it.

pub mod blocks;
pub mod change;
pub mod components;
pub mod copies;
pub mod counted;
pub mod error;
mod forward;
pub mod inbox;
pub mod job_window;
pub mod memory;
pub mod notebook;
pub mod profile;
pub mod reactions;
pub mod residency;
pub mod rules;
pub mod sessions;
pub mod split;
pub mod state;
pub mod store;
pub mod traits;
pub mod trust;

pub use blocks::SortedBlocks;
pub use change::{Change, Counters, EdgeKind, Head};
pub use copies::NodeCopies;
pub use counted::Counted;
pub use error::{BoxError, Engine, StoreError, redact_url};
pub use inbox::{InboxRead, InboxSet, InboxStats};
pub use memory::{MemoryStore, NoJournal};
pub use profile::{Profile, Profiled};
pub use split::Split;
pub use state::{Applied, OUTBOX_TAIL, State, Unit, UnitData};
pub use store::{DEFAULT_BODY_CACHE, DEFAULT_CACHE_SIZE, Disk, Journal, Store, Ticket};
pub use traits::*;
