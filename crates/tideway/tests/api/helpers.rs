//! Typed helpers: a server per test (own temp data dir), JSON requests.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::Duration;
use tideway_service::Config;
use tokio::sync::oneshot;

pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    pub token: Option<String>,
    shutdown: Option<oneshot::Sender<()>>,
    /// The server; it owns its data directory, removed once it has stopped
    /// (a server dropped with the test shuts down cleanly, and writes its
    /// inbox snapshot, after the test's own end).
    task: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

pub async fn spawn() -> TestServer {
    spawn_with(|_| {}).await
}

/// A server with authentication on: [`KEY`] as its server key, user tokens
/// signed with [`SECRET`].
pub async fn spawn_authed() -> TestServer {
    spawn_with(|c| {
        c.auth.server_keys = vec![KEY.into()];
        c.auth.jwt_secret = Some(SECRET.into());
    })
    .await
}

pub async fn spawn_with(edit: impl FnOnce(&mut Config)) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = Config::default();
    cfg.storage.data_dir = dir.path().to_path_buf();
    cfg.storage.sync = tideway_config::SyncKind::Buffer;
    edit(&mut cfg);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let served = tideway::server::serve(listener, cfg, None, async move {
            let _ = rx.await;
        })
        .await;
        drop(dir);
        served
    });
    TestServer {
        base: format!("http://{addr}"),
        client: reqwest::Client::new(),
        token: None,
        shutdown: Some(tx),
        task: Some(task),
    }
}

impl TestServer {
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.expect("join").expect("server ran cleanly");
        }
    }

    pub async fn raw(&self, method: Method, path: &str, body: Option<(&str, &str)>) -> (StatusCode, String) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some((ctype, b)) = body {
            req = req.header("content-type", ctype).body(b.to_owned());
        }
        let resp = req.send().await.expect("send");
        let status = resp.status();
        (status, resp.text().await.expect("body"))
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let text = body.map(|b| b.to_string());
        let (status, text) = self.raw(method, path, text.as_deref().map(|t| ("application/json", t))).await;
        let v = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text:?}"))
        };
        (status, v)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }
    pub async fn put(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::PUT, path, None).await
    }
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None).await
    }
    pub async fn patch(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PATCH, path, Some(body)).await
    }

    /// Creates a post and returns its id.
    pub async fn post_item(&self, author: u64, body: Value) -> String {
        let mut b = body;
        b["author"] = json!(author.to_string());
        let (s, v) = self.post("/v1/items", b).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        v["item"]["id"].as_str().expect("id").to_owned()
    }

    pub async fn follow(&self, u: u64, t: u64) {
        let (s, v) = self.put(&format!("/v1/users/{u}/following/{t}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }

    /// Waits until every accepted write has reached its inboxes.
    pub async fn drained(&self) {
        for _ in 0..500 {
            let (_, v) = self.get("/v1/stats").await;
            if v["fanout"]["pending"] == json!(0) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("fan-out did not drain");
    }

    /// Item ids of a home page.
    pub async fn home_ids(&self, u: u64, query: &str) -> (Vec<String>, Value) {
        let (s, v) = self.get(&format!("/v1/users/{u}/home?{query}")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let ids = v["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["item"]["id"].as_str().expect("id").to_owned())
            .collect();
        (ids, v)
    }
}

/// Asserts an error response: status, JSON body with the stable code.
pub fn assert_error(got: &(StatusCode, Value), status: u16, code: &str) {
    assert_eq!(got.0.as_u16(), status, "body: {}", got.1);
    assert_eq!(got.1["error"]["code"], json!(code), "body: {}", got.1);
    assert!(got.1["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "message missing: {}", got.1);
}

/// The server key and JWT secret of the tests that turn authentication on.
pub const KEY: &str = "server-key-0123456789";
pub const SECRET: &str = "jwt-secret-0123456789";

/// A user token (HS256, ten minutes) for `sub`, signed with [`SECRET`].
pub fn user_token(sub: u64) -> String {
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs() + 600;
    let claims = json!({"sub": sub.to_string(), "exp": exp});
    jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("encode")
}
