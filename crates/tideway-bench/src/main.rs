//! `tideway-bench`: the first benchmark of tideway, a command (not a test).
//!
//! 1. loads the real Twitter follow graph (`../shared/data/twitter-follow.txt.gz`,
//!    81k users, 1.77M follows) through batch follows;
//! 2. makes every user an active reader (each gets an inbox);
//! 3. posts items whose authors are drawn in proportion to their follower counts
//!    (fixed seed), then drains fan-out on one thread: deliveries per second;
//! 4. reads home first pages in-process and over HTTP: latency p50/p99;
//! 5. reports memory per inbox entry;
//! 6. in the same run, replays the same deliveries against the seeds' Redis push
//!    design (`ZADD timeline:<u>` + `ZREMRANGEBYRANK` to 800, pipelined) on the local
//!    Redis, and prints every figure with its ratio.
//!
//! Output is a Markdown table on stdout; progress goes to stderr.
//!
//! Each phase is a function in `phases/`, named for what it measures; they
//! share a [`context::Bench`] (arguments, service, backend, report rows) and
//! `main` runs them in this order.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command whose output is its report

mod context;
mod phases;
mod report;

use tideway_bench::{measure, sql, workload};

use clap::Parser;
use context::Bench;
use phases::{celebrity, compare, fanout, http, likes, load, mixes, reads, returning, sql_pull, writes};
use std::path::PathBuf;

/// The allocator of the `tideway` binary, so in-process figures are the
/// server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How the likes phase runs its writers (`--like-mode`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LikeMode {
    Tasks,
    Threads,
}

#[derive(Parser, Debug)]
#[command(about = "tideway benchmark on the real Twitter follow graph")]
struct Args {
    /// The workload: `twitter` (the real follow graph; posts by authors drawn
    /// by follower count), `synthetic:USERS:FOLLOWS` (seeded power-law graph),
    /// `higgs` (the Higgs activity trace replayed), or a gzip edge file.
    #[arg(long, default_value = "twitter")]
    graph: String,
    /// The shared data directory (Higgs files).
    #[arg(long, default_value = "../shared/data")]
    data: PathBuf,
    /// Items to post (for `higgs`: trace events to replay).
    #[arg(long, default_value_t = 100_000)]
    posts: usize,
    /// `embedded` (fjall, the default backend) or `memory`.
    #[arg(long, default_value = "embedded")]
    backend: String,
    /// Bytes of item bodies the embedded store keeps in memory (its body
    /// cache), like `storage.cache_size`: `64MiB`, `64KiB`…
    #[arg(long, default_value = "128MiB")]
    cache_size: String,
    /// The embedded store's index budget, like `storage.index_size`
    /// (default: the server's default).
    #[arg(long)]
    index_size: Option<String>,
    /// Length of each post's body text (0: the short default text).
    #[arg(long, default_value_t = 0)]
    body_bytes: usize,
    /// fsync every acknowledged write (embedded only), as the server's default does.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    fsync: bool,
    /// Home pages read in-process.
    #[arg(long, default_value_t = 50_000)]
    reads: usize,
    /// Home pages read over HTTP.
    #[arg(long, default_value_t = 20_000)]
    http_reads: usize,
    /// Requests in flight over HTTP.
    #[arg(long, default_value_t = 8)]
    http_concurrency: usize,
    /// Redis for the baseline ("" to skip).
    #[arg(long, default_value = "redis://127.0.0.1:6379/15")]
    redis: String,
    /// Likes per phase (one hot item; many items).
    #[arg(long, default_value_t = 100_000)]
    likes: usize,
    /// Also measure the Redis likes baseline on a `redis-server` of the
    /// bench's own with `appendfsync always` (durable as ours; needs
    /// `redis-server` on the PATH, else the row says it was left out).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    durable_redis: bool,
    /// Concurrent likers (the Redis baseline uses as many clients).
    /// Durable writers share fsyncs, so more writers than cores is realistic.
    #[arg(long, default_value_t = 16)]
    like_threads: usize,
    /// How the likers run: `tasks` on the runtime's two workers, as the
    /// server runs concurrent requests, or `threads`, each an OS thread
    /// blocking on the runtime (this benchmark's way before 2026-11-28:
    /// 16 runnable threads on 2 cores, which delay the journal's syncer).
    #[arg(long, value_enum, default_value_t = LikeMode::Tasks)]
    like_mode: LikeMode,
    /// Deliveries replayed against Redis (it is much slower: a sample).
    #[arg(long, default_value_t = 2_000_000)]
    redis_deliveries: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Fan-out chunks of a worker step in flight at once (`tideway serve`
    /// uses 1 in one process, 8 on shared engines).
    #[arg(long, default_value_t = 1)]
    chunks_in_flight: usize,
    /// PostgreSQL for the SQL pull baseline ("" to skip).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1/test")]
    postgres: String,
    /// MariaDB / MySQL for the SQL pull baseline ("" to skip).
    #[arg(long, default_value = "mysql://root@127.0.0.1:3306/test")]
    mariadb: String,
    /// Returning readers, each following `--returning-follows` accounts.
    #[arg(long, default_value_t = 20)]
    returning: usize,
    #[arg(long, default_value_t = 2000)]
    returning_follows: usize,
    /// Followers of the big synthetic celebrity (time until readable).
    #[arg(long, default_value_t = 1_000_000)]
    celebrity: u64,
    /// Home reads per second over HTTP, open loop; a comma-separated list runs each.
    #[arg(long, value_delimiter = ',', default_values_t = vec![10_000u64, 20_000])]
    http_rate: Vec<u64>,
    #[arg(long, default_value_t = 5)]
    http_seconds: u64,
    /// Directory of the HTML report.
    #[arg(long, default_value = "bench-report")]
    report: PathBuf,
    /// Operations per read:write mix (100:1 and 1:1).
    #[arg(long, default_value_t = 20_000)]
    mix_ops: usize,
    /// Follow rows the SQL baselines load: `all`, `readers` (only the rows of
    /// the readers they measure, which are all their queries touch), or
    /// `auto` (all up to 20M follows, readers above).
    #[arg(long, default_value = "auto", value_parser = ["all", "readers", "auto"])]
    sql_follows: String,
}

/// Runs the phases in order; each adds its rows to the report (or keeps
/// figures for the comparison rows), then the report is written.
fn main() -> Result<(), String> {
    // First, before any thread starts (see there).
    tideway_engines::allocator::tune();
    // The runtime, the follow graph read, the service on the backend.
    let mut b = Bench::new(Args::parse())?;
    load::follows(&mut b)?;
    load::activate_readers(&b)?;
    writes::run(&mut b)?;
    // With the Redis push baseline (`--redis`) beside it.
    fanout::run(&mut b)?;
    reads::first_pages(&mut b)?;
    // A phase asked for none of its work (`--likes 0`…) is left out, and
    // so are its rows.
    if b.args.http_reads > 0 {
        http::closed_loop(&mut b)?;
    }
    reads::pages_of_50(&mut b)?;
    if b.args.returning > 0 {
        returning::run(&mut b)?;
    }
    // `--postgres`, `--mariadb`.
    sql_pull::run(&mut b)?;
    celebrity::run(&mut b)?;
    if b.args.mix_ops > 0 {
        mixes::run(&mut b)?;
    }
    if b.args.http_seconds > 0 {
        http::fixed_rate(&mut b)?;
    }
    if b.args.likes > 0 {
        likes::run(&mut b)?;
    }
    compare::rows(&mut b);
    b.finish()
}
