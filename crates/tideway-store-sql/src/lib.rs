//! The durable half of a scaled-out deployment on PostgreSQL or MySQL /
//! MariaDB: items, the follow graph, blocks and mutes, reactions, home
//! insertions, promotions and fan-out jobs with leases ([`Items`], [`Graph`],
//! [`Jobs`]). It is the source of truth: every node reads and writes it, and
//! the shared half (Redis) is rebuilt from it.
//!
//! One implementation serves both engines through sqlx's `Any` driver; the
//! SQL is written once with `?` placeholders (numbered for PostgreSQL) and
//! only the statements that differ (insert-or-ignore, schema types) are
//! chosen per dialect. The schema is versioned ([`schema`]): a node applies
//! missing migrations at start and refuses a database of a newer version.

pub mod schema;
pub mod testing;

use async_trait::async_trait;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Body, Item, ItemId, Key, Millis, Relation, UserId};
use tideway_store::{
    CreateOutcome, FollowStatus, FollowerPos, Graph, ItemChange, ItemCounts, Items, Job, JobProgress, Jobs, ListKind,
    Promotion, Record, Result, StoreError, StoreStats, UserCounts, ViewerMarks, WorkerId,
};

/// The SQL dialect of the engine behind the URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    MySql,
}

impl Dialect {
    /// `sql`, written with `?` placeholders, in this dialect: PostgreSQL
    /// numbers them (`$1`, `$2`, …), MySQL keeps `?`.
    pub fn placeholders(self, sql: &str) -> String {
        match self {
            Dialect::MySql => sql.to_owned(),
            Dialect::Postgres => {
                let mut out = String::with_capacity(sql.len() + 16);
                let mut n = 0;
                for c in sql.chars() {
                    if c == '?' {
                        n += 1;
                        out.push('$');
                        out.push_str(&n.to_string());
                    } else {
                        out.push(c);
                    }
                }
                out
            }
        }
    }

    /// The dialect a URL names (`postgres://`, `postgresql://`, `mysql://`, `mariadb://`).
    pub fn of_url(url: &str) -> Option<Self> {
        let scheme = url.split("://").next()?;
        match scheme {
            "postgres" | "postgresql" => Some(Dialect::Postgres),
            "mysql" | "mariadb" => Some(Dialect::MySql),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dialect::Postgres => "postgres",
            Dialect::MySql => "mysql",
        }
    }
}

/// How long `stats` reuses its counts (they count whole tables).
const STATS_TTL: Duration = Duration::from_secs(10);

/// Items, graph and jobs on a SQL database.
pub struct SqlStore {
    pool: AnyPool,
    dialect: Dialect,
    stats: tokio::sync::Mutex<Option<(Instant, StoreStats)>>,
}

/// Marks an error a transaction may be retried after (a deadlock, a
/// serialization failure): the engine rolled it back.
const RETRYABLE: &str = "retryable: ";

/// Attempts at a transaction that met a deadlock.
const RETRIES: u32 = 5;

fn db_err(d: Dialect) -> impl Fn(sqlx::Error) -> StoreError {
    move |e| {
        let again = match &e {
            sqlx::Error::Database(db) => {
                matches!(db.code().as_deref(), Some("40001") | Some("40P01") | Some("1213") | Some("1205"))
            }
            _ => false,
        };
        StoreError::Io(format!("{}: {}{e}", d.name(), if again { RETRYABLE } else { "" }))
    }
}

fn retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::Io(m) if m.contains(RETRYABLE))
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {e}"))
}

/// A key as a SQL BIGINT (keys and ids are below 2^63).
fn k(key: u64) -> i64 {
    key as i64
}

/// A worker id as a SQL BIGINT (its bits).
fn w(worker: WorkerId) -> i64 {
    worker as i64
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            matches!(db.code().as_deref(), Some("23505") | Some("1062") | Some("23000"))
                || db.message().contains("Duplicate entry")
        }
        _ => false,
    }
}

fn column(i: usize, e: sqlx::Error) -> StoreError {
    StoreError::Corrupt(format!("column {i}: {e}"))
}

/// An integer column.
fn int(r: &AnyRow, i: usize) -> Result<i64> {
    r.try_get(i).map_err(|e| column(i, e))
}

/// A nullable integer column.
fn oint(r: &AnyRow, i: usize) -> Result<Option<i64>> {
    r.try_get(i).map_err(|e| column(i, e))
}

/// A text column (MySQL reports binary-collated text as bytes).
fn text(r: &AnyRow, i: usize) -> Result<String> {
    match r.try_get::<String, _>(i) {
        Ok(s) => Ok(s),
        Err(_) => {
            let b: Vec<u8> = r.try_get(i).map_err(|e| column(i, e))?;
            String::from_utf8(b).map_err(|e| StoreError::Corrupt(format!("column {i}: {e}")))
        }
    }
}

/// `?, ?, …` for `n` values.
fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// What an insert into `tw_item_counts` does on PostgreSQL when the count
/// exists: adds the new row's `n` to it.
const PG_ADD_TO_COUNT: &str = "ON CONFLICT (item, what) DO UPDATE SET n = tw_item_counts.n + EXCLUDED.n";

/// An `IN` list of `vals`: its placeholders and its binds, the length
/// rounded up to a power of two by repeating the last value (a value twice
/// in an `IN` list matches what it did once). Each length is a statement
/// text of its own to the driver, prepared on first use on each connection
/// (a round trip more) and kept in a cache of 100 per connection; a page's
/// reads come in every length, so unpadded they kept missing the cache
/// (`bench-nodes --probe`: ×1.54 for a read of 100 to 200 ids).
fn in_list(vals: impl IntoIterator<Item = i64>) -> (String, Vec<i64>) {
    let mut v: Vec<i64> = vals.into_iter().collect();
    if let Some(&last) = v.last() {
        v.resize(v.len().next_power_of_two(), last);
    }
    (marks(v.len()), v)
}

impl SqlStore {
    /// Connects, checks the schema version and applies missing migrations.
    /// Errors name the setting to fix (`storage.url`).
    pub async fn connect(url: &str) -> Result<Self> {
        let setting = "storage.url (TIDEWAY_STORAGE__URL)";
        let dialect = Dialect::of_url(url)
            .ok_or_else(|| StoreError::Io(format!("{setting}: {url:?} is not a postgres:// or mysql:// URL")))?;
        sqlx::any::install_default_drivers();
        let mysql = dialect == Dialect::MySql;
        let pool = AnyPoolOptions::new()
            // InnoDB's default (repeatable read) takes gap locks that make
            // concurrent job claims and checkpoints deadlock; read committed
            // is PostgreSQL's default and what the queries are written for.
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if mysql {
                        sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED").execute(conn).await?;
                    }
                    Ok(())
                })
            })
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(3))
            .connect(url)
            .await
            .map_err(|e| StoreError::Io(format!("{setting}: cannot connect to {}: {e}", redact(url))))?;
        let store = Self { pool, dialect, stats: tokio::sync::Mutex::new(None) };
        store.migrate().await.map_err(|e| StoreError::Io(format!("{setting}: {e}")))?;
        Ok(store)
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Closes every connection (tests drop their database after).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    fn err(&self) -> impl Fn(sqlx::Error) -> StoreError {
        db_err(self.dialect)
    }

    /// `sql` with PostgreSQL's numbered placeholders where needed.
    fn q(&self, sql: &str) -> String {
        self.dialect.placeholders(sql)
    }

    /// `INSERT … ` that skips rows whose key exists.
    fn insert_ignore(&self, table_and_cols: &str, values: &str) -> String {
        match self.dialect {
            Dialect::Postgres => format!("INSERT INTO {table_and_cols} VALUES {values} ON CONFLICT DO NOTHING"),
            Dialect::MySql => format!("INSERT IGNORE INTO {table_and_cols} VALUES {values}"),
        }
    }

    async fn migrate(&self) -> std::result::Result<(), String> {
        let mut conn = self.pool.acquire().await.map_err(|e| e.to_string())?;
        let lock = match self.dialect {
            Dialect::Postgres => "SELECT pg_advisory_lock(74110)",
            Dialect::MySql => "SELECT GET_LOCK('tideway_migrate', 60)",
        };
        sqlx::query(lock).execute(&mut *conn).await.map_err(|e| e.to_string())?;
        let result = async {
            sqlx::query("CREATE TABLE IF NOT EXISTS tw_schema (version BIGINT NOT NULL)")
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            let row = sqlx::query("SELECT MAX(version) FROM tw_schema")
                .fetch_one(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
            let have: Option<i64> = row.try_get(0).map_err(|e| e.to_string())?;
            let have = have.unwrap_or(0);
            if have > schema::current() {
                return Err(format!(
                    "the database has schema version {have}, newer than this build's {}: upgrade tideway",
                    schema::current()
                ));
            }
            for (version, stmts) in schema::MIGRATIONS.iter().filter(|(v, _)| *v > have) {
                tracing::info!(version, dialect = self.dialect.name(), "applying a schema migration");
                for s in stmts.iter().filter_map(|s| schema::render(s, self.dialect)) {
                    sqlx::query(&s).execute(&mut *conn).await.map_err(|e| format!("migration {version}: {e}"))?;
                }
                sqlx::query(&self.q("INSERT INTO tw_schema (version) VALUES (?)"))
                    .bind(*version)
                    .execute(&mut *conn)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        .await;
        let unlock = match self.dialect {
            Dialect::Postgres => "SELECT pg_advisory_unlock(74110)",
            Dialect::MySql => "SELECT RELEASE_LOCK('tideway_migrate')",
        };
        let _ = sqlx::query(unlock).execute(&mut *conn).await;
        result
    }

    async fn fetch(&self, sql: &str, binds: &[i64]) -> Result<Vec<AnyRow>> {
        let sql = self.q(sql);
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(*b);
        }
        q.fetch_all(&self.pool).await.map_err(self.err())
    }

    /// Decodes an item's row (`record`, and `body` unless `None`).
    fn item_of(record: &str, body: Option<&str>) -> Result<Arc<Item>> {
        let mut item: Item = serde_json::from_str(record).map_err(|e| corrupt("an item record", e))?;
        item.body = match body {
            Some(b) => Arc::new(serde_json::from_str(b).map_err(|e| corrupt("an item body", e))?),
            None => tideway_store::stripped_body(),
        };
        Ok(Arc::new(item))
    }

    fn record_json(item: &Item) -> Result<(String, String)> {
        let record = Item { body: tideway_store::stripped_body(), ..item.clone() };
        let r = serde_json::to_string(&record).map_err(|e| corrupt("encoding an item", e))?;
        let b = serde_json::to_string(&*item.body).map_err(|e| corrupt("encoding a body", e))?;
        Ok((r, b))
    }

    /// The existing item the create of `item` resolves to (its idempotency
    /// key or its repost), within `tx`.
    async fn existing(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, item: &Item) -> Result<Option<CreateOutcome>> {
        if let Some(key) = &item.idempotency_key {
            let row = sqlx::query(&self.q("SELECT record, body FROM tw_items WHERE author = ? AND idem = ?"))
                .bind(k(item.author.0))
                .bind(key.as_str())
                .fetch_optional(&mut **tx)
                .await
                .map_err(self.err())?;
            if let Some(row) = row {
                let (r, b) = (text(&row, 0)?, text(&row, 1)?);
                return Ok(Some(CreateOutcome::Existing(Self::item_of(&r, Some(&b))?)));
            }
        }
        if let Some(orig) = item.repost_of {
            let row = sqlx::query(&self.q(
                "SELECT record, body FROM tw_items WHERE repost_of = ? AND author = ? AND live = 1 ORDER BY id LIMIT 1",
            ))
            .bind(k(orig.0))
            .bind(k(item.author.0))
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.err())?;
            if let Some(row) = row {
                let (r, b) = (text(&row, 0)?, text(&row, 1)?);
                return Ok(Some(CreateOutcome::AlreadyReposted(Self::item_of(&r, Some(&b))?)));
            }
        }
        Ok(None)
    }

    /// A new item with nothing to resolve first (no idempotency key, not a
    /// repost) on PostgreSQL: the item, its author's row and counter, its
    /// parent's reply count and its fan-out job in one statement — one round
    /// trip, atomic as a whole.
    async fn create_plain_pg(&self, item: &Item, fan_out: bool, now: Millis) -> std::result::Result<(), Failed> {
        let (record, body) = Self::record_json(item).map_err(Failed::Store)?;
        let head = format!(
            "WITH i AS (INSERT INTO tw_items (id, author, live, repost_of, reply_to, idem, record, body) \
                    VALUES (?, ?, ?, NULL, ?, NULL, ?, ?) RETURNING author, reply_to, live), \
                    u AS (INSERT INTO tw_users (id, items) SELECT author, ? FROM i \
                    ON CONFLICT (id) DO UPDATE SET items = tw_users.items + EXCLUDED.items), \
                    c AS (INSERT INTO tw_item_counts (item, what, n) SELECT reply_to, 'r', 1 FROM i \
                    WHERE reply_to IS NOT NULL AND live = 1 {PG_ADD_TO_COUNT}) "
        );
        let tail = if fan_out {
            "INSERT INTO tw_jobs (k, author, created) SELECT ?, author, ? FROM i"
        } else {
            "SELECT COUNT(*) FROM i"
        };
        let sql = self.q(&format!("{head}{tail}"));
        let mut q = sqlx::query(&sql)
            .bind(k(item.id.0))
            .bind(k(item.author.0))
            .bind(i16::from(!item.deleted))
            .bind(item.reply_to.map(|p| k(p.0)))
            .bind(record)
            .bind(body)
            .bind(i64::from(!item.deleted));
        if fan_out {
            q = q.bind(k(item.id.0)).bind(now.0);
        }
        match q.execute(&self.pool).await {
            Err(e) if is_unique_violation(&e) => Err(Failed::Duplicate),
            Err(e) => Err(Failed::Store(self.err()(e))),
            Ok(_) => Ok(()),
        }
    }

    async fn try_create(&self, item: &Item, fan_out: bool, now: Millis) -> std::result::Result<CreateOutcome, Failed> {
        if self.dialect == Dialect::Postgres && item.idempotency_key.is_none() && item.repost_of.is_none() {
            self.create_plain_pg(item, fan_out, now).await?;
            return Ok(CreateOutcome::Created(Arc::new(item.clone())));
        }
        let mut tx = self.pool.begin().await.map_err(|e| Failed::Store(self.err()(e)))?;
        if let Some(found) = self.existing(&mut tx, item).await.map_err(Failed::Store)? {
            return Ok(found);
        }
        let (record, body) = Self::record_json(item).map_err(Failed::Store)?;
        let ins = sqlx::query(&self.q(
            "INSERT INTO tw_items (id, author, live, repost_of, reply_to, idem, record, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(k(item.id.0))
        .bind(k(item.author.0))
        .bind(i16::from(!item.deleted))
        .bind(item.repost_of.map(|o| k(o.0)))
        .bind(item.reply_to.map(|p| k(p.0)))
        .bind(item.idempotency_key.clone())
        .bind(record)
        .bind(body)
        .execute(&mut *tx)
        .await;
        match ins {
            Err(e) if is_unique_violation(&e) => return Err(Failed::Duplicate),
            Err(e) => return Err(Failed::Store(self.err()(e))),
            Ok(_) => {}
        }
        // The author's row and item counter in one statement (one round trip
        // fewer per post than an insert-if-missing and an update).
        let upsert = match self.dialect {
            Dialect::Postgres => {
                "INSERT INTO tw_users (id, items) VALUES (?, ?) \
                 ON CONFLICT (id) DO UPDATE SET items = tw_users.items + EXCLUDED.items"
            }
            Dialect::MySql => {
                "INSERT INTO tw_users (id, items) VALUES (?, ?) ON DUPLICATE KEY UPDATE items = items + VALUES(items)"
            }
        };
        sqlx::query(&self.q(upsert))
            .bind(k(item.author.0))
            .bind(i64::from(!item.deleted))
            .execute(&mut *tx)
            .await
            .map_err(|e| Failed::Store(self.err()(e)))?;
        if !item.deleted {
            self.bump_parents(&mut tx, item, 1).await.map_err(Failed::Store)?;
        }
        if fan_out {
            sqlx::query(&self.q("INSERT INTO tw_jobs (k, author, created) VALUES (?, ?, ?)"))
                .bind(k(item.id.0))
                .bind(k(item.author.0))
                .bind(now.0)
                .execute(&mut *tx)
                .await
                .map_err(|e| Failed::Store(self.err()(e)))?;
        }
        tx.commit().await.map_err(|e| Failed::Store(self.err()(e)))?;
        Ok(CreateOutcome::Created(Arc::new(item.clone())))
    }

    /// Keys in `range` from `sql` (which ends in a WHERE clause on `col`).
    async fn range_keys(
        &self,
        select: &str,
        col: &str,
        binds: &[i64],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        let mut sql = select.to_owned();
        let mut b = binds.to_vec();
        if let Some(a) = range.above {
            sql.push_str(&format!(" AND {col} > ?"));
            b.push(k(a));
        }
        if let Some(x) = range.below {
            sql.push_str(&format!(" AND {col} < ?"));
            b.push(k(x));
        }
        let order = match dir {
            Direction::Older => "DESC",
            Direction::Newer => "ASC",
        };
        // The limit is spelled, not bound: PostgreSQL's generic plan for a
        // bound limit does not know it is small, and returning readers' inbox
        // rebuilds (limit 800) took twice as long with it (`bench-nodes`).
        sql.push_str(&format!(" ORDER BY {col} {order} LIMIT {limit}"));
        let rows = self.fetch(&sql, &b).await?;
        rows.iter().map(|r| Ok(int(r, 0)? as u64)).collect()
    }

    /// Deletes the follow `from → to` in both tables, within `tx`; whether
    /// there was one.
    async fn delete_follow(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, from: UserId, to: UserId) -> Result<bool> {
        let row = sqlx::query(&self.q("SELECT since FROM tw_follows WHERE follower = ? AND followee = ? FOR UPDATE"))
            .bind(k(from.0))
            .bind(k(to.0))
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.err())?;
        let Some(row) = row else { return Ok(false) };
        let since = int(&row, 0)?;
        sqlx::query(&self.q("DELETE FROM tw_follows WHERE follower = ? AND followee = ?"))
            .bind(k(from.0))
            .bind(k(to.0))
            .execute(&mut **tx)
            .await
            .map_err(self.err())?;
        sqlx::query(&self.q("DELETE FROM tw_followers WHERE followee = ? AND since = ? AND follower = ?"))
            .bind(k(to.0))
            .bind(since)
            .bind(k(from.0))
            .execute(&mut **tx)
            .await
            .map_err(self.err())?;
        self.bump(tx, "following", -1, &[from]).await?;
        self.bump(tx, "followers", -1, &[to]).await?;
        Ok(true)
    }

    /// Adds `by` to a counter of `users` (rows that exist), within `tx`.
    async fn bump(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        counter: &str,
        by: i64,
        users: &[UserId],
    ) -> Result<()> {
        if users.is_empty() || by == 0 {
            return Ok(());
        }
        let sql =
            self.q(&format!("UPDATE tw_users SET {counter} = {counter} + ? WHERE id IN ({})", marks(users.len())));
        let mut q = sqlx::query(&sql).bind(by);
        for u in users {
            q = q.bind(k(u.0));
        }
        q.execute(&mut **tx).await.map_err(self.err())?;
        Ok(())
    }

    /// The upsert that adds `n` (the third bind) to count `what` (the
    /// second) of `item` (the first).
    fn count_upsert(&self) -> String {
        let insert = "INSERT INTO tw_item_counts (item, what, n) VALUES (?, ?, ?)";
        match self.dialect {
            Dialect::Postgres => self.q(&format!("{insert} {PG_ADD_TO_COUNT}")),
            Dialect::MySql => format!("{insert} ON DUPLICATE KEY UPDATE n = n + VALUES(n)"),
        }
    }

    /// Adds `by` to the counts a live `item` adds to others (its parent's
    /// replies, its original's reposts), within `tx`.
    async fn bump_parents(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, item: &Item, by: i64) -> Result<()> {
        for (parent, what) in [(item.reply_to, "r"), (item.repost_of, "p")] {
            if let Some(p) = parent {
                sqlx::query(&self.count_upsert())
                    .bind(k(p.0))
                    .bind(what)
                    .bind(by)
                    .execute(&mut **tx)
                    .await
                    .map_err(self.err())?;
            }
        }
        Ok(())
    }

    async fn add_users(&self, tx: &mut sqlx::Transaction<'_, sqlx::Any>, users: &[UserId]) -> Result<()> {
        if users.is_empty() {
            return Ok(());
        }
        let sql = self.q(&self.insert_ignore("tw_users (id)", &vec!["(?)"; users.len()].join(", ")));
        let mut q = sqlx::query(&sql);
        for u in users {
            q = q.bind(k(u.0));
        }
        q.execute(&mut **tx).await.map_err(self.err())?;
        Ok(())
    }

    /// Reads `sql` with binds and maps the first column of each row.
    async fn count(&self, sql: &str, binds: &[i64]) -> Result<u64> {
        let rows = self.fetch(sql, binds).await?;
        Ok(match rows.first() {
            Some(r) => int(r, 0)?.max(0) as u64,
            None => 0,
        })
    }
}

impl SqlStore {
    /// Runs a transaction again (after a short, growing pause) when the
    /// engine rolled it back for a deadlock or a serialization failure.
    async fn retrying<T, F, Fut>(&self, mut attempt_once: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match attempt_once().await {
                Err(e) if retryable(&e) && attempt < RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(2 << attempt)).await;
                }
                done => return done,
            }
        }
    }
}

/// Why a create attempt did not finish.
enum Failed {
    Store(StoreError),
    /// A unique index refused the row: an id taken, or a racing create with
    /// the same idempotency key.
    Duplicate,
}

/// A URL without its password.
fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:***{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[async_trait]
impl Items for SqlStore {
    async fn create_item(&self, item: Item, fan_out: bool, now: Millis) -> Result<CreateOutcome> {
        let mut attempt = 0;
        let tried = loop {
            match self.try_create(&item, fan_out, now).await {
                Err(Failed::Store(e)) if retryable(&e) && attempt < RETRIES => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(2 << attempt)).await;
                }
                tried => break tried,
            }
        };
        match tried {
            Ok(outcome) => Ok(outcome),
            Err(Failed::Store(e)) => Err(e),
            // A racing create with the same idempotency key won: return it;
            // otherwise the id is taken.
            Err(Failed::Duplicate) => {
                let mut tx = self.pool.begin().await.map_err(self.err())?;
                match self.existing(&mut tx, &item).await? {
                    Some(found) => Ok(found),
                    None => Err(StoreError::IdTaken(item.id.0)),
                }
            }
        }
    }

    async fn update_item(&self, id: ItemId, change: &ItemChange) -> Result<Option<Arc<Item>>> {
        self.retrying(|| async move {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            let row = sqlx::query(&self.q("SELECT record, body FROM tw_items WHERE id = ? FOR UPDATE"))
                .bind(k(id.0))
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.err())?;
            let Some(row) = row else { return Ok(None) };
            let (r, b) = (text(&row, 0)?, text(&row, 1)?);
            let item = Self::item_of(&r, Some(&b))?;
            if item.deleted {
                return Ok(None);
            }
            let new = Arc::new(change.apply(&item));
            let (record, body) = Self::record_json(&new)?;
            sqlx::query(&self.q("UPDATE tw_items SET live = ?, record = ?, body = ? WHERE id = ?"))
                .bind(i16::from(!new.deleted))
                .bind(record)
                .bind(body)
                .bind(k(id.0))
                .execute(&mut *tx)
                .await
                .map_err(self.err())?;
            if new.deleted {
                self.bump(&mut tx, "items", -1, &[new.author]).await?;
                self.bump_parents(&mut tx, &new, -1).await?;
            }
            tx.commit().await.map_err(self.err())?;
            Ok(Some(new))
        })
        .await
    }

    async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
        if keys.is_empty() {
            return Ok(vec![]);
        }
        let (m, binds) = in_list(keys.iter().map(|x| k(*x)));
        let mut found: HashMap<u64, Record> = HashMap::new();
        // Records come whole, bodies included (same row): a page needs no
        // second call for them.
        for row in self.fetch(&format!("SELECT id, record, body FROM tw_items WHERE id IN ({m})"), &binds).await? {
            let id = int(&row, 0)?;
            let (r, b) = (text(&row, 1)?, text(&row, 2)?);
            found.insert(id as u64, Record::Item(Self::item_of(&r, Some(&b))?));
        }
        if found.len() < keys.len() {
            let sql = format!("SELECT k, user_id, item FROM tw_inserts WHERE k IN ({m})");
            for row in self.fetch(&sql, &binds).await? {
                let key = int(&row, 0)? as u64;
                let user = UserId(int(&row, 1)? as u64);
                let item = ItemId(int(&row, 2)? as u64);
                found.insert(key, Record::Insert { key, user, item });
            }
        }
        Ok(keys.iter().map(|x| found.get(x).cloned()).collect())
    }

    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let (m, binds) = in_list(ids.iter().map(|i| k(i.0)));
        let mut found: HashMap<u64, Body> = HashMap::new();
        for row in self.fetch(&format!("SELECT id, body FROM tw_items WHERE id IN ({m})"), &binds).await? {
            let b = text(&row, 1)?;
            let body: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&b).map_err(|e| corrupt("an item body", e))?;
            found.insert(int(&row, 0)? as u64, Arc::new(body));
        }
        Ok(ids.iter().map(|i| found.get(&i.0).cloned()).collect())
    }

    async fn outbox_merge(
        &self,
        authors: &[UserId],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        if authors.is_empty() || limit == 0 {
            return Ok(vec![]);
        }
        let (m, binds) = in_list(authors.iter().map(|a| k(a.0)));
        let select = format!("SELECT id FROM tw_items WHERE author IN ({m})");
        self.range_keys(&select, "id", &binds, range, dir, limit).await
    }

    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>> {
        if originals.is_empty() || reposters.is_empty() {
            return Ok(vec![Vec::new(); originals.len()]);
        }
        let (mo, mut binds) = in_list(originals.iter().map(|o| k(o.0)));
        let (mr, rb) = in_list(reposters.iter().map(|r| k(r.0)));
        binds.extend(rb);
        let sql = format!(
            "SELECT repost_of, author, id FROM tw_items WHERE repost_of IN ({mo}) AND author IN ({mr}) AND live = 1 ORDER BY id"
        );
        let mut by: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        for row in self.fetch(&sql, &binds).await? {
            by.entry(int(&row, 0)? as u64)
                .or_default()
                .push((UserId(int(&row, 1)? as u64), ItemId(int(&row, 2)? as u64)));
        }
        Ok(originals.iter().map(|o| by.remove(&o.0).unwrap_or_default()).collect())
    }

    async fn hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        // One round trip: the kept counts (`c`, by key: no rows counted) and
        // the viewer's own marks, as rows (what, item, count name or
        // reaction kind, count).
        let (m, ids_b) = in_list(ids.iter().map(|i| k(i.0)));
        let mut sql = format!("SELECT 'c', item, what, n FROM tw_item_counts WHERE item IN ({m}) AND n > 0");
        let mut binds = ids_b.clone();
        if let Some(v) = viewer {
            sql.push_str(&format!(
                " UNION ALL SELECT 'v', repost_of, '', COUNT(*) FROM tw_items WHERE author = ? AND repost_of IN ({m}) AND live = 1 GROUP BY repost_of \
                 UNION ALL SELECT 'm', item, kind, COUNT(*) FROM tw_reactions WHERE user_id = ? AND item IN ({m}) GROUP BY item, kind"
            ));
            binds.push(k(v.0));
            binds.extend_from_slice(&ids_b);
            binds.push(k(v.0));
            binds.extend_from_slice(&ids_b);
        }
        let mut counts: HashMap<u64, ItemCounts> = HashMap::new();
        let mut own: HashMap<u64, ViewerMarks> = HashMap::new();
        for row in self.fetch(&sql, &binds).await? {
            let what = text(&row, 0)?;
            let item = int(&row, 1)? as u64;
            let n = int(&row, 3)?.max(0) as u64;
            match what.as_str() {
                "c" => {
                    let name = text(&row, 2)?;
                    let c = counts.entry(item).or_default();
                    match (name.as_str(), name.strip_prefix("k:")) {
                        ("r", _) => c.replies = n,
                        ("p", _) => c.reposts = n,
                        (_, Some(kind)) => c.reactions.push((kind.to_owned(), n)),
                        _ => {}
                    }
                }
                "v" => own.entry(item).or_default().reposted = true,
                _ => own.entry(item).or_default().reactions.push(text(&row, 2)?),
            }
        }
        Ok(ids
            .iter()
            .map(|id| {
                let mut c = counts.get(&id.0).cloned().unwrap_or_default();
                c.reactions.sort();
                let marks = viewer.map(|_| {
                    let mut m = own.get(&id.0).cloned().unwrap_or_default();
                    m.reactions.sort();
                    m
                });
                (c, marks)
            })
            .collect())
    }

    async fn set_reaction(&self, item: ItemId, user: UserId, kind: &str, on: bool) -> Result<bool> {
        // The reaction and its count change together, or neither does.
        let what = format!("k:{kind}");
        let by: i64 = if on { 1 } else { -1 };
        if self.dialect == Dialect::Postgres {
            // One statement: the count moves only when the reaction did.
            let change = if on {
                "INSERT INTO tw_reactions (item, user_id, kind) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING item"
            } else {
                "DELETE FROM tw_reactions WHERE item = ? AND user_id = ? AND kind = ? RETURNING item"
            };
            let sql = self.q(&format!(
                "WITH r AS ({change}) INSERT INTO tw_item_counts (item, what, n) SELECT item, ?, ? FROM r {PG_ADD_TO_COUNT}"
            ));
            let done = self
                .retrying(|| async {
                    sqlx::query(&sql)
                        .bind(k(item.0))
                        .bind(k(user.0))
                        .bind(kind)
                        .bind(what.as_str())
                        .bind(by)
                        .execute(&self.pool)
                        .await
                        .map_err(self.err())
                })
                .await?;
            return Ok(done.rows_affected() > 0);
        }
        let change = if on {
            self.q(&self.insert_ignore("tw_reactions (item, user_id, kind)", "(?, ?, ?)"))
        } else {
            self.q("DELETE FROM tw_reactions WHERE item = ? AND user_id = ? AND kind = ?")
        };
        self.retrying(|| async {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            let done = sqlx::query(&change)
                .bind(k(item.0))
                .bind(k(user.0))
                .bind(kind)
                .execute(&mut *tx)
                .await
                .map_err(self.err())?;
            if done.rows_affected() == 0 {
                return Ok(false);
            }
            sqlx::query(&self.count_upsert())
                .bind(k(item.0))
                .bind(what.as_str())
                .bind(by)
                .execute(&mut *tx)
                .await
                .map_err(self.err())?;
            tx.commit().await.map_err(self.err())?;
            Ok(true)
        })
        .await
    }

    async fn create_promotion(&self, p: Promotion) -> Result<()> {
        sqlx::query(&self.q("INSERT INTO tw_promotions (id, item, every, starts_at, ends_at) VALUES (?, ?, ?, ?, ?)"))
            .bind(k(p.id))
            .bind(k(p.item.0))
            .bind(i64::from(p.every))
            .bind(p.starts_at.0)
            .bind(p.ends_at.0)
            .execute(&self.pool)
            .await
            .map_err(self.err())?;
        Ok(())
    }

    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        let rows = self
            .fetch(
                "SELECT id, item, every, starts_at, ends_at FROM tw_promotions WHERE starts_at <= ? AND ends_at > ? ORDER BY id",
                &[now.0, now.0],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Promotion {
                    id: int(r, 0)? as u64,
                    item: ItemId(int(r, 1)? as u64),
                    every: u32::try_from(int(r, 2)?).unwrap_or(u32::MAX),
                    starts_at: Millis(int(r, 3)?),
                    ends_at: Millis(int(r, 4)?),
                })
            })
            .collect()
    }

    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.retrying(|| async move {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            sqlx::query(&self.q("INSERT INTO tw_inserts (k, user_id, item) VALUES (?, ?, ?)"))
                .bind(k(key))
                .bind(k(user.0))
                .bind(k(item.0))
                .execute(&mut *tx)
                .await
                .map_err(self.err())?;
            self.add_users(&mut tx, &[user]).await?;
            tx.commit().await.map_err(self.err())?;
            Ok(())
        })
        .await
    }

    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        self.range_keys("SELECT k FROM tw_inserts WHERE user_id = ?", "k", &[k(user.0)], range, dir, limit).await
    }

    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
        if items.is_empty() {
            return Ok(vec![]);
        }
        let (m, ib) = in_list(items.iter().map(|i| k(i.0)));
        let mut binds = vec![k(user.0)];
        binds.extend(ib);
        let sql = format!("SELECT item, MIN(k) FROM tw_inserts WHERE user_id = ? AND item IN ({m}) GROUP BY item");
        let found: HashMap<u64, u64> = self
            .fetch(&sql, &binds)
            .await?
            .iter()
            .map(|r| Ok((int(r, 0)? as u64, int(r, 1)? as u64)))
            .collect::<Result<_>>()?;
        Ok(items.iter().map(|i| found.get(&i.0).copied()).collect())
    }
}

#[async_trait]
impl Graph for SqlStore {
    async fn follow_many(
        &self,
        user: UserId,
        targets: &[UserId],
        at: Millis,
        max_following: usize,
    ) -> Result<Vec<FollowStatus>> {
        self.retrying(|| async move {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            // The follower's row serialises their concurrent follows (the limit).
            self.add_users(&mut tx, &[user]).await?;
            sqlx::query(&self.q("SELECT id FROM tw_users WHERE id = ? FOR UPDATE"))
                .bind(k(user.0))
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.err())?;
            let mut count: usize = {
                let row = sqlx::query(&self.q("SELECT COUNT(*) FROM tw_follows WHERE follower = ?"))
                    .bind(k(user.0))
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(self.err())?;
                int(&row, 0)?.max(0) as usize
            };
            let (m, ts) = in_list(targets.iter().map(|t| k(t.0)));
            let mut existing: HashMap<u64, i64> = HashMap::new();
            let mut blocked: HashSet<u64> = HashSet::new();
            if !ts.is_empty() {
                let sql =
                    self.q(&format!("SELECT followee, since FROM tw_follows WHERE follower = ? AND followee IN ({m})"));
                let mut q = sqlx::query(&sql).bind(k(user.0));
                for t in &ts {
                    q = q.bind(*t);
                }
                for row in q.fetch_all(&mut *tx).await.map_err(self.err())? {
                    existing.insert(int(&row, 0)? as u64, int(&row, 1)?);
                }
                let sql = self.q(&format!(
                    "SELECT target FROM tw_blocks WHERE user_id = ? AND target IN ({m}) \
                         UNION SELECT user_id FROM tw_blocks WHERE target = ? AND user_id IN ({m})"
                ));
                let mut q = sqlx::query(&sql).bind(k(user.0));
                for t in &ts {
                    q = q.bind(*t);
                }
                q = q.bind(k(user.0));
                for t in &ts {
                    q = q.bind(*t);
                }
                for row in q.fetch_all(&mut *tx).await.map_err(self.err())? {
                    blocked.insert(int(&row, 0)? as u64);
                }
            }
            let mut statuses = Vec::with_capacity(targets.len());
            let mut new: Vec<UserId> = Vec::new();
            for &t in targets {
                let status = if let Some(since) = existing.get(&t.0) {
                    FollowStatus::Already(Millis(*since))
                } else if new.contains(&t) {
                    FollowStatus::Already(at)
                } else if blocked.contains(&t.0) {
                    FollowStatus::Blocked
                } else if count >= max_following {
                    FollowStatus::Limit
                } else {
                    count += 1;
                    new.push(t);
                    FollowStatus::Followed(at)
                };
                statuses.push(status);
            }
            if !new.is_empty() {
                let rows = vec!["(?, ?, ?)"; new.len()].join(", ");
                let sql = self.q(&format!("INSERT INTO tw_follows (follower, followee, since) VALUES {rows}"));
                let mut q = sqlx::query(&sql);
                for t in &new {
                    q = q.bind(k(user.0)).bind(k(t.0)).bind(at.0);
                }
                q.execute(&mut *tx).await.map_err(self.err())?;
                let sql = self.q(&format!("INSERT INTO tw_followers (followee, since, follower) VALUES {rows}"));
                let mut q = sqlx::query(&sql);
                for t in &new {
                    q = q.bind(k(t.0)).bind(at.0).bind(k(user.0));
                }
                q.execute(&mut *tx).await.map_err(self.err())?;
                self.add_users(&mut tx, &new).await?;
                self.bump(&mut tx, "following", new.len() as i64, &[user]).await?;
                self.bump(&mut tx, "followers", 1, &new).await?;
            }
            tx.commit().await.map_err(self.err())?;
            Ok(statuses)
        })
        .await
    }

    async fn unfollow(&self, user: UserId, target: UserId) -> Result<bool> {
        self.retrying(|| async move {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            let removed = self.delete_follow(&mut tx, user, target).await?;
            tx.commit().await.map_err(self.err())?;
            Ok(removed)
        })
        .await
    }

    async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        self.retrying(|| async move {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            if on {
                sqlx::query(&self.q(&self.insert_ignore("tw_blocks (user_id, target, since)", "(?, ?, ?)")))
                    .bind(k(user.0))
                    .bind(k(target.0))
                    .bind(at.0)
                    .execute(&mut *tx)
                    .await
                    .map_err(self.err())?;
                self.delete_follow(&mut tx, user, target).await?;
                self.delete_follow(&mut tx, target, user).await?;
                self.add_users(&mut tx, &[user, target]).await?;
            } else {
                sqlx::query(&self.q("DELETE FROM tw_blocks WHERE user_id = ? AND target = ?"))
                    .bind(k(user.0))
                    .bind(k(target.0))
                    .execute(&mut *tx)
                    .await
                    .map_err(self.err())?;
            }
            tx.commit().await.map_err(self.err())?;
            Ok(())
        })
        .await
    }

    async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
        let (put, del) = (
            self.q(&self.insert_ignore("tw_mutes (user_id, target, since)", "(?, ?, ?)")),
            self.q("DELETE FROM tw_mutes WHERE user_id = ? AND target = ?"),
        );
        let q = if on {
            sqlx::query(&put).bind(k(user.0)).bind(k(target.0)).bind(at.0)
        } else {
            sqlx::query(&del).bind(k(user.0)).bind(k(target.0))
        };
        q.execute(&self.pool).await.map_err(self.err())?;
        Ok(())
    }

    async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
        let rows =
            self.fetch("SELECT followee FROM tw_follows WHERE follower = ? ORDER BY followee", &[k(user.0)]).await?;
        rows.iter().map(|r| Ok(UserId(int(r, 0)? as u64))).collect()
    }

    async fn list(
        &self,
        user: UserId,
        which: ListKind,
        after: Option<(Millis, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, Millis)>> {
        let (table, owner, other) = match which {
            ListKind::Following => ("tw_follows", "follower", "followee"),
            ListKind::Followers => ("tw_followers", "followee", "follower"),
        };
        let mut sql = format!("SELECT {other}, since FROM {table} WHERE {owner} = ?");
        let mut binds = vec![k(user.0)];
        if let Some((since, id)) = after {
            sql.push_str(&format!(" AND (since < ? OR (since = ? AND {other} < ?))"));
            binds.extend([since.0, since.0, k(id.0)]);
        }
        sql.push_str(&format!(" ORDER BY since DESC, {other} DESC LIMIT {limit}"));
        let rows = self.fetch(&sql, &binds).await?;
        rows.iter().map(|r| Ok((UserId(int(r, 0)? as u64), Millis(int(r, 1)?)))).collect()
    }

    async fn followers_chunk(
        &self,
        user: UserId,
        after: Option<FollowerPos>,
        limit: usize,
    ) -> Result<Vec<FollowerPos>> {
        let mut sql = "SELECT since, follower FROM tw_followers WHERE followee = ?".to_owned();
        let mut binds = vec![k(user.0)];
        if let Some((since, id)) = after {
            sql.push_str(" AND (since > ? OR (since = ? AND follower > ?))");
            binds.extend([since.0, since.0, k(id.0)]);
        }
        sql.push_str(&format!(" ORDER BY since, follower LIMIT {limit}"));
        let rows = self.fetch(&sql, &binds).await?;
        rows.iter().map(|r| Ok((Millis(int(r, 0)?), UserId(int(r, 1)? as u64)))).collect()
    }

    async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
        if others.is_empty() {
            return Ok(vec![]);
        }
        // One round trip: each edge kind as rows (what, other).
        let (m, os) = in_list(others.iter().map(|o| k(o.0)));
        let sql = format!(
            "SELECT 'f', followee FROM tw_follows WHERE follower = ? AND followee IN ({m}) \
             UNION ALL SELECT 'b', follower FROM tw_followers WHERE followee = ? AND follower IN ({m}) \
             UNION ALL SELECT 'k', target FROM tw_blocks WHERE user_id = ? AND target IN ({m}) \
             UNION ALL SELECT 'K', user_id FROM tw_blocks WHERE target = ? AND user_id IN ({m}) \
             UNION ALL SELECT 'm', target FROM tw_mutes WHERE user_id = ? AND target IN ({m})"
        );
        let mut binds = Vec::with_capacity(5 * (os.len() + 1));
        for _ in 0..5 {
            binds.push(k(user.0));
            binds.extend_from_slice(&os);
        }
        let mut rel: HashMap<u64, Relation> = HashMap::new();
        for row in self.fetch(&sql, &binds).await? {
            let r = rel.entry(int(&row, 1)? as u64).or_default();
            match text(&row, 0)?.as_str() {
                "f" => r.following = true,
                "b" => r.followed_by = true,
                "k" => r.blocking = true,
                "K" => r.blocked_by = true,
                _ => r.muting = true,
            }
        }
        Ok(others.iter().map(|o| rel.get(&o.0).copied().unwrap_or_default()).collect())
    }

    async fn counts(&self, user: UserId) -> Result<UserCounts> {
        let rows = self.fetch("SELECT following, followers, items FROM tw_users WHERE id = ?", &[k(user.0)]).await?;
        let Some(r) = rows.first() else { return Ok(UserCounts::default()) };
        Ok(UserCounts {
            following: int(r, 0)?.max(0) as u64,
            followers: int(r, 1)?.max(0) as u64,
            items: int(r, 2)?.max(0) as u64,
        })
    }

    async fn stats(&self) -> Result<StoreStats> {
        // Readiness: the database answers now, whatever the counts' age.
        self.health().await?;
        // Pending jobs are read every time (the table holds only what is
        // still to deliver: small), so `pending` is 0 exactly when every
        // accepted write is delivered; the store-wide counts are COUNT(*)s
        // of whole tables, reused for `STATS_TTL`.
        let jobs = self.fetch("SELECT COUNT(*), MIN(created) FROM tw_jobs", &[]).await?;
        let (pending_jobs, oldest_job) = match jobs.first() {
            Some(r) => (int(r, 0)?.max(0) as u64, oint(r, 1)?.map(Millis)),
            None => (0, None),
        };
        let mut cached = self.stats.lock().await;
        if let Some((at, s)) = *cached
            && at.elapsed() < STATS_TTL
        {
            return Ok(StoreStats { pending_jobs, oldest_job, ..s });
        }
        let max = |sql: &'static str| async move {
            let rows = self.fetch(sql, &[]).await?;
            Ok::<u64, StoreError>(match rows.first() {
                Some(r) => oint(r, 0)?.unwrap_or(0).max(0) as u64,
                None => 0,
            })
        };
        let s = StoreStats {
            users: self.count("SELECT COUNT(*) FROM tw_users", &[]).await?,
            items: self.count("SELECT COUNT(*) FROM tw_items WHERE live = 1", &[]).await?,
            follows: self.count("SELECT COUNT(*) FROM tw_follows", &[]).await?,
            pending_jobs,
            oldest_job,
            max_key: max("SELECT MAX(id) FROM tw_items")
                .await?
                .max(max("SELECT MAX(k) FROM tw_inserts").await?)
                .max(max("SELECT MAX(id) FROM tw_promotions").await?),
        };
        *cached = Some((Instant::now(), s));
        Ok(s)
    }

    async fn health(&self) -> Result<()> {
        self.fetch("SELECT 1", &[]).await.map(|_| ())
    }
}

#[async_trait]
impl Jobs for SqlStore {
    async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
        let rows = self
            .fetch(
                &format!("SELECT k, author, cur_since, cur_user, created FROM tw_jobs ORDER BY k LIMIT {limit}"),
                &[],
            )
            .await?;
        rows.iter().map(job_of).collect()
    }

    async fn claim_jobs(&self, worker: WorkerId, now: Millis, lease_ms: i64, limit: usize) -> Result<Vec<Job>> {
        self.retrying(|| async move {
                let mut tx = self.pool.begin().await.map_err(self.err())?;
                // Jobs another worker is claiming right now are skipped, not waited on.
                let sql = self.q(&format!(
                    "SELECT k, author, cur_since, cur_user, created FROM tw_jobs \
                     WHERE holder IS NULL OR holder = ? OR lease_until <= ? ORDER BY k LIMIT {limit} FOR UPDATE SKIP LOCKED"
                ));
                let rows = sqlx::query(&sql).bind(w(worker)).bind(now.0).fetch_all(&mut *tx).await.map_err(self.err())?;
                let jobs: Vec<Job> = rows.iter().map(job_of).collect::<Result<_>>()?;
                if !jobs.is_empty() {
                    let sql =
                        self.q(&format!("UPDATE tw_jobs SET holder = ?, lease_until = ? WHERE k IN ({})", marks(jobs.len())));
                    let mut q = sqlx::query(&sql).bind(w(worker)).bind(now.0.saturating_add(lease_ms));
                    for j in &jobs {
                        q = q.bind(k(j.key));
                    }
                    q.execute(&mut *tx).await.map_err(self.err())?;
                }
                tx.commit().await.map_err(self.err())?;
                Ok(jobs)
        })
        .await
    }

    async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
        self.retrying(|| async move {
            let mut tx = self.pool.begin().await.map_err(self.err())?;
            let mut recorded = Vec::with_capacity(progress.len());
            for p in progress {
                let key = match *p {
                    JobProgress::Checkpoint(key, _) | JobProgress::Complete(key) => key,
                };
                let row =
                    sqlx::query(&self.q("SELECT cur_since, cur_user, holder FROM tw_jobs WHERE k = ? FOR UPDATE"))
                        .bind(k(key))
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(self.err())?;
                let Some(row) = row else {
                    recorded.push(false);
                    continue;
                };
                let holder = oint(&row, 2)?;
                if holder.is_some_and(|h| h != w(worker)) {
                    recorded.push(false);
                    continue;
                }
                let cursor = match (oint(&row, 0)?, oint(&row, 1)?) {
                    (Some(s), Some(u)) => Some((Millis(s), UserId(u as u64))),
                    _ => None,
                };
                let done = match *p {
                    JobProgress::Checkpoint(_, pos) if cursor.is_none_or(|c| c < pos) => {
                        sqlx::query(&self.q("UPDATE tw_jobs SET cur_since = ?, cur_user = ? WHERE k = ?"))
                            .bind(pos.0.0)
                            .bind(k(pos.1.0))
                            .bind(k(key))
                            .execute(&mut *tx)
                            .await
                            .map_err(self.err())?;
                        true
                    }
                    JobProgress::Checkpoint(..) => false,
                    JobProgress::Complete(_) => {
                        sqlx::query(&self.q("DELETE FROM tw_jobs WHERE k = ?"))
                            .bind(k(key))
                            .execute(&mut *tx)
                            .await
                            .map_err(self.err())?;
                        true
                    }
                };
                recorded.push(done);
            }
            tx.commit().await.map_err(self.err())?;
            Ok(recorded)
        })
        .await
    }
}

fn job_of(r: &AnyRow) -> Result<Job> {
    let cursor = match (oint(r, 2)?, oint(r, 3)?) {
        (Some(s), Some(u)) => Some((Millis(s), UserId(u as u64))),
        _ => None,
    };
    Ok(Job { key: int(r, 0)? as u64, author: UserId(int(r, 1)? as u64), cursor, created: Millis(int(r, 4)?) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_and_placeholders() {
        assert_eq!(Dialect::of_url("postgres://u@h/db"), Some(Dialect::Postgres));
        assert_eq!(Dialect::of_url("mariadb://root@h/db"), Some(Dialect::MySql));
        assert_eq!(Dialect::of_url("redis://h"), None);
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("mysql://root@h/db"), "mysql://root@h/db");
        assert_eq!(marks(3), "?, ?, ?");
        assert_eq!(in_list([7, 8, 9]), ("?, ?, ?, ?".to_owned(), vec![7, 8, 9, 9]), "padded with the last");
        assert_eq!(in_list([7, 8]), ("?, ?".to_owned(), vec![7, 8]));
        assert_eq!(in_list([]), (String::new(), vec![]));
        assert_eq!(in_list(0..33).1.len(), 64);
    }
}
