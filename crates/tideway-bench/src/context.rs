//! What the phases share: the arguments, the runtime, the follow graph, the
//! service under test on its backend, the report rows, and the figures later
//! phases compare against or plot.

use crate::measure::hist;
use crate::{Args, report, sql, workload};
use hdrhistogram::Histogram;
use rand::distr::weighted::WeightedIndex;
use rand::{SeedableRng, rngs::StdRng};
use std::collections::HashMap;
use std::sync::Arc;
use tideway_config::{BackendKind, SyncKind};
use tideway_core::UserId;
use tideway_engines::Opened;
use tideway_service::{FanoutWorker, FeedService, ServiceOptions, SystemClock};
use tideway_store::Backend;

/// The report's rows: (measure, tideway, baseline), in the order measured.
pub struct Report {
    pub rows: Vec<(String, String, String)>,
}

impl Report {
    pub fn row(&mut self, what: &str, value: String, baseline: String) {
        eprintln!("  {what}: {value} {baseline}");
        self.rows.push((what.to_owned(), value, baseline));
    }
}

/// The benchmark's runtime, for the synchronous phases' service calls.
static RUNTIME: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();

/// Runs one service call to completion from synchronous code (the main
/// thread or a writer thread). A call that needs no I/O completes on its
/// first poll: the overhead is one enter and one poll (well under a
/// microsecond), included in the in-process figures.
pub fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    RUNTIME.get().expect("the runtime is set first thing in main").block_on(f)
}

/// Spawns `f` on the runtime's workers (as the server runs its tasks).
pub fn spawn<F>(f: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    RUNTIME.get().expect("the runtime is set first thing in main").spawn(f)
}

pub type GraphBytes = Box<dyn Fn() -> usize>;

/// A read:write mix: (reads per write, ops, tideway's (ops/s, read p99 µs),
/// Redis push's).
pub type MixRow = (u32, usize, (f64, f64), Option<(f64, f64)>);

/// An open-loop HTTP run: (latency, achieved rate, schedule lag).
pub type FixedRun = (Histogram<u64>, f64, Histogram<u64>);

/// Figures a phase keeps for the comparison rows and the HTML report.
pub struct Figures {
    /// Process RSS before the posts (for RSS growth per inbox entry).
    pub rss_before: u64,
    /// (seconds, deliveries so far) during the fan-out drain.
    pub fan_series: Vec<(f64, f64)>,
    /// The Redis push baseline's fan-out, if it ran.
    pub redis: Option<RedisFigures>,
    /// The readers of the pages of 50 (the SQL baselines read the same).
    pub sample: Vec<u64>,
    pub h50: Histogram<u64>,
    /// Returning readers: (user, the accounts it follows).
    pub returning: Vec<(u64, Vec<u64>)>,
    pub hret: Histogram<u64>,
    pub sqls: Vec<sql::SqlFigures>,
    pub celeb: Celebrity,
    pub redis_celeb: Option<(f64, f64)>,
    pub mix_rows: Vec<MixRow>,
    pub fixed_runs: Vec<(u64, FixedRun)>,
}

/// The context every phase runs in. Fields drop in order: the service and
/// its store before their directory, the runtime last.
pub struct Bench {
    pub figures: Figures,
    /// Items posted: (id, author), in posting order.
    pub posted: Vec<(u64, u64)>,
    /// Users who follow someone (the readers the read phases pick from).
    pub readers: Vec<u64>,
    /// One stream: the posts' authors, then the in-process readers.
    pub rng: StdRng,
    /// The SQL comparisons' stream: pages of 50, then returning readers' follows.
    pub rng50: StdRng,
    /// Authors drawn in proportion to their follower counts.
    pub dist: WeightedIndex<u64>,
    pub worker: FanoutWorker,
    pub svc: Arc<FeedService>,
    pub graph_bytes: GraphBytes,
    pub backend: Arc<dyn Backend>,
    _dir: tempfile::TempDir,
    pub users: Vec<u64>,
    pub followers: HashMap<u64, u64>,
    pub by_follower: HashMap<u64, Vec<UserId>>,
    pub edges: Vec<(u64, u64)>,
    pub graph: workload::Graph,
    pub rt: tokio::runtime::Runtime,
    pub report: Report,
    pub args: Args,
}

impl Bench {
    /// Starts the runtime, reads the `--graph` workload's follows (loaded by
    /// the load phase), and opens the service on the `--backend` store.
    pub fn new(args: Args) -> Result<Self, String> {
        let report = Report { rows: Vec::new() };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        RUNTIME.set(rt.handle().clone()).map_err(|_| "runtime set twice".to_owned())?;

        let graph = workload::Graph::parse(&args.graph)?;
        eprintln!("loading {} …", graph.describe());
        let edges = workload::edges(&graph, &args.data, args.seed, 5000)?;
        let mut by_follower: HashMap<u64, Vec<UserId>> = HashMap::new();
        let mut followers: HashMap<u64, u64> = HashMap::new();
        for &(a, b) in &edges {
            by_follower.entry(a).or_default().push(UserId(b));
            *followers.entry(b).or_default() += 1;
            followers.entry(a).or_default();
        }
        let users: Vec<u64> = {
            let mut u: Vec<u64> = followers.keys().copied().collect();
            u.sort_unstable();
            u
        };
        eprintln!("{} users, {} follows", users.len(), edges.len());

        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let opts = ServiceOptions {
            max_following: 5000,
            chunks_in_flight: args.chunks_in_flight,
            ..ServiceOptions::default()
        };
        let mut cfg = tideway_service::Config::default();
        cfg.timeline.max_len = opts.max_len;
        cfg.storage.data_dir = dir.path().to_owned();
        cfg.storage.sync = if args.fsync { SyncKind::Fsync } else { SyncKind::Buffer };
        cfg.storage.cache_size = tideway_config::ByteSize::parse(&args.cache_size)?;
        if let Some(size) = &args.index_size {
            cfg.storage.index_size = tideway_config::ByteSize::parse(size)?;
        }
        cfg.storage.backend = match args.backend.as_str() {
            "memory" => BackendKind::Memory,
            "embedded" => BackendKind::Embedded,
            other => return Err(format!("--backend {other}: expected embedded or memory")),
        };
        let opened = block(tideway_engines::open(&cfg)).map_err(|e| e.chain())?;
        let backend = opened.backend();
        let graph_bytes: GraphBytes = match opened {
            Opened::Memory(s) => Box::new(move || s.state().graph_bytes()),
            Opened::Embedded(s) => Box::new(move || s.state().graph_bytes()),
            Opened::Shared { .. } => return Err("the bench runs in one process: --backend embedded or memory".into()),
        };
        let svc = Arc::new(
            block(FeedService::new(backend.clone(), opts.clone(), Arc::new(SystemClock))).map_err(|e| e.to_string())?,
        );
        let worker = FanoutWorker::new(svc.clone());

        // Both are seeded: made here, they draw the same as when the posts made them.
        let weights: Vec<u64> = users.iter().map(|u| followers[u].max(1)).collect();
        let dist = WeightedIndex::new(&weights).map_err(|e| e.to_string())?;
        let rng = StdRng::seed_from_u64(args.seed);
        let rng50 = StdRng::seed_from_u64(args.seed + 50);
        let figures = Figures {
            rss_before: 0,
            fan_series: Vec::new(),
            redis: None,
            sample: Vec::new(),
            h50: hist()?,
            returning: Vec::new(),
            hret: hist()?,
            sqls: Vec::new(),
            celeb: Celebrity::default(),
            redis_celeb: None,
            mix_rows: Vec::new(),
            fixed_runs: Vec::new(),
        };
        Ok(Bench {
            figures,
            posted: Vec::new(),
            readers: Vec::new(),
            rng,
            rng50,
            dist,
            worker,
            svc,
            graph_bytes,
            backend,
            _dir: dir,
            users,
            followers,
            by_follower,
            edges,
            graph,
            rt,
            report,
            args,
        })
    }

    /// Writes the HTML report, then prints the table on stdout.
    pub fn finish(self) -> Result<(), String> {
        let Bench { args, report, graph, users, edges, figures: fig, .. } = &self;
        let mut series = vec![("tideway in-process, page of 50".to_owned(), fig.h50.clone())];
        for (rate, fixed) in &fig.fixed_runs {
            series.push((format!("tideway over HTTP at {rate}/s"), fixed.0.clone()));
        }
        for f in &fig.sqls {
            series.push((format!("{} pull, page of 50", f.db.name()), f.read.clone()));
        }
        let title = format!(
            "{} ({} users, {} follows), {} posts, backend {}",
            graph.describe(),
            users.len(),
            edges.len(),
            args.posts,
            args.backend
        );
        let path = report::write(
            &args.report,
            &title,
            &report.rows,
            &series,
            &fig.fan_series,
            fig.redis.as_ref().map(|r| r.series.as_slice()),
        )?;
        eprintln!("report: {}", path.display());
        println!(
            "## tideway-bench: {} ({} users, {} follows), {} posts, backend {}",
            graph.describe(),
            users.len(),
            edges.len(),
            args.posts,
            args.backend
        );
        println!();
        println!("| measure | tideway | baseline (same run) |");
        println!("|---|---|---|");
        for (a, b, c) in &report.rows {
            println!("| {a} | {b} | {c} |");
        }
        Ok(())
    }
}

/// What the Redis push baseline measured (`phases/baseline.rs`).
pub struct RedisFigures {
    pub rate: f64,
    pub bytes_per_entry: f64,
    /// (seconds, deliveries so far) during the replay.
    pub series: Vec<(f64, f64)>,
}

/// Times until posts of very followed accounts are readable. The 10k and
/// 9,999 accounts' followers come from the graph: `None` when it has too
/// few users for one.
#[derive(Default)]
pub struct Celebrity {
    pub hot10k_ms: Option<f64>,
    pub hot1m_ms: f64,
    pub push10k_ms: Option<f64>,
}
