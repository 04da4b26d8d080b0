//! The live feed (SPEC section 5): anchors' sessions, their states, the
//! order of a viewer's live feed and its snapshots. The pure part, shared by
//! every engine, the service and the tests' reference.
//!
//! - A **session** is `upcoming` (created, with a scheduled start), then
//!   `live` (started), then `replay` (ended); [`Session::moved`] is the only
//!   way between them, and refuses any other step.
//! - A viewer's feed: every `live` session of the anchors they follow,
//!   newest start first; then every `upcoming` one, soonest scheduled start
//!   first ([`open_order`]); then the `replay` ones, most recently ended
//!   first ([`Session::ended_key`]).
//! - The first page takes a [`Snapshot`] of the live and upcoming part (the
//!   sessions and the state each was in); later pages read it, each session
//!   shown in its snapshot state ([`Session::as_of`]), then continue into
//!   the sessions that had ended when the snapshot was taken and are not in
//!   it, so no session shows twice.

use crate::error::DomainError;
use crate::ids::UserId;
use crate::item::Body;
use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::cmp::{Ordering, Reverse};

/// Sessions an anchor may have upcoming or live at once (a viewer's
/// snapshot holds at most this many per anchor they follow).
pub const MAX_OPEN_SESSIONS: usize = 100;
/// How far ahead of now a session may be scheduled (a year).
pub const MAX_SCHEDULE_AHEAD_MS: i64 = 366 * 24 * 3_600_000;
/// How far before now a session may be scheduled (a day: a late start).
pub const MAX_SCHEDULE_BEHIND_MS: i64 = 24 * 3_600_000;

/// Where a session is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Live,
    Upcoming,
    Replay,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Live => "live",
            Phase::Upcoming => "upcoming",
            Phase::Replay => "replay",
        }
    }

    fn byte(self) -> u8 {
        match self {
            Phase::Live => 0,
            Phase::Upcoming => 1,
            Phase::Replay => 2,
        }
    }

    fn of_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(Phase::Live),
            1 => Some(Phase::Upcoming),
            2 => Some(Phase::Replay),
            _ => None,
        }
    }
}

/// A step in a session's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    Start,
    End,
}

/// A live session of an anchor. `id` comes from the item id generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub id: u64,
    pub anchor: UserId,
    pub scheduled_start: Millis,
    pub started_at: Option<Millis>,
    pub ended_at: Option<Millis>,
    pub body: Body,
}

impl Session {
    /// A new, upcoming session.
    pub fn new(id: u64, anchor: UserId, scheduled_start: Millis, body: Body) -> Self {
        Self { id, anchor, scheduled_start, started_at: None, ended_at: None, body }
    }

    pub fn phase(&self) -> Phase {
        match (self.started_at, self.ended_at) {
            (_, Some(_)) => Phase::Replay,
            (Some(_), None) => Phase::Live,
            (None, None) => Phase::Upcoming,
        }
    }

    /// Upcoming or live: read at request time, and held by snapshots.
    pub fn is_open(&self) -> bool {
        self.ended_at.is_none()
    }

    /// The session after `step` at `at`; `None` when the step is not the
    /// next one of its life (starting a live or ended session, ending one
    /// that is not live). An end is never before the start (clocks of two
    /// nodes may differ a little).
    pub fn moved(&self, step: Move, at: Millis) -> Option<Session> {
        match (step, self.phase()) {
            (Move::Start, Phase::Upcoming) => Some(Session { started_at: Some(at), ..self.clone() }),
            (Move::End, Phase::Live) => {
                let start = self.started_at.unwrap_or(at);
                Some(Session { ended_at: Some(at.max(start)), ..self.clone() })
            }
            _ => None,
        }
    }

    /// The session as it was in `phase` (a snapshot shows it so): the
    /// times of later steps are not shown.
    pub fn as_of(&self, phase: Phase) -> Session {
        let mut s = self.clone();
        match phase {
            Phase::Upcoming => {
                s.started_at = None;
                s.ended_at = None;
            }
            Phase::Live => s.ended_at = None,
            Phase::Replay => {}
        }
        s
    }

    /// Where an ended session sorts in the replay part: (end, id), the
    /// largest first.
    pub fn ended_key(&self) -> Option<(Millis, u64)> {
        self.ended_at.map(|t| (t, self.id))
    }
}

/// Checks a scheduled start against `now` (`field` names it in the error).
pub fn check_schedule(field: &'static str, at: Millis, now: Millis) -> Result<(), DomainError> {
    if at.0 < now.0.saturating_sub(MAX_SCHEDULE_BEHIND_MS) {
        return Err(DomainError::invalid(field, format!("{at} is more than a day in the past")));
    }
    if at.0 > now.0.saturating_add(MAX_SCHEDULE_AHEAD_MS) {
        return Err(DomainError::invalid(field, format!("{at} is more than a year ahead")));
    }
    Ok(())
}

/// The order of the live and upcoming part: live sessions first, newest
/// start first; then upcoming ones, soonest scheduled start first; ties by
/// id (the newest live one first, the oldest upcoming one first).
pub fn open_order(a: &Session, b: &Session) -> Ordering {
    fn key(s: &Session) -> (Phase, Reverse<Millis>, Millis, Reverse<u64>, u64) {
        match s.phase() {
            Phase::Live => (Phase::Live, Reverse(s.started_at.unwrap_or(Millis(0))), Millis(0), Reverse(s.id), 0),
            p => (p, Reverse(Millis(0)), s.scheduled_start, Reverse(0), s.id),
        }
    }
    key(a).cmp(&key(b))
}

/// The live and upcoming part of a viewer's feed at the moment it was
/// taken: each session and the phase it was in, in feed order; and that
/// moment (the replay part holds the sessions that had ended by then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub taken: Millis,
    pub entries: Vec<(u64, Phase)>,
}

impl Snapshot {
    /// The snapshot at `taken` of these open sessions (any order; closed
    /// ones are left out).
    pub fn take(mut sessions: Vec<&Session>, taken: Millis) -> Self {
        sessions.retain(|s| s.is_open());
        sessions.sort_by(|a, b| open_order(a, b));
        Self { taken, entries: sessions.iter().map(|s| (s.id, s.phase())).collect() }
    }

    /// The time taken (8 bytes), then 9 bytes an entry: the id, the phase.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.entries.len() * 9);
        out.extend_from_slice(&self.taken.0.to_be_bytes());
        for (id, phase) in &self.entries {
            out.extend_from_slice(&id.to_be_bytes());
            out.push(phase.byte());
        }
        out
    }

    /// `None` for bytes [`Snapshot::encode`] did not write.
    pub fn decode(b: &[u8]) -> Option<Self> {
        let (taken, b) = (b.get(..8)?, b.get(8..)?);
        if !b.len().is_multiple_of(9) {
            return None;
        }
        let taken = Millis(i64::from_be_bytes(taken.try_into().ok()?));
        let entries = b
            .chunks_exact(9)
            .map(|c| {
                let mut id = [0u8; 8];
                id.copy_from_slice(&c[..8]);
                Phase::of_byte(c[8]).map(|p| (u64::from_be_bytes(id), p))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self { taken, entries })
    }
}

/// Where a live feed cursor points, in the words of a
/// [`crate::cursor::LiveCursor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LivePos {
    /// The next entry of the snapshot to show.
    Snapshot(usize),
    /// Below this (end, id) in the replay part.
    Replay(Millis, u64),
}

/// The `key` of a cursor inside the snapshot (an end time never is).
const IN_SNAPSHOT: u64 = u64::MAX;

impl LivePos {
    pub fn words(self) -> (u64, u64) {
        match self {
            LivePos::Snapshot(i) => (IN_SNAPSHOT, i as u64),
            LivePos::Replay(t, id) => (u64::try_from(t.0).unwrap_or(0), id),
        }
    }

    pub fn of_words(key: u64, aux: u64) -> Result<Self, DomainError> {
        if key == IN_SNAPSHOT {
            return usize::try_from(aux)
                .map(LivePos::Snapshot)
                .map_err(|_| DomainError::InvalidCursor("not a live feed position"));
        }
        let t = i64::try_from(key).map_err(|_| DomainError::InvalidCursor("not a live feed position"))?;
        Ok(LivePos::Replay(Millis(t), aux))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(id: u64, sched: i64, started: Option<i64>, ended: Option<i64>) -> Session {
        Session {
            id,
            anchor: UserId(id % 7 + 1),
            scheduled_start: Millis(sched),
            started_at: started.map(Millis),
            ended_at: ended.map(Millis),
            body: Body::default(),
        }
    }

    #[test]
    fn a_session_moves_one_step_at_a_time() {
        let up = s(1, 100, None, None);
        assert_eq!(up.phase(), Phase::Upcoming);
        assert!(up.moved(Move::End, Millis(5)).is_none(), "an upcoming session cannot end");
        let live = up.moved(Move::Start, Millis(50)).expect("start");
        assert_eq!((live.phase(), live.started_at), (Phase::Live, Some(Millis(50))));
        assert!(live.moved(Move::Start, Millis(60)).is_none(), "started twice");
        let ended = live.moved(Move::End, Millis(40)).expect("end");
        assert_eq!(ended.ended_at, Some(Millis(50)), "never before its start");
        assert_eq!(ended.phase(), Phase::Replay);
        assert!(ended.moved(Move::End, Millis(70)).is_none() && ended.moved(Move::Start, Millis(70)).is_none());
        assert_eq!(ended.as_of(Phase::Live), live);
        assert_eq!(ended.as_of(Phase::Upcoming), up);
    }

    #[test]
    fn live_first_newest_start_then_upcoming_soonest() {
        let all = [
            s(1, 10, None, None),
            s(2, 5, None, None),
            s(3, 1, Some(20), None),
            s(4, 1, Some(30), None),
            s(5, 1, Some(30), None),
            s(6, 1, Some(1), Some(2)),
            s(7, 5, None, None),
        ];
        let snap = Snapshot::take(all.iter().collect(), Millis(40));
        let ids: Vec<u64> = snap.entries.iter().map(|e| e.0).collect();
        assert_eq!(ids, [5, 4, 3, 2, 7, 1], "ended ones are not in a snapshot");
        assert_eq!(snap.entries[0].1, Phase::Live);
        assert_eq!(snap.entries[3].1, Phase::Upcoming);
        assert_eq!(Snapshot::decode(&snap.encode()), Some(snap.clone()));
        assert!(Snapshot::decode(&[1, 2, 3]).is_none());
        assert!(Snapshot::decode(&snap.encode()[..20]).is_none());
    }

    #[test]
    fn positions_round_trip_through_cursor_words() {
        for p in [LivePos::Snapshot(0), LivePos::Snapshot(41), LivePos::Replay(Millis(1_700_000_000_000), 9)] {
            let (k, a) = p.words();
            assert_eq!(LivePos::of_words(k, a), Ok(p));
        }
    }

    #[test]
    fn schedules_are_checked_against_now() {
        let now = Millis(1_700_000_000_000);
        assert!(check_schedule("scheduled_start", now, now).is_ok());
        assert!(check_schedule("scheduled_start", Millis(now.0 - 2 * MAX_SCHEDULE_BEHIND_MS), now).is_err());
        assert!(check_schedule("scheduled_start", Millis(now.0 + MAX_SCHEDULE_AHEAD_MS + 1), now).is_err());
    }
}
