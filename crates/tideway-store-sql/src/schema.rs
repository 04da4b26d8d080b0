//! The schema, as numbered migrations applied in order at start (under a
//! database-wide lock, so nodes starting together apply each once). One text
//! serves PostgreSQL and MySQL/MariaDB: `{text}` and `{table}` are replaced
//! by each dialect's long-text type and table options.
//!
//! The follow graph is stored both ways, as the seeds do: `tw_follows` by
//! follower (whom does Y follow: one range) and `tw_followers` by followee
//! and time of follow (followers of X: one range, in the order fan-out walks
//! them).

use crate::Dialect;
use sqlx::Row;

/// Migrations: version, statements.
pub const MIGRATIONS: &[(i64, &[&str])] = &[
    (
        1,
        &[
            "CREATE TABLE tw_users (id BIGINT NOT NULL PRIMARY KEY){table}",
            "CREATE TABLE tw_items (
            id BIGINT NOT NULL PRIMARY KEY,
            author BIGINT NOT NULL,
            live SMALLINT NOT NULL,
            repost_of BIGINT NULL,
            reply_to BIGINT NULL,
            idem VARCHAR(255) NULL,
            record {text} NOT NULL,
            body {text} NOT NULL
        ){table}",
            "CREATE INDEX tw_items_outbox ON tw_items (author, id)",
            "CREATE UNIQUE INDEX tw_items_idem ON tw_items (author, idem)",
            "CREATE INDEX tw_items_reposts ON tw_items (repost_of, author)",
            "CREATE INDEX tw_items_replies ON tw_items (reply_to)",
            "CREATE TABLE tw_inserts (
            k BIGINT NOT NULL PRIMARY KEY,
            user_id BIGINT NOT NULL,
            item BIGINT NOT NULL
        ){table}",
            "CREATE INDEX tw_inserts_user ON tw_inserts (user_id, k)",
            "CREATE INDEX tw_inserts_item ON tw_inserts (user_id, item, k)",
            "CREATE TABLE tw_follows (
            follower BIGINT NOT NULL,
            followee BIGINT NOT NULL,
            since BIGINT NOT NULL,
            PRIMARY KEY (follower, followee)
        ){table}",
            "CREATE INDEX tw_follows_time ON tw_follows (follower, since, followee)",
            "CREATE TABLE tw_followers (
            followee BIGINT NOT NULL,
            since BIGINT NOT NULL,
            follower BIGINT NOT NULL,
            PRIMARY KEY (followee, since, follower)
        ){table}",
            "CREATE TABLE tw_blocks (
            user_id BIGINT NOT NULL,
            target BIGINT NOT NULL,
            since BIGINT NOT NULL,
            PRIMARY KEY (user_id, target)
        ){table}",
            "CREATE INDEX tw_blocks_target ON tw_blocks (target, user_id)",
            "CREATE TABLE tw_mutes (
            user_id BIGINT NOT NULL,
            target BIGINT NOT NULL,
            since BIGINT NOT NULL,
            PRIMARY KEY (user_id, target)
        ){table}",
            "CREATE TABLE tw_jobs (
            k BIGINT NOT NULL PRIMARY KEY,
            author BIGINT NOT NULL,
            cur_since BIGINT NULL,
            cur_user BIGINT NULL,
            created BIGINT NOT NULL,
            holder BIGINT NULL,
            lease_until BIGINT NULL
        ){table}",
            "CREATE TABLE tw_reactions (
            item BIGINT NOT NULL,
            user_id BIGINT NOT NULL,
            kind VARCHAR(64) NOT NULL,
            PRIMARY KEY (item, user_id, kind)
        ){table}",
            "CREATE INDEX tw_reactions_user ON tw_reactions (user_id, item)",
            "CREATE TABLE tw_promotions (
            id BIGINT NOT NULL PRIMARY KEY,
            item BIGINT NOT NULL,
            every BIGINT NOT NULL,
            starts_at BIGINT NOT NULL,
            ends_at BIGINT NOT NULL
        ){table}",
        ],
    ),
    (
        2,
        &[
            // Per-user counters kept by the writes (a hot-author check on every
            // post must not count a celebrity's million followers).
            "ALTER TABLE tw_users ADD COLUMN following BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE tw_users ADD COLUMN followers BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE tw_users ADD COLUMN items BIGINT NOT NULL DEFAULT 0",
            "UPDATE tw_users SET
            following = (SELECT COUNT(*) FROM tw_follows f WHERE f.follower = tw_users.id),
            followers = (SELECT COUNT(*) FROM tw_followers f WHERE f.followee = tw_users.id),
            items = (SELECT COUNT(*) FROM tw_items i WHERE i.author = tw_users.id AND i.live = 1)",
        ],
    ),
    (
        3,
        &[
            // One live repost of an item per user, whichever node stores it
            // (two nodes racing each see none and insert): a unique index on
            // live reposts only — partial on PostgreSQL, over a generated
            // column on MySQL.
            "pg: CREATE UNIQUE INDEX tw_items_live_repost ON tw_items (author, repost_of) \
             WHERE live = 1 AND repost_of IS NOT NULL",
            "mysql: ALTER TABLE tw_items ADD COLUMN live_repost BIGINT AS (CASE WHEN live = 1 THEN repost_of END) STORED",
            "mysql: CREATE UNIQUE INDEX tw_items_live_repost ON tw_items (author, live_repost)",
        ],
    ),
    (
        4,
        &[
            // The graph partitioned by user id, both ways: whom Y follows by
            // follower, the followers of X by followee; each query reads one
            // partition. 16 hash partitions (PostgreSQL's declarative hash
            // partitioning, MySQL's PARTITION BY KEY); PostgreSQL needs the
            // tables rebuilt, so the rows move into the new ones.
            "pg: ALTER TABLE tw_follows RENAME TO tw_follows_v3",
            "pg: ALTER TABLE tw_follows_v3 RENAME CONSTRAINT tw_follows_pkey TO tw_follows_v3_pkey",
            "pg: ALTER INDEX tw_follows_time RENAME TO tw_follows_v3_time",
            "pg: CREATE TABLE tw_follows (
                follower BIGINT NOT NULL,
                followee BIGINT NOT NULL,
                since BIGINT NOT NULL,
                PRIMARY KEY (follower, followee)
            ) PARTITION BY HASH (follower)",
            "pg: DO $$ BEGIN FOR i IN 0..15 LOOP EXECUTE format(
                'CREATE TABLE tw_follows_p%s PARTITION OF tw_follows FOR VALUES WITH (MODULUS 16, REMAINDER %s)', i, i);
             END LOOP; END $$",
            "pg: CREATE INDEX tw_follows_time ON tw_follows (follower, since, followee)",
            "pg: INSERT INTO tw_follows (follower, followee, since) SELECT follower, followee, since FROM tw_follows_v3",
            "pg: DROP TABLE tw_follows_v3",
            "pg: ALTER TABLE tw_followers RENAME TO tw_followers_v3",
            "pg: ALTER TABLE tw_followers_v3 RENAME CONSTRAINT tw_followers_pkey TO tw_followers_v3_pkey",
            "pg: CREATE TABLE tw_followers (
                followee BIGINT NOT NULL,
                since BIGINT NOT NULL,
                follower BIGINT NOT NULL,
                PRIMARY KEY (followee, since, follower)
            ) PARTITION BY HASH (followee)",
            "pg: DO $$ BEGIN FOR i IN 0..15 LOOP EXECUTE format(
                'CREATE TABLE tw_followers_p%s PARTITION OF tw_followers FOR VALUES WITH (MODULUS 16, REMAINDER %s)', i, i);
             END LOOP; END $$",
            "pg: INSERT INTO tw_followers (followee, since, follower) SELECT followee, since, follower FROM tw_followers_v3",
            "pg: DROP TABLE tw_followers_v3",
            "mysql: ALTER TABLE tw_follows PARTITION BY KEY (follower) PARTITIONS 16",
            "mysql: ALTER TABLE tw_followers PARTITION BY KEY (followee) PARTITIONS 16",
        ],
    ),
    (
        5,
        &[
            // An item's counts kept by the writes, one row per count: `r`
            // live replies, `p` live reposts, `k:<kind>` reactions of a kind.
            // A page reads its items' counts by key instead of counting rows
            // (a viral item's million reactions once per page view).
            "CREATE TABLE tw_item_counts (
            item BIGINT NOT NULL,
            what VARCHAR(80) NOT NULL,
            n BIGINT NOT NULL,
            PRIMARY KEY (item, what)
        ){table}",
            "INSERT INTO tw_item_counts (item, what, n)
            SELECT reply_to, 'r', COUNT(*) FROM tw_items WHERE reply_to IS NOT NULL AND live = 1 GROUP BY reply_to",
            "INSERT INTO tw_item_counts (item, what, n)
            SELECT repost_of, 'p', COUNT(*) FROM tw_items WHERE repost_of IS NOT NULL AND live = 1 GROUP BY repost_of",
            "INSERT INTO tw_item_counts (item, what, n)
            SELECT item, CONCAT('k:', kind), COUNT(*) FROM tw_reactions GROUP BY item, kind",
        ],
    ),
    (
        6,
        &[
            // "Does X follow Y" for many X at once (a page's relations): the
            // followers of Y by follower id, not by follow time, so the check
            // is one probe per X, not a scan of all of Y's followers (a
            // celebrity reading their home scanned a million rows a page).
            "CREATE INDEX tw_followers_pair ON tw_followers (followee, follower)",
        ],
    ),
    (
        7,
        &[
            // The mention, tag and object feeds: an item's postings by feed id
            // (`PostingFeed::id`), written in the item's own transaction; a
            // page is one range of the primary key. Items stored before are
            // posted by `backfill_postings` (their tags and mentions are inside
            // the record).
            "CREATE TABLE IF NOT EXISTS tw_postings (
            feed BIGINT NOT NULL,
            item BIGINT NOT NULL,
            PRIMARY KEY (feed, item)
        ){table}",
        ],
    ),
    (
        8,
        &[
            // Notifications (`notifications.rs`). Per user: the marks and the
            // counts of shown groups above them (`tw_notify_users`, locked by
            // every write of the user's notifications, so a page reads its
            // counts from one row); groups, whose key `vkey` is the JSON of
            // their verb, with the figures a page shows kept by the writes
            // (`cnt` visible events, `latest_at` the newest one's time, NULL
            // when none: not shown); events by (verb, actor), one standing
            // each. The indexes: a page is one range of `_order`; the newest
            // group of a key one probe of `_key`; a deleted item's groups one
            // range of `_about`; a group's newest visible events (its 5 actors,
            // its new `latest_at`) one range of `_group`; a hidden actor's
            // events one range of `_actor`. Nothing to backfill: events stored
            // before did not notify.
            "CREATE TABLE tw_notify_users (
            usr BIGINT NOT NULL PRIMARY KEY,
            seen BIGINT NOT NULL,
            rd BIGINT NOT NULL,
            unseen BIGINT NOT NULL,
            unread BIGINT NOT NULL
        ){table}",
            "CREATE TABLE tw_notify_groups (
            usr BIGINT NOT NULL,
            id BIGINT NOT NULL,
            vkey VARCHAR(255) NOT NULL,
            about BIGINT NULL,
            last_at BIGINT NOT NULL,
            latest_at BIGINT NULL,
            cnt BIGINT NOT NULL,
            PRIMARY KEY (usr, id)
        ){table}",
            "CREATE INDEX tw_notify_groups_order ON tw_notify_groups (usr, latest_at, id)",
            "CREATE INDEX tw_notify_groups_key ON tw_notify_groups (usr, vkey, id)",
            "CREATE INDEX tw_notify_groups_about ON tw_notify_groups (usr, about)",
            "CREATE TABLE tw_notify_events (
            usr BIGINT NOT NULL,
            vkey VARCHAR(255) NOT NULL,
            actor BIGINT NOT NULL,
            grp BIGINT NOT NULL,
            at BIGINT NOT NULL,
            hidden SMALLINT NOT NULL,
            PRIMARY KEY (usr, vkey, actor)
        ){table}",
            "CREATE INDEX tw_notify_events_group ON tw_notify_events (usr, grp, hidden, at, actor)",
            "CREATE INDEX tw_notify_events_actor ON tw_notify_events (usr, actor)",
        ],
    ),
    (
        9,
        &[
            // Live sessions (`live.rs`): each whole as JSON, with its anchor
            // and its end (0 while upcoming or live) as columns, so a viewer's
            // open sessions are one range of `_anchor` per anchor and the
            // ended ones one ordered range; an anchor's row counts its open
            // sessions and is locked by each of its creates and steps (the
            // limit holds under racing nodes). Nothing to backfill.
            "CREATE TABLE tw_live (
            id BIGINT NOT NULL PRIMARY KEY,
            anchor BIGINT NOT NULL,
            ended_at BIGINT NOT NULL,
            session {text} NOT NULL
        ){table}",
            "CREATE INDEX tw_live_anchor ON tw_live (anchor, ended_at, id)",
            "CREATE TABLE tw_live_anchors (
            anchor BIGINT NOT NULL PRIMARY KEY,
            opened BIGINT NOT NULL
        ){table}",
        ],
    ),
    (
        10,
        &[
            // Node ids claimed by running nodes (`jobs.rs`): the holding
            // instance (NULL once released), the start epoch of its claim
            // (its worker id's low bits), its last heartbeat by the
            // database's clock, and a beat counter (so every heartbeat
            // changes the row: MySQL counts changed rows only).
            "CREATE TABLE tw_nodes (
            node BIGINT NOT NULL PRIMARY KEY,
            instance BIGINT,
            epoch BIGINT NOT NULL,
            beat BIGINT NOT NULL,
            beats BIGINT NOT NULL
        ){table}",
        ],
    ),
    (
        11,
        &[
            // How many times an item was changed (its record's `rev`, moved
            // by every patch and delete): nodes keep copies of item records
            // and check them against this column in the page's statement
            // (`pages.rs`). 0 for every existing item, as in its record.
            "ALTER TABLE tw_items ADD COLUMN rev BIGINT NOT NULL DEFAULT 0",
        ],
    ),
    (
        12,
        &[
            // The version of a user's followee set, moved by every change
            // of it (with the `following` counter, in the same statement):
            // nodes keep copies of followee lists and check them in the
            // page's statement (`pages.rs`).
            "ALTER TABLE tw_users ADD COLUMN grev BIGINT NOT NULL DEFAULT 0",
        ],
    ),
    (
        13,
        &[
            // The item epoch: one count of every patch and delete, moved in
            // the change's own transaction (`items.rs`). A node's copies of
            // item records found current at an epoch are current while it
            // stands, so a page checks them one row, not one row each
            // (`pages.rs`). It starts at 1: 0 is no epoch seen.
            "CREATE TABLE tw_epoch (
            id INT NOT NULL PRIMARY KEY,
            n BIGINT NOT NULL
        ){table}",
            "INSERT INTO tw_epoch (id, n) VALUES (1, 1)",
        ],
    ),
    (
        14,
        &[
            // No new column: `grev` now versions a user's own relations too
            // (blocks both ways, mutes, whether anything was inserted into
            // their home), which nodes keep beside their followee lists
            // (`graph.rs`). Mutes and insertions move it from this schema
            // on; a node of an earlier build, whose mutes and insertions do
            // not, refuses to start on it. The statement is a no-op that
            // marks the step.
            "UPDATE tw_epoch SET n = n WHERE id = 1",
        ],
    ),
    (
        15,
        &[
            // The promotions' version: moved by every promotion stored, in
            // its own transaction (`reactions.rs`; promotions are never
            // changed or removed). A node keeps a copy of the promotions
            // not yet ended and checks it by this version in the page's
            // statement, which then reads no promotion (`pages.rs`).
            "ALTER TABLE tw_epoch ADD COLUMN pv BIGINT NOT NULL DEFAULT 0",
        ],
    ),
    (
        16,
        &[
            // No new column: nodes keep copies of what a page's statement
            // read (counts, marks, followee-set versions, the item epoch,
            // the promotions), checked by tokens in Redis that every write
            // changing them moves (`tideway_store::facts`). A node of an
            // earlier build writes without moving them, so it refuses to
            // start on this schema. The statement is a no-op that marks
            // the step.
            "UPDATE tw_epoch SET n = n WHERE id = 1",
        ],
    ),
    (
        17,
        &[
            // Whether nodes may trust the shared half (`tideway_store::trust`):
            // one row, changed only by `SharedTrust::apply`'s rule
            // (`jobs.rs`): the generation moved each time it stops being
            // trusted, the writes that went on without it, whether it is
            // trusted, since when not, and until when a miss holds it so.
            "CREATE TABLE tw_trust (
            id BIGINT NOT NULL PRIMARY KEY,
            gen BIGINT NOT NULL,
            missed BIGINT NOT NULL,
            trusted SMALLINT NOT NULL,
            since BIGINT NOT NULL,
            hold_until BIGINT NOT NULL
        ){table}",
            "INSERT INTO tw_trust (id, gen, missed, trusted, since, hold_until) VALUES (1, 0, 0, 1, 0, 0)",
        ],
    ),
    (
        18,
        &[
            // Notifications locked per group key, not per user
            // (`notifications.rs`). `tw_notify_locks`: a row per (user,
            // class, name) that writers lock — a group key's (its verb's
            // JSON: the events and groups of that key), an actor's (whether
            // their events are hidden). `tw_notify_moves`: a row per change
            // of a group's `latest_at` (`old_at` → `new_at`, NULL: not shown),
            // inserted by the write that made it, folded into the user's
            // row's counts (and deleted) under that row's lock by marks and
            // folds; a page adds the moves not yet folded. The user's row is
            // no longer written by events, so its counts as they stand are
            // exact with no move. A node of an earlier build writes the
            // counts under the user's row: the deployment is stopped (or
            // its nodes restarted together) to take this step.
            "CREATE TABLE IF NOT EXISTS tw_notify_locks (
            usr BIGINT NOT NULL,
            cls SMALLINT NOT NULL,
            lk VARCHAR(255) NOT NULL,
            PRIMARY KEY (usr, cls, lk)
        ){table}",
            "pg: CREATE TABLE IF NOT EXISTS tw_notify_moves (
            usr BIGINT NOT NULL,
            seq BIGINT GENERATED BY DEFAULT AS IDENTITY,
            old_at BIGINT NULL,
            new_at BIGINT NULL,
            PRIMARY KEY (usr, seq)
        )",
            "mysql: CREATE TABLE IF NOT EXISTS tw_notify_moves (
            usr BIGINT NOT NULL,
            seq BIGINT NOT NULL AUTO_INCREMENT,
            old_at BIGINT NULL,
            new_at BIGINT NULL,
            PRIMARY KEY (usr, seq),
            KEY tw_notify_moves_seq (seq)
        ){table}",
        ],
    ),
];

/// The migration after whose statements the stored items are posted.
const POSTINGS: i64 = 7;

/// Posts every stored item to its feeds, a thousand items a statement
/// (idempotent: a migration cut midway is run again whole).
async fn backfill_postings(conn: &mut sqlx::AnyConnection, dialect: Dialect) -> std::result::Result<u64, String> {
    let mut after = 0i64;
    let mut n = 0u64;
    loop {
        let rows =
            sqlx::query(&dialect.placeholders("SELECT id, record FROM tw_items WHERE id > ? ORDER BY id LIMIT 1000"))
                .bind(after)
                .fetch_all(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
        let Some(last) = rows.last() else { return Ok(n) };
        after = crate::rows::int(last, 0).map_err(|e| e.to_string())?;
        let mut pairs: Vec<i64> = Vec::new();
        for row in &rows {
            let record = crate::rows::text(row, 1).map_err(|e| e.to_string())?;
            let item = crate::rows::item_of(&record, None).map_err(|e| e.to_string())?;
            for feed in tideway_store::rules::postings(&item) {
                pairs.extend([feed as i64, item.id.0 as i64]);
            }
        }
        n += rows.len() as u64;
        if pairs.is_empty() {
            continue;
        }
        let values = vec!["(?, ?)"; pairs.len() / 2].join(", ");
        let sql = match dialect {
            Dialect::Postgres => format!("INSERT INTO tw_postings (feed, item) VALUES {values} ON CONFLICT DO NOTHING"),
            Dialect::MySql => format!("INSERT IGNORE INTO tw_postings (feed, item) VALUES {values}"),
        };
        let sql = dialect.placeholders(&sql);
        let mut q = sqlx::query(&sql);
        for v in pairs {
            q = q.bind(v);
        }
        q.execute(&mut *conn).await.map_err(|e| e.to_string())?;
    }
}

/// The newest schema version this build knows.
pub fn current() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// A statement in `d`'s dialect; `None` when it is for the other one
/// (statements starting `pg: ` or `mysql: ` run on that dialect only).
pub fn render(stmt: &str, d: Dialect) -> Option<String> {
    let stmt = match (stmt.strip_prefix("pg: "), stmt.strip_prefix("mysql: "), d) {
        (Some(s), _, Dialect::Postgres) | (_, Some(s), Dialect::MySql) => s,
        (Some(_), _, _) | (_, Some(_), _) => return None,
        _ => stmt,
    };
    let (text, table) = match d {
        Dialect::Postgres => ("TEXT", ""),
        Dialect::MySql => ("LONGTEXT", " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"),
    };
    Some(stmt.replace("{text}", text).replace("{table}", table))
}

/// Applies the migrations this database lacks, under a database-wide lock
/// (nodes starting together apply each once); refuses a newer schema.
pub(crate) async fn migrate(pool: &sqlx::AnyPool, dialect: Dialect) -> std::result::Result<(), String> {
    let mut conn = pool.acquire().await.map_err(|e| e.to_string())?;
    // Without the sessions' bounds (an index on a large table takes long,
    // and a node waits here for another's migrations); the session is
    // closed after, so that no other work runs unbounded on it.
    crate::session::unbound(&mut conn, dialect).await.map_err(|e| e.to_string())?;
    let lock = match dialect {
        Dialect::Postgres => "SELECT pg_advisory_lock(74110)",
        Dialect::MySql => "SELECT GET_LOCK('tideway_migrate', 60)",
    };
    sqlx::query(lock).execute(&mut *conn).await.map_err(|e| e.to_string())?;
    let result = async {
        sqlx::query("CREATE TABLE IF NOT EXISTS tw_schema (version BIGINT NOT NULL)")
            .execute(&mut *conn)
            .await
            .map_err(|e| e.to_string())?;
        let row =
            sqlx::query("SELECT MAX(version) FROM tw_schema").fetch_one(&mut *conn).await.map_err(|e| e.to_string())?;
        let have: Option<i64> = row.try_get(0).map_err(|e| e.to_string())?;
        let have = have.unwrap_or(0);
        if have > current() {
            return Err(format!(
                "the database has schema version {have}, newer than this build's {}: upgrade tideway",
                current()
            ));
        }
        for (version, stmts) in MIGRATIONS.iter().filter(|(v, _)| *v > have) {
            tracing::info!(version, dialect = dialect.engine().name(), "applying a schema migration");
            for s in stmts.iter().filter_map(|s| render(s, dialect)) {
                sqlx::query(&s).execute(&mut *conn).await.map_err(|e| format!("migration {version}: {e}"))?;
            }
            if *version == POSTINGS {
                let n = backfill_postings(&mut conn, dialect).await.map_err(|e| format!("migration {version}: {e}"))?;
                tracing::info!(items = n, "the stored items are posted to their feeds");
            }
            sqlx::query(&dialect.placeholders("INSERT INTO tw_schema (version) VALUES (?)"))
                .bind(*version)
                .execute(&mut *conn)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
    .await;
    let unlock = match dialect {
        Dialect::Postgres => "SELECT pg_advisory_unlock(74110)",
        Dialect::MySql => "SELECT RELEASE_LOCK('tideway_migrate')",
    };
    let _ = sqlx::query(unlock).execute(&mut *conn).await;
    let _ = sqlx::Connection::close(conn.detach()).await;
    result
}
