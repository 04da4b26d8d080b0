//! Measuring tools: process RSS, latency histograms and their percentiles.

use hdrhistogram::Histogram;

pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).map(|kb| kb * 1024))
        })
        .unwrap_or(0)
}

pub fn percentiles(h: &Histogram<u64>) -> (f64, f64, f64) {
    let us = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    (us(0.5), us(0.99), us(0.999))
}

/// A latency histogram (1 ns .. 60 s, 3 significant digits).
pub fn hist() -> Result<Histogram<u64>, String> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())
}
