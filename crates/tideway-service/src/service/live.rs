//! The live feed (SPEC section 5): anchors' sessions and a viewer's
//! following tab, live first, then upcoming, then replay.
//!
//! - **Sessions** are created upcoming and moved one step at a time by
//!   `Session::moved` in the backend (a wrong step is `409`); their times
//!   are the service clock's.
//! - **The first page** reads the open sessions of everyone the viewer
//!   follows (one call: pull, as they change state often), orders them
//!   (`tideway_core::live::Snapshot::take`) and, when the walk goes on,
//!   keeps that order and each session's state under a new id from the item
//!   id generator (so the id says when it was taken) in the shared
//!   [`Snapshots`](tideway_store::Snapshots), for `live.snapshot_ttl`.
//! - **Later pages** read the snapshot from the cursor's position, each
//!   session shown as it was then (`Session::as_of`), then continue into the
//!   replay part: the ended sessions of the anchors followed now whose end
//!   is at or before the snapshot's time and that are not in it, by (end,
//!   id), newest first, merged by the backend (`Live::ended_sessions`: pull,
//!   so ending a session writes nothing per follower).
//! - **Hidden anchors** (blocks either way, the viewer's mutes) are left out
//!   at each page, and the page refills to `limit`.
//! - A cursor older than the TTL, or whose snapshot is gone, is `410
//!   cursor_expired`: the client starts over.

use super::node::Node;
use crate::error::{Result, ServiceError};
use crate::view::LivePage;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tideway_core::cursor::LiveCursor;
use tideway_core::ids::key_time;
use tideway_core::item::check_body;
use tideway_core::limits::page_limit;
use tideway_core::live::{LivePos, MAX_OPEN_SESSIONS, Move, Phase, Session, Snapshot, check_schedule};
use tideway_core::{Millis, UserId};
use tideway_store::{Backend, Moved, StoreError};

/// How long the shared half keeps a snapshot past `live.snapshot_ttl`.
const SNAPSHOT_GRACE_MS: i64 = 60_000;

/// The live feed: sessions and pages. It touches the backend's `Live`,
/// `Snapshots` and the viewer's graph, this node's clock and ids, and
/// nothing else.
pub struct LiveService {
    backend: Arc<dyn Backend>,
    node: Arc<Node>,
    /// `live.snapshot_ttl`, in ms.
    snapshot_ttl_ms: i64,
}

impl LiveService {
    pub(crate) fn new(backend: Arc<dyn Backend>, node: Arc<Node>, snapshot_ttl_ms: i64) -> Self {
        Self { backend, node, snapshot_ttl_ms }
    }

    /// Creates an upcoming session of `anchor`.
    pub async fn create_session(
        &self,
        anchor: UserId,
        scheduled_start: Millis,
        body: tideway_core::Body,
    ) -> Result<Session> {
        check_body(&body)?;
        let now = self.node.write_now()?;
        check_schedule("scheduled_start", scheduled_start, now)?;
        let session = Session::new(self.node.ids.next(now)?, anchor, scheduled_start, body);
        if !self.backend.create_session(session.clone(), MAX_OPEN_SESSIONS).await? {
            return Err(ServiceError::LimitExceeded(format!(
                "anchor {anchor} has {MAX_OPEN_SESSIONS} sessions upcoming or live; end or start one first"
            )));
        }
        Ok(session)
    }

    /// A session by id (`404` when unknown).
    pub async fn session(&self, id: u64) -> Result<Session> {
        self.backend
            .sessions(&[id])
            .await?
            .pop()
            .flatten()
            .ok_or_else(|| ServiceError::NotFound(format!("no live session {id}")))
    }

    /// Starts or ends session `id` now.
    pub async fn move_session(&self, id: u64, step: Move) -> Result<Session> {
        match self.backend.move_session(id, step, self.node.write_now()?).await? {
            Moved::Done(s) => Ok(s),
            Moved::Wrong(s) => {
                let (verb, needs) = match step {
                    Move::Start => ("started", "upcoming"),
                    Move::End => ("ended", "live"),
                };
                Err(ServiceError::Conflict(format!(
                    "session {id} is {}; only an {needs} session can be {verb}",
                    s.phase().as_str()
                )))
            }
            Moved::Unknown => Err(ServiceError::NotFound(format!("no live session {id}"))),
        }
    }

    /// A page of `viewer`'s live feed: the first (no cursor) takes the
    /// snapshot; the others continue the walk their cursor names.
    pub async fn page(&self, viewer: UserId, cursor: Option<&str>, limit: Option<usize>) -> Result<LivePage> {
        let limit = page_limit(limit)?;
        let now = self.node.now();
        let ttl = self.snapshot_ttl_ms;
        // The walk: its snapshot's id and contents, where the page starts,
        // and (on the first page) what it read to take it.
        let (snap_id, snapshot, start, mut followees, mut open) = match cursor {
            None => {
                let followees = self.backend.followees(viewer).await?;
                let open = self.backend.open_sessions(&followees).await?;
                let snapshot = Snapshot::take(open.iter().collect(), now);
                let id = self.node.ids.next(now)?;
                let open: HashMap<u64, Session> = open.into_iter().map(|s| (s.id, s)).collect();
                (id, snapshot, LivePos::Snapshot(0), Some(followees), open)
            }
            Some(c) => {
                let c = LiveCursor::decode(c, viewer.0)?;
                let start = LivePos::of_words(c.key, c.aux)?;
                let expired = || {
                    ServiceError::Expired(
                        "this live feed's snapshot expired; start again from the first page (no cursor)".into(),
                    )
                };
                if now.0.saturating_sub(key_time(c.snapshot).0) > ttl {
                    return Err(expired());
                }
                let bytes = self.backend.snapshot(c.snapshot).await?.ok_or_else(expired)?;
                let snapshot = Snapshot::decode(&bytes).ok_or_else(|| StoreError::corrupt("a live feed snapshot"))?;
                if now.0.saturating_sub(snapshot.taken.0) > ttl {
                    return Err(expired());
                }
                (c.snapshot, snapshot, start, None, HashMap::new())
            }
        };
        let taken = snapshot.taken;
        // One entry more than the page, to know whether the walk goes on.
        let want = limit + 1;
        let mut shown: Vec<(Session, LivePos)> = Vec::with_capacity(want);

        let mut below = match start {
            LivePos::Replay(t, id) => Some((t, id)),
            LivePos::Snapshot(mut i) => {
                while shown.len() < want && i < snapshot.entries.len() {
                    let batch: Vec<(u64, Phase)> =
                        snapshot.entries[i..].iter().take(want - shown.len()).copied().collect();
                    let missing: Vec<u64> =
                        batch.iter().map(|(id, _)| *id).filter(|id| !open.contains_key(id)).collect();
                    if !missing.is_empty() {
                        for s in self.backend.sessions(&missing).await?.into_iter().flatten() {
                            open.insert(s.id, s);
                        }
                    }
                    let anchors: Vec<UserId> =
                        batch.iter().filter_map(|(id, _)| open.get(id).map(|s| s.anchor)).collect();
                    let hidden = self.hidden_anchors(viewer, anchors).await?;
                    for (id, phase) in batch {
                        i += 1;
                        let Some(s) = open.get(&id) else { continue };
                        if !hidden.contains(&s.anchor) {
                            shown.push((s.as_of(phase), LivePos::Snapshot(i)));
                        }
                    }
                }
                (i >= snapshot.entries.len()).then_some((taken, u64::MAX))
            }
        };

        if shown.len() < want
            && let Some(mut at) = below.take()
        {
            let in_snapshot: HashSet<u64> = snapshot.entries.iter().map(|(id, _)| *id).collect();
            let followees = match followees.take() {
                Some(f) => f,
                None => self.backend.followees(viewer).await?,
            };
            while shown.len() < want {
                let ask = want - shown.len();
                let batch = self.backend.ended_sessions(&followees, at, ask).await?;
                let done = batch.len() < ask;
                let hidden = self.hidden_anchors(viewer, batch.iter().map(|s| s.anchor).collect()).await?;
                for s in batch {
                    let Some(key) = s.ended_key() else { continue };
                    at = key;
                    if !in_snapshot.contains(&s.id) && !hidden.contains(&s.anchor) {
                        shown.push((s, LivePos::Replay(key.0, key.1)));
                    }
                }
                if done {
                    break;
                }
            }
        }

        let more = shown.len() > limit;
        shown.truncate(limit);
        let next_cursor = match shown.last() {
            Some((_, pos)) if more => {
                let (key, aux) = pos.words();
                if cursor.is_none() {
                    // Kept a minute past the TTL: another node, its clock a
                    // little behind, still finds it until it calls it expired.
                    let keep = u64::try_from(ttl.saturating_add(SNAPSHOT_GRACE_MS)).unwrap_or(u64::MAX);
                    self.backend.put_snapshot(snap_id, &snapshot.encode(), keep).await?;
                }
                Some(LiveCursor { snapshot: snap_id, key, aux }.encode(viewer.0))
            }
            _ => None,
        };
        Ok(LivePage { entries: shown.into_iter().map(|(s, _)| s).collect(), next_cursor })
    }

    /// Of `anchors`, those hidden from `viewer` (a block either way, the
    /// viewer's mute).
    async fn hidden_anchors(&self, viewer: UserId, mut anchors: Vec<UserId>) -> Result<HashSet<UserId>> {
        anchors.sort_unstable();
        anchors.dedup();
        if anchors.is_empty() {
            return Ok(HashSet::new());
        }
        let rels = self.backend.relations(viewer, &anchors).await?;
        Ok(anchors.into_iter().zip(rels).filter(|(_, r)| r.hidden(true)).map(|(a, _)| a).collect())
    }
}
