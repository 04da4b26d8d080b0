//! [`Split`]: one [`Backend`] made of two engines, the durable half (items,
//! graph, jobs: the source of truth) and the shared half (inboxes, reader
//! activity, hot-author marks: state every node shares, rebuilt from the
//! durable half when lost). This is how a deployment puts the traits on
//! different engines, e.g. SQL for the first and Redis for the second.

use crate::forward::forward_backend;
use crate::profile::{Profile, Profiled};
use crate::traits::*;
use std::sync::Arc;

/// The source of truth: items, graph, fan-out jobs.
pub trait Durable: Items + Pages + Postings + Notifications + Live + Graph + Jobs + Profiled {}
impl<T: Items + Pages + Postings + Notifications + Live + Graph + Jobs + Profiled> Durable for T {}

/// State shared by every node that only speeds pages up or decides who gets
/// pushes: inboxes, activity, hot-author marks, live feed snapshots; and the
/// event hub between the nodes.
pub trait Shared: Inboxes + Activity + HotAuthors + Hub + Snapshots + Removals + Profiled {}
impl<T: Inboxes + Activity + HotAuthors + Hub + Snapshots + Removals + Profiled> Shared for T {}

/// A backend whose durable and shared halves are separate engines.
#[derive(Clone)]
pub struct Split {
    pub durable: Arc<dyn Durable>,
    pub shared: Arc<dyn Shared>,
}

impl Split {
    pub fn new(durable: Arc<dyn Durable>, shared: Arc<dyn Shared>) -> Self {
        Self { durable, shared }
    }
}

impl Profiled for Split {
    fn profile(&self) -> Profile {
        self.durable.profile().with(self.shared.profile())
    }
}

forward_backend!(Split, s => durable: s.durable, shared: s.shared);
