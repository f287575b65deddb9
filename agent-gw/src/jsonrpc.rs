//! JSON-RPC 2.0 messages, shared by MCP (`/mcp`) and A2A (`/a2a`).
//!
//! One bounded decoder for one message: the body size is already bounded
//! by the body read; here the JSON goes through the gateway's strict
//! decoder (a repeated key is refused at any depth, nesting is bounded),
//! and ids and method names are bounded in length, so nothing a client
//! sends can make an id or a method name that is expensive to keep or to
//! echo. Every refusal is a typed [`DecodeError`] that maps onto the
//! spec's codes (-32700 parse error, -32600 invalid request) and carries
//! the request's id when one could be read, so the error answer can name
//! the request it refuses.
//!
//! The encoders write the three answer shapes (result, error,
//! notification) as bytes, ready for a JSON body or an SSE `data:` line.

use std::fmt;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::api::json::{self, JsonError};

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal JSON-RPC error.
pub const INTERNAL_ERROR: i64 = -32603;

/// Longest accepted string id (bytes). Ids are echoed in answers and
/// kept while a request runs (cancellation names them).
pub const MAX_ID_LEN: usize = 256;
/// Longest accepted method name (bytes).
pub const MAX_METHOD_LEN: usize = 256;

/// A request id. `null` is not an id: a request with `"id": null` is
/// invalid (JSON-RPC reserves null for answers to unreadable requests).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Number(i64),
    Text(Box<str>),
}

impl Id {
    pub fn to_value(&self) -> Value {
        match self {
            Id::Number(n) => Value::from(*n),
            Id::Text(s) => Value::from(&**s),
        }
    }

    /// Reads an id value (a number that is an integer in i64, or a
    /// bounded string); `None` for anything else, null included.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => n.as_i64().map(Id::Number),
            Value::String(s) if s.len() <= MAX_ID_LEN => Some(Id::Text(s.as_str().into())),
            _ => None,
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// The error member of an answer.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: Box<str>,
        /// `params` as sent (an object or an array); `None` when absent.
        params: Option<Value>,
    },
    Notification {
        method: Box<str>,
        params: Option<Value>,
    },
    /// An answer to a request the server sent (MCP clients answer
    /// server-initiated requests such as `ping`).
    Response {
        id: Id,
        outcome: Result<Value, ErrorObject>,
    },
}

impl Message {
    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            Message::Response { .. } => None,
        }
    }
}

/// Why a body is not one JSON-RPC message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON at all (-32700).
    Parse(String),
    /// JSON, but not a valid message (-32600). `id` is the request's id
    /// when it could be read, so the answer can carry it.
    Invalid { id: Option<Id>, reason: String },
}

impl DecodeError {
    /// The spec's error code.
    pub fn code(&self) -> i64 {
        match self {
            DecodeError::Parse(_) => PARSE_ERROR,
            DecodeError::Invalid { .. } => INVALID_REQUEST,
        }
    }

    /// The id to answer with (`null` when unknown).
    pub fn id(&self) -> Option<&Id> {
        match self {
            DecodeError::Parse(_) => None,
            DecodeError::Invalid { id, .. } => id.as_ref(),
        }
    }

    /// The error answer for this refusal.
    pub fn to_answer(&self) -> Bytes {
        error(self.id(), self.code(), &self.to_string(), None)
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Parse(m) => write!(f, "parse error: {m}"),
            DecodeError::Invalid { reason, .. } => write!(f, "invalid request: {reason}"),
        }
    }
}

impl std::error::Error for DecodeError {}

fn invalid(id: Option<Id>, reason: impl Into<String>) -> DecodeError {
    DecodeError::Invalid {
        id,
        reason: reason.into(),
    }
}

/// Decodes one JSON-RPC 2.0 message (batches are refused: none of the
/// protocol revisions we serve lets a client batch; 2025-03-26 allowed it
/// but no client we serve sends one, and refusing is typed).
pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
    let value = json::parse_value(bytes).map_err(|e| match e {
        JsonError::Syntax { .. } => DecodeError::Parse(e.to_string()),
        other => invalid(None, other.to_string()),
    })?;
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => return Err(invalid(None, "batches are not supported")),
        _ => return Err(invalid(None, "a message must be a JSON object")),
    };
    // The id first, so every later refusal can name the request.
    let id = match obj.remove("id") {
        None => None,
        Some(v) => Some(Id::from_value(&v).ok_or_else(|| {
            invalid(
                None,
                format!(
                    "'id' must be an integer or a string of at most {MAX_ID_LEN} bytes (not null)"
                ),
            )
        })?),
    };
    match obj.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        _ => return Err(invalid(id, "'jsonrpc' must be \"2.0\"")),
    }
    if let Some(m) = obj.remove("method") {
        return request(id, m, &mut obj);
    }
    response(id, &mut obj)
}

fn request(
    id: Option<Id>,
    method: Value,
    obj: &mut Map<String, Value>,
) -> Result<Message, DecodeError> {
    let method = match method {
        Value::String(s) if !s.is_empty() && s.len() <= MAX_METHOD_LEN => s.into_boxed_str(),
        _ => {
            return Err(invalid(
                id,
                format!("'method' must be a string of 1 to {MAX_METHOD_LEN} bytes"),
            ))
        }
    };
    if obj.contains_key("result") || obj.contains_key("error") {
        return Err(invalid(id, "a request carries no 'result' or 'error'"));
    }
    let params = match obj.remove("params") {
        None => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => return Err(invalid(id, "'params' must be an object or an array")),
    };
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method, params },
    })
}

fn response(id: Option<Id>, obj: &mut Map<String, Value>) -> Result<Message, DecodeError> {
    let Some(id) = id else {
        return Err(invalid(None, "a message needs a 'method' or an 'id'"));
    };
    let outcome = match (obj.remove("result"), obj.remove("error")) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => Err(error_object(&e).ok_or_else(|| {
            invalid(
                Some(id.clone()),
                "'error' must be an object with an integer 'code' and a string 'message'",
            )
        })?),
        _ => {
            return Err(invalid(
                Some(id),
                "an answer carries exactly one of 'result' and 'error'",
            ))
        }
    };
    Ok(Message::Response { id, outcome })
}

fn error_object(v: &Value) -> Option<ErrorObject> {
    let o = v.as_object()?;
    Some(ErrorObject {
        code: o.get("code")?.as_i64()?,
        message: o.get("message")?.as_str()?.to_string(),
        data: o.get("data").cloned(),
    })
}

/// A success answer.
pub fn result(id: &Id, value: Value) -> Bytes {
    Bytes::from(json!({"jsonrpc": "2.0", "id": id.to_value(), "result": value}).to_string())
}

/// An error answer; `id` `None` answers with `"id": null` (the request's
/// id could not be read).
pub fn error(id: Option<&Id>, code: i64, message: &str, data: Option<Value>) -> Bytes {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    let id = id.map_or(Value::Null, Id::to_value);
    Bytes::from(json!({"jsonrpc": "2.0", "id": id, "error": e}).to_string())
}

/// A notification (server to client: progress, for instance).
pub fn notification(method: &str, params: Value) -> Bytes {
    Bytes::from(json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Result<Message, DecodeError> {
        decode(s.as_bytes())
    }

    #[test]
    fn requests_notifications_and_answers_decode() {
        assert_eq!(
            dec(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"x"}}"#),
            Ok(Message::Request {
                id: Id::Number(7),
                method: "tools/list".into(),
                params: Some(json!({"cursor":"x"})),
            })
        );
        assert_eq!(
            dec(r#"{"jsonrpc":"2.0","id":"a-1","method":"ping"}"#),
            Ok(Message::Request {
                id: Id::Text("a-1".into()),
                method: "ping".into(),
                params: None,
            })
        );
        assert_eq!(
            dec(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification {
                method: "notifications/initialized".into(),
                params: None,
            })
        );
        assert_eq!(
            dec(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Ok(Message::Response {
                id: Id::Number(3),
                outcome: Ok(json!({})),
            })
        );
        let Ok(Message::Response {
            outcome: Err(e), ..
        }) = dec(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}"#)
        else {
            panic!("error answer")
        };
        assert_eq!((e.code, e.message.as_str()), (-1, "no"));
    }

    #[test]
    fn malformed_json_is_a_parse_error_with_a_null_id() {
        let e = dec(r#"{"jsonrpc":"2.0","id":1,"#).unwrap_err();
        assert_eq!(e.code(), PARSE_ERROR);
        assert_eq!(e.id(), None);
        let answer: Value = serde_json::from_slice(&e.to_answer()).unwrap();
        assert_eq!(answer["id"], Value::Null);
        assert_eq!(answer["error"]["code"], PARSE_ERROR);
    }

    #[test]
    fn invalid_messages_are_invalid_requests_naming_the_id_when_known() {
        let cases = [
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                Some(Id::Number(1)),
            ),
            (r#"{"id":1,"method":"ping"}"#, Some(Id::Number(1))),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, None),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, None),
            (r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#, None),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":7}"#,
                Some(Id::Number(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":""}"#,
                Some(Id::Number(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"x","params":3}"#,
                Some(Id::Number(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"x","result":1}"#,
                Some(Id::Number(2)),
            ),
            (r#"{"jsonrpc":"2.0","id":2}"#, Some(Id::Number(2))),
            (
                r#"{"jsonrpc":"2.0","id":2,"result":1,"error":{}}"#,
                Some(Id::Number(2)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"error":{"code":"x"}}"#,
                Some(Id::Number(2)),
            ),
            (r#"{"jsonrpc":"2.0"}"#, None),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, None),
            (r#""ping""#, None),
            // A repeated key means different things to different parsers.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
                Some(Id::Number(1)),
            ),
        ];
        for (text, id) in cases {
            let e = dec(text).unwrap_err();
            assert_eq!(e.code(), INVALID_REQUEST, "{text}");
            // A duplicate key is refused before the id is read.
            if !text.contains(r#""method":"b""#) {
                assert_eq!(e.id(), id.as_ref(), "{text}");
            }
        }
    }

    #[test]
    fn ids_and_methods_are_bounded() {
        let long_id = "i".repeat(MAX_ID_LEN + 1);
        let text = format!(r#"{{"jsonrpc":"2.0","id":"{long_id}","method":"ping"}}"#);
        assert_eq!(dec(&text).unwrap_err().code(), INVALID_REQUEST);
        let ok_id = "i".repeat(MAX_ID_LEN);
        let text = format!(r#"{{"jsonrpc":"2.0","id":"{ok_id}","method":"ping"}}"#);
        assert!(dec(&text).is_ok());
        let long_method = "m".repeat(MAX_METHOD_LEN + 1);
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{long_method}"}}"#);
        assert_eq!(dec(&text).unwrap_err().id(), Some(&Id::Number(1)));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{deep}}}"#);
        assert_eq!(dec(&text).unwrap_err().code(), INVALID_REQUEST);
    }

    #[test]
    fn encoders_write_the_three_shapes() {
        let r: Value =
            serde_json::from_slice(&result(&Id::Text("q".into()), json!({"a":1}))).unwrap();
        assert_eq!(r, json!({"jsonrpc":"2.0","id":"q","result":{"a":1}}));
        let e: Value = serde_json::from_slice(&error(
            Some(&Id::Number(4)),
            METHOD_NOT_FOUND,
            "nope",
            Some(json!({"m":"x"})),
        ))
        .unwrap();
        assert_eq!(
            e,
            json!({"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope","data":{"m":"x"}}})
        );
        let n: Value = serde_json::from_slice(&notification(
            "notifications/progress",
            json!({"progress":1}),
        ))
        .unwrap();
        assert_eq!(n["method"], "notifications/progress");
        assert!(n.get("id").is_none());
        // Every encoded message decodes back.
        assert!(decode(&notification("x", json!({}))).is_ok());
        assert!(decode(&result(&Id::Number(-9), json!(null))).is_ok());
    }
}
