//! The memory backend is `Store<NoJournal>`: the same index, eager, nothing
//! durable; the embedded store is `Store<FjallJournal>`
//! (`tideway-store-fjall`). Both are the [`Store`] of [`crate::store`],
//! with the same rules and the same write path; only the journal differs.

use crate::change::Change;
use crate::state::State;
use crate::store::{Disk, Journal, Store, Ticket};
use crate::traits::Result;

/// The memory backend: the in-memory index with nothing durable.
pub type MemoryStore = Store<NoJournal>;

/// The journal of the in-memory backend: nothing is durable.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoJournal;

impl Journal for NoJournal {
    fn write(&self, _: &[Change]) -> Result<Ticket> {
        Ok(0)
    }
    fn sync(&self, _: Ticket) -> Result<()> {
        Ok(())
    }
    fn health(&self) -> Result<()> {
        Ok(())
    }
    fn blocks(&self) -> bool {
        false
    }
    fn durable(&self) -> Ticket {
        Ticket::MAX
    }
    fn disk(&self) -> Option<&dyn Disk> {
        None
    }
}

impl Store<NoJournal> {
    /// The in-memory backend.
    pub fn in_memory(inbox_cap: usize) -> Self {
        Store::new(NoJournal, State::eager(), inbox_cap)
    }
}
