//! What every handler can reach: the service, the edge (authentication,
//! rate limits, the request log) and the metrics handle.

use crate::auth::Authenticator;
use crate::edge::Edge;
use crate::ratelimit::RateLimits;
use axum::extract::FromRef;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use tideway_service::FeedService;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub svc: Arc<FeedService>,
    /// Authentication, rate limits and the request log of the edge.
    pub edge: Arc<Edge>,
    /// The Prometheus recorder's handle (absent in tests that install none).
    pub metrics: Option<PrometheusHandle>,
}

impl AppState {
    pub fn new(
        svc: Arc<FeedService>,
        auth: Authenticator,
        limits: RateLimits,
        access_log: bool,
        metrics: Option<PrometheusHandle>,
    ) -> Self {
        Self { svc, edge: Arc::new(Edge::new(Arc::new(auth), limits, access_log)), metrics }
    }
}

impl FromRef<AppState> for Arc<Authenticator> {
    fn from_ref(s: &AppState) -> Self {
        s.edge.auth.clone()
    }
}
