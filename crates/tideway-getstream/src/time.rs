//! Activity times. GetStream keeps a time to the microsecond, in UTC, and
//! writes it `YYYY-MM-DDTHH:MM:SS.ffffff` (six digits, no zone: the Python
//! client reads only that form back as a time). The clients send naive ISO
//! times (Python's `isoformat()`, taken as UTC), the same with `Z` or an
//! offset (JavaScript's `toISOString()`), with 0 to 9 fraction digits (kept
//! to the microsecond).

use crate::error::GsError;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since 1970-01-01T00:00:00Z of `s`; `InputException` on
/// `field` when it is not a time.
pub fn parse_time(s: &str, field: &str) -> Result<i64, GsError> {
    let bad = || GsError::input(field, format!("invalid timestamp {s:?}: use YYYY-MM-DDTHH:MM:SS[.ffffff][Z|±HH:MM]"));
    let s = s.trim();
    // An offset: `±HH:MM` or `±HHMM` after the time of day.
    let (local, offset_s) = match s.len().checked_sub(6).map(|i| s.split_at(i)) {
        Some((head, tail)) if head.contains('T') && is_offset(tail) => (head, offset_seconds(tail)),
        _ => match s.len().checked_sub(5).map(|i| s.split_at(i)) {
            Some((head, tail)) if head.contains('T') && is_offset(tail) => (head, offset_seconds(tail)),
            _ => (s, 0),
        },
    };
    let t = humantime::parse_rfc3339_weak(local).map_err(|_| bad())?;
    let d = t.duration_since(UNIX_EPOCH).map_err(|_| bad())?;
    let micros = i64::try_from(d.as_micros()).map_err(|_| bad())?;
    Ok(micros - offset_s * 1_000_000)
}

fn is_offset(t: &str) -> bool {
    let b = t.as_bytes();
    let digits = |r: &[u8]| r.iter().all(u8::is_ascii_digit);
    matches!(b.first(), Some(b'+' | b'-'))
        && match b.len() {
            6 => b[3] == b':' && digits(&b[1..3]) && digits(&b[4..6]),
            5 => digits(&b[1..5]),
            _ => false,
        }
}

fn offset_seconds(t: &str) -> i64 {
    let digits: String = t[1..].chars().filter(char::is_ascii_digit).collect();
    let (h, m) = digits.split_at(2);
    let s = h.parse::<i64>().unwrap_or(0) * 3600 + m.parse::<i64>().unwrap_or(0) * 60;
    if t.starts_with('-') { -s } else { s }
}

/// `micros` as GetStream writes a time (times before 1970 do not occur:
/// [`parse_time`] refuses them).
pub fn format_time(micros: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(0));
    let mut s = humantime::format_rfc3339_micros(t).to_string();
    s.pop(); // the `Z`
    s
}

/// Now, in microseconds.
pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: i64 = 1_542_914_731_811_123; // 2018-11-22T19:25:31.811123Z

    #[test]
    fn every_form_the_clients_send() {
        assert_eq!(parse_time("2018-11-22T19:25:31.811123", "time").expect("python"), T);
        assert_eq!(parse_time("2018-11-22T19:25:31.811Z", "time").expect("js"), T - 123);
        assert_eq!(parse_time("2018-11-22T19:25:31.811123000", "time").expect("nanoseconds"), T);
        assert_eq!(parse_time("2018-11-22T19:25:31", "time").expect("no fraction"), T - 811_123);
        assert_eq!(parse_time("2018-11-22T21:25:31.811123+02:00", "time").expect("offset"), T);
        assert_eq!(parse_time("2018-11-22T18:25:31.811123-0100", "time").expect("offset"), T);
        for bad in ["", "yesterday", "2018-13-01T00:00:00", "1969-12-31T23:59:59", "2018-11-22T19:25:31+2"] {
            let e = parse_time(bad, "time").expect_err(bad);
            assert_eq!(e.code, 4, "{bad}");
        }
    }

    #[test]
    fn written_back_to_the_microsecond_without_a_zone() {
        assert_eq!(format_time(T), "2018-11-22T19:25:31.811123");
        assert_eq!(format_time(T - 811_123), "2018-11-22T19:25:31.000000");
        for t in [T, T - 123, 1_700_000_000_000_000, now_micros()] {
            assert_eq!(parse_time(&format_time(t), "time").expect("round trip"), t);
        }
    }
}
