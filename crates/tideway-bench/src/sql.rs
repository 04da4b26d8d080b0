//! The seeds' SQL pull model as a baseline: a follow table joined to an item
//! table, ordered by time, `LIMIT 50`, with the covering index
//! `(poster_id, created_at DESC)` (PostgreSQL: `INCLUDE (id)`; MariaDB, which
//! has no INCLUDE: `(poster_id, created_at DESC, id)`), on the local servers.

use hdrhistogram::Histogram;
use sqlx::{Connection, Executor, MySqlConnection, PgConnection};
use std::time::Instant;

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Postgres,
    MariaDb,
}

impl Db {
    pub fn name(self) -> &'static str {
        match self {
            Db::Postgres => "PostgreSQL",
            Db::MariaDb => "MariaDB",
        }
    }
}

/// A connection to either server.
pub enum Conn {
    Pg(PgConnection),
    My(MySqlConnection),
}

/// What the baseline measured.
pub struct SqlFigures {
    pub db: Db,
    pub load_s: f64,
    pub insert_ms_p50: f64,
    pub read: Histogram<u64>,
    pub returning: Histogram<u64>,
    pub bytes_per_item: f64,
    /// (reads per write, ops/s, read p99 µs) of each read:write mix.
    pub mixes: Vec<(u32, f64, f64)>,
}

fn e(x: sqlx::Error) -> String {
    x.to_string()
}

impl Conn {
    pub async fn open(db: Db, url: &str) -> Result<Self, String> {
        Ok(match db {
            Db::Postgres => Conn::Pg(PgConnection::connect(url).await.map_err(e)?),
            Db::MariaDb => Conn::My(MySqlConnection::connect(url).await.map_err(e)?),
        })
    }

    pub async fn exec(&mut self, sql: &str) -> Result<(), String> {
        match self {
            Conn::Pg(c) => c.execute(sql).await.map(|_| ()).map_err(e),
            Conn::My(c) => c.execute(sql).await.map(|_| ()).map_err(e),
        }
    }

    /// Bulk-loads rows of integers: COPY on PostgreSQL, multi-row INSERTs on MariaDB.
    async fn load(&mut self, table: &str, cols: &str, rows: &[Vec<String>]) -> Result<(), String> {
        match self {
            Conn::Pg(c) => {
                let mut copy = c.copy_in_raw(&format!("COPY {table} ({cols}) FROM STDIN")).await.map_err(e)?;
                for chunk in rows.chunks(50_000) {
                    let mut buf = String::with_capacity(chunk.len() * 40);
                    for r in chunk {
                        buf.push_str(&r.join("\t"));
                        buf.push('\n');
                    }
                    copy.send(buf.into_bytes()).await.map_err(e)?;
                }
                copy.finish().await.map_err(e)?;
            }
            Conn::My(c) => {
                for chunk in rows.chunks(5_000) {
                    let values: Vec<String> = chunk.iter().map(|r| format!("({})", r.join(","))).collect();
                    c.execute(format!("INSERT INTO {table} ({cols}) VALUES {}", values.join(",")).as_str())
                        .await
                        .map_err(e)?;
                }
            }
        }
        Ok(())
    }

    /// The home page of the pull model; returns the number of rows.
    async fn home(&mut self, user: u64) -> Result<usize, String> {
        self.home_n(user, 50).await
    }

    pub async fn home_n(&mut self, user: u64, limit: u32) -> Result<usize, String> {
        let q = format!(
            "SELECT i.id FROM tw_follows f JOIN tw_items i ON i.poster_id = f.followee \
             WHERE f.follower = ? ORDER BY i.created_at DESC LIMIT {limit}"
        );
        Ok(match self {
            Conn::Pg(c) => {
                sqlx::query(&q.replace('?', "$1")).bind(user as i64).fetch_all(&mut *c).await.map_err(e)?.len()
            }
            Conn::My(c) => sqlx::query(&q).bind(user as i64).fetch_all(&mut *c).await.map_err(e)?.len(),
        })
    }

    async fn insert_item(&mut self, id: u64, poster: u64, ms: i64) -> Result<(), String> {
        match self {
            Conn::Pg(c) => {
                sqlx::query(
                    "INSERT INTO tw_items (id, poster_id, created_at) VALUES ($1, $2, to_timestamp($3::float8 / 1000))",
                )
                .bind(id as i64)
                .bind(poster as i64)
                .bind(ms)
                .execute(&mut *c)
                .await
                .map_err(e)?;
            }
            Conn::My(c) => {
                sqlx::query("INSERT INTO tw_items (id, poster_id, created_at) VALUES (?, ?, FROM_UNIXTIME(? / 1000))")
                    .bind(id as i64)
                    .bind(poster as i64)
                    .bind(ms)
                    .execute(&mut *c)
                    .await
                    .map_err(e)?;
            }
        }
        Ok(())
    }

    async fn size_bytes(&mut self) -> Result<f64, String> {
        Ok(match self {
            Conn::Pg(c) => {
                let (n,): (i64,) =
                    sqlx::query_as("SELECT pg_total_relation_size('tw_items')").fetch_one(&mut *c).await.map_err(e)?;
                n as f64
            }
            Conn::My(c) => {
                c.execute("ANALYZE TABLE tw_items").await.map_err(e)?;
                let (n,): (i64,) = sqlx::query_as(
                    "SELECT CAST(data_length + index_length AS SIGNED) FROM information_schema.tables \
                     WHERE table_schema = DATABASE() AND table_name = 'tw_items'",
                )
                .fetch_one(&mut *c)
                .await
                .map_err(e)?;
                n as f64
            }
        })
    }
}

/// Creates the pull model's tables on `c` and loads `follows` (with the
/// follows of `returning` readers) and `items` (id, poster, time in ms),
/// then its covering index; returns the seconds it took.
pub async fn load_model(
    c: &mut Conn,
    db: Db,
    follows: &[(u64, u64)],
    items: &[(u64, u64, i64)],
    returning: &[(u64, Vec<u64>)],
) -> Result<f64, String> {
    let ts = match db {
        Db::Postgres => "TIMESTAMPTZ",
        Db::MariaDb => "DATETIME(3)",
    };
    c.exec("DROP TABLE IF EXISTS tw_follows").await?;
    c.exec("DROP TABLE IF EXISTS tw_items").await?;
    c.exec("CREATE TABLE tw_follows (follower BIGINT NOT NULL, followee BIGINT NOT NULL, PRIMARY KEY (follower, followee))").await?;
    c.exec(&format!(
        "CREATE TABLE tw_items (id BIGINT PRIMARY KEY, poster_id BIGINT NOT NULL, created_at {ts} NOT NULL)"
    ))
    .await?;
    let t = Instant::now();
    let mut rows: Vec<Vec<String>> = follows.iter().map(|(a, b)| vec![a.to_string(), b.to_string()]).collect();
    for (r, targets) in returning {
        rows.extend(targets.iter().map(|t| vec![r.to_string(), t.to_string()]));
    }
    c.load("tw_follows", "follower, followee", &rows).await?;
    let item_rows: Vec<Vec<String>> = items
        .iter()
        .map(|(id, p, ms)| {
            let t = match db {
                Db::Postgres => tideway_core::Millis(*ms).to_rfc3339(),
                Db::MariaDb => {
                    format!("'{}'", tideway_core::Millis(*ms).to_rfc3339().replace('T', " ").trim_end_matches('Z'))
                }
            };
            vec![id.to_string(), p.to_string(), t]
        })
        .collect();
    c.load("tw_items", "id, poster_id, created_at", &item_rows).await?;
    match db {
        Db::Postgres => {
            c.exec("CREATE INDEX tw_items_poster ON tw_items (poster_id, created_at DESC) INCLUDE (id)").await?;
            c.exec("ANALYZE tw_follows").await?;
            c.exec("ANALYZE tw_items").await?;
        }
        Db::MariaDb => {
            c.exec("CREATE INDEX tw_items_poster ON tw_items (poster_id, created_at DESC, id)").await?;
            c.exec("ANALYZE TABLE tw_follows, tw_items").await?;
        }
    }
    let load_s = t.elapsed().as_secs_f64();
    eprintln!("{}: loaded {} follows and {} items in {load_s:.1} s", db.name(), rows.len(), items.len());
    Ok(load_s)
}

/// Loads the graph and the items, then measures inserts, home reads of
/// `readers`, and first pages of `returning` readers (who follow many).
pub async fn run(
    db: Db,
    url: &str,
    follows: &[(u64, u64)],
    items: &[(u64, u64, i64)],
    readers: &[u64],
    returning: &[(u64, Vec<u64>)],
    mix_spec: &[(u32, usize)],
) -> Result<SqlFigures, String> {
    let mut c = Conn::open(db, url).await?;
    let load_s = load_model(&mut c, db, follows, items, returning).await?;

    let mut read = crate::measure::hist()?;
    for &u in readers {
        let t = Instant::now();
        c.home(u).await?;
        read.record(t.elapsed().as_nanos() as u64).map_err(|x| x.to_string())?;
    }
    let mut ret = crate::measure::hist()?;
    for (r, _) in returning {
        let t = Instant::now();
        let n = c.home(*r).await?;
        ret.record(t.elapsed().as_nanos() as u64).map_err(|x| x.to_string())?;
        if n == 0 {
            return Err(format!("{}: returning reader {r} got an empty page", db.name()));
        }
    }
    let mut ins = crate::measure::hist()?;
    let base = items.iter().map(|i| i.0).max().unwrap_or(0) + 1;
    let ms = items.iter().map(|i| i.2).max().unwrap_or(0);
    for i in 0..500u64 {
        let t = Instant::now();
        c.insert_item(base + i, readers[i as usize % readers.len().max(1)], ms + 1).await?;
        ins.record(t.elapsed().as_nanos() as u64).map_err(|x| x.to_string())?;
    }
    let bytes_per_item = c.size_bytes().await? / (items.len() + 500) as f64;
    // Read:write mixes: reads are pages of 20, writes are inserts.
    let mut mixes = Vec::new();
    let mut next = base + 1000;
    for &(ratio, n) in mix_spec {
        let mut reads = crate::measure::hist()?;
        let t = Instant::now();
        for i in 0..n {
            let u = readers[i % readers.len()];
            if i % (ratio as usize + 1) == ratio as usize {
                c.insert_item(next, u, ms + 2).await?;
                next += 1;
            } else {
                let s = Instant::now();
                c.home_n(u, 20).await?;
                reads.record(s.elapsed().as_nanos() as u64).map_err(|x| x.to_string())?;
            }
        }
        mixes.push((ratio, n as f64 / t.elapsed().as_secs_f64(), reads.value_at_quantile(0.99) as f64 / 1000.0));
    }
    c.exec("DROP TABLE IF EXISTS tw_follows").await?;
    c.exec("DROP TABLE IF EXISTS tw_items").await?;
    Ok(SqlFigures {
        db,
        load_s,
        insert_ms_p50: ins.value_at_quantile(0.5) as f64 / 1e6,
        read,
        returning: ret,
        bytes_per_item,
        mixes,
    })
}
