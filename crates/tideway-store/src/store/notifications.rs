//! Notifications: each user's [`Book`] in the index, changed by the
//! store's ordinary write path (decided and applied under the index's write
//! lock, so two events of one key never open two groups; journaled as the
//! rows the book reports; durable before acknowledged). The embedded store
//! loads a user's book whole on first use ([`Unit::Notify`]).

use super::journal::{Journal, Ticket, disk};
use super::{Committed, Store};
use crate::change::Change;
use crate::notebook::Book;
use crate::state::Unit;
use crate::traits::Record;
use crate::traits::{CausePos, Notifications, NotifyPage, Result, StoredCause};
use async_trait::async_trait;
use std::sync::Arc;
use tideway_core::notify::{Mark, Op};
use tideway_core::{Millis, UserId};

impl<J: Journal> Store<J> {
    /// Applies and journals notification ops without waiting for the disk
    /// (the caller syncs the ticket, with whatever else it wrote).
    pub(super) async fn journal_notes(&self, ops: &[Op]) -> Result<Option<Ticket>> {
        if ops.is_empty() {
            return Ok(None);
        }
        let notes = |_: &_, _: &mut _| Ok(((), ops.iter().cloned().map(Change::Notify).collect()));
        Ok(match self.write(notes).await? {
            Committed::Nothing(()) => None,
            Committed::Written { ticket, .. } => Some(ticket),
        })
    }
}

#[async_trait]
impl<J: Journal> Notifications for Store<J> {
    async fn notify(&self, ops: &[Op]) -> Result<()> {
        if let Some(ticket) = self.journal_notes(ops).await? {
            self.sync(ticket).await?;
        }
        Ok(())
    }

    async fn notifications(&self, user: UserId, before: Option<(Millis, u64)>, limit: usize) -> Result<NotifyPage> {
        self.read(|st, need| {
            if !st.loaded(Unit::Notify(user)) {
                need.push(Unit::Notify(user));
            }
            match st.notify.get(&user) {
                Some(book) => book.page(before, limit),
                None => Book::default().page(before, limit),
            }
        })
        .await
    }

    /// The memory backend scans its index; the embedded store its disk
    /// (what is not on disk yet was written by this version, with its
    /// notifications).
    async fn stored_causes(&self, after: &CausePos, limit: usize) -> Result<Vec<StoredCause>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        if self.journal.disk().is_some() {
            let after = after.clone();
            return self
                .read_off_runtime(limit, move |j| {
                    let d = disk(j)?;
                    Ok(match after {
                        CausePos::Items(a) => d.items_after(a, limit)?.into_iter().map(StoredCause::Item).collect(),
                        CausePos::Follows(a) => d
                            .follows_after(a, limit)?
                            .into_iter()
                            .map(|(from, to, since)| StoredCause::Follow { from, to, since })
                            .collect(),
                        CausePos::Reactions(a) => d
                            .reactions_after(a, limit)?
                            .into_iter()
                            .map(|(item, user, kind)| StoredCause::Reaction { item, user, kind })
                            .collect(),
                    })
                })
                .await;
        }
        let st = self.state.read();
        Ok(match after {
            CausePos::Items(a) => {
                let mut items: Vec<Arc<tideway_core::Item>> = st
                    .records
                    .values()
                    .filter_map(|r| match r {
                        Record::Item(i) if a.is_none_or(|a| i.id > a) => Some(i.clone()),
                        _ => None,
                    })
                    .collect();
                items.sort_unstable_by_key(|i| i.id);
                items.into_iter().take(limit).map(StoredCause::Item).collect()
            }
            CausePos::Follows(a) => {
                let mut users: Vec<UserId> =
                    st.users.keys().copied().filter(|u| a.is_none_or(|(from, _)| *u >= from)).collect();
                users.sort_unstable();
                let mut out = Vec::new();
                for from in users {
                    let following = &st.users[&from].following;
                    for &(to, since) in following.iter() {
                        if a.is_none_or(|a| (from, to) > a) {
                            out.push(StoredCause::Follow { from, to, since });
                            if out.len() == limit {
                                return Ok(out);
                            }
                        }
                    }
                }
                out
            }
            CausePos::Reactions(a) => st
                .reactions
                .after(a.as_ref(), limit)
                .into_iter()
                .map(|(item, user, kind)| StoredCause::Reaction { item, user, kind })
                .collect(),
        })
    }

    async fn mark_notifications(&self, user: UserId, mark: Mark, up_to: Option<u64>) -> Result<bool> {
        self.commit(|st, need| {
            if !st.loaded(Unit::Notify(user)) {
                need.push(Unit::Notify(user));
                return Ok((false, Vec::new()));
            }
            let book = st.notify.get(&user);
            if let Some(id) = up_to
                && !book.is_some_and(|b| b.has_group(id))
            {
                return Ok((false, Vec::new()));
            }
            let to = book.and_then(|b| b.mark_target(up_to));
            Ok((true, to.map(|to| Change::NotifyMark { user, mark, to }).into_iter().collect()))
        })
        .await
    }
}
