//! Every conformance suite against every backend of this workspace: the
//! in-memory store and the embedded (fjall) store, each suite on a fresh
//! backend. A failing suite names itself and the backend.

use std::sync::Arc;
use tideway_conformance::{INBOX_CAP, SUITES};
use tideway_store::{Counted, Store};

/// A fresh embedded store in `dir`.
fn embedded(dir: &tempfile::TempDir) -> Store<tideway_store_fjall::FjallJournal> {
    tideway_store_fjall::open(dir.path(), tideway_store_fjall::SyncMode::Buffer, INBOX_CAP).expect("open fjall")
}

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
        check(&embedded(&dir)).await;
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
        let store = Arc::new(embedded(&dir));
        let cold = store.clone();
        check(&Counted::new(store).before_each(move || cold.evict_all())).await;
    }
}

/// The embedded store with an index budget of one byte: every load and
/// every write lets go of what was not used since the last pass (writes not
/// yet durable included), so reads keep crossing evictions; the smallest
/// cache of records (64 KiB, about a hundred records weighed by what they
/// hold), so records and bodies keep going back to disk too; and a window
/// of four fan-out jobs (as many as a suite claims at once), so the rest
/// wait on disk.
#[tokio::test]
async fn embedded_backend_under_a_tiny_index_budget_conforms() {
    for (suite, check) in SUITES {
        eprintln!("embedded, tiny index: {suite}");
        let dir = tempfile::tempdir().expect("tempdir");
        let store = embedded(&dir).with_index_budget(1).with_body_cache(1).with_job_window(4);
        check(&store).await;
        let ix = store.index_stats().expect("a lazy index");
        assert!(ix.evictions > 0 || ix.holders <= 1, "{suite}: nothing was let go: {ix:?}");
    }
}

/// Every suite file under `src/suites/` is in the matrix, once (the
/// matrix is derived from the `suites!` list; a file left out of it would
/// compile into nothing).
#[test]
fn every_suite_is_in_the_matrix() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/suites");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("src/suites")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut names: Vec<String> = SUITES.iter().map(|(n, _)| (*n).to_owned()).collect();
    names.sort();
    assert_eq!(names, files, "the suites! list and the files of src/suites");
    assert!(names.len() >= 23, "{names:?}");
}
