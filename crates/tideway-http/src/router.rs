//! The whole URL surface of the API, in one place.

use crate::error::ApiError;
use crate::handlers as h;
pub use crate::state::AppState;
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post, put};
use std::time::Duration;
use tower::ServiceBuilder;

/// Builds the router with its limits: request body size and a request
/// timeout answered `503 unavailable`.
pub fn router(state: AppState, request_timeout: Duration) -> Router {
    let edge = state.edge.clone();
    let api = Router::new()
        .route("/v1/items", post(h::create_item).get(h::get_items))
        .route("/v1/items/{id}", get(h::get_item).patch(h::patch_item).delete(h::delete_item))
        .route("/v1/items/{id}/reactions/{kind}/{user}", put(h::react).delete(h::unreact))
        .route("/v1/promotions", post(h::create_promotion))
        .route("/v1/users/{u}", get(h::user))
        .route("/v1/users/{u}/following", post(h::follow_many).get(h::following))
        .route("/v1/users/{u}/following/{t}", put(h::follow).delete(h::unfollow))
        .route("/v1/users/{u}/followers", get(h::followers))
        .route("/v1/users/{u}/relationships", get(h::relationships))
        .route("/v1/users/{u}/blocks/{t}", put(h::block).delete(h::unblock))
        .route("/v1/users/{u}/mutes/{t}", put(h::mute).delete(h::unmute))
        .route("/v1/users/{u}/home", get(h::home))
        .route("/v1/users/{u}/home/entries", post(h::insert_home))
        .route("/v1/users/{u}/home/stream", get(h::home_stream))
        .route("/v1/users/{u}/profile", get(h::profile))
        .route("/v1/users/{u}/mentions", get(h::mentions))
        .route("/v1/users/{u}/notifications", get(h::notifications))
        .route("/v1/users/{u}/notifications/seen", post(h::mark_seen))
        .route("/v1/users/{u}/notifications/read", post(h::mark_read))
        .route("/v1/live", post(h::create_session))
        .route("/v1/live/{id}/start", post(h::start_session))
        .route("/v1/live/{id}/end", post(h::end_session))
        .route("/v1/users/{u}/live", get(h::live))
        .route("/v1/tags/{tag}/feed", get(h::tag_feed))
        .route("/v1/objects/{type}/{object_id}/feed", get(h::object_feed))
        .route("/v1/stats", get(h::stats))
        .route("/healthz", get(h::healthz))
        .route("/readyz", get(h::readyz))
        .route("/metrics", get(h::metrics))
        .route("/openapi.json", get(crate::openapi::serve))
        .fallback(h::not_found)
        .method_not_allowed_fallback(h::method_not_allowed)
        // Writes on a node whose clock is off are refused before any handler.
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), clock_gate))
        .with_state(state);
    api.layer(
        ServiceBuilder::new()
            // Request id, span, authentication, rate limits, metrics, access log.
            .layer(axum::middleware::from_fn_with_state(edge, crate::edge::middleware))
            .layer(HandleErrorLayer::new(|_: tower::BoxError| async {
                ApiError::unavailable("the request took too long; retry later")
            }))
            .timeout(request_timeout)
            .layer(DefaultBodyLimit::max(tideway_core::limits::MAX_REQUEST_BYTES)),
    )
}

/// Answers a write `503 unavailable` while this node's clock is further from
/// the database's than `server.max_clock_offset` (its ids and stored times
/// would be wrong); reads pass.
async fn clock_gate(
    axum::extract::State(st): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let write = !matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD);
    if write && let Err(e) = st.svc.node().check_clock() {
        return ApiError::from(e).into_response();
    }
    next.run(req).await
}
