//! Merging sorted sources of keys, and the direction and range of a page.

use crate::ids::Key;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Which way a page walks from its cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Towards older entries (smaller keys), newest first.
    Older,
    /// Towards newer entries (larger keys), oldest first while walking.
    Newer,
}

/// An open interval of keys `(low, high)`; `None` bounds are unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange {
    pub above: Option<Key>,
    pub below: Option<Key>,
}

impl KeyRange {
    pub const ALL: KeyRange = KeyRange { above: None, below: None };

    pub fn contains(&self, k: Key) -> bool {
        self.above.is_none_or(|a| k > a) && self.below.is_none_or(|b| k < b)
    }

    pub fn is_empty(&self) -> bool {
        matches!((self.above, self.below), (Some(a), Some(b)) if b <= a.saturating_add(1))
    }

    /// The part of a slice sorted ascending that lies in the range.
    pub fn slice_of<'a>(&self, sorted_asc: &'a [Key]) -> &'a [Key] {
        let lo = self.above.map_or(0, |a| sorted_asc.partition_point(|&k| k <= a));
        let hi = self.below.map_or(sorted_asc.len(), |b| sorted_asc.partition_point(|&k| k < b));
        if lo >= hi { &[] } else { &sorted_asc[lo..hi] }
    }
}

/// Takes up to `limit` keys in `range` from several ascending-sorted slices,
/// in the order of `dir` (descending for `Older`), without duplicates.
/// A heap of one cursor per source: O(limit · log sources).
pub fn merge_sorted(sources: &[&[Key]], range: KeyRange, dir: Direction, limit: usize) -> Vec<Key> {
    let parts: Vec<&[Key]> = sources.iter().map(|s| range.slice_of(s)).filter(|s| !s.is_empty()).collect();
    let mut out = Vec::with_capacity(limit.min(parts.iter().map(|p| p.len()).sum()));
    match dir {
        Direction::Older => {
            // Max-heap over (key, source, remaining length).
            let mut heap: BinaryHeap<(Key, usize, usize)> =
                parts.iter().enumerate().map(|(i, p)| (p[p.len() - 1], i, p.len() - 1)).collect();
            while let Some((k, i, idx)) = heap.pop() {
                if out.len() >= limit {
                    break;
                }
                if out.last() != Some(&k) {
                    out.push(k);
                }
                if idx > 0 {
                    heap.push((parts[i][idx - 1], i, idx - 1));
                }
            }
        }
        Direction::Newer => {
            let mut heap: BinaryHeap<Reverse<(Key, usize, usize)>> =
                parts.iter().enumerate().map(|(i, p)| Reverse((p[0], i, 0))).collect();
            while let Some(Reverse((k, i, idx))) = heap.pop() {
                if out.len() >= limit {
                    break;
                }
                if out.last() != Some(&k) {
                    out.push(k);
                }
                if idx + 1 < parts[i].len() {
                    heap.push(Reverse((parts[i][idx + 1], i, idx + 1)));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    #[test]
    fn merge_matches_sort_and_dedupe() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let n = rng.random_range(0..6);
            let lists: Vec<Vec<Key>> = (0..n)
                .map(|_| {
                    let mut v: Vec<Key> = (0..rng.random_range(0..30)).map(|_| rng.random_range(1..100)).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                })
                .collect();
            let refs: Vec<&[Key]> = lists.iter().map(|v| v.as_slice()).collect();
            let above = rng.random_bool(0.5).then(|| rng.random_range(0..60));
            let below = rng.random_bool(0.5).then(|| rng.random_range(40..110));
            let range = KeyRange { above, below };
            let limit = rng.random_range(0..40);
            let mut all: Vec<Key> = lists.iter().flatten().copied().filter(|&k| range.contains(k)).collect();
            all.sort_unstable();
            all.dedup();
            let newer: Vec<Key> = all.iter().copied().take(limit).collect();
            let older: Vec<Key> = all.iter().rev().copied().take(limit).collect();
            assert_eq!(merge_sorted(&refs, range, Direction::Newer, limit), newer);
            assert_eq!(merge_sorted(&refs, range, Direction::Older, limit), older);
        }
    }
}
