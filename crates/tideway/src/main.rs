//! `tideway`: the feed service binary.
//!
//! `tideway serve` runs the HTTP API on the embedded store (no other server
//! needed); `tideway config` prints the effective or example configuration.

use clap::{Parser, Subcommand};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use tideway::{server, settings};

/// mimalloc: a page allocates and frees many small buffers from both
/// runtime workers; glibc's malloc spent ~15% of a home read in its arenas
/// (and their locks) under load. Measured in docs/benchmarks.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "tideway", version, about = "A self-hosted feed service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP API.
    Serve {
        /// Address to listen on (overrides server.listen).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Data directory of the embedded store (overrides storage.data_dir).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Load a follow graph and/or items from files straight into the
    /// embedded store (stop the server first). Formats: docs/import.md.
    Import {
        /// Edge list: `follower followee` per line (gzip allowed).
        #[arg(long)]
        follows: Option<PathBuf>,
        /// JSON lines of items, each with `author` and `created_at` (gzip allowed).
        #[arg(long)]
        items: Option<PathBuf>,
        /// Time recorded for every imported follow (RFC 3339; default now).
        #[arg(long)]
        since: Option<String>,
        /// Data directory of the embedded store (overrides storage.data_dir).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Give notifications to items, follows and reactions stored before
    /// notifications existed, or imported. Idempotent; on postgres / mysql
    /// it may run beside the nodes, under a node id of its own
    /// (TIDEWAY_SERVER__NODE_ID). See docs/deploy.md.
    BackfillNotifications {
        /// Data directory of the embedded store (overrides storage.data_dir;
        /// stop the server first).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Print the configuration: the effective one (defaults, file and
    /// environment applied), or with --example the commented defaults.
    Config {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        example: bool,
    },
}

/// Writes a command's output to stdout (a closed pipe is a failure, not a panic).
fn emit(text: &str) -> ExitCode {
    match std::io::stdout().write_all(text.as_bytes()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn main() -> ExitCode {
    // First, before any thread starts (see there).
    tideway_engines::allocator::tune();
    let cli = Cli::parse();
    match cli.command {
        Command::Config { example: true, .. } => emit(&settings::example_toml()),
        Command::Config { config, example: false } => match settings::load(config.as_deref(), None, None) {
            Ok(c) => emit(&toml::to_string_pretty(&c.redacted()).unwrap_or_default()),
            Err(e) => usage(&e),
        },
        Command::Import { follows, items, since, data_dir, config } => {
            let cfg = match settings::load(config.as_deref(), None, data_dir) {
                Ok(c) => c,
                Err(e) => return usage(&e),
            };
            let since = match since.as_deref().map(|s| tideway_core::Millis::parse_rfc3339("--since", s)).transpose() {
                Ok(s) => s,
                Err(e) => return usage(&e),
            };
            let args = tideway::import::ImportArgs { follows, items, since };
            match tideway::import::run(&cfg, &args) {
                Ok(summary) => emit(&format!("{summary}\n")),
                Err(e) => {
                    eprintln!("tideway import: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::BackfillNotifications { data_dir, config } => {
            let cfg = match settings::load(config.as_deref(), None, data_dir) {
                Ok(c) => c,
                Err(e) => return usage(&e),
            };
            match runtime().map(|rt| rt.block_on(tideway::backfill::run(&cfg))) {
                Err(code) => code,
                Ok(Ok(summary)) => emit(&format!("{summary}\n")),
                Ok(Err(e)) => {
                    eprintln!("tideway backfill-notifications: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Serve { listen, data_dir, config } => {
            server::init_tracing();
            let cfg = match settings::load(config.as_deref(), listen, data_dir) {
                Ok(c) => c,
                Err(e) => return usage(&e),
            };
            match runtime().map(|rt| rt.block_on(server::run(cfg))) {
                Err(code) => code,
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    tracing::error!("{e}");
                    eprintln!("tideway: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// A bad setting or argument: said on stderr, exit code 2.
fn usage(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("tideway: {e}");
    ExitCode::from(2)
}

/// The multi-threaded runtime of `serve` and of the commands that open a
/// backend (exit code 1 when it cannot start).
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| {
        eprintln!("tideway: cannot start the runtime: {e}");
        ExitCode::FAILURE
    })
}
