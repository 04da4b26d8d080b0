//! The seeds' SQL pull model on the local PostgreSQL and MariaDB (each
//! skipped by `""`): the same items, readers and mixes as tideway's.

use crate::context::Bench;
use crate::sql;

/// Loads the follows and items into each server and runs its measures.
pub fn run(b: &mut Bench) -> Result<(), String> {
    let (args, rt, edges, posted) = (&b.args, &b.rt, &b.edges, &b.posted);
    let (sample, returning) = (&b.figures.sample, &b.figures.returning);
    let report = &mut b.report;
    let item_rows: Vec<(u64, u64, i64)> =
        posted.iter().map(|(id, a)| (*id, *a, tideway_core::ids::key_time(*id).0)).collect();
    // The SQL reads touch only the follow rows of the readers they measure;
    // past 20M follows, loading every row would take longer than the rest
    // of the run (and hold the rows as text), so `auto` loads those rows.
    let sql_edges: std::borrow::Cow<[(u64, u64)]> =
        if args.sql_follows == "readers" || (args.sql_follows == "auto" && edges.len() > 20_000_000) {
            let readers: std::collections::HashSet<u64> = sample.iter().copied().collect();
            let rows: Vec<(u64, u64)> = edges.iter().filter(|e| readers.contains(&e.0)).copied().collect();
            report.row(
                "SQL baselines: follow rows loaded",
                format!(
                    "{} of {} (only the measured readers' rows: --sql-follows {})",
                    rows.len(),
                    edges.len(),
                    args.sql_follows
                ),
                String::new(),
            );
            rows.into()
        } else {
            edges[..].into()
        };
    let mut sqls = Vec::new();
    for (db, url) in [(sql::Db::Postgres, &args.postgres), (sql::Db::MariaDb, &args.mariadb)] {
        if url.is_empty() {
            continue;
        }
        let mix_spec = [(100u32, args.mix_ops), (1u32, args.mix_ops / 10)];
        match rt.block_on(sql::run(db, url, &sql_edges, &item_rows, sample, returning, &mix_spec)) {
            Ok(f) => sqls.push(f),
            Err(e) => eprintln!("{} baseline skipped: {e}", db.name()),
        }
    }
    b.figures.sqls = sqls;
    Ok(())
}
