//! Opaque cursors.
//!
//! A cursor names a position in one feed: the feed (kind and a fingerprint of
//! its identity), the sort key of the entry it points at, and a tie-breaker.
//! It is base64url of a fixed layout with a checksum (30 bytes; 38 for the
//! live feed's, which also name their snapshot), so it survives restarts (no
//! server state), stays valid when the entry it points at is deleted (the
//! key is a number, not a reference), and a cursor of another feed, a
//! truncated one, or garbage is rejected with a clear reason.

use crate::error::DomainError;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const VERSION: u8 = 1;
/// Version, feed tag, fingerprint, then the words, then a checksum.
const HEAD: usize = 1 + 1 + 8;
const CHECK: usize = 4;
/// The longest cursor's words (the live feed's).
const MAX_WORDS: usize = 3;

/// The feed a cursor belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedScope<'a> {
    Home(u64),
    Profile(u64),
    Mentions(u64),
    Tag(&'a str),
    Object(&'a str, &'a str),
    Following(u64),
    Followers(u64),
    /// A user's notification groups: key `latest_at`, aux the group id.
    Notifications(u64),
    /// A user's live feed ([`LiveCursor`]).
    Live(u64),
    /// A user's home stream: the place a `delete` event marks
    /// ([`StreamMark`]).
    HomeStream(u64),
}

impl FeedScope<'_> {
    fn tag(&self) -> u8 {
        match self {
            Self::Home(_) => 1,
            Self::Profile(_) => 2,
            Self::Mentions(_) => 3,
            Self::Tag(_) => 4,
            Self::Object(..) => 5,
            Self::Following(_) => 6,
            Self::Followers(_) => 7,
            Self::Notifications(_) => 8,
            Self::Live(_) => 9,
            Self::HomeStream(_) => 10,
        }
    }

    /// A stable 64-bit name of the feed (FNV-1a of its kind and identity):
    /// cursors carry it, and posting feeds are stored under it.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Fnv::new();
        h.write(&[self.tag()]);
        match self {
            Self::Home(u)
            | Self::Profile(u)
            | Self::Mentions(u)
            | Self::Following(u)
            | Self::Followers(u)
            | Self::Notifications(u)
            | Self::Live(u)
            | Self::HomeStream(u) => {
                h.write(&u.to_be_bytes());
            }
            Self::Tag(t) => h.write(t.as_bytes()),
            Self::Object(t, i) => {
                h.write(t.as_bytes());
                h.write(&[0]);
                h.write(i.as_bytes());
            }
        }
        h.finish()
    }
}

/// A decoded cursor: a sort key and a tie-breaker within one feed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub key: u64,
    pub aux: u64,
}

impl Cursor {
    pub fn new(key: u64) -> Self {
        Self { key, aux: 0 }
    }

    pub fn encode(&self, scope: &FeedScope<'_>) -> String {
        CursorEncoder::new(scope).encode(*self)
    }

    pub fn decode(s: &str, scope: &FeedScope<'_>) -> Result<Self, DomainError> {
        let [key, aux] = unpack(s, scope)?;
        Ok(Self { key, aux })
    }
}

/// A position in a viewer's live feed: the snapshot its walk reads (an id
/// from the item id generator, so it carries the time it was taken), and a
/// key and tie-breaker within it (what they mean is `crate::live`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveCursor {
    pub snapshot: u64,
    pub key: u64,
    pub aux: u64,
}

impl LiveCursor {
    pub fn encode(&self, viewer: u64) -> String {
        pack(&FeedScope::Live(viewer), &[self.snapshot, self.key, self.aux])
    }

    pub fn decode(s: &str, viewer: u64) -> Result<Self, DomainError> {
        let [snapshot, key, aux] = unpack(s, &FeedScope::Live(viewer))?;
        Ok(Self { snapshot, key, aux })
    }
}

/// The place in a user's home stream a `delete` event marks: the stream's
/// position (the home cursor of the newest entry sent: `key`, `aux`), the
/// time from which removals may not have been told yet (`since`, ms), and
/// the items whose deletes were sent lately enough that their removals may
/// be noted at or after `since` (a resume does not send them again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMark {
    pub key: u64,
    pub aux: u64,
    pub since: u64,
    pub items: Vec<u64>,
}

impl StreamMark {
    /// The most items a mark names (an id stays a few hundred characters).
    pub const MAX_ITEMS: usize = 32;

    pub fn encode(&self, user: u64) -> String {
        let mut words = vec![self.key, self.aux, self.since];
        words.extend(self.items.iter().take(Self::MAX_ITEMS));
        pack_var(&FeedScope::HomeStream(user), &words)
    }

    pub fn decode(s: &str, user: u64) -> Result<Self, DomainError> {
        let words = unpack_var(s, &FeedScope::HomeStream(user), 3, 3 + Self::MAX_ITEMS)?;
        Ok(Self { key: words[0], aux: words[1], since: words[2], items: words[3..].to_vec() })
    }
}

/// `words` (any number) in `scope`'s layout: head, words, checksum.
fn pack_var(scope: &FeedScope<'_>, words: &[u64]) -> String {
    let enc = CursorEncoder::new(scope);
    let mut b = Vec::with_capacity(HEAD + 8 * words.len() + CHECK);
    b.extend_from_slice(&enc.head);
    for w in words {
        b.extend_from_slice(&w.to_be_bytes());
    }
    let mut h = enc.checked_head;
    h.write(&b[HEAD..]);
    b.extend_from_slice(&fold(h.finish()).to_be_bytes());
    URL_SAFE_NO_PAD.encode(&b)
}

/// What [`pack_var`] wrote, `min..=max` words.
fn unpack_var(s: &str, scope: &FeedScope<'_>, min: usize, max: usize) -> Result<Vec<u64>, DomainError> {
    if s.len() > (HEAD + 8 * max + CHECK).div_ceil(3) * 4 {
        return Err(DomainError::InvalidCursor("too long to be a tideway cursor"));
    }
    let b = URL_SAFE_NO_PAD.decode(s).map_err(|_| DomainError::InvalidCursor("not a tideway cursor (bad encoding)"))?;
    if b.len() < HEAD + 8 * min + CHECK || !(b.len() - HEAD - CHECK).is_multiple_of(8) {
        return Err(DomainError::InvalidCursor("not a cursor of this feed (wrong length)"));
    }
    let body = b.len() - CHECK;
    let mut c = [0u8; CHECK];
    c.copy_from_slice(&b[body..]);
    if u32::from_be_bytes(c) != checksum(&b[..body]) || b[0] != VERSION {
        return Err(DomainError::InvalidCursor("not a tideway cursor (checksum mismatch)"));
    }
    let mut f = [0u8; 8];
    f.copy_from_slice(&b[2..HEAD]);
    if b[1] != scope.tag() || u64::from_be_bytes(f) != scope.fingerprint() {
        return Err(DomainError::InvalidCursor("this cursor belongs to another feed; start again without a cursor"));
    }
    Ok(b[HEAD..body]
        .chunks_exact(8)
        .map(|w| {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            u64::from_be_bytes(a)
        })
        .collect())
}

/// Encodes the cursors of one feed. A page encodes one cursor per entry:
/// the feed's part of the layout, and of the checksum over it, is worked
/// out once ([`CursorEncoder::new`]), so each cursor hashes only its words.
pub struct CursorEncoder {
    head: [u8; HEAD],
    /// The checksum's state after its prefix and `head`.
    checked_head: Fnv,
}

impl CursorEncoder {
    pub fn new(scope: &FeedScope<'_>) -> Self {
        let mut head = [0u8; HEAD];
        head[0] = VERSION;
        head[1] = scope.tag();
        head[2..10].copy_from_slice(&scope.fingerprint().to_be_bytes());
        let mut checked_head = Fnv::new();
        checked_head.write(CHECK_PREFIX);
        checked_head.write(&head);
        Self { head, checked_head }
    }

    /// `c` in this encoder's feed: what `c.encode(scope)` gives.
    pub fn encode(&self, c: Cursor) -> String {
        self.pack(&[c.key, c.aux])
    }

    fn pack(&self, words: &[u64]) -> String {
        let mut b = [0u8; HEAD + 8 * MAX_WORDS + CHECK];
        b[..HEAD].copy_from_slice(&self.head);
        for (i, w) in words.iter().enumerate() {
            b[HEAD + 8 * i..HEAD + 8 * (i + 1)].copy_from_slice(&w.to_be_bytes());
        }
        let body = HEAD + 8 * words.len();
        let mut h = self.checked_head;
        h.write(&b[HEAD..body]);
        b[body..body + CHECK].copy_from_slice(&fold(h.finish()).to_be_bytes());
        URL_SAFE_NO_PAD.encode(&b[..body + CHECK])
    }
}

fn pack(scope: &FeedScope<'_>, words: &[u64]) -> String {
    CursorEncoder::new(scope).pack(words)
}

fn unpack<const N: usize>(s: &str, scope: &FeedScope<'_>) -> Result<[u64; N], DomainError> {
    if s.len() > 64 {
        return Err(DomainError::InvalidCursor("too long to be a tideway cursor"));
    }
    let b = URL_SAFE_NO_PAD.decode(s).map_err(|_| DomainError::InvalidCursor("not a tideway cursor (bad encoding)"))?;
    let body = HEAD + 8 * N;
    if b.len() != body + CHECK {
        // A cursor of a feed with another layout fails here too.
        return Err(DomainError::InvalidCursor("not a cursor of this feed (wrong length)"));
    }
    let word = |at: usize| -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[at..at + 8]);
        u64::from_be_bytes(a)
    };
    let mut c = [0u8; CHECK];
    c.copy_from_slice(&b[body..]);
    if u32::from_be_bytes(c) != checksum(&b[..body]) || b[0] != VERSION {
        return Err(DomainError::InvalidCursor("not a tideway cursor (checksum mismatch)"));
    }
    if b[1] != scope.tag() || word(2) != scope.fingerprint() {
        return Err(DomainError::InvalidCursor("this cursor belongs to another feed; start again without a cursor"));
    }
    Ok(std::array::from_fn(|i| word(HEAD + 8 * i)))
}

/// FNV-1a, 64 bit: a stable hash (the same across processes and versions,
/// unlike std's `RandomState`), used only for fingerprints and checksums.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// What a cursor's checksum hashes before the cursor's bytes.
const CHECK_PREFIX: &[u8] = b"tideway-cursor";

fn checksum(bytes: &[u8]) -> u32 {
    let mut h = Fnv::new();
    h.write(CHECK_PREFIX);
    h.write(bytes);
    fold(h.finish())
}

fn fold(v: u64) -> u32 {
    (v ^ (v >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoder_writes_what_encode_writes() {
        // (the layout and checksum of cursors clients hold must not move)
        let c = Cursor { key: 0x0123_4567_89ab_cdef, aux: 3 };
        assert_eq!(c.encode(&FeedScope::Home(7)), "AQFSmivcj_Ux-QEjRWeJq83vAAAAAAAAAAPg7Uxe");
        let scopes =
            [FeedScope::Home(7), FeedScope::Tag("rust"), FeedScope::Object("film", "tt01"), FeedScope::Live(2)];
        for scope in &scopes {
            let enc = CursorEncoder::new(scope);
            for c in [Cursor::new(0), Cursor { key: u64::MAX, aux: 41 }, Cursor { key: 1 << 40, aux: u64::MAX }] {
                let s = enc.encode(c);
                assert_eq!(s, c.encode(scope));
                assert_eq!(Cursor::decode(&s, scope), Ok(c));
            }
        }
    }

    #[test]
    fn round_trip() {
        let c = Cursor { key: 123_456_789, aux: 42 };
        let s = c.encode(&FeedScope::Home(7));
        assert_eq!(Cursor::decode(&s, &FeedScope::Home(7)), Ok(c));
        let t = Cursor::new(9).encode(&FeedScope::Tag("rust"));
        assert_eq!(Cursor::decode(&t, &FeedScope::Tag("rust")), Ok(Cursor::new(9)));
    }

    #[test]
    fn foreign_and_garbage_cursors_are_rejected() {
        let s = Cursor::new(5).encode(&FeedScope::Home(7));
        assert!(Cursor::decode(&s, &FeedScope::Home(8)).is_err());
        assert!(Cursor::decode(&s, &FeedScope::Profile(7)).is_err());
        for bad in ["", "abc", "!!!!", &s[..s.len() - 1], &format!("{s}AA")] {
            assert!(Cursor::decode(bad, &FeedScope::Home(7)).is_err(), "{bad:?}");
        }
        // A flipped character fails the checksum.
        let mut chars: Vec<char> = s.chars().collect();
        chars[20] = if chars[20] == 'A' { 'B' } else { 'A' };
        let flipped: String = chars.into_iter().collect();
        assert!(Cursor::decode(&flipped, &FeedScope::Home(7)).is_err());
    }

    #[test]
    fn live_cursors_carry_their_snapshot_and_are_not_other_cursors() {
        let c = LiveCursor { snapshot: 1 << 40, key: u64::MAX, aux: 3 };
        let s = c.encode(7);
        assert_eq!(LiveCursor::decode(&s, 7), Ok(c));
        assert!(LiveCursor::decode(&s, 8).is_err(), "another viewer's");
        assert!(Cursor::decode(&s, &FeedScope::Live(7)).is_err(), "the short layout");
        let home = Cursor::new(5).encode(&FeedScope::Home(7));
        assert!(LiveCursor::decode(&home, 7).is_err(), "a home cursor");
    }

    #[test]
    fn stream_marks_round_trip_and_are_not_home_cursors() {
        for items in [vec![], vec![9], (1..=StreamMark::MAX_ITEMS as u64).collect()] {
            let m = StreamMark { key: 1 << 40, aux: 3, since: 1_700_000_000_000, items };
            let s = m.encode(7);
            assert_eq!(StreamMark::decode(&s, 7), Ok(m));
            assert!(StreamMark::decode(&s, 8).is_err(), "another user's");
            assert!(Cursor::decode(&s, &FeedScope::Home(7)).is_err(), "not a home cursor");
            assert!(StreamMark::decode(&s[..s.len() - 2], 7).is_err(), "truncated");
        }
        let home = Cursor::new(5).encode(&FeedScope::Home(7));
        assert!(StreamMark::decode(&home, 7).is_err(), "a home cursor");
        assert!(StreamMark::decode("garbage", 7).is_err());
    }
}
