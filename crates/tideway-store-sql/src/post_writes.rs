//! What a post writes, described once: the row a post makes ([`PostRow`],
//! built from the item by the rules: its postings from `rules::postings`,
//! the count of its parent it adds to, its author's item count, its job)
//! and the tables those go to ([`WRITES`]: a table's rows as a `SELECT`
//! over the posts' rows), rendered per dialect, for one post or a batch:
//!
//! - **PostgreSQL**: one statement of one fixed text ([`pg_text`]): the
//!   rows as one JSON text (`$1`, read by `json_to_recordset`), each table
//!   a data-modifying CTE. A lone create runs it with one row (in its
//!   transaction when it read facts first), a batch with many.
//! - **MySQL** (no data-modifying CTEs): a statement per table
//!   ([`my_steps`]), each reading the rows by `JSON_TABLE`, skipped when no
//!   post has rows for it: bound (`?`) in a lone create's transaction, or
//!   from the session variables a batch's one text sets (`posts.rs`).
//!
//! Whatever the dialect and the number of posts, the same rows: the item;
//! its author's row with `items` raised by one when it is live; the count
//! of its parent (`r` a reply's, `p` a repost's) raised by one when it is
//! live; a posting per feed; and with a fan-out, its job.

use crate::Dialect;
use crate::rows::{k, record_json};
use std::sync::LazyLock;
use tideway_core::{Item, Millis};
use tideway_store::{Result, StoreError, rules};

/// A post's row, as the statements read it (one JSON object each).
#[derive(serde::Serialize)]
pub(crate) struct PostRow {
    pub(crate) id: i64,
    pub(crate) author: i64,
    /// `1`, or `0` for an item stored already deleted (it counts nowhere).
    live: i32,
    repost_of: Option<i64>,
    reply_to: Option<i64>,
    idem: Option<String>,
    /// The item whose count a live reply (`r`) or repost (`p`) raises (an
    /// item is never both).
    parent: Option<i64>,
    what: Option<&'static str>,
    /// The feeds it is posted to (`rules::postings`).
    feeds: Vec<i64>,
    /// `1` with a fan-out job, created at `created`.
    job: i32,
    created: i64,
    /// The record and body (`rows::record_json`); left out of the JSON
    /// of the statements that do not write them (`bare`).
    #[serde(skip_serializing_if = "Option::is_none")]
    record: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

impl PostRow {
    /// The row `item` makes, with its job when `fan_out` (created `now`).
    pub(crate) fn new(item: &Item, fan_out: bool, now: Millis) -> Result<Self> {
        let (record, body) = record_json(item)?;
        let live = !item.deleted;
        let parent = match (item.reply_to, item.repost_of) {
            _ if !live => None,
            (Some(p), _) => Some((k(p.0), "r")),
            (None, Some(o)) => Some((k(o.0), "p")),
            (None, None) => None,
        };
        Ok(PostRow {
            id: k(item.id.0),
            author: k(item.author.0),
            live: i32::from(live),
            repost_of: item.repost_of.map(|o| k(o.0)),
            reply_to: item.reply_to.map(|p| k(p.0)),
            idem: item.idempotency_key.clone(),
            parent: parent.map(|p| p.0),
            what: parent.map(|p| p.1),
            feeds: rules::postings(item).into_iter().map(|f| f as i64).collect(),
            job: i32::from(fan_out),
            created: now.0,
            record: Some(record),
            body: Some(body),
        })
    }

    /// The bytes of its record and body.
    pub(crate) fn bytes(&self) -> usize {
        self.record.as_ref().map_or(0, String::len) + self.body.as_ref().map_or(0, String::len)
    }

    /// The row without its record and body.
    fn bare(&self) -> PostRow {
        PostRow { record: None, body: None, idem: self.idem.clone(), feeds: self.feeds.clone(), ..*self }
    }
}

/// `rows` as the JSON array the statements read: `full` with records and
/// bodies, or without (what every write but the item's reads).
pub(crate) fn json<'a>(rows: impl IntoIterator<Item = &'a PostRow>, full: bool) -> Result<String> {
    let encoded = if full {
        serde_json::to_string(&rows.into_iter().collect::<Vec<_>>())
    } else {
        serde_json::to_string(&rows.into_iter().map(PostRow::bare).collect::<Vec<_>>())
    };
    encoded.map_err(|e| StoreError::corrupt_by("encoding posts' rows", e))
}

/// What a write does with a row whose key exists.
#[derive(Clone, Copy)]
enum OnConflict {
    /// Fails the statement (an item's id taken).
    Fail,
    /// Leaves it be.
    Ignore,
    /// Adds the new row's `column` to it (`key`: the table's key columns).
    Add { key: &'static str, column: &'static str },
}

/// The fields of a post's row a write reads, with their types.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    Id,
    Author,
    Live,
    RepostOf,
    ReplyTo,
    Idem,
    Parent,
    What,
    /// Each of the row's feeds as a row of its own (`f`).
    Feeds,
    Job,
    Created,
    Record,
    Body,
}

impl Field {
    const ALL: [Field; 13] = [
        Field::Id,
        Field::Author,
        Field::Live,
        Field::RepostOf,
        Field::ReplyTo,
        Field::Idem,
        Field::Parent,
        Field::What,
        Field::Feeds,
        Field::Job,
        Field::Created,
        Field::Record,
        Field::Body,
    ];

    /// Its column in `json_to_recordset`'s record.
    fn pg(self) -> &'static str {
        match self {
            Field::Id => "id bigint",
            Field::Author => "author bigint",
            Field::Live => "live int",
            Field::RepostOf => "repost_of bigint",
            Field::ReplyTo => "reply_to bigint",
            Field::Idem => "idem text",
            Field::Parent => "parent bigint",
            Field::What => "what text",
            Field::Feeds => "feeds bigint[]",
            Field::Job => "job int",
            Field::Created => "created bigint",
            Field::Record => "record text",
            Field::Body => "body text",
        }
    }

    /// Its column in `JSON_TABLE`'s `COLUMNS`.
    fn my(self) -> &'static str {
        match self {
            Field::Id => "id BIGINT PATH '$.id'",
            Field::Author => "author BIGINT PATH '$.author'",
            Field::Live => "live INT PATH '$.live'",
            Field::RepostOf => "repost_of BIGINT PATH '$.repost_of'",
            Field::ReplyTo => "reply_to BIGINT PATH '$.reply_to'",
            Field::Idem => "idem VARCHAR(255) CHARACTER SET utf8mb4 PATH '$.idem'",
            Field::Parent => "parent BIGINT PATH '$.parent'",
            Field::What => "what VARCHAR(80) CHARACTER SET utf8mb4 PATH '$.what'",
            Field::Feeds => "NESTED PATH '$.feeds[*]' COLUMNS (f BIGINT PATH '$')",
            Field::Job => "job INT PATH '$.job'",
            Field::Created => "created BIGINT PATH '$.created'",
            Field::Record => "record LONGTEXT CHARACTER SET utf8mb4 PATH '$.record'",
            Field::Body => "body LONGTEXT CHARACTER SET utf8mb4 PATH '$.body'",
        }
    }
}

/// One table's rows of the posts: `SELECT {select} FROM {rows} {rest}`,
/// `{rows}` being the posts' rows (`x`, its fields those of `reads`).
struct Write {
    /// Its data-modifying CTE's name on PostgreSQL.
    name: &'static str,
    /// The table and its columns.
    into: &'static str,
    select: &'static str,
    rest: &'static str,
    on_conflict: OnConflict,
    reads: &'static [Field],
    /// Whether a post has rows for it (MySQL skips a statement for none).
    has_rows: fn(&PostRow) -> bool,
}

/// Every write of a post, in the order they are made (authors, parents
/// and postings in key order: two nodes' batches lock them in the same
/// order).
const WRITES: [Write; 5] = [
    Write {
        name: "i",
        into: "tw_items (id, author, live, repost_of, reply_to, idem, record, body)",
        select: "id, author, live, repost_of, reply_to, idem, record, body",
        rest: "",
        on_conflict: OnConflict::Fail,
        reads: &[
            Field::Id,
            Field::Author,
            Field::Live,
            Field::RepostOf,
            Field::ReplyTo,
            Field::Idem,
            Field::Record,
            Field::Body,
        ],
        has_rows: |_| true,
    },
    Write {
        name: "u",
        into: "tw_users (id, items)",
        select: "author, SUM(live)",
        rest: "GROUP BY author ORDER BY author",
        on_conflict: OnConflict::Add { key: "id", column: "items" },
        reads: &[Field::Author, Field::Live],
        has_rows: |_| true,
    },
    Write {
        name: "c",
        into: "tw_item_counts (item, what, n)",
        select: "parent, what, COUNT(*)",
        rest: "WHERE parent IS NOT NULL GROUP BY parent, what ORDER BY parent, what",
        on_conflict: OnConflict::Add { key: "item, what", column: "n" },
        reads: &[Field::Parent, Field::What],
        has_rows: |r| r.parent.is_some(),
    },
    Write {
        name: "p",
        into: "tw_postings (feed, item)",
        select: "f, id",
        rest: "WHERE f IS NOT NULL",
        on_conflict: OnConflict::Ignore,
        reads: &[Field::Id, Field::Feeds],
        has_rows: |r| !r.feeds.is_empty(),
    },
    Write {
        name: "j",
        into: "tw_jobs (k, author, created)",
        select: "id, author, created",
        rest: "WHERE job = 1",
        on_conflict: OnConflict::Fail,
        reads: &[Field::Id, Field::Author, Field::Job, Field::Created],
        has_rows: |r| r.job == 1,
    },
];

impl Write {
    /// The statement in `dialect`, reading the posts' rows from `rows`.
    fn render(&self, dialect: Dialect, rows: &str) -> String {
        let (table, select, rest) = (self.into, self.select, self.rest);
        let insert = match (dialect, self.on_conflict) {
            (Dialect::MySql, OnConflict::Ignore) => "INSERT IGNORE",
            _ => "INSERT",
        };
        let on_conflict = match (dialect, self.on_conflict) {
            (_, OnConflict::Fail) | (Dialect::MySql, OnConflict::Ignore) => String::new(),
            (Dialect::Postgres, OnConflict::Ignore) => " ON CONFLICT DO NOTHING".to_owned(),
            (Dialect::Postgres, OnConflict::Add { key, column }) => {
                let name = table.split_once(' ').map_or(table, |t| t.0);
                format!(" ON CONFLICT ({key}) DO UPDATE SET {column} = {name}.{column} + EXCLUDED.{column}")
            }
            (Dialect::MySql, OnConflict::Add { column, .. }) => {
                format!(" ON DUPLICATE KEY UPDATE {column} = {column} + VALUES({column})")
            }
        };
        let rest = if rest.is_empty() { String::new() } else { format!(" {rest}") };
        format!("{insert} INTO {table} SELECT {select} FROM {rows}{rest}{on_conflict}")
    }

    /// Whether it reads records and bodies (the full JSON, not the bare).
    fn full(&self) -> bool {
        self.reads.contains(&Field::Record)
    }
}

/// What a post writes on PostgreSQL, for one post or a batch: one
/// statement, one fixed text whatever the number of posts (prepared once
/// per connection). `$1` is the posts' rows as a JSON array ([`json`],
/// full).
pub(crate) fn pg_text() -> &'static str {
    static TEXT: LazyLock<String> = LazyLock::new(|| {
        let fields: Vec<&str> = Field::ALL.iter().map(|f| f.pg()).collect();
        let mut text =
            format!("WITH x AS MATERIALIZED (SELECT * FROM json_to_recordset($1::json) AS x({}))", fields.join(", "));
        let (last, ctes) = WRITES.split_last().expect("writes");
        for w in ctes {
            text.push_str(&format!(", {} AS ({})", w.name, w.render(Dialect::Postgres, pg_rows(w))));
        }
        text.push(' ');
        text.push_str(&last.render(Dialect::Postgres, pg_rows(last)));
        text
    });
    &TEXT
}

/// The posts' rows a write reads on PostgreSQL: the CTE `x`, its feeds
/// one row each.
fn pg_rows(w: &Write) -> &'static str {
    if w.reads.contains(&Field::Feeds) { "(SELECT x.id, f FROM x, unnest(x.feeds) AS f) x" } else { "x" }
}

/// Where MySQL's statements read the posts' rows from.
#[derive(Clone, Copy)]
pub(crate) enum MyRows {
    /// A bind (`?`) of each statement: the JSON, full or bare as it says.
    Bound,
    /// The session variables a batch's text sets (`@tw_full`, `@tw_bare`).
    Variables,
}

/// What `rows` write on MySQL: the statements, in order, each with whether
/// it reads the full JSON (records and bodies) or the bare; a table no post
/// has rows for is left out.
pub(crate) fn my_steps(rows: &[&PostRow], from: MyRows) -> Vec<(&'static str, bool)> {
    static TEXTS: LazyLock<[[String; 5]; 2]> = LazyLock::new(|| {
        let render = |from: MyRows| {
            WRITES.each_ref().map(|w| {
                let source = match (from, w.full()) {
                    (MyRows::Bound, _) => "?",
                    (MyRows::Variables, true) => "@tw_full",
                    (MyRows::Variables, false) => "@tw_bare",
                };
                let fields: Vec<&str> = w.reads.iter().map(|f| f.my()).collect();
                let rows = format!("JSON_TABLE({source}, '$[*]' COLUMNS ({})) AS x", fields.join(", "));
                w.render(Dialect::MySql, &rows)
            })
        };
        [render(MyRows::Bound), render(MyRows::Variables)]
    });
    let texts = &TEXTS[from as usize];
    WRITES
        .iter()
        .zip(texts)
        .filter(|(w, _)| rows.iter().any(|r| (w.has_rows)(r)))
        .map(|(w, text)| (text.as_str(), w.full()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::{ItemId, ItemKind, UserId};

    #[test]
    fn one_description_rendered_per_dialect() {
        let pg = pg_text();
        assert!(pg.starts_with("WITH x AS MATERIALIZED (SELECT * FROM json_to_recordset($1::json)"), "{pg}");
        assert!(pg.contains(
            "u AS (INSERT INTO tw_users (id, items) SELECT author, SUM(live) FROM x GROUP BY author ORDER BY author \
             ON CONFLICT (id) DO UPDATE SET items = tw_users.items + EXCLUDED.items)"
        ));
        assert!(
            pg.ends_with("INSERT INTO tw_jobs (k, author, created) SELECT id, author, created FROM x WHERE job = 1")
        );
        let mut reply = Item::new(ItemId(2), UserId(1), ItemKind::Post);
        reply.reply_to = Some(ItemId(1));
        let row = PostRow::new(&reply, false, Millis(5)).expect("a row");
        assert_eq!((row.parent, row.what), (Some(1), Some("r")));
        let steps = my_steps(&[&row], MyRows::Variables);
        // The item, its author, its parent's count; no posting, no job.
        assert_eq!(steps.len(), 3, "{steps:?}");
        assert!(steps[0].1 && steps[0].0.contains("JSON_TABLE(@tw_full"));
        assert!(steps[2].0.starts_with("INSERT INTO tw_item_counts (item, what, n) SELECT parent, what, COUNT(*)"));
        assert!(steps[2].0.ends_with("ON DUPLICATE KEY UPDATE n = n + VALUES(n)"));
        let bare = json([&row], false).expect("json");
        assert!(!bare.contains("record") && json([&row], true).expect("json").contains("record"));
        reply.deleted = true;
        let row = PostRow::new(&reply, true, Millis(5)).expect("a row");
        assert_eq!((row.live, row.parent), (0, None), "a deleted item counts nowhere");
        let steps = my_steps(&[&row], MyRows::Bound);
        assert_eq!(steps.len(), 3, "the item, its author, its job");
        assert!(steps[2].0.starts_with("INSERT INTO tw_jobs") && steps[2].0.contains("JSON_TABLE(?"));
    }
}
