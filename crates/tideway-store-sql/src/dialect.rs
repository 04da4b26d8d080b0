//! The two dialects, and every statement that is spelled differently in
//! each: placeholders, insert-or-ignore (and insert-or-keep), the count
//! upserts. What a post writes is described once in `post_writes.rs` and
//! rendered there per dialect. Everything else is one text for both.

use crate::SqlStore;
use tideway_store::Engine;

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

    /// The database's clock now, in milliseconds since the Unix epoch, as
    /// an expression (the connection's time zone is UTC on MySQL: sqlx sets
    /// it, so `NOW(3)` has no daylight-saving jumps).
    pub(crate) fn now_ms(self) -> &'static str {
        match self {
            Dialect::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            Dialect::MySql => "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
        }
    }

    /// The engine, as errors and logs name it.
    pub fn engine(self) -> Engine {
        match self {
            Dialect::Postgres => Engine::Postgres,
            Dialect::MySql => Engine::MySql,
        }
    }
}

/// What an insert into `tw_item_counts` does on PostgreSQL when the count
/// exists: adds the new row's `n` to it.
pub(crate) const PG_ADD_TO_COUNT: &str = "ON CONFLICT (item, what) DO UPDATE SET n = tw_item_counts.n + EXCLUDED.n";

impl SqlStore {
    /// `sql` with PostgreSQL's numbered placeholders where needed.
    pub(crate) fn q(&self, sql: &str) -> String {
        self.dialect.placeholders(sql)
    }

    /// `INSERT … ` that skips rows whose key exists.
    pub(crate) fn insert_ignore(&self, table_and_cols: &str, values: &str) -> String {
        match self.dialect {
            Dialect::Postgres => format!("INSERT INTO {table_and_cols} VALUES {values} ON CONFLICT DO NOTHING"),
            Dialect::MySql => format!("INSERT IGNORE INTO {table_and_cols} VALUES {values}"),
        }
    }

    /// `INSERT …` of a row that may exist, which then stays as it is. On
    /// MySQL it is an upsert changing nothing, so that an existing row is
    /// locked exclusively: InnoDB's insert-or-ignore takes a shared lock on
    /// it, and two writers then locking it for update deadlock. `key` is
    /// the table's primary key column.
    pub(crate) fn insert_or_keep(&self, table_and_cols: &str, values: &str, key: &str) -> String {
        match self.dialect {
            Dialect::Postgres => self.insert_ignore(table_and_cols, values),
            Dialect::MySql => {
                format!("INSERT INTO {table_and_cols} VALUES {values} ON DUPLICATE KEY UPDATE {key} = {key}")
            }
        }
    }

    /// The upsert that adds `n` (the third bind) to count `what` (the
    /// second) of `item` (the first), with `?` placeholders.
    pub(crate) fn count_upsert(&self) -> String {
        let insert = "INSERT INTO tw_item_counts (item, what, n) VALUES (?, ?, ?)";
        match self.dialect {
            Dialect::Postgres => format!("{insert} {PG_ADD_TO_COUNT}"),
            Dialect::MySql => format!("{insert} ON DUPLICATE KEY UPDATE n = n + VALUES(n)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_and_placeholders() {
        assert_eq!(Dialect::of_url("postgres://u@h/db"), Some(Dialect::Postgres));
        assert_eq!(Dialect::of_url("mariadb://root@h/db"), Some(Dialect::MySql));
        assert_eq!(Dialect::of_url("redis://h"), None);
        assert_eq!(Dialect::Postgres.placeholders("a = ? AND b IN (?, ?)"), "a = $1 AND b IN ($2, $3)");
        assert_eq!(Dialect::MySql.placeholders("a = ?"), "a = ?");
    }
}
