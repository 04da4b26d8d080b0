//! The store's own machinery with a journal the test controls: group
//! commit's rounds and fan-out progress.

use crate::change::Change;
use crate::state::State;
use crate::store::{Disk, Journal, Store, Ticket};
use crate::traits::*;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;
use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};

/// A journal whose syncs block while its gate is shut, as a disk that
/// takes its time. Tickets count the batches written.
#[derive(Default)]
struct GatedJournal {
    state: Mutex<Gate>,
    opened: Condvar,
}

#[derive(Default)]
struct Gate {
    shut: bool,
    /// Syncs let through while shut.
    passes: usize,
    written: Ticket,
    synced: Ticket,
    /// Syncs waiting at the shut gate.
    held: usize,
    /// Syncs called.
    rounds: usize,
}

impl GatedJournal {
    fn shut(&self, shut: bool) {
        self.state.lock().shut = shut;
        self.opened.notify_all();
    }

    /// Lets one sync through the shut gate.
    fn pass_one(&self) {
        self.state.lock().passes += 1;
        self.opened.notify_all();
    }

    /// Waits (a little at a time) until `done` holds of the gate; opens it
    /// before failing (a held sync would hold the runtime's shutdown too).
    async fn until(&self, what: &str, done: impl Fn(&Gate) -> bool) {
        let wait = async {
            while !done(&self.state.lock()) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(5), wait).await.is_err() {
            self.shut(false);
            panic!("{what}: not within 5 s");
        }
    }
}

impl Journal for Arc<GatedJournal> {
    fn write(&self, _: &[Change]) -> Result<Ticket> {
        let mut s = self.state.lock();
        s.written += 1;
        Ok(s.written)
    }
    fn sync(&self, ticket: Ticket) -> Result<()> {
        let mut s = self.state.lock();
        s.rounds += 1;
        s.held += 1;
        while s.shut && s.passes == 0 {
            self.opened.wait(&mut s);
        }
        if s.shut {
            s.passes -= 1;
        }
        s.held -= 1;
        s.synced = s.synced.max(ticket);
        Ok(())
    }
    fn health(&self) -> Result<()> {
        Ok(())
    }
    fn blocks(&self) -> bool {
        true
    }
    fn durable(&self) -> Ticket {
        self.state.lock().synced
    }
    fn disk(&self) -> Option<&dyn Disk> {
        None
    }
}

fn post(id: u64) -> Item {
    Item::new(ItemId(id), UserId(1), ItemKind::Post)
}

/// A worker step's progress is made durable soon, not waited for: a step
/// returns while the disk holds its sync, and the sync it started lands
/// once the disk answers, with no write after it to carry it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_starts_a_sync_and_does_not_wait_for_it() {
    let journal = Arc::new(GatedJournal::default());
    let store = Store::new(journal.clone(), State::eager(), 800);
    store.create_item(post(10), true, Millis(1)).await.expect("post");
    let jobs = store.claim_jobs(7, Millis(2), 60_000, 10).await.expect("claim");
    assert_eq!(jobs.iter().map(|j| j.key).collect::<Vec<_>>(), [10], "the post's job");

    journal.shut(true);
    let step = store.advance(7, &[JobProgress::Checkpoint(10, (Millis(1), UserId(5)))]);
    let returned = tokio::time::timeout(Duration::from_secs(5), step).await;
    let (written, durable) = {
        let g = journal.state.lock();
        (g.written, g.synced)
    };
    journal.shut(false);
    let recorded = returned.expect("the step returned while its sync was held").expect("advance");
    assert_eq!(recorded, [true], "the checkpoint is recorded");
    assert!(durable < written, "the checkpoint was not durable while the disk held it");
    journal.until("the sync the step started lands", |g| g.synced >= written).await;
}

/// Group commit: a writer is acknowledged after the round that carried its
/// write, while the round carrying the writes that came during it is still
/// on its way to the disk; then each of those is, in one round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_is_acknowledged_after_its_round_not_the_next() {
    let journal = Arc::new(GatedJournal::default());
    let store = Arc::new(Store::new(journal.clone(), State::eager(), 800));
    journal.shut(true);
    let first = tokio::spawn({
        let store = store.clone();
        async move { store.create_item(post(10), false, Millis(1)).await }
    });
    journal.until("the first write's sync reaches the disk", |g| g.held == 1).await;
    let others: Vec<_> = (11..19u64)
        .map(|id| {
            let store = store.clone();
            tokio::spawn(async move { store.create_item(post(id), false, Millis(1)).await })
        })
        .collect();
    journal.until("the others are written", |g| g.written == 9).await;

    journal.pass_one();
    let done = tokio::time::timeout(Duration::from_secs(5), first).await;
    journal.until("the next round reaches the disk", |g| g.held == 1).await;
    let waiting = others.iter().filter(|w| !w.is_finished()).count();
    let synced = journal.state.lock().synced;
    journal.shut(false);
    done.expect("the first writer is acknowledged after its own round").expect("task").expect("post");
    assert_eq!((synced, waiting), (1, 8), "the others wait for the next round");
    for w in others {
        let done = tokio::time::timeout(Duration::from_secs(5), w).await;
        done.expect("acknowledged").expect("task").expect("post");
    }
    let g = journal.state.lock();
    assert_eq!((g.synced, g.rounds), (9, 2), "all durable, in two rounds");
}
