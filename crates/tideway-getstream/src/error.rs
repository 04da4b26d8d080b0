//! GetStream's error form. Its clients decide by the body, not the status:
//! the Python client treats a 4xx without `exception` as a success and reads
//! `detail` from every error, so every error carries both, with the `code`
//! its clients map to an exception class, and `duration` like every body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error as GetStream answers it.
#[derive(Debug, Clone, PartialEq)]
pub struct GsError {
    pub status: StatusCode,
    /// GetStream's error code (the clients' exception class).
    pub code: u16,
    /// The exception's name, as GetStream spells it.
    pub exception: &'static str,
    pub detail: String,
    /// Per field: what is wrong with it (`exception_fields`).
    pub fields: Vec<(String, String)>,
}

impl GsError {
    fn new(status: StatusCode, code: u16, exception: &'static str, detail: impl Into<String>) -> Self {
        GsError { status, code, exception, detail: detail.into(), fields: Vec::new() }
    }

    /// The `api_key` is missing or not this app's (code 2).
    pub fn api_key(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, 2, "ApiKeyException", detail)
    }

    /// No token, a bad one, or one that does not allow the call (code 17).
    pub fn not_allowed(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, 17, "NotAllowedException", detail)
    }

    /// A field of the call is wrong (code 4).
    pub fn input(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut e = Self::new(StatusCode::BAD_REQUEST, 4, "InputException", format!("Errors for fields '{field}'"));
        e.fields.push((field.to_owned(), message));
        e
    }

    /// Feeds of groups that are not configured (code 6).
    pub fn feed_config(feeds: &[&str]) -> Self {
        let list = feeds.iter().map(|f| format!("'{f}'")).collect::<Vec<_>>().join(", ");
        Self::new(
            StatusCode::BAD_REQUEST,
            6,
            "FeedConfigException",
            format!("The following feeds are not configured: {list}"),
        )
    }

    /// What the call names does not exist (code 16).
    pub fn does_not_exist(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, 16, "DoesNotExistException", detail)
    }

    /// A storage engine is away: the call may be retried (code 1, 503).
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, 1, "StreamApiException", detail)
    }

    /// The body GetStream sends, with the time the call took.
    pub fn body(&self, duration: &str) -> serde_json::Value {
        let mut body = json!({
            "detail": self.detail,
            "status_code": self.status.as_u16(),
            "code": self.code,
            "exception": self.exception,
            "duration": duration,
            "more_info": "https://getstream.io/docs/api_error_responses",
        });
        if !self.fields.is_empty() {
            let fields: serde_json::Map<String, serde_json::Value> =
                self.fields.iter().map(|(f, m)| (f.clone(), json!([m]))).collect();
            body["exception_fields"] = serde_json::Value::Object(fields);
        }
        body
    }
}

impl IntoResponse for GsError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body("0.00ms"))).into_response()
    }
}

impl std::fmt::Display for GsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.exception, self.code, self.detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_carries_what_the_clients_read() {
        for e in [
            GsError::api_key("api_key is missing"),
            GsError::not_allowed("signature is invalid"),
            GsError::input("actor", "This field is required."),
            GsError::feed_config(&["nope:1"]),
            GsError::does_not_exist("activity not found"),
            GsError::unavailable("the store is away"),
        ] {
            let b = e.body("1.00ms");
            for key in ["detail", "exception", "code", "status_code", "duration"] {
                assert!(b.get(key).is_some(), "{key} missing from {b}");
            }
            assert_eq!(b["status_code"], e.status.as_u16());
            assert!(e.status.is_client_error() || e.status == StatusCode::SERVICE_UNAVAILABLE);
        }
        let b = GsError::input("actor", "This field is required.").body("0ms");
        assert_eq!(b["code"], 4);
        assert_eq!(b["exception_fields"]["actor"][0], "This field is required.");
        assert_eq!(
            GsError::feed_config(&["a:1", "b:2"]).detail,
            "The following feeds are not configured: 'a:1', 'b:2'"
        );
    }
}
