//! Every conformance suite against every backend of this workspace: the
//! in-memory store and the embedded (fjall) store. A failing suite names
//! itself and the backend.

use tideway_conformance::{INBOX_CAP, SUITES};
use tideway_store::{Backend, Store};

/// Runs a check on a fresh backend (and cleans up after it).
type Fresh<'a> = &'a dyn Fn(&dyn Fn(&dyn Backend));

fn run_all(name: &str, fresh: Fresh<'_>) {
    for (suite, check) in SUITES {
        eprintln!("{name}: {suite}");
        fresh(&|b| check(b));
    }
}

#[test]
fn memory_backend_conforms() {
    run_all("memory", &|f| f(&Store::in_memory(INBOX_CAP)));
}

#[test]
fn embedded_backend_conforms() {
    run_all("embedded", &|f| {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, INBOX_CAP)
            .expect("open fjall");
        f(&store);
    });
}

#[test]
fn every_suite_is_in_the_matrix() {
    let names: Vec<&str> = SUITES.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, vec!["items_update", "jobs_leases", "activity", "hot_authors", "inboxes"]);
}
