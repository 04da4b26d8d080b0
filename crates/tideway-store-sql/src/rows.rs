//! Binds and columns: the one vocabulary of binds ([`Bind`]), keys and ids
//! as SQL BIGINTs, typed reads of a row's columns, `IN` lists, and items as
//! rows (a record and a body, JSON).

use sqlx::Row;
use sqlx::any::{AnyArguments, AnyRow};
use std::sync::Arc;
use tideway_core::{Item, Millis, UserId};
use tideway_store::{Job, Result, StoreError, WorkerId};

/// A key as a SQL BIGINT (keys and ids are below 2^63).
pub(crate) fn k(key: u64) -> i64 {
    key as i64
}

/// A worker id as a SQL BIGINT (its bits).
pub(crate) fn w(worker: WorkerId) -> i64 {
    worker as i64
}

/// A bind of a statement: a BIGINT, a nullable one, or a text. Every
/// statement of this crate bound from a list is bound from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bind<'a> {
    Int(i64),
    Opt(Option<i64>),
    Text(&'a str),
}

impl From<i64> for Bind<'_> {
    fn from(v: i64) -> Self {
        Bind::Int(v)
    }
}

/// `sql` (already in its dialect) bound to `binds`, in order.
pub(crate) fn bound<'q>(sql: &'q str, binds: &[Bind<'q>]) -> sqlx::query::Query<'q, sqlx::Any, AnyArguments<'q>> {
    let mut q = sqlx::query(sql);
    for b in binds {
        q = match *b {
            Bind::Int(v) => q.bind(v),
            Bind::Opt(v) => q.bind(v),
            Bind::Text(v) => q.bind(v),
        };
    }
    q
}

fn column(i: usize, e: sqlx::Error) -> StoreError {
    StoreError::corrupt_by(format!("column {i}"), e)
}

/// An integer column.
pub(crate) fn int(r: &AnyRow, i: usize) -> Result<i64> {
    r.try_get(i).map_err(|e| column(i, e))
}

/// A nullable integer column.
pub(crate) fn oint(r: &AnyRow, i: usize) -> Result<Option<i64>> {
    r.try_get(i).map_err(|e| column(i, e))
}

/// A text column (MySQL reports binary-collated text as bytes).
pub(crate) fn text(r: &AnyRow, i: usize) -> Result<String> {
    match r.try_get::<String, _>(i) {
        Ok(s) => Ok(s),
        Err(_) => {
            let b: Vec<u8> = r.try_get(i).map_err(|e| column(i, e))?;
            String::from_utf8(b).map_err(|e| StoreError::corrupt_by(format!("column {i}"), e))
        }
    }
}

/// Declares a row of integer columns, decoded by their names through
/// `sqlx::FromRow` (the statement names them, in any order): each field a
/// column of the same name, `i64` or `Option<i64>`.
macro_rules! int_row {
    ($(#[$doc:meta])* $name:ident { $($col:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        pub(crate) struct $name {
            $(pub(crate) $col: $ty),*
        }

        impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for $name {
            fn from_row(r: &'r sqlx::any::AnyRow) -> std::result::Result<Self, sqlx::Error> {
                use sqlx::Row;
                Ok(Self { $($col: r.try_get(stringify!($col))?),* })
            }
        }
    };
}
pub(crate) use int_row;

/// Decodes `rows` into `T`s (a column missing or of another type: the
/// store holds what this node cannot read).
pub(crate) fn decoded<T: for<'r> sqlx::FromRow<'r, AnyRow>>(rows: &[AnyRow]) -> Result<Vec<T>> {
    rows.iter().map(|r| T::from_row(r).map_err(|e| StoreError::corrupt_by("a row", e))).collect()
}

/// `?, ?, …` for `n` values.
pub(crate) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// An `IN` list of `vals`: its placeholders and its binds, the length
/// rounded up to a power of two by repeating the last value (a value twice
/// in an `IN` list matches what it did once). Each length is a statement
/// text of its own to the driver, prepared on first use on each connection
/// (a round trip more) and kept in a cache of 100 per connection; a page's
/// reads come in every length, so unpadded they kept missing the cache
/// (`bench-nodes --probe`: ×1.54 for a read of 100 to 200 ids).
pub(crate) fn in_list(vals: impl IntoIterator<Item = i64>) -> (String, Vec<i64>) {
    let mut v: Vec<i64> = vals.into_iter().collect();
    if let Some(&last) = v.last() {
        v.resize(v.len().next_power_of_two(), last);
    }
    (marks(v.len()), v)
}

/// Decodes an item's row (`record`, and `body` unless `None`).
pub(crate) fn item_of(record: &str, body: Option<&str>) -> Result<Arc<Item>> {
    let mut item: Item = serde_json::from_str(record).map_err(|e| StoreError::corrupt_by("an item record", e))?;
    item.body = match body {
        Some(b) => {
            tideway_core::Body::from_json(b.as_bytes()).map_err(|e| StoreError::corrupt_by("an item body", e))?
        }
        None => tideway_store::stripped_body(),
    };
    Ok(Arc::new(item))
}

/// An item's row: its record (without the body) and its body, as JSON.
pub(crate) fn record_json(item: &Item) -> Result<(String, String)> {
    let record = Item { body: tideway_store::stripped_body(), ..item.clone() };
    let r = serde_json::to_string(&record).map_err(|e| StoreError::corrupt_by("encoding an item", e))?;
    Ok((r, item.body.as_str().to_owned()))
}

int_row!(
    /// A job's row (`SELECT k, author, cur_since, cur_user, created`).
    JobRow { k: i64, author: i64, cur_since: Option<i64>, cur_user: Option<i64>, created: i64 }
);

impl From<JobRow> for Job {
    fn from(r: JobRow) -> Job {
        let cursor = match (r.cur_since, r.cur_user) {
            (Some(s), Some(u)) => Some((Millis(s), UserId(u as u64))),
            _ => None,
        };
        Job { key: r.k as u64, author: UserId(r.author as u64), cursor, created: Millis(r.created) }
    }
}

/// The jobs of `rows` (each a [`JobRow`]).
pub(crate) fn jobs_of(rows: &[AnyRow]) -> Result<Vec<Job>> {
    Ok(decoded::<JobRow>(rows)?.into_iter().map(Job::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_padded_to_powers_of_two() {
        assert_eq!(marks(3), "?, ?, ?");
        assert_eq!(in_list([7, 8, 9]), ("?, ?, ?, ?".to_owned(), vec![7, 8, 9, 9]), "padded with the last");
        assert_eq!(in_list([7, 8]), ("?, ?".to_owned(), vec![7, 8]));
        assert_eq!(in_list([]), (String::new(), vec![]));
        assert_eq!(in_list(0..33).1.len(), 64);
    }
}
