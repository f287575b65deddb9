//! Strict JSON document decoding.
//!
//! serde_json keeps the *last* of two equal keys, so `{"tenant":"a",
//! "tenant":"b"}` would mean different things to different parsers — a
//! classic smuggling vector when the gateway and a handler disagree. This
//! decoder builds the same `serde_json::Value` but refuses a repeated key in
//! any object at any depth, bounds nesting, and requires exactly one JSON
//! object at the top.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

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
