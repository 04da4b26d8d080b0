//! What every request goes through before its handler: a request id, a
//! tracing span, authentication (once), rate limits, the RED metrics and the
//! optional access log.

use crate::auth::{Actor, Authenticated, Authenticator};
use crate::error::ApiError;
use crate::ratelimit::{RateLimits, Verdict};
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::header::{AUTHORIZATION, HeaderName, HeaderValue, RETRY_AFTER};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tracing::Instrument;

pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");

/// The name of the request-duration histogram (its buckets are set where the
/// Prometheus recorder is built).
pub const DURATION_METRIC: &str = "tideway_http_request_duration_seconds";

/// The edge's shared parts.
pub struct Edge {
    pub auth: Arc<Authenticator>,
    pub limits: RateLimits,
    pub access_log: bool,
    /// Request ids: a random prefix per process and a counter.
    prefix: u32,
    counter: AtomicU64,
}

impl Edge {
    pub fn new(auth: Arc<Authenticator>, limits: RateLimits, access_log: bool) -> Self {
        Self { auth, limits, access_log, prefix: rand::random(), counter: AtomicU64::new(0) }
    }

    fn next_id(&self) -> String {
        format!("{:08x}-{:x}", self.prefix, self.counter.fetch_add(1, Ordering::Relaxed))
    }
}

/// Paths that are never rate limited and need no token: probes, metrics
/// and the API document.
fn is_operational(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics" | "/openapi.json")
}

/// A request id from the client is kept when it is short printable ASCII.
fn client_request_id(req: &Request) -> Option<String> {
    let v = req.headers().get(&REQUEST_ID)?.to_str().ok()?;
    (!v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_graphic())).then(|| v.to_owned())
}

pub async fn middleware(State(edge): State<Arc<Edge>>, mut req: Request, next: Next) -> Response {
    let started = Instant::now();
    let id = client_request_id(&req).unwrap_or_else(|| edge.next_id());
    let method = req.method().clone();
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_owned();
    let span = tracing::info_span!("request", id = %id, method = %method, route = %route);

    let header = req.headers().get(AUTHORIZATION).map(|h| h.to_str());
    let actor = match header {
        Some(Err(_)) => Err(ApiError::unauthenticated("Authorization header is not ASCII")),
        Some(Ok(h)) => edge.auth.authenticate(Some(h)),
        None => edge.auth.authenticate(None),
    };
    let address = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let verdict = if is_operational(req.uri().path()) {
        Verdict::Unlimited
    } else {
        edge.limits.check(actor.as_ref().ok().copied(), address)
    };
    let caller = actor.as_ref().ok().copied();
    req.extensions_mut().insert(Authenticated(actor));

    let mut resp = match verdict {
        Verdict::Refused { retry_after, .. } => {
            metrics::counter!("tideway_http_rate_limited_total").increment(1);
            let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            let mut r = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests; retry in {secs} s"),
            )
            .into_response();
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
            r
        }
        _ => next.run(req).instrument(span.clone()).await,
    };
    match verdict {
        Verdict::Allowed { limit, remaining } => {
            resp.headers_mut().insert(LIMIT.clone(), HeaderValue::from(limit));
            resp.headers_mut().insert(REMAINING.clone(), HeaderValue::from(remaining));
        }
        Verdict::Refused { limit, .. } => {
            resp.headers_mut().insert(LIMIT.clone(), HeaderValue::from(limit));
            resp.headers_mut().insert(REMAINING.clone(), HeaderValue::from(0u32));
        }
        Verdict::Unlimited => {}
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID.clone(), v);
    }
    let elapsed = started.elapsed();
    let status = resp.status().as_u16();
    record(&method, route.clone(), status, elapsed.as_secs_f64());
    if edge.access_log {
        let caller = match caller {
            Some(Actor::Server) => "server".to_owned(),
            Some(Actor::User(u)) => u.to_string(),
            None => "-".to_owned(),
        };
        let _enter = span.enter();
        tracing::info!(target: "tideway::access", %caller, status, micros = elapsed.as_micros() as u64, "request");
    }
    resp
}

fn record(method: &Method, route: String, status: u16, secs: f64) {
    let method = method.as_str().to_owned();
    metrics::counter!("tideway_http_requests_total", "method" => method.clone(), "route" => route.clone(),
        "status" => status.to_string())
    .increment(1);
    metrics::histogram!(DURATION_METRIC, "method" => method, "route" => route).record(secs);
}
