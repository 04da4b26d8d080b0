//! [`Items`] on a [`Store`]: items, reactions, promotions and insertions.
//! What a create resolves to is decided by [`rules::create`].

use super::Store;
use super::journal::{Journal, disk};
use crate::change::Change;
use crate::error::StoreError;
use crate::rules::{self, CreateDecision, CreateFacts};
use crate::state::Unit;
use crate::traits::is_stripped;
use crate::traits::*;
use crate::traits::{Job, Promotion, Record};
use async_trait::async_trait;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tideway_core::merge::{Direction, KeyRange, merge_sorted};
use tideway_core::{Body, Item, ItemId, Key, Millis, UserId};

#[async_trait]
impl<J: Journal> Items for Store<J> {
    async fn create_item_notifying(
        &self,
        item: Item,
        fan_out: bool,
        now: Millis,
        notify: &[tideway_core::notify::Op],
    ) -> Result<CreateOutcome> {
        self.commit(|st, need| {
            let mut facts = CreateFacts::default();
            if let Some(k) = &item.idempotency_key {
                // Pending keys are in the index; durable ones, with a lazy
                // journal, only in the journal.
                let known = match st.idempotency.get(&(item.author, k.clone())) {
                    Some(id) => Some(*id),
                    None if st.lazy => disk(&*self.journal)?.idempotent(item.author, k)?,
                    None => None,
                };
                facts.by_idempotency_key = known.map(|id| self.item_now(st, id)).transpose()?.flatten();
            }
            if facts.by_idempotency_key.is_none()
                && let Some(orig) = item.repost_of
                && st.item_or_need(orig, need)
                && let Some(id) = st.repost_by.get(&(item.author, orig))
            {
                facts.earlier_repost = self.item_now(st, *id)?;
            }
            if facts.by_idempotency_key.is_none() && facts.earlier_repost.is_none() {
                facts.id_taken =
                    st.records.contains_key(&item.id.0) || (st.lazy && disk(&*self.journal)?.has_item(item.id)?);
            }
            match rules::create(facts) {
                CreateDecision::Resolved(outcome) => return Ok((outcome, vec![])),
                CreateDecision::IdTaken => return Err(StoreError::IdTaken(item.id.0)),
                CreateDecision::Store => {}
            }
            let item = Arc::new(item.clone());
            let mut changes = vec![Change::PutItem(item.clone())];
            if fan_out {
                changes.push(Change::PutJob(Job { key: item.id.0, author: item.author, cursor: None, created: now }));
            }
            // Its notifications in the same journal write: on disk together.
            changes.extend(notify.iter().cloned().map(Change::Notify));
            Ok((CreateOutcome::Created(item), changes))
        })
        .await
    }

    async fn update_item_notifying(
        &self,
        id: ItemId,
        change: &ItemChange,
        notify: &[tideway_core::notify::Op],
    ) -> Result<Option<Arc<Item>>> {
        self.commit(|st, _| match self.item_now(st, id)? {
            Some(i) if !i.deleted => {
                let mut new = change.apply(&i);
                if is_stripped(&new.body) {
                    // The change keeps the body, which only the journal has:
                    // a rare write (a visibility change or a delete) reads it
                    // in place, so the record written is whole.
                    new.body = self.body_now(id)?.unwrap_or_default();
                }
                let new = Arc::new(new);
                let mut changes = vec![Change::UpdateItem(new.clone())];
                changes.extend(notify.iter().cloned().map(Change::Notify));
                Ok((Some(new), changes))
            }
            _ => Ok((None, vec![])),
        })
        .await
    }

    async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
        let mut out: Vec<Option<Record>> = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        {
            let st = self.state.read();
            for (n, k) in keys.iter().enumerate() {
                let found = match (st.records.get(k), &self.caches) {
                    (Some(r), _) => Some(r.clone()),
                    (None, Some(c)) => c.items.get(k),
                    (None, None) => None,
                };
                if found.is_none() && self.caches.is_some() {
                    missing.push((n, *k));
                }
                out.push(found);
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let want: Vec<Key> = missing.iter().map(|(_, k)| *k).collect();
        let read = self
            .read_to_cache(
                want.len(),
                move |j| disk(j)?.read_records(&want),
                |c, read| {
                    for ((_, key), got) in missing.iter().zip(read) {
                        // (a settle may have cached the key meanwhile, whole)
                        if let Some(v) = got
                            && c.items.get(key).is_none()
                        {
                            c.items.insert(*key, v.clone());
                        }
                    }
                },
            )
            .await?;
        for ((n, _), got) in missing.into_iter().zip(read) {
            out[n] = got;
        }
        Ok(out)
    }

    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
        let mut out: Vec<Option<Body>> = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        {
            let st = self.state.read();
            for (n, id) in ids.iter().enumerate() {
                match (st.item(*id), &self.caches) {
                    (Some(i), _) if !is_stripped(&i.body) => out.push(Some(i.body.clone())),
                    (_, Some(c)) => match c.items.get(&id.0) {
                        Some(Record::Item(i)) if !is_stripped(&i.body) => out.push(Some(i.body.clone())),
                        _ => {
                            missing.push((n, *id));
                            out.push(None);
                        }
                    },
                    (i, None) => out.push(i.map(|i| i.body.clone())),
                }
            }
        }
        if missing.is_empty() {
            return Ok(out);
        }
        let want: Vec<ItemId> = missing.iter().map(|(_, id)| *id).collect();
        let read = self
            .read_to_cache(
                want.len(),
                move |j| disk(j)?.read_bodies(&want),
                |c, read| {
                    for ((_, id), got) in missing.iter().zip(read) {
                        // The cached record (read without its body) made whole.
                        if let Some(body) = got
                            && let Some(Record::Item(i)) = c.items.get(&id.0)
                            && is_stripped(&i.body)
                        {
                            let whole = Arc::new(Item { body: body.clone(), ..(*i).clone() });
                            c.items.insert(id.0, Record::Item(whole));
                        }
                    }
                },
            )
            .await?;
        for ((n, _), got) in missing.into_iter().zip(read) {
            out[n] = got;
        }
        Ok(out)
    }

    async fn outbox_merge(
        &self,
        authors: &[UserId],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        // A lazy index judges an author whose outbox is not loaded by their
        // counters (a point read): the outbox's newest keys kept there
        // (`Head::recent`) stand in for it when they hold all the merge may
        // take from it, and it is loaded only if it may hold one of the keys
        // taken below them. A rebuild after a start reads the counters of
        // the followees and few outboxes. Up to `JUDGED_FROM` authors, every
        // missing outbox is loaded at once (a round fewer), unless their
        // counters are here. A third pass (the index let go of counters read
        // by the first) loads what it misses, as before. Newest first,
        // `JUDGED_BATCH` outboxes a round: the keys of the authors who
        // posted last often leave the others out.
        let passes = std::sync::atomic::AtomicU32::new(0);
        self.read(|st, need| {
            let pass = passes.fetch_add(1, Ordering::Relaxed);
            let mut lists: Vec<&[Key]> = Vec::with_capacity(authors.len());
            let mut judged: Vec<Judged> = Vec::new();
            for &a in authors {
                match st.user_for(Unit::Outbox(a)) {
                    Ok(Some(u)) if u.outbox_answers(range, dir, limit) => lists.push(u.outbox.as_slice()),
                    // Only its tail is here, and the merge may read past it.
                    Ok(Some(_)) => need.push(Unit::OutboxAll(a)),
                    Ok(None) => {}
                    Err(unit) => match st.user_for(Unit::Head(a)) {
                        Ok(Some(u)) => match u.head.recent() {
                            Some(recent) => {
                                lists.push(recent);
                                // Its other keys are below the oldest kept.
                                if recent.len() == crate::Head::RECENT
                                    && let Some(below) = recent[0].checked_sub(1)
                                {
                                    judged.push(Judged { bound: below, author: a, is_key: false });
                                }
                            }
                            None if authors.len() <= JUDGED_FROM => need.push(unit),
                            None => judged.push(Judged { bound: u.head.newest, author: a, is_key: true }),
                        },
                        Ok(None) => {}
                        Err(_) if pass >= 2 || authors.len() <= JUDGED_FROM => need.push(unit),
                        Err(head) => need.push(head),
                    },
                }
            }
            if need.is_empty() && !judged.is_empty() {
                // Newest first, a batch at a time: the keys of the outboxes
                // loaded raise the bound that leaves the others out.
                let batch = if dir == Direction::Older {
                    judged.sort_unstable_by_key(|j| std::cmp::Reverse((j.bound, j.author)));
                    JUDGED_BATCH
                } else {
                    usize::MAX
                };
                need.extend(outboxes_that_may_place(&lists, &judged, range, dir, limit).take(batch).map(Unit::Outbox));
            }
            if need.is_empty() { merge_sorted(&lists, range, dir, limit) } else { Vec::new() }
        })
        .await
    }

    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>> {
        self.read(|st, need| {
            let mut set: Option<HashSet<UserId>> = None;
            originals
                .iter()
                .map(|o| {
                    if !st.item_or_need(*o, need) {
                        return Vec::new();
                    }
                    let all = st.reposts.get(o).map(Vec::as_slice).unwrap_or(&[]);
                    if all.is_empty() {
                        Vec::new()
                    } else if all.len() <= reposters.len() {
                        let set = set.get_or_insert_with(|| reposters.iter().copied().collect());
                        all.iter().filter(|(u, _)| set.contains(u)).copied().collect()
                    } else {
                        reposters.iter().filter_map(|r| st.repost_by.get(&(*r, *o)).map(|id| (*r, *id))).collect()
                    }
                })
                .collect()
        })
        .await
    }

    async fn hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        self.read(|st, need| {
            ids.iter()
                .map(|id| {
                    st.item_or_need(*id, need);
                    let counts = ItemCounts {
                        replies: st.replies.get(id).copied().unwrap_or(0),
                        reposts: st.reposts.get(id).map_or(0, |v| v.len() as u64),
                        reactions: st.reactions.counts(*id),
                    };
                    let marks = viewer.map(|v| ViewerMarks {
                        reposted: st.repost_by.contains_key(&(v, *id)),
                        reactions: st.reactions.of_user(*id, v),
                    });
                    (counts, marks)
                })
                .collect()
        })
        .await
    }

    async fn set_reaction(
        &self,
        item: ItemId,
        user: UserId,
        kind: &str,
        on: bool,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool> {
        self.check_failed()?;
        // A read lock of the state: reactions to one item from many users
        // proceed in parallel; only the pair (item, user) is locked while its
        // change is journaled and applied. The item's reactions must be
        // loaded (the change is decided from them).
        let reacted = loop {
            {
                let st = self.state.read();
                if st.is_fresh(item) {
                    // Its first write: the (empty) unit becomes a holder.
                    drop(st);
                    self.state.write().hold_fresh(item);
                    continue;
                }
                if st.loaded(Unit::Item(item)) {
                    let mut pair = st.reactions.lock(item, user);
                    if pair.has(kind) == on {
                        break None;
                    }
                    let ticket =
                        self.journal.write(&[Change::SetReaction { item, user, kind: kind.to_owned(), on }])?;
                    self.last_ticket.fetch_max(ticket, Ordering::AcqRel);
                    st.reactions.set_locked(&mut pair, kind, on);
                    break Some(ticket);
                }
            }
            self.load(vec![Unit::Item(item)]).await?;
        };
        // The notification joins the reaction's sync: one wait for both.
        let noted = self.journal_notes(notify).await?;
        if let Some(ticket) = reacted.max(noted) {
            self.sync(ticket).await?;
        }
        Ok(reacted.is_some())
    }

    async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.commit(|_, _| Ok(((), vec![Change::PutPromotion(p.clone())]))).await
    }

    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        let st = self.state.read();
        Ok(st.promotions.values().filter(|p| p.runs_at(now)).cloned().collect())
    }

    async fn promotions_not_ended(&self, from: Millis) -> Result<Vec<Promotion>> {
        let st = self.state.read();
        let mut out: Vec<Promotion> = st.promotions.values().filter(|p| p.ends_at > from).cloned().collect();
        out.sort_unstable_by_key(|p| p.id);
        Ok(out)
    }

    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.commit(|_, _| Ok(((), vec![Change::PutInsert { key, user, item }]))).await
    }

    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        self.read(|st, need| {
            st.user_or_need(Unit::Inserts(user), need)
                .map(|u| merge_sorted(&[u.inserts.as_slice()], range, dir, limit))
                .unwrap_or_default()
        })
        .await
    }

    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
        self.read(|st, need| {
            st.user_or_need(Unit::Inserts(user), need);
            items.iter().map(|i| st.first_insert.get(&(user, *i)).copied()).collect()
        })
        .await
    }
}

/// In process every read is at hand: the provided method asks the parts.
impl<J: Journal> Pages for Store<J> {}

/// Outbox merges of more authors than this judge them by their newest key
/// before loading their outboxes.
const JUDGED_FROM: usize = 16;

/// Outboxes a judged merge loads a round, the authors with the newest keys
/// first.
const JUDGED_BATCH: usize = 16;

/// An author of an outbox merge whose outbox is not here, judged by their
/// counters: none of its keys beyond those in the merge's lists is above
/// `bound`, which is itself one of its keys when `is_key` (the newest: the
/// outbox's recent keys are not known), or not (they are, and in the lists:
/// `bound` is just below the oldest of them).
#[derive(Debug, Clone, Copy)]
struct Judged {
    bound: Key,
    author: UserId,
    is_key: bool,
}

/// Of the authors whose outboxes are not here (`judged`), those whose
/// outbox may hold one of the `limit` keys in `range` that a merge of
/// `lists` and of theirs takes in the order of `dir`.
///
/// Older-ward: the keys known to be in the range (the lists', and each
/// judged bound that is a key of its outbox when it lies in the range) are
/// at least `limit` from some key `t` up; an outbox with no key other than
/// the listed ones above `t` adds nothing to what is taken, so the `limit`
/// keys taken are all from the lists and the outboxes with a bound at or
/// above `t`, which are loaded. Newer-ward, only an outbox with nothing
/// unlisted above the range's floor can be left out. A bound of 0 (an
/// empty outbox, or an item of key 0) is not counted as a known key; an
/// unknown one is loaded.
fn outboxes_that_may_place<'a>(
    lists: &[&[Key]],
    judged: &'a [Judged],
    range: KeyRange,
    dir: Direction,
    limit: usize,
) -> impl Iterator<Item = UserId> + 'a {
    let threshold = match dir {
        Direction::Newer => None,
        Direction::Older => {
            let mut known = merge_sorted(lists, range, Direction::Older, limit);
            known.extend(
                judged
                    .iter()
                    .filter(|j| j.is_key)
                    .map(|j| j.bound)
                    .filter(|&n| n != 0 && n != crate::Head::NEWEST_UNKNOWN && range.contains(n)),
            );
            if known.len() >= limit && limit > 0 {
                known.sort_unstable_by(|a, b| b.cmp(a));
                known.dedup();
                known.get(limit - 1).copied()
            } else {
                None
            }
        }
    };
    judged.iter().filter_map(move |j| {
        let may = j.bound == crate::Head::NEWEST_UNKNOWN
            || (range.above.is_none_or(|above| j.bound > above) && threshold.is_none_or(|t| j.bound >= t));
        may.then_some(j.author)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(lists: &[&[Key]], judged: &[(Key, UserId)], range: KeyRange, dir: Direction, limit: usize) -> Vec<u64> {
        let judged: Vec<Judged> =
            judged.iter().map(|&(bound, author)| Judged { bound, author, is_key: true }).collect();
        outboxes_that_may_place(lists, &judged, range, dir, limit).map(|u| u.0).collect()
    }

    #[test]
    fn only_outboxes_that_may_place_are_loaded() {
        let older = Direction::Older;
        // Loaded: 100, 90, 80. Judged: 1 (newest 95), 2 (85), 3 (50), 4 (0: empty), 5 (unknown).
        let lists: [&[Key]; 1] = [&[80, 90, 100]];
        let judged = [
            (95, UserId(1)),
            (85, UserId(2)),
            (50, UserId(3)),
            (0, UserId(4)),
            (crate::Head::NEWEST_UNKNOWN, UserId(5)),
        ];
        // The 3 newest known are 100, 95, 90: 85 and below cannot place.
        assert_eq!(placed(&lists, &judged, KeyRange::ALL, older, 3), vec![1, 5]);
        // The 4th is 85, a key of outbox 2 itself: it is loaded.
        assert_eq!(placed(&lists, &judged, KeyRange::ALL, older, 4), vec![1, 2, 5]);
        // Fewer known keys than the limit: every outbox with a key may place.
        assert_eq!(placed(&lists, &judged, KeyRange::ALL, older, 7), vec![1, 2, 3, 4, 5]);
        // Below 92: known 90, 85, 80 (95 and 100 are out of the range); an
        // outbox whose newest key is above the range may hold keys in it.
        let below = KeyRange { above: None, below: Some(92) };
        assert_eq!(placed(&lists, &judged, below, older, 3), vec![1, 2, 5]);
        // Above 86: an outbox with nothing above the floor holds nothing in range.
        let above = KeyRange { above: Some(86), below: None };
        assert_eq!(placed(&lists, &judged, above, Direction::Newer, 1), vec![1, 5]);
        assert_eq!(placed(&lists, &judged, above, older, 10), vec![1, 5]);
    }

    #[test]
    fn recent_keys_stand_in_for_their_outbox_down_to_their_bound() {
        let older = Direction::Older;
        // Author 1's outbox is loaded: 100, 90, 80. Author 2's counters keep
        // its newest keys 95, 85, 75: its others are at most 74. Author 3's
        // keep 60, 50, 40: its others are at most 39.
        let lists: [&[Key]; 3] = [&[80, 90, 100], &[75, 85, 95], &[40, 50, 60]];
        let judged = [
            Judged { bound: 74, author: UserId(2), is_key: false },
            Judged { bound: 39, author: UserId(3), is_key: false },
        ];
        let placed = |range, dir, limit| -> Vec<u64> {
            outboxes_that_may_place(&lists, &judged, range, dir, limit).map(|u| u.0).collect()
        };
        // The 6 newest are all listed (100 down to 75): no outbox is read.
        assert_eq!(placed(KeyRange::ALL, older, 6), Vec::<u64>::new());
        // The 7th listed is 60, below author 2's bound: its older keys may
        // place; author 3's cannot.
        assert_eq!(placed(KeyRange::ALL, older, 7), vec![2]);
        // A bound is not a key: with fewer listed keys than the limit, every
        // bound may place (it is not counted toward the limit either).
        assert_eq!(placed(KeyRange::ALL, older, 10), vec![2, 3]);
        // Newer than 74: author 2 has nothing unlisted above it.
        let above = KeyRange { above: Some(74), below: None };
        assert_eq!(placed(above, Direction::Newer, 1), Vec::<u64>::new());
        let above = KeyRange { above: Some(73), below: None };
        assert_eq!(placed(above, Direction::Newer, 1), vec![2]);
    }

    #[test]
    fn counters_keep_the_newest_keys_of_the_outbox() {
        let mut h = crate::Head::default();
        assert_eq!(h.recent(), Some(&[][..]), "a new user's outbox is empty, and known to be");
        for k in [5, 3, 9, 1, 7, 2, 8, 6] {
            h.note_key(k);
        }
        assert_eq!(h.recent(), Some(&[1, 2, 3, 5, 6, 7, 8, 9][..]), "all of an outbox of 8");
        h.note_key(4);
        assert_eq!(h.recent(), Some(&[2, 3, 4, 5, 6, 7, 8, 9][..]), "the oldest leaves");
        h.note_key(1);
        h.note_key(6);
        assert_eq!(h.recent(), Some(&[2, 3, 4, 5, 6, 7, 8, 9][..]), "older than all, or held: no change");
        h.note_key(20);
        assert_eq!(h.recent(), Some(&[3, 4, 5, 6, 7, 8, 9, 20][..]));
        assert_eq!(h.newest, 20);
        // Counters stored before the keys were kept learn them from the outbox.
        let mut old = crate::Head { recent_len: crate::Head::RECENT_UNKNOWN, ..crate::Head::default() };
        old.note_key(50);
        assert_eq!(old.recent(), None, "not known: a key alone says nothing of the others");
        old.learn_recent(&(1..=300).collect::<Vec<Key>>());
        assert_eq!(old.recent(), Some(&[293, 294, 295, 296, 297, 298, 299, 300][..]));
        let mut small = crate::Head { recent_len: crate::Head::RECENT_UNKNOWN, ..crate::Head::default() };
        small.learn_recent(&[4, 8]);
        assert_eq!(small.recent(), Some(&[4, 8][..]));
    }
}
