//! [`SortedBlocks`]: an ordered set kept as a run of small sorted arrays.
//!
//! The follow graph is the largest thing tideway keeps in memory (a 100M
//! follow graph has 200M directed entries). Standard ordered trees spend
//! about 24–30 bytes of node overhead per 16-byte entry and a hash map about
//! as much; this set stores entries back to back in blocks of at most
//! [`BLOCK`] entries, so its cost is the entries themselves plus the unused
//! tail of each block. Appends in order (the common case: follows arrive in
//! time order and the journal replays in key order) fill blocks completely.
//!
//! Every block is non-empty, and every entry of a block is smaller than
//! every entry of the next block.

use std::cmp::Ordering;

/// Entries per block: inserting into the middle of a block moves at most
/// this many entries (4 KiB for 16-byte entries).
pub const BLOCK: usize = 256;

/// An ordered set of `T`, stored as sorted blocks.
#[derive(Debug, Clone)]
pub struct SortedBlocks<T> {
    blocks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for SortedBlocks<T> {
    fn default() -> Self {
        Self { blocks: Vec::new(), len: 0 }
    }
}

/// Makes room for one more entry, growing by a quarter (not double): most
/// users' sets are a single block that stops growing, and a doubled block
/// would leave a third of it empty on average.
fn grow<T>(b: &mut Vec<T>) {
    if b.len() == b.capacity() {
        let want = (b.capacity() + (b.capacity() / 4).max(4)).min(BLOCK);
        b.reserve_exact(want - b.len());
    }
}

impl<T: Ord + Copy> SortedBlocks<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block that holds, or would hold, the entry `cmp` looks for
    /// (`cmp(e)` orders `e` against the target, as in `binary_search_by`).
    fn block_for(&self, cmp: &impl Fn(&T) -> Ordering) -> usize {
        let i = self.blocks.partition_point(|b| b.last().is_some_and(|l| cmp(l) == Ordering::Less));
        i.min(self.blocks.len().saturating_sub(1))
    }

    /// The entry `cmp` looks for. `cmp` must agree with the set's order.
    pub fn get_by(&self, cmp: impl Fn(&T) -> Ordering) -> Option<&T> {
        let b = self.blocks.get(self.block_for(&cmp))?;
        b.binary_search_by(&cmp).ok().map(|p| &b[p])
    }

    /// Adds `v`; false if it was already there.
    pub fn insert(&mut self, v: T) -> bool {
        if self.blocks.is_empty() {
            // Exact: a million users who follow one account each (a
            // celebrity's followers) hold one entry in each follow list,
            // and room for four was 48 bytes more a list. A second entry
            // grows it to five ([`grow`]).
            let b = vec![v];
            // Most sets never need a second block.
            self.blocks.reserve_exact(1);
            self.blocks.push(b);
            self.len = 1;
            return true;
        }
        let i = self.block_for(&|e: &T| e.cmp(&v));
        let last_block = i + 1 == self.blocks.len();
        let b = &mut self.blocks[i];
        let pos = match b.binary_search(&v) {
            Ok(_) => return false,
            Err(p) => p,
        };
        if b.len() < BLOCK {
            grow(b);
            b.insert(pos, v);
        } else if last_block && pos == b.len() {
            // Appending in order: leave this block full, start the next.
            let mut next = Vec::with_capacity(4);
            next.push(v);
            self.blocks.push(next);
        } else {
            let half = BLOCK / 2;
            let mut right = Vec::with_capacity(BLOCK);
            right.extend_from_slice(&b[half..]);
            b.truncate(half);
            if pos <= half {
                b.insert(pos, v);
            } else {
                right.insert(pos - half, v);
            }
            self.blocks.insert(i + 1, right);
        }
        self.len += 1;
        true
    }

    /// Removes and returns the entry `cmp` looks for.
    pub fn remove_by(&mut self, cmp: impl Fn(&T) -> Ordering) -> Option<T> {
        if self.blocks.is_empty() {
            return None;
        }
        let i = self.block_for(&cmp);
        let b = &mut self.blocks[i];
        let pos = b.binary_search_by(&cmp).ok()?;
        let v = b.remove(pos);
        let left = b.len();
        self.len -= 1;
        let next = self.blocks.get(i + 1).map_or(usize::MAX, Vec::len);
        if left == 0 {
            self.blocks.remove(i);
        } else if left < BLOCK / 4 && left.saturating_add(next) <= BLOCK / 2 {
            // Keep blocks from thinning out after many removals.
            let next = self.blocks.remove(i + 1);
            self.blocks[i].extend_from_slice(&next);
        } else {
            let b = &mut self.blocks[i];
            if b.capacity() > 4 * b.len() && b.capacity() > 8 {
                b.shrink_to(b.len() * 2);
            }
        }
        Some(v)
    }

    pub fn remove(&mut self, v: &T) -> bool {
        self.remove_by(|e| e.cmp(v)).is_some()
    }

    /// All entries, ascending (reverse it for descending).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> {
        self.blocks.iter().flatten()
    }

    /// Entries strictly greater than `after` (all with `None`), ascending.
    pub fn iter_after(&self, after: Option<&T>) -> impl Iterator<Item = &T> {
        let i = after.map_or(0, |a| self.blocks.partition_point(|b| b.last().is_some_and(|l| l <= a)));
        let head = self.blocks.get(i).map_or(&[][..], |b| &b[after.map_or(0, |a| b.partition_point(|e| e <= a))..]);
        let rest = self.blocks.get(i + 1..).unwrap_or(&[]);
        head.iter().chain(rest.iter().flatten())
    }

    /// Entries strictly smaller than `before` (all with `None`), descending.
    pub fn iter_before_rev(&self, before: Option<&T>) -> impl Iterator<Item = &T> {
        let i = before.map_or(self.blocks.len(), |x| self.blocks.partition_point(|b| b.last().is_some_and(|l| l < x)));
        let head = before.and_then(|x| self.blocks.get(i).map(|b| &b[..b.partition_point(|e| e < x)])).unwrap_or(&[]);
        head.iter().rev().chain(self.blocks[..i].iter().rev().flat_map(|b| b.iter().rev()))
    }

    /// Heap bytes held (allocated capacity, not just entries).
    pub fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Vec<T>>()
            + self.blocks.iter().map(|b| b.capacity() * std::mem::size_of::<T>()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use std::collections::BTreeSet;

    /// A set of one entry (most of a celebrity's followers follow only it)
    /// holds that entry and one block, and grows from there as before.
    #[test]
    fn a_single_entry_takes_room_for_one() {
        let mut s = SortedBlocks::default();
        assert!(s.insert((7u64, 7u64)));
        assert_eq!(s.heap_bytes(), std::mem::size_of::<Vec<(u64, u64)>>() + 16);
        for i in 0..BLOCK as u64 * 3 {
            s.insert((i, i));
        }
        assert_eq!(s.len(), BLOCK * 3);
        assert!(s.iter().zip(s.iter().skip(1)).all(|(a, b)| a < b), "still ascending");
        assert!(s.heap_bytes() < BLOCK * 3 * 16 * 3 / 2, "blocks fill: {}", s.heap_bytes());
    }

    fn check(s: &SortedBlocks<u32>, m: &BTreeSet<u32>) {
        assert_eq!(s.len(), m.len());
        assert!(s.blocks.iter().all(|b| !b.is_empty() && b.len() <= BLOCK));
        assert!(s.blocks.windows(2).all(|w| w[0].last() < w[1].first()));
        assert!(s.iter().copied().eq(m.iter().copied()));
    }

    #[test]
    fn behaves_as_an_ordered_set() {
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let (mut s, mut m) = (SortedBlocks::default(), BTreeSet::new());
            // Narrow ranges make removals and duplicates frequent.
            let span = [50, 2_000, 100_000][seed as usize % 3];
            for step in 0..6_000 {
                let v = rng.random_range(0..span);
                match rng.random_range(0..10) {
                    0..=5 => assert_eq!(s.insert(v), m.insert(v), "insert {v}"),
                    6 => {
                        // An in-order append, as follows arriving over time.
                        let v = m.last().map_or(0, |l| l + 1);
                        assert_eq!(s.insert(v), m.insert(v));
                    }
                    7 | 8 => assert_eq!(s.remove(&v), m.remove(&v), "remove {v}"),
                    _ => {
                        assert_eq!(s.get_by(|e| e.cmp(&v)).is_some(), m.contains(&v));
                        assert!(s.iter_after(Some(&v)).take(300).copied().eq(m.range(v + 1..).take(300).copied()));
                        assert!(
                            s.iter_before_rev(Some(&v)).take(300).copied().eq(m.range(..v).rev().take(300).copied())
                        );
                    }
                }
                if step % 500 == 0 {
                    check(&s, &m);
                }
            }
            check(&s, &m);
        }
    }

    #[test]
    fn in_order_appends_fill_blocks() {
        let mut s = SortedBlocks::default();
        for v in 0..100_000u64 {
            s.insert(v);
        }
        // 8 bytes per entry, plus the partly filled last block and the
        // block index.
        assert!(s.heap_bytes() < 100_000 * 8 * 105 / 100, "{} bytes", s.heap_bytes());
        assert_eq!(s.iter_after(Some(&99_998)).copied().collect::<Vec<_>>(), vec![99_999]);
        assert_eq!(s.iter_before_rev(Some(&1)).copied().collect::<Vec<_>>(), vec![0]);
        assert_eq!(s.iter_before_rev(Some(&0)).count(), 0);
        assert_eq!(s.iter_after(Some(&99_999)).count(), 0);
    }

    #[test]
    fn removing_most_entries_releases_blocks() {
        let mut s = SortedBlocks::default();
        for v in 0..50_000u32 {
            s.insert(v);
        }
        let full = s.heap_bytes();
        for v in 0..50_000u32 {
            if v % 100 != 0 {
                assert!(s.remove(&v));
            }
        }
        assert_eq!(s.len(), 500);
        assert!(s.heap_bytes() < full / 10, "{} of {full} bytes still held", s.heap_bytes());
        assert!(s.get_by(|e| e.cmp(&4_200)).is_some());
        assert!(s.get_by(|e| e.cmp(&4_201)).is_none());
    }
}
