//! A2A message parts (`{"text"}`, `{"data"}`, `{"url"}`, `{"raw"}`, no
//! `kind` in 1.0) and their two translations: a message's parts into the
//! invocation payload a capability handler receives, and a handler's
//! answer into the parts of the task's artifact.
//!
//! The payload mapping is fixed and documented (docs/a2a.md), nothing is
//! inferred: one `data` part holding an object is the payload itself (the
//! same arguments object an MCP tool call or an SDK caller sends); text
//! parts only give `{"text": "<the texts joined by newlines>"}`; any
//! other mix gives `{"parts": [...]}` with every part as sent.

use serde_json::{json, Map, Value};

use super::error::A2aError;
use super::wire::{field, string};
use crate::task::TaskResult;

/// Longest `url`, `filename` or `mediaType` of a part.
pub const MAX_PART_NAME: usize = 2048;

/// One validated part, kept as sent (it is relayed, not interpreted).
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub content: Content,
    /// The part object as sent (validated), for the `parts` payload.
    pub raw: Value,
}

/// Which content a part carries (exactly one per part).
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    Text(String),
    Data(Value),
    Url,
    Raw,
}

/// Decodes part `index` of a message.
pub fn decode(v: &Value, index: usize) -> Result<Part, A2aError> {
    let name = format!("message.parts[{index}]");
    let Value::Object(o) = v else {
        return Err(A2aError::invalid_params(format!(
            "{name} must be an object"
        )));
    };
    let present: Vec<&str> = ["text", "data", "url", "raw"]
        .into_iter()
        .filter(|k| o.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if present.len() != 1 {
        return Err(A2aError::invalid_params(format!(
            "{name} must carry exactly one of text, data, url and raw (has {})",
            if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            }
        )));
    }
    let content = match present[0] {
        "text" => match &o["text"] {
            Value::String(s) => Content::Text(s.clone()),
            _ => {
                return Err(A2aError::invalid_params(format!(
                    "{name}.text must be a string"
                )))
            }
        },
        "data" => Content::Data(o["data"].clone()),
        "url" => {
            string(o.get("url"), &format!("{name}.url"), MAX_PART_NAME)?;
            Content::Url
        }
        _ => match &o["raw"] {
            Value::String(s) if is_base64(s) => Content::Raw,
            _ => {
                return Err(A2aError::invalid_params(format!(
                    "{name}.raw must be base64 text"
                )))
            }
        },
    };
    string(
        o.get("filename"),
        &format!("{name}.filename"),
        MAX_PART_NAME,
    )?;
    string(
        field(o, "mediaType", "media_type"),
        &format!("{name}.mediaType"),
        MAX_PART_NAME,
    )?;
    match o.get("metadata") {
        None | Some(Value::Null | Value::Object(_)) => {}
        Some(_) => {
            return Err(A2aError::invalid_params(format!(
                "{name}.metadata must be an object"
            )))
        }
    }
    Ok(Part {
        content,
        raw: v.clone(),
    })
}

fn is_base64(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_'))
}

/// The invocation payload for a message's parts (see the module doc).
pub fn payload(parts: &[Part]) -> Value {
    if let [Part {
        content: Content::Data(d @ Value::Object(_)),
        ..
    }] = parts
    {
        return d.clone();
    }
    let texts: Option<Vec<&str>> = parts
        .iter()
        .map(|p| match &p.content {
            Content::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    match texts {
        Some(t) => json!({"text": t.join("\n")}),
        None => json!({"parts": parts.iter().map(|p| p.raw.clone()).collect::<Vec<_>>()}),
    }
}

/// The artifact parts of a handler's answer: JSON text becomes a `text`
/// part (a JSON string) or a `data` part (anything else); other UTF-8
/// text a `text` part with its media type; other bytes a `raw` part.
pub fn result_parts(r: &TaskResult) -> Vec<Value> {
    let media = r.content_type.as_deref().unwrap_or("");
    let json_like = media.is_empty() || media.to_ascii_lowercase().contains("json");
    if json_like {
        if let Ok(v) = serde_json::from_slice::<Value>(&r.body) {
            return vec![match v {
                Value::String(s) => json!({"text": s}),
                other => json!({"data": other, "mediaType": "application/json"}),
            }];
        }
    }
    let mut part = Map::new();
    match std::str::from_utf8(&r.body) {
        Ok(s) => part.insert("text".into(), Value::String(s.to_string())),
        Err(_) => part.insert("raw".into(), Value::String(base64(&r.body))),
    };
    if !media.is_empty() {
        part.insert("mediaType".into(), Value::String(media.to_string()));
    }
    vec![Value::Object(part)]
}

/// Standard base64 with padding (protobuf JSON's `bytes`).
fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(v: Value) -> Vec<Part> {
        v.as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, p)| decode(p, i).unwrap())
            .collect()
    }

    #[test]
    fn payload_mapping_is_fixed() {
        assert_eq!(
            payload(&parts(json!([{"data": {"x": 1}}]))),
            json!({"x": 1})
        );
        assert_eq!(
            payload(&parts(json!([{"text": "a"}, {"text": "b"}]))),
            json!({"text": "a\nb"})
        );
        let mixed = json!([{"text": "a"}, {"data": [1]}]);
        assert_eq!(payload(&parts(mixed.clone())), json!({"parts": mixed}));
        let url = json!([{"url": "https://example.org/f", "mediaType": "text/plain"}]);
        assert_eq!(payload(&parts(url.clone())), json!({"parts": url}));
    }

    #[test]
    fn a_part_carries_exactly_one_content() {
        for bad in [
            json!({}),
            json!({"text": "a", "data": 1}),
            json!({"text": 3}),
            json!({"raw": "not base64!"}),
            json!({"text": "a", "metadata": 1}),
            json!({"text": "a", "mediaType": 1}),
            json!("text"),
        ] {
            assert!(decode(&bad, 0).is_err(), "{bad}");
        }
        assert!(decode(&json!({"raw": "aGk="}), 0).is_ok());
    }

    #[test]
    fn answers_become_artifact_parts() {
        let r = |ct: Option<&str>, body: &[u8]| TaskResult {
            status: 200,
            content_type: ct.map(str::to_string),
            body: body.to_vec(),
        };
        assert_eq!(
            result_parts(&r(Some("application/json"), br#"{"y":2}"#)),
            vec![json!({"data": {"y": 2}, "mediaType": "application/json"})]
        );
        assert_eq!(
            result_parts(&r(None, br#""hello""#)),
            vec![json!({"text": "hello"})]
        );
        assert_eq!(
            result_parts(&r(Some("text/plain"), b"plain")),
            vec![json!({"text": "plain", "mediaType": "text/plain"})]
        );
        assert_eq!(
            result_parts(&r(Some("application/octet-stream"), &[0xff, 0, 1])),
            vec![json!({"raw": "/wAB", "mediaType": "application/octet-stream"})]
        );
        assert_eq!(base64(b"hi"), "aGk=");
        assert_eq!(base64(b"h"), "aA==");
        assert_eq!(base64(b"abc"), "YWJj");
    }
}
