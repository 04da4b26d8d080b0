//! `tideway import` on the real binary: a gzipped edge list and JSON-lines
//! items go into a data directory, then the server serves them; a malformed
//! line stops the import with its line number and writes nothing.

use crate::crash::start_with;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::io::Write;
use std::process::Command;

fn import(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tideway"))
        .arg("import")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("run tideway import");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn gzip(path: &std::path::Path, text: &str) {
    let f = std::fs::File::create(path).expect("create");
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    gz.write_all(text.as_bytes()).expect("write");
    gz.finish().expect("finish");
}

async fn get(base: &str, path: &str) -> Value {
    let r = reqwest::get(format!("{base}{path}")).await.expect("get");
    assert_eq!(r.status(), StatusCode::OK, "{path}");
    r.json().await.expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_list_and_items_are_imported_and_served() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, follows, items) = (tmp.path().join("data"), tmp.path().join("f.txt.gz"), tmp.path().join("i.jsonl"));
    gzip(&follows, "# follower followee\n1 2\n1\t3\n1,2\n4 4\n\n2 1\n");
    std::fs::write(
        &items,
        concat!(
            r#"{"author":"2","created_at":"2024-03-01T10:00:00Z","body":{"t":"older"}}"#,
            "\n",
            r#"{"author":"3","created_at":"2024-03-02T10:00:00Z","body":{"t":"newer"},"tags":["Rust"]}"#,
            "\n",
            r#"{"author":"9","created_at":"2024-03-03T10:00:00Z","visibility":"followers"}"#,
            "\n"
        ),
    )
    .expect("items");
    let (ok, out, err) = import(
        &data,
        &[
            "--follows",
            follows.to_str().expect("path"),
            "--items",
            items.to_str().expect("path"),
            "--since",
            "2024-01-01T00:00:00Z",
        ],
    );
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("follows imported: 3 (of 7 lines)"), "{out}");
    assert!(out.contains("1 duplicate, 1 self"), "{out}");
    assert!(out.contains("items imported: 3"), "{out}");

    let logs = tempfile::tempdir().expect("tempdir");
    let p = start_with(&data, &logs.path().join("serve.log"), &[]).await;
    let following = get(&p.base, "/v1/users/1/following").await;
    let ids: Vec<&str> =
        following["users"].as_array().expect("users").iter().map(|u| u["id"].as_str().expect("id")).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, vec!["2", "3"]);
    assert_eq!(following["users"][0]["since"], json!("2024-01-01T00:00:00.000Z"));
    assert_eq!(get(&p.base, "/v1/users/2").await["followers_count"], json!(1));
    // Home is rebuilt from the outboxes on the first read: newest first.
    let home = get(&p.base, "/v1/users/1/home").await;
    let bodies: Vec<&Value> =
        home["entries"].as_array().expect("entries").iter().map(|e| &e["item"]["body"]["t"]).collect();
    assert_eq!(bodies, vec![&json!("newer"), &json!("older")]);
    assert_eq!(home["entries"][0]["item"]["tags"], json!(["rust"]));
    assert_eq!(home["entries"][0]["item"]["created_at"], json!("2024-03-02T10:00:00.000Z"));
    drop(p);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_line_names_its_number_and_nothing_is_written() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let follows = tmp.path().join("f.txt");
    std::fs::write(&follows, "1 2\n1 3\n1 x\n1 4\n").expect("write");
    let (ok, _, err) = import(&data, &["--follows", follows.to_str().expect("path")]);
    assert!(!ok);
    assert!(err.contains("line 3") && err.contains("nothing from this file was written"), "{err}");
    let items = tmp.path().join("i.jsonl");
    std::fs::write(
        &items,
        concat!(
            r#"{"author":"2","created_at":"2024-03-01T10:00:00Z"}"#,
            "\n",
            r#"{"author":"2","created_at":"2024-03-01T10:00:00Z","reply_to":"5"}"#,
            "\n"
        ),
    )
    .expect("write");
    let (ok, _, err) = import(&data, &["--items", items.to_str().expect("path")]);
    assert!(!ok);
    assert!(err.contains("line 2") && err.contains("reply_to"), "{err}");

    let logs = tempfile::tempdir().expect("tempdir");
    let p = start_with(&data, &logs.path().join("serve.log"), &[]).await;
    assert_eq!(get(&p.base, "/v1/users/1").await["following_count"], json!(0));
    assert_eq!(get(&p.base, "/v1/users/2").await["items_count"], json!(0));
    drop(p);
}

/// Runs `tideway backfill-notifications` on a data directory.
fn backfill(dir: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tideway"))
        .arg("backfill-notifications")
        .arg("--data-dir")
        .arg(dir)
        .output()
        .expect("run tideway backfill-notifications");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Each notification group of `user` as (verb, actors).
async fn groups(base: &str, user: u64) -> Vec<(String, Vec<String>)> {
    let v = get(base, &format!("/v1/users/{user}/notifications")).await;
    let groups = v["groups"].as_array().expect("groups").iter();
    groups
        .map(|g| {
            let actors = g["actors"].as_array().expect("actors").iter().map(|a| a.as_str().expect("id").to_owned());
            (g["verb"].as_str().expect("verb").to_owned(), actors.collect())
        })
        .collect()
}

/// An import writes no notification; `tideway backfill-notifications`
/// gives the imported follows and mentions theirs, and a second run
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_follows_and_mentions_notify_after_the_backfill() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, follows, items) = (tmp.path().join("data"), tmp.path().join("f.txt"), tmp.path().join("i.jsonl"));
    std::fs::write(&follows, "1 2\n3 2\n").expect("follows");
    std::fs::write(
        &items,
        concat!(
            r#"{"author":"2","created_at":"2024-03-01T10:00:00Z","body":{"t":"hi"},"mentions":["1","3"]}"#,
            "\n",
            r#"{"author":"3","created_at":"2024-03-02T10:00:00Z","body":{"t":"plain"}}"#,
            "\n"
        ),
    )
    .expect("items");
    let paths = ["--follows", follows.to_str().expect("path"), "--items", items.to_str().expect("path")];
    let (ok, out, err) = import(&data, &paths);
    assert!(ok, "{out}\n{err}");
    let logs = tempfile::tempdir().expect("tempdir");
    {
        let p = start_with(&data, &logs.path().join("before.log"), &[]).await;
        assert!(groups(&p.base, 2).await.is_empty(), "an import notifies no one");
        assert!(groups(&p.base, 1).await.is_empty());
    }
    let (ok, out, err) = backfill(&data);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("notifications backfilled: 2 items, 2 follows, 0 reactions read; 4 ops applied"), "{out}");
    let (ok, again, err) = backfill(&data);
    assert!(ok, "{again}\n{err}");
    let p = start_with(&data, &logs.path().join("after.log"), &[]).await;
    let strs = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(groups(&p.base, 2).await, vec![("follow".to_owned(), strs(&["3", "1"]))], "both follows, one group");
    for user in [1, 3] {
        let got = groups(&p.base, user).await;
        assert_eq!(got.len(), 1, "user {user}: one mention, applied once by two runs: {got:?}");
        assert_eq!((got[0].0.as_str(), got[0].1.clone()), ("mention", strs(&["2"])), "user {user}");
    }
}
