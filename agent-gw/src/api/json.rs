//! Strict JSON document decoding.
//!
//! serde_json keeps the *last* of two equal keys, so `{"tenant":"a",
//! "tenant":"b"}` would mean different things to different parsers — a
//! classic smuggling vector when the gateway and a handler disagree. This
//! decoder builds the same `serde_json::Value` but refuses a repeated key in
//! any object at any depth, bounds nesting, and requires exactly one JSON
//! object at the top.
//!
//! [`parse_sketch`] applies the same rules but builds only the top-level
//! members a caller names; everything else is validated and skipped
//! without allocating. The invoke path uses it: an 8 KiB payload is
//! checked, not copied into a `Value` tree.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::api::scan;

/// Deepest accepted nesting of arrays/objects.
pub const MAX_DEPTH: usize = 64;
/// Longest key quoted back in an error message.
const KEY_ECHO_MAX: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonError {
    /// Not UTF-8 JSON, trailing data, truncated.
    Syntax {
        line: usize,
        column: usize,
    },
    /// An object repeats a key (the key, truncated for the message).
    DuplicateKey(String),
    TooDeep,
    /// Valid JSON, but the top level is not an object.
    NotAnObject,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Syntax { line, column } => {
                write!(f, "malformed JSON at line {line} column {column}")
            }
            JsonError::DuplicateKey(k) => write!(f, "duplicate key {k:?} in a JSON object"),
            JsonError::TooDeep => write!(f, "JSON nested deeper than {MAX_DEPTH} levels"),
            JsonError::NotAnObject => f.write_str("request body must be a JSON object"),
        }
    }
}

impl std::error::Error for JsonError {}

/// Decodes `bytes` as one JSON object with unique keys everywhere.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, JsonError> {
    match parse_value(bytes)? {
        Value::Object(m) => Ok(m),
        _ => Err(JsonError::NotAnObject),
    }
}

/// Decodes `bytes` as one JSON value with unique keys everywhere.
pub fn parse_value(bytes: &[u8]) -> Result<Value, JsonError> {
    let found: Cell<Option<JsonError>> = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Strict {
        depth: 0,
        found: &found,
    };
    let result = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    match result {
        Ok(v) => Ok(v),
        Err(e) => Err(found.take().unwrap_or(JsonError::Syntax {
            line: e.line(),
            column: e.column(),
        })),
    }
}

/// What [`parse_sketch`] builds of a kept top-level member.
#[derive(Clone, Copy, Debug)]
pub enum Keep {
    /// The whole value.
    Whole,
    /// Only these members, if the value is an object. A value that is not
    /// an object stands as `null` when it is null and `true` otherwise, so
    /// presence and type checks (`NotObject`) still see the difference.
    Members(&'static [(&'static str, Keep)]),
}

/// The kept top-level members of a sketch, in the order of the `keep`
/// list (`None`: absent). Slots, not a map: no key strings, no tree.
pub type Slots = Vec<Option<Value>>;

/// Decodes `bytes` with the rules of [`parse_object`] (one object, unique
/// keys at every depth, depth bound) but keeps only the top-level members
/// named in `keep`, built as [`Keep`] says.
///
/// The body is validated by `api::scan`, which builds nothing; only the
/// kept members' bytes are then decoded. What the scanner refuses goes to
/// serde_json's strict decoder for the precise error.
pub fn parse_sketch(
    bytes: &[u8],
    keep: &'static [(&'static str, Keep)],
) -> Result<Slots, JsonError> {
    sketch_with_members(bytes, keep, &[]).map(|(slots, _)| slots)
}

/// [`parse_sketch`], and where the body's top-level members named in
/// `keep` or `also` are (`None` when serde_json's decoder had to decide,
/// which accepts nothing the scanner refuses).
pub fn sketch_with_members(
    bytes: &[u8],
    keep: &'static [(&'static str, Keep)],
    also: &[&str],
) -> Result<(Slots, Option<Vec<scan::Member>>), JsonError> {
    match sketch_scanned(bytes, keep, also) {
        Some((slots, mut members)) => {
            members.retain(|m| m.parent.is_none());
            Ok((slots, Some(members)))
        }
        None => sketch_with_serde(bytes, keep).map(|slots| (slots, None)),
    }
}

/// The kept member `name` of `keep`, if any.
fn kept(keep: &'static [(&'static str, Keep)], name: &[u8]) -> Option<(usize, Keep)> {
    keep.iter()
        .position(|(k, _)| k.as_bytes() == name)
        .map(|i| (i, keep[i].1))
}

/// The tag of a member of `also` that `keep` does not name.
const NOT_KEPT: u8 = u8::MAX;

/// Every slot of `keep` (and of its `Members` lists) fits a member's tag.
fn taggable(keep: &[(&str, Keep)]) -> bool {
    keep.len() < usize::from(NOT_KEPT)
        && keep.iter().all(|(_, how)| match how {
            Keep::Whole => true,
            Keep::Members(inner) => inner.len() < usize::from(NOT_KEPT),
        })
}

/// [`parse_sketch`] on what `api::scan` found; `None` when the scanner
/// refuses the body (or a `Keep` nests deeper than it records).
fn sketch_scanned(
    bytes: &[u8],
    keep: &'static [(&'static str, Keep)],
    also: &[&str],
) -> Option<(Slots, Vec<scan::Member>)> {
    // Only the kept members (and `also`'s) are written down, whatever
    // else a body holds, each tagged with its slot in `keep` (a member
    // of `also` alone with `NOT_KEPT`), so that none is looked up twice.
    // A list too long to tag (no caller has one) goes to serde's sketch.
    if !taggable(keep) {
        return None;
    }
    let tag = |slot: usize| u8::try_from(slot).ok();
    let wanted = |parent: Option<&[u8]>, name: &[u8]| match parent {
        None => match kept(keep, name) {
            Some((slot, _)) => tag(slot),
            None => also
                .iter()
                .any(|a| a.as_bytes() == name)
                .then_some(NOT_KEPT),
        },
        Some(p) => match kept(keep, p) {
            Some((_, Keep::Members(inner))) => kept(inner, name).and_then(|(slot, _)| tag(slot)),
            _ => None,
        },
    };
    let members = scan::object(bytes, &wanted)?;
    let mut slots: Slots = vec![None; keep.len()];
    for (at, m) in members.iter().enumerate() {
        if m.parent.is_some() || m.tag == NOT_KEPT {
            continue;
        }
        let slot = usize::from(m.tag);
        let raw = &bytes[m.value.clone()];
        slots[slot] = Some(match keep[slot].1 {
            Keep::Whole => scalar_or_parsed(raw)?,
            Keep::Members(inner) => match raw.first() {
                Some(b'{') => {
                    let mut out = Map::new();
                    for c in members[at + 1..]
                        .iter()
                        .take_while(|c| c.parent == Some(at))
                    {
                        let (name, how) = inner[usize::from(c.tag)];
                        match how {
                            Keep::Whole => {
                                out.insert(
                                    name.to_owned(),
                                    scalar_or_parsed(&bytes[c.value.clone()])?,
                                );
                            }
                            Keep::Members(_) => return None,
                        }
                    }
                    Value::Object(out)
                }
                Some(b'n') => Value::Null,
                _ => Value::Bool(true),
            },
        });
    }
    Some((slots, members))
}

/// A validated value's `Value`: a plain string or a small unsigned
/// integer directly (what envelope members are), anything else through
/// serde_json (the document has passed the strict rules, so it parses).
fn scalar_or_parsed(raw: &[u8]) -> Option<Value> {
    match raw {
        [b'"', inner @ .., b'"'] if !inner.contains(&b'\\') => std::str::from_utf8(inner)
            .ok()
            .map(|s| Value::String(s.to_owned())),
        [b'0'..=b'9', ..] if raw.len() <= 19 && raw.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(raw)
                .ok()?
                .parse::<u64>()
                .ok()
                .map(Value::from)
        }
        _ => serde_json::from_slice(raw).ok(),
    }
}

/// [`parse_sketch`] by serde_json's visitor: the precise error of a body
/// the scanner refused. Public for the differential fuzz target.
#[doc(hidden)]
pub fn sketch_with_serde(
    bytes: &[u8],
    keep: &'static [(&'static str, Keep)],
) -> Result<Slots, JsonError> {
    let found: Cell<Option<JsonError>> = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Top {
        found: &found,
        keep,
    };
    let result = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    match result {
        Ok(Some(slots)) => Ok(slots),
        Ok(None) => Err(JsonError::NotAnObject),
        Err(e) => Err(found.take().unwrap_or(JsonError::Syntax {
            line: e.line(),
            column: e.column(),
        })),
    }
}

/// The top level of a sketch: an object's kept members into slots; any
/// other value is validated and answered `None` (not an object).
#[derive(Clone, Copy)]
struct Top<'a> {
    found: &'a Cell<Option<JsonError>>,
    keep: &'static [(&'static str, Keep)],
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Option<Slots>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Option<Slots>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let skip = Skip {
            depth: 0,
            found: self.found,
        };
        skip.visit_seq(seq).map(|()| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let strict = Strict {
            depth: 0,
            found: self.found,
        }
        .nested()?;
        let skip = Skip {
            depth: strict.depth,
            found: self.found,
        };
        let mut seen = Seen::new();
        let mut slots: Slots = vec![None; self.keep.len()];
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if !seen.insert(key.clone()) {
                return Err(strict.fail(duplicate(&key)));
            }
            let at = self.keep.iter().position(|(k, _)| *k == key);
            match at.map(|i| (i, self.keep[i].1)) {
                Some((i, Keep::Whole)) => slots[i] = Some(map.next_value_seed(strict)?),
                Some((i, Keep::Members(keep))) => {
                    slots[i] = Some(map.next_value_seed(Sketch {
                        depth: strict.depth,
                        found: self.found,
                        keep,
                    })?)
                }
                None => map.next_value_seed(skip)?,
            }
        }
        Ok(Some(slots))
    }
}

fn duplicate(key: &str) -> JsonError {
    let mut cut = key.len().min(KEY_ECHO_MAX);
    while !key.is_char_boundary(cut) {
        cut -= 1;
    }
    JsonError::DuplicateKey(key[..cut].to_owned())
}

/// Keys seen in one object: a short list scanned linearly (envelopes have
/// about ten keys), a hash set past that so a body of many keys stays
/// linear. Keys are names (`Cow<str>`, serde's visitor) or their UTF-8
/// bytes (`Cow<[u8]>`, `api::scan`, which so never converts a key).
pub(crate) enum Seen<K> {
    Few(Vec<K>),
    Many(HashSet<K>),
}

const FEW_KEYS: usize = 16;

impl<K: Eq + std::hash::Hash> Seen<K> {
    pub(crate) fn new() -> Self {
        Seen::Few(Vec::new())
    }

    /// Records `key`; `false` if it was already there.
    pub(crate) fn insert(&mut self, key: K) -> bool {
        match self {
            Seen::Few(v) if v.contains(&key) => false,
            Seen::Few(v) if v.len() < FEW_KEYS => {
                // One allocation for the whole short list, and none for
                // an empty object.
                if v.capacity() == 0 {
                    v.reserve_exact(FEW_KEYS);
                }
                v.push(key);
                true
            }
            Seen::Few(v) => {
                let mut set: HashSet<K> = v.drain(..).collect();
                set.insert(key);
                *self = Seen::Many(set);
                true
            }
            Seen::Many(set) => set.insert(key),
        }
    }
}

/// An object key, borrowed from the input unless it had escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Validates a value (unique keys, depth) and builds nothing.
#[derive(Clone, Copy)]
struct Skip<'a> {
    depth: usize,
    found: &'a Cell<Option<JsonError>>,
}

impl Skip<'_> {
    fn nested<E: de::Error>(&self) -> Result<Self, E> {
        Strict {
            depth: self.depth,
            found: self.found,
        }
        .nested()
        .map(|s| Skip {
            depth: s.depth,
            found: s.found,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Skip<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inner = self.nested()?;
        let mut seen = Seen::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if !seen.insert(key.clone()) {
                let e = duplicate(&key);
                let msg = e.to_string();
                self.found.set(Some(e));
                return Err(de::Error::custom(msg));
            }
            map.next_value_seed(inner)?;
        }
        Ok(())
    }
}

/// Builds the members named in `keep` of an object and validates the rest.
#[derive(Clone, Copy)]
struct Sketch<'a> {
    depth: usize,
    found: &'a Cell<Option<JsonError>>,
    keep: &'static [(&'static str, Keep)],
}

impl Sketch<'_> {
    fn skip(&self) -> Skip<'_> {
        Skip {
            depth: self.depth,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Sketch<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Sketch<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Bool(true))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Bool(true))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Bool(true))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Bool(true))
    }
    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Bool(true))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        self.skip().visit_seq(seq).map(|()| Value::Bool(true))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let strict = Strict {
            depth: self.depth,
            found: self.found,
        }
        .nested()?;
        let skip = Skip {
            depth: strict.depth,
            found: self.found,
        };
        let mut seen = Seen::new();
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            if !seen.insert(key.clone()) {
                return Err(strict.fail(duplicate(&key)));
            }
            match self.keep.iter().find(|(k, _)| *k == key) {
                Some((_, Keep::Whole)) => {
                    let v = map.next_value_seed(strict)?;
                    out.insert(key.into_owned(), v);
                }
                Some((_, Keep::Members(keep))) => {
                    let v = map.next_value_seed(Sketch {
                        depth: strict.depth,
                        found: self.found,
                        keep,
                    })?;
                    out.insert(key.into_owned(), v);
                }
                None => map.next_value_seed(skip)?,
            }
        }
        Ok(Value::Object(out))
    }
}

/// A `Value` seed that tracks depth and reports the precise problem
/// through `found` (serde's error type only carries text).
#[derive(Clone, Copy)]
struct Strict<'a> {
    depth: usize,
    found: &'a Cell<Option<JsonError>>,
}

impl Strict<'_> {
    fn fail<E: de::Error>(&self, e: JsonError) -> E {
        let msg = e.to_string();
        self.found.set(Some(e));
        E::custom(msg)
    }

    fn nested<E: de::Error>(&self) -> Result<Self, E> {
        if self.depth + 1 > MAX_DEPTH {
            return Err(self.fail(JsonError::TooDeep));
        }
        Ok(Strict {
            depth: self.depth + 1,
            found: self.found,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(inner)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.nested()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let mut shown = key;
                if shown.len() > KEY_ECHO_MAX {
                    let mut cut = KEY_ECHO_MAX;
                    while !shown.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    shown.truncate(cut);
                }
                return Err(self.fail(JsonError::DuplicateKey(shown)));
            }
            let v = map.next_value_seed(inner)?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_plain_object() {
        let m = parse_object(br#"{"a":1,"b":{"c":[1,2,{"d":null}]}}"#).unwrap();
        assert_eq!(m["b"]["c"][2]["d"], Value::Null);
    }

    #[test]
    fn refuses_duplicate_top_level_key() {
        assert_eq!(
            parse_object(br#"{"tenant":"a","tenant":"b"}"#),
            Err(JsonError::DuplicateKey("tenant".into()))
        );
    }

    #[test]
    fn refuses_duplicate_key_deep_inside_arrays() {
        let e = parse_object(br#"{"payload":[{"x":{"y":1,"y":2}}]}"#).unwrap_err();
        assert_eq!(e, JsonError::DuplicateKey("y".into()));
    }

    #[test]
    fn escaped_spelling_of_the_same_key_is_a_duplicate() {
        let e = parse_object(br#"{"tenant":"a","\u0074enant":"b"}"#).unwrap_err();
        assert_eq!(e, JsonError::DuplicateKey("tenant".into()));
    }

    #[test]
    fn equal_keys_in_sibling_objects_are_fine() {
        assert!(parse_object(br#"{"a":{"k":1},"b":{"k":2}}"#).is_ok());
    }

    #[test]
    fn refuses_syntax_errors_trailing_data_and_non_objects() {
        assert!(matches!(
            parse_object(br#"{"a":"#),
            Err(JsonError::Syntax { .. })
        ));
        assert!(matches!(
            parse_object(br#"{"a":1} x"#),
            Err(JsonError::Syntax { .. })
        ));
        assert!(matches!(
            parse_object(b"\xff"),
            Err(JsonError::Syntax { .. })
        ));
        assert_eq!(parse_object(b"[1]"), Err(JsonError::NotAnObject));
    }

    const KEEP: &[(&str, Keep)] = &[
        ("a", Keep::Whole),
        ("p", Keep::Members(&[("c", Keep::Whole)])),
    ];

    #[test]
    fn sketch_keeps_only_named_members() {
        let s = parse_sketch(br#"{"p":{"c":2,"d":[3]},"b":"big","a":{"x":[1]}}"#, KEEP).unwrap();
        assert_eq!(
            s,
            [
                Some(serde_json::json!({"x":[1]})),
                Some(serde_json::json!({"c":2}))
            ]
        );
        let s = parse_sketch(br#"{"p":"text"}"#, KEEP).unwrap();
        assert_eq!(s, [None, Some(Value::Bool(true))]);
        let s = parse_sketch(br#"{"p":null}"#, KEEP).unwrap();
        assert_eq!(s, [None, Some(Value::Null)]);
    }

    #[test]
    fn sketch_refuses_what_parse_object_refuses() {
        let cases: [&[u8]; 8] = [
            br#"{"a":1,"a":2}"#,
            br#"{"b":[{"y":1,"y":2}]}"#,
            br#"{"b":{"t":1,"\u0074":2}}"#,
            br#"{"p":{"c":1,"c":1}}"#,
            br#"{"a":"#,
            br#"{"a":1} x"#,
            b"[1]",
            b"\xff",
        ];
        for c in cases {
            assert_eq!(parse_sketch(c, KEEP).err(), parse_object(c).err(), "{c:?}");
            assert!(parse_sketch(c, KEEP).is_err());
        }
        let deep = format!(
            r#"{{"b":{}{}}}"#,
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert_eq!(parse_sketch(deep.as_bytes(), KEEP), Err(JsonError::TooDeep));
        assert_eq!(parse_object(deep.as_bytes()), Err(JsonError::TooDeep));
    }

    #[test]
    fn the_scanned_sketch_is_the_serde_sketch() {
        let docs: [&[u8]; 6] = [
            br#"{"p":{"c":2,"d":[3]},"b":"big","a":{"x":[1]}}"#,
            br#"{"p":"text","a":"\u00e9t\u00e9"}"#,
            br#"{"p":null,"a":-12.5e3}"#,
            br#"{"p":{"\u0063":[1,{"k":null}]},"a":18446744073709551615}"#,
            br#"{"p":[1],"a":18446744073709551616}"#,
            br#"{"a":0,"p":{}}"#,
        ];
        for d in docs {
            let (scanned, _) = sketch_scanned(d, KEEP, &[]).expect("the scanner accepts it");
            assert_eq!(Ok(scanned), sketch_with_serde(d, KEEP), "{d:?}");
        }
    }

    #[test]
    fn a_body_of_many_members_writes_down_only_the_kept_ones() {
        // Memory for what is kept, not for what a body holds.
        let many: String = (0..1000).map(|i| format!(r#""k{i}":{i},"#)).collect();
        let doc = format!(r#"{{"p":{{{many}"c":1}},"x":{{{many}"c":2}},{many}"a":3}}"#);
        let (slots, members) = sketch_scanned(doc.as_bytes(), KEEP, &[]).unwrap();
        assert_eq!(members.len(), 3, "p, its c, and a");
        assert_eq!(
            slots,
            [
                Some(serde_json::json!(3)),
                Some(serde_json::json!({"c": 1}))
            ]
        );
    }

    #[test]
    fn sketch_finds_a_duplicate_among_many_keys() {
        let mut doc: String = (0..100).map(|i| format!(r#""k{i}":{i},"#)).collect();
        doc = format!("{{{doc}\"k7\":0}}");
        assert_eq!(
            parse_sketch(doc.as_bytes(), KEEP),
            Err(JsonError::DuplicateKey("k7".into()))
        );
    }

    #[test]
    fn bounds_nesting_depth() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert!(parse_value(ok.as_bytes()).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(parse_value(deep.as_bytes()), Err(JsonError::TooDeep));
        let very_deep = "[".repeat(100_000);
        assert!(parse_value(very_deep.as_bytes()).is_err());
    }
}
