//! Live sessions and the live feed's snapshots.

#[allow(unused_imports)]
use super::*;

/// What [`Live::move_session`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Moved {
    /// The session after the step.
    Done(Session),
    /// The step is not the session's next one (it is as shown): nothing changed.
    Wrong(Session),
    Unknown,
}

/// Anchors' live sessions (SPEC section 5), durable.
///
/// Contract (the `live` conformance suite): a session's steps are decided by
/// [`Session::moved`] atomically (two nodes starting one session at once:
/// one succeeds, the other gets `Wrong`); an anchor never has more than
/// `max_open` sessions upcoming or live; [`Live::open_sessions`] reads the
/// open sessions of a viewer's anchors in one call, and
/// [`Live::ended_sessions`] their ended ones by (end, id), newest first,
/// below a position, with no scan of an anchor's history: ending a session
/// writes nothing per follower (the replay part is pulled).
#[async_trait]
pub trait Live: Send + Sync {
    /// Stores a new session (upcoming; an import may store one live or
    /// ended); `false` (nothing stored) when it is open and its anchor has
    /// `max_open` sessions upcoming or live already.
    async fn create_session(&self, session: Session, max_open: usize) -> Result<bool>;
    /// Takes session `id` one step (started or ended at `at`).
    async fn move_session(&self, id: u64, step: Move, at: Millis) -> Result<Moved>;
    /// Sessions by id, in order (`None`: unknown).
    async fn sessions(&self, ids: &[u64]) -> Result<Vec<Option<Session>>>;
    /// Every upcoming or live session of any of `anchors` (any order).
    async fn open_sessions(&self, anchors: &[UserId]) -> Result<Vec<Session>>;
    /// Ended sessions of any of `anchors` whose (end, id) is below `below`,
    /// the latest first, at most `limit`.
    async fn ended_sessions(&self, anchors: &[UserId], below: (Millis, u64), limit: usize) -> Result<Vec<Session>>;
}

/// Live feed snapshots ([`tideway_core::live::Snapshot`], encoded), kept a
/// while under the id their cursors carry. Shared by every node, so a walk
/// that one node started continues on any other. Losing one (expiry, a
/// flush) only makes its walk start over (`410 cursor_expired`).
#[async_trait]
pub trait Snapshots: Send + Sync {
    /// Keeps `bytes` under `id` for at least `ttl_ms` (unless memory runs
    /// short: then the oldest go first).
    async fn put_snapshot(&self, id: u64, bytes: &[u8], ttl_ms: u64) -> Result<()>;
    /// The bytes kept under `id`, until they expire.
    async fn snapshot(&self, id: u64) -> Result<Option<Vec<u8>>>;
}
