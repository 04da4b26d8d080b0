//! Errors of the storage layer: the store could not do what it was asked.
//!
//! Each error says what the caller can do about it, decided from the
//! engine's own error codes where it reports one (SQLSTATE, MySQL error
//! numbers, Redis error kinds), never from the text of a message:
//!
//! * [`StoreError::Unavailable`]: an engine cannot serve now (connection
//!   refused or lost, a timeout, a full disk, a deadlock). The API answers
//!   `503`; `retryable` says the engine undid the operation and running it
//!   again may succeed at once (a deadlock or a serialization failure), which
//!   the engines' transaction helpers do by themselves.
//! * [`StoreError::Corrupt`]: stored data cannot be decoded (a damaged
//!   directory, an incompatible version).
//! * [`StoreError::Config`]: a setting is wrong (a URL, a prefix): start-up
//!   ends with a message naming it.
//! * [`StoreError::IdTaken`]: an imported item's id collided; the service
//!   retries with another.

use std::fmt;
use thiserror::Error;

/// Any error an engine's driver reports, kept as the source.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The engines behind the seam, as errors and logs name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Engine {
    /// The embedded store's disk (fjall) and its in-process index.
    Embedded,
    Postgres,
    MySql,
    Redis,
}

impl Engine {
    /// The name used in logs, metrics and messages.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Embedded => "embedded",
            Engine::Postgres => "postgres",
            Engine::MySql => "mysql",
            Engine::Redis => "redis",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A message as an error source (for causes no driver reported).
#[derive(Debug)]
pub struct Message(pub String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// An engine cannot serve now. `retryable`: the engine undid the
    /// operation (a deadlock, a serialization failure) and running it again
    /// may succeed at once.
    #[error("{engine} is unavailable: {source}")]
    Unavailable {
        engine: Engine,
        retryable: bool,
        #[source]
        source: BoxError,
    },
    /// Data read back could not be decoded: the data is damaged or was
    /// written by an incompatible version.
    #[error("stored data is corrupt: {what}")]
    Corrupt {
        what: String,
        #[source]
        source: Option<BoxError>,
    },
    /// A setting is wrong; the message says what to fix.
    #[error("{setting}: {message}")]
    Config {
        setting: &'static str,
        message: String,
        #[source]
        source: Option<BoxError>,
    },
    /// An item id collided with an existing one (only possible for imported
    /// `created_at` times); the caller retries with a new id.
    #[error("item id {0} is taken")]
    IdTaken(u64),
}

impl StoreError {
    /// `engine` is unavailable because of `source` (not retryable at once).
    pub fn unavailable(engine: Engine, source: impl Into<BoxError>) -> Self {
        StoreError::Unavailable { engine, retryable: false, source: source.into() }
    }

    /// `engine` is unavailable, for a reason described in words.
    pub fn unavailable_because(engine: Engine, why: impl Into<String>) -> Self {
        Self::unavailable(engine, Message(why.into()))
    }

    /// Stored data (`what`) could not be decoded.
    pub fn corrupt(what: impl Into<String>) -> Self {
        StoreError::Corrupt { what: what.into(), source: None }
    }

    /// Stored data (`what`) could not be decoded because of `source`.
    pub fn corrupt_by(what: impl Into<String>, source: impl Into<BoxError>) -> Self {
        StoreError::Corrupt { what: what.into(), source: Some(source.into()) }
    }

    /// The setting `setting` is wrong.
    pub fn config(setting: &'static str, message: impl Into<String>) -> Self {
        StoreError::Config { setting, message: message.into(), source: None }
    }

    /// Whether running the same operation again may succeed at once.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable { retryable: true, .. })
    }

    /// Whether an engine is down or refusing (the API answers `503`).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }

    /// The engine that failed, when one did.
    pub fn engine(&self) -> Option<Engine> {
        match self {
            StoreError::Unavailable { engine, .. } => Some(*engine),
            _ => None,
        }
    }

    /// The kind of error, as metrics label it: `unavailable`, `retryable`
    /// (the engine undid it: a deadlock), `corrupt`, `config`, `id_taken`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Unavailable { retryable: true, .. } => "retryable",
            StoreError::Unavailable { .. } => "unavailable",
            StoreError::Corrupt { .. } => "corrupt",
            StoreError::Config { .. } => "config",
            StoreError::IdTaken(_) => "id_taken",
        }
    }

    /// The error and its chain of sources, for one log line.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut cur = std::error::Error::source(self);
        while let Some(e) = cur {
            // A cause already told (a message that includes its source, a
            // driver error that repeats its own) is not told again.
            let text = e.to_string();
            if !out.contains(&text) {
                out.push_str(": ");
                out.push_str(&text);
            }
            cur = e.source();
        }
        out
    }
}

/// `url` with its password replaced (`postgres://tw:<redacted>@db/tw`), as
/// logs and error messages show a URL.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.find(':') {
                Some(c) => format!("{}{}:<redacted>{}", &url[..s + 3], &creds[..c], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_say_what_to_do() {
        let e = StoreError::Unavailable {
            engine: Engine::Postgres,
            retryable: true,
            source: Message("deadlock".into()).into(),
        };
        assert!(e.is_retryable() && e.is_unavailable());
        assert_eq!(e.to_string(), "postgres is unavailable: deadlock");
        let e = StoreError::unavailable_because(Engine::Redis, "connection refused");
        assert!(!e.is_retryable() && e.is_unavailable());
        let e = StoreError::corrupt_by("an item record", Message("expected value at line 1".into()));
        assert!(!e.is_unavailable());
        assert_eq!(e.chain(), "stored data is corrupt: an item record: expected value at line 1");
        assert_eq!(
            StoreError::config("redis.prefix", "must not contain braces").to_string(),
            "redis.prefix: must not contain braces"
        );
    }
}
