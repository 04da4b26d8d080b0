//! Signals sent in the background, merged: each call of
//! [`SignalOutbox::send`] adds its signals to a queue, and one task at a time
//! publishes everything queued (each signal once) in one message. Sixteen
//! writers posting at once then cost the hub a message or two instead of
//! sixteen, and every node's listener as few wake-ups. Signals are hints (a
//! lost one only waits for a poll), so merging, reordering duplicates away
//! or dropping a failed message changes no page.

use parking_lot::Mutex;
use std::collections::HashSet;
use std::sync::Arc;
use tideway_store::{Backend, Signal};

/// The most signals one message carries.
const MAX_MESSAGE: usize = 1024;

#[derive(Default)]
pub(crate) struct SignalOutbox {
    state: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Signal>,
    sending: bool,
}

impl SignalOutbox {
    /// Queues `signals` for the next message (which a task of its own
    /// sends: the caller does not wait).
    pub(crate) fn send(self: &Arc<Self>, backend: &Arc<dyn Backend>, signals: Vec<Signal>) {
        let mut q = self.state.lock();
        q.pending.extend(signals);
        if !q.sending {
            q.sending = true;
            tokio::spawn(Arc::clone(self).run(Arc::clone(backend)));
        }
    }

    /// Message after message until the queue is empty.
    async fn run(self: Arc<Self>, backend: Arc<dyn Backend>) {
        let _guard = Sending(Arc::clone(&self));
        loop {
            let message: Vec<Signal> = {
                let mut q = self.state.lock();
                if q.pending.is_empty() {
                    q.sending = false;
                    return;
                }
                let mut seen = HashSet::new();
                let mut message = Vec::new();
                let mut taken = 0;
                for s in &q.pending {
                    if message.len() == MAX_MESSAGE {
                        break;
                    }
                    taken += 1;
                    if seen.insert(*s) {
                        message.push(*s);
                    }
                }
                q.pending.drain(..taken);
                message
            };
            metrics::histogram!("tideway_signals_per_message").record(message.len() as f64);
            if let Err(e) = backend.publish(&message).await {
                tracing::debug!(error = %e, "could not send signals; workers and streams poll");
            }
        }
    }
}

/// Lets the next call start a sender if this one panicked (its signals
/// wait for the next send). A sender that ends normally has already let go
/// (under the lock), and a new one may run: it is left be.
struct Sending(Arc<SignalOutbox>);

impl Drop for Sending {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.state.lock().sending = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::UserId;
    use tideway_store::Store;

    /// Signals sent at once arrive merged, each once, and none is lost.
    #[tokio::test]
    async fn signals_sent_at_once_arrive_merged() {
        let store: Arc<dyn Backend> = Arc::new(Store::in_memory(16));
        let counted = Arc::new(tideway_store::Counted::new(store));
        let backend: Arc<dyn Backend> = counted.clone();
        let mut sub = backend.subscribe().await.expect("subscribe");
        let outbox = Arc::new(SignalOutbox::default());
        let before = counted.calls();
        for u in 0..50u64 {
            outbox.send(&backend, vec![Signal::Work, Signal::Author(UserId(u % 10))]);
        }
        let mut heard = Vec::new();
        while heard.len() < 11 {
            match tokio::time::timeout(std::time::Duration::from_secs(5), sub.recv()).await.expect("signals arrive") {
                tideway_store::Received::Signal(s) => heard.push(s),
                other => panic!("{other:?}"),
            }
        }
        let mut want: Vec<Signal> = vec![Signal::Work];
        want.extend((0..10).map(|u| Signal::Author(UserId(u))));
        assert_eq!(heard, want, "each signal once, in the order first sent");
        let publishes = counted.names_since(before).iter().filter(|n| **n == "publish").count();
        assert!((1..50).contains(&publishes), "50 sends went in {publishes} messages");
    }
}
