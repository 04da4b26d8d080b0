//! Live sessions: each anchor's sessions in the index
//! ([`crate::sessions::AnchorSessions`]), changed by the store's ordinary
//! write path (a step is decided by `Session::moved` under the write lock,
//! so two racing starts make one). The embedded store loads an anchor's
//! sessions on first use ([`Unit::Live`]); a session read by id whose anchor
//! is not loaded names its anchor from disk (an anchor never changes), and
//! is then read from the anchor's loaded unit, which has every write (the
//! disk may not have the latest yet, and an anchor may have been let go).

use super::Store;
use super::journal::{Journal, disk};
use crate::change::Change;
use crate::sessions::merge_ended;
use crate::state::Unit;
use crate::traits::{Live, Moved, Result};
use async_trait::async_trait;
use tideway_core::live::{Move, Session};
use tideway_core::{Millis, UserId};

impl<J: Journal> Store<J> {
    /// The anchor of session `id`: from the index, else from disk.
    async fn anchor_of(&self, id: u64) -> Result<Option<UserId>> {
        {
            let st = self.state.read();
            if let Some(a) = st.session_anchor.get(&id) {
                return Ok(Some(*a));
            }
            if !st.lazy {
                return Ok(None);
            }
        }
        let read = self.read_off_runtime(1, move |j| disk(j)?.read_sessions(&[id])).await?;
        Ok(read.into_iter().flatten().next().map(|s| s.anchor))
    }
}

#[async_trait]
impl<J: Journal> Live for Store<J> {
    async fn create_session(&self, session: Session, max_open: usize) -> Result<bool> {
        let anchor = session.anchor;
        self.commit(|st, need| {
            if !st.loaded(Unit::Live(anchor)) {
                need.push(Unit::Live(anchor));
                return Ok((false, Vec::new()));
            }
            if session.is_open() && st.live.get(&anchor).map_or(0, |a| a.open_count()) >= max_open {
                return Ok((false, Vec::new()));
            }
            Ok((true, vec![Change::PutSession(session.clone())]))
        })
        .await
    }

    async fn move_session(&self, id: u64, step: Move, at: Millis) -> Result<Moved> {
        let Some(anchor) = self.anchor_of(id).await? else { return Ok(Moved::Unknown) };
        self.commit(|st, need| {
            if !st.loaded(Unit::Live(anchor)) {
                need.push(Unit::Live(anchor));
                return Ok((Moved::Unknown, Vec::new()));
            }
            let Some(s) = st.live.get(&anchor).and_then(|a| a.get(id)) else { return Ok((Moved::Unknown, Vec::new())) };
            Ok(match s.moved(step, at) {
                Some(next) => (Moved::Done(next.clone()), vec![Change::PutSession(next)]),
                None => (Moved::Wrong(s.clone()), Vec::new()),
            })
        })
        .await
    }

    async fn sessions(&self, ids: &[u64]) -> Result<Vec<Option<Session>>> {
        let (mut out, missing) = {
            let st = self.state.read();
            let out: Vec<Option<Session>> = ids
                .iter()
                .map(|id| {
                    let a = st.session_anchor.get(id)?;
                    st.live.get(a).and_then(|a| a.get(*id)).cloned()
                })
                .collect();
            let missing: Vec<u64> = if st.lazy {
                ids.iter().zip(&out).filter(|(_, s)| s.is_none()).map(|(id, _)| *id).collect()
            } else {
                Vec::new()
            };
            (out, missing)
        };
        if missing.is_empty() {
            return Ok(out);
        }
        let read = self.read_off_runtime(missing.len(), move |j| disk(j)?.read_sessions(&missing)).await?;
        let mut anchors: Vec<UserId> = read.iter().flatten().map(|s| s.anchor).collect();
        anchors.sort_unstable();
        anchors.dedup();
        if anchors.is_empty() {
            return Ok(out);
        }
        let found = self
            .read(|st, need| {
                for a in &anchors {
                    if !st.loaded(Unit::Live(*a)) {
                        need.push(Unit::Live(*a));
                    }
                }
                let in_index =
                    |id: &u64| st.session_anchor.get(id).and_then(|a| st.live.get(a)).and_then(|a| a.get(*id));
                ids.iter().map(|id| in_index(id).cloned()).collect::<Vec<_>>()
            })
            .await?;
        for (slot, f) in out.iter_mut().zip(found) {
            if slot.is_none() {
                *slot = f;
            }
        }
        Ok(out)
    }

    async fn open_sessions(&self, anchors: &[UserId]) -> Result<Vec<Session>> {
        self.read(|st, need| {
            let mut out = Vec::new();
            for a in anchors {
                if !st.loaded(Unit::Live(*a)) {
                    need.push(Unit::Live(*a));
                } else if let Some(list) = st.live.get(a) {
                    out.extend(list.open().cloned());
                }
            }
            out
        })
        .await
    }

    async fn ended_sessions(&self, anchors: &[UserId], below: (Millis, u64), limit: usize) -> Result<Vec<Session>> {
        self.read(|st, need| {
            for a in anchors {
                if !st.loaded(Unit::Live(*a)) {
                    need.push(Unit::Live(*a));
                }
            }
            if !need.is_empty() {
                return Vec::new();
            }
            merge_ended(anchors.iter().filter_map(|a| st.live.get(a)), below, limit)
        })
        .await
    }
}
