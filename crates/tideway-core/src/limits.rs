//! The documented limits of the API (see docs/config.md and the README).

/// Largest item body, serialized as JSON.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Most tags on one item.
pub const MAX_TAGS: usize = 16;
/// Longest tag, in bytes.
pub const MAX_TAG_LEN: usize = 64;
/// Most mentioned users on one item.
pub const MAX_MENTIONS: usize = 50;
/// Longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;
/// Longest object type, in bytes.
pub const MAX_OBJECT_TYPE_LEN: usize = 32;
/// Longest object id, in bytes.
pub const MAX_OBJECT_ID_LEN: usize = 128;
/// Most targets of one batch follow.
pub const MAX_BATCH_FOLLOW: usize = 1000;
/// Most ids in one batch get / relationships call.
pub const MAX_BATCH_IDS: usize = 100;
/// Largest page.
pub const MAX_PAGE: usize = 100;
/// Default page size.
pub const DEFAULT_PAGE: usize = 20;

/// A page size as asked: `None` is the default; otherwise 1..=[`MAX_PAGE`].
/// The one check of a page's `limit`, whoever asks (feeds and lists).
pub fn page_limit(asked: Option<usize>) -> Result<usize, crate::DomainError> {
    match asked {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(crate::DomainError::invalid("limit", format!("{n} must be a whole number 1..={MAX_PAGE}"))),
    }
}
/// Largest request body accepted by the HTTP layer (an item body plus its
/// envelope, or a 1000-target batch follow).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;
