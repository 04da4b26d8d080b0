//! An item's body: an opaque JSON object, kept as its JSON text.
//!
//! A body is held the way it is stored and sent: compact JSON text with its
//! keys in order (as `serde_json` writes a map), shared by every copy of the
//! item. A page writes it out as it is, a store reads it back with one
//! syntax check and no tree built, and it takes in memory what it takes on
//! disk (a parsed map took about three times as much: every entry a node of
//! a B-tree with room for eleven).
//!
//! Bodies from clients are built with [`Body::new`] from a parsed object,
//! which writes the canonical text. Bodies read back from a store
//! ([`Body::from_json`], or deserialized as part of a record) are taken as
//! they were written: the check is only that the text is a JSON object, so
//! the text a store holds must be one this module wrote.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::sync::Arc;

/// An item's body: a JSON object, as its canonical text, shared.
#[derive(Clone)]
pub struct Body(Arc<RawValue>);

impl Body {
    /// The body holding `map`, as its canonical text.
    pub fn new(map: &Map<String, Value>) -> Self {
        // A map of JSON values always serializes: its keys are strings.
        let text = serde_json::to_string(map).unwrap_or_else(|_| "{}".to_owned());
        Body::trusted(text)
    }

    /// A body read back from a store: `bytes` must be a JSON object this
    /// module wrote (its syntax is checked; its form is kept as it is).
    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The canonical text of the body (compact JSON, keys in order).
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The size of its JSON text in bytes (what the body limit counts).
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Whether it is the empty object.
    pub fn is_empty(&self) -> bool {
        self.0.get() == "{}"
    }

    /// The body as a parsed map (a copy).
    pub fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }

    /// Whether `a` and `b` are the same allocation (not only equal).
    pub fn ptr_eq(a: &Body, b: &Body) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The heap bytes this body's allocation takes (its text and the
    /// shared counts, as the allocator sizes it). Copies share it.
    pub fn heap_bytes(&self) -> usize {
        allocated(self.len() + 2 * std::mem::size_of::<usize>())
    }

    fn trusted(text: String) -> Self {
        // `text` is JSON written by serde_json, so this cannot fail.
        let raw = RawValue::from_string(text).unwrap_or_else(|_| empty_raw());
        Body(Arc::from(raw))
    }
}

/// What an allocation of `n` bytes takes: `n` rounded up to the
/// allocator's size class (words up to 64 bytes, then four classes to each
/// doubling up to 128 KiB, as mimalloc, the server's allocator, sizes them;
/// larger ones take whole 4 KiB pages).
pub fn allocated(n: usize) -> usize {
    if n <= 64 {
        return n.next_multiple_of(8).max(8);
    }
    if n > 128 << 10 {
        return n.next_multiple_of(4 << 10);
    }
    let below = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
    n.next_multiple_of(below / 4)
}

fn empty_raw() -> Box<RawValue> {
    RawValue::from_string("{}".to_owned()).expect("{} is JSON")
}

impl Default for Body {
    fn default() -> Self {
        Body(Arc::from(empty_raw()))
    }
}

impl From<Map<String, Value>> for Body {
    fn from(map: Map<String, Value>) -> Self {
        Body::new(&map)
    }
}

impl From<&Map<String, Value>> for Body {
    fn from(map: &Map<String, Value>) -> Self {
        Body::new(map)
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for Body {}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

impl Serialize for Body {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Body {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        if !raw.get().starts_with('{') {
            return Err(serde::de::Error::invalid_type(serde::de::Unexpected::Other("a JSON value"), &"a JSON object"));
        }
        Ok(Body(Arc::from(raw)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("an object"),
        }
    }

    #[test]
    fn a_body_is_its_canonical_text() {
        let b = Body::new(&map(json!({"z": 1, "a": {"y": [1.5, "é\n"], "b": null}})));
        assert_eq!(b.as_str(), r#"{"a":{"b":null,"y":[1.5,"é\n"]},"z":1}"#);
        assert_eq!(b.len(), b.as_str().len());
        assert_eq!(Body::default().as_str(), "{}");
        assert!(Body::default().is_empty() && !b.is_empty());
        assert_eq!(b.to_map(), map(json!({"z": 1, "a": {"y": [1.5, "é\n"], "b": null}})));
    }

    #[test]
    fn it_is_written_out_as_it_is_and_read_back_equal() {
        let b = Body::new(&map(json!({"text": "hi \"there\"", "n": 3})));
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Rec {
            id: u64,
            body: Body,
        }
        let text = serde_json::to_string(&Rec { id: 7, body: b.clone() }).expect("json");
        assert_eq!(text, r#"{"id":7,"body":{"n":3,"text":"hi \"there\""}}"#);
        let back: Rec = serde_json::from_str(&text).expect("read");
        assert_eq!(back, Rec { id: 7, body: b.clone() });
        assert_eq!(Body::from_json(b.as_str().as_bytes()).expect("body"), b);
    }

    #[test]
    fn only_an_object_is_a_body() {
        for bad in ["[1]", "1", "\"x\"", "null", "{", "{\"a\":}", ""] {
            assert!(Body::from_json(bad.as_bytes()).is_err(), "{bad}");
            assert!(serde_json::from_str::<Body>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allocations_are_counted_by_size_class() {
        let got: Vec<usize> = [1, 8, 9, 64, 65, 80, 81, 128, 129, 400, 1296, 200_000].map(allocated).to_vec();
        assert_eq!(got, vec![8, 8, 16, 64, 80, 80, 96, 128, 160, 448, 1536, 200_704]);
    }

    #[test]
    fn equal_bodies_compare_equal_and_copies_share() {
        let a = Body::new(&map(json!({"b": 2, "a": 1})));
        let b = Body::from_json(br#"{"a":1,"b":2}"#).expect("body");
        assert_eq!(a, b);
        assert!(!Body::ptr_eq(&a, &b));
        assert!(Body::ptr_eq(&a, &a.clone()));
    }
}
