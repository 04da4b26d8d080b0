//! Loads the configuration once: defaults in code, then the TOML file, then
//! `TIDEWAY_<SECTION>__<KEY>` environment variables, then command-line flags.

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tideway_service::Config;

pub fn load(file: Option<&Path>, listen: Option<SocketAddr>, data_dir: Option<PathBuf>) -> Result<Config, String> {
    let mut fig = Figment::from(Serialized::defaults(Config::default()));
    if let Some(f) = file {
        if !f.exists() {
            return Err(format!("config file {} does not exist", f.display()));
        }
        fig = fig.merge(Toml::file(f));
    }
    // Only `TIDEWAY_<SECTION>__<KEY>` is configuration; other TIDEWAY_
    // variables (TIDEWAY_LOG) are not, and must not trip deny_unknown_fields.
    fig = fig.merge(Env::prefixed("TIDEWAY_").filter(|k| k.as_str().contains("__")).split("__"));
    if let Some(l) = listen {
        fig = fig.merge(Serialized::default("server.listen", l));
    }
    if let Some(d) = data_dir {
        fig = fig.merge(Serialized::default("storage.data_dir", d));
    }
    let cfg: Config = fig.extract().map_err(|e| format!("invalid configuration: {e}"))?;
    cfg.check().map_err(|e| format!("invalid configuration: {e}"))?;
    Ok(cfg)
}

/// The example configuration: every setting at its default, generated from
/// the types so it cannot drift (a test compares it with the committed copy).
pub fn example_toml() -> String {
    let body = toml::to_string_pretty(&Config::default()).unwrap_or_default();
    // The index's default depends on the machine: said, not printed.
    let body = body
        .lines()
        .map(|l| {
            if l.starts_with("index_size = ") {
                "# index_size: an eighth of memory, 256MiB to 4GiB, unless set\n# index_size = \"1GiB\"".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    format!(
        "# tideway configuration: every setting with its default.\n\
         # Each can be overridden by the environment as TIDEWAY_<SECTION>__<KEY>,\n\
         # e.g. TIDEWAY_TIMELINE__MAX_LEN=800. See docs/config.md.\n\n{body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_example_config_is_current() {
        let committed = include_str!("../../../docs/tideway.example.toml");
        assert_eq!(
            committed,
            example_toml(),
            "docs/tideway.example.toml is stale: run `cargo run -p tideway -- config --example > docs/tideway.example.toml`"
        );
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail API returns figment::Error
    fn file_overrides_defaults_and_typos_are_rejected() {
        // Inside a Jail: it holds the lock that keeps env-setting tests apart.
        figment::Jail::expect_with(|jail| {
            jail.create_file("t.toml", "[timeline]\nmax_len = 50\n[fanout]\nactive_window = \"3d\"\n")?;
            let c = load(Some(Path::new("t.toml")), None, Some(PathBuf::from("d"))).map_err(figment::Error::from)?;
            assert_eq!(c.timeline.max_len, 50);
            assert_eq!(c.fanout.active_window.0.as_secs(), 3 * 86400);
            assert_eq!(c.storage.data_dir, PathBuf::from("d"));
            jail.create_file("t.toml", "[timeline]\nmax_lenn = 50\n")?;
            assert!(load(Some(Path::new("t.toml")), None, None).is_err(), "unknown keys are rejected");
            assert!(load(Some(Path::new("missing.toml")), None, None).is_err());
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail API returns figment::Error
    fn env_overrides_the_file_and_other_variables_are_ignored() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("t.toml", "[timeline]\nmax_len = 50\n")?;
            jail.set_env("TIDEWAY_TIMELINE__MAX_LEN", "70");
            jail.set_env("TIDEWAY_FANOUT__ACTIVE_WINDOW", "2d");
            jail.set_env("TIDEWAY_LOG", "debug");
            let c = load(Some(Path::new("t.toml")), None, None).map_err(figment::Error::from)?;
            assert_eq!(c.timeline.max_len, 70);
            assert_eq!(c.fanout.active_window.0.as_secs(), 2 * 86400);
            jail.set_env("TIDEWAY_TIMELINE__MAX_LEN", "lots");
            assert!(load(Some(Path::new("t.toml")), None, None).is_err());
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment's Jail API returns figment::Error
    fn a_scaled_out_node_is_configured_from_the_environment() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("TIDEWAY_STORAGE__BACKEND", "postgres");
            jail.set_env("TIDEWAY_STORAGE__URL", "postgres://tw@127.0.0.1/tw");
            jail.set_env(
                "TIDEWAY_REDIS__URLS",
                "redis://127.0.0.1:7101,redis://127.0.0.1:7102, redis://127.0.0.1:7103",
            );
            jail.set_env("TIDEWAY_SERVER__NODE_ID", "7");
            let c = load(None, None, None).map_err(figment::Error::from)?;
            assert_eq!(c.storage.backend, tideway_config::BackendKind::Postgres);
            assert_eq!(c.storage.url.as_deref(), Some("postgres://tw@127.0.0.1/tw"));
            assert_eq!(c.redis.urls.len(), 3, "{:?}", c.redis.urls);
            assert_eq!(c.redis.urls[2], "redis://127.0.0.1:7103");
            assert_eq!(c.server.node_id, 7);
            assert_eq!(c.check(), Ok(()));
            jail.set_env("TIDEWAY_REDIS__URLS", "redis://127.0.0.1:6379");
            assert_eq!(load(None, None, None).map_err(figment::Error::from)?.redis.urls.len(), 1);
            Ok(())
        });
    }
}
