//! The backends a run drives (memory, embedded, two SQL + Redis nodes)
//! and the calls that pick a node.

use super::*;

/// How much of the embedded index stays loaded.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Held {
    /// The default budget: what is loaded stays, here.
    Kept,
    /// Every loaded unit dropped before each storage call: every read loads
    /// from disk.
    Cold,
    /// A budget of one byte: each load and write lets go of every holder
    /// not used since the last pass, writes in flight included.
    Tiny,
}

pub(crate) enum Kind {
    Memory,
    /// The embedded store, its index held as [`Held`] says.
    Fjall(tempfile::TempDir, Held),
    /// Two nodes on one SQL database and one Redis (a fresh database and key
    /// prefix per run); calls alternate between the nodes.
    Scaled {
        db: String,
        redis: String,
        prefix: String,
    },
}

pub(crate) struct Harness {
    pub(crate) kind: Kind,
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) opts: ServiceOptions,
    /// One node, or two for `Kind::Scaled` (each with its worker).
    pub(crate) nodes: Vec<(Arc<FeedService>, FanoutWorker)>,
    /// Which node the next call goes to.
    pub(crate) turn: std::sync::atomic::AtomicUsize,
}

impl Harness {
    pub(crate) async fn new(kind: Kind, opts: ServiceOptions) -> Self {
        let clock = Arc::new(ManualClock::new(Millis(1_700_000_000_000)));
        let mut h = Harness { kind, clock, opts, nodes: Vec::new(), turn: Default::default() };
        let n = if matches!(h.kind, Kind::Scaled { .. }) { 2 } else { 1 };
        for i in 0..n {
            let node = h.node(i).await;
            h.nodes.push(node);
        }
        h
    }
    /// Starts node `i` (node ids differ, as a deployment's must).
    pub(crate) async fn node(&self, i: usize) -> (Arc<FeedService>, FanoutWorker) {
        // Opened as `tideway serve` opens them (tideway_engines::open).
        let mut cfg = tideway_service::Config::default();
        cfg.timeline.max_len = self.opts.max_len;
        cfg.storage.sync = SyncKind::Buffer;
        match &self.kind {
            Kind::Memory => cfg.storage.backend = BackendKind::Memory,
            Kind::Fjall(dir, held) => {
                cfg.storage.data_dir = dir.path().to_owned();
                if *held == Held::Tiny {
                    cfg.storage.index_size = tideway_config::ByteSize(1);
                }
            }
            Kind::Scaled { db, redis, prefix } => {
                cfg.storage.backend =
                    if db.starts_with("postgres") { BackendKind::Postgres } else { BackendKind::Mysql };
                cfg.storage.url = Some(db.clone());
                cfg.redis.urls = vec![redis.clone()];
                cfg.redis.prefix = prefix.clone();
            }
        }
        let opened = tideway_engines::open(&cfg).await.expect("open the backend");
        let backend: Arc<dyn Backend> = match (&self.kind, opened) {
            // Every loaded unit dropped before each call: reads load from disk.
            (Kind::Fjall(_, Held::Cold), Opened::Embedded(store)) => {
                let evict = store.clone();
                Arc::new(Counted::new(store).before_each(move || evict.evict_all()))
            }
            (_, opened) => opened.backend(),
        };
        // Nodes on shared engines wake the workers in the background, as
        // in production.
        let background_signals = matches!(self.kind, Kind::Scaled { .. });
        let opts = ServiceOptions { node_id: i as u16 + 1, background_signals, ..self.opts.clone() };
        let svc = Arc::new(FeedService::new(backend, opts, self.clock.clone()).await.expect("service"));
        let worker = FanoutWorker::new(svc.clone());
        (svc, worker)
    }
    /// A restart: `clean` ones go through the inbox snapshot (warm inboxes,
    /// hot authors' unpushed keys); the others lose every inbox. With two
    /// nodes, one node restarts, and an unclean restart also flushes Redis.
    pub(crate) async fn restart(&mut self, clean: bool, which: usize) {
        if let Kind::Scaled { redis, prefix, .. } = &self.kind {
            if !clean {
                let mut ro = tideway_store_redis::RedisOptions::new(vec![redis.clone()], self.opts.max_len);
                ro.prefix = prefix.clone();
                let r = tideway_store_redis::RedisShared::connect(ro).await.expect("redis");
                r.purge().await.expect("flush");
            }
            let i = which % self.nodes.len();
            self.nodes[i] = self.node(i).await;
            // The restarted node's worker has a new id: the jobs its old one
            // held wait out their lease (a restart that takes that long),
            // then any worker resumes them from their checkpoints.
            self.clock.advance(self.opts.lease_ms + 1);
            return;
        }
        let snap = match &self.kind {
            Kind::Fjall(dir, _) => dir.path().join("inboxes.snapshot"),
            _ => return,
        };
        if clean {
            self.svc().ops.save_snapshot(&snap).await.expect("snapshot");
        }
        self.nodes.clear();
        let node = self.node(0).await;
        self.nodes.push(node);
        let loaded = self.svc().ops.load_snapshot(&snap).await.expect("load snapshot");
        assert_eq!(loaded.is_some(), clean);
    }
    pub(crate) fn pick(&self) -> &(Arc<FeedService>, FanoutWorker) {
        let t = self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.nodes[t % self.nodes.len()]
    }
    pub(crate) fn svc(&self) -> &FeedService {
        &self.pick().0
    }
    pub(crate) fn worker(&self) -> &FanoutWorker {
        &self.pick().1
    }
    /// Runs every node's worker until no job is pending (a job leased to
    /// one node's worker is finished by that worker).
    pub(crate) async fn drain(&self) {
        for _ in 0..2 {
            for (_, w) in &self.nodes {
                w.drain().await.expect("drain");
            }
        }
        let left = self.nodes[0].0.backend().pending_jobs(10).await.expect("pending");
        assert!(left.is_empty(), "fan-out jobs left after draining every node: {left:?}");
    }
}

pub(crate) fn post(author: u64, kind: ItemKind, vis: Visibility, mentions: Vec<u64>) -> NewItem {
    NewItem {
        visibility: vis,
        mentions: mentions.into_iter().map(UserId).collect(),
        ..NewItem::new(UserId(author), kind)
    }
}

pub(crate) fn pick_vis(rng: &mut StdRng) -> Visibility {
    match rng.random_range(0..6) {
        0 => Visibility::Followers,
        1 => Visibility::Mentioned,
        _ => Visibility::Public,
    }
}

pub(crate) fn kind_of(e: &ServiceError) -> &'static str {
    match e {
        ServiceError::NotFound(_) => "not_found",
        ServiceError::Forbidden(_) => "forbidden",
        ServiceError::LimitExceeded(_) => "limit",
        ServiceError::Invalid(_) => "invalid",
        ServiceError::Conflict(_) => "conflict",
        ServiceError::Store(_) => "store",
        ServiceError::Expired(_) => "expired",
        ServiceError::NodeUnavailable(_) => "node",
    }
}
