//! `tideway import`: loads a follow graph and items from files straight into
//! the embedded store — the migration path from an app's own database.
//!
//! * Follows: an edge list, one `follower followee` pair of decimal user ids
//!   a line (spaces, tabs or a comma between them), optionally gzipped;
//!   blank lines and lines starting with `#` or `%` are skipped. Written in
//!   one sorted ingestion, all of them or none.
//! * Items: JSON lines, one item a line: `{"author", "created_at", "kind"?,
//!   "body"?, "visibility"?, "tags"?, "mentions"?, "object"?,
//!   "idempotency_key"?}` with the API's rules (`created_at` is required;
//!   reposts and replies are created through the API). Every line is
//!   checked before anything is written; then they are written in atomic
//!   batches of 10,000.
//!
//! A malformed line stops the import with its file and line number, and
//! nothing of that file is written. Inboxes are not written: each reader's
//! is rebuilt from the outboxes on their first read, as after a restart.

use flate2::read::MultiGzDecoder;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tideway_config::BackendKind;
use tideway_core::{IdGenerator, Item, ItemId, ItemKind, Millis, NewItem, ObjectRef, UserId, Visibility};
use tideway_service::Config;
use tideway_store_fjall::{Existing, Importer};

/// Items written per atomic batch.
const ITEM_BATCH: usize = 10_000;

/// What to import.
#[derive(Debug, Clone, Default)]
pub struct ImportArgs {
    pub follows: Option<PathBuf>,
    pub items: Option<PathBuf>,
    /// The time recorded for every imported follow (default: now).
    pub since: Option<Millis>,
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub follow_lines: u64,
    pub follows: u64,
    pub duplicates: u64,
    pub self_follows: u64,
    pub existing: u64,
    pub blocked: u64,
    pub over_limit: u64,
    pub items: u64,
    /// Seconds spent on each file (reading, checking, writing).
    pub follows_secs: f64,
    pub items_secs: f64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rate = |n: u64, secs: f64| n as f64 / secs.max(1e-9);
        writeln!(
            f,
            "follows imported: {} (of {} lines) in {:.1} s ({:.0} follows/s)",
            self.follows,
            self.follow_lines,
            self.follows_secs,
            rate(self.follows, self.follows_secs)
        )?;
        writeln!(
            f,
            "follows skipped: {} duplicate, {} self, {} already there, {} blocked, {} beyond graph.max_following",
            self.duplicates, self.self_follows, self.existing, self.blocked, self.over_limit
        )?;
        write!(
            f,
            "items imported: {} in {:.1} s ({:.0} items/s)",
            self.items,
            self.items_secs,
            rate(self.items, self.items_secs)
        )
    }
}

fn reader(path: &Path) -> Result<(Box<dyn BufRead>, ProgressBar), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(path.display().to_string());
    let counted = bar.wrap_read(file);
    let mut buffered = BufReader::with_capacity(1 << 20, counted);
    let gz = buffered.fill_buf().map(|b| b.starts_with(&[0x1f, 0x8b])).unwrap_or(false);
    let inner: Box<dyn Read> = if gz { Box::new(MultiGzDecoder::new(buffered)) } else { Box::new(buffered) };
    Ok((Box::new(BufReader::with_capacity(1 << 20, inner)), bar))
}

fn line_error(path: &Path, n: u64, why: impl std::fmt::Display) -> String {
    format!("{} line {n}: {why}; nothing from this file was written", path.display())
}

/// Calls `each` with every line (its number, its text trimmed) of a file;
/// returns the number of lines.
fn for_each_line(path: &Path, each: &mut dyn FnMut(u64, &str) -> Result<(), String>) -> Result<u64, String> {
    let (mut r, bar) = reader(path)?;
    let (mut line, mut n) = (String::new(), 0u64);
    loop {
        line.clear();
        let read = r.read_line(&mut line).map_err(|e| line_error(path, n + 1, e))?;
        if read == 0 {
            break;
        }
        n += 1;
        each(n, line.trim())?;
    }
    bar.finish_and_clear();
    Ok(n)
}

/// Reads an edge list: every pair, in file order.
fn read_follows(path: &Path) -> Result<(Vec<(UserId, UserId)>, u64), String> {
    let mut out = Vec::new();
    let lines = for_each_line(path, &mut |n, t| {
        if t.is_empty() || t.starts_with('#') || t.starts_with('%') {
            return Ok(());
        }
        let mut fields = t.split(|c: char| c.is_whitespace() || c == ',').filter(|f| !f.is_empty());
        let (Some(a), Some(b), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(line_error(path, n, format!("expected `follower followee`, found {t:?}")));
        };
        let a = UserId::parse("follower", a).map_err(|e| line_error(path, n, e))?;
        let b = UserId::parse("followee", b).map_err(|e| line_error(path, n, e))?;
        out.push((a, b));
        Ok(())
    })?;
    Ok((out, lines))
}

/// Keeps the follows the graph allows, sorted, and counts the others.
/// `existing` tells what the graph already holds of a follower (asked once
/// per follower, in order).
fn plan_follows(
    mut edges: Vec<(UserId, UserId)>,
    existing: &mut dyn FnMut(UserId) -> Result<Existing, String>,
    max_following: usize,
    s: &mut Summary,
) -> Result<Vec<(UserId, UserId)>, String> {
    let before = edges.len();
    edges.sort_unstable();
    edges.dedup();
    s.duplicates = (before - edges.len()) as u64;
    let mut keep = Vec::with_capacity(edges.len());
    let mut current: Option<(UserId, Existing, usize)> = None;
    for (a, b) in edges {
        if a == b {
            s.self_follows += 1;
            continue;
        }
        if current.as_ref().is_none_or(|(u, _, _)| *u != a) {
            let e = existing(a)?;
            let count = e.following.len();
            current = Some((a, e, count));
        }
        let Some((_, e, count)) = current.as_mut() else { continue };
        if e.following.contains(&b) {
            s.existing += 1;
            continue;
        }
        if e.blocked.contains(&b) {
            s.blocked += 1;
            continue;
        }
        if *count >= max_following {
            s.over_limit += 1;
            continue;
        }
        *count += 1;
        keep.push((a, b));
    }
    Ok(keep)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportObject {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

/// One line of an items file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportItem {
    author: String,
    created_at: String,
    kind: Option<String>,
    body: Option<serde_json::Map<String, serde_json::Value>>,
    visibility: Option<String>,
    tags: Option<Vec<String>>,
    mentions: Option<Vec<String>>,
    object: Option<ImportObject>,
    idempotency_key: Option<String>,
}

/// Parses and checks one items line into a validated item (without an id).
fn parse_item(text: &str, now: Millis, skew_ms: i64) -> Result<NewItem, String> {
    let it: ImportItem = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let author = UserId::parse("author", &it.author).map_err(|e| e.to_string())?;
    let kind = match it.kind.as_deref() {
        Some(k) => ItemKind::parse(k).map_err(|e| e.to_string())?,
        None => ItemKind::Post,
    };
    if matches!(kind, ItemKind::Repost | ItemKind::Reply) {
        return Err("kind: reposts and replies are created through the API, not imported".into());
    }
    let created_at = Millis::parse_rfc3339("created_at", &it.created_at).map_err(|e| e.to_string())?;
    if created_at.0 < tideway_core::ids::ID_EPOCH_MS {
        return Err("created_at: must be on or after 2020-01-01T00:00:00Z".into());
    }
    if created_at.0 > now.0.saturating_add(skew_ms) {
        return Err(format!("created_at: {created_at} is ahead of the clock; imports are of the past"));
    }
    let mentions = it
        .mentions
        .unwrap_or_default()
        .iter()
        .map(|m| UserId::parse("mentions", m).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let new = NewItem {
        body: it.body.map(tideway_core::Body::from).unwrap_or_default(),
        visibility: it
            .visibility
            .as_deref()
            .map(Visibility::parse)
            .transpose()
            .map_err(|e| e.to_string())?
            .unwrap_or(Visibility::Public),
        tags: it.tags.unwrap_or_default(),
        mentions,
        object: it.object.map(|o| ObjectRef { kind: o.kind, id: o.id }),
        created_at: Some(created_at),
        idempotency_key: it.idempotency_key,
        ..NewItem::new(author, kind)
    };
    new.validated().map_err(|e| e.to_string())
}

/// Reads an items file, calling `each` with every valid item and its line.
fn for_each_item(
    path: &Path,
    now: Millis,
    skew_ms: i64,
    each: &mut dyn FnMut(u64, NewItem) -> Result<(), String>,
) -> Result<u64, String> {
    let mut count = 0u64;
    for_each_line(path, &mut |n, t| {
        if t.is_empty() {
            return Ok(());
        }
        let item = parse_item(t, now, skew_ms).map_err(|e| line_error(path, n, e))?;
        each(n, item)?;
        count += 1;
        Ok(())
    })?;
    Ok(count)
}

fn item_of(new: NewItem, id: u64) -> Item {
    Item {
        visibility: new.visibility,
        body: new.body,
        tags: new.tags,
        mentions: new.mentions,
        object: new.object,
        idempotency_key: new.idempotency_key,
        ..Item::new(ItemId(id), new.author, new.kind)
    }
}

/// Runs an import into the embedded store of `cfg`.
pub fn run(cfg: &Config, args: &ImportArgs) -> Result<Summary, String> {
    if cfg.storage.backend != BackendKind::Embedded {
        return Err("tideway import writes to the embedded store: set storage.backend = \"embedded\"".into());
    }
    if args.follows.is_none() && args.items.is_none() {
        return Err("nothing to import: give --follows FILE and/or --items FILE".into());
    }
    let mut importer = Importer::open(&cfg.storage.data_dir).map_err(|e| e.chain())?;
    let mut s = Summary::default();
    let now = Millis::now();
    if let Some(path) = &args.follows {
        let t = Instant::now();
        let (edges, lines) = read_follows(path)?;
        s.follow_lines = lines;
        // Into a directory without edges nothing needs looking up.
        let graph = importer.has_edges().map_err(|e| format!("reading the data directory: {e}"))?;
        let keep = plan_follows(
            edges,
            &mut |u| match graph {
                true => importer.existing(u).map_err(|e| format!("reading the data directory: {e}")),
                false => Ok(Existing::default()),
            },
            cfg.graph.max_following,
            &mut s,
        )?;
        let bar = ProgressBar::new(keep.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("writing follows [{bar:30}] {pos}/{len} ({per_sec}, eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        importer
            .ingest_follows(&keep, args.since.unwrap_or(now), &mut |n| bar.set_position(n as u64))
            .map_err(|e| format!("writing follows: {e}"))?;
        bar.finish_and_clear();
        s.follows = keep.len() as u64;
        s.follows_secs = t.elapsed().as_secs_f64();
    }
    if let Some(path) = &args.items {
        let skew = i64::try_from(cfg.items.max_clock_skew.0.as_millis()).unwrap_or(i64::MAX);
        let t = Instant::now();
        // Pass 1: every line is checked, and idempotency keys are unique.
        let mut keys: HashSet<(UserId, String)> = HashSet::new();
        for_each_item(path, now, skew, &mut |n, item| {
            if let Some(k) = &item.idempotency_key {
                let taken = importer
                    .idempotent(item.author, k)
                    .map_err(|e| line_error(path, n, format!("reading the data directory: {e}")))?
                    .is_some();
                if taken || !keys.insert((item.author, k.clone())) {
                    return Err(line_error(
                        path,
                        n,
                        format!("idempotency_key {k:?} of user {} is used twice", item.author),
                    ));
                }
            }
            Ok(())
        })?;
        // Pass 2: ids, then atomic batches.
        let ids = IdGenerator::new(cfg.server.node_id).map_err(|e| e.to_string())?;
        let mut batch = Vec::with_capacity(ITEM_BATCH);
        let flush = |importer: &mut Importer, batch: &mut Vec<Item>| -> Result<(), String> {
            importer.write_items(batch).map_err(|e| format!("writing items: {e}"))?;
            batch.clear();
            Ok(())
        };
        s.items = for_each_item(path, now, skew, &mut |n, item| {
            let at = item.created_at.unwrap_or(now);
            let id = loop {
                let k = ids.at(at).map_err(|e| line_error(path, n, e))?;
                if importer
                    .has_item(ItemId(k))
                    .map_err(|e| line_error(path, n, format!("reading the data directory: {e}")))?
                {
                    ids.taken(k);
                    continue;
                }
                break k;
            };
            batch.push(item_of(item, id));
            if batch.len() >= ITEM_BATCH {
                flush(&mut importer, &mut batch)?;
            }
            Ok(())
        })?;
        flush(&mut importer, &mut batch)?;
        s.items_secs = t.elapsed().as_secs_f64();
    }
    let bar = ProgressBar::new_spinner().with_message("making the import durable and compacting its tables");
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    importer.finish().map_err(|e| format!("making the import durable: {e}"))?;
    bar.finish_and_clear();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_dedupes_skips_self_and_caps_each_follower() {
        let u = UserId;
        let edges = vec![(u(1), u(2)), (u(1), u(2)), (u(1), u(1)), (u(1), u(3)), (u(1), u(4)), (u(2), u(1))];
        let mut s = Summary::default();
        let keep = plan_follows(edges, &mut |_| Ok(Existing::default()), 2, &mut s).expect("plan");
        assert_eq!(keep, vec![(u(1), u(2)), (u(1), u(3)), (u(2), u(1))]);
        assert_eq!((s.duplicates, s.self_follows, s.over_limit), (1, 1, 1));
        // What the graph holds counts: an existing follow, a block, the cap.
        let edges = vec![(u(1), u(2)), (u(1), u(3)), (u(1), u(4)), (u(5), u(6))];
        let mut s = Summary::default();
        let mut asked = Vec::new();
        let keep = plan_follows(
            edges,
            &mut |user| {
                asked.push(user);
                Ok(match user.0 {
                    1 => Existing { following: [u(2)].into(), blocked: [u(3)].into() },
                    _ => Existing::default(),
                })
            },
            2,
            &mut s,
        )
        .expect("plan");
        assert_eq!(keep, vec![(u(1), u(4)), (u(5), u(6))]);
        assert_eq!((s.existing, s.blocked, s.over_limit), (1, 1, 0));
        assert_eq!(asked, vec![u(1), u(5)], "once per follower");
    }

    #[test]
    fn item_lines_follow_the_api_rules() {
        let now = Millis::parse_rfc3339("t", "2026-01-01T00:00:00Z").expect("time");
        let ok =
            parse_item(r#"{"author":"7","created_at":"2024-01-01T00:00:00Z","tags":["Rust"]}"#, now, 0).expect("valid");
        assert_eq!((ok.author, ok.tags.clone()), (UserId(7), vec!["rust".to_owned()]));
        for bad in [
            r#"{"author":"7"}"#,
            r#"{"author":"07","created_at":"2024-01-01T00:00:00Z"}"#,
            r#"{"author":"7","created_at":"2024-01-01T00:00:00Z","kind":"repost"}"#,
            r#"{"author":"7","created_at":"2027-01-01T00:00:00Z"}"#,
            r#"{"author":"7","created_at":"2024-01-01T00:00:00Z","repost_of":"1"}"#,
            r#"{"author":"7","created_at":"2019-01-01T00:00:00Z"}"#,
            "not json",
        ] {
            assert!(parse_item(bad, now, 0).is_err(), "{bad}");
        }
    }
}
