//! Wiring: backend from the config, service, fan-out worker, HTTP server,
//! graceful shutdown.

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::Arc;
use tideway_config::BackendKind;
use tideway_http::{AppState, Authenticator, RateLimits, ServeOptions, router};
use tideway_service::{Config, FanoutWorker, FeedService, ServiceOptions, SystemClock};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Logs to stderr; `TIDEWAY_LOG` sets the filter (default: info, with the
/// storage engine's own chatter at warn).
pub fn init_tracing() {
    let filter =
        EnvFilter::try_from_env("TIDEWAY_LOG").unwrap_or_else(|_| EnvFilter::new("info,fjall=warn,lsm_tree=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// How often the metrics recorder folds recorded samples into its buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Buckets of the request-duration histogram, in seconds.
const DURATION_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// Installs the Prometheus recorder (once per process).
pub fn install_metrics() -> Result<PrometheusHandle, String> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(tideway_http::edge::DURATION_METRIC.to_owned()), DURATION_BUCKETS)
        .and_then(|b| b.install_recorder())
        .map_err(|e| format!("metrics: {e}"))
}

/// File descriptors kept for the storage engine, logs and the listener,
/// out of the process's limit; the rest bounds the connections.
fn connection_budget(configured: usize) -> usize {
    // Raise the soft limit to the hard one: a server wants all it may have.
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the file-descriptor limit; keeping server.max_connections");
            return configured;
        }
    };
    let reserve = (limit / 2).min(1024);
    let overflow = |n: usize| n + tideway_http::serve::overflow_slots(n);
    let budget = usize::try_from(limit.saturating_sub(reserve)).unwrap_or(usize::MAX);
    let mut n = configured;
    while n > 1 && overflow(n) > budget {
        n = n * 15 / 16;
    }
    if n < configured {
        tracing::warn!(
            configured,
            serving = n,
            fd_limit = limit,
            "server.max_connections lowered to fit the file-descriptor limit (raise `ulimit -n` to serve more)"
        );
    }
    n
}

/// Runs the server on the configured address until SIGINT or SIGTERM.
pub async fn run(cfg: Config) -> Result<(), String> {
    let metrics = install_metrics()?;
    let listener = TcpListener::bind(cfg.server.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.server.listen))?;
    serve(listener, cfg, Some(metrics), shutdown_signal()).await
}

/// Serves on a bound listener until `shutdown` resolves (tests bind port 0
/// and pass their own shutdown future).
pub async fn serve(
    listener: TcpListener,
    cfg: Config,
    metrics: Option<PrometheusHandle>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let backend = tideway_engines::open(&cfg).await.map_err(|e| e.chain())?.backend();
    let svc = Arc::new(
        FeedService::new(backend.clone(), ServiceOptions::new(&cfg, backend.profile()), Arc::new(SystemClock))
            .await
            .map_err(|e| e.to_string())?,
    );
    // The node id is claimed before anything runs under it: a second live
    // node with this id refuses to start; a restart after a crash takes it
    // (and its predecessor's jobs) back within a few seconds.
    svc.ops.claim_node().await.map_err(|e| e.to_string())?;
    // Warm inboxes after a clean restart (the snapshot is used once).
    let snapshot =
        (cfg.storage.backend == BackendKind::Embedded).then(|| cfg.storage.data_dir.join("inboxes.snapshot"));
    if let Some(path) = &snapshot {
        let t = std::time::Instant::now();
        match svc.ops.load_snapshot(path).await {
            Ok(Some(s)) => tracing::info!(
                inboxes = s.inboxes,
                entries = s.entries,
                elapsed_ms = t.elapsed().as_millis() as u64,
                "inboxes restored from the clean-shutdown snapshot"
            ),
            Ok(None) => tracing::info!("no inbox snapshot (first start or after a crash): inboxes rebuild on read"),
            Err(e) => tracing::warn!(error = %e, "inbox snapshot ignored: inboxes rebuild on read"),
        }
    }
    let auth = Authenticator::new(&cfg.auth);
    if auth.is_open() {
        tracing::warn!(
            "no auth.server_keys or auth.jwt_secret configured: the API is open to anyone who can reach it, \
             so it listens on loopback only"
        );
    }
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let cancel = CancellationToken::new();
    tideway_service::health::register_series();
    tideway_http::openapi::register_series();
    // The engine probes: once before listening (so /readyz answers from the
    // first request), then every second on a task of their own.
    svc.ops.probe_engines().await;
    // A node whose id another node claimed meanwhile stops (two nodes must
    // not write under one id): the probe task returns why.
    let probes = {
        let (svc, cancel) = (svc.clone(), cancel.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(tideway_service::health::PROBE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    _ = tick.tick() => svc.ops.probe_engines().await,
                }
                if let Some(lost) = svc.ops.node_id_lost() {
                    cancel.cancel();
                    return Some(lost.0);
                }
            }
        })
    };
    // The fan-out worker: its own task, stopped by the same token as the server.
    let worker = tokio::spawn(FanoutWorker::new(svc.clone()).run(cancel.clone()));
    let upkeep = metrics.clone();
    let state = AppState::new(svc.clone(), auth, RateLimits::new(&cfg.rate_limit), cfg.server.access_log, metrics);
    // Every 5 s, folds the histograms' recorded samples into their buckets
    // (the recorder keeps each sample until then: without a scrape they
    // would pile up, 8 bytes a request); once a minute, forgets the
    // rate-limit buckets of idle callers.
    let housekeeping = {
        let (edge, cancel) = (state.edge.clone(), cancel.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UPKEEP_EVERY);
            let mut ticks = 0u32;
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    _ = tick.tick() => {}
                }
                if let Some(h) = &upkeep {
                    h.run_upkeep();
                }
                ticks = ticks.wrapping_add(1);
                if ticks.is_multiple_of(12) {
                    edge.limits.housekeeping();
                }
            }
        })
    };
    let app = router(state, cfg.server.request_timeout.0);
    let opts = ServeOptions {
        header_read_timeout: cfg.server.header_read_timeout.0,
        max_connections: connection_budget(cfg.server.max_connections),
        shutdown_grace: cfg.server.shutdown_grace.0,
    };
    tracing::info!(%addr, max_connections = opts.max_connections, "tideway listening");
    let shutdown = {
        let cancel = cancel.clone();
        async move {
            // A signal, or the node's own stop (its id was taken).
            tokio::select! {
                () = shutdown => {}
                () = cancel.cancelled() => {}
            }
            tracing::info!("shutting down: draining requests");
            cancel.cancel();
        }
    };
    tideway_http::serve(listener, app, opts, shutdown).await.map_err(|e| format!("server: {e}"))?;
    cancel.cancel();
    let _ = housekeeping.await;
    let lost = probes.await.ok().flatten();
    let worker_stopped = tokio::time::timeout(cfg.server.shutdown_grace.0, worker).await.is_ok();
    if !worker_stopped {
        tracing::warn!("fan-out worker did not stop in time; pending jobs resume at the next start");
    }
    if let Some(why) = lost {
        return Err(why);
    }
    // The id is free for a restart at once (jobs this run still holds are
    // taken back by the next run of this id, or by any node after the lease).
    if let Err(e) = svc.ops.release_node().await {
        tracing::warn!(error = %e, "node id not released: a restart waits a few seconds for its heartbeat to go stale");
    }
    // Only a quiet service may be snapshotted: no request and no delivery runs.
    if let (Some(path), true) = (&snapshot, worker_stopped) {
        match svc.ops.save_snapshot(path).await {
            Ok(s) => tracing::info!(inboxes = s.inboxes, entries = s.entries, "inbox snapshot written"),
            Err(e) => tracing::warn!(error = %e, "inbox snapshot not written: inboxes rebuild on read"),
        }
    }
    drop(svc); // closes the store; fjall persists its journal on drop
    tracing::info!("stopped");
    Ok(())
}
