//! Where promotions stand in a home page, decided from positions alone.
//!
//! A promotion running "every N" goes after each organic entry whose
//! position from the top of the feed is a multiple of N, at most once per
//! page, and never takes a position itself (it carries the cursor of the
//! organic entry before it). `limit` counts every entry, promotions
//! included: an older-ward page drops rows from its end (where the next page
//! starts); a newer-ward page keeps the organic entries nearest its cursor,
//! so promotions give way first, then the newest organic entries (the next
//! poll returns them).

use crate::merge::Direction;

/// A row of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The organic entry at this index of those walked (newest first).
    Organic(usize),
    /// The promotion at this index of those running.
    Promoted(usize),
}

/// A page's rows, each with the organic position it stands at (a
/// promotion: the position of the organic entry before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Woven {
    pub rows: Vec<(Slot, i64)>,
    /// An organic entry was left for the next page (dropping only
    /// promotions must not announce a page that would be empty).
    pub cut: bool,
}

/// Weaves promotions among organic entries. `positions[p]` is the organic
/// position (1 = top of the feed) of the `p`-th organic entry, newest
/// first; `every[i]` is promotion `i`'s period.
pub fn weave(positions: &[i64], every: &[u32], limit: usize, dir: Direction) -> Woven {
    let mut rows: Vec<(Slot, i64)> = Vec::with_capacity(positions.len() + every.len());
    let mut used = vec![false; every.len()];
    for (p, &k) in positions.iter().enumerate() {
        rows.push((Slot::Organic(p), k));
        for (i, &n) in every.iter().enumerate() {
            if !used[i] && k > 0 && k % i64::from(n.max(1)) == 0 {
                used[i] = true;
                rows.push((Slot::Promoted(i), k));
            }
        }
    }
    let mut cut = false;
    if rows.len() > limit {
        match dir {
            Direction::Older => cut = rows.drain(limit..).any(|(s, _)| matches!(s, Slot::Organic(_))),
            Direction::Newer => {
                while rows.len() > limit {
                    let at = rows.iter().position(|(s, _)| matches!(s, Slot::Promoted(_))).unwrap_or(0);
                    rows.remove(at);
                }
            }
        }
    }
    Woven { rows, cut }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Slot::{Organic as O, Promoted as P};

    #[test]
    fn promotions_follow_multiples_of_their_period_once_per_page() {
        let w = weave(&[1, 2, 3, 4, 5, 6], &[3, 2], 20, Direction::Older);
        assert_eq!(
            w.rows,
            vec![(O(0), 1), (O(1), 2), (P(1), 2), (O(2), 3), (P(0), 3), (O(3), 4), (O(4), 5), (O(5), 6)]
        );
        assert!(!w.cut);
        // A later page counts positions from the top, not from the page.
        let w = weave(&[21, 22, 23], &[10, 22], 20, Direction::Older);
        assert_eq!(w.rows, vec![(O(0), 21), (O(1), 22), (P(1), 22), (O(2), 23)]);
    }

    #[test]
    fn the_limit_counts_promotions() {
        // Older-ward: the end goes; cut only when an organic entry went.
        let w = weave(&[1, 2, 3], &[1], 3, Direction::Older);
        assert_eq!(w.rows, vec![(O(0), 1), (P(0), 1), (O(1), 2)]);
        assert!(w.cut);
        let w = weave(&[1, 2], &[2], 2, Direction::Older);
        assert_eq!(w.rows, vec![(O(0), 1), (O(1), 2)]);
        assert!(!w.cut, "only the promotion was dropped");
        // Newer-ward: promotions give way, then the newest organic entries.
        let w = weave(&[1, 2, 3], &[1], 3, Direction::Newer);
        assert_eq!(w.rows, vec![(O(0), 1), (O(1), 2), (O(2), 3)]);
        let w = weave(&[1, 2, 3], &[], 2, Direction::Newer);
        assert_eq!(w.rows, vec![(O(1), 2), (O(2), 3)]);
    }

    #[test]
    fn a_period_of_zero_is_every_entry_and_nothing_before_the_top() {
        assert_eq!(weave(&[1], &[0], 5, Direction::Older).rows, vec![(O(0), 1), (P(0), 1)]);
        assert_eq!(weave(&[0], &[1], 5, Direction::Newer).rows, vec![(O(0), 0)]);
    }
}
