//! The feed service: the rules of every feed, written once over the storage
//! traits, plus the fan-out worker that fills inboxes in the background.
//!
//! * [`FeedService`] is what the HTTP layer calls: one method per operation.
//! * [`feed`] walks a feed page: the pushed inbox above its floor, the pulled
//!   outboxes below it, each key checked against the current state by the
//!   entry rule of `tideway_core::entry`.
//! * [`worker`] delivers items to followers' inboxes in durable, checkpointed
//!   chunks.

pub mod clock;
pub mod error;
pub mod feed;
pub mod health;
pub mod service;
mod signals;
pub mod snapshot;
pub mod touches;
pub mod view;
pub mod wakes;
pub mod worker;

pub use clock::{Clock, ManualClock, SkewedClock, SystemClock};
pub use error::ServiceError;
pub use service::stream::{HELD, HomeStream, StreamEvent};
pub use service::{Backfilled, FeedService, ServiceOptions};
pub use snapshot::SnapshotStats;
pub use tideway_config::Config;
pub use view::*;
pub use worker::{FanoutWorker, StepOutcome};
