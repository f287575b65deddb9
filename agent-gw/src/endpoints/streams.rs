//! `POST /agent/v1/invoke-stream`: resumable SSE streams held as tasks.
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
//! connection to the handler.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use agentd::route::RouteId;
use agentd::time::Millis;
use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response};
use tokio::sync::mpsc;

use crate::api::envelope::Envelope;
use crate::api::error::ApiError;
use crate::body::{guarded, Body};
use crate::endpoints::tasks::task_error;
use crate::endpoints::{ConnAbort, Ctx};
use crate::forward::deadline::Deadline;
use crate::forward::retry::CallKind;
use crate::forward::{relay_response, Candidate, ROUTE_ID_HEADER};
use crate::limits::InflightGuard;
use crate::state::AppState;
use crate::task::live::{produce_stream, SseLimits};
use crate::task::{
    object_digest, Follower, NewTask, StreamKey, TaskError, TaskFailure, TaskId, TaskKind,
    TaskToken, TASK_ID_HEADER, TASK_TOKEN_HEADER,
};

/// Where and how a call is sent: one ordered FIB snapshot, the retry
/// class, and the caller's one deadline.
#[derive(Debug)]
pub struct Dispatch {
    pub candidates: Vec<Candidate>,
    pub kind: CallKind,
    pub deadline: Deadline,
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
pub fn plan(cx: &Ctx, env: &Envelope, cursor: u64) -> Result<Plan, ApiError> {
    let key = StreamKey::new(&env.tenant, &env.source_agent, &env.intent, &env.task_id);
    let digest = object_digest(env.doc());
    let mut t = cx.state.tasks.borrow_mut();
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

/// Serves a follower of `id` from `cursor` as the SSE response.
pub fn follow(
    cx: &Ctx,
    id: TaskId,
    cursor: u64,
    guard: InflightGuard,
) -> Result<Response<Body>, ApiError> {
    let follower = Follower::new(&cx.state.tasks, id, cursor).map_err(task_error)?;
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let slot: Slot = Rc::new(RefCell::new(Some(guard)));
    let drain = Duration::from_millis(cx.state.cfg.stream_drain_timeout_ms);
    tokio::task::spawn_local(pump(
        follower,
        tx,
        Stall {
            drain,
            slot: slot.clone(),
            conn: cx.conn.clone(),
            state: cx.state.clone(),
            peer: cx.peer,
        },
    ));
    let mut r = Response::new(guarded(crate::body::channel(rx), slot));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(task) = cx.state.tasks.borrow_mut().task(&id) {
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
    state: Rc<AppState>,
    peer: SocketAddr,
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
pub async fn start(
    cx: &Ctx,
    parts: &Parts,
    env: &Envelope,
    (key, digest): (StreamKey, [u8; 32]),
    dispatch: Dispatch,
    guard: InflightGuard,
) -> Result<Response<Body>, ApiError> {
    let Dispatch {
        candidates,
        kind,
        deadline,
    } = dispatch;
    let body = env.to_bytes();
    let new = NewTask {
        kind: TaskKind::Stream,
        tenant: env.tenant.to_string(),
        subject: env.source_agent.to_string(),
        capability: env.intent.to_string(),
        route_id: None,
        request_digest: digest,
        stream_key: Some(key),
        source: cx.peer.ip(),
        deadline: Some(crate::endpoints::tasks::deadline_millis(deadline)),
        body_bytes: body.len(),
    };
    let admitted = cx
        .state
        .tasks
        .borrow_mut()
        .try_insert(new, Millis::now())
        .map_err(task_error)?;
    let id = admitted.id;
    // A peer path further down the list gets the stream request too (the
    // history is ours once a local candidate came first).
    let mut out =
        crate::endpoints::invoke::outgoing_body(cx, parts, env, body, &candidates).stream();
    out.relay.insert(
        header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    out.relay.remove("last-event-id");
    let pin = |route: &RouteId| cx.state.tasks.borrow_mut().pin_route(&id, route.clone());
    let fwd = match cx
        .state
        .forwarder
        .forward_observed(&env.intent, &candidates, &out, kind, deadline, &pin)
        .await
    {
        Ok(f) => f,
        Err(e) => {
            cx.state.tasks.borrow_mut().remove(&id);
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
        cx.state.tasks.borrow_mut().remove(&id);
        let resp = relay_response(fwd);
        let (head, body) = resp.into_parts();
        return Ok(Response::from_parts(head, guarded(body, guard)));
    }
    // Dispatched: the body is no longer kept for a resend.
    drop(out);
    cx.state.tasks.borrow_mut().dispatched(&id);
    let body = fwd.response.into_body();
    tokio::task::spawn_local(produce_stream(
        cx.state.tasks.clone(),
        id,
        admitted.cancel,
        async move { Ok::<_, TaskFailure>(body) },
        SseLimits::default(),
        Millis::now,
    ));
    let mut r = follow(cx, id, 0, guard)?;
    insert_token(&mut r, &admitted.token);
    Ok(r)
}

fn insert_token(r: &mut Response<Body>, token: &TaskToken) {
    if let Ok(v) = HeaderValue::from_str(&token.to_hex()) {
        r.headers_mut().insert(TASK_TOKEN_HEADER, v);
    }
}
