//! Extractors whose rejections are our JSON errors.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use tideway_core::{ItemId, UserId};

/// `axum::Json` with our rejection: 413 for bodies over the limit, 400 with
/// serde's explanation (unknown field, wrong type, bad syntax) otherwise.
/// The body must be a JSON object: serde would also build a struct from an
/// array of its fields in order (`[null, null]`), which no client means.
pub struct Json<T>(pub T);

fn is_json_content_type(req: &Request) -> bool {
    let Some(ct) = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let mime = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match parse_json(req, state, false).await? {
            Some(v) => Ok(Json(v)),
            None => Err(ApiError::invalid("the request body must be a JSON object")),
        }
    }
}

/// [`Json`] for a body that may be left out: no body (or only whitespace)
/// is `None`; anything else must be a JSON object as [`Json`] takes it.
pub struct OptionalJson<T>(pub Option<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        parse_json(req, state, true).await.map(OptionalJson)
    }
}

async fn parse_json<S: Send + Sync, T: DeserializeOwned>(
    req: Request,
    state: &S,
    optional: bool,
) -> Result<Option<T>, ApiError> {
    let typed = is_json_content_type(&req);
    if !typed && !optional {
        return Err(ApiError::invalid("expected a JSON body with Content-Type: application/json"));
    }
    let bytes = match Bytes::from_request(req, state).await {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("request body is over the limit of {} bytes", tideway_core::limits::MAX_REQUEST_BYTES),
            ));
        }
        Err(e) => return Err(ApiError::invalid(format!("could not read the request body: {}", e.body_text()))),
    };
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if optional && first.is_none() {
        return Ok(None);
    }
    if !typed {
        return Err(ApiError::invalid("expected a JSON body with Content-Type: application/json"));
    }
    if first != Some(&b'{') {
        return Err(ApiError::invalid("the request body must be a JSON object"));
    }
    match axum::Json::<T>::from_bytes(&bytes) {
        Ok(axum::Json(v)) => Ok(Some(v)),
        Err(JsonRejection::JsonDataError(e)) => {
            Err(ApiError::invalid(format!("invalid request body: {}", e.body_text())))
        }
        Err(JsonRejection::JsonSyntaxError(e)) => Err(ApiError::invalid(format!("malformed JSON: {}", e.body_text()))),
        Err(e) => Err(ApiError::invalid(format!("could not read the request body: {}", e.body_text()))),
    }
}

/// `axum::extract::Query` with our rejection.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                Err(ApiError::invalid(format!("invalid query string: {}", e.body_text())))
            }
            Err(e) => Err(ApiError::invalid(format!("invalid query string: {}", e.body_text()))),
        }
    }
}

/// Path segments as strings; handlers parse them into ids with clear errors.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Path(v))
            .map_err(|e| ApiError::invalid(format!("invalid path: {}", e.body_text())))
    }
}

pub fn user(field: &'static str, s: &str) -> Result<UserId, ApiError> {
    UserId::parse(field, s).map_err(ApiError::from)
}

pub fn item(field: &'static str, s: &str) -> Result<ItemId, ApiError> {
    ItemId::parse(field, s).map_err(ApiError::from)
}

/// Parses a comma-separated list of ids (`?ids=1,2,3`).
pub fn id_list<T>(
    field: &'static str,
    s: &str,
    max: usize,
    parse: fn(&'static str, &str) -> Result<T, ApiError>,
) -> Result<Vec<T>, ApiError> {
    let parts: Vec<&str> = s.split(',').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return Err(ApiError::invalid(format!("{field}: give at least one id")));
    }
    if parts.len() > max {
        return Err(ApiError::invalid(format!("{field}: at most {max} ids")));
    }
    parts.into_iter().map(|p| parse(field, p)).collect()
}

/// Reads `?limit=` as a number (absent: `None`); the service checks its
/// range (`tideway_core::limits::page_limit`).
pub fn limit(s: Option<&str>) -> Result<Option<usize>, ApiError> {
    s.map(|v| {
        v.parse::<usize>().map_err(|_| {
            ApiError::invalid(format!("limit: {v:?} must be a whole number 1..={}", tideway_core::limits::MAX_PAGE))
        })
    })
    .transpose()
}
