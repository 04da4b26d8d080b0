//! Live sessions in the index: each anchor's sessions with their open ones
//! and their ended ones by (end, id), so a viewer's page reads the open
//! sessions of the anchors they follow by lookup and merges the ended ones
//! of up to `graph.max_following` anchors with a heap ([`merge_ended`]),
//! never scanning an anchor's history.

use std::collections::{BTreeMap, BinaryHeap};
use tideway_core::Millis;
use tideway_core::live::Session;

/// One anchor's sessions.
#[derive(Debug, Default, Clone)]
pub struct AnchorSessions {
    by_id: BTreeMap<u64, Session>,
    /// Ids of the upcoming and live ones, ascending.
    open: Vec<u64>,
    /// (end, id) of the ended ones, ascending.
    ended: Vec<(Millis, u64)>,
}

impl AnchorSessions {
    pub fn from_sessions(sessions: impl IntoIterator<Item = Session>) -> Self {
        let mut a = Self::default();
        for s in sessions {
            a.put(s);
        }
        a
    }

    /// Stores a session, new or moved (its indexes follow).
    pub fn put(&mut self, s: Session) {
        let id = s.id;
        if let Some(old) = self.by_id.get(&id) {
            if let Some(k) = old.ended_key()
                && let Ok(i) = self.ended.binary_search(&k)
            {
                self.ended.remove(i);
            }
            if let Ok(i) = self.open.binary_search(&id) {
                self.open.remove(i);
            }
        }
        match s.ended_key() {
            Some(k) => {
                if let Err(i) = self.ended.binary_search(&k) {
                    self.ended.insert(i, k);
                }
            }
            None => {
                if let Err(i) = self.open.binary_search(&id) {
                    self.open.insert(i, id);
                }
            }
        }
        self.by_id.insert(id, s);
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Ids of the sessions held.
    pub fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.by_id.keys().copied()
    }

    pub fn get(&self, id: u64) -> Option<&Session> {
        self.by_id.get(&id)
    }

    /// The upcoming and live sessions.
    pub fn open(&self) -> impl Iterator<Item = &Session> {
        self.open.iter().filter_map(|id| self.by_id.get(id))
    }

    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// Ended sessions' keys below `below`, the latest first.
    fn ended_below(&self, below: (Millis, u64)) -> &[(Millis, u64)] {
        let n = self.ended.partition_point(|k| *k < below);
        &self.ended[..n]
    }
}

/// The ended sessions of several anchors below `below`, the latest first,
/// at most `limit`: a heap over each anchor's next one.
pub fn merge_ended<'a>(
    anchors: impl IntoIterator<Item = &'a AnchorSessions>,
    below: (Millis, u64),
    limit: usize,
) -> Vec<Session> {
    let lists: Vec<(&AnchorSessions, &[(Millis, u64)])> =
        anchors.into_iter().map(|a| (a, a.ended_below(below))).filter(|(_, l)| !l.is_empty()).collect();
    let mut heap: BinaryHeap<((Millis, u64), usize, usize)> =
        lists.iter().enumerate().map(|(i, (_, l))| (l[l.len() - 1], i, l.len() - 1)).collect();
    let mut out = Vec::with_capacity(limit.min(64));
    while out.len() < limit {
        let Some((key, i, at)) = heap.pop() else { break };
        let (anchor, list) = lists[i];
        if let Some(s) = anchor.get(key.1) {
            out.push(s.clone());
        }
        if at > 0 {
            heap.push((list[at - 1], i, at - 1));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::UserId;
    use tideway_core::live::Move;

    fn session(id: u64, anchor: u64) -> Session {
        Session::new(id, UserId(anchor), Millis(0), Default::default())
    }

    #[test]
    fn indexes_follow_every_step_and_merges_take_the_latest_ended() {
        let mut a = AnchorSessions::default();
        let mut b = AnchorSessions::default();
        for (i, list) in [(1, &mut a), (2, &mut b)] {
            for id in 0..4u64 {
                let s = session(i * 10 + id, i);
                list.put(s.clone());
                let live = s.moved(Move::Start, Millis(1)).expect("start");
                list.put(live.clone());
                if id < 3 {
                    list.put(live.moved(Move::End, Millis((id * 2 + i) as i64)).expect("end"));
                }
            }
        }
        assert_eq!(a.open_count(), 1);
        assert_eq!(a.open().map(|s| s.id).collect::<Vec<_>>(), [13]);
        // a ended 10@1, 11@3, 12@5; b ended 20@2, 21@4, 22@6.
        let ids = |v: Vec<Session>| v.iter().map(|s| s.id).collect::<Vec<_>>();
        assert_eq!(ids(merge_ended([&a, &b], (Millis(i64::MAX), 0), 10)), [22, 12, 21, 11, 20, 10]);
        assert_eq!(ids(merge_ended([&a, &b], (Millis(5), 12), 3)), [21, 11, 20], "strictly below");
        assert_eq!(ids(merge_ended([&a, &b], (Millis(5), 13), 1)), [12]);
        assert!(merge_ended([&a, &b], (Millis(1), 0), 5).is_empty());
    }
}
