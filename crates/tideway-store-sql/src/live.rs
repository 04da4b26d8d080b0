//! Live sessions on SQL (schema 9): `tw_live` keeps each session whole (its
//! JSON) with its anchor and its end as columns (`ended_at` 0 while
//! upcoming or live); `tw_live_anchors` counts each anchor's open sessions.
//!
//! - **A step** is decided by `Session::moved` from the row read under
//!   lock, never in SQL: the anchor's row is locked first (by creates and
//!   steps alike, so the open count and the limit hold under racing nodes),
//!   then the session's.
//! - **Reads** are one statement each: sessions by id; a viewer's anchors'
//!   open sessions (`anchor IN (…) AND ended_at = 0`, a range of
//!   `tw_live_anchor` per anchor); their ended sessions below a position,
//!   latest first, with the `LIMIT` in the text. Ending a session writes
//!   nothing per follower: the replay part is pulled.

use crate::SqlStore;
use crate::rows::Bind::{Int, Text};
use crate::rows::{in_list, int, k, text};
use crate::tx::Tx;
use async_trait::async_trait;
use tideway_core::live::{Move, Session};
use tideway_core::{Millis, UserId};
use tideway_store::{Live, Moved, Result, StoreError};

fn session_of(json: &str) -> Result<Session> {
    serde_json::from_str(json).map_err(|e| StoreError::corrupt_by("a live session", e))
}

fn json_of(s: &Session) -> Result<String> {
    serde_json::to_string(s).map_err(|e| StoreError::corrupt_by("encoding a live session", e))
}

fn ended(s: &Session) -> i64 {
    s.ended_at.map_or(0, |t| t.0)
}

impl SqlStore {
    /// Locks `anchor`'s row within `tx`, making it on first use; returns
    /// its count of open sessions.
    async fn lock_anchor(&self, tx: &mut Tx, anchor: UserId) -> Result<i64> {
        let a = [Int(k(anchor.0))];
        for _ in 0..2 {
            let rows = self.rows_in(tx, "SELECT opened FROM tw_live_anchors WHERE anchor = ? FOR UPDATE", &a).await?;
            if let Some(r) = rows.first() {
                return int(r, 0);
            }
            let make = self.insert_or_keep("tw_live_anchors (anchor, opened)", "(?, 0)", "anchor");
            self.exec_in(tx, &make, &a).await?;
        }
        Err(StoreError::corrupt("a live anchor's row, just made"))
    }

    async fn add_open(&self, tx: &mut Tx, anchor: UserId, by: i64) -> Result<()> {
        self.exec_in(
            tx,
            "UPDATE tw_live_anchors SET opened = opened + ? WHERE anchor = ?",
            &[Int(by), Int(k(anchor.0))],
        )
        .await?;
        Ok(())
    }

    /// The sessions of `sql` (its first column is a session's JSON).
    async fn read_sessions(&self, sql: &str, binds: &[i64]) -> Result<Vec<Session>> {
        self.fetch(sql, binds).await?.iter().map(|r| session_of(&text(r, 0)?)).collect()
    }
}

#[async_trait]
impl Live for SqlStore {
    async fn create_session(&self, session: Session, max_open: usize) -> Result<bool> {
        let json = json_of(&session)?;
        self.retrying(|| async {
            let mut tx = self.begin().await?;
            let max_open = i64::try_from(max_open).unwrap_or(i64::MAX);
            if session.is_open() && self.lock_anchor(&mut tx, session.anchor).await? >= max_open {
                return Ok(false);
            }
            self.exec_in(
                &mut tx,
                "INSERT INTO tw_live (id, anchor, ended_at, session) VALUES (?, ?, ?, ?)",
                &[Int(k(session.id)), Int(k(session.anchor.0)), Int(ended(&session)), Text(&json)],
            )
            .await?;
            // A session stored already ended (an import) opens nothing.
            if session.is_open() {
                self.add_open(&mut tx, session.anchor, 1).await?;
            }
            self.commit(tx).await?;
            Ok(true)
        })
        .await
    }

    async fn move_session(&self, id: u64, step: Move, at: Millis) -> Result<Moved> {
        let Some(anchor) = self
            .fetch("SELECT anchor FROM tw_live WHERE id = ?", &[k(id)])
            .await?
            .first()
            .map(|r| int(r, 0))
            .transpose()?
        else {
            return Ok(Moved::Unknown);
        };
        let anchor = UserId(anchor as u64);
        self.retrying(|| async {
            let mut tx = self.begin().await?;
            self.lock_anchor(&mut tx, anchor).await?;
            let rows =
                self.rows_in(&mut tx, "SELECT session FROM tw_live WHERE id = ? FOR UPDATE", &[Int(k(id))]).await?;
            let Some(row) = rows.first() else { return Ok(Moved::Unknown) };
            let now = session_of(&text(row, 0)?)?;
            let Some(next) = now.moved(step, at) else { return Ok(Moved::Wrong(now)) };
            let json = json_of(&next)?;
            self.exec_in(
                &mut tx,
                "UPDATE tw_live SET session = ?, ended_at = ? WHERE id = ?",
                &[Text(&json), Int(ended(&next)), Int(k(id))],
            )
            .await?;
            if !next.is_open() {
                self.add_open(&mut tx, anchor, -1).await?;
            }
            self.commit(tx).await?;
            Ok(Moved::Done(next))
        })
        .await
    }

    async fn sessions(&self, ids: &[u64]) -> Result<Vec<Option<Session>>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (m, binds) = in_list(ids.iter().map(|id| k(*id)));
        let found = self.read_sessions(&format!("SELECT session FROM tw_live WHERE id IN ({m})"), &binds).await?;
        Ok(ids.iter().map(|id| found.iter().find(|s| s.id == *id).cloned()).collect())
    }

    async fn open_sessions(&self, anchors: &[UserId]) -> Result<Vec<Session>> {
        if anchors.is_empty() {
            return Ok(Vec::new());
        }
        let (m, binds) = in_list(anchors.iter().map(|a| k(a.0)));
        self.read_sessions(&format!("SELECT session FROM tw_live WHERE anchor IN ({m}) AND ended_at = 0"), &binds).await
    }

    async fn ended_sessions(&self, anchors: &[UserId], below: (Millis, u64), limit: usize) -> Result<Vec<Session>> {
        if anchors.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let (m, mut binds) = in_list(anchors.iter().map(|a| k(a.0)));
        // A position's id may be above every id (`u64::MAX`: "all of that end").
        binds.extend([below.0.0, below.0.0, i64::try_from(below.1).unwrap_or(i64::MAX)]);
        let sql = format!(
            "SELECT session FROM tw_live WHERE anchor IN ({m}) AND ended_at > 0 \
             AND (ended_at < ? OR (ended_at = ? AND id < ?)) ORDER BY ended_at DESC, id DESC LIMIT {limit}"
        );
        self.read_sessions(&sql, &binds).await
    }
}
