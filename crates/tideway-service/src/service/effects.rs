//! What a write does once it is stored, beyond the store itself: it tells
//! every node (signals on the hub), notes removals for home streams that
//! resume later, and, when the shared half missed a write, withdraws every
//! node's trust in it. The services that write (items, the graph, home
//! insertions) each hold one; none of them reaches the hub any other way.
//! (This node's copies forget what a write changed as it passes through
//! them: `tideway_store::copies`.)

use super::node::Node;
use crate::error::Result;
use crate::signals::SignalOutbox;
use std::sync::Arc;
use tideway_store::{Backend, Removal, Signal};

/// The after-effects of writes (see the module's documentation).
pub(crate) struct Effects {
    backend: Arc<dyn Backend>,
    node: Arc<Node>,
    /// Whether signals go out on a task of their own, merged
    /// ([`super::ServiceOptions::background_signals`]).
    background_signals: bool,
    /// How long a removal is noted for resuming streams
    /// ([`super::ServiceOptions::replay_window_ms`]).
    replay_window_ms: i64,
    outbox: Arc<SignalOutbox>,
}

impl Effects {
    pub(crate) fn new(backend: Arc<dyn Backend>, node: Arc<Node>, opts: &super::ServiceOptions) -> Self {
        Self {
            backend,
            node,
            background_signals: opts.background_signals,
            replay_window_ms: opts.replay_window_ms,
            outbox: Arc::default(),
        }
    }

    /// Tells every node (the hub is shared): the fan-out workers (`Work`),
    /// home streams (`Author`, `Home`). With `background_signals` the
    /// signals go out on their own task (on a remote hub it is a round trip
    /// the answer need not wait for), merged with others sent meanwhile
    /// (`signals.rs`). A lost signal only waits for a poll.
    pub(crate) async fn signal(&self, signals: Vec<Signal>) {
        if self.background_signals {
            self.outbox.send(&self.backend, signals);
        } else if let Err(e) = self.backend.publish(&signals).await {
            tracing::debug!(error = %e, "could not send signals; workers and streams poll");
        }
    }

    /// Notes, for streams that resume later, what may have made entries
    /// leave homes now. Best effort: a note lost with the shared half lets
    /// a resume miss a delete (logged and counted).
    pub(crate) async fn note_removals(&self, notes: &[Removal]) {
        if let Err(e) = self.backend.note_removals(notes, self.node.now(), self.replay_window_ms).await {
            tracing::warn!(error = %e, "could not note a removal for resuming home streams");
            metrics::counter!("tideway_stream_removals_lost_total").increment(1);
        }
    }

    /// After a durable write that the shared half missed (an inbox that
    /// could be neither told nor dropped): no node trusts the shared half
    /// from the answer on. Fails when the durable half cannot record it.
    pub(crate) async fn distrust_shared(&self) -> Result<()> {
        let d = self.backend.distrust_shared().await?;
        d.wait().await;
        Ok(())
    }
}
