//! `ApiError`: the JSON error body and its status, mapped exactly once.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tideway_core::DomainError;
use tideway_service::ServiceError;
use utoipa::ToSchema;

/// A client-visible error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// `{"error": {"code": "...", "message": "..."}}`
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_argument", message)
    }
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthenticated", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
    }
}

impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> Self {
        match e {
            DomainError::InvalidCursor(_) => Self::new(StatusCode::BAD_REQUEST, "invalid_cursor", e.to_string()),
            DomainError::TooLarge { .. } => {
                Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", e.to_string())
            }
            DomainError::Invalid { .. } => Self::invalid(e.to_string()),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Invalid(d) => d.into(),
            ServiceError::NotFound(m) => Self::not_found(m),
            ServiceError::Forbidden(m) => Self::forbidden(m),
            ServiceError::Conflict(m) => Self::new(StatusCode::CONFLICT, "conflict", m),
            ServiceError::LimitExceeded(m) => Self::new(StatusCode::UNPROCESSABLE_ENTITY, "limit_exceeded", m),
            ServiceError::Expired(m) => Self::new(StatusCode::GONE, "cursor_expired", m),
            ServiceError::NodeUnavailable(m) => Self::unavailable(m),
            ServiceError::Store(e) if e.is_unavailable() => {
                tideway_service::health::count_error(&e);
                tracing::error!(cause = %e.chain(), "storage unavailable");
                Self::unavailable("storage is unavailable; retry later")
            }
            ServiceError::Store(other) => {
                tideway_service::health::count_error(&other);
                tracing::error!(cause = %other.chain(), "internal storage error");
                Self::internal()
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: ErrorDetail { code: self.code.to_owned(), message: self.message } };
        (self.status, Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
