//! [`Counted`]: a decorator over any backend that counts the storage calls
//! made through it (as `object_store`'s `throttle` and `limit` wrap any
//! store), so a test can assert what a page costs on every engine, SQL +
//! Redis included, and which calls they were, and can run a hook before
//! every call.

use crate::forward::forward_backend;
use crate::profile::{Profile, Profiled};
use crate::traits::Backend;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

type Hook = Box<dyn Fn() + Send + Sync>;

/// A backend that forwards every call to `inner`, counting it first.
pub struct Counted {
    inner: Arc<dyn Backend>,
    calls: AtomicU64,
    /// The names of the calls, in the order made.
    names: parking_lot::Mutex<Vec<&'static str>>,
    before: Option<Hook>,
}

impl Counted {
    pub fn new(inner: Arc<dyn Backend>) -> Self {
        Self { inner, calls: AtomicU64::new(0), names: parking_lot::Mutex::new(Vec::new()), before: None }
    }

    /// Runs `hook` before every call (the embedded store's conformance run
    /// drops every loaded unit there, so each call loads from disk).
    pub fn before_each(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.before = Some(Box::new(hook));
        self
    }

    /// Storage calls made through this backend so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The methods called since the `n`th call (the first is 0), in order.
    pub fn names_since(&self, n: u64) -> Vec<&'static str> {
        let names = self.names.lock();
        names.get(usize::try_from(n).unwrap_or(usize::MAX)..).map(<[_]>::to_vec).unwrap_or_default()
    }

    fn seen(&self, name: &'static str) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.names.lock().push(name);
        if let Some(hook) = &self.before {
            hook();
        }
    }
}

impl Profiled for Counted {
    fn profile(&self) -> Profile {
        self.inner.profile()
    }
}

forward_backend!(Counted, s => durable: s.inner, shared: s.inner, before: |name| s.seen(name));
