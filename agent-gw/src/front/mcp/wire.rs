//! MCP Streamable HTTP wire facts: revisions, header names, error codes,
//! the HTTP status of each error, SSE framing, and the per-request
//! validation ladder of revision 2026-07-28. Pure (no I/O).
//!
//! The ladder follows the spec and the official SDK's server (mcp 2.3.0,
//! `mcp/shared/inbound.py`), checked in this order, first failure wins:
//! a routing header sent twice (-32020); `params._meta` carrying the
//! protocol version and client capabilities (-32602); the
//! `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`) `Mcp-Name`
//! headers equal to the body (-32020); the version a string we serve
//! (-32602 / -32022 with `{supported, requested}`).

use http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use crate::jsonrpc;

/// The sessionless revision.
pub const MODERN: &str = "2026-07-28";
/// Handshake revisions served, newest first (what `initialize` offers
/// back when the client asks for one we do not serve).
pub const HANDSHAKE: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Handshake revisions a client may name that are routed to the
/// handshake path (and refused there if not served), as the official
/// server routes them; any other `MCP-Protocol-Version` value goes to the
/// per-request path, which names what it serves.
pub const HANDSHAKE_KNOWN: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
pub const METHOD_HEADER: &str = "mcp-method";
pub const NAME_HEADER: &str = "mcp-name";
pub const SESSION_HEADER: &str = "mcp-session-id";
pub const LAST_EVENT_ID_HEADER: &str = "last-event-id";

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// HTTP headers disagree with the body, or are missing (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request's protocol version is not served (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// What the handshake-era official server answers a cancelled request
/// with, so the request's stream ends with an answer for its id.
pub const REQUEST_CANCELLED: i64 = -32800;

/// The revision of a handshake-era request: served, or why not.
pub fn handshake_revision(v: &str) -> Option<&'static str> {
    HANDSHAKE.iter().copied().find(|h| *h == v)
}

/// The HTTP status of an error answer with `code` (the official server's
/// table: request faults 400, unknown method 404, the rest 200).
pub fn status_of(code: i64) -> StatusCode {
    match code {
        jsonrpc::PARSE_ERROR
        | jsonrpc::INVALID_REQUEST
        | jsonrpc::INVALID_PARAMS
        | HEADER_MISMATCH
        | UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        jsonrpc::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// One SSE event carrying a JSON-RPC message; `id` for resumable streams.
pub fn sse_event(id: Option<u64>, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 40);
    if let Some(id) = id {
        out.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    out.extend_from_slice(b"event: message\ndata: ");
    // The encoders write compact JSON: no newline inside `message`.
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    out
}

/// The priming event of a resumable stream (2025-11-25): an id and no
/// data, so a client that loses the stream before any message can
/// resume it.
pub fn sse_priming(id: u64) -> Vec<u8> {
    format!("id: {id}\ndata: \n\n").into_bytes()
}

/// What the client's `Accept` allows: (JSON, event stream).
pub fn accepts(headers: &HeaderMap) -> (bool, bool) {
    let mut json = false;
    let mut sse = false;
    for v in headers.get_all(http::header::ACCEPT) {
        for t in v.to_str().unwrap_or("").split(',') {
            let t = t
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            match t.as_str() {
                "*/*" => (json, sse) = (true, true),
                "application/json" | "application/*" => json = true,
                "text/event-stream" | "text/*" => sse = true,
                _ => {}
            }
        }
    }
    (json, sse)
}

/// Whether the body is declared JSON.
pub fn is_json_body(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        })
}

/// A ladder refusal: error code, message, data.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

fn refusal(code: i64, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
        data: None,
    }
}

fn single<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Refusal> {
    let mut it = headers.get_all(name).iter();
    let first = it.next();
    if it.next().is_some() {
        return Err(refusal(
            HEADER_MISMATCH,
            format!("{name} header appears more than once"),
        ));
    }
    Ok(first.map(|v| v.to_str().unwrap_or("\u{fffd}")))
}

/// The 2026-07-28 per-request checks of a request `method` with `params`.
pub fn modern_ladder(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<(), Refusal> {
    let version_h = single(headers, PROTOCOL_VERSION_HEADER)?;
    let method_h = single(headers, METHOD_HEADER)?;
    let name_h = single(headers, NAME_HEADER)?;
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            refusal(
                jsonrpc::INVALID_PARAMS,
                format!(
                    "params._meta must be an object carrying '{META_PROTOCOL_VERSION}' and '{META_CLIENT_CAPABILITIES}'"
                ),
            )
        })?;
    let missing: Vec<&str> = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES]
        .into_iter()
        .filter(|k| !meta.contains_key(*k))
        .collect();
    if !missing.is_empty() {
        return Err(refusal(
            jsonrpc::INVALID_PARAMS,
            format!("params._meta is missing {}", missing.join(", ")),
        ));
    }
    let version = &meta[META_PROTOCOL_VERSION];
    if version_h.is_none() || version.as_str() != version_h {
        return Err(refusal(
            HEADER_MISMATCH,
            "MCP-Protocol-Version header does not match the request's _meta protocol version",
        ));
    }
    if method_h != Some(method) {
        return Err(refusal(
            HEADER_MISMATCH,
            "Mcp-Method header does not match the request's method",
        ));
    }
    if method == "tools/call" {
        if let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) {
            if name_h.and_then(decode_header_value).as_deref() != Some(name) {
                return Err(refusal(
                    HEADER_MISMATCH,
                    "Mcp-Name header does not match the request's tool name",
                ));
            }
        }
    }
    let Some(version) = version.as_str() else {
        return Err(refusal(
            jsonrpc::INVALID_PARAMS,
            "the protocol version must be a string",
        ));
    };
    if version != MODERN {
        return Err(unsupported(version));
    }
    Ok(())
}

/// -32022 naming what is served.
pub fn unsupported(requested: &str) -> Refusal {
    let mut supported = vec![MODERN];
    supported.extend(HANDSHAKE);
    Refusal {
        code: UNSUPPORTED_PROTOCOL_VERSION,
        message: "Unsupported protocol version".into(),
        data: Some(json!({"supported": supported, "requested": requested})),
    }
}

/// An `Mcp-Name` value: verbatim, or the `=?base64?…?=` form clients use
/// for names that are not plain header text (`None` when malformed).
pub fn decode_header_value(v: &str) -> Option<String> {
    let Some(b64) = v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return Some(v.to_string());
    };
    String::from_utf8(base64_decode(b64)?).ok()
}

/// Standard-alphabet base64 with padding, canonical only.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let last = i == bytes.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        let b = n.to_be_bytes();
        let take = 3 - pad;
        // Canonical: the bits a padded group leaves out are zero.
        if pad > 0 && b[1..4][take..].iter().any(|&x| x != 0) {
            return None;
        }
        out.extend_from_slice(&b[1..1 + take]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn params(version: Value, name: Option<&str>) -> Value {
        let mut p =
            json!({"_meta": {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}}});
        if let Some(n) = name {
            p["name"] = n.into();
        }
        p
    }

    #[test]
    fn a_coherent_modern_request_passes() {
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, MODERN),
            (METHOD_HEADER, "tools/call"),
            (NAME_HEADER, "echo"),
        ]);
        assert_eq!(
            modern_ladder(&h, "tools/call", Some(&params(MODERN.into(), Some("echo")))),
            Ok(())
        );
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, MODERN),
            (METHOD_HEADER, "tools/call"),
            (NAME_HEADER, "=?base64?ZWNobw==?="),
        ]);
        assert_eq!(
            modern_ladder(&h, "tools/call", Some(&params(MODERN.into(), Some("echo")))),
            Ok(())
        );
    }

    #[test]
    fn each_rung_refuses_with_its_code() {
        let ok_h = || {
            headers(&[
                (PROTOCOL_VERSION_HEADER, MODERN),
                (METHOD_HEADER, "tools/list"),
            ])
        };
        let code =
            |h: &HeaderMap, m: &str, p: Option<&Value>| modern_ladder(h, m, p).unwrap_err().code;
        // No _meta, or an incomplete one.
        assert_eq!(code(&ok_h(), "tools/list", None), jsonrpc::INVALID_PARAMS);
        let p = json!({"_meta": {META_PROTOCOL_VERSION: MODERN}});
        assert_eq!(
            code(&ok_h(), "tools/list", Some(&p)),
            jsonrpc::INVALID_PARAMS
        );
        // Headers that disagree with the body, or are missing / doubled.
        let p = params(MODERN.into(), None);
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, "2025-11-25"),
            (METHOD_HEADER, "tools/list"),
        ]);
        assert_eq!(code(&h, "tools/list", Some(&p)), HEADER_MISMATCH);
        let h = headers(&[(METHOD_HEADER, "tools/list")]);
        assert_eq!(code(&h, "tools/list", Some(&p)), HEADER_MISMATCH);
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, MODERN),
            (METHOD_HEADER, "tools/call"),
        ]);
        assert_eq!(code(&h, "tools/list", Some(&p)), HEADER_MISMATCH);
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, MODERN),
            (PROTOCOL_VERSION_HEADER, MODERN),
            (METHOD_HEADER, "tools/list"),
        ]);
        assert_eq!(code(&h, "tools/list", Some(&p)), HEADER_MISMATCH);
        let p = params(MODERN.into(), Some("echo"));
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, MODERN),
            (METHOD_HEADER, "tools/call"),
            (NAME_HEADER, "other"),
        ]);
        assert_eq!(code(&h, "tools/call", Some(&p)), HEADER_MISMATCH);
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, MODERN),
            (METHOD_HEADER, "tools/call"),
        ]);
        assert_eq!(code(&h, "tools/call", Some(&p)), HEADER_MISMATCH);
        // A version we do not serve names what we do.
        let p = params("2099-01-01".into(), None);
        let h = headers(&[
            (PROTOCOL_VERSION_HEADER, "2099-01-01"),
            (METHOD_HEADER, "tools/list"),
        ]);
        let r = modern_ladder(&h, "tools/list", Some(&p)).unwrap_err();
        assert_eq!(r.code, UNSUPPORTED_PROTOCOL_VERSION);
        let data = r.data.unwrap();
        assert_eq!(data["requested"], "2099-01-01");
        assert!(data["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN)));
    }

    #[test]
    fn statuses_follow_the_spec_table() {
        assert_eq!(status_of(jsonrpc::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        for c in [
            jsonrpc::PARSE_ERROR,
            jsonrpc::INVALID_REQUEST,
            jsonrpc::INVALID_PARAMS,
            HEADER_MISMATCH,
            UNSUPPORTED_PROTOCOL_VERSION,
        ] {
            assert_eq!(status_of(c), StatusCode::BAD_REQUEST);
        }
        assert_eq!(status_of(jsonrpc::INTERNAL_ERROR), StatusCode::OK);
    }

    #[test]
    fn header_values_and_accept_decode() {
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
        assert_eq!(decode_header_value("=?base64?w6k=?=").as_deref(), Some("é"));
        assert_eq!(decode_header_value("=?base64?w6l=?="), None);
        assert_eq!(decode_header_value("=?base64?@@@@?="), None);
        assert_eq!(decode_header_value("=?base64?abc?="), None);
        let h = headers(&[("accept", "application/json, text/event-stream")]);
        assert_eq!(accepts(&h), (true, true));
        assert_eq!(
            accepts(&headers(&[("accept", "text/event-stream;q=1")])),
            (false, true)
        );
        assert_eq!(accepts(&headers(&[("accept", "*/*")])), (true, true));
        assert_eq!(accepts(&HeaderMap::new()), (false, false));
        assert!(is_json_body(&headers(&[(
            "content-type",
            "application/json; charset=utf-8"
        )])));
        assert!(!is_json_body(&headers(&[("content-type", "text/plain")])));
        assert_eq!(
            sse_event(Some(3), b"{}"),
            b"id: 3\nevent: message\ndata: {}\n\n"
        );
    }
}
