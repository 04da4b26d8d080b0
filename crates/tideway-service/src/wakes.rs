//! Waking a node's home streams: one subscription of the event hub per
//! node, and an index of its open streams by user and by the authors each
//! follows, so a signal wakes exactly the streams it may concern.
//!
//! `Author(a)` (an item of `a` written, or a chunk of its fan-out
//! delivered) wakes the streams of `a`'s followers; `Gone(a)` (an item of
//! `a` deleted or changed) wakes them to check what they sent too;
//! `Home(u)` (`u` followed, blocked, muted, got an insertion) wakes `u`'s
//! streams to read whom they follow again and check what they sent;
//! `Lagged` (signals may be lost) does that for every stream. A stream also reads its home at every heartbeat, so a lost
//! signal delays an event and never loses it.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tideway_core::UserId;
use tideway_store::{Backend, Received, Signal};
use tokio::sync::Notify;

/// One open stream's wake-up.
#[derive(Debug, Default)]
pub struct Waker {
    pub notify: Notify,
    /// Set by a `Home` signal: whom the user follows may have changed.
    pub graph_changed: AtomicBool,
    /// Set by a `Gone` or `Home` signal: what the stream sent may have left.
    pub check_sent: AtomicBool,
}

#[derive(Default)]
struct Index {
    next: u64,
    by_user: HashMap<UserId, Vec<(u64, Arc<Waker>)>>,
    by_author: HashMap<UserId, Vec<(u64, Arc<Waker>)>>,
}

/// The open streams of this node.
#[derive(Default)]
pub struct Wakes {
    index: Mutex<Index>,
}

/// A stream's place in the index; dropping it takes the stream out.
pub struct Registration {
    wakes: Arc<Wakes>,
    id: u64,
    user: UserId,
    authors: Vec<UserId>,
    pub waker: Arc<Waker>,
}

fn remove(map: &mut HashMap<UserId, Vec<(u64, Arc<Waker>)>>, key: UserId, id: u64) {
    if let Some(v) = map.get_mut(&key) {
        v.retain(|(i, _)| *i != id);
        if v.is_empty() {
            map.remove(&key);
        }
    }
}

impl Wakes {
    /// Indexes a stream of `user` that follows `authors` (its own items
    /// wake it too).
    pub fn register(self: &Arc<Self>, user: UserId, mut authors: Vec<UserId>) -> Registration {
        authors.push(user);
        authors.sort_unstable();
        authors.dedup();
        let waker = Arc::new(Waker::default());
        let mut ix = self.index.lock();
        ix.next += 1;
        let id = ix.next;
        ix.by_user.entry(user).or_default().push((id, waker.clone()));
        for a in &authors {
            ix.by_author.entry(*a).or_default().push((id, waker.clone()));
        }
        drop(ix);
        Registration { wakes: self.clone(), id, user, authors, waker }
    }

    /// Streams open on this node.
    pub fn open(&self) -> usize {
        self.index.lock().by_user.values().map(Vec::len).sum()
    }

    fn dispatch(&self, r: Received) {
        let ix = self.index.lock();
        match r {
            Received::Signal(Signal::Author(a)) => {
                for (_, w) in ix.by_author.get(&a).into_iter().flatten() {
                    w.notify.notify_one();
                }
            }
            Received::Signal(Signal::Gone(a)) => {
                for (_, w) in ix.by_author.get(&a).into_iter().flatten() {
                    w.check_sent.store(true, Ordering::Release);
                    w.notify.notify_one();
                }
            }
            Received::Signal(Signal::Home(u)) => {
                for (_, w) in ix.by_user.get(&u).into_iter().flatten() {
                    w.graph_changed.store(true, Ordering::Release);
                    w.check_sent.store(true, Ordering::Release);
                    w.notify.notify_one();
                }
            }
            Received::Lagged => {
                for (_, w) in ix.by_user.values().flatten() {
                    w.graph_changed.store(true, Ordering::Release);
                    w.check_sent.store(true, Ordering::Release);
                    w.notify.notify_one();
                }
            }
            Received::Signal(_) | Received::Closed => {}
        }
    }

    /// Feeds the index from the hub until the process ends (a lost
    /// subscription is made again; the streams are woken meanwhile, as
    /// after a `Lagged`).
    pub fn spawn_listener(self: &Arc<Self>, backend: Arc<dyn Backend>) {
        let wakes = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let sub = backend.subscribe().await;
                let Some(w) = wakes.upgrade() else { return };
                w.dispatch(Received::Lagged);
                drop(w);
                match sub {
                    Ok(mut sub) => loop {
                        let r = sub.recv().await;
                        let Some(w) = wakes.upgrade() else { return };
                        if r == Received::Closed {
                            break;
                        }
                        w.dispatch(r);
                    },
                    Err(e) => tracing::debug!(error = %e, "home streams: the hub cannot be reached; streams poll"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut ix = self.wakes.index.lock();
        remove(&mut ix.by_user, self.user, self.id);
        for a in &self.authors {
            remove(&mut ix.by_author, *a, self.id);
        }
    }
}
