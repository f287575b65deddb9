//! Tasks held by this gateway: an async call's task started here, the
//! task operations on this gateway's table, and nexilume's routed task
//! control (`payload.nexus_direct_task_control`) for tasks it owns.

use agentd::route::RouteId;
use agentd::time::Millis;
use bytes::Bytes;
use http::{header, Response, StatusCode};
use serde_json::{json, Value};

use crate::api::envelope::Envelope;
use crate::api::error::{ApiError, ErrorCode};
use crate::api::request_body::read_limited;
use crate::api::task_request::TaskRequest;
use crate::body::{full, Body};
use crate::budget::Scope;
use crate::core::Core;
use crate::router::TaskOp;
use crate::task::live::run_async;
use crate::task::{
    object_digest, Admitted, Batch, NewTask, StreamKey, TaskError, TaskFailure, TaskId, TaskKind,
    TaskResult, TaskState, TaskTable, TaskToken,
};

use super::decision::{deadline_millis, Dispatch};
use super::dispatch::outgoing;
use super::invocation::Invocation;

/// Most events returned by one `/events` call.
const MAX_EVENTS_PER_CALL: usize = 256;

/// Longest `wait_ms` of an `/events` call: below the time a task
/// operation from another router waits for its answer, so a caller's
/// router following a task there always gets one.
pub const MAX_EVENTS_WAIT_MS: u64 = 8_000;

/// `Retry-After` when nothing held has a known release time (only
/// followed streams hold the slots or bytes): a while, said as such.
pub const UNKNOWN_RELEASE_RETRY_MS: u64 = 30_000;

impl From<TaskError> for ApiError {
    /// A task-module refusal as an API error with the contract's code. A
    /// refusal caused by held slots or bytes carries a `Retry-After` of
    /// when they really free (the earliest expiry or deadline among the
    /// holders that bind), and says when none will by itself.
    fn from(e: TaskError) -> ApiError {
        let code = match e {
            TaskError::Full { .. } => ErrorCode::TaskTableFull,
            TaskError::Share { .. } => ErrorCode::ShareExceeded,
            TaskError::Budget(r) if r.scope == Scope::Total => ErrorCode::Overloaded,
            TaskError::Budget(_) => ErrorCode::ShareExceeded,
            TaskError::Released => ErrorCode::ResultReleased,
            TaskError::NotFound => ErrorCode::NotFound,
            TaskError::Expired => ErrorCode::TaskExpired,
            TaskError::HistoryLost { .. } => ErrorCode::HistoryLost,
            TaskError::BadCursor { .. } => ErrorCode::InvalidCursor,
            TaskError::RequestMismatch | TaskError::Duplicate => ErrorCode::StreamChanged,
            TaskError::NotFinished => ErrorCode::TaskNotFinished,
            TaskError::Random => ErrorCode::Internal,
        };
        let Some(retry_at) = e.retry_at() else {
            return ApiError::new(code, e.to_string());
        };
        let (ms, when) = match retry_at {
            Some(at) => {
                let ms = at.saturating_sub(Millis::now()).max(1000);
                (
                    ms,
                    format!(
                        "the first of them frees by itself in {} s (expiry or deadline), sooner when results are fetched",
                        ms.div_ceil(1000)
                    ),
                )
            }
            None => (
                UNKNOWN_RELEASE_RETRY_MS,
                "none of them has a known release time (held by running streams); retry later"
                    .into(),
            ),
        };
        ApiError::new(code, format!("{e}; {when}"))
            .rejected()
            .retry_after_ms(ms)
    }
}

/// A task-module refusal as an API error (see the `From` impl).
pub fn task_error(e: TaskError) -> ApiError {
    e.into()
}

/// A JSON answer.
pub fn json_answer(status: StatusCode, value: &Value) -> Response<Body> {
    let mut r = Response::new(full(value.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    r
}

/// Is task `id` in this gateway's table?
pub fn is_here(core: &Core, id: &TaskId) -> bool {
    core.tasks.borrow_mut().task(id).is_some()
}

/// `/events?after=N&wait_ms=M`: while the caller's task has no event
/// after `N` and has not ended, waits for its next change, at most `M`
/// (capped at [`MAX_EVENTS_WAIT_MS`]) — a caller following a task
/// (another router's A2A front end, an SDK) learns of each step when it
/// happens, one request per step, instead of asking again and again.
pub async fn wait_for_events(core: &Core, id: &TaskId, req: &TaskRequest, tenant: Option<&str>) {
    let wait = req.wait_ms.min(MAX_EVENTS_WAIT_MS);
    if wait == 0 || req.op != TaskOp::Events {
        return;
    }
    let until = tokio::time::Instant::now() + std::time::Duration::from_millis(wait);
    loop {
        let mut changed = {
            let t = core.tasks.borrow_mut();
            match t.get(id, req.token.as_bytes(), tenant) {
                Ok(task)
                    if !task.state().is_terminal() && task.history().last_id() <= req.after =>
                {
                    task.subscribe()
                }
                // Something to answer (or an error `local` reports).
                _ => return,
            }
        };
        match tokio::time::timeout_at(until, changed.changed()).await {
            Ok(Ok(())) => {}
            _ => return,
        }
    }
}

/// A task operation on this gateway's table for `tenant` (`None`: lab
/// mode, no tenant check).
pub fn local(
    core: &Core,
    req: &TaskRequest,
    tenant: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let token = req.token.as_bytes();
    let id = TaskId::parse(&req.id).ok_or_else(|| task_error(TaskError::NotFound))?;
    let now = Millis::now();
    let mut t = core.tasks.borrow_mut();
    t.expire(now);
    let task = match t.get(&id, token, tenant) {
        Ok(task) => task,
        // A released task stays visible to its caller's status and cancel
        // calls; its result and events are gone (410 result_released).
        Err(TaskError::Released) if matches!(req.op, TaskOp::Status | TaskOp::Cancel) => {
            let doc = t
                .released_status(&id, token, tenant, now)
                .ok_or_else(|| task_error(TaskError::NotFound))?;
            return Ok(json_answer(StatusCode::OK, &doc));
        }
        Err(e) => return Err(task_error(e)),
    };
    let doc = match req.op {
        TaskOp::Status => task.status_json(now),
        TaskOp::Result => match task.state() {
            TaskState::Pending | TaskState::Running => {
                return Err(task_error(TaskError::NotFinished))
            }
            _ => {
                let doc = task.status_json(now);
                // Fetched: the slot and the bytes free now, not at expiry.
                t.release(&id);
                doc
            }
        },
        TaskOp::Events => {
            let state = task.state();
            events_doc(
                &id,
                state,
                &t.batch(&id, req.after, MAX_EVENTS_PER_CALL)
                    .map_err(task_error)?,
            )
        }
        TaskOp::Cancel => cancel_doc(&mut t, &id, now),
    };
    Ok(json_answer(StatusCode::OK, &doc))
}

/// The nexilume `events` shape: `{task_id, status, events: [{seq, event, data}]}`.
fn events_doc(id: &TaskId, state: TaskState, batch: &Batch) -> Value {
    let events: Vec<Value> = batch
        .events
        .iter()
        .map(|e| {
            let data = serde_json::from_str::<Value>(&e.data)
                .unwrap_or_else(|_| Value::String(e.data.to_string()));
            json!({"seq": e.id, "event": e.event.as_deref().unwrap_or("message"), "data": data})
        })
        .collect();
    json!({"task_id": id.to_string(), "status": state.as_str(), "events": events})
}

/// Admits `inv` as a task of this table for the caller it acts for, with
/// `(kind, request digest, stream key)`: refused before dispatch (typed)
/// when the table or the caller's share is full.
pub(super) fn admit(
    core: &Core,
    inv: &Invocation,
    d: &Dispatch,
    (kind, request_digest, stream_key): (TaskKind, [u8; 32], Option<StreamKey>),
    body_bytes: usize,
) -> Result<Admitted, ApiError> {
    let env = &inv.envelope;
    let new = NewTask {
        kind,
        tenant: env.tenant.to_string(),
        subject: env.source_agent.to_string(),
        capability: env.intent.to_string(),
        route_id: None,
        request_digest,
        stream_key,
        source: inv.principal.source(),
        deadline: Some(deadline_millis(d.deadline)),
        body_bytes,
    };
    core.tasks
        .borrow_mut()
        .try_insert(new, Millis::now())
        .map_err(task_error)
}

/// Starts an async call's task here: admitted (refused before dispatch
/// when the table is full), dispatched in the background, pinned to
/// whichever route accepts it; its id and token returned.
pub fn start_async(
    core: &std::rc::Rc<Core>,
    inv: &Invocation,
    d: Dispatch,
) -> Result<(TaskId, TaskToken), ApiError> {
    let env = &inv.envelope;
    let body = env.to_bytes();
    let admitted = admit(
        core,
        inv,
        &d,
        (TaskKind::Async, object_digest(env.doc()), None),
        body.len(),
    )?;
    let id = admitted.id;
    // The answer is read up to exactly what the task reserved for it
    // (`gateway.max_result_bytes`), so a kept result never exceeds its
    // reservation.
    let max_result = core.tasks.borrow_mut().config().result_reserve;
    // A peer path further down the list is called synchronously too (the
    // task is ours once a local candidate came first).
    let mut out = outgoing(core, inv, body, &d.candidates);
    // The gateway holds the task; the handler answers synchronously.
    out.relay.remove("prefer");
    let state = core.clone();
    let capability = env.intent.to_string();
    let Dispatch {
        candidates,
        kind,
        deadline,
    } = d;
    let work = async move {
        // The status names the route as soon as the call is sent to it,
        // not only once (or if) it answers.
        let pin = |route: &RouteId| state.tasks.borrow_mut().pin_route(&id, route.clone());
        let fwd = state
            .forwarder
            .forward_observed(&capability, &candidates, &out, kind, deadline, &pin)
            .await;
        // The body is no longer kept for a resend.
        drop(out);
        state.tasks.borrow_mut().dispatched(&id);
        let fwd = fwd.map_err(TaskFailure::from)?;
        let (head, body) = fwd.response.into_parts();
        let content_type = head
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // The answer must be complete within the caller's deadline too, or
        // a handler stalling mid-body would keep the task active forever.
        let read = read_limited(&head.headers, body, max_result);
        let bytes: Bytes = match tokio::time::timeout_at(deadline.instant(), read).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => return Err(unreadable_result(&e, max_result)),
            Err(_) => {
                return Err(TaskFailure::new(
                    ErrorCode::DeadlineExceeded,
                    "the handler's answer did not complete within the deadline",
                ))
            }
        };
        if head.status.is_client_error() || head.status.is_server_error() {
            let text: String = String::from_utf8_lossy(&bytes).chars().take(512).collect();
            return Err(TaskFailure::new(
                ErrorCode::HandlerRejected,
                format!("handler answered {}: {text}", head.status),
            ));
        }
        Ok(TaskResult {
            status: head.status.as_u16(),
            content_type,
            body: bytes.to_vec(),
        })
    };
    tokio::task::spawn_local(run_async(
        core.tasks.clone(),
        id,
        admitted.cancel,
        work,
        Millis::now,
    ));
    Ok((id, admitted.token))
}

/// Why a handler's answer could not become the task's result: larger than
/// `gateway.max_result_bytes`, or its body broke off. Either way the
/// handler answered something the gateway cannot relay (`upstream_error`).
fn unreadable_result(e: &ApiError, max_result: usize) -> TaskFailure {
    let message = if e.code == ErrorCode::PayloadTooLarge {
        format!(
            "the handler's answer exceeds gateway.max_result_bytes ({max_result} bytes), \
             the largest result an async task keeps"
        )
    } else {
        format!("the handler's answer could not be read: {}", e.message)
    };
    TaskFailure::new(ErrorCode::UpstreamError, message)
}

/// nexilume's `NexusDirectTask` controls a task by invoking the same intent
/// with `payload.nexus_direct_task_control`. When the named task is one of
/// ours, answer it here in nexilume's shapes; otherwise `None` and the call
/// is forwarded like any other.
pub fn direct_control(core: &Core, env: &Envelope) -> Result<Option<Response<Body>>, ApiError> {
    let Some(ctl) = env.direct_task_control() else {
        return Ok(None);
    };
    let Some(id) = ctl
        .get("direct_task_id")
        .and_then(Value::as_str)
        .and_then(TaskId::parse)
    else {
        return Ok(None);
    };
    let token = ctl
        .get("direct_task_token")
        .and_then(Value::as_str)
        .unwrap_or("");
    let now = Millis::now();
    let mut t = core.tasks.borrow_mut();
    t.expire(now);
    if t.task(&id).is_none() {
        return Ok(None);
    }
    let task = t
        .get(&id, token.as_bytes(), Some(&env.tenant))
        .map_err(task_error)?;
    let action = ctl.get("action").and_then(Value::as_str).unwrap_or("");
    let doc = match action {
        "status" => task.status_json(now),
        "events" => {
            let after = ctl.get("after").and_then(Value::as_u64).unwrap_or(0);
            let state = task.state();
            events_doc(
                &id,
                state,
                &t.batch(&id, after, MAX_EVENTS_PER_CALL)
                    .map_err(task_error)?,
            )
        }
        "cancel" => cancel_doc(&mut t, &id, now),
        other => {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                format!(
                    "nexus_direct_task_control.action {other:?} is not supported by this gateway"
                ),
            ))
        }
    };
    Ok(Some(json_answer(StatusCode::OK, &doc)))
}

fn cancel_doc(t: &mut TaskTable, id: &TaskId, now: Millis) -> Value {
    t.cancel(id, now);
    t.task(id).map_or(Value::Null, |task| task.status_json(now))
}
