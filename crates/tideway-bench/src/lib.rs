//! What the bench's commands share: the workloads (the Twitter graph, a
//! power-law one, the Higgs trace), the SQL pull baselines, the backends a
//! bench sets up, and the histograms and percentiles every figure is read
//! from. `main.rs` is `tideway-bench`; `bin/` holds the focused benches.

pub mod measure;
pub mod setup;
pub mod sql;
pub mod workload;
