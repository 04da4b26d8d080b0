//! Plain posts written together: creates that have nothing to resolve
//! first (no idempotency key, not a repost, live) queue up, and one writer
//! at a time takes everything queued (up to [`MAX_BATCH`]) and writes it at
//! once: on PostgreSQL one statement of one fixed text whatever the batch's
//! size (the rows go as one JSON text, read back by `json_to_recordset`),
//! on MySQL one transaction of a few statements sent as one text (the rows
//! as session variables read back by `JSON_TABLE`): one round trip either way.
//! What the statements write is `post_writes.rs`'s, as for a lone create.
//! A lone post is a batch of one; sixteen writers at once pay one round
//! trip, one statement's overhead and one commit for up to sixteen posts
//! instead of one each.
//!
//! A batch is atomic. When it fails (an id taken, an engine gone), no post
//! of it was written and each waiter writes its own post alone, as before
//! batching, and gets its own answer. A writer that panics answers its
//! waiters the same way (a drop guard), and the next post starts a new
//! writer. The writer is a task of its own, so a caller that goes away
//! (a closed connection) strands no other post.

use crate::Dialect;
use crate::post_writes::{self, MyRows, PostRow};
use crate::session::Fence;
use crate::tx::{classify, retry_transaction};
use parking_lot::Mutex;
use std::sync::Arc;
use tideway_core::{Item, Millis};
use tideway_store::Result;
use tokio::sync::oneshot;

/// The most posts one batch writes.
pub(crate) const MAX_BATCH: usize = 64;

/// The most bytes of records and bodies one batch takes (but always one
/// post): a batch's text on MySQL is about twice its rows' bytes (hex), and
/// has to fit `max_allowed_packet` (16 MiB by default on MariaDB, 64 on
/// MySQL 8.0, and set lower on some servers). A text that does not fit
/// fails its batch, and each post is then written alone.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// Whether `item` can go in a batch: nothing to read before it is written.
pub(crate) fn batchable(item: &Item) -> bool {
    item.idempotency_key.is_none() && item.repost_of.is_none() && !item.deleted
}

/// The queue of posts waiting for the writer, and whether a writer runs.
pub(crate) struct PostQueue {
    state: Mutex<Queue>,
    /// Batches written (tests read it).
    batches: std::sync::atomic::AtomicU64,
    pool: sqlx::AnyPool,
    dialect: Dialect,
    /// The store's (`session.rs`): raised by a refusal of a server that
    /// cannot take writes.
    fence: Arc<Fence>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    writing: bool,
}

struct Pending {
    /// What the post writes (`post_writes.rs`).
    row: PostRow,
    /// Answered `true` once the batch holding the post committed.
    done: oneshot::Sender<bool>,
}

impl PostQueue {
    pub(crate) fn new(pool: sqlx::AnyPool, dialect: Dialect, fence: Arc<Fence>) -> Arc<Self> {
        Arc::new(Self { state: Mutex::new(Queue::default()), batches: Default::default(), pool, dialect, fence })
    }

    /// Writes `item` in the next batch. `Ok(true)`: it is stored (with its
    /// job when `fan_out`); `Ok(false)`: its batch failed, nothing of it is
    /// stored, and the caller writes it alone.
    pub(crate) async fn write(self: &Arc<Self>, item: &Item, fan_out: bool, now: Millis) -> Result<bool> {
        let row = PostRow::new(item, fan_out, now)?;
        let (done, answer) = oneshot::channel();
        {
            let mut q = self.state.lock();
            q.pending.push(Pending { row, done });
            if !q.writing {
                q.writing = true;
                tokio::spawn(Arc::clone(self).run());
            }
        }
        // A writer gone without an answer (a panic, not expected) is taken
        // as a failed batch.
        Ok(answer.await.unwrap_or(false))
    }

    /// The writer: batch after batch until the queue is empty.
    async fn run(self: Arc<Self>) {
        let _guard = WriterGuard(Arc::clone(&self));
        loop {
            let batch: Vec<Pending> = {
                let mut q = self.state.lock();
                if q.pending.is_empty() {
                    q.writing = false;
                    break;
                }
                let mut bytes = 0;
                let n = q
                    .pending
                    .iter()
                    .take(MAX_BATCH)
                    .take_while(|p| {
                        bytes += p.row.bytes();
                        bytes <= MAX_BATCH_BYTES
                    })
                    .count()
                    .max(1);
                q.pending.drain(..n).collect()
            };
            let written = match self.write_batch(&batch).await {
                Ok(()) => {
                    self.batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    true
                }
                Err(e) => {
                    tracing::debug!(posts = batch.len(), error = %e, "a batch of posts failed; each is written alone");
                    false
                }
            };
            metrics::histogram!("tideway_sql_post_batch_size").record(batch.len() as f64);
            for p in batch {
                let _ = p.done.send(written);
            }
        }
    }

    /// Writes one batch, again while the engine rolls it back as retryable.
    async fn write_batch(&self, batch: &[Pending]) -> Result<()> {
        let rows: Vec<&PostRow> = batch.iter().map(|p| &p.row).collect();
        let full = post_writes::json(rows.iter().copied(), true)?;
        let err = |e| classify(self.dialect, &self.fence, e);
        match self.dialect {
            Dialect::Postgres => {
                retry_transaction(|| async {
                    sqlx::query(post_writes::pg_text()).bind(full.as_str()).execute(&self.pool).await.map_err(err)?;
                    Ok(())
                })
                .await
            }
            Dialect::MySql => {
                // The statements after the items' read no record or body.
                let bare = post_writes::json(rows.iter().copied(), false)?;
                let steps = post_writes::my_steps(&rows, MyRows::Variables);
                let text = my_batch_text(&full, &bare, &steps);
                retry_transaction(|| my_run_batch(&self.pool, &text, self.dialect, &self.fence)).await
            }
        }
    }
}

/// Runs a batch's text on one connection of `pool`. The statements stop at
/// the first that fails, inside the transaction: it then ends on that
/// connection before the pool hands it out again, or the connection closes.
async fn my_run_batch(pool: &sqlx::AnyPool, text: &str, dialect: Dialect, fence: &Fence) -> Result<()> {
    let mut conn = pool.acquire().await.map_err(|e| classify(dialect, fence, e))?;
    let failed = match sqlx::Executor::execute(&mut *conn, sqlx::raw_sql(text)).await {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    if sqlx::Executor::execute(&mut *conn, sqlx::raw_sql(MY_ABORT)).await.is_err() {
        conn.close_on_drop();
    }
    Err(classify(dialect, fence, failed))
}

/// A batch on MySQL as one text, so one round trip: the rows set once as
/// two session variables, the transaction, then the variables cleared. The
/// rows go as hex literals read as UTF-8, which no SQL mode reads
/// differently (a quoted literal's escapes depend on `NO_BACKSLASH_ESCAPES`).
fn my_batch_text(full: &str, bare: &str, steps: &[(&str, bool)]) -> String {
    let mut text =
        String::with_capacity(2 * (full.len() + bare.len()) + steps.iter().map(|s| s.0.len() + 2).sum::<usize>() + 160);
    text.push_str("SET @tw_full = CONVERT(X'");
    push_hex(&mut text, full.as_bytes());
    text.push_str("' USING utf8mb4), @tw_bare = CONVERT(X'");
    push_hex(&mut text, bare.as_bytes());
    text.push_str("' USING utf8mb4); START TRANSACTION; ");
    for (step, _) in steps {
        text.push_str(step);
        text.push_str("; ");
    }
    text.push_str("COMMIT; SET @tw_full = NULL, @tw_bare = NULL");
    text
}

/// Ends a batch whose text failed midway.
const MY_ABORT: &str = "ROLLBACK; SET @tw_full = NULL, @tw_bare = NULL";

fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
}

/// Answers the waiters of a writer that panicked (they write alone) and
/// lets the next post start a writer. A writer that ends normally has
/// already let go (under the lock), and a new one may run: it is left be.
struct WriterGuard(Arc<PostQueue>);

impl Drop for WriterGuard {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut q = self.0.state.lock();
        q.writing = false;
        for p in q.pending.drain(..) {
            let _ = p.done.send(false);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Posts at once go in few batches, on each engine.

    use crate::SqlStore;
    use crate::testing::FreshDatabase;
    use std::sync::atomic::Ordering;
    use tideway_core::{Item, ItemId, ItemKind, Millis, UserId};
    use tideway_store::{CreateOutcome, Graph, Items};

    /// A store on a fresh database of the engine named by `var`.
    async fn fresh(var: &str) -> (FreshDatabase, SqlStore) {
        let db = FreshDatabase::from_env(var).await;
        let store = SqlStore::connect(&db.url).await.expect("connect");
        (db, store)
    }

    /// A post by `author` whose body's `text` is `text`.
    fn post(id: u64, author: u64, text: &str) -> Item {
        let mut item = Item::new(ItemId(id), UserId(author), ItemKind::Post);
        let mut body = serde_json::Map::new();
        body.insert("text".into(), serde_json::Value::String(text.to_owned()));
        item.body = tideway_core::Body::new(&body);
        item
    }

    async fn batched(var: &str) {
        let (db, store) = fresh(var).await;
        let creates = (1..=32u64).map(|n| {
            store.create_item(Item::new(ItemId(n), UserId(1 + n % 2), ItemKind::Post), true, Millis(n as i64))
        });
        for o in futures_util::future::join_all(creates).await {
            assert!(matches!(o.expect("create"), CreateOutcome::Created(_)));
        }
        let batches = store.posts.batches.load(Ordering::Relaxed);
        assert!((1..32).contains(&batches), "32 posts at once went in {batches} batches");
        assert_eq!(store.counts(UserId(1)).await.expect("counts").items, 16);
        assert_eq!(store.counts(UserId(2)).await.expect("counts").items, 16);
        assert_eq!(tideway_store::Jobs::pending_jobs(&store, 100).await.expect("jobs").len(), 32);
        store.close().await;
        db.drop().await.expect("drop the database");
    }

    /// A batch with an id already taken fails whole: nothing of it stays
    /// (its authors' counts, its jobs), each post is written alone, the
    /// taken one is refused, and the connections go on serving. Bodies with
    /// quotes, backslashes and text beyond ASCII come back as written.
    async fn failed_batch(var: &str) {
        let (db, store) = fresh(var).await;
        let taken = Item::new(ItemId(7), UserId(9), ItemKind::Post);
        assert!(matches!(store.create_item(taken, true, Millis(1)).await, Ok(CreateOutcome::Created(_))));
        let body = "it's a \"quote\", a back\\slash \\' and 雨 ☂ \u{1F327}";
        for round in 0..3u64 {
            let creates = (1..=16u64).map(|n| {
                let id = if n == 8 && round == 0 { 7 } else { 100 * (round + 1) + n };
                store.create_item(post(id, 1, body), true, Millis(10 + n as i64))
            });
            let outcomes = futures_util::future::join_all(creates).await;
            let created = outcomes.iter().filter(|o| matches!(o, Ok(CreateOutcome::Created(_)))).count();
            assert_eq!(created, if round == 0 { 15 } else { 16 }, "round {round}: {outcomes:?}");
            // (A current-thread runtime: the writer starts once all 16 wait.)
            let batches = store.posts.batches.load(Ordering::Relaxed);
            // (The taken post went in a batch of one.)
            assert_eq!(batches, 1 + round, "round {round}: the first batch failed, the others were written whole");
        }
        assert_eq!(store.counts(UserId(1)).await.expect("counts").items, 47);
        assert_eq!(store.counts(UserId(9)).await.expect("counts").items, 1);
        assert_eq!(tideway_store::Jobs::pending_jobs(&store, 100).await.expect("jobs").len(), 48);
        let got = store.bodies(&[ItemId(101), ItemId(316)]).await.expect("bodies");
        assert_eq!(got.len(), 2);
        for b in got {
            assert_eq!(b.expect("stored").to_map().get("text"), Some(&serde_json::Value::String(body.to_owned())));
        }
        store.close().await;
        db.drop().await.expect("drop the database");
    }

    /// Large posts go in batches of at most [`super::MAX_BATCH_BYTES`].
    async fn large(var: &str) {
        let (db, store) = fresh(var).await;
        let text = "x".repeat(40 << 10);
        let creates = (1..=32u64).map(|n| store.create_item(post(n, 1, &text), true, Millis(n as i64)));
        for o in futures_util::future::join_all(creates).await {
            assert!(matches!(o.expect("create"), CreateOutcome::Created(_)));
        }
        // 32 posts of 40 KiB: 1.3 MiB, two batches at least (one by count).
        let batches = store.posts.batches.load(Ordering::Relaxed);
        assert!((2..32).contains(&batches), "32 posts of 40 KiB went in {batches} batches");
        assert_eq!(store.counts(UserId(1)).await.expect("counts").items, 32);
        store.close().await;
        db.drop().await.expect("drop the database");
    }

    /// The engine's answer lost after it acted, on the link of a batch (it
    /// committed) and of a lone create (it had not): every create is stored
    /// exactly once, under the id it was given, and answered `Created`.
    async fn lost_answers(var: &str) {
        use crate::fault_link::FaultLink;
        let db = FreshDatabase::from_env(var).await;
        let link = FaultLink::start(FaultLink::target_of(&db.url).expect("an engine address")).await.expect("proxy");
        let store = SqlStore::connect(&link.url_through(&db.url)).await.expect("connect through the proxy");
        const MARK: &str = "lose-this-answer";
        let hex: String = MARK.bytes().map(|b| format!("{b:02x}")).collect();
        // A batch of eight, one carrying the mark: the batch commits and its
        // answer is lost; each post then meets its own row.
        link.lose_answers_to(&[MARK.as_bytes(), hex.as_bytes()], 1);
        let creates = (1..=8u64).map(|n| {
            let text = if n == 5 { MARK } else { "plain" };
            store.create_item(post(n, 1, text), true, Millis(n as i64))
        });
        for (n, o) in futures_util::future::join_all(creates).await.into_iter().enumerate() {
            match o.expect("create") {
                CreateOutcome::Created(item) => assert_eq!(item.id, ItemId(n as u64 + 1)),
                other => panic!("post {}: {other:?}", n + 1),
            }
        }
        assert_eq!(link.answers_lost(), 1, "the batch's answer was lost");
        // A lone create (an idempotency key: read, then written in one
        // transaction) whose insert's answer is lost: nothing committed,
        // written again under the same id.
        link.lose_answers_to(&[MARK.as_bytes()], 1);
        let mut keyed = post(9, 1, MARK);
        keyed.idempotency_key = Some("k-9".into());
        match store.create_item(keyed, true, Millis(9)).await.expect("create") {
            CreateOutcome::Created(item) => assert_eq!(item.id, ItemId(9)),
            other => panic!("{other:?}"),
        }
        assert_eq!(link.answers_lost(), 2, "the lone insert's answer was lost");
        let rows = crate::rows::int(
            &store.fetch("SELECT COUNT(*) FROM tw_items WHERE author = ?", &[1]).await.expect("count")[0],
            0,
        )
        .expect("a count");
        assert_eq!(rows, 9, "each post stored once");
        assert_eq!(store.counts(UserId(1)).await.expect("counts").items, 9);
        assert_eq!(tideway_store::Jobs::pending_jobs(&store, 100).await.expect("jobs").len(), 9);
        store.close().await;
        drop(link);
        db.drop().await.expect("drop the database");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_a_lost_commit_answer_stores_nothing_twice() {
        lost_answers("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_a_lost_commit_answer_stores_nothing_twice() {
        lost_answers("TIDEWAY_TEST_MYSQL_URL").await;
    }

    #[tokio::test]
    async fn postgres_large_posts_go_in_smaller_batches() {
        large("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test]
    async fn mysql_large_posts_go_in_smaller_batches() {
        large("TIDEWAY_TEST_MYSQL_URL").await;
    }

    #[tokio::test]
    async fn postgres_failed_batches_leave_nothing() {
        failed_batch("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test]
    async fn mysql_failed_batches_leave_nothing() {
        failed_batch("TIDEWAY_TEST_MYSQL_URL").await;
    }

    #[tokio::test]
    async fn postgres_posts_at_once_go_in_batches() {
        batched("TIDEWAY_TEST_POSTGRES_URL").await;
    }

    #[tokio::test]
    async fn mysql_posts_at_once_go_in_batches() {
        batched("TIDEWAY_TEST_MYSQL_URL").await;
    }
}
