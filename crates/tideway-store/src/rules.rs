//! The rules every engine applies, decided once.
//!
//! An engine gathers the facts a rule needs (under its index lock, or in a
//! transaction), calls the rule here, and applies what it decided. So the
//! memory, embedded and SQL backends cannot disagree on what a follow of a
//! blocked user does, which progress a fan-out job records, or what a
//! create with a used idempotency key returns: the conformance suites check
//! the engines' fact gathering and writing; these functions are the
//! decisions, unit-tested here.

use crate::traits::{CreateOutcome, FollowStatus, FollowerPos, JobProgress};
use std::sync::Arc;
use tideway_core::{Item, Millis, UserId};

/// What an engine knows of a follow target before following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowFact {
    /// Already followed since this time.
    Following(Millis),
    /// A block separates the two users (either way).
    Blocked,
    /// Neither: the follow may be made (within the limit).
    Free,
}

/// What a follow of several targets does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowDecision {
    /// One status per target, in order.
    pub statuses: Vec<FollowStatus>,
    /// The targets to follow now, in order, each once.
    pub new: Vec<UserId>,
}

/// Decides a follow of `targets` at `at` by a user who follows `following`
/// users now, at most `max_following`: an existing follow is kept (with its
/// time), a target named twice is followed once, a block refuses, the limit
/// refuses what would pass it. `fact` is asked once per target, in order,
/// so an engine may gather lazily.
pub fn follow(
    targets: &[UserId],
    at: Millis,
    following: usize,
    max_following: usize,
    mut fact: impl FnMut(UserId) -> FollowFact,
) -> FollowDecision {
    let mut count = following;
    let mut statuses = Vec::with_capacity(targets.len());
    let mut new: Vec<UserId> = Vec::new();
    for &t in targets {
        let status = match fact(t) {
            FollowFact::Following(since) => FollowStatus::Already(since),
            _ if new.contains(&t) => FollowStatus::Already(at),
            FollowFact::Blocked => FollowStatus::Blocked,
            FollowFact::Free if count >= max_following => FollowStatus::Limit,
            FollowFact::Free => {
                count += 1;
                new.push(t);
                FollowStatus::Followed(at)
            }
        };
        statuses.push(status);
    }
    FollowDecision { statuses, new }
}

/// The notification ops a follow applies with its edges: those of the
/// targets it newly follows (an op's user is the followed target), not
/// those of a follow that stood already (stored with its own).
pub fn notify_of_new<'a>(
    notify: &'a [tideway_core::notify::Op],
    new: &'a [UserId],
) -> impl Iterator<Item = tideway_core::notify::Op> + 'a {
    notify.iter().filter(|op| new.contains(&op.user())).cloned()
}

/// The worker id of `node`'s run in start epoch `epoch` (see
/// [`WorkerId`](crate::WorkerId)): the node in the high 32 bits.
pub const fn worker_id(node: u16, epoch: u32) -> u64 {
    ((node as u64) << 32) | epoch as u64
}

/// The lowest worker id of `node` (its epochs are the ids from here up).
pub const fn node_base(node: u16) -> u64 {
    worker_id(node, 0)
}

/// Whether `worker` is a later run of the node whose earlier run is
/// `holder`: it takes `holder`'s jobs at once (that run is dead: a node id
/// is held by one running instance at a time).
pub const fn supersedes(worker: u64, holder: u64) -> bool {
    worker >> 32 == holder >> 32 && holder < worker
}

/// What a fan-out job's recorded state is, as the engine read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobState {
    /// Another worker holds a live lease on it.
    pub held_by_other: bool,
    /// The recorded checkpoint.
    pub cursor: Option<FollowerPos>,
}

/// What recording one job's progress does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressEffect {
    /// Move the checkpoint forward to this position.
    Advance(FollowerPos),
    /// Remove the job: every follower has its key.
    Complete,
}

/// Decides whether `progress` is recorded for a job in `state` (`None`: the
/// job is gone). Only the holder (or anyone, for an unheld job) records,
/// and a checkpoint only moves forward: progress at or behind the recorded
/// cursor is not recorded, so a slow worker cannot undo a faster one.
pub fn progress(state: Option<JobState>, progress: JobProgress) -> Option<ProgressEffect> {
    let state = state?;
    if state.held_by_other {
        return None;
    }
    match progress {
        JobProgress::Checkpoint(_, pos) if state.cursor.is_none_or(|c| c < pos) => Some(ProgressEffect::Advance(pos)),
        JobProgress::Checkpoint(..) => None,
        JobProgress::Complete(_) => Some(ProgressEffect::Complete),
    }
}

/// The postings a new item makes: the ids of the feeds it is posted to
/// (mentions, tags, its object; none for a repost), each once, ascending.
/// Written in the item's own write, never changed after: pages re-check
/// each posting against the item as it is now
/// ([`tideway_core::PostingFeed::shows`]).
pub fn postings(item: &Item) -> Vec<u64> {
    let mut ids: Vec<u64> = tideway_core::PostingFeed::of(item).iter().map(|f| f.id()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// What an engine found for a new item before storing it.
#[derive(Debug, Clone, Default)]
pub struct CreateFacts {
    /// The author's earlier item with the same idempotency key (not deleted).
    pub by_idempotency_key: Option<Arc<Item>>,
    /// The author's live repost of the same original.
    pub earlier_repost: Option<Arc<Item>>,
    /// An item with this id is stored.
    pub id_taken: bool,
}

/// What a create does.
#[derive(Debug, Clone, PartialEq)]
pub enum CreateDecision {
    /// Nothing is written: the create resolves to an existing item.
    Resolved(CreateOutcome),
    /// The id is taken (the service retries with another).
    IdTaken,
    /// Store the item (and its fan-out job).
    Store,
}

/// Decides a create, in this order: an idempotency key seen before returns
/// its item; a repost of an original the author reposted before returns
/// that repost; a taken id is refused; anything else is stored.
pub fn create(facts: CreateFacts) -> CreateDecision {
    if let Some(existing) = facts.by_idempotency_key {
        CreateDecision::Resolved(CreateOutcome::Existing(existing))
    } else if let Some(existing) = facts.earlier_repost {
        CreateDecision::Resolved(CreateOutcome::AlreadyReposted(existing))
    } else if facts.id_taken {
        CreateDecision::IdTaken
    } else {
        CreateDecision::Store
    }
}

/// Whether `stored`, found under the id of `ours`, is `ours` itself: an
/// earlier attempt at the same create whose answer was lost (the engine
/// committed, the link broke before it said so). A node draws an id per
/// create, so an id held by an item of the same author, kind and content is
/// this create's, and the create is done; anything else under the id is
/// another item (the id is taken). Once changed (`rev`), only the fields
/// fixed at creation are compared.
pub fn is_same_create(stored: &Item, ours: &Item) -> bool {
    let fixed = stored.id == ours.id
        && stored.author == ours.author
        && stored.kind == ours.kind
        && stored.repost_of == ours.repost_of
        && stored.reply_to == ours.reply_to
        && stored.idempotency_key == ours.idempotency_key;
    fixed
        && (stored.rev > 0
            || (stored.body == ours.body
                && stored.visibility == ours.visibility
                && stored.tags == ours.tags
                && stored.mentions == ours.mentions
                && stored.object == ours.object))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::ItemId;

    fn u(n: u64) -> UserId {
        UserId(n)
    }

    #[test]
    fn follow_statuses_in_order_of_precedence() {
        let at = Millis(50);
        let facts = |t: UserId| match t.0 {
            1 => FollowFact::Following(Millis(7)),
            2 => FollowFact::Blocked,
            _ => FollowFact::Free,
        };
        let d = follow(&[u(1), u(2), u(3), u(3), u(4), u(5)], at, 8, 10, facts);
        assert_eq!(
            d.statuses,
            vec![
                FollowStatus::Already(Millis(7)),
                FollowStatus::Blocked,
                FollowStatus::Followed(at),
                FollowStatus::Already(at),
                FollowStatus::Followed(at),
                FollowStatus::Limit,
            ]
        );
        assert_eq!(d.new, vec![u(3), u(4)]);
        // Already-followed targets do not count against the limit again.
        let d = follow(&[u(1)], at, 10, 10, facts);
        assert_eq!(d.statuses, vec![FollowStatus::Already(Millis(7))]);
        assert!(d.new.is_empty());
    }

    #[test]
    fn an_id_held_by_the_same_create_is_that_create() {
        use tideway_core::ItemKind;
        let mut ours = Item::new(ItemId(7), u(1), ItemKind::Post);
        ours.tags = vec!["rust".into()];
        assert!(is_same_create(&ours, &ours), "the lost answer's own row");
        let mut other = ours.clone();
        other.tags = vec!["db".into()];
        assert!(!is_same_create(&other, &ours), "another post under the id");
        let by_another = Item::new(ItemId(7), u(2), ItemKind::Post);
        assert!(!is_same_create(&by_another, &ours));
        // Patched since (by someone who saw it in a feed): the fields fixed
        // at creation decide.
        let mut patched = other.clone();
        patched.rev = 1;
        assert!(is_same_create(&patched, &ours));
        let mut reply = patched.clone();
        reply.reply_to = Some(ItemId(3));
        assert!(!is_same_create(&reply, &ours));
    }

    #[test]
    fn checkpoints_only_move_forward_and_only_for_the_holder() {
        let pos = |t: i64, id: u64| (Millis(t), u(id));
        let free = |cursor| Some(JobState { held_by_other: false, cursor });
        assert_eq!(
            progress(free(None), JobProgress::Checkpoint(9, pos(1, 1))),
            Some(ProgressEffect::Advance(pos(1, 1)))
        );
        assert_eq!(
            progress(free(Some(pos(1, 1))), JobProgress::Checkpoint(9, pos(1, 2))),
            Some(ProgressEffect::Advance(pos(1, 2)))
        );
        assert_eq!(progress(free(Some(pos(1, 2))), JobProgress::Checkpoint(9, pos(1, 2))), None, "not kept in place");
        assert_eq!(progress(free(Some(pos(2, 0))), JobProgress::Checkpoint(9, pos(1, 9))), None, "never back");
        assert_eq!(progress(free(Some(pos(2, 0))), JobProgress::Complete(9)), Some(ProgressEffect::Complete));
        let held = Some(JobState { held_by_other: true, cursor: None });
        assert_eq!(progress(held, JobProgress::Complete(9)), None);
        assert_eq!(progress(None, JobProgress::Complete(9)), None, "a job that is gone");
    }

    #[test]
    fn create_resolution_order() {
        let item = |id: u64| Arc::new(Item::new(ItemId(id), u(1), tideway_core::ItemKind::Post));
        let all = CreateFacts { by_idempotency_key: Some(item(1)), earlier_repost: Some(item(2)), id_taken: true };
        assert_eq!(create(all), CreateDecision::Resolved(CreateOutcome::Existing(item(1))));
        let repost = CreateFacts { earlier_repost: Some(item(2)), id_taken: true, ..CreateFacts::default() };
        assert_eq!(create(repost), CreateDecision::Resolved(CreateOutcome::AlreadyReposted(item(2))));
        assert_eq!(create(CreateFacts { id_taken: true, ..CreateFacts::default() }), CreateDecision::IdTaken);
        assert_eq!(create(CreateFacts::default()), CreateDecision::Store);
    }
}
