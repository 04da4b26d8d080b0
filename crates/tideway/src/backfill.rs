//! `tideway backfill-notifications`: gives notifications to what was stored
//! before they existed, or imported (`tideway import` writes no
//! notifications). It reads every item, follow and reaction page by page
//! and applies their notification ops, which are idempotent: it may run
//! again, and on `postgres` / `mysql` beside running nodes (it claims a
//! node id of its own first, as a node does, since the ids of the groups
//! it opens are drawn under it).

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;
use tideway_service::Config;
use tideway_service::{Backfilled, FeedService, ServiceOptions, SystemClock};

/// Runs the backfill on the configured backend; returns its summary line.
pub async fn run(cfg: &Config) -> Result<String, String> {
    let backend = tideway_engines::open(cfg).await.map_err(|e| e.chain())?.backend();
    let svc = FeedService::new(backend.clone(), ServiceOptions::new(cfg, backend.profile()), Arc::new(SystemClock))
        .await
        .map_err(|e| e.to_string())?;
    svc.ops.claim_node().await.map_err(|e| e.to_string())?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} backfilling notifications: {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let shown = |b: &Backfilled| {
        format!("{} items, {} follows, {} reactions read; {} ops applied", b.items, b.follows, b.reactions, b.ops)
    };
    let done = svc.notifications.backfill(|b| bar.set_message(shown(b))).await;
    bar.finish_and_clear();
    if let Err(e) = svc.ops.release_node().await {
        tracing::warn!(error = %e, "node id not released: a node starting under it waits a few seconds");
    }
    let done = done.map_err(|e| e.to_string())?;
    Ok(format!("notifications backfilled: {}", shown(&done)))
}
