//! No import circle inside a crate: the top-level modules of each crate's
//! `src/` (a file, or a folder with everything under it), linked by the
//! `crate::…` paths of their code (a name the crate root re-exports counts
//! as the module it comes from; comments do not count), form no cycle. A
//! circle means two concerns that cannot be read, changed or moved apart;
//! the fix is a type moved beside the trait or the code that owns it.

use std::collections::{BTreeMap, BTreeSet};
mod common;

use common::rust_files;
use std::path::{Path, PathBuf};

/// The code of a file, without its comment lines.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file");
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// The identifiers that follow each `crate::` in `text`.
fn crate_paths(text: &str) -> Vec<String> {
    text.match_indices("crate::")
        .map(|(i, m)| text[i + m.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
        .filter(|s| !s.is_empty())
        .collect()
}

/// What the crate root re-exports, by name: `pub use module::{A, B};` and
/// `pub use module::A;` map `A` and `B` to `module`.
fn reexports(root: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in root.split(';') {
        let Some(rest) = stmt.trim().strip_prefix("pub use ") else { continue };
        let Some((module, names)) = rest.split_once("::") else { continue };
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for n in names.split(',') {
            let n = n.split(" as ").last().unwrap_or(n).trim();
            let n = n.rsplit("::").next().unwrap_or(n);
            if !n.is_empty() && n != "*" {
                out.insert(n.to_owned(), module.trim().to_owned());
            }
        }
    }
    out
}

/// A cycle among `graph`'s nodes, if there is one (depth-first search).
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_owned(), 1);
        path.push(n.to_owned());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let from = path.iter().position(|p| p == m).unwrap_or(0);
                    let mut c = path[from..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, graph, state, path) {
                        return Some(c);
                    }
                }
            }
        }
        path.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if !state.contains_key(n.as_str()) {
            let mut path = Vec::new();
            if let Some(c) = visit(n, graph, &mut state, &mut path) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut circles = Vec::new();
    let mut crates = 0;
    for krate in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let src = krate.expect("a crate").path().join("src");
        let lib = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).find(|p| p.exists());
        let Some(lib) = lib else { continue };
        crates += 1;
        let names = reexports(&code(&lib));
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        // Each file's top-level module: its first component under src/
        // (binaries under src/bin are crates of their own).
        let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for f in files {
            let rel = f.strip_prefix(&src).expect("under src");
            let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
            if first == "bin" || f == lib {
                continue;
            }
            modules.entry(first.trim_end_matches(".rs").to_owned()).or_default().push(f);
        }
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (m, paths) in &modules {
            let edges = graph.entry(m.clone()).or_default();
            for p in paths {
                for name in crate_paths(&code(p)) {
                    let target = if modules.contains_key(&name) { Some(name) } else { names.get(&name).cloned() };
                    if let Some(t) = target.filter(|t| t != m && modules.contains_key(t)) {
                        edges.insert(t);
                    }
                }
            }
        }
        if let Some(c) = cycle(&graph) {
            circles.push(format!("{}: {}", src.display(), c.join(" → ")));
        }
    }
    assert!(crates >= 8, "found {crates} crates under crates/");
    assert!(circles.is_empty(), "import circles:\n{}", circles.join("\n"));
}

#[test]
fn the_check_finds_a_circle() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    assert_eq!(cycle(&g), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    g.get_mut("c").expect("c").clear();
    assert_eq!(cycle(&g), None);
    assert_eq!(crate_paths("use crate::traits::{A, B}; crate::X"), vec!["traits", "X"]);
    let r = reexports("pub use change::{Change, Head};\npub use store::Store;");
    assert_eq!(r.get("Head").map(String::as_str), Some("change"));
    assert_eq!(r.get("Store").map(String::as_str), Some("store"));
}
