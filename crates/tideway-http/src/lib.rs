//! The HTTP API v1 of tideway (axum).
//!
//! * [`router`](mod@router) lists the whole URL surface in one place.
//! * [`handlers`] are thin: extract, call one service method, map the answer.
//! * [`error::ApiError`] is the only error type at the edge: every handled
//!   case is a 4xx with a stable code, everything else an opaque 500/503
//!   logged once with its cause.
//! * [`extract`] owns every extractor rejection so that bad JSON, paths and
//!   queries get our error body, never axum's plain text.
//! * [`auth`] checks bearer tokens: server keys and HS256 user tokens.
//! * [`edge`] runs before every handler: request id and span, authentication
//!   once, [`ratelimit`], the RED metrics, the access log.
//! * [`serve`](mod@serve) is the connection loop: header timeout, connection cap,
//!   bounded shutdown, JSON for hyper's own parse errors.

pub mod auth;
pub mod dto;
pub mod edge;
pub mod error;
pub mod extract;
pub mod handlers;
pub mod openapi;
pub mod ratelimit;
pub mod router;
pub mod serve;
pub mod state;

pub use auth::Authenticator;
pub use ratelimit::RateLimits;
pub use router::{AppState, router};
pub use serve::{ServeOptions, serve};
