//! Streams: resumable SSE streams held as tasks.
//!
//! A stream is identified by (verified tenant, source agent, intent,
//! envelope `task_id`). The first request dispatches the handler once and
//! a producer copies its events into the task's bounded history under our
//! own ids 1, 2, 3…; the caller's response is a follower of that history.
//! A reconnect with the same envelope and `Last-Event-ID: N` (or
//! `resume_from_event_id`) follows the same history from N — the handler
//! is never called again. A caller that disconnects leaves the producer
//! running; `DELETE /agent/v1/tasks/{id}` (id and token in the
//! `X-Nexus-Task-*` response headers) cancels it, which closes the
//! connection to the handler. A stream whose handler is on another
//! router lives there (`remote`); this router relays it.

use std::cell::RefCell;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use agentd::route::RouteId;
use agentd::time::Millis;
use bytes::Bytes;
use http::{header, HeaderValue, Response};
use tokio::sync::mpsc;

use crate::api::envelope::Envelope;
use crate::api::error::ApiError;
use crate::body::{guarded, Body};
use crate::core::Core;
use crate::forward::{relay_response, ROUTE_ID_HEADER};
use crate::limits::InflightGuard;
use crate::task::live::{produce_stream, SseLimits};
use crate::task::{
    object_digest, Follower, StreamKey, TaskError, TaskFailure, TaskId, TaskKind, TaskToken,
    TASK_ID_HEADER, TASK_TOKEN_HEADER,
};

use super::decision::{self, goes_to_peer, Dispatch};
use super::dispatch::{self, Relay};
use super::invocation::{ConnAbort, Invocation, Principal};
use super::remote;
use super::tasks::{self, task_error};

/// Serves a stream invocation: passing through to the router that holds
/// it, resuming a stream held here or elsewhere, or starting it.
pub async fn serve(
    core: &Rc<Core>,
    mut inv: Box<Invocation>,
    header_cursor: Option<u64>,
) -> Result<Response<Body>, ApiError> {
    let cursor = header_cursor.max(inv.envelope.resume_from).unwrap_or(0);
    let kind = decision::kind(&inv, false, cursor > 0);
    match &inv.principal {
        Principal::Neighbour(_) => {
            let d = decision::decide(core, &inv, kind)?;
            if goes_to_peer(&d.candidates) {
                // Passing through: the stream lives further on.
                return dispatch::forward(core, inv, d, Relay::Stream).await;
            }
        }
        // At an agent's address the stream is that agent's, here.
        Principal::Caller { pin: Some(_), .. } => {}
        Principal::Caller { pin: None, .. } => {
            if let Some(answer) = remote::stream_elsewhere(core, &inv, kind).await {
                return answer;
            }
        }
    }
    match plan(core, &inv.envelope, cursor)? {
        Plan::Resume(id) => {
            if let Principal::Caller { pin: Some(a), .. } = &inv.principal {
                let route = core
                    .tasks
                    .borrow_mut()
                    .task(&id)
                    .and_then(|t| t.route_id.clone());
                if !route.is_some_and(|r| decision::is_agents_route(core, a, &r)) {
                    return Err(decision::at_agent_addr(core, a, &inv.envelope)
                        .err()
                        .unwrap_or_else(|| not_this_agents(a)));
                }
            }
            let slot = inv.slot.take();
            follow(core, &inv, id, cursor, slot)
        }
        Plan::Start(key, digest) => {
            let d = decision::decide(core, &inv, kind)?;
            if goes_to_peer(&d.candidates) && inv.principal.neighbour().is_none() {
                return remote::start_stream(core, inv, key, d).await;
            }
            start(core, inv, (key, digest), d).await
        }
    }
}

/// A stream or task of another agent, asked about at agent address `a`.
pub fn not_this_agents(a: &agentd::fib::AgentAddr) -> ApiError {
    ApiError::new(
        crate::api::error::ErrorCode::NotFound,
        format!(
            "no such task of {} ({}) at [{}]",
            a.origin, a.capability, a.addr
        ),
    )
}

/// How a stream request is to be served.
#[derive(Debug)]
pub enum Plan {
    /// Follow an existing stream from the cursor; nothing is dispatched.
    Resume(TaskId),
    /// Start the stream: dispatch once.
    Start(StreamKey, [u8; 32]),
}

/// Decides between resuming and starting, or refuses with a typed error
/// (unknown/expired stream with a cursor, changed request, lost history).
fn plan(core: &Core, env: &Envelope, cursor: u64) -> Result<Plan, ApiError> {
    let key = StreamKey::new(&env.tenant, &env.source_agent, &env.intent, &env.task_id);
    let digest = object_digest(env.doc());
    let mut t = core.tasks.borrow_mut();
    t.expire(Millis::now());
    match t.resume(&key, &digest, cursor) {
        Ok(id) => Ok(Plan::Resume(id)),
        Err(TaskError::NotFound | TaskError::Expired) if cursor == 0 => {
            Ok(Plan::Start(key, digest))
        }
        Err(e) => Err(task_error(e)),
    }
}

/// The in-flight slot of a stream response, shared by the response body
/// (normal end: released when the body is done) and the pump (a stalled
/// follower: released at once).
type Slot = Rc<RefCell<Option<InflightGuard>>>;

/// Serves a follower of `id` from `cursor` as the SSE response of
/// `inv`, which holds `slot` while it lasts.
fn follow(
    core: &Rc<Core>,
    inv: &Invocation,
    id: TaskId,
    cursor: u64,
    slot: Option<InflightGuard>,
) -> Result<Response<Body>, ApiError> {
    let follower = Follower::new(&core.tasks, id, cursor).map_err(task_error)?;
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let slot: Slot = Rc::new(RefCell::new(slot));
    let drain = Duration::from_millis(core.cfg.stream_drain_timeout_ms);
    tokio::task::spawn_local(pump(
        follower,
        tx,
        Stall {
            drain,
            slot: slot.clone(),
            conn: inv.conn.clone(),
            state: core.clone(),
            peer: inv.principal.source(),
        },
    ));
    let mut r = Response::new(guarded(crate::body::channel(rx), slot));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(task) = core.tasks.borrow_mut().task(&id) {
        if let Some(route) = task
            .route_id
            .as_ref()
            .and_then(|r| HeaderValue::from_str(r.as_str()).ok())
        {
            h.insert(ROUTE_ID_HEADER, route);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&id.to_string()) {
        h.insert(TASK_ID_HEADER, v);
    }
    Ok(r)
}

/// What the pump needs to detach a follower that stopped reading.
struct Stall {
    drain: Duration,
    slot: Slot,
    conn: Rc<ConnAbort>,
    state: Rc<Core>,
    peer: IpAddr,
}

/// Moves follower chunks to the response until the stream ends or the
/// caller goes away (the receiver is dropped with the response body).
///
/// A caller that takes no bytes for `drain` (its socket, hyper's buffer
/// and the channel are full) is detached: the follower leaves the task
/// (the producer is no longer held back for it and keeps filling the
/// history, so the caller can resume with `Last-Event-ID`), the in-flight
/// slot is released and the connection is closed.
async fn pump(mut follower: Follower, tx: mpsc::Sender<Bytes>, stall: Stall) {
    loop {
        tokio::select! {
            chunk = follower.next_chunk() => match chunk {
                Some(c) => match tokio::time::timeout(stall.drain, tx.send(Bytes::from(c))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return,
                    Err(_) => {
                        let cursor = follower.cursor();
                        drop(follower);
                        stall.slot.borrow_mut().take();
                        stall.conn.abort();
                        let mut s = stall.state.stream_stats.get();
                        s.stalled_detached += 1;
                        stall.state.stream_stats.set(s);
                        agentd::log_notice!(
                            "stream follower {} took nothing for {} ms: detached at event {cursor}, connection closed (the stream keeps running)",
                            stall.peer,
                            stall.drain.as_millis()
                        );
                        return;
                    }
                },
                None => return,
            },
            _ = tx.closed() => return,
        }
    }
}

/// Starts a stream: admits the task (refusing when the table is full),
/// dispatches once, and — if the handler answers with an event stream —
/// hands its body to a producer and answers as a follower from 0. A
/// handler that answers anything else is relayed unchanged and the task is
/// forgotten, as is a dispatch that failed, so the caller may retry.
async fn start(
    core: &Rc<Core>,
    mut inv: Box<Invocation>,
    (key, digest): (StreamKey, [u8; 32]),
    d: Dispatch,
) -> Result<Response<Body>, ApiError> {
    let env = &inv.envelope;
    let body = env.to_bytes();
    let admitted = tasks::admit(
        core,
        &inv,
        &d,
        (TaskKind::Stream, digest, Some(key)),
        body.len(),
    )?;
    let id = admitted.id;
    // A peer path further down the list gets the stream request too (the
    // history is ours once a local candidate came first).
    let mut out = dispatch::outgoing(core, &inv, body, &d.candidates).stream();
    out.relay.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    out.relay.remove("last-event-id");
    let pin = |route: &RouteId| core.tasks.borrow_mut().pin_route(&id, route.clone());
    let fwd = match core
        .forwarder
        .forward_observed(&env.intent, &d.candidates, &out, d.kind, d.deadline, &pin)
        .await
    {
        Ok(f) => f,
        Err(e) => {
            core.tasks.borrow_mut().remove(&id);
            return Err(e);
        }
    };
    let is_sse = fwd.response.status().is_success()
        && fwd
            .response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
    if !is_sse {
        core.tasks.borrow_mut().remove(&id);
        return Ok(dispatch::hold(relay_response(fwd), inv.slot));
    }
    // Dispatched: the body is no longer kept for a resend.
    drop(out);
    core.tasks.borrow_mut().dispatched(&id);
    let (mut head, body) = fwd.response.into_parts();
    // A relay client's stream slot lasts as long as the stream.
    let body = crate::body::Guarded::new(
        crate::body::relay(body),
        crate::forward::hop::Held::take(&mut head.extensions),
    );
    tokio::task::spawn_local(produce_stream(
        core.tasks.clone(),
        id,
        admitted.cancel,
        async move { Ok::<_, TaskFailure>(body) },
        SseLimits::default(),
        Millis::now,
    ));
    let slot = inv.slot.take();
    let mut r = follow(core, &inv, id, 0, slot)?;
    insert_token(&mut r, &admitted.token);
    Ok(r)
}

fn insert_token(r: &mut Response<Body>, token: &TaskToken) {
    if let Ok(v) = HeaderValue::from_str(&token.to_hex()) {
        r.headers_mut().insert(TASK_TOKEN_HEADER, v);
    }
}
