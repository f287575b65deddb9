//! MCP (Model Context Protocol) over Streamable HTTP at `/mcp`, on the
//! gateway's own hyper stack (a small JSON-RPC layer instead of the
//! official Rust SDK, which would add about 1.1 MB to the binary).
//!
//! Two eras are served side by side, told apart the way the official
//! server does it, by the `MCP-Protocol-Version` header:
//!
//! - **2026-07-28** (header present and not a handshake revision):
//!   sessionless. Every POST is one self-contained request whose `_meta`
//!   names the version and whose headers must agree with the body
//!   (`wire::modern_ladder`); `server/discover` says what is served;
//!   notifications are acknowledged 202; GET and DELETE are 405; closing
//!   a `tools/call` response cancels the call.
//! - **2025-11-25, 2025-06-18, 2025-03-26** (no header, or one of them):
//!   `initialize` negotiates and opens a session (`MCP-Session-Id`,
//!   `session`), `notifications/initialized` is 202, a GET opens the
//!   optional server stream, DELETE ends the session, `tools/call`
//!   answers are SSE streams with event ids that a GET with
//!   `Last-Event-ID` resumes from their history, and
//!   `notifications/cancelled` cancels a running call.
//!
//! Every request first passes the Host/Origin guard and authentication
//! (`ingress`); a call then is an ordinary invocation (`tools`).

pub mod args;
pub mod session;
pub mod stream;
pub mod tools;
pub mod wire;

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};
use tokio::sync::Notify;

use agentd::time::Millis;

use crate::api::error::ApiError;
use crate::body::{empty, full, Body};
use crate::front::protocol::{self, Identity};
use crate::front::{inflight_slot, read_body, ConnAbort, Ctx};
use crate::jsonrpc::{self, Id, Message};
use stream::Stream;
use wire::Refusal;

/// `serverInfo` of both eras.
/// The MCP sessions of the handshake revisions: this front end's own
/// state, shared by its connections.
pub type Sessions = Rc<RefCell<session::Sessions>>;

fn server_info() -> Value {
    json!({"name": "agent-gw", "version": env!("CARGO_PKG_VERSION")})
}

const INSTRUCTIONS: &str = "Tools of this router's agent mesh: each tool invokes a capability routed by agentd (possibly on another router).";

/// The whole `/mcp` endpoint.
pub async fn handle(cx: &Ctx, mcp: &Sessions, parts: Parts, body: Incoming) -> Response<Body> {
    if let Err(r) = protocol::check_origin(cx, &parts) {
        return error_answer(
            r.status(),
            None,
            &refusal(jsonrpc::INVALID_REQUEST, r.to_string()),
            None,
        );
    }
    let modern = parts
        .headers
        .get(wire::PROTOCOL_VERSION_HEADER)
        .is_some_and(|v| {
            !wire::HANDSHAKE_KNOWN
                .iter()
                .any(|h| v.as_bytes() == h.as_bytes())
        });
    match (parts.method.clone(), modern) {
        (Method::POST, _) => post(cx, mcp, parts, body, modern).await,
        (Method::GET, false) => get(cx, mcp, &parts),
        (Method::DELETE, false) => delete(cx, mcp, &parts),
        (_, true) => not_allowed("POST"),
        _ => not_allowed("GET, POST, DELETE"),
    }
}

fn refusal(code: i64, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
        data: None,
    }
}

fn not_allowed(allow: &'static str) -> Response<Body> {
    let mut r = error_answer(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        &refusal(
            jsonrpc::INVALID_REQUEST,
            format!("/mcp accepts {allow} at this protocol revision"),
        ),
        None,
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

fn with_session(mut r: Response<Body>, session: Option<&str>) -> Response<Body> {
    if let Some(v) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        r.headers_mut().insert(wire::SESSION_HEADER, v);
    }
    r
}

fn json_answer(status: StatusCode, bytes: Bytes, session: Option<&str>) -> Response<Body> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    with_session(r, session)
}

fn error_answer(
    status: StatusCode,
    id: Option<&Id>,
    r: &Refusal,
    session: Option<&str>,
) -> Response<Body> {
    json_answer(
        status,
        jsonrpc::error(id, r.code, &r.message, r.data.clone()),
        session,
    )
}

/// An error answer with the spec's status for its code.
fn rpc_error(id: Option<&Id>, r: &Refusal, session: Option<&str>) -> Response<Body> {
    error_answer(wire::status_of(r.code), id, r, session)
}

/// A gateway refusal (auth, size, overload) as a JSON-RPC error with the
/// gateway's status and its typed error as data.
fn api_error(e: ApiError, id: Option<&Id>) -> Response<Body> {
    let status = e.code.status();
    let r = Refusal {
        code: jsonrpc::INVALID_REQUEST,
        message: format!("{}: {}", e.code.as_str(), e.message),
        data: Some(e.body_json()),
    };
    let mut resp = error_answer(status, id, &r, None);
    if let Some(ms) = e.detail().retry_after_ms {
        if let Ok(v) = HeaderValue::from_str(&ms.div_ceil(1000).max(1).to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}

fn accepted(session: Option<&str>) -> Response<Body> {
    let mut r = Response::new(empty());
    *r.status_mut() = StatusCode::ACCEPTED;
    with_session(r, session)
}

async fn post(
    cx: &Ctx,
    mcp: &Sessions,
    parts: Parts,
    body: Incoming,
    modern: bool,
) -> Response<Body> {
    let who = match protocol::identity(cx, &parts, "mcp") {
        Ok(w) => w,
        Err(e) => return api_error(e, None),
    };
    if !wire::is_json_body(&parts.headers) {
        return error_answer(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "Content-Type must be application/json",
            ),
            None,
        );
    }
    if wire::accepts(&parts.headers) != (true, true) {
        return error_answer(
            StatusCode::NOT_ACCEPTABLE,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "Accept must list both application/json and text/event-stream",
            ),
            None,
        );
    }
    let bytes = {
        let _slot = match inflight_slot(cx) {
            Ok(s) => s,
            Err(e) => return api_error(e, None),
        };
        match read_body(cx, &parts, body).await {
            Ok(b) => b,
            Err(e) => return api_error(e, None),
        }
    };
    let msg = match jsonrpc::decode(&bytes) {
        Ok(m) => m,
        Err(e) => return json_answer(StatusCode::BAD_REQUEST, e.to_answer(), None),
    };
    if modern {
        modern_post(cx, mcp, &parts, who, msg)
    } else {
        legacy_post(cx, mcp, &parts, who, msg)
    }
}

fn modern_post(
    cx: &Ctx,
    mcp: &Sessions,
    parts: &Parts,
    who: Identity,
    msg: Message,
) -> Response<Body> {
    let (id, method, params) = match msg {
        Message::Notification { .. } => {
            // No client-to-server notification means anything on this
            // wire (cancelling is closing the response); acknowledged.
            let v = parts
                .headers
                .get(wire::PROTOCOL_VERSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if v != wire::MODERN {
                return rpc_error(None, &wire::unsupported(v), None);
            }
            return accepted(None);
        }
        Message::Response { id, .. } => {
            return rpc_error(
                Some(&id),
                &refusal(
                    jsonrpc::INVALID_REQUEST,
                    "a client sends no answers at 2026-07-28",
                ),
                None,
            )
        }
        Message::Request { id, method, params } => (id, method, params),
    };
    if let Err(r) = wire::modern_ladder(&parts.headers, &method, params.as_ref()) {
        return rpc_error(Some(&id), &r, None);
    }
    let result = match &*method {
        "server/discover" => {
            let mut supported = vec![wire::MODERN];
            supported.extend(wire::HANDSHAKE);
            let mut r = json!({
                "supportedVersions": supported,
                "capabilities": {"tools": {"listChanged": false}},
                "instructions": INSTRUCTIONS,
                "_meta": {wire::META_SERVER_INFO: server_info()},
            });
            tools::modern_fields(&mut r);
            r
        }
        "tools/list" => match tools::list(cx, &who, params.as_ref(), true) {
            Ok(r) => r,
            Err(r) => return rpc_error(Some(&id), &r, None),
        },
        "tools/call" => return start_call(cx, mcp, parts, who, id, params.as_ref(), None),
        "ping" => json!({"resultType": "complete"}),
        other => {
            return rpc_error(
                Some(&id),
                &refusal(
                    jsonrpc::METHOD_NOT_FOUND,
                    format!("method '{}' is not served", clip(other)),
                ),
                None,
            )
        }
    };
    json_answer(StatusCode::OK, jsonrpc::result(&id, result), None)
}

fn clip(s: &str) -> String {
    s.chars().take(64).collect()
}

/// The session id a handshake-era request names.
fn session_id(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(wire::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty() && s.len() <= 128)
}

/// Checks the session of a handshake-era request (other than
/// `initialize`): its revision header, the session's existence and owner.
fn legacy_session(
    mcp: &Sessions,
    parts: &Parts,
    who: &Identity,
) -> Result<(Box<str>, &'static str), Box<Response<Body>>> {
    let Some(sid) = session_id(parts) else {
        return Err(Box::new(error_answer(
            StatusCode::BAD_REQUEST,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "no MCP-Session-Id: send initialize first (or use revision 2026-07-28)",
            ),
            None,
        )));
    };
    let header = parts
        .headers
        .get(wire::PROTOCOL_VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""));
    let mut sessions = mcp.borrow_mut();
    let Some(s) = sessions.get(sid, who, Millis::now()) else {
        return Err(Box::new(error_answer(
            StatusCode::NOT_FOUND,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "unknown or ended MCP session: initialize a new one",
            ),
            None,
        )));
    };
    if let Some(v) = header {
        if v != s.version {
            let r = refusal(
                jsonrpc::INVALID_REQUEST,
                format!(
                    "MCP-Protocol-Version {:?} is not this session's revision {}",
                    clip(v),
                    s.version
                ),
            );
            return Err(Box::new(error_answer(
                StatusCode::BAD_REQUEST,
                None,
                &r,
                Some(sid),
            )));
        }
    }
    Ok((sid.into(), s.version))
}

fn legacy_post(
    cx: &Ctx,
    mcp: &Sessions,
    parts: &Parts,
    who: Identity,
    msg: Message,
) -> Response<Body> {
    if let Message::Request { id, method, params } = &msg {
        if &**method == "initialize" {
            return initialize(mcp, parts, who, id, params.as_ref());
        }
    }
    let (sid_box, version) = match legacy_session(mcp, parts, &who) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let sid = Some(&*sid_box);
    match msg {
        Message::Notification { method, params } => {
            if &*method == "notifications/cancelled" {
                if let Some(rid) = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(Id::from_value)
                {
                    if let Some(s) = mcp.borrow_mut().get(&sid_box, &who, Millis::now()) {
                        s.cancel_call(&rid);
                    }
                }
            }
            accepted(sid)
        }
        Message::Response { .. } => accepted(sid),
        Message::Request { id, method, params } => {
            let result = match &*method {
                "ping" => json!({}),
                "tools/list" => match tools::list(cx, &who, params.as_ref(), false) {
                    Ok(r) => r,
                    Err(r) => return rpc_error(Some(&id), &r, sid),
                },
                "tools/call" => {
                    return start_call(
                        cx,
                        mcp,
                        parts,
                        who,
                        id,
                        params.as_ref(),
                        sid.map(|s| (s, version)),
                    )
                }
                other => {
                    return rpc_error(
                        Some(&id),
                        &refusal(
                            jsonrpc::METHOD_NOT_FOUND,
                            format!("method '{}' is not served", clip(other)),
                        ),
                        sid,
                    )
                }
            };
            json_answer(StatusCode::OK, jsonrpc::result(&id, result), sid)
        }
    }
}

fn initialize(
    mcp: &Sessions,
    parts: &Parts,
    who: Identity,
    id: &Id,
    params: Option<&Value>,
) -> Response<Body> {
    if session_id(parts).is_some() {
        return rpc_error(
            Some(id),
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "initialize opens a new session: send it without MCP-Session-Id",
            ),
            None,
        );
    }
    let asked = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let Some(asked) = asked else {
        return rpc_error(
            Some(id),
            &refusal(
                jsonrpc::INVALID_PARAMS,
                "initialize needs params.protocolVersion",
            ),
            None,
        );
    };
    // The client's revision when we serve it, else our newest (the
    // client decides whether it can speak that).
    let version = wire::handshake_revision(asked).unwrap_or(wire::HANDSHAKE[0]);
    let sid = match protocol::random_id(24) {
        Ok(s) => s,
        Err(e) => return api_error(e, Some(id)),
    };
    if let Err(full) = mcp
        .borrow_mut()
        .open(sid.as_str().into(), who, version, Millis::now())
    {
        return error_answer(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(id),
            &refusal(jsonrpc::INTERNAL_ERROR, full.to_string()),
            None,
        );
    }
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    });
    json_answer(StatusCode::OK, jsonrpc::result(id, result), Some(&sid))
}

/// The budget floor of a new call's stream (see `stream`): one largest
/// progress frame, at most the history bound. Refused when the budget or
/// the caller's tenant or address share has no room — unless the
/// caller's own session holds finished streams kept for resumption: its
/// new call comes first, and those are forgotten to make room.
fn reserve_stream(
    cx: &Ctx,
    mcp: &Sessions,
    who: &Identity,
    session: Option<&str>,
    max_bytes: usize,
) -> Result<crate::budget::Reservation, ApiError> {
    let floor = tools::MAX_FRAME.min(max_bytes);
    let holder = crate::budget::Holder::new(&who.tenant, cx.peer.ip());
    let first = cx.state.budget.reserve(holder.clone(), floor, None);
    let refusal = match first {
        Ok(b) => return Ok(b),
        Err(r) => r,
    };
    let freed = session.is_some_and(|s| {
        mcp.borrow_mut()
            .get(s, who, Millis::now())
            .is_some_and(|sess| sess.forget_finished() > 0)
    });
    let again = if freed {
        cx.state.budget.reserve(holder, floor, None)
    } else {
        Err(refusal)
    };
    again.map_err(|r| crate::pipeline::tasks::task_error(crate::task::TaskError::Budget(r)))
}

/// Answers a `tools/call` with an event stream and runs the call in a
/// task of its own. `session`: the handshake-era session and revision.
fn start_call(
    cx: &Ctx,
    mcp: &Sessions,
    parts: &Parts,
    who: Identity,
    id: Id,
    params: Option<&Value>,
    session: Option<(&str, &'static str)>,
) -> Response<Body> {
    let sid = session.map(|(s, _)| s);
    let req = match tools::parse_call(params) {
        Ok(r) => r,
        Err(r) => return rpc_error(Some(&id), &r, sid),
    };
    let cfg = &cx.state.cfg;
    let max_bytes = cfg.stream_history_bytes.max(64 * 1024);
    let bytes = match reserve_stream(cx, mcp, &who, sid, max_bytes) {
        Ok(b) => b,
        Err(e) => return api_error(e, Some(&id)),
    };
    let stream = Stream::new(cfg.stream_history_events.max(8), max_bytes, bytes);
    let cancel = Rc::new(Notify::new());
    let mut id_prefix = None;
    if let Some((s, version)) = session {
        let mut sessions = mcp.borrow_mut();
        let Some(sess) = sessions.get(s, &who, Millis::now()) else {
            return rpc_error(
                Some(&id),
                &refusal(jsonrpc::INVALID_REQUEST, "session ended"),
                sid,
            );
        };
        if !sess.start_call(id.clone(), cancel.clone()) {
            return rpc_error(
                Some(&id),
                &refusal(
                    jsonrpc::INVALID_REQUEST,
                    format!(
                        "request id {id} is running already, or the session runs {} calls",
                        session::MAX_CALLS
                    ),
                ),
                sid,
            );
        }
        let n = sess.add_stream(stream.clone());
        id_prefix = Some(n);
        if version != "2025-03-26" && version != "2025-06-18" {
            // Priming event: resumable before the first message.
            stream.push(format!("id: {n}-{}\ndata: \n\n", stream.next_seq()).into_bytes());
        }
    }
    let modern = session.is_none();
    let task_cx = Ctx {
        state: cx.state.clone(),
        peer: cx.peer,
        conn: Rc::new(ConnAbort::default()),
        ingress: cx.ingress.clone(),
        client: cx.client.clone(),
    };
    let headers = parts.headers.clone();
    let task_mcp = mcp.clone();
    let owned_sid: Option<Box<str>> = sid.map(Into::into);
    let report = tools::Reporter {
        stream: stream.clone(),
        progress: req.progress.clone(),
        id_prefix,
    };
    let run_cancel = cancel.clone();
    tokio::task::spawn_local(async move {
        let task: tools::StreamTask = Default::default();
        let outcome = tokio::select! {
            r = tools::call(&task_cx, &headers, &who, &req, &report, &task) => Some(r),
            () = run_cancel.notified() => None,
        };
        match outcome {
            Some(result) => report.emit(&tools::answer(&id, result, modern)),
            None => {
                // The invocation future is gone (a plain call's handler
                // connection closed with it); a stream task is cancelled
                // explicitly, wherever it runs.
                let started = task.borrow_mut().take();
                if let Some((tid, token)) = started {
                    protocol::cancel_task(&task_cx, &who.tenant, &tid, &token).await;
                }
                if !modern {
                    report.emit(&jsonrpc::error(
                        Some(&id),
                        wire::REQUEST_CANCELLED,
                        "Request cancelled",
                        None,
                    ));
                }
            }
        }
        report.stream.finish();
        if let Some(s) = owned_sid {
            if let Some(sess) = task_mcp.borrow_mut().get(&s, &who, Millis::now()) {
                sess.end_call(&id);
            }
        }
    });
    let body = stream::follow(stream, 0, modern.then_some(cancel));
    sse_answer(body, sid)
}

fn sse_answer(body: Body, session: Option<&str>) -> Response<Body> {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    with_session(r, session)
}

/// `Last-Event-ID` of this server: `<stream>-<seq>`.
pub fn parse_event_id(v: &str) -> Option<(u64, u64)> {
    let (a, b) = v.trim().split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn get(cx: &Ctx, mcp: &Sessions, parts: &Parts) -> Response<Body> {
    let who = match protocol::identity(cx, parts, "mcp") {
        Ok(w) => w,
        Err(e) => return api_error(e, None),
    };
    if !wire::accepts(&parts.headers).1 {
        return error_answer(
            StatusCode::NOT_ACCEPTABLE,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "Accept must list text/event-stream",
            ),
            None,
        );
    }
    let (sid, _) = match legacy_session(mcp, parts, &who) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let mut sessions = mcp.borrow_mut();
    let Some(sess) = sessions.get(&sid, &who, Millis::now()) else {
        return error_answer(
            StatusCode::NOT_FOUND,
            None,
            &refusal(jsonrpc::INVALID_REQUEST, "session ended"),
            None,
        );
    };
    if let Some(last) = parts.headers.get(wire::LAST_EVENT_ID_HEADER) {
        let found = last
            .to_str()
            .ok()
            .and_then(parse_event_id)
            .and_then(|(n, seq)| sess.stream(n).filter(|s| s.covers(seq)).map(|s| (s, seq)));
        let Some((stream, seq)) = found else {
            return error_answer(
                StatusCode::BAD_REQUEST,
                None,
                &refusal(
                    jsonrpc::INVALID_REQUEST,
                    "Last-Event-ID names no stream of this session",
                ),
                Some(&sid),
            );
        };
        if stream.check_cursor(seq).is_err() {
            return error_answer(
                StatusCode::BAD_REQUEST,
                None,
                &refusal(
                    jsonrpc::INVALID_REQUEST,
                    "the events after Last-Event-ID are no longer kept (gateway.stream_history_events / _bytes)",
                ),
                Some(&sid),
            );
        }
        return sse_answer(stream::follow(stream, seq, None), Some(&sid));
    }
    let Some(until) = sess.open_get() else {
        return error_answer(
            StatusCode::CONFLICT,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "this session has its GET stream open already",
            ),
            Some(&sid),
        );
    };
    let sessions = mcp.clone();
    let owner = who.clone();
    let s = sid.clone();
    let body = stream::idle(
        until,
        Box::new(move || {
            if let Some(sess) = sessions.borrow_mut().get(&s, &owner, Millis::now()) {
                sess.get_closed();
            }
        }),
    );
    sse_answer(body, Some(&sid))
}

fn delete(cx: &Ctx, mcp: &Sessions, parts: &Parts) -> Response<Body> {
    let who = match protocol::identity(cx, parts, "mcp") {
        Ok(w) => w,
        Err(e) => return api_error(e, None),
    };
    let Some(sid) = session_id(parts) else {
        return error_answer(
            StatusCode::BAD_REQUEST,
            None,
            &refusal(
                jsonrpc::INVALID_REQUEST,
                "DELETE needs the MCP-Session-Id to end",
            ),
            None,
        );
    };
    if mcp.borrow_mut().close(sid, &who) {
        let mut r = Response::new(empty());
        *r.status_mut() = StatusCode::OK;
        r
    } else {
        error_answer(
            StatusCode::NOT_FOUND,
            None,
            &refusal(jsonrpc::INVALID_REQUEST, "unknown or ended MCP session"),
            None,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_name_a_stream_and_a_position() {
        assert_eq!(parse_event_id("3-17"), Some((3, 17)));
        assert_eq!(parse_event_id("3"), None);
        assert_eq!(parse_event_id("a-1"), None);
        assert_eq!(parse_event_id("1-99999999999999999999999"), None);
    }
}
