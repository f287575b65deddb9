//! `tools/list` and `tools/call`.
//!
//! A tool is a catalog entry (a mapping, or an exposed schema); the list
//! is what the caller's tenant and policy may see. A call is an ordinary
//! invocation of the entry's capability (`ingress`), so auth, policy,
//! selection, retries, deadlines and peer routers apply unchanged. What
//! goes wrong *in* the call — unknown tool, no eligible route, a refusal,
//! a handler error, an agent gone mid-call — is a tool result with
//! `isError: true` (the client shows it to the model); what is wrong with
//! the request itself is a JSON-RPC error.
//!
//! With a `progressToken` the call runs as an `invoke-stream`: each event
//! the capability streams becomes a `notifications/progress` for that
//! token, and the result carries every event. A handler that does not
//! stream answers as a plain call would.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use http::{HeaderValue, Response};
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};

use agentd::time::Millis;
use uci_schema::Protocol;

use super::stream::Stream;
use super::wire::{self, Refusal};
use crate::api::error::{ApiError, ErrorCode};
use crate::body::Body;
use crate::catalog::{Caller, Entry, Visibility};
use crate::front::protocol::{self, Call, Identity};
use crate::front::Ctx;
use crate::jsonrpc::{self, Id};
use crate::task::sse::{SseItem, SseParser};

/// Tools per `tools/list` page.
pub const PAGE: usize = 50;
/// SSE bounds for a handler's stream (as the stream relay's).
const MAX_LINE: usize = 64 * 1024;
const MAX_EVENT: usize = 256 * 1024;
/// The largest progress frame a call's stream takes (one agent event and
/// its JSON-RPC wrapping): what a call reserves in the budget up front.
pub const MAX_FRAME: usize = MAX_EVENT + MAX_LINE;

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal {
        code: jsonrpc::INVALID_PARAMS,
        message: message.into(),
        data: None,
    }
}

fn caller(who: &Identity) -> Caller<'_> {
    Caller {
        tenant: &who.tenant,
        source: &who.subject,
    }
}

/// The tool as listed.
pub fn tool_json(e: &Entry) -> Value {
    let schema = e
        .input_schema
        .as_deref()
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"type": "object"}));
    let mut t = Map::new();
    t.insert("name".into(), e.name.as_ref().into());
    if let Some(title) = &e.title {
        t.insert("title".into(), title.as_ref().into());
    }
    if let Some(d) = &e.description {
        t.insert("description".into(), d.as_ref().into());
    }
    t.insert("inputSchema".into(), schema);
    Value::Object(t)
}

/// The `tools/list` result for `who` (`modern`: 2026-07-28 fields).
pub fn list(
    cx: &Ctx,
    who: &Identity,
    params: Option<&Value>,
    modern: bool,
) -> Result<Value, Refusal> {
    let cursor = match params.and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(_) => return Err(invalid("cursor must be a string")),
    };
    let fib = cx.state.fib.borrow();
    let page = cx
        .state
        .catalog
        .list(
            &fib,
            Protocol::Mcp,
            caller(who),
            cursor,
            PAGE,
            Millis::now(),
        )
        .map_err(|e| invalid(e.to_string()))?;
    let mut r = json!({"tools": page.entries.iter().map(tool_json).collect::<Vec<_>>()});
    if let Some(c) = page.next_cursor {
        r["nextCursor"] = c.into();
    }
    if modern {
        modern_fields(&mut r);
    }
    Ok(r)
}

/// Fields every 2026-07-28 result of a cacheable method carries: never
/// cached, never shared between callers (lists depend on the caller).
pub fn modern_fields(r: &mut Value) {
    r["resultType"] = "complete".into();
    r["ttlMs"] = 0.into();
    r["cacheScope"] = "private".into();
}

/// A checked `tools/call`.
#[derive(Clone, Debug)]
pub struct CallRequest {
    pub name: String,
    pub arguments: Value,
    /// `_meta.progressToken` (a string or an integer).
    pub progress: Option<Value>,
}

pub fn parse_call(params: Option<&Value>) -> Result<CallRequest, Refusal> {
    let p = params
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("tools/call needs params {name, arguments}"))?;
    let name = p
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty() && n.len() <= 128)
        .ok_or_else(|| invalid("params.name must be a tool name (1 to 128 bytes)"))?;
    let arguments = match p.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(a @ Value::Object(_)) => a.clone(),
        Some(_) => return Err(invalid("params.arguments must be an object")),
    };
    let progress = match p.get("_meta").and_then(|m| m.get("progressToken")) {
        None | Some(Value::Null) => None,
        Some(t @ Value::String(_)) => Some(t.clone()),
        Some(t @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(t.clone()),
        Some(_) => {
            return Err(invalid(
                "_meta.progressToken must be a string or an integer",
            ))
        }
    };
    Ok(CallRequest {
        name: name.to_string(),
        arguments,
        progress,
    })
}

/// The tool error result: `isError` with the message, and the gateway's
/// typed error as `structuredContent` so programs can tell reasons apart.
pub fn tool_error(message: &str, error: Option<Value>) -> Value {
    let mut r = json!({
        "content": [{"type": "text", "text": message}],
        "isError": true,
    });
    if let Some(e) = error {
        r["structuredContent"] = e;
    }
    r
}

fn api_error_result(e: &ApiError) -> Value {
    tool_error(
        &format!("{}: {}", e.code.as_str(), e.message),
        Some(e.body_json()),
    )
}

/// Where a running call reports: its stream, and who to tell about
/// progress.
#[derive(Debug)]
pub struct Reporter {
    pub stream: Rc<Stream>,
    pub progress: Option<Value>,
    /// Frames get `id: <prefix>-<seq>` (handshake revisions), else none.
    pub id_prefix: Option<u64>,
}

impl Reporter {
    /// Appends one JSON-RPC message as an SSE event.
    pub fn emit(&self, message: &[u8]) {
        let seq = self.stream.next_seq();
        let frame = match self.id_prefix {
            Some(p) => {
                let mut f = format!("id: {p}-{seq}\n").into_bytes();
                f.extend_from_slice(&wire::sse_event(None, message));
                f
            }
            None => wire::sse_event(None, message),
        };
        self.stream.push(frame);
    }
}

/// The stream task a call started, for cancelling it.
pub type StreamTask = Rc<RefCell<Option<(String, HeaderValue)>>>;

/// Runs `req` for `who` and returns the `tools/call` result.
pub async fn call(
    cx: &Ctx,
    headers: &http::HeaderMap,
    who: &Identity,
    req: &CallRequest,
    report: &Reporter,
    task: &StreamTask,
) -> Value {
    let found = {
        let fib = cx.state.fib.borrow();
        cx.state
            .catalog
            .find(&fib, Protocol::Mcp, caller(who), &req.name, Millis::now())
    };
    let Some((entry, visibility)) = found else {
        return tool_error(&format!("unknown tool '{}'", req.name), None);
    };
    if let Some(refusal) = invalid_arguments(&entry, &req.arguments) {
        return refusal;
    }
    let env = match protocol::envelope(
        cx,
        who,
        &Call {
            capability: &entry.capability,
            version: entry.version,
            payload: req.arguments.clone(),
        },
    ) {
        Ok(env) => env,
        Err(e) => return api_error_result(&e),
    };
    let stream = req.progress.is_some() && visibility == Visibility::Usable;
    let answer = protocol::invoke(cx, headers, env, stream).await;
    match answer {
        Err(e) => api_error_result(&e),
        Ok(resp) => relay(cx, resp, report, task).await,
    }
}

/// The tool error for arguments the tool's input schema refuses: a tool
/// execution error (MCP 2025-11-25: the model reads it and can correct
/// the call), typed `invalid_field`, and nothing sent to the handler.
fn invalid_arguments(entry: &Entry, arguments: &Value) -> Option<Value> {
    let schema: Value = serde_json::from_str(entry.input_schema.as_deref()?).ok()?;
    let v = super::args::check(&schema, arguments).err()?;
    let e = ApiError::new(ErrorCode::InvalidField, v.to_string()).capability(&entry.capability);
    Some(api_error_result(&e))
}

async fn relay(cx: &Ctx, resp: Response<Body>, report: &Reporter, task: &StreamTask) -> Value {
    let limit = cx.state.cfg.max_result_bytes;
    let is_sse = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if let (Some(id), Some(token)) = (
        resp.headers().get(crate::task::TASK_ID_HEADER),
        resp.headers().get(crate::task::TASK_TOKEN_HEADER),
    ) {
        if let Ok(id) = id.to_str() {
            *task.borrow_mut() = Some((id.to_string(), token.clone()));
        }
    }
    let status = resp.status();
    let (head, body) = resp.into_parts();
    if is_sse && status.is_success() {
        return relay_stream(body, report, limit).await;
    }
    let bytes = match crate::api::request_body::read_limited(&head.headers, body, limit).await {
        Ok(b) => b,
        Err(e) => return api_error_result(&e),
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if !status.is_success() {
        let doc = serde_json::from_slice::<Value>(&bytes).ok();
        return tool_error(&format!("the agent answered {status}: {text}"), doc);
    }
    let mut r = json!({"content": [{"type": "text", "text": text}]});
    if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(&bytes) {
        r["structuredContent"] = v;
    }
    r
}

/// Follows a capability's event stream: progress per event, the events
/// as the result.
async fn relay_stream(mut body: Body, report: &Reporter, limit: usize) -> Value {
    let mut parser = SseParser::new(MAX_LINE, MAX_EVENT);
    let mut content = Vec::new();
    let mut events = Vec::new();
    let mut total = 0usize;
    let mut n = 0u64;
    loop {
        let frame = match body.frame().await {
            None => break,
            Some(Err(e)) => {
                return tool_error(&format!("the agent's stream broke: {e}"), None);
            }
            Some(Ok(f)) => f,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        parser.push(&data);
        loop {
            match parser.next_item() {
                Ok(None) => break,
                Ok(Some(SseItem::Complete)) => return stream_result(content, events),
                Ok(Some(SseItem::Event { event, data, .. })) => {
                    if event.as_deref() == Some("error") {
                        let doc = serde_json::from_str::<Value>(&data).ok();
                        return tool_error(&format!("the agent's stream failed: {data}"), doc);
                    }
                    n += 1;
                    total = total.saturating_add(data.len());
                    if total > limit {
                        return tool_error(
                            &format!("the agent's stream exceeded {limit} bytes (gateway.max_result_bytes)"),
                            None,
                        );
                    }
                    if let Some(token) = &report.progress {
                        report.emit(&jsonrpc::notification(
                            "notifications/progress",
                            json!({"progressToken": token, "progress": n, "message": data}),
                        ));
                    }
                    events.push(
                        serde_json::from_str::<Value>(&data)
                            .unwrap_or_else(|_| Value::String(data.clone())),
                    );
                    content.push(json!({"type": "text", "text": data}));
                }
                Err(e) => {
                    return tool_error(&format!("the agent's stream is malformed: {e}"), None)
                }
            }
        }
    }
    // Ended without the completion mark: the producer broke off.
    tool_error(
        "the agent's stream ended before it completed (the agent went away)",
        Some(json!({"events": events})),
    )
}

fn stream_result(content: Vec<Value>, events: Vec<Value>) -> Value {
    json!({"content": content, "structuredContent": {"events": events}})
}

/// Encodes a finished call's answer for `id`.
pub fn answer(id: &Id, mut result: Value, modern: bool) -> Bytes {
    if modern {
        result["resultType"] = "complete".into();
    }
    jsonrpc::result(id, result)
}
