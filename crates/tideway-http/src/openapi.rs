//! The OpenAPI 3 document, generated from the handler annotations and DTOs.

use crate::dto::*;
use crate::error::{ErrorBody, ErrorDetail};
use crate::handlers;
use serde_json::{Value, json};
use std::sync::LazyLock;
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(
    info(title = "tideway", description = "A self-hosted feed service: home, profile and more, over HTTP."),
    paths(
        handlers::create_item, handlers::get_item, handlers::get_items, handlers::patch_item, handlers::delete_item,
        handlers::react, handlers::unreact, handlers::create_promotion,
        handlers::follow, handlers::unfollow, handlers::follow_many, handlers::following, handlers::followers,
        handlers::relationships, handlers::block, handlers::unblock, handlers::mute, handlers::unmute, handlers::user,
        handlers::home, handlers::profile, handlers::mentions, handlers::tag_feed, handlers::object_feed,
        handlers::insert_home, handlers::notifications, handlers::mark_seen, handlers::mark_read,
        handlers::create_session, handlers::start_session, handlers::end_session, handlers::live,
        handlers::home_stream,
        handlers::stats, handlers::healthz, handlers::readyz, handlers::metrics,
    ),
    components(schemas(ErrorBody, ErrorDetail, ItemJson, ItemEnvelope, ItemsEnvelope, CountsJson, ViewerJson, ObjectJson,
        EntryJson, SourceJson, PageJson, CreateItemBody, PatchItemBody, FollowManyBody, FollowManyJson, FollowResultJson,
        FollowingJson, FlagJson, UserListJson, ListedUserJson, RelationshipsJson, RelationshipJson, UserJson, InsertBody,
        InsertedJson, StatsJson, FanoutJson, InboxesJson, CountsEnvelope, PromotionBody, PromotionJson, PromotionEnvelope,
        NotificationsJson, NotificationGroupJson, MarkBody, CreateSessionBody, SessionJson, SessionEnvelope, LivePageJson)),
    modifiers(&Security),
)]
pub struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("server key or HS256 JWT").build(),
            ),
        );
        doc.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new("bearer", Vec::<String>::new())]);
    }
}

/// The document as served: utoipa's, made exact by [`exact`].
pub fn document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_else(|e| json!({"error": e.to_string()}));
    exact(&mut doc);
    doc
}

/// `GET /openapi.json`: the document.
pub async fn serve() -> axum::response::Response {
    use axum::response::IntoResponse;
    ([(axum::http::header::CONTENT_TYPE, "application/json")], document_json()).into_response()
}

/// The document as JSON (built once).
pub fn document_json() -> String {
    static DOC: LazyLock<String> = LazyLock::new(|| {
        serde_json::to_string_pretty(&document()).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    });
    DOC.clone()
}

/// A regular expression of the decimal numbers `1..=max` with no leading
/// zero, built digit by digit (`max` itself, every number below it of the
/// same length, every shorter one).
fn decimal_range(max: u64) -> String {
    let digits: Vec<u8> = max.to_string().bytes().map(|b| b - b'0').collect();
    let n = digits.len();
    let mut alts = Vec::new();
    if n > 1 {
        alts.push(format!("[1-9][0-9]{{0,{}}}", n - 2));
    }
    for i in 0..n {
        let lo = u8::from(i == 0);
        if digits[i] > lo {
            let prefix: String = digits[..i].iter().map(|d| char::from(b'0' + d)).collect();
            let class = if digits[i] - 1 == lo { format!("{lo}") } else { format!("[{lo}-{}]", digits[i] - 1) };
            let rest = n - i - 1;
            alts.push(if rest == 0 { format!("{prefix}{class}") } else { format!("{prefix}{class}[0-9]{{{rest}}}") });
        }
    }
    alts.push(max.to_string());
    format!("(?:{})", alts.join("|"))
}

/// Every user and item id: a decimal string `1..=2^63-1`.
pub fn id_pattern() -> String {
    format!("^{}$", decimal_range(i64::MAX as u64))
}

fn id_schema(description: &str) -> Value {
    json!({"type": "string", "pattern": id_pattern(), "description": description})
}

fn id_list_schema(max: usize) -> Value {
    let id = decimal_range(i64::MAX as u64);
    json!({"type": "string", "pattern": format!("^{id}(?:,{id}){{0,{}}}$", max - 1),
           "description": format!("comma-separated ids, 1 to {max}")})
}

fn error_response(description: &str) -> Value {
    json!({"description": description,
           "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}})
}

/// Paths that need no token (probes, metrics, this document).
const OPEN_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics", "/openapi.json"];

/// What utoipa's annotations cannot say, said once for the whole document:
/// - ids are decimal strings `1..=2^63-1` (a pattern), lists of them too;
/// - `limit` is an integer 1..=100;
/// - every `/v1` operation may answer 400 (a malformed input), 401 (no or a
///   bad token), 429 (rate limited) and 503 (storage unavailable, the
///   request timed out, or a write on a node whose clock is off), and 413
///   when it takes a body;
/// - the operational endpoints need no token;
/// - request bodies reject unknown fields, and their fields have the API's
///   limits (enums, lengths, counts, ranges).
pub fn exact(doc: &mut Value) {
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, ops) in paths.iter_mut() {
            let Some(ops) = ops.as_object_mut() else { continue };
            for (_, op) in ops.iter_mut() {
                if OPEN_PATHS.contains(&path.as_str()) {
                    op["security"] = json!([]);
                    continue;
                }
                exact_operation(op);
            }
        }
    }
    if let Some(schemas) = doc.pointer_mut("/components/schemas").and_then(Value::as_object_mut) {
        exact_schemas(schemas);
    }
}

fn exact_operation(op: &mut Value) {
    let has_body = op.get("requestBody").is_some();
    // A body described as optional may be left out.
    if op.pointer("/requestBody/description").and_then(Value::as_str) == Some("optional") {
        op["requestBody"]["required"] = json!(false);
    }
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        for p in params {
            let name = p["name"].as_str().unwrap_or_default().to_owned();
            let schema = match name.as_str() {
                "id" => id_schema("an item id"),
                "u" | "t" | "user" | "viewer" => id_schema("a user id"),
                "ids" | "targets" => id_list_schema(tideway_core::limits::MAX_BATCH_IDS),
                "limit" => json!({"type": "integer", "minimum": 1, "maximum": tideway_core::limits::MAX_PAGE,
                                  "description": format!("page size, default {}", tideway_core::limits::DEFAULT_PAGE)}),
                "kind" => json!({"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$"}),
                "tag" => json!({"type": "string", "minLength": 1, "maxLength": tideway_core::limits::MAX_TAG_LEN,
                                "description": "letters, digits, '_' or '-'; matched lowercased"}),
                "type" => {
                    json!({"type": "string", "pattern": format!("^[a-z0-9_-]{{1,{}}}$", tideway_core::limits::MAX_OBJECT_TYPE_LEN)})
                }
                "object_id" => {
                    json!({"type": "string", "minLength": 1, "maxLength": tideway_core::limits::MAX_OBJECT_ID_LEN,
                                      "description": "printable, without '/'"})
                }
                _ => continue,
            };
            p["schema"] = schema;
        }
    }
    let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else { return };
    let mut add = |code: &str, description: &str| {
        responses.entry(code.to_owned()).or_insert_with(|| error_response(description));
    };
    add("400", "invalid_argument or invalid_cursor: a malformed id, query or body");
    add("401", "unauthenticated: no token, or a bad one");
    add("429", "rate_limited: retry after the Retry-After header's seconds");
    add(
        "503",
        "unavailable: storage is unavailable, the request took too long, or (a write) this node's clock is too far from the database's; retry later, or on another node",
    );
    if has_body {
        add("413", "payload_too_large: the request body is over 64 KiB, or an item body over 16 KiB");
    }
}

fn exact_schemas(schemas: &mut serde_json::Map<String, Value>) {
    use tideway_core::limits::*;
    let visibility = json!({"type": "string", "enum": ["public", "followers", "mentioned"]});
    let time = json!({"type": "string", "format": "date-time"});
    let props: &[(&str, &[(&str, Value)])] = &[
        (
            "CreateItemBody",
            &[
                ("author", id_schema("the author's user id")),
                (
                    "kind",
                    json!({"type": ["string", "null"],
                            "pattern": "^(?:post|repost|reply|user|ad|x-[a-z0-9_-]{1,32})$"}),
                ),
                ("visibility", json!({"type": ["string", "null"], "enum": ["public", "followers", "mentioned", null]})),
                (
                    "tags",
                    json!({"type": ["array", "null"], "maxItems": MAX_TAGS,
                            "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_LEN,
                                      "description": "letters, digits, '_' or '-'; stored lowercased"}}),
                ),
                (
                    "mentions",
                    json!({"type": ["array", "null"], "maxItems": MAX_MENTIONS, "items": id_schema("a user id")}),
                ),
                ("repost_of", json!({"type": ["string", "null"], "pattern": id_pattern()})),
                ("reply_to", json!({"type": ["string", "null"], "pattern": id_pattern()})),
                (
                    "created_at",
                    json!({"type": ["string", "null"], "format": "date-time",
                                  "description": "imports: 2020-01-01 or later, at most items.max_clock_skew ahead"}),
                ),
                (
                    "idempotency_key",
                    json!({"type": ["string", "null"], "minLength": 1,
                                       "maxLength": MAX_IDEMPOTENCY_KEY_LEN}),
                ),
            ],
        ),
        (
            "PatchItemBody",
            &[(
                "visibility",
                json!({"type": ["string", "null"],
                                                   "enum": ["public", "followers", "mentioned", null]}),
            )],
        ),
        (
            "ObjectJson",
            &[
                ("type", json!({"type": "string", "pattern": format!("^[a-z0-9_-]{{1,{MAX_OBJECT_TYPE_LEN}}}$")})),
                (
                    "id",
                    json!({"type": "string", "minLength": 1, "maxLength": MAX_OBJECT_ID_LEN,
                          "description": "printable, without '/'"}),
                ),
            ],
        ),
        (
            "FollowManyBody",
            &[(
                "targets",
                json!({"type": "array", "maxItems": MAX_BATCH_FOLLOW,
                                                 "items": id_schema("a user id")}),
            )],
        ),
        ("InsertBody", &[("item", id_schema("an item id"))]),
        ("MarkBody", &[("up_to", json!({"type": ["string", "null"], "pattern": id_pattern()}))]),
        ("CreateSessionBody", &[("anchor", id_schema("the anchor's user id")), ("scheduled_start", time.clone())]),
        (
            "PromotionBody",
            &[
                ("item", id_schema("an item id")),
                ("every", json!({"type": "integer", "minimum": 1, "maximum": 1000})),
                ("starts_at", time.clone()),
                ("ends_at", time),
            ],
        ),
        ("ItemJson", &[("visibility", visibility)]),
    ];
    for (name, fields) in props {
        let Some(schema) = schemas.get_mut(*name) else { continue };
        for (field, value) in fields.iter() {
            schema["properties"][*field] = value.clone();
        }
    }
    for name in [
        "CreateItemBody",
        "PatchItemBody",
        "ObjectJson",
        "FollowManyBody",
        "InsertBody",
        "PromotionBody",
        "MarkBody",
        "CreateSessionBody",
    ] {
        if let Some(schema) = schemas.get_mut(name) {
            schema["additionalProperties"] = json!(false);
        }
    }
}

/// Creates, at 0, the series alerts are written against, so that a fault
/// shows as a rate rather than as "no data": for every route of the API
/// (read from its OpenAPI document) the `503` and `500` request counts and
/// the latency histogram, and the server's own counters.
pub fn register_series() {
    let doc = document();
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    for (path, ops) in paths {
        for method in ops.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            let method = method.to_uppercase();
            for status in ["500", "503"] {
                metrics::counter!("tideway_http_requests_total", "method" => method.clone(), "route" => path.clone(),
                    "status" => status)
                .absolute(0);
            }
            let _ = metrics::histogram!(crate::edge::DURATION_METRIC, "method" => method, "route" => path.clone());
        }
    }
    for name in [
        "tideway_http_rate_limited_total",
        "tideway_http_connections_overflow_total",
        "tideway_http_connections_refused_total",
    ] {
        metrics::counter!(name).absolute(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_pattern_accepts_exactly_what_the_id_parser_accepts() {
        let re = regex::Regex::new(&id_pattern()).expect("regex");
        let max = i64::MAX as u64;
        let mut samples: Vec<String> = vec!["0".into(), "00".into(), "01".into(), "".into(), "-1".into(), "1 ".into()];
        for edge in [1, 9, 10, 99, 100, max / 10, max - 1, max, max + 1, u64::MAX] {
            samples.push(edge.to_string());
        }
        // Numbers of every length (xorshift, shifted right by 0..63 bits).
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push((x >> (x % 64)).to_string());
        }
        // Every digit of max changed to every other digit.
        let m = max.to_string();
        for i in 0..m.len() {
            for d in b'0'..=b'9' {
                let mut v = m.clone().into_bytes();
                v[i] = d;
                samples.push(String::from_utf8(v).expect("digits"));
            }
        }
        for s in samples {
            assert_eq!(re.is_match(&s), tideway_core::UserId::parse("x", &s).is_ok(), "{s:?}");
        }
    }

    #[test]
    fn the_id_range_regex_is_built_digit_by_digit() {
        assert_eq!(decimal_range(42), "(?:[1-9][0-9]{0,0}|[1-3][0-9]{1}|4[0-1]|42)");
        assert_eq!(decimal_range(7), "(?:[1-6]|7)");
    }

    #[test]
    fn every_v1_operation_declares_its_errors_and_probes_need_no_token() {
        let doc = document();
        for (path, ops) in doc["paths"].as_object().expect("paths") {
            for (method, op) in ops.as_object().expect("ops") {
                if OPEN_PATHS.contains(&path.as_str()) {
                    assert_eq!(op["security"], json!([]), "{method} {path}");
                    continue;
                }
                for code in ["400", "401", "429", "503"] {
                    assert!(op["responses"].get(code).is_some(), "{method} {path} lacks {code}");
                }
                if op.get("requestBody").is_some() {
                    assert!(op["responses"].get("413").is_some(), "{method} {path} lacks 413");
                }
            }
        }
    }
}
