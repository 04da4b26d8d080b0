//! Milliseconds since the Unix epoch, with RFC 3339 formatting (UTC,
//! millisecond precision) as the API writes them.

use crate::error::DomainError;
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Millis(pub i64);

impl Millis {
    /// The wall clock now.
    pub fn now() -> Self {
        let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        Millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// RFC 3339, UTC, milliseconds: `2026-11-21T09:00:00.000Z`.
    pub fn to_rfc3339(self) -> String {
        let ms = u64::try_from(self.0.max(0)).unwrap_or(0);
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
    }

    /// Parses an RFC 3339 UTC time (`Z` suffix; fractional seconds optional).
    pub fn parse_rfc3339(field: &'static str, s: &str) -> Result<Self, DomainError> {
        let t = humantime::parse_rfc3339(s).map_err(|e| {
            DomainError::invalid(field, format!("{e}: expected an RFC 3339 UTC time like 2026-01-02T03:04:05.000Z"))
        })?;
        let d = t.duration_since(UNIX_EPOCH).map_err(|_| DomainError::invalid(field, "time before 1970"))?;
        Ok(Millis(i64::try_from(d.as_millis()).map_err(|_| DomainError::invalid(field, "time out of range"))?))
    }

    pub fn saturating_sub(self, d: Duration) -> Self {
        Millis(self.0.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }
}

/// RFC 3339 with milliseconds, as the API writes times.
impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip_keeps_milliseconds() {
        let t = Millis(1_700_000_000_123);
        let s = t.to_rfc3339();
        assert_eq!(s, "2023-11-14T22:13:20.123Z");
        assert_eq!(Millis::parse_rfc3339("t", &s), Ok(t));
    }

    #[test]
    fn rfc3339_rejects_garbage() {
        assert!(Millis::parse_rfc3339("t", "yesterday").is_err());
        assert!(Millis::parse_rfc3339("t", "2023-11-14 22:13").is_err());
    }
}
