//! Errors of the storage layer: the store could not do what it was asked.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    /// The durable engine failed (disk full, I/O error, closed).
    #[error("storage I/O failed: {0}")]
    Io(String),
    /// Data on disk could not be decoded: the data directory is damaged or
    /// was written by an incompatible version.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// An item id collided with an existing one (only possible for imported
    /// `created_at` times); the caller retries with a new id.
    #[error("item id {0} is taken")]
    IdTaken(u64),
}
