//! The traits the service uses. Each is batch-shaped: one call serves a page
//! or a fan-out chunk.
//!
//! # Adding a storage concern
//!
//! What a new concern (postings, notifications, live sessions) touches, in
//! order (ARCHITECTURE.md, "Adding a storage concern", says more):
//!
//! 1. its domain types and read-time rules in `tideway-core`;
//! 2. the decisions every engine must agree on, as pure functions in
//!    [`crate::rules`];
//! 3. a trait here (batch-shaped, async, fallible, its contract in its doc),
//!    added to [`Backend`] and to [`Durable`] or [`Shared`] (this file);
//! 4. its methods spelled once in `forward_backend!` (`forward.rs`), so
//!    [`crate::Split`] and [`crate::Counted`] forward them;
//! 5. a conformance suite in `tideway-conformance/src/suites/`, named in its `suites!` list;
//! 6. the memory and embedded index: `Change` variants, `State` and its
//!    `Unit`s (or a range read on `Disk` for what is too long to load
//!    whole), and a file `store/<concern>.rs` deciding by the rule; state
//!    whose changes are decided where they apply (notifications' grouping)
//!    is a structure of its own (`notebook.rs`) that reports the rows it
//!    wrote, which `State::derived` hands the journal; a new kind of loaded
//!    unit is a `Holder` of the index's budget (`residency.rs`: admitted at
//!    install, its bytes estimated, let go in `State::evict`);
//! 7. the embedded disk (`tideway-store-fjall`): keyspace and codec, encoding,
//!    loading, a migration of existing directories;
//! 8. SQL (`tideway-store-sql`): a migration and a file `<concern>.rs`,
//!    dialect differences in `dialect.rs` only;
//! 9. Redis (`tideway-store-redis`) for shared state only;
//! 10. the service, the HTTP edge, the model test's reference, black-box
//!     tests and the docs.

use crate::error::StoreError;
use crate::inbox::{InboxRead, InboxStats};
use crate::profile::Profiled;
use async_trait::async_trait;
use std::sync::Arc;
use tideway_core::live::{Move, Session};
use tideway_core::merge::{Direction, KeyRange};
pub use tideway_core::{FollowStatus, ListKind};
use tideway_core::{Item, ItemId, Key, Millis, Relation, UserId, Visibility};

mod graph;
mod hub;
mod items;
mod jobs;
mod live;
mod notifications;
mod pages;
mod shared;
mod stats;
mod trust;
pub use graph::*;
pub use hub::*;
pub use items::*;
pub use jobs::*;
pub use live::*;
pub use notifications::*;
pub use pages::*;
pub use shared::*;
pub use stats::*;
pub use trust::*;

pub type Result<T> = std::result::Result<T, StoreError>;

/// Everything a backend provides: its durable half and its shared half
/// ([`Durable`], [`Shared`]), and what it is like ([`Profiled`]).
pub trait Backend: Durable + Shared {}
impl<T: Durable + Shared> Backend for T {}

/// The source of truth: items, graph, fan-out jobs.
pub trait Durable: Items + Pages + Postings + Notifications + Live + Graph + Jobs + Profiled {}
impl<T: Items + Pages + Postings + Notifications + Live + Graph + Jobs + Profiled> Durable for T {}

/// State shared by every node that only speeds pages up or decides who gets
/// pushes: inboxes, activity, hot-author marks, live feed snapshots; and the
/// event hub between the nodes.
pub trait Shared: Inboxes + Activity + HotAuthors + Hub + Snapshots + Removals + FactTokens + Profiled {}
impl<T: Inboxes + Activity + HotAuthors + Hub + Snapshots + Removals + FactTokens + Profiled> Shared for T {}
