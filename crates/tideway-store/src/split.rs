//! [`Split`]: one [`Backend`] made of two engines, the durable half (items,
//! graph, jobs: the source of truth) and the shared half (inboxes, reader
//! activity, hot-author marks: state every node shares, rebuilt from the
//! durable half when lost). This is how a deployment puts the traits on
//! different engines, e.g. SQL for the first and Redis for the second.

use crate::forward::forward_backend;
use crate::profile::{Profile, Profiled};
use crate::traits::*;
use crate::trust::{TrustTimes, Trusted};
use std::sync::Arc;

/// A backend whose durable and shared halves are separate engines.
///
/// The shared half is reached through [`Trusted`]: a node trusts what it
/// reads there only under a lease the durable half grants, and a write that
/// cannot reach it goes on all the same (`trust.rs`).
///
/// A node's copies of what it reads stand before it, not in it
/// ([`crate::NodeCopies`]).
#[derive(Clone)]
pub struct Split {
    pub durable: Arc<dyn Durable>,
    pub shared: Arc<dyn Shared>,
}

impl Split {
    pub fn new(durable: Arc<dyn Durable>, shared: Arc<dyn Shared>) -> Self {
        Self::with_trust(durable, shared, TrustTimes::default())
    }

    /// With leases and holds of `times` (tests shorten them).
    pub fn with_trust(durable: Arc<dyn Durable>, shared: Arc<dyn Shared>, times: TrustTimes) -> Self {
        let shared: Arc<dyn Shared> = Arc::new(Trusted::new(shared, durable.clone(), times));
        Self { durable, shared }
    }
}

impl Profiled for Split {
    fn profile(&self) -> Profile {
        self.durable.profile().with(self.shared.profile())
    }
}

forward_backend!(Split, s => durable: s.durable, shared: s.shared);
