//! The postings of the mention, tag and object feeds: the memory backend
//! keeps them in the index; the embedded store reads them from disk by
//! range (a feed can be longer than memory should hold), where the item's
//! own write put them.

use super::Store;
use super::journal::{Journal, disk};
use crate::traits::{Postings, Result};
use async_trait::async_trait;
use tideway_core::Key;
use tideway_core::merge::{Direction, KeyRange, merge_sorted};

#[async_trait]
impl<J: Journal> Postings for Store<J> {
    async fn postings(&self, feed: u64, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        {
            let st = self.state.read();
            if !st.lazy {
                return Ok(st
                    .postings
                    .get(&feed)
                    .map(|keys| merge_sorted(&[keys.as_slice()], range, dir, limit))
                    .unwrap_or_default());
            }
        }
        self.read_off_runtime(limit, move |j| disk(j)?.postings_range(feed, range, dir, limit)).await
    }
}
