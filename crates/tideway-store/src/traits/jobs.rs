//! Fan-out jobs, node claims and the shared half's trust record (its type
//! in `trust.rs`).

#[allow(unused_imports)]
use super::*;
use serde::{Deserialize, Serialize};

/// How far a fan-out job got in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobProgress {
    /// Every follower up to and including this position has the job's key.
    Checkpoint(Key, FollowerPos),
    /// Every follower has it: the job is done.
    Complete(Key),
}

/// Who works on fan-out jobs, so leases tell workers apart: a node's worker
/// is [`rules::worker_id`]`(node, epoch)`, its node id and the start epoch
/// its claim of that id got ([`Jobs::claim_node`]), so a restarted node
/// knows which leases its dead predecessor held.
///
/// [`rules::worker_id`]: crate::rules::worker_id
pub type WorkerId = u64;

/// What a claim of a node id found ([`Jobs::claim_node`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeClaim {
    /// The id is this instance's, in this start epoch (1 for the first
    /// claim of the id, one more for each later one).
    Claimed { epoch: u32 },
    /// Another instance holds it: its last heartbeat was `age_ms` ago (by
    /// the store's clock), less than the claim's `stale_ms`.
    Held { age_ms: i64 },
}

/// Durable fan-out jobs, claimed with leases.
///
/// Contract (the conformance suite checks it on every backend):
/// - `claim_jobs` returns up to `limit` pending jobs, oldest first, that no
///   *other* worker holds a live lease on, and leases them to `worker` until
///   `now + lease_ms` (renewing the jobs it already holds); a store may
///   hold only a window of its oldest pending jobs in memory (the embedded
///   store, [`crate::job_window`]): `claim_jobs` and `pending_jobs` then
///   see the window, which refills from disk as it drains;
/// - a worker whose lease expired may lose the job to another worker's
///   claim; its later `advance` of that job is then not recorded;
/// - a checkpoint never moves back: progress behind the recorded cursor is
///   ignored, so a slow worker cannot undo a faster one's work;
/// - `Complete` removes the job;
/// - a worker of a later epoch of the same node
///   ([`rules::supersedes`](crate::rules::supersedes)) takes the jobs an
///   earlier epoch holds at once, live lease or not: that run is dead.
///
/// Node ids are claimed, not assumed (shared by every node of a
/// deployment, so two running nodes never use one id):
/// - `claim_node` gives the id to `instance` when no other instance holds
///   it, or the holder released it, or the holder's heartbeat is at least
///   `stale_ms` old by the store's clock; each claim starts a new epoch;
/// - `beat` records `instance`'s heartbeat; `false` when the id is no longer
///   `instance`'s (another instance claimed it: this one must stop);
/// - `release_node` gives the id up at a clean stop (a later claim need not
///   wait for the heartbeat to go stale);
/// - `clock` is the store's own clock (a database's), which cross-node
///   deadlines follow; `None` when the store lives in this process and has
///   no clock but the node's.
#[async_trait]
pub trait Jobs: Send + Sync {
    /// Up to `limit` pending jobs, oldest first, whoever holds them.
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>>;
    /// Claims jobs for `worker` (see the trait's contract).
    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>>;
    /// Brings in ahead what claiming and stepping the oldest `limit`
    /// pending jobs that no worker holds at `now` will read: a hint, with
    /// no effect on any answer, which a worker runs beside its step's
    /// deliveries. A store that reads nothing ahead does nothing (the
    /// default); the embedded store loads their authors' counters and
    /// follower lists, which a step would otherwise wait for.
    async fn prepare_jobs(&self, now: Millis, limit: usize) -> Result<()> {
        let _ = (now, limit);
        Ok(())
    }
    /// Records the progress of many jobs in one write; for each, whether it
    /// was recorded (false: the job is held by another worker, gone, or the
    /// checkpoint would move back). Progress only saves repeating
    /// deliveries (inboxes ignore keys they hold), so a backend may make it
    /// durable a little later (the embedded store: within 50 ms).
    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>>;
    /// Claims node id `node` for `instance` (see the trait's contract).
    async fn claim_node(&self, node: u16, instance: u64, stale_ms: i64) -> Result<NodeClaim>;
    /// Records `instance`'s heartbeat on `node`; whether it still holds it.
    async fn beat(&self, node: u16, instance: u64) -> Result<bool>;
    /// Gives `node` up if `instance` holds it.
    async fn release_node(&self, node: u16, instance: u64) -> Result<()>;
    /// The store's clock, read now (`None`: the store has no other clock
    /// than this process's). Fails when the store does not answer.
    async fn clock(&self) -> Result<Option<Millis>>;
    /// Reads or changes the record of whether nodes may trust the shared
    /// half ([`SharedTrust`], `trust.rs`): `change` applied by
    /// [`SharedTrust::apply`] at the store's clock, atomically, and the
    /// record as it then stands. A store with no shared half beside it
    /// keeps the record all the same (the conformance suite checks it).
    async fn shared_trust(&self, change: TrustChange) -> Result<SharedTrust>;
}

/// A durable fan-out job: deliver `key` (an item of `author`) to the inboxes
/// of `author`'s followers. `cursor` is the last follower already delivered
/// (followers are walked in id order), so a restart resumes there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub key: Key,
    pub author: UserId,
    /// The last follower delivered to (`[since, id]`), if any.
    pub cursor: Option<FollowerPos>,
    pub created: Millis,
}
