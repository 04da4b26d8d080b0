//! Router tests with `oneshot` (no socket): the OpenAPI document and the
//! router agree, and rejections are our JSON errors.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tideway_config::AuthConfig;
use tideway_http::{AppState, Authenticator, RateLimits, router};
use tideway_service::{FeedService, ServiceOptions, SystemClock};
use tideway_store::Store;
use tower::ServiceExt;

async fn app() -> axum::Router {
    let backend = Arc::new(Store::in_memory(800));
    let svc =
        Arc::new(FeedService::new(backend, ServiceOptions::default(), Arc::new(SystemClock)).await.expect("service"));
    svc.ops.probe_engines().await; // what the server does before it listens
    router(
        AppState::new(svc, Authenticator::new(&AuthConfig::default()), RateLimits::unlimited(), false, None),
        Duration::from_secs(5),
    )
}

async fn send(method: Method, uri: &str, body: &str) -> (StatusCode, serde_json::Value) {
    call(&app().await, method, uri, body).await
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
    // serde would build a struct from an array of its fields: not here.
    for (m, uri, body) in [
        (Method::POST, "/v1/items", r#"["1"]"#),
        (Method::PATCH, "/v1/items/1", "[null, null]"),
        (Method::POST, "/v1/items", r#"{"author":"1","object":["book","1"]}"#),
        (Method::POST, "/v1/items", r#"{"author":"1","object":{"type":"book","id":"1","x":1}}"#),
    ] {
        let (s, v) = send(m, uri, body).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_argument")),
            "{body}: {v}"
        );
    }
    let (s, v) = send(Method::POST, "/v1/items", r#"{"author":"1","object":{"type":"book","id":"1"}}"#).await;
    assert_eq!((s, &v["item"]["object"]["id"]), (StatusCode::CREATED, &serde_json::json!("1")), "{v}");
    let big = format!("{{\"author\":\"1\",\"body\":{{\"t\":\"{}\"}}}}", "x".repeat(70_000));
    let (s, v) = send(Method::POST, "/v1/items", &big).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")));
}

/// A journal whose disk can "fill up": while `full` is set every sync fails,
/// as fjall's does on ENOSPC. Tickets count the batches written.
#[derive(Default)]
struct FillableJournal {
    full: Arc<std::sync::atomic::AtomicBool>,
    written: std::sync::atomic::AtomicU64,
    synced: std::sync::atomic::AtomicU64,
}

impl tideway_store::Journal for FillableJournal {
    fn write(&self, _: &[tideway_store::Change]) -> Result<tideway_store::Ticket, tideway_store::StoreError> {
        Ok(self.written.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1)
    }
    fn sync(&self, ticket: tideway_store::Ticket) -> Result<(), tideway_store::StoreError> {
        if self.full.load(std::sync::atomic::Ordering::SeqCst) {
            let enospc = std::io::Error::from_raw_os_error(28);
            return Err(tideway_store::StoreError::unavailable(tideway_store::Engine::Embedded, enospc));
        }
        self.synced.fetch_max(ticket, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }
    fn health(&self) -> Result<(), tideway_store::StoreError> {
        Ok(())
    }
    fn blocks(&self) -> bool {
        true
    }
    fn durable(&self) -> tideway_store::Ticket {
        self.synced.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn disk(&self) -> Option<&dyn tideway_store::Disk> {
        None
    }
}

async fn call(app: &axum::Router, method: Method, uri: &str, body: &str) -> (StatusCode, serde_json::Value) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    // An event stream never ends: its head says what it is.
    let ctype = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    if status.is_success() && ctype.starts_with("text/event-stream") {
        return (status, serde_json::json!({"content_type": ctype}));
    }
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

/// After a write fails to reach the disk, the index may hold changes that
/// were never acknowledged: the process must restart to reload from disk.
/// So writes answer 503 and liveness fails — also once space is freed —
/// and an orchestrator restarts it.
#[tokio::test]
async fn a_full_disk_fails_writes_and_liveness_until_a_restart() {
    let journal = FillableJournal::default();
    let full = journal.full.clone();
    let backend = Arc::new(Store::new(journal, tideway_store::State::eager(), 800));
    let svc =
        Arc::new(FeedService::new(backend, ServiceOptions::default(), Arc::new(SystemClock)).await.expect("service"));
    let state =
        AppState::new(svc.clone(), Authenticator::new(&AuthConfig::default()), RateLimits::unlimited(), false, None);
    let app = router(state, Duration::from_secs(5));
    assert_eq!(call(&app, Method::GET, "/readyz", "").await.0, StatusCode::SERVICE_UNAVAILABLE, "not probed yet");
    svc.ops.probe_engines().await;
    assert_eq!(call(&app, Method::POST, "/v1/items", r#"{"author":"1"}"#).await.0, StatusCode::CREATED);
    assert_eq!(call(&app, Method::GET, "/healthz", "").await.0, StatusCode::OK);
    assert_eq!(call(&app, Method::GET, "/readyz", "").await.0, StatusCode::OK);

    full.store(true, std::sync::atomic::Ordering::SeqCst);
    let (s, v) = call(&app, Method::POST, "/v1/items", r#"{"author":"1"}"#).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{v}");

    // Space is freed: the store still refuses, and says why (readiness as
    // the next probe finds it).
    full.store(false, std::sync::atomic::Ordering::SeqCst);
    svc.ops.probe_engines().await;
    for (method, uri, body) in [
        (Method::POST, "/v1/items", r#"{"author":"1"}"#),
        (Method::PUT, "/v1/users/1/following/2", ""),
        (Method::GET, "/healthz", ""),
        (Method::GET, "/readyz", ""),
    ] {
        let (s, v) = call(&app, method.clone(), uri, body).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
            "{method} {uri}: {v}"
        );
    }
    let (_, v) = call(&app, Method::GET, "/healthz", "").await;
    assert!(v["error"]["message"].as_str().is_some_and(|m| m.contains("restart")), "{v}");
    // Reads still answer meanwhile.
    assert_eq!(call(&app, Method::GET, "/v1/users/1/profile", "").await.0, StatusCode::OK);
}
