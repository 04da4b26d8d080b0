//! GetStream's Activity Feeds REST API v1.0 as an edge of tideway (SPEC §9,
//! API.md "The GetStream-compatible API"): GetStream's vocabulary stays in
//! this crate. What it adds to the meaning of feeds is decided in core and
//! runs on every backend; this crate only speaks the wire.
//!
//! Built so far (issue 66, in progress), each with its tests, not yet
//! mounted on the server:
//!
//! | file | what |
//! |---|---|
//! | `error.rs` | [`GsError`]: GetStream's error body (`exception`, `detail`, `code`, `status_code`, `duration`) and its codes |
//! | `auth.rs` | [`Credentials`]: the `api_key` and the JWT of a call, checked in GetStream's order; server tokens' `resource`/`action`/`feed_id`, user tokens' `user_id` |
//! | `feed_id.rs` | [`FeedId`]: `group:id` as clients write it, its group's kind from the settings |
//! | `time.rs` | activity times: every form the clients send, parsed to microseconds; written back as GetStream writes them |
//! | `ids.rs` | activity ids: an item's key and the activity's time written as a UUID v1, read back exactly |

mod auth;
mod error;
mod feed_id;
mod ids;
mod time;

pub use auth::{Action, Caller, Credentials, Need, Resource};
pub use error::GsError;
pub use feed_id::FeedId;
pub use ids::{activity_id, parse_activity_id};
pub use time::{format_time, now_micros, parse_time};
