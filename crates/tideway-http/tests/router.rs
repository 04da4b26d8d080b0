//! Router tests with `oneshot` (no socket): the OpenAPI document and the
//! router agree, and rejections are our JSON errors.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tideway_http::{AppState, Authenticator, router};
use tideway_service::config::AuthConfig;
use tideway_service::{FeedService, ServiceOptions, SystemClock};
use tideway_store::Store;
use tower::ServiceExt;

fn app() -> axum::Router {
    let backend = Arc::new(Store::in_memory(800));
    let svc = Arc::new(FeedService::new(backend, ServiceOptions::default(), Arc::new(SystemClock)).expect("service"));
    router(
        AppState { svc, auth: Arc::new(Authenticator::new(&AuthConfig::default())), metrics: None },
        Duration::from_secs(5),
    )
}

async fn send(method: Method, uri: &str, body: &str) -> (StatusCode, serde_json::Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .expect("request");
    let resp = app().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

#[tokio::test]
async fn every_documented_operation_is_routed() {
    let doc: serde_json::Value = serde_json::from_str(&tideway_http::openapi::document_json()).expect("valid JSON");
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 16, "{} paths", paths.len());
    for (path, ops) in paths {
        let uri = path.replace("{id}", "1").replace("{u}", "1").replace("{t}", "2");
        for method in ops.as_object().expect("ops").keys() {
            let m = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let (status, body) = send(m.clone(), &uri, "{}").await;
            let unrouted = status == StatusCode::METHOD_NOT_ALLOWED
                || (status == StatusCode::NOT_FOUND
                    && body["error"]["message"].as_str().is_some_and(|s| s.starts_with("no route")));
            assert!(!unrouted, "{m} {path} is documented but not routed ({status}: {body})");
            assert!(status.as_u16() < 500, "{m} {path}: {status} {body}");
        }
    }
}

#[tokio::test]
async fn rejections_are_json_errors() {
    let (s, v) = send(Method::POST, "/v1/items", "{nope").await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_argument")));
    let (s, v) = send(Method::GET, "/v1/users/1/home?limit=1000", "").await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_argument")));
    let big = format!("{{\"author\":\"1\",\"body\":{{\"t\":\"{}\"}}}}", "x".repeat(70_000));
    let (s, v) = send(Method::POST, "/v1/items", &big).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")));
}
