//! Home reads over HTTP on loopback through the real router: closed loop
//! (`--http-concurrency` in flight), and open loop at each `--http-rate`.

use crate::Args;
use crate::context::Bench;
use crate::measure::{hist, percentiles};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng, rngs::StdRng};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tideway_service::FeedService;

/// Closed-loop reads of home first pages; reports latency and rate.
pub fn closed_loop(b: &mut Bench) -> Result<(), String> {
    let (args, rt, svc, readers) = (&b.args, &b.rt, &b.svc, &b.readers);
    let report = &mut b.report;
    let (hp50, hp99, rps) = rt.block_on(http_reads(args, svc.clone(), readers))?;
    report.row(
        "home first page (20) over HTTP, loopback",
        format!(
            "p50 {hp50:.0} µs, p99 {hp99:.0} µs at {rps:.0} req/s ({} in flight, client on the same 2 cores)",
            args.http_concurrency
        ),
        String::new(),
    );
    Ok(())
}

/// Open-loop reads at each `--http-rate`, kept for the comparison rows.
pub fn fixed_rate(b: &mut Bench) -> Result<(), String> {
    let (args, rt, svc, readers) = (&b.args, &b.rt, &b.svc, &b.readers);
    let mut fixed_runs = Vec::new();
    for &rate in &args.http_rate {
        fixed_runs.push((rate, rt.block_on(http_fixed_rate(args, rate, svc.clone(), readers))?));
    }
    b.figures.fixed_runs = fixed_runs;
    Ok(())
}

/// Closed-loop HTTP reads of home first pages against the real router on
/// loopback: `--http-concurrency` requests in flight.
pub async fn http_reads(args: &Args, svc: Arc<FeedService>, readers: &[u64]) -> Result<(f64, f64, f64), String> {
    let (addr, server) = start_http(svc).await?;
    let client = reqwest::Client::new();
    let per_task = args.http_reads / args.http_concurrency.max(1);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..args.http_concurrency {
        let client = client.clone();
        let mut rng = StdRng::seed_from_u64(1000 + t as u64);
        let picks: Vec<u64> = (0..per_task).map(|_| readers[rng.random_range(0..readers.len())]).collect();
        tasks.push(tokio::spawn(async move {
            let mut h = hist()?;
            for u in picks {
                let t = Instant::now();
                get_home(&client, addr, u).await?;
                h.record(t.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(h)
        }));
    }
    let mut all = hist()?;
    for t in tasks {
        let h = t.await.map_err(|e| e.to_string())??;
        all.add(&h).map_err(|e| e.to_string())?;
    }
    let secs = started.elapsed().as_secs_f64();
    server.abort();
    let (p50, p99, _) = percentiles(&all);
    Ok((p50, p99, all.len() as f64 / secs))
}

/// Open-loop HTTP reads at `--http-rate` for `--http-seconds`: requests are
/// scheduled at fixed times whatever the answers do. Latency counts from the
/// actual send; the lag of each send behind its schedule is kept apart (it
/// grows without bound when the server cannot keep up, and includes the
/// client timer's 1 ms ticks). Returns (latency, achieved rate, lag).
pub async fn http_fixed_rate(
    args: &Args,
    rate: u64,
    svc: Arc<FeedService>,
    readers: &[u64],
) -> Result<(Histogram<u64>, f64, Histogram<u64>), String> {
    let (addr, server) = start_http(svc).await?;
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build().map_err(|e| e.to_string())?;
    let lanes = 64u64;
    let total = rate * args.http_seconds;
    let interval = Duration::from_nanos(1_000_000_000 * lanes / rate.max(1));
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = Vec::new();
    for lane in 0..lanes {
        let client = client.clone();
        let mut rng = StdRng::seed_from_u64(5000 + lane);
        let picks: Vec<u64> = (0..total / lanes).map(|_| readers[rng.random_range(0..readers.len())]).collect();
        let offset = Duration::from_nanos(interval.as_nanos() as u64 * lane / lanes);
        tasks.push(tokio::spawn(async move {
            let mut h = hist()?;
            let mut lag = hist()?;
            for (i, u) in picks.into_iter().enumerate() {
                let intended = start + offset + interval * i as u32;
                tokio::time::sleep_until(intended).await;
                let sent = tokio::time::Instant::now();
                lag.record((sent - intended).as_nanos().max(1) as u64).map_err(|e| e.to_string())?;
                get_home(&client, addr, u).await?;
                h.record(sent.elapsed().as_nanos() as u64).map_err(|e| e.to_string())?;
            }
            Ok::<_, String>((h, lag))
        }));
    }
    let mut all = hist()?;
    let mut lags = hist()?;
    for t in tasks {
        let (h, lag) = t.await.map_err(|e| e.to_string())??;
        all.add(&h).map_err(|e| e.to_string())?;
        lags.add(&lag).map_err(|e| e.to_string())?;
    }
    let secs = (tokio::time::Instant::now() - start).as_secs_f64();
    server.abort();
    let rate = all.len() as f64 / secs;
    Ok((all, rate, lags))
}

/// Serves the real router (open, no metrics) on a loopback port.
pub async fn start_http(
    svc: Arc<FeedService>,
) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>), String> {
    let auth = tideway_http::Authenticator::new(&Default::default());
    let state = tideway_http::AppState::new(svc, auth, tideway_http::RateLimits::unlimited(), false, None);
    let app = tideway_http::router(state, Duration::from_secs(10));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // The server the binary runs: its connection loop, no shutdown.
    let opts = tideway_http::ServeOptions {
        header_read_timeout: Duration::from_secs(30),
        max_connections: 10_000,
        shutdown_grace: Duration::from_secs(1),
    };
    Ok((addr, tokio::spawn(tideway_http::serve(listener, app, opts, std::future::pending()))))
}

/// Reads one home page of 20 over HTTP; a non-2xx answer is an error.
pub async fn get_home(client: &reqwest::Client, addr: std::net::SocketAddr, u: u64) -> Result<(), String> {
    let r = client.get(format!("http://{addr}/v1/users/{u}/home?limit=20")).send().await.map_err(|e| e.to_string())?;
    let ok = r.status().is_success();
    r.bytes().await.map_err(|e| e.to_string())?;
    if ok { Ok(()) } else { Err("HTTP read failed".to_owned()) }
}
