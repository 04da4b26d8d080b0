//! Every conformance suite against every backend of this workspace: the
//! in-memory store and the embedded (fjall) store, each suite on a fresh
//! backend. A failing suite names itself and the backend.

use std::sync::Arc;
use tideway_conformance::{INBOX_CAP, SUITES};
use tideway_store::{Counted, Store};

#[tokio::test]
async fn memory_backend_conforms() {
    for (suite, check) in SUITES {
        eprintln!("memory: {suite}");
        check(&Store::in_memory(INBOX_CAP)).await;
    }
}

#[tokio::test]
async fn embedded_backend_conforms() {
    for (suite, check) in SUITES {
        eprintln!("embedded: {suite}");
        let dir = tempfile::tempdir().expect("tempdir");
        let store = tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, INBOX_CAP)
            .expect("open fjall");
        check(&store).await;
    }
}

/// The embedded store with every loaded unit dropped before each call:
/// every read loads what it needs from disk, as the first requests after a
/// start do.
#[tokio::test]
async fn embedded_backend_loading_every_call_from_disk_conforms() {
    for (suite, check) in SUITES {
        eprintln!("embedded, cold: {suite}");
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Arc::new(
            tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, INBOX_CAP)
                .expect("open fjall"),
        );
        let cold = store.clone();
        check(&Counted::new(store).before_each(move || cold.evict_all())).await;
    }
}

#[test]
fn every_suite_is_in_the_matrix() {
    let names: Vec<&str> = SUITES.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        vec![
            "items_update",
            "jobs_leases",
            "node_claims",
            "activity",
            "hot_authors",
            "inboxes",
            "bodies",
            "graph_counts",
            "hub",
            "reactions",
            "graph_lists",
            "items_feeds",
            "postings",
            "notifications",
            "live",
            "snapshots",
            "removals"
        ]
    );
}
