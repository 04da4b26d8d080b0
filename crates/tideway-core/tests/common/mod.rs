//! What the tree checks share (`codemap.rs`, `imports.rs`).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries {
        let path = e.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}
