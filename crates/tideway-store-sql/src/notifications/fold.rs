//! Folding a user's moves into their row's counts.

use super::*;

impl SqlStore {
    /// Folds `user`'s moves into their row's counts in a transaction that
    /// waits on no lock: a row held by a mark or another fold is left to
    /// them.
    pub(super) async fn fold_now(&self, user: UserId) -> Result<()> {
        let mut tx = self.begin().await?;
        let u = k(user.0);
        let row_sql = "SELECT seen, rd, unseen, unread FROM tw_notify_users WHERE usr = ? FOR UPDATE SKIP LOCKED";
        let mut row = self.rows_in(&mut tx, row_sql, &[Int(u)]).await?;
        if row.is_empty() {
            // Held by another (nothing to do), or not made yet.
            if !self.rows_in(&mut tx, "SELECT usr FROM tw_notify_users WHERE usr = ?", &[Int(u)]).await?.is_empty() {
                return Ok(());
            }
            let sql = self.insert_or_keep("tw_notify_users (usr, seen, rd, unseen, unread)", "(?, ?, ?, 0, 0)", "usr");
            self.exec_in(&mut tx, &sql, &[Int(u), Int(NEVER.0), Int(NEVER.0)]).await?;
            row = self.rows_in(&mut tx, row_sql, &[Int(u)]).await?;
        }
        let Some(row) = row.first() else { return Ok(()) };
        let mut marks = Marks::of(row, 0)?;
        let mut moves = Vec::new();
        for r in
            self.rows_in(&mut tx, "SELECT seq, old_at, new_at FROM tw_notify_moves WHERE usr = ?", &[Int(u)]).await?
        {
            moves.push((int(&r, 0)?, oint(&r, 1)?, oint(&r, 2)?));
        }
        if moves.is_empty() {
            return Ok(());
        }
        for (_, was, now) in &moves {
            marks.reorder(*was, *now);
        }
        self.write_fold(&mut tx, user, marks, &moves).await?;
        self.commit(tx).await
    }

    /// Writes `user`'s row (marks and counts, which take in `moves`) and
    /// deletes those moves, within `tx`, which holds the row.
    pub(super) async fn write_fold(
        &self,
        tx: &mut Tx,
        user: UserId,
        marks: Marks,
        moves: &[(i64, Option<i64>, Option<i64>)],
    ) -> Result<()> {
        let u = k(user.0);
        self.exec_in(
            tx,
            "UPDATE tw_notify_users SET seen = ?, rd = ?, unseen = ?, unread = ? WHERE usr = ?",
            &[Int(marks.seen), Int(marks.read), Int(marks.unseen), Int(marks.unread), Int(u)],
        )
        .await?;
        for chunk in moves.chunks(MOVES_A_STATEMENT) {
            let (m, seqs) = in_list(chunk.iter().map(|m| m.0));
            let mut args = vec![Int(u)];
            args.extend(seqs.into_iter().map(Int));
            self.exec_in(tx, &format!("DELETE FROM tw_notify_moves WHERE usr = ? AND seq IN ({m})"), &args).await?;
        }
        Ok(())
    }
}
