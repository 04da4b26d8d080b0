//! What a hostile client tries: reading what it may not see, silent and
//! half-sent connections, requests hyper refuses before any handler runs,
//! ids at the edges of the id space, floods, and tokens at the edges of
//! their validity.

use crate::helpers::*;
use jsonwebtoken::{EncodingKey, Header, encode};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_secs() as i64
}

fn jwt(claims: Value) -> String {
    encode(&Header::default(), &claims, &EncodingKey::from_secret(SECRET.as_bytes())).expect("encode")
}

async fn secured() -> TestServer {
    let mut s = spawn_authed().await;
    s.token = Some(KEY.into());
    s
}

fn addr(s: &TestServer) -> String {
    s.base.trim_start_matches("http://").to_owned()
}

/// Sends raw bytes on a new connection and reads the whole answer (the
/// server closes the connection after it).
async fn raw_exchange(s: &TestServer, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr(s)).await.expect("connect");
    c.write_all(request).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut out)).await.expect("answer in time").ok();
    String::from_utf8_lossy(&out).into_owned()
}

/// Status and JSON body of a raw HTTP/1.1 answer.
fn parse_answer(answer: &str) -> (u16, Value) {
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no status: {answer:?}"));
    let (_, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no body: {answer:?}"));
    (status, serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {answer:?}")))
}

#[tokio::test]
async fn a_home_insert_never_reveals_an_item_its_owner_cannot_see() {
    let mut s = secured().await;
    let followers_only = s.post_item(2, json!({"visibility": "followers", "body": {"secret": 1}})).await;
    let mentioned_only = s.post_item(2, json!({"visibility": "mentioned", "mentions": ["3"]})).await;
    let by_blocker = s.post_item(9, json!({"body": {"t": "blocker"}})).await;
    assert_eq!(s.put("/v1/users/9/blocks/7").await.0, StatusCode::OK);
    let public = s.post_item(2, json!({})).await;

    // As user 7 (a token), and as the server acting for user 7: the same.
    for token in [user_token(7), KEY.to_owned()] {
        s.token = Some(token);
        for id in [&followers_only, &mentioned_only, &by_blocker] {
            let got = s.post("/v1/users/7/home/entries", json!({"item": id})).await;
            assert_error(&got, 404, "not_found");
            assert!(!got.1.to_string().contains("secret"), "{}", got.1);
            assert!(got.1.get("entry").is_none(), "{}", got.1);
        }
        let (st, v) = s.post("/v1/users/7/home/entries", json!({"item": public})).await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!(v["entry"]["item"]["id"], json!(public));
    }
    // Once 7 follows 2, the followers-only item is theirs to see, and to insert.
    s.token = Some(KEY.into());
    s.follow(7, 2).await;
    let (st, v) = s.post("/v1/users/7/home/entries", json!({"item": followers_only})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    s.stop().await;
}

#[tokio::test]
async fn a_server_key_without_a_viewer_reads_every_non_deleted_item() {
    let mut s = secured().await;
    let followers_only = s.post_item(2, json!({"visibility": "followers"})).await;
    let mentioned_only = s.post_item(2, json!({"visibility": "mentioned", "mentions": ["5"]})).await;
    let deleted = s.post_item(2, json!({})).await;
    assert_eq!(s.delete(&format!("/v1/items/{deleted}")).await.0, StatusCode::NO_CONTENT);
    for id in [&followers_only, &mentioned_only] {
        let (st, v) = s.get(&format!("/v1/items/{id}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert_eq!(v["item"]["id"], json!(id));
        // With a viewer, the viewer's eyes: 3 sees neither.
        assert_error(&s.get(&format!("/v1/items/{id}?viewer=3")).await, 404, "not_found");
    }
    assert_error(&s.get(&format!("/v1/items/{deleted}")).await, 404, "not_found");
    let (st, v) = s.get(&format!("/v1/items?ids={followers_only},{deleted},{mentioned_only}")).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let ids: Vec<&str> = v["items"].as_array().expect("items").iter().map(|i| i["id"].as_str().expect("id")).collect();
    assert_eq!(ids, vec![followers_only.as_str(), mentioned_only.as_str()]);
    let (_, v) = s.get(&format!("/v1/items?ids={followers_only},{mentioned_only}&viewer=5")).await;
    assert_eq!(v["items"].as_array().expect("items").len(), 1, "5 is mentioned in one of them: {v}");
    // A user token still reads as its user.
    s.token = Some(user_token(3));
    assert_error(&s.get(&format!("/v1/items/{followers_only}")).await, 404, "not_found");
    s.stop().await;
}

#[tokio::test]
async fn created_at_ahead_of_the_clock_is_refused_beyond_the_skew_and_taken_as_now_within_it() {
    let s = spawn().await;
    let at = |secs: i64| Value::from(tideway_core::Millis((now_secs() + secs) * 1000).to_rfc3339());
    let got = s.post("/v1/items", json!({"author": "1", "created_at": at(3600)})).await;
    assert_error(&got, 400, "invalid_argument");
    assert!(got.1["error"]["message"].as_str().expect("message").contains("max_clock_skew"), "{}", got.1);
    assert_error(
        &s.post("/v1/items", json!({"author": "1", "created_at": "2089-01-01T00:00:00Z"})).await,
        400,
        "invalid_argument",
    );
    // Within the skew (10 s by default): accepted, and no later than now.
    let (st, v) = s.post("/v1/items", json!({"author": "1", "created_at": at(5)})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let created = tideway_core::Millis::parse_rfc3339("t", v["item"]["created_at"].as_str().expect("t")).expect("time");
    assert!(created.0 <= (now_secs() + 1) * 1000, "{v}");
    // A poller of the author's home still sees the next post.
    let (ids, page) = s.home_ids(1, "").await;
    assert_eq!(ids.len(), 1);
    let prev = page["prev_cursor"].as_str().expect("prev").to_owned();
    let next = s.post_item(1, json!({})).await;
    let (ids, _) = s.home_ids(1, &format!("after={prev}")).await;
    assert_eq!(ids, vec![next]);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_4096_imports_in_one_millisecond_all_get_ids() {
    let s = std::sync::Arc::new(spawn().await);
    let t = "2024-05-01T12:00:00.000Z";
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..520 {
                let (st, v) = s.post("/v1/items", json!({"author": (w + 1).to_string(), "created_at": t})).await;
                assert_eq!(st, StatusCode::CREATED, "{v}");
                got.push((v["item"]["id"].as_str().expect("id").to_owned(), v["item"]["created_at"].clone()));
            }
            got
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    let distinct: std::collections::HashSet<&String> = all.iter().map(|(id, _)| id).collect();
    assert_eq!(distinct.len(), 4160);
    let spilled = all.iter().filter(|(_, at)| at != &json!(t)).count();
    assert_eq!(spilled, 4160 - 4096, "exactly the ids beyond 4,096 move on");
    assert!(all.iter().all(|(_, at)| at == &json!(t) || at == &json!("2024-05-01T12:00:00.001Z")));
    let (id, _) = &all[4159];
    assert_eq!(s.get(&format!("/v1/items/{id}")).await.0, StatusCode::OK);
}

#[tokio::test]
async fn an_import_at_the_id_epoch_is_readable_patchable_and_deletable() {
    let s = spawn().await;
    let (st, v) = s.post("/v1/items", json!({"author": "1", "created_at": "2020-01-01T00:00:00.000Z"})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let id = v["item"]["id"].as_str().expect("id").to_owned();
    assert_ne!(id, "0");
    assert_eq!(s.get(&format!("/v1/items/{id}")).await.0, StatusCode::OK);
    let (st, v) = s.patch(&format!("/v1/items/{id}"), json!({"body": {"x": 1}})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(s.delete(&format!("/v1/items/{id}")).await.0, StatusCode::NO_CONTENT);
    assert_error(&s.get(&format!("/v1/items/{id}")).await, 404, "not_found");
    s.stop().await;
}

#[tokio::test]
async fn user_tokens_are_rate_limited_with_headers_and_server_keys_are_not() {
    let mut s = spawn_with(|c| {
        c.auth.server_keys = vec![KEY.into()];
        c.auth.jwt_secret = Some(SECRET.into());
        c.rate_limit.user_burst = 5;
        c.rate_limit.user_per_second = 1;
    })
    .await;
    let url = format!("{}/v1/users/1/home", s.base);
    let t1 = user_token(1);
    for left in (0..5).rev() {
        let r = s.client.get(&url).bearer_auth(&t1).send().await.expect("send");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["x-ratelimit-limit"], "5");
        assert_eq!(r.headers()["x-ratelimit-remaining"], left.to_string().as_str());
    }
    let r = s.client.get(&url).bearer_auth(&t1).send().await.expect("send");
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = r.headers()["retry-after"].to_str().expect("ascii").parse().expect("seconds");
    assert!((1..=2).contains(&retry), "retry-after {retry}");
    assert_eq!(r.headers()["x-ratelimit-remaining"], "0");
    let body: Value = r.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "rate_limited");
    // Another user is not affected; probes never are; the server key is unlimited.
    let r = s.client.get(format!("{}/v1/users/2/home", s.base)).bearer_auth(user_token(2)).send().await.expect("send");
    assert_eq!(r.status(), StatusCode::OK);
    s.token = None;
    for _ in 0..20 {
        assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
    }
    s.token = Some(KEY.into());
    for _ in 0..50 {
        let r = s.client.get(&url).bearer_auth(KEY).send().await.expect("send");
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().get("x-ratelimit-limit").is_none());
    }
    // The bucket refills: after the wait, user 1 may read again.
    tokio::time::sleep(Duration::from_secs(retry)).await;
    let r = s.client.get(&url).bearer_auth(&t1).send().await.expect("send");
    assert_eq!(r.status(), StatusCode::OK);
    s.stop().await;
}

#[tokio::test]
async fn the_address_limit_when_configured_covers_unauthenticated_callers() {
    let s = spawn_with(|c| {
        c.auth.jwt_secret = Some(SECRET.into());
        c.rate_limit.address_burst = 3;
        c.rate_limit.address_per_second = 1;
    })
    .await;
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(s.get("/v1/users/1/home").await.0.as_u16());
        }
        v
    };
    assert_eq!(statuses, vec![401, 401, 401, 429]);
    s.stop().await;
}

#[tokio::test]
async fn jwt_expiry_leeway_not_before_and_a_case_insensitive_scheme() {
    let s = secured().await;
    let url = format!("{}/v1/users/1/home", s.base);
    let send = |auth: String| {
        let c = s.client.clone();
        let url = url.clone();
        async move { c.get(url).header("authorization", auth).send().await.expect("send").status().as_u16() }
    };
    let now = now_secs();
    // Default leeway 5 s: expired 60 s ago is refused (it was accepted before).
    assert_eq!(send(format!("Bearer {}", jwt(json!({"sub": "1", "exp": now - 60})))).await, 401);
    assert_eq!(send(format!("Bearer {}", jwt(json!({"sub": "1", "exp": now - 30})))).await, 401);
    assert_eq!(send(format!("Bearer {}", jwt(json!({"sub": "1", "exp": now - 2})))).await, 200, "within the leeway");
    // nbf is honoured.
    assert_eq!(send(format!("Bearer {}", jwt(json!({"sub": "1", "exp": now + 600, "nbf": now + 300})))).await, 401);
    assert_eq!(send(format!("Bearer {}", jwt(json!({"sub": "1", "exp": now + 600, "nbf": now - 1})))).await, 200);
    // RFC 7235: the scheme is case-insensitive.
    for scheme in ["bearer", "BEARER", "BeArEr"] {
        assert_eq!(send(format!("{scheme} {}", user_token(1))).await, 200, "{scheme}");
    }
    assert_eq!(send(format!("Basic {}", user_token(1))).await, 401);
    s.stop().await;
}

#[tokio::test]
async fn errors_hyper_answers_itself_are_json_too() {
    let s = spawn().await;
    // A 1 MB header.
    let big = "a".repeat(1 << 20);
    let r = s.client.get(format!("{}/healthz", s.base)).header("x-big", big).send().await.expect("send");
    assert_eq!(r.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert_eq!(r.headers()["content-type"], "application/json");
    let v: Value = r.json().await.expect("JSON body");
    assert_eq!(v["error"]["code"], "headers_too_large");
    // 10,000 query parameters (a URI over 64 KiB).
    let query: Vec<String> = (0..10_000).map(|i| format!("p{i}=v{i}")).collect();
    let answer =
        raw_exchange(&s, format!("GET /v1/users/1/home?{} HTTP/1.1\r\nhost: x\r\n\r\n", query.join("&")).as_bytes())
            .await;
    let (status, v) = parse_answer(&answer);
    assert_eq!(status, 414, "{answer}");
    assert_eq!(v["error"]["code"], "uri_too_long");
    // A path that is not UTF-8.
    let answer = raw_exchange(&s, b"GET /v1/users/\xff\xfe/home HTTP/1.1\r\nhost: x\r\n\r\n").await;
    let (status, v) = parse_answer(&answer);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(v["error"]["code"], "invalid_argument");
    // Garbage instead of a request line.
    let (status, v) = parse_answer(&raw_exchange(&s, b"\x01\x02 nonsense\r\n\r\n").await);
    assert_eq!((status, v["error"]["code"].as_str()), (400, Some("invalid_argument")));
    // The server is unharmed.
    assert_eq!(s.get("/healthz").await.0, StatusCode::OK);
    s.stop().await;
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_header_timeout() {
    let s = spawn_with(|c| c.server.header_read_timeout = tideway_config::HumanDuration(Duration::from_secs(1))).await;
    let mut c = TcpStream::connect(addr(&s)).await.expect("connect");
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await.expect("closed in time");
    assert_eq!(n.unwrap_or(0), 0, "closed without an answer");
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    // So is a connection that sends half a header and stops.
    let mut c = TcpStream::connect(addr(&s)).await.expect("connect");
    c.write_all(b"GET /healthz HTTP/1.1\r\nX: a").await.expect("write");
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await.expect("closed in time");
    assert_eq!(n.unwrap_or(0), 0);
    s.stop().await;
}

#[tokio::test]
async fn shutdown_ends_within_the_grace_period_despite_a_half_sent_header() {
    let s = spawn_with(|c| {
        c.server.header_read_timeout = tideway_config::HumanDuration(Duration::from_secs(120));
        c.server.shutdown_grace = tideway_config::HumanDuration(Duration::from_secs(1));
    })
    .await;
    let mut c = TcpStream::connect(addr(&s)).await.expect("connect");
    c.write_all(b"GET /healthz HTTP/1.1\r\nX: a").await.expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(15), s.stop()).await.expect("shutdown within the grace period");
    assert!(started.elapsed() < Duration::from_secs(12), "{:?}", started.elapsed());
}

#[tokio::test]
async fn over_the_connection_cap_probes_still_get_through() {
    let s = spawn_with(|c| {
        c.server.max_connections = 4;
        c.server.header_read_timeout = tideway_config::HumanDuration(Duration::from_secs(60));
    })
    .await;
    // 4 regular and 4 overflow slots (tideway_http::serve::overflow_slots),
    // all taken by silent connections.
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(TcpStream::connect(addr(&s)).await.expect("connect"));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // Over both caps: an immediate 503 JSON answer.
    let answer = raw_exchange(&s, b"").await;
    let (status, v) = parse_answer(&answer);
    assert_eq!((status, v["error"]["code"].as_str()), (503, Some("unavailable")), "{answer}");
    // The silent overflow connections are dropped after 2 s; a probe then
    // gets an overflow slot, is answered, and its connection closes.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let answer = raw_exchange(&s, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    drop(silent);
    s.stop().await;
}

#[tokio::test]
async fn red_metrics_request_ids_and_a_redacted_configuration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let mut cfg = tideway_service::Config::default();
    cfg.storage.data_dir = dir.path().to_path_buf();
    cfg.storage.backend = tideway_config::BackendKind::Memory;
    // nextest runs each test in a process of its own: this one installs the
    // global recorder, as the binary does.
    let handle = tideway::server::install_metrics().expect("recorder");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tideway::server::serve(listener, cfg, Some(handle), async move {
        let _ = rx.await;
    }));
    let c = reqwest::Client::new();
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        let r = c.get(format!("{base}/v1/users/1/home")).send().await.expect("send");
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers().get("x-request-id").is_some_and(|v| !v.is_empty()));
    }
    let r = c.get(format!("{base}/v1/users/1/home")).header("x-request-id", "trace-42").send().await.expect("send");
    assert_eq!(r.headers()["x-request-id"], "trace-42", "a client's request id is kept");
    let _ = c.get(format!("{base}/v1/items/abc")).send().await.expect("send");
    let text = c.get(format!("{base}/metrics")).send().await.expect("send").text().await.expect("text");
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("tideway_http_requests_total")
                && l.contains(r#"route="/v1/users/{u}/home""#)
                && l.contains(r#"status="200""#)
        })
        .unwrap_or_else(|| panic!("no per-route counter:\n{text}"));
    assert!(line.ends_with(" 4"), "{line}");
    // The series alerts use exist before anything failed.
    assert!(
        text.lines().any(|l| l.starts_with("tideway_http_requests_total")
            && l.contains(r#"route="/v1/users/{u}/home""#)
            && l.contains(r#"status="503""#)
            && l.ends_with(" 0")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with("tideway_http_requests_total")
        && l.contains(r#"route="/v1/items/{id}""#)
        && l.contains(r#"status="400""#)));
    assert!(
        text.lines().any(|l| l.starts_with("tideway_http_request_duration_seconds_bucket")
            && l.contains(r#"route="/v1/users/{u}/home""#)),
        "latency histogram missing:\n{text}"
    );
    let _ = tx.send(());
    server.await.expect("join").expect("clean stop");

    // `tideway config` never prints a secret.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tideway"))
        .arg("config")
        .env("TIDEWAY_AUTH__JWT_SECRET", "very-secret-jwt-value-123")
        .env("TIDEWAY_AUTH__SERVER_KEYS", "[\"very-secret-server-key-1\"]")
        .output()
        .expect("run tideway config");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("very-secret"), "{text}");
    assert!(text.contains("jwt_secret = \"<redacted>\""), "{text}");
    assert!(text.contains("<redacted>"), "{text}");
}

/// The reproducer of the issue: with 256 file descriptors, 300 silent
/// connections used to make `/healthz` time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_256_file_descriptors_300_silent_connections_do_not_take_health_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("server.log");
    let port = crate::crash::free_port();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_tideway"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path().join("data"))
        .env("TIDEWAY_LOG", "warn")
        .env("TIDEWAY_SERVER__HEADER_READ_TIMEOUT", "30s")
        .stderr(std::fs::File::create(&log).map(std::process::Stdio::from).expect("log"))
        .spawn()
        .expect("spawn");
    let base = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(&base).await.is_err() {
        assert!(Instant::now() < deadline, "not up: {}", std::fs::read_to_string(&log).unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut silent = Vec::new();
    for _ in 0..300 {
        if let Ok(c) = TcpStream::connect(&base).await {
            silent.push(c);
        }
    }
    // Within a few seconds (the overflow slots' 2 s header timeout), a probe
    // is answered 200 on a fresh connection, while the 300 stay open.
    let started = Instant::now();
    let mut answered = None;
    while started.elapsed() < Duration::from_secs(10) {
        if let Ok(Ok(mut c)) = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(&base)).await {
            let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await;
            let mut out = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut out)).await;
            if out.starts_with(b"HTTP/1.1 200") {
                answered = Some(started.elapsed());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let took = answered
        .unwrap_or_else(|| panic!("/healthz never answered: {}", std::fs::read_to_string(&log).unwrap_or_default()));
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(silent);
}

#[tokio::test]
async fn the_access_log_is_one_line_per_request_when_switched_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("server.log");
    let p = crate::crash::start_with(
        &dir.path().join("data"),
        &log,
        &[("TIDEWAY_SERVER__ACCESS_LOG", "true"), ("TIDEWAY_LOG", "info")],
    )
    .await;
    let c = reqwest::Client::new();
    let r = c
        .get(format!("{}/v1/users/77/home", p.base))
        .header("x-request-id", "access-log-1")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), StatusCode::OK);
    let _ = c.get(format!("{}/v1/items/0", p.base)).send().await.expect("send");
    drop(p); // kills the server
    let text = std::fs::read_to_string(&log).expect("log");
    let line = text.lines().find(|l| l.contains("access-log-1")).unwrap_or_else(|| panic!("no access line:\n{text}"));
    assert!(line.contains("tideway::access") && line.contains("status=200"), "{line}");
    assert!(line.contains("/v1/users/{u}/home"), "{line}");
    assert!(text.lines().any(|l| l.contains("tideway::access") && l.contains("status=400")), "{text}");
}
