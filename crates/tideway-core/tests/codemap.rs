//! ARCHITECTURE.md's codemap is true to the tree: every source and test
//! file of every crate is named in its crate's part of the map (by its
//! name; a file of a folder the map names may be named by its stem, as in
//! "phases/: load, writes, …"; a folder's `mod.rs` or `main.rs` by the
//! folder). A file added without a line in the map fails here.

use std::collections::BTreeMap;
mod common;

use common::rust_files;
use std::path::Path;

/// Each crate's part of the codemap: from its `  name/` line to the next.
fn sections(doc: &str) -> BTreeMap<String, String> {
    let map = doc.split("## Codemap").nth(1).and_then(|s| s.split("```").nth(1)).expect("a codemap block");
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in map.lines() {
        let top = line.strip_prefix("  ").filter(|l| !l.starts_with(' '));
        if let Some(name) = top.and_then(|l| l.split_whitespace().next()).and_then(|n| n.strip_suffix('/')) {
            current = Some(name.to_owned());
        }
        if let Some(c) = &current {
            let text = out.entry(c.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// Whether `word` stands alone in `text` (not inside a longer name).
fn names(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !part(before) && !part(after)
    })
}

#[test]
fn every_source_file_is_in_the_codemap() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let sections = sections(&doc);
    let mut missing = Vec::new();
    let mut seen = 0;
    for krate in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let krate = krate.expect("a crate").path();
        let name = krate.file_name().expect("a name").to_string_lossy().into_owned();
        let text = sections.get(&name).map(String::as_str).unwrap_or_default();
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        rust_files(&krate.join("tests"), &mut files);
        for f in files {
            seen += 1;
            let base = f.file_name().expect("a file name").to_string_lossy().into_owned();
            let stem = base.trim_end_matches(".rs");
            let folder = f.parent().and_then(Path::file_name).expect("a folder").to_string_lossy().into_owned();
            let folder_named = names(text, &format!("{folder}/"));
            let ok = match base.as_str() {
                "lib.rs" | "main.rs" | "mod.rs" if folder == "src" => true,
                "lib.rs" | "main.rs" | "mod.rs" => folder_named,
                _ => names(text, &base) || (folder_named && names(text, stem)),
            };
            if !ok {
                missing.push(f.strip_prefix(&root).unwrap_or(&f).display().to_string());
            }
        }
    }
    assert!(seen > 100, "the tree was read ({seen} files)");
    assert!(missing.is_empty(), "files the codemap of ARCHITECTURE.md does not name:\n{}", missing.join("\n"));
}
