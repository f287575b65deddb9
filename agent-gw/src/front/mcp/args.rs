//! Tool arguments checked against the tool's input schema before the call
//! leaves the gateway (MCP: servers MUST validate tool inputs).
//!
//! A JSON Schema subset, the part that says what shape a value has:
//! `type` (one or a list; `integer` is a number with no fraction),
//! `enum`, `const`, `properties`, `required`, `additionalProperties`
//! (`false` or a schema), `items` (one schema), `minItems`/`maxItems`,
//! `minLength`/`maxLength` (in characters), `minimum`/`maximum`,
//! `exclusiveMinimum`/`exclusiveMaximum` (numbers), and `allOf`/`anyOf`/
//! `oneOf`/`not`. Every other keyword (`pattern`, `format`, `$ref`, …) is
//! not enforced: the check only refuses what the schema certainly forbids,
//! so a schema this gateway does not fully understand never refuses a
//! valid call; the handler still sees everything that passes.
//!
//! The walk follows the schema, so its depth is the schema's (bounded by
//! [`MAX_DEPTH`]; beyond it nothing more is checked); a schema is at most
//! a few KiB (registration and config bound it).

use std::fmt;

use serde_json::{Map, Value};

/// Schema nesting beyond which nothing more is checked.
pub const MAX_DEPTH: usize = 32;

/// Why arguments do not fit: where (a JSON Pointer into the arguments)
/// and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub at: String,
    pub expected: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.at.is_empty() { "/" } else { &self.at };
        write!(f, "arguments at {at}: {}", self.expected)
    }
}

/// Checks `args` against `schema` (a JSON Schema object; anything else,
/// such as `true`, accepts everything and `false` nothing).
pub fn check(schema: &Value, args: &Value) -> Result<(), Violation> {
    let mut at = String::new();
    walk(schema, args, &mut at, 0)
}

/// Longest expectation in a message (a schema's names and constants
/// can be long; the message is for a model to correct its call).
pub const MAX_EXPECTED: usize = 256;

fn fail(at: &str, expected: impl Into<String>) -> Result<(), Violation> {
    Err(Violation {
        at: at.to_string(),
        expected: clip(expected.into(), MAX_EXPECTED),
    })
}

/// `t` cut to at most `max` bytes on a character boundary, marked `...`.
fn clip(mut t: String, max: usize) -> String {
    if t.len() > max {
        let mut cut = max - 3;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
        t.push_str("...");
    }
    t
}

fn walk(schema: &Value, v: &Value, at: &mut String, depth: usize) -> Result<(), Violation> {
    let s = match schema {
        Value::Bool(false) => return fail(at, "nothing (the schema is false)"),
        Value::Object(s) if depth < MAX_DEPTH => s,
        _ => return Ok(()),
    };
    if let Some(t) = s.get("type") {
        type_matches(t, v).map_or(Ok(()), |want| fail(at, format!("{want}, got {}", kind(v))))?;
    }
    if let Some(Value::Array(options)) = s.get("enum") {
        if !options.iter().any(|o| same(o, v)) {
            return fail(at, format!("one of {}", list(options)));
        }
    }
    if let Some(c) = s.get("const") {
        if !same(c, v) {
            return fail(at, format!("the value {}", short(c)));
        }
    }
    match v {
        Value::Object(o) => object(s, o, at, depth)?,
        Value::Array(a) => array(s, a, at, depth)?,
        Value::String(t) => {
            let min = s.get("minLength").and_then(Value::as_u64);
            let max = s.get("maxLength").and_then(Value::as_u64);
            // Counting characters walks the string: only when bounded.
            if min.is_some() || max.is_some() {
                let n = t.chars().count() as u64;
                if let Some(min) = min.filter(|&m| n < m) {
                    return fail(at, format!("at least {min} characters, got {n}"));
                }
                if let Some(max) = max.filter(|&m| n > m) {
                    return fail(at, format!("at most {max} characters, got {n}"));
                }
            }
        }
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                number(s, x, at)?;
            }
        }
        _ => {}
    }
    combinators(s, v, at, depth)
}

/// `None` when `v` has one of the types `t` names, else what was wanted.
/// A `type` that names no known type constrains nothing.
fn type_matches(t: &Value, v: &Value) -> Option<String> {
    let names: Vec<&str> = match t {
        Value::String(n) => vec![n.as_str()],
        Value::Array(ns) => ns.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let known = |n: &&str| {
        matches!(
            *n,
            "object" | "array" | "string" | "number" | "integer" | "boolean" | "null"
        )
    };
    if names.is_empty() || !names.iter().all(known) {
        return None;
    }
    if names.iter().any(|n| is_type(n, v)) {
        None
    } else {
        Some(names.join(" or "))
    }
}

fn is_type(name: &str, v: &Value) -> bool {
    match (name, v) {
        ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("number", Value::Number(_))
        | ("boolean", Value::Bool(_))
        | ("null", Value::Null) => true,
        ("integer", Value::Number(n)) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|x| x.fract() == 0.0)
        }
        _ => false,
    }
}

fn object(
    s: &Map<String, Value>,
    o: &Map<String, Value>,
    at: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    if let Some(Value::Array(req)) = s.get("required") {
        if let Some(missing) = req
            .iter()
            .filter_map(Value::as_str)
            .find(|k| !o.contains_key(*k))
        {
            return fail(at, format!("the required property '{missing}'"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    let extra = s.get("additionalProperties");
    for (k, val) in o {
        let len = at.len();
        push_key(at, k);
        let r = match props.and_then(|p| p.get(k)) {
            Some(sub) => walk(sub, val, at, depth + 1),
            None => match extra {
                Some(Value::Bool(false)) => {
                    at.truncate(len);
                    return fail(at, format!("no property '{k}' (not in the schema)"));
                }
                Some(sub @ Value::Object(_)) => walk(sub, val, at, depth + 1),
                _ => Ok(()),
            },
        };
        r?;
        at.truncate(len);
    }
    Ok(())
}

fn array(
    s: &Map<String, Value>,
    a: &[Value],
    at: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    let n = a.len() as u64;
    if let Some(min) = s.get("minItems").and_then(Value::as_u64) {
        if n < min {
            return fail(at, format!("at least {min} items, got {n}"));
        }
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64) {
        if n > max {
            return fail(at, format!("at most {max} items, got {n}"));
        }
    }
    if let Some(items @ (Value::Object(_) | Value::Bool(_))) = s.get("items") {
        for (i, item) in a.iter().enumerate() {
            let len = at.len();
            at.push('/');
            at.push_str(&i.to_string());
            walk(items, item, at, depth + 1)?;
            at.truncate(len);
        }
    }
    Ok(())
}

fn number(s: &Map<String, Value>, x: f64, at: &str) -> Result<(), Violation> {
    let bound = |k: &str| s.get(k).and_then(Value::as_f64);
    if let Some(m) = bound("minimum") {
        if x < m {
            return fail(at, format!("a number >= {m}, got {x}"));
        }
    }
    if let Some(m) = bound("maximum") {
        if x > m {
            return fail(at, format!("a number <= {m}, got {x}"));
        }
    }
    if let Some(m) = bound("exclusiveMinimum") {
        if x <= m {
            return fail(at, format!("a number > {m}, got {x}"));
        }
    }
    if let Some(m) = bound("exclusiveMaximum") {
        if x >= m {
            return fail(at, format!("a number < {m}, got {x}"));
        }
    }
    Ok(())
}

fn combinators(
    s: &Map<String, Value>,
    v: &Value,
    at: &mut String,
    depth: usize,
) -> Result<(), Violation> {
    if let Some(Value::Array(all)) = s.get("allOf") {
        for sub in all {
            walk(sub, v, at, depth + 1)?;
        }
    }
    let fits = |sub: &Value| walk(sub, v, &mut at.clone(), depth + 1).is_ok();
    if let Some(Value::Array(any)) = s.get("anyOf") {
        if !any.is_empty() && !any.iter().any(fits) {
            return fail(at, "a value matching one of the anyOf schemas");
        }
    }
    if let Some(Value::Array(one)) = s.get("oneOf") {
        if !one.is_empty() && one.iter().filter(|sub| fits(sub)).count() != 1 {
            return fail(at, "a value matching exactly one of the oneOf schemas");
        }
    }
    if let Some(not) = s.get("not") {
        if fits(not) {
            return fail(at, "a value the 'not' schema refuses");
        }
    }
    Ok(())
}

/// JSON equality with numbers compared by value (1 and 1.0 are equal).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| same(p, q)))
        }
        _ => a == b,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value for a message, cut short: schemas may hold long constants.
fn short(v: &Value) -> String {
    clip(v.to_string(), 64)
}

fn list(options: &[Value]) -> String {
    let shown: Vec<String> = options.iter().take(8).map(short).collect();
    let more = if options.len() > 8 { ", ..." } else { "" };
    format!("[{}{more}]", shown.join(", "))
}

/// Appends `/key` as a JSON Pointer token (RFC 6901: `~` and `/` escaped).
fn push_key(at: &mut String, k: &str) {
    at.push('/');
    for c in k.chars() {
        match c {
            '~' => at.push_str("~0"),
            '/' => at.push_str("~1"),
            c => at.push(c),
        }
    }
}

#[cfg(test)]
mod tests;
