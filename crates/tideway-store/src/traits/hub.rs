//! Signals between nodes.

#[allow(unused_imports)]
use super::*;

/// A signal of the event hub: what one part of a deployment tells all the
/// others. Delivered at most once, to the subscriptions open when it is
/// published: a lost signal costs latency, never correctness (whoever acts
/// on one also polls, or re-reads the feed it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Signal {
    /// Fan-out jobs were created: workers claim them now, not at their next
    /// poll.
    Work,
    /// The top of a user's home may have changed (a follow, block, mute or
    /// insertion of theirs): a home stream of that user reads it again.
    Home(UserId),
    /// An item of this author was written, or a chunk of its fan-out was
    /// delivered: home streams of its followers read the top of their home
    /// again.
    Author(UserId),
    /// An item of this author was deleted or changed: home streams of its
    /// followers also check whether what they sent is still there.
    Gone(UserId),
    /// This item was patched or deleted: nodes forget their copy of its
    /// record (a copy is checked before it is shown whatever arrives: this
    /// only spares that check a miss).
    Item(ItemId),
}

/// What a [`Subscription`] receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Signal(Signal),
    /// Signals may have been lost (the subscriber fell behind, or the
    /// engine's connection was lost and made again): act as if anything had
    /// happened.
    Lagged,
    /// The hub is gone; subscribe again.
    Closed,
}

/// What a hub's implementations pass to their subscriptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubEvent {
    Signal(Signal),
    /// Signals may have been lost (shown as [`Received::Lagged`]).
    Gap,
}

/// An open subscription of the event hub: every signal published after it
/// opened, from any node, in the order one publisher sent them.
pub struct Subscription {
    rx: tokio::sync::broadcast::Receiver<HubEvent>,
}

impl Subscription {
    /// A subscription fed by an implementation's broadcast channel.
    pub fn new(rx: tokio::sync::broadcast::Receiver<HubEvent>) -> Self {
        Self { rx }
    }

    /// The next signal (waits for it).
    pub async fn recv(&mut self) -> Received {
        use tokio::sync::broadcast::error::RecvError;
        match self.rx.recv().await {
            Ok(HubEvent::Signal(s)) => Received::Signal(s),
            Ok(HubEvent::Gap) | Err(RecvError::Lagged(_)) => Received::Lagged,
            Err(RecvError::Closed) => Received::Closed,
        }
    }
}

/// The event hub: signals between the parts of a deployment (one process,
/// or every node on a shared engine). Wake-ups of fan-out workers go
/// through it, and so will the real-time home stream.
///
/// Contract (the conformance suite checks it on every backend): every
/// subscription open when `publish` is called receives its signals, in
/// order; one opened later does not; publishing with no subscription
/// succeeds; a subscriber that falls behind receives `Lagged`, and memory
/// stays bounded.
#[async_trait]
pub trait Hub: Send + Sync {
    /// Sends `signals` to every subscription open now, on every node.
    async fn publish(&self, signals: &[Signal]) -> Result<()>;
    /// Opens a subscription (fails when the engine cannot be reached).
    async fn subscribe(&self) -> Result<Subscription>;
    /// Whether every server of the shared engine answers now (the health
    /// probe; a cluster asks each primary). Cheap: no data is read.
    async fn ping(&self) -> Result<()>;
    /// Drops everything this deployment keeps in the shared engine
    /// (inboxes, marks, activity, notes, tokens, snapshots), as if it had
    /// lost its data; returns how many keys went. Asked even while the
    /// engine's breaker is open, by the probe that found it answering.
    async fn forget_all(&self) -> Result<usize>;
    /// A write could not reach the shared half: makes it untrusted for
    /// every node (in the durable half, `trust.rs`) before the write goes
    /// on, and says by when this node must have acknowledged it, at the
    /// earliest, so that no node trusts the shared half by then
    /// ([`Distrusted`]). A backend whose shared half cannot be away from
    /// its durable one (one engine, in process) has nothing to do.
    async fn distrust_shared(&self) -> Result<Distrusted> {
        Ok(Distrusted::default())
    }
}
