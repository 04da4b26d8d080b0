//! Activity ids: tideway's item keys written as GetStream writes ids, a
//! UUID version 1 whose timestamp is the activity's `time` (so an id says
//! when its activity is, like GetStream's), and whose other 62 bits carry
//! the rest of the key, so that the key is read back exactly:
//!
//! ```text
//! timestamp (60 bits)  the activity's time, in 100 ns since 1582-10-15 (µs × 10)
//! clock_seq (14 bits)  ┐ the key's millisecond less the time's (40 bits, signed:
//! node      (48 bits)  ┘ a key taken later than its time), then its node and sequence (22)
//! ```
//!
//! A string that is not such an id (another UUID version, a random one,
//! anything else) names no activity: lookups answer nothing for it, as
//! GetStream's do for ids it does not know.

use tideway_core::Key;
use tideway_core::ids::ID_EPOCH_MS;

/// From 1582-10-15 (the UUID epoch) to 1970-01-01, in microseconds.
const UUID_EPOCH_US: i64 = 12_219_292_800_000_000;
const LOW_BITS: u32 = 22;
const DELTA_BITS: u32 = 40;

/// The id of the activity with key `key` and time `time_us` (µs since
/// 1970); `None` when the two are too far apart to be written together
/// (more than 17 years).
pub fn activity_id(key: Key, time_us: i64) -> Option<String> {
    let key_ms = i64::try_from(key >> LOW_BITS).ok()? + ID_EPOCH_MS;
    let delta = key_ms - time_us.div_euclid(1000);
    let half = 1i64 << (DELTA_BITS - 1);
    if !(-half..half).contains(&delta) {
        return None;
    }
    let payload = ((delta as u64 & ((1 << DELTA_BITS) - 1)) << LOW_BITS) | (key & ((1 << LOW_BITS) - 1));
    let t = u64::try_from((time_us + UUID_EPOCH_US).checked_mul(10)?).ok()?;
    if t >> 60 != 0 {
        return None;
    }
    let clock_seq = 0x8000 | (payload >> 48) as u16;
    Some(format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        t & 0xFFFF_FFFF,
        (t >> 32) & 0xFFFF,
        0x1000 | ((t >> 48) & 0x0FFF),
        clock_seq,
        payload & 0xFFFF_FFFF_FFFF
    ))
}

/// The key and time an id was written from; `None` for any other string.
pub fn parse_activity_id(s: &str) -> Option<(Key, i64)> {
    let b = s.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let hex = |r: std::ops::Range<usize>| u64::from_str_radix(s.get(r)?, 16).ok();
    let (low, mid, hi, seq, node) = (hex(0..8)?, hex(9..13)?, hex(14..18)?, hex(19..23)?, hex(24..36)?);
    if hi >> 12 != 1 || seq >> 14 != 0b10 {
        return None;
    }
    let t = ((hi & 0x0FFF) << 48) | (mid << 32) | low;
    if t % 10 != 0 {
        return None;
    }
    let time_us = i64::try_from(t / 10).ok()? - UUID_EPOCH_US;
    let payload = ((seq & 0x3FFF) << 48) | node;
    let raw = (payload >> LOW_BITS) as i64;
    let delta = (raw << (64 - DELTA_BITS)) >> (64 - DELTA_BITS);
    let key_ms = time_us.div_euclid(1000) + delta - ID_EPOCH_MS;
    let key = (u64::try_from(key_ms).ok()? << LOW_BITS) | (payload & ((1 << LOW_BITS) - 1));
    // (a key is below 2^63; ids written from one round-trip exactly)
    (key >> 63 == 0 && activity_id(key, time_us).as_deref() == Some(s)).then_some((key, time_us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tideway_core::Millis;
    use tideway_core::ids::key_floor_of;

    #[test]
    fn keys_and_times_are_read_back_exactly() {
        let t = 1_700_000_000_123_456; // µs
        let at_time = key_floor_of(Millis(t / 1000)) | (5 << 12) | 77;
        let later = key_floor_of(Millis(t / 1000 + 3)) | 4095;
        let earlier = key_floor_of(Millis(t / 1000 - 86_400_000));
        for (key, time) in
            [(at_time, t), (later, t), (earlier, t), (at_time, t - 999), (1 << LOW_BITS, 1_577_836_800_001_000)]
        {
            let id = activity_id(key, time).expect("written");
            assert_eq!(id.len(), 36);
            assert_eq!(&id[14..15], "1", "version 1: {id}");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "RFC 4122 variant: {id}");
            assert_eq!(parse_activity_id(&id), Some((key, time)), "{id}");
        }
    }

    #[test]
    fn an_id_says_its_time_as_a_uuid_v1_does() {
        // GetStream's own: c57b8fa0-911c-11e8-… ↔ 2018-07-26T21:42:19.312119 (µs 1532641339312119
        // within 1–2 µs); ours of that time starts the same way.
        let t = 1_532_641_339_312_119;
        let key = key_floor_of(Millis(1_600_000_000_000));
        let id = activity_id(key, t).expect("written");
        assert!(id.starts_with("c57b8f") && id[8..18].eq("-911c-11e8"), "{id}");
    }

    #[test]
    fn other_strings_name_nothing() {
        for s in [
            "",
            "42",
            "6f1a8f0e-6b7f-4f3e-9a2d-1b2c3d4e5f60", // a uuid4
            "c57b8fa0-911c-11e8-8f9d-0a081e7097fe", // GetStream's: its timestamp is not whole µs × 10
            "c57b8fa0-911c-11e8-8f9d-0a081e7097fe-extra",
            "zzzzzzzz-911c-11e8-8f9d-0a081e7097fe",
        ] {
            assert_eq!(parse_activity_id(s), None, "{s}");
        }
    }
}
