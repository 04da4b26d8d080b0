//! The storage seam's contracts, as code: one suite per trait, generic over
//! the backend (`&dyn Backend`), so the in-memory store, the embedded store
//! and every later backend (SQL, Redis) run the very same checks. Each suite
//! gets a fresh, empty backend and panics with a message on a violation.
//!
//! `tests/backends.rs` runs every suite against every backend of this
//! workspace; a new backend crate adds itself there (or runs the suites from
//! its own tests).

use std::future::Future;
use std::pin::Pin;
use tideway_store::Backend;

/// What every suite file uses.
mod prelude {
    pub(crate) use crate::{INBOX_CAP, created, linked};
    pub(crate) use std::sync::Arc;
    pub(crate) use tideway_core::merge::{Direction, KeyRange};
    pub(crate) use tideway_core::{Item, ItemId, ItemKind, Key, Millis, UserId, Visibility};
    pub(crate) use tideway_store::{Backend, CreateOutcome, ItemChange, JobProgress};
}
use prelude::*;

/// A suite: checks one trait's contract on a fresh, empty backend.
pub type Suite = for<'a> fn(&'a dyn Backend) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Declares the suites, a file each under `suites/`, and derives the
/// matrix from the one list: a suite not named here is not compiled.
macro_rules! suites {
    ($($name:ident),* $(,)?) => {
        mod suites {
            $(pub mod $name;)*
        }
        $(pub use suites::$name::$name;)*
        /// The suites, by name, for the test matrix.
        pub const SUITES: &[(&str, Suite)] = &[$((stringify!($name), |b| Box::pin($name(b)))),*];
    };
}

suites!(
    items_update,
    jobs_leases,
    node_claims,
    shared_trust,
    activity,
    hot_authors,
    inboxes,
    bodies,
    graph_counts,
    hub,
    reactions,
    graph_lists,
    items_feeds,
    items_at_once,
    postings,
    notifications,
    notifying_writes,
    live,
    snapshots,
    removals,
    forget_all,
    fact_tokens,
    pages,
);

/// The inbox cap the harness gives every backend (`timeline.max_len`).
pub const INBOX_CAP: usize = 800;

pub(crate) async fn created(b: &dyn Backend, id: Key, author: u64, fan_out: bool) -> Arc<Item> {
    match b
        .create_item(Item::new(ItemId(id), UserId(author), ItemKind::Post), fan_out, Millis(id as i64))
        .await
        .expect("create_item")
    {
        CreateOutcome::Created(i) => i,
        other => panic!("create_item({id}) did not create: {other:?}"),
    }
}

/// An item of `author` that reposts or replies to `target`.
pub(crate) async fn linked(
    b: &dyn Backend,
    id: Key,
    author: u64,
    repost_of: Option<u64>,
    reply_to: Option<(u64, u64)>,
) -> CreateOutcome {
    let mut item =
        Item::new(ItemId(id), UserId(author), if repost_of.is_some() { ItemKind::Repost } else { ItemKind::Reply });
    item.repost_of = repost_of.map(ItemId);
    item.reply_to = reply_to.map(|(i, _)| ItemId(i));
    item.reply_to_author = reply_to.map(|(_, a)| UserId(a));
    b.create_item(item, false, Millis(id as i64)).await.expect("create_item")
}
