//! The caller's router side of tasks and streams that live on another
//! router (DESIGN §8: where the handler is called).
//!
//! An async call or a new stream whose best candidate is a peer path is
//! sent on as it is; the router that calls the handler holds the task,
//! its result and its stream history, and answers with the task id and
//! token. This gateway remembers only where that task is
//! (`peer::remote`), so the caller's status, result, events, cancel and
//! stream resumes are sent to the same route over any live path, and
//! never start the work again.

use std::rc::Rc;

use http::Response;
use tokio::time::Instant;

use agentd::route::{RouteId, RouteSource};
use agentd::select::Query;
use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode, Outcome};
use crate::api::task_request::TaskRequest;
use crate::body::Body;
use crate::core::Core;
use crate::forward::deadline::Deadline;
use crate::forward::hop::{CallIdentity, HopError, HopRequest, OutBody};
use crate::forward::retry::CallKind;
use crate::forward::{relay_response, Candidate, Dest, Forwarded};
use crate::peer::remote::RemoteTask;
use crate::router::TaskOp;
use crate::task::{StreamKey, TaskError, TaskId, TASK_ID_HEADER};

use super::decision::deadline_millis;
use super::decision::{self, Dispatch};
use super::dispatch::{self, Relay};
use super::invocation::{Invocation, Neighbour};
use super::tasks;

/// Longest wait for a task operation on another router.
const TASK_OP_TIMEOUT_MS: u64 = 10_000;

/// Room for one more remote task handle of the call's tenant from its
/// caller's address, checked before dispatch.
pub fn room(core: &Core, inv: &Invocation) -> Result<(), ApiError> {
    core.peer
        .remote
        .borrow_mut()
        .room(&inv.envelope.tenant, inv.principal.source(), Millis::now())
        .map_err(refused)
}

/// A refusal of the remote task table: the local table's codes and
/// `Retry-After`, its message naming the table.
fn refused(e: TaskError) -> ApiError {
    let mut a = tasks::task_error(e);
    a.message = format!("tasks on other routers tracked here: {}", a.message);
    a
}

/// Records the task a peer answered with (`X-Nexus-Task-Id`), if any.
pub fn remember(
    core: &Core,
    resp: &Response<Body>,
    route: &RouteId,
    inv: &Invocation,
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
    let env = &inv.envelope;
    let r = core.peer.remote.borrow_mut().insert(
        id,
        base,
        crate::peer::remote::Owner {
            capability: &env.intent,
            version: env.intent_version,
            tenant: &env.tenant,
            caller: &env.source_agent,
            source: inv.principal.source(),
        },
        stream,
        deadline_millis(deadline),
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
pub async fn start_stream(
    core: &Rc<Core>,
    inv: Box<Invocation>,
    key: StreamKey,
    d: Dispatch,
) -> Result<Response<Body>, ApiError> {
    room(core, &inv)?;
    let out = dispatch::outgoing(core, &inv, inv.envelope.to_bytes(), &d.candidates);
    let (resp, route) = dispatch::send(core, &inv, &d, out, Relay::Stream).await?;
    remember(core, &resp, &route, &inv, Some(key), d.deadline);
    Ok(dispatch::hold(resp, inv.slot))
}

/// A stream request for a stream that lives on another router: sent to
/// its route (resume, or a repeat of the same request); `None` when the
/// stream is not one of those.
pub async fn stream_elsewhere(
    core: &Rc<Core>,
    inv: &Invocation,
    kind: CallKind,
) -> Option<Result<Response<Body>, ApiError>> {
    let env = &inv.envelope;
    let key = StreamKey::new(&env.tenant, &env.source_agent, &env.intent, &env.task_id);
    let (_, task) = core.peer.remote.borrow_mut().stream(&key, Millis::now())?;
    Some(resume_remote(core, inv, kind, &task).await)
}

async fn resume_remote(
    core: &Rc<Core>,
    inv: &Invocation,
    kind: CallKind,
    task: &RemoteTask,
) -> Result<Response<Body>, ApiError> {
    let d = Dispatch {
        deadline: decision::deadline(core, inv),
        candidates: paths_to(core, task)?,
        // Every candidate leads to the same task: moving between them
        // cannot start the work again.
        kind: CallKind {
            resumed_stream: false,
            ..kind
        },
    };
    let out = dispatch::outgoing(core, inv, inv.envelope.to_bytes(), &d.candidates);
    let (resp, _) = dispatch::send(core, inv, &d, out, Relay::Stream).await?;
    Ok(resp)
}

/// The live peer paths to a remote task's route, best first.
fn paths_to(core: &Core, task: &RemoteTask) -> Result<Vec<Candidate>, ApiError> {
    let q = Query {
        capability: &task.capability,
        version: task.version,
        tenant: &task.tenant,
        source: Some(&task.caller),
        target_agent: None,
    };
    let all = core
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

/// A task operation of a caller of this router: on this gateway's table,
/// or — for a task that lives on another router (a call that crossed
/// routers) — sent to its route with the caller's token. `tenant`: the
/// caller's (`None`: lab mode, no tenant check).
pub async fn task_op(
    core: &Rc<Core>,
    req: &TaskRequest,
    tenant: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    if let Some(tid) = TaskId::parse(&req.id) {
        if tasks::is_here(core, &tid) {
            tasks::wait_for_events(core, &tid, req, tenant).await;
        } else if let Some(answer) = elsewhere(core, &tid, req, tenant).await {
            return answer;
        }
    }
    tasks::local(core, req, tenant)
}

/// [`task_op`] for a task this gateway keeps a handle of, if `id` is one.
async fn elsewhere(
    core: &Rc<Core>,
    id: &TaskId,
    req: &TaskRequest,
    tenant: Option<&str>,
) -> Option<Result<Response<Body>, ApiError>> {
    let task = core.peer.remote.borrow_mut().get(id, Millis::now())?;
    if tenant.is_some_and(|t| *t != *task.tenant) {
        // Another tenant's task reads as unknown, as it does locally.
        return None;
    }
    let answer = match paths_to(core, &task) {
        Ok(paths) => {
            let who = CallIdentity {
                tenant: task.tenant.clone(),
                caller: task.caller.clone(),
                capability: task.capability.clone(),
                origin: core.cfg.router_id.clone(),
            };
            forward_task_op(core, req, &task.route, &paths, &who).await
        }
        Err(e) => Err(e),
    };
    if req.op == TaskOp::Result && answer.as_ref().is_ok_and(|r| r.status().is_success()) {
        // The task's router released it for its caller (the right
        // token): its handle here frees its slot too.
        core.peer.remote.borrow_mut().release(id);
    }
    Some(answer)
}

/// A task operation neighbour `n` sent: served here when the task is
/// ours, else sent on toward the route it is pinned to.
pub async fn neighbour_task_op(
    core: &Rc<Core>,
    n: &Neighbour,
    req: &TaskRequest,
) -> Result<Response<Body>, ApiError> {
    let tenant = Some(&*n.who.tenant);
    let local = TaskId::parse(&req.id).filter(|t| tasks::is_here(core, t));
    if let Some(tid) = local {
        // As for a caller here: the router following the task (its A2A
        // front end) learns of the next step when it happens, instead of
        // asking again at once.
        tasks::wait_for_events(core, &tid, req, tenant).await;
        return tasks::local(core, req, tenant);
    }
    let Some((capability, version)) = route_info(core, &n.route) else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!(
                "no task {} here and no route {} to send it on",
                req.id, n.route
            ),
        )
        .rejected());
    };
    let paths: Vec<Candidate> = decision::pinned_candidates(core, n, &capability, version)?
        .into_iter()
        .filter(|c| matches!(c.dest, Dest::Peer { .. }))
        .collect();
    if paths.is_empty() {
        // Route is ours but the task is not (expired, or never here).
        return tasks::local(core, req, tenant);
    }
    forward_task_op(core, req, &n.route, &paths, &n.who).await
}

/// The capability and version of route `route` as this router knows it:
/// the route itself, or any path to it.
pub fn route_info(core: &Core, route: &RouteId) -> Option<(String, u32)> {
    let fib = core.fib.borrow();
    let table = fib.replica().table();
    if let Some(r) = table.get(route) {
        if matches!(r.source, RouteSource::Local | RouteSource::Static) {
            return Some((r.capability.to_string(), r.version));
        }
    }
    let found = table
        .next_hops()
        .filter_map(|hop| RouteId::via(route, hop).ok())
        .find_map(|id| {
            table
                .get(&id)
                .map(|r| (r.capability.to_string(), r.version))
        });
    found
}

/// Sends a task operation down `candidates` (peer paths to `route`).
async fn forward_task_op(
    core: &Core,
    req: &TaskRequest,
    route: &RouteId,
    candidates: &[Candidate],
    who: &CallIdentity,
) -> Result<Response<Body>, ApiError> {
    let Some(hop) = core.forwarder.peer_hop() else {
        return Err(ApiError::new(
            ErrorCode::NotDelivered,
            "this gateway has no peer data plane",
        )
        .outcome(Outcome::NotDelivered));
    };
    let (method, path) = req.method_and_path();
    let relay = req.headers();
    let deadline = Deadline::after_ms(Instant::now(), TASK_OP_TIMEOUT_MS);
    let mut last = String::new();
    for c in candidates {
        let Dest::Peer { next_hop } = &c.dest else {
            continue;
        };
        let sent = std::cell::Cell::new(false);
        let request = HopRequest {
            next_hop,
            route: route.as_str(),
            method: method.clone(),
            path: &path,
            body: OutBody::Whole(bytes::Bytes::new()),
            hop_limit: None,
            relay: &relay,
            who,
            deadline,
            sent: &sent,
        };
        match hop.send(request).await {
            Ok(resp) | Err(HopError::NotDelivered(_, Some(resp))) => {
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
