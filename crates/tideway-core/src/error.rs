//! The errors of the domain layer: always the caller's input.

use thiserror::Error;

/// A rule of the domain was broken by the input. Every variant is a client
/// error; the HTTP layer maps them to 4xx responses.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DomainError {
    /// A field has a value outside its allowed set or shape.
    #[error("{field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// A cursor could not be decoded or belongs to another feed.
    #[error("invalid cursor: {0}")]
    InvalidCursor(&'static str),
    /// The body of an item is larger than allowed.
    #[error("body is {size} bytes; the limit is {limit} bytes")]
    TooLarge { size: usize, limit: usize },
}

impl DomainError {
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid { field, reason: reason.into() }
    }
}
