//! Errors of the service layer. Client errors carry a message that says
//! what to fix; `Store` is an internal failure (logged, answered opaquely).

use thiserror::Error;
use tideway_core::DomainError;
use tideway_store::StoreError;

#[derive(Debug, Error)]
pub enum ServiceError {
    #[error(transparent)]
    Invalid(#[from] DomainError),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    LimitExceeded(String),
    /// A cursor of a snapshot that expired: start over (410).
    #[error("{0}")]
    Expired(String),
    /// This node cannot take the request now, for a reason of its own (its
    /// clock is too far from the database's): 503, another node may.
    #[error("{0}")]
    NodeUnavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ServiceError {
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid(DomainError::invalid(field, reason))
    }
}

pub type Result<T> = std::result::Result<T, ServiceError>;
