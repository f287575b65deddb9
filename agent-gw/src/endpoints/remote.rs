//! The caller's router side of tasks and streams that live on another
//! router (DESIGN §8: where the handler is called).
//!
//! An async call or a new stream whose best candidate is a peer path is
//! sent on as it is (`Prefer: respond-async`, `Accept:
//! text/event-stream`); the router that calls the handler holds the task,
//! its result and its stream history, and answers with the task id and
//! token. This gateway remembers only where that task is
//! (`peer::remote`), so the caller's status, result, events, cancel and
//! stream resumes are sent to the same route over any live path, and
//! never start the work again.

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderMap, HeaderValue, Method, Response};
use tokio::time::Instant;

use agentd::route::RouteId;
use agentd::select::Query;
use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode, Outcome};
use crate::body::Body;
use crate::endpoints::invoke::{self, Admitted, Relay};
use crate::endpoints::streams::Dispatch;
use crate::endpoints::{tasks, Ctx};
use crate::forward::deadline::Deadline;
use crate::forward::retry::CallKind;
use crate::forward::{relay_response, Dest, Forwarded};
use crate::peer::outbound::{self, CallIdentity, HopError, HopRequest};
use crate::peer::remote::RemoteTask;
use crate::router::TaskOp;
use crate::task::{StreamKey, TaskError, TaskId, TASK_ID_HEADER, TASK_TOKEN_HEADER};

/// Longest wait for a task operation on another router.
const TASK_OP_TIMEOUT_MS: u64 = 10_000;

/// Room for one more remote task handle of `tenant` from this caller's
/// address, checked before dispatch.
fn room(cx: &Ctx, tenant: &str) -> Result<(), ApiError> {
    cx.state
        .peer
        .remote
        .borrow_mut()
        .room(tenant, cx.peer.ip(), Millis::now())
        .map_err(refused)
}

/// A refusal of the remote task table: the local table's codes and
/// `Retry-After`, its message naming the table.
fn refused(e: TaskError) -> ApiError {
    let mut a = tasks::task_error(e);
    a.message = format!("tasks on other routers tracked here: {}", a.message);
    a
}

/// An async call whose best candidate is a peer path: sent on to the
/// routers in front (the task lives where the handler is); when none of
/// them took it and local candidates follow, the task is held here.
pub(crate) async fn invoke_async(
    cx: &Ctx,
    parts: &Parts,
    a: Admitted,
    d: Dispatch,
) -> Result<Response<Body>, ApiError> {
    room(cx, &a.env.tenant)?;
    let lead = d
        .candidates
        .iter()
        .take_while(|c| matches!(c.dest, Dest::Peer { .. }))
        .count();
    let mut peers = d.candidates;
    let rest = peers.split_off(lead);
    let env = a.env.clone();
    let deadline = d.deadline;
    let kind = d.kind;
    let sent = Dispatch {
        candidates: peers,
        kind,
        deadline,
    };
    match invoke::forward(cx, parts, a, sent, Relay::Sync).await {
        Ok((resp, route)) => {
            remember(cx, &resp, &route, &env, None, deadline);
            Ok(resp)
        }
        Err(e) if !rest.is_empty() && never_delivered(&e) => {
            tasks::invoke_async(cx, parts, &env, rest, kind, deadline)
        }
        Err(e) => Err(e),
    }
}

/// Where an async task a protocol front end started lives.
pub(crate) enum Placement {
    /// In this gateway's table (its id and token).
    Here(TaskId, crate::task::TaskToken),
    /// On the router that calls the handler: its id and the token it
    /// issued (hex), the handle kept here.
    There(TaskId, Box<str>),
}

/// Places an async task as `/agent/v1/invoke` with `Prefer:
/// respond-async` does (one rule for the SDK API and A2A): on this
/// gateway when its best candidate is a handler here, else on the
/// router that calls the handler, sent there as an async call — this
/// gateway keeps only the handle. When no router in front took it and
/// local candidates follow, the task is held here.
pub(crate) async fn place_async(
    cx: &Ctx,
    parts: &Parts,
    env: &crate::api::envelope::Envelope,
    mut candidates: Vec<crate::forward::Candidate>,
    kind: CallKind,
    deadline: Deadline,
) -> Result<Placement, ApiError> {
    if !invoke::goes_to_peer(&candidates) || cx.hop.is_some() {
        let (id, token) = tasks::start_async(cx, parts, env, candidates, kind, deadline)?;
        return Ok(Placement::Here(id, token));
    }
    room(cx, &env.tenant)?;
    let lead = candidates
        .iter()
        .take_while(|c| matches!(c.dest, Dest::Peer { .. }))
        .count();
    let rest = candidates.split_off(lead);
    let mut out = invoke::outgoing(cx, parts, env, &candidates);
    out.relay.insert(
        http::HeaderName::from_static("prefer"),
        HeaderValue::from_static("respond-async"),
    );
    let fwd = match cx
        .state
        .forwarder
        .forward(&env.intent, &candidates, &out, kind, deadline)
        .await
    {
        Ok(f) => f,
        Err(e) if !rest.is_empty() && never_delivered(&e) => {
            let (id, token) = tasks::start_async(cx, parts, env, rest, kind, deadline)?;
            return Ok(Placement::Here(id, token));
        }
        Err(e) => return Err(e),
    };
    let route = fwd.route_id.clone();
    let resp = relay_response(fwd);
    let handle = resp
        .headers()
        .get(TASK_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(TaskId::parse)
        .zip(
            resp.headers()
                .get(TASK_TOKEN_HEADER)
                .and_then(|v| v.to_str().ok())
                .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
                .map(Box::<str>::from),
        );
    match handle {
        Some((id, token)) if resp.status() == http::StatusCode::ACCEPTED => {
            remember(cx, &resp, &route, env, None, deadline);
            Ok(Placement::There(id, token))
        }
        _ => Err(refusal_of(&route, resp).await),
    }
}

/// The typed error a router answered instead of accepting a task.
async fn refusal_of(route: &RouteId, resp: Response<Body>) -> ApiError {
    let status = resp.status();
    let (head, body) = resp.into_parts();
    let bytes = crate::body::read_limited(&head.headers, body, 64 * 1024)
        .await
        .unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let code = doc["error"]["code"]
        .as_str()
        .and_then(ErrorCode::parse)
        .unwrap_or(ErrorCode::UpstreamError);
    let message = doc["error"]["message"].as_str().map_or_else(
        || format!("answered {status} without a task"),
        str::to_string,
    );
    ApiError::new(code, format!("route {route}: {message}")).route_id(route.as_str())
}

fn never_delivered(e: &ApiError) -> bool {
    matches!(e.outcome, Some(Outcome::Rejected | Outcome::NotDelivered))
}

/// Records the task a peer answered with (`X-Nexus-Task-Id`), if any.
fn remember(
    cx: &Ctx,
    resp: &Response<Body>,
    route: &RouteId,
    env: &crate::api::envelope::Envelope,
    stream: Option<StreamKey>,
    deadline: Deadline,
) {
    let Some(id) = resp
        .headers()
        .get(TASK_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(TaskId::parse)
    else {
        return;
    };
    let Ok(base) = RouteId::new(route.base()) else {
        return;
    };
    let r = cx.state.peer.remote.borrow_mut().insert(
        id,
        base,
        crate::peer::remote::Owner {
            capability: &env.intent,
            version: env.intent_version,
            tenant: &env.tenant,
            caller: &env.source_agent,
            source: cx.peer.ip(),
        },
        stream,
        tasks::deadline_millis(deadline),
        Millis::now(),
    );
    if r.is_err() {
        // Room was checked before dispatch; only a burst of concurrent
        // remote tasks gets here. The caller still has its handle, and
        // its resume or status goes by selection.
        agentd::log_warn!("task {id} on route {route}: remote task table full, handle not kept");
    }
}

/// A new stream whose best candidate is a peer path: the stream and its
/// history live on the router that calls the handler.
pub(crate) async fn start_stream(
    cx: &Ctx,
    parts: &Parts,
    a: Admitted,
    key: StreamKey,
    d: Dispatch,
) -> Result<Response<Body>, ApiError> {
    room(cx, &a.env.tenant)?;
    let env = a.env.clone();
    let deadline = d.deadline;
    let (resp, route) = invoke::forward(cx, parts, a, d, Relay::Stream).await?;
    remember(cx, &resp, &route, &env, Some(key), deadline);
    Ok(resp)
}

/// A stream request for a stream that lives on another router: sent to
/// its route (resume, or a repeat of the same request); `None` when the
/// stream is not one of those.
pub(crate) async fn stream_elsewhere(
    cx: &Ctx,
    parts: &Parts,
    a: &Admitted,
    kind: CallKind,
    start: Instant,
) -> Option<Result<Response<Body>, ApiError>> {
    let env = &a.env;
    let key = StreamKey::new(&env.tenant, &env.source_agent, &env.intent, &env.task_id);
    let (_, task) = cx
        .state
        .peer
        .remote
        .borrow_mut()
        .stream(&key, Millis::now())?;
    Some(resume_remote(cx, parts, a, kind, start, &task).await)
}

async fn resume_remote(
    cx: &Ctx,
    parts: &Parts,
    a: &Admitted,
    kind: CallKind,
    start: Instant,
    task: &RemoteTask,
) -> Result<Response<Body>, ApiError> {
    let deadline = invoke::deadline_of(cx, parts, &a.env, start)?;
    let candidates = paths_to(cx, task)?;
    // Every candidate leads to the same task: moving between them
    // cannot start the work again.
    let kind = CallKind {
        resumed_stream: false,
        ..kind
    };
    let mut out = invoke::outgoing(cx, parts, &a.env, &candidates);
    out.relay.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    let out = out.stream();
    let fwd = cx
        .state
        .forwarder
        .forward(&a.env.intent, &candidates, &out, kind, deadline)
        .await?;
    Ok(relay_response(fwd))
}

/// The live peer paths to a remote task's route, best first.
fn paths_to(cx: &Ctx, task: &RemoteTask) -> Result<Vec<crate::forward::Candidate>, ApiError> {
    let q = Query {
        capability: &task.capability,
        version: task.version,
        tenant: &task.tenant,
        source: Some(&task.caller),
        target_agent: None,
    };
    let all = cx
        .state
        .fib
        .borrow()
        .candidates(&q, Millis::now())
        .unwrap_or_default();
    let paths: Vec<_> = all
        .into_iter()
        .filter(|c| matches!(c.dest, Dest::Peer { .. }) && c.route_id.base() == task.route.as_str())
        .collect();
    if paths.is_empty() {
        return Err(ApiError::new(
            ErrorCode::NoRoute,
            format!(
                "the task lives on route {} of another router, and no path to it is up now",
                task.route
            ),
        )
        .outcome(Outcome::NotDelivered)
        .capability(&task.capability)
        .route_id(task.route.as_str())
        .retry_after_ms(1000));
    }
    Ok(paths)
}

/// `/agent/v1/tasks/{id}…` for a task that lives on another router, if
/// `id` is one: sent to its route with the caller's token.
pub async fn task_op(
    cx: &Ctx,
    parts: &Parts,
    id: &TaskId,
    op: TaskOp,
    tenant: Option<&str>,
) -> Option<Result<Response<Body>, ApiError>> {
    let task = cx.state.peer.remote.borrow_mut().get(id, Millis::now())?;
    if tenant.is_some_and(|t| *t != *task.tenant) {
        // Another tenant's task reads as unknown, as it does locally.
        return None;
    }
    let answer = send_task_op(cx, parts, op, &task).await;
    if op == TaskOp::Result && answer.as_ref().is_ok_and(|r| r.status().is_success()) {
        // The task's router released it for its caller (the right
        // token): its handle here frees its slot too.
        cx.state.peer.remote.borrow_mut().release(id);
    }
    Some(answer)
}

async fn send_task_op(
    cx: &Ctx,
    parts: &Parts,
    op: TaskOp,
    task: &RemoteTask,
) -> Result<Response<Body>, ApiError> {
    let candidates = paths_to(cx, task)?;
    let who = match &cx.hop {
        Some(hop) => hop.who.clone(),
        None => std::rc::Rc::new(CallIdentity {
            tenant: task.tenant.clone(),
            caller: task.caller.clone(),
            capability: task.capability.clone(),
            origin: cx.state.cfg.router_id.clone(),
        }),
    };
    forward_task_op(cx, parts, op, &task.route, &candidates, &who).await
}

/// Sends a task operation down `candidates` (peer paths to `route`).
pub async fn forward_task_op(
    cx: &Ctx,
    parts: &Parts,
    op: TaskOp,
    route: &RouteId,
    candidates: &[crate::forward::Candidate],
    who: &CallIdentity,
) -> Result<Response<Body>, ApiError> {
    let Some((plane, ttl)) = cx.state.forwarder.peer_plane() else {
        return Err(ApiError::new(
            ErrorCode::NotDelivered,
            "this gateway has no peer data plane",
        )
        .outcome(Outcome::NotDelivered));
    };
    let method = match op {
        TaskOp::Cancel => Method::DELETE,
        _ => Method::GET,
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or(parts.uri.path(), |p| p.as_str());
    let mut relay = HeaderMap::new();
    for name in [TASK_TOKEN_HEADER, "accept", "traceparent", "tracestate"] {
        if let Some(v) = parts.headers.get(name) {
            relay.insert(name, v.clone());
        }
    }
    let deadline = Deadline::after_ms(Instant::now(), TASK_OP_TIMEOUT_MS);
    let mut last = String::new();
    for c in candidates {
        let Dest::Peer { next_hop } = &c.dest else {
            continue;
        };
        let sent = std::cell::Cell::new(false);
        let req = HopRequest {
            next_hop,
            route: route.as_str(),
            method: method.clone(),
            path,
            body: Bytes::new(),
            relay: &relay,
            who,
            deadline,
            sent: &sent,
        };
        match outbound::send(&plane, ttl, req).await {
            Ok(resp) => {
                return Ok(relay_response(Forwarded {
                    route_id: c.route_id.clone(),
                    response: resp,
                }))
            }
            Err(HopError::NotDelivered(_, Some(resp))) => {
                return Ok(relay_response(Forwarded {
                    route_id: c.route_id.clone(),
                    response: resp,
                }))
            }
            Err(HopError::NotDelivered(why, None)) => last = why,
            // A status read may be repeated; a cancel that may have
            // arrived is reported as unknown rather than sent twice.
            Err(HopError::MaybeDelivered(why)) => {
                return Err(ApiError::new(
                    ErrorCode::UpstreamUnknown,
                    format!("task operation sent to route {route}, no answer: {why}"),
                )
                .outcome(Outcome::Unknown)
                .route_id(route.as_str()))
            }
        }
    }
    Err(ApiError::new(
        ErrorCode::NotDelivered,
        format!("task operation for route {route} not delivered: {last}"),
    )
    .outcome(Outcome::NotDelivered)
    .route_id(route.as_str()))
}
