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
//!    added to [`Backend`] and to `Durable` or `Shared` in [`crate::split`];
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

use crate::change::{Job, Promotion, Record};
use crate::error::StoreError;
use crate::inbox::{InboxRead, InboxStats};
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
pub use graph::*;
pub use hub::*;
pub use items::*;
pub use jobs::*;
pub use live::*;
pub use notifications::*;
pub use pages::*;
pub use shared::*;
pub use stats::*;

pub type Result<T> = std::result::Result<T, StoreError>;

/// Everything a backend provides: its durable half and its shared half
/// ([`Durable`](crate::Durable), [`Shared`](crate::Shared)), and what it is
/// like ([`Profiled`](crate::Profiled)).
pub trait Backend: crate::Durable + crate::Shared {}
impl<T: crate::Durable + crate::Shared> Backend for T {}
