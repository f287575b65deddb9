//! Typed field extraction from a decoded JSON object, with errors that name
//! the field and the problem (they become `invalid_field` answers).

use std::fmt;

use serde_json::{Map, Value};

use crate::api::error::{ApiError, ErrorCode};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    Missing,
    NotString,
    Empty,
    TooLong(usize),
    NotInteger,
    OutOfRange { min: u64, max: u64 },
    NotBool,
    NotObject,
    NotArray,
    Invalid(&'static str),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: &'static str,
    pub problem: Problem,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field;
        match &self.problem {
            Problem::Missing => write!(f, "field {field} is required"),
            Problem::NotString => write!(f, "field {field} must be a string"),
            Problem::Empty => write!(f, "field {field} must not be empty"),
            Problem::TooLong(max) => write!(f, "field {field} is longer than {max} bytes"),
            Problem::NotInteger => write!(f, "field {field} must be an integer"),
            Problem::OutOfRange { min, max } => {
                write!(f, "field {field} must be between {min} and {max}")
            }
            Problem::NotBool => write!(f, "field {field} must be a boolean"),
            Problem::NotObject => write!(f, "field {field} must be an object"),
            Problem::NotArray => write!(f, "field {field} must be an array of strings"),
            Problem::Invalid(why) => write!(f, "field {field} is invalid: {why}"),
        }
    }
}

impl std::error::Error for FieldError {}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> ApiError {
        ApiError::new(ErrorCode::InvalidField, e.to_string())
    }
}

pub fn err(field: &'static str, problem: Problem) -> FieldError {
    FieldError { field, problem }
}

/// Absent and JSON `null` both count as "not given".
fn get<'a>(m: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    m.get(field).filter(|v| !v.is_null())
}

pub fn opt_str<'a>(
    m: &'a Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<Option<&'a str>, FieldError> {
    str_of(get(m, field), field, max)
}

/// [`opt_str`] of a value held outside a map (`None`/null: not given).
pub fn str_of<'a>(
    v: Option<&'a Value>,
    field: &'static str,
    max: usize,
) -> Result<Option<&'a str>, FieldError> {
    match v.filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Err(err(field, Problem::Empty)),
        Some(Value::String(s)) if s.len() > max => Err(err(field, Problem::TooLong(max))),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(field, Problem::NotString)),
    }
}

pub fn req_str<'a>(
    m: &'a Map<String, Value>,
    field: &'static str,
    max: usize,
) -> Result<&'a str, FieldError> {
    opt_str(m, field, max)?.ok_or(err(field, Problem::Missing))
}

/// An integer in `[min, max]`; booleans and fractions are refused.
pub fn opt_uint(
    m: &Map<String, Value>,
    field: &'static str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, FieldError> {
    uint_of(get(m, field), field, min, max)
}

/// [`opt_uint`] of a value held outside a map.
pub fn uint_of(
    v: Option<&Value>,
    field: &'static str,
    min: u64,
    max: u64,
) -> Result<Option<u64>, FieldError> {
    match v.filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(u) = n.as_u64() {
                if (min..=max).contains(&u) {
                    return Ok(Some(u));
                }
                Err(err(field, Problem::OutOfRange { min, max }))
            } else if n.is_i64() {
                Err(err(field, Problem::OutOfRange { min, max }))
            } else {
                Err(err(field, Problem::NotInteger))
            }
        }
        Some(_) => Err(err(field, Problem::NotInteger)),
    }
}

pub fn req_uint(
    m: &Map<String, Value>,
    field: &'static str,
    min: u64,
    max: u64,
) -> Result<u64, FieldError> {
    opt_uint(m, field, min, max)?.ok_or(err(field, Problem::Missing))
}

pub fn opt_bool(m: &Map<String, Value>, field: &'static str) -> Result<Option<bool>, FieldError> {
    match get(m, field) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(err(field, Problem::NotBool)),
    }
}

pub fn opt_object<'a>(
    m: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a Map<String, Value>>, FieldError> {
    object_of(get(m, field), field)
}

/// [`opt_object`] of a value held outside a map.
pub fn object_of<'a>(
    v: Option<&'a Value>,
    field: &'static str,
) -> Result<Option<&'a Map<String, Value>>, FieldError> {
    match v.filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(err(field, Problem::NotObject)),
    }
}

/// A list of at most `max_items` non-empty strings of at most `max_len`.
pub fn opt_str_list(
    m: &Map<String, Value>,
    field: &'static str,
    max_items: usize,
    max_len: usize,
) -> Result<Vec<Box<str>>, FieldError> {
    match get(m, field) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            if items.len() > max_items {
                return Err(err(field, Problem::Invalid("too many items")));
            }
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) if !s.is_empty() && s.len() <= max_len => {
                        Ok(s.as_str().into())
                    }
                    _ => Err(err(field, Problem::NotArray)),
                })
                .collect()
        }
        Some(_) => Err(err(field, Problem::NotArray)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn integers_refuse_bools_fractions_and_negatives() {
        let m = obj(json!({"a": true, "b": 1.5, "c": -1, "d": 7}));
        assert_eq!(
            opt_uint(&m, "a", 0, 9).unwrap_err().problem,
            Problem::NotInteger
        );
        assert_eq!(
            opt_uint(&m, "b", 0, 9).unwrap_err().problem,
            Problem::NotInteger
        );
        assert_eq!(
            opt_uint(&m, "c", 0, 9).unwrap_err().problem,
            Problem::OutOfRange { min: 0, max: 9 }
        );
        assert_eq!(opt_uint(&m, "d", 0, 9).unwrap(), Some(7));
        assert_eq!(opt_uint(&m, "zz", 0, 9).unwrap(), None);
    }

    #[test]
    fn strings_are_bounded_and_non_empty() {
        let m = obj(json!({"a": "", "b": "xyz", "c": 3}));
        assert_eq!(req_str(&m, "a", 5).unwrap_err().problem, Problem::Empty);
        assert_eq!(
            req_str(&m, "b", 2).unwrap_err().problem,
            Problem::TooLong(2)
        );
        assert_eq!(req_str(&m, "c", 5).unwrap_err().problem, Problem::NotString);
        assert_eq!(
            req_str(&m, "d", 5).unwrap_err().to_string(),
            "field d is required"
        );
    }
}
