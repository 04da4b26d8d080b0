//! The key sources of a home or profile walk: the inbox above its floor and the outboxes below it (HomeSource), outboxes alone (PullSource).

use super::*;

/// Keys of several outboxes (and optionally one user's insertions) merged.
pub struct PullSource<'a> {
    pub backend: &'a dyn Backend,
    pub authors: &'a [UserId],
    pub inserts_of: Option<UserId>,
    pub dir: Direction,
    /// Exclusive bound in walk direction (`below` for Older, `above` for Newer).
    pub bound: Option<Key>,
    /// Exclusive outer limit (for Newer: the floor + 1 of an inbox).
    pub stop: Option<Key>,
}

impl PullSource<'_> {
    pub(super) fn range(&self) -> KeyRange {
        match self.dir {
            Direction::Older => KeyRange { above: self.stop, below: self.bound },
            Direction::Newer => KeyRange { above: self.bound, below: self.stop },
        }
    }
}

#[async_trait]
impl KeySource for PullSource<'_> {
    async fn next_batch(&mut self, n: usize) -> Result<Vec<Key>> {
        let range = self.range();
        if range.is_empty() {
            return Ok(vec![]);
        }
        let mut keys = self.backend.outbox_merge(self.authors, range, self.dir, n).await?;
        if let Some(u) = self.inserts_of {
            let ins = self.backend.inserts(u, range, self.dir, n).await?;
            if !ins.is_empty() {
                let mut a = keys;
                a.sort_unstable();
                let mut b = ins;
                b.sort_unstable();
                keys = merge_sorted(&[&a, &b], KeyRange::ALL, self.dir, n);
            }
        }
        if let Some(&last) = keys.last() {
            self.bound = Some(last);
        }
        Ok(keys)
    }
}

/// Merges two key lists given in walk order, without duplicates, up to `n`.
pub(super) fn merge_walk(a: Vec<Key>, b: Vec<Key>, dir: Direction, n: usize) -> Vec<Key> {
    if b.is_empty() {
        return a;
    }
    let (mut a, mut b) = (a, b);
    a.sort_unstable();
    b.sort_unstable();
    merge_sorted(&[&a, &b], KeyRange::ALL, dir, n)
}

/// Home's source: the inbox above its floor, merged with the outboxes of the
/// followed authors whose items were not pushed (hot authors); the outboxes
/// of everyone in `F(u)` at or below the floor.
pub struct HomeSource<'a> {
    pub backend: &'a dyn Backend,
    pub user: UserId,
    pub authors: &'a [UserId],
    /// Followed authors with unpushed items above the floor: pulled on read.
    pub pulled: &'a [UserId],
    pub dir: Direction,
    pub bound: Option<Key>,
    /// The inbox is absent or done with: only the outboxes remain.
    pull_only: bool,
    /// The first inbox read toward older keys, made ahead (beside the page's
    /// earlier reads) for the range of [`Self::first_read`]: the size it was
    /// made for, and what it returned. Taken by the first such batch.
    ahead: Option<(usize, tideway_store::Result<Option<InboxRead>>)>,
}

impl<'a> HomeSource<'a> {
    pub fn new(
        backend: &'a dyn Backend,
        user: UserId,
        authors: &'a [UserId],
        pulled: &'a [UserId],
        dir: Direction,
        bound: Option<Key>,
    ) -> Self {
        Self { backend, user, authors, pulled, dir, bound, pull_only: false, ahead: None }
    }

    /// The inbox read of the first batch toward older keys, made ahead:
    /// used by the first batch if it asks for exactly that.
    pub fn read_ahead(mut self, n: usize, read: tideway_store::Result<Option<InboxRead>>) -> Self {
        self.ahead = Some((n, read));
        self
    }

    /// The range and size of the first batch's inbox read toward older keys.
    pub fn first_read(bound: Option<Key>, n: usize) -> (KeyRange, usize) {
        (KeyRange { above: None, below: bound }, n)
    }

    /// A source that reads no inbox: every key from the outboxes (and the
    /// reader's insertions), when the inboxes are unavailable.
    pub fn pull_only(
        backend: &'a dyn Backend,
        user: UserId,
        authors: &'a [UserId],
        dir: Direction,
        bound: Option<Key>,
    ) -> Self {
        Self { backend, user, authors, pulled: &[], dir, bound, pull_only: true, ahead: None }
    }

    /// Keys of the pulled authors in `range` above `floor`.
    pub(super) async fn pulled_above(&self, floor: Key, range: KeyRange, n: usize) -> Result<Vec<Key>> {
        if self.pulled.is_empty() {
            return Ok(vec![]);
        }
        let range = KeyRange { above: Some(range.above.map_or(floor, |a| a.max(floor))), below: range.below };
        Ok(self.backend.outbox_merge(self.pulled, range, self.dir, n).await?)
    }

    pub(super) async fn pull(&mut self, stop: Option<Key>, n: usize) -> Result<Vec<Key>> {
        let mut p = PullSource {
            backend: self.backend,
            authors: self.authors,
            inserts_of: Some(self.user),
            dir: self.dir,
            bound: self.bound,
            stop,
        };
        let keys = p.next_batch(n).await?;
        self.bound = p.bound;
        Ok(keys)
    }
}

#[async_trait]
impl KeySource for HomeSource<'_> {
    async fn next_batch(&mut self, n: usize) -> Result<Vec<Key>> {
        loop {
            match self.dir {
                Direction::Older => {
                    if self.pull_only {
                        return self.pull(None, n).await;
                    }
                    let (range, _) = Self::first_read(self.bound, n);
                    let read = match self.ahead.take() {
                        // Taken on the first batch: the bound is still the
                        // one the read was made for.
                        Some((m, read)) if m == n => read,
                        _ => self.backend.read_inbox(self.user, range, Direction::Older, n).await,
                    };
                    let read = match read {
                        Ok(read) => read,
                        // The inbox became unreachable mid-page: the outboxes
                        // below the bound hold every key it would have had.
                        Err(e) => {
                            tracing::warn!(error = %e, "inbox read failed: pulling the rest of the page");
                            None
                        }
                    };
                    match read {
                        Some(r) if !r.keys.is_empty() || !self.pulled.is_empty() => {
                            let extra = self.pulled_above(r.floor, range, n).await?;
                            let keys = merge_walk(r.keys, extra, Direction::Older, n);
                            if let Some(&last) = keys.last() {
                                self.bound = Some(last);
                                return Ok(keys);
                            }
                            let below = r.floor.saturating_add(1);
                            self.bound = Some(self.bound.map_or(below, |b| b.min(below)));
                            self.pull_only = true;
                        }
                        Some(r) => {
                            // Nothing left above the floor: continue below it.
                            let below = r.floor.saturating_add(1);
                            self.bound = Some(self.bound.map_or(below, |b| b.min(below)));
                            self.pull_only = true;
                        }
                        None => self.pull_only = true,
                    }
                }
                Direction::Newer => {
                    let floor =
                        if self.pull_only { None } else { self.backend.inbox_floor(self.user).await.ok().flatten() };
                    let Some(floor) = floor else {
                        self.pull_only = true;
                        return self.pull(None, n).await;
                    };
                    if self.bound.unwrap_or(0) < floor {
                        let keys = self.pull(Some(floor.saturating_add(1)), n).await?;
                        if !keys.is_empty() {
                            return Ok(keys);
                        }
                        self.bound = Some(floor);
                        continue;
                    }
                    let range = KeyRange { above: self.bound, below: None };
                    match self.backend.read_inbox(self.user, range, Direction::Newer, n).await.ok().flatten() {
                        None => self.pull_only = true,
                        // The floor rose since it was read: pull up to it first.
                        Some(r) if r.floor > self.bound.unwrap_or(0) => continue,
                        Some(r) => {
                            let extra = self.pulled_above(r.floor, range, n).await?;
                            let keys = merge_walk(r.keys, extra, Direction::Newer, n);
                            if let Some(&last) = keys.last() {
                                self.bound = Some(last);
                            }
                            return Ok(keys);
                        }
                    }
                }
            }
        }
    }
}
