//! The HTML report: the comparison table and two plots (latency percentiles
//! of home pages, fan-out throughput over time) as inline SVG.

use hdrhistogram::Histogram;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

/// Latency at percentiles 50 … 99.9 on a "nines" axis (x = -log10(1 - q)).
fn latency_svg(series: &[(String, Histogram<u64>)]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (860, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let max = series.iter().map(|(_, h)| h.value_at_quantile(0.999) as f64 / 1000.0).fold(10.0, f64::max);
        let mut chart = ChartBuilder::on(&root)
            .caption("Home page latency by percentile (µs, log scale)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.3f64..3.0f64, (1f64..max * 2.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("percentile")
            .y_desc("µs")
            .x_label_formatter(&|x| format!("p{:.1}", 100.0 * (1.0 - 10f64.powf(-x))))
            .draw()
            .map_err(err)?;
        for (i, (name, h)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = (0..=27)
                .map(|j| 0.3 + j as f64 * 0.1)
                .map(|x| (x, (h.value_at_quantile(1.0 - 10f64.powf(-x)) as f64 / 1000.0).max(1.0)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(err)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Deliveries per second over time, from cumulative (seconds, deliveries) series.
fn throughput_svg(series: &[(&str, &[(f64, f64)])]) -> Result<String, String> {
    let rates: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, pts)| {
            let r = pts
                .windows(2)
                .filter(|w| w[1].0 > w[0].0)
                .map(|w| (w[1].0, ((w[1].1 - w[0].1) / (w[1].0 - w[0].0)).max(1.0)))
                .collect();
            (*name, r)
        })
        .collect();
    let tmax = rates.iter().flat_map(|(_, r)| r.iter().map(|p| p.0)).fold(0.1, f64::max);
    let rmax = rates.iter().flat_map(|(_, r)| r.iter().map(|p| p.1)).fold(10.0, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (860, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Fan-out deliveries per second over time (log scale)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..tmax, (1000f64..rmax * 2.0).log_scale())
            .map_err(err)?;
        chart.configure_mesh().x_desc("seconds").y_desc("deliveries/s").draw().map_err(err)?;
        for (i, (name, r)) in rates.into_iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(r, color.stroke_width(2)))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace("&lt;br&gt;", "<br>")
}

/// Writes `index.html` into `dir` and returns its path.
pub fn write(
    dir: &Path,
    title: &str,
    rows: &[(String, String, String)],
    latency: &[(String, Histogram<u64>)],
    fan: &[(f64, f64)],
    redis: Option<&[(f64, f64)]>,
) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let lat = latency_svg(latency)?;
    let mut tp: Vec<(&str, &[(f64, f64)])> = vec![("tideway fan-out (one thread)", fan)];
    if let Some(r) = redis {
        tp.push(("Redis ZADD + trim, pipelined", r));
    }
    let thr = throughput_svg(&tp)?;
    let mut table = String::from("<table><tr><th>measure</th><th>tideway</th><th>baselines (same run)</th></tr>\n");
    for (a, b, c) in rows {
        table.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            html_escape(a),
            html_escape(b),
            html_escape(c)
        ));
    }
    table.push_str("</table>");
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>tideway benchmark</title>\
         <style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top}}th{{background:#f4f4f4}}</style></head>\
         <body><h1>tideway benchmark</h1><p>{}</p>{table}<h2>Home page latency</h2>{lat}<h2>Fan-out throughput</h2>{thr}\
         <p>Generated by <code>tideway-bench</code>; every baseline ran in the same process run on the same workload.</p>\
         </body></html>",
        html_escape(title)
    );
    let path = dir.join("index.html");
    std::fs::write(&path, html).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}
