//! `POST /agent/v1/route | invoke | invoke-stream`: admission (in-flight
//! cap, auth, size, per-tenant rate), the decision on the FIB replica, and
//! forwarding.
//!
//! Order matters: cheap refusals that need no body come first (in-flight
//! cap, auth), then the bounded body read, then the tenant's bucket (the
//! tenant is known only after auth or decoding).

use http::request::Parts;
use http::{header, HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;
use tokio::time::Instant;

use agentd::select::Query;
use agentd::time::Millis;

use crate::api::envelope::{Envelope, MAX_CURSOR};
use crate::api::error::{ApiError, ErrorCode};
use crate::body::{guarded, with_deadline, Body};
use crate::budget::Holder;
use crate::endpoints::remote;
use crate::endpoints::streams::{self, Dispatch, Plan};
use crate::endpoints::{authenticate, inflight_slot, json, read_body, tasks, Ctx, Need};
use crate::fib_sync::Ranked;
use crate::forward::deadline::{budget_ms, Deadline};
use crate::forward::retry::CallKind;
use crate::forward::{relay_response, Candidate, Dest, Outgoing};
use crate::limits::InflightGuard;
use crate::peer::outbound::CallIdentity;
use agentd::route::RouteId;
use std::rc::Rc;

// Pre-parsed names: a `&str` lookup parses the name on every request.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const IDEMPOTENT: HeaderName = HeaderName::from_static("x-agentd-idempotent");
const PREFER: HeaderName = HeaderName::from_static("prefer");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Longest accepted `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 128;

/// An admitted, decoded, rate-checked call.
pub(crate) struct Admitted {
    pub env: Envelope,
    pub guard: InflightGuard,
}

async fn admit(cx: &Ctx, parts: &Parts, body: Incoming, need: Need) -> Result<Admitted, ApiError> {
    let guard = inflight_slot(cx)?;
    let who = authenticate(cx, parts, need)?;
    let bytes = read_body(cx, parts, body).await?;
    let mut env = Envelope::decode(bytes)?;
    if let Some(v) = who {
        env.apply_identity(&v.tenant, &v.subject);
    }
    tenant_rate(&cx.state, &env.tenant)?;
    Ok(Admitted { env, guard })
}

/// The tenant's request bucket of this gateway (our callers; calls from
/// neighbours go through [`peer_tenant_rate`]).
pub(crate) fn tenant_rate(state: &crate::state::AppState, tenant: &str) -> Result<(), ApiError> {
    state
        .limiter
        .borrow_mut()
        .check(tenant, Millis::now())
        .map_err(|wait_ms| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!("tenant {tenant} is over its request rate"),
            )
            .retry_after_ms(wait_ms.min(60_000))
            .rejected()
        })
}

/// The rate bucket of a call neighbour `peer` forwarded for `tenant`: the
/// tenant's own when a `tenant` section configures it, else one of that
/// neighbour's (`limits`), so its tenant names cannot fill ours.
pub(crate) fn peer_tenant_rate(
    state: &crate::state::AppState,
    peer: &str,
    tenant: &str,
) -> Result<(), ApiError> {
    state
        .limiter
        .borrow_mut()
        .check_from_peer(peer, tenant, Millis::now())
        .map_err(|wait_ms| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!("tenant {tenant} of calls from neighbour {peer} is over its request rate"),
            )
            .retry_after_ms(wait_ms.min(60_000))
            .rejected()
        })
}

fn query(env: &Envelope) -> Query<'_> {
    Query {
        capability: &env.intent,
        version: env.intent_version,
        tenant: &env.tenant,
        source: Some(&env.source_agent),
        target_agent: env.target_agent.as_deref(),
    }
}

fn decide(cx: &Ctx, env: &Envelope) -> Result<Vec<Ranked>, ApiError> {
    cx.state.fib.borrow().decide(&query(env), Millis::now())
}

/// What a call walks down, in order. A call a peer forwarded is pinned
/// to the route it was sent for: that route itself when it is ours, else
/// our paths to it (never back through the router it came from).
fn candidates(cx: &Ctx, env: &Envelope) -> Result<Vec<Candidate>, ApiError> {
    let all = cx
        .state
        .fib
        .borrow()
        .candidates(&query(env), Millis::now())?;
    match &cx.hop {
        None => Ok(all),
        Some(hop) => hop.pinned(all, &env.intent),
    }
}

fn header_flag(h: &HeaderMap, name: &HeaderName) -> bool {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

fn call_kind(h: &HeaderMap, sync: bool, resumed_stream: bool) -> Result<CallKind, ApiError> {
    let has_key = match h.get(&IDEMPOTENCY_KEY) {
        None => false,
        Some(v) if v.is_empty() || v.len() > MAX_IDEMPOTENCY_KEY => {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                format!("Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} bytes"),
            ))
        }
        Some(_) => true,
    };
    Ok(CallKind {
        sync,
        resumed_stream,
        caller_idempotent: header_flag(h, &IDEMPOTENT),
        has_key,
    })
}

fn wants_async(h: &HeaderMap) -> bool {
    h.get_all(&PREFER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("respond-async"))
        })
}

/// `Last-Event-ID` as a cursor; anything but a non-negative integer is a
/// typed error.
pub(crate) fn last_event_id(h: &HeaderMap) -> Result<Option<u64>, ApiError> {
    match h.get(&LAST_EVENT_ID) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|n| *n <= MAX_CURSOR)
            .map(Some)
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidCursor,
                    "Last-Event-ID must be a non-negative integer",
                )
            }),
    }
}

pub async fn route(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let a = admit(cx, parts, body, Need::Route).await?;
    let ranked = decide(cx, &a.env)?;
    let best = &ranked[0];
    let candidates: Vec<_> = ranked
        .iter()
        .map(|r| json!({"route_id": r.candidate.route_id.as_str(), "origin": &*r.origin, "score": r.score}))
        .collect();
    Ok(json(
        StatusCode::OK,
        &json!({
            "intent": &*a.env.intent,
            "intent_version": a.env.intent_version,
            "route": {
                "route_id": best.candidate.route_id.as_str(),
                "origin": &*best.origin,
                "tenant": &*best.tenant,
                "region": &*best.region,
                "source": best.source,
                "score": best.score,
            },
            "candidates": candidates,
        }),
    ))
}

/// A call this gateway forwarded has come back to it (an endpoint that
/// leads to one of its own listeners): refused before anything else.
fn refuse_own_forward(cx: &Ctx, parts: &Parts) -> Result<(), ApiError> {
    if cx.state.forwarder.forwarded_by_us(&parts.headers) {
        return Err(ApiError::new(
            ErrorCode::ForwardingLoop,
            format!(
                "forwarding loop: this gateway ({}) already forwarded this call; a route's endpoint leads back to it",
                cx.state.cfg.router_id
            ),
        )
        .rejected());
    }
    Ok(())
}

pub async fn invoke(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    refuse_own_forward(cx, parts)?;
    let a = admit(cx, parts, body, Need::Invoke).await?;
    invoke_admitted(cx, parts, a, start).await
}

/// An admitted invocation, from a caller or from a peer router.
pub(crate) async fn invoke_admitted(
    cx: &Ctx,
    parts: &Parts,
    mut a: Admitted,
    start: Instant,
) -> Result<Response<Body>, ApiError> {
    if let Some(answer) = tasks::direct_control(cx, &a.env)? {
        return Ok(answer);
    }
    a.env
        .consume_hop(cx.state.cfg.hop_limit, &cx.state.cfg.router_id)?;
    let is_async = wants_async(&parts.headers);
    let kind = call_kind(&parts.headers, !is_async, false)?;
    let d = dispatch(cx, parts, &a.env, kind, start)?;
    if is_async && !goes_to_peer(&d.candidates) {
        return tasks::invoke_async(cx, parts, &a.env, d.candidates, d.kind, d.deadline);
    }
    if is_async && cx.hop.is_none() {
        // The task will live on the router that calls the handler.
        return remote::invoke_async(cx, parts, a, d).await;
    }
    // Sync, or an async call passing through: the next hop answers.
    let (resp, _) = forward(cx, parts, a, d, Relay::Sync).await?;
    Ok(resp)
}

/// Is the first candidate a peer path (the call leaves this router)?
pub(crate) fn goes_to_peer(candidates: &[Candidate]) -> bool {
    matches!(candidates.first().map(|c| &c.dest), Some(Dest::Peer { .. }))
}

/// The call's one deadline, from its headers or envelope.
pub(crate) fn deadline_of(
    cx: &Ctx,
    parts: &Parts,
    env: &Envelope,
    start: Instant,
) -> Result<Deadline, ApiError> {
    let budget = budget_ms(
        &parts.headers,
        env.timeout_ms,
        cx.state.cfg.default_timeout_ms,
    )?;
    Ok(Deadline::after_ms(start, budget))
}

/// Deadline and ordered candidates of a call, fixed once at ingress.
fn dispatch(
    cx: &Ctx,
    parts: &Parts,
    env: &Envelope,
    kind: CallKind,
    start: Instant,
) -> Result<Dispatch, ApiError> {
    let deadline = deadline_of(cx, parts, env, start)?;
    let candidates = candidates(cx, env)?;
    Ok(Dispatch {
        candidates,
        kind,
        deadline,
    })
}

pub async fn invoke_stream(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    let header_cursor = last_event_id(&parts.headers)?;
    refuse_own_forward(cx, parts)?;
    let a = admit(cx, parts, body, Need::Invoke).await?;
    invoke_stream_admitted(cx, parts, a, start, header_cursor).await
}

/// An admitted stream request, from a caller or from a peer router.
pub(crate) async fn invoke_stream_admitted(
    cx: &Ctx,
    parts: &Parts,
    mut a: Admitted,
    start: Instant,
    header_cursor: Option<u64>,
) -> Result<Response<Body>, ApiError> {
    a.env
        .consume_hop(cx.state.cfg.hop_limit, &cx.state.cfg.router_id)?;
    let cursor = header_cursor.max(a.env.resume_from).unwrap_or(0);
    let kind = call_kind(&parts.headers, false, cursor > 0)?;
    if cx.hop.is_some() {
        let d = dispatch(cx, parts, &a.env, kind, start)?;
        if goes_to_peer(&d.candidates) {
            // Passing through: the stream lives further on.
            let (resp, _) = forward(cx, parts, a, d, Relay::Stream).await?;
            return Ok(resp);
        }
    } else if let Some(answer) = remote::stream_elsewhere(cx, parts, &a, kind, start).await {
        return answer;
    }
    match streams::plan(cx, &a.env, cursor)? {
        Plan::Resume(id) => streams::follow(cx, id, cursor, a.guard),
        Plan::Start(key, digest) => {
            let d = dispatch(cx, parts, &a.env, kind, start)?;
            if goes_to_peer(&d.candidates) && cx.hop.is_none() {
                return remote::start_stream(cx, parts, a, key, d).await;
            }
            streams::start(cx, parts, &a.env, (key, digest), d, a.guard).await
        }
    }
}

/// How a forwarded call's answer is relayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Relay {
    /// Complete within the deadline.
    Sync,
    /// An event stream for as long as it lasts.
    Stream,
}

/// The request a call sends: the envelope as handlers get it, the
/// relayed headers, and — when a candidate is a peer path — who the
/// call acts for.
pub(crate) fn outgoing(
    cx: &Ctx,
    parts: &Parts,
    env: &Envelope,
    candidates: &[Candidate],
) -> Outgoing {
    outgoing_body(cx, parts, env, env.to_bytes(), candidates)
}

/// [`outgoing`] with the handler body already built.
pub(crate) fn outgoing_body(
    cx: &Ctx,
    parts: &Parts,
    env: &Envelope,
    body: bytes::Bytes,
    candidates: &[Candidate],
) -> Outgoing {
    let out = Outgoing::new(body, &parts.headers);
    if !candidates
        .iter()
        .any(|c| matches!(c.dest, Dest::Peer { .. }))
    {
        return out;
    }
    out.acting_for(call_identity(cx, env))
}

/// Who a call acts for on the next hop: carried over from the assertion
/// of a call that came from a peer, else this router's verified caller.
pub(crate) fn call_identity(cx: &Ctx, env: &Envelope) -> Rc<CallIdentity> {
    match &cx.hop {
        Some(hop) => hop.who.clone(),
        None => Rc::new(CallIdentity {
            tenant: env.tenant.clone(),
            caller: env.source_agent.clone(),
            capability: env.intent.clone(),
            origin: cx.state.cfg.router_id.clone(),
        }),
    }
}

/// Forwards the call down `d`'s candidates and relays the answer, with
/// the route that gave it.
pub(crate) async fn forward(
    cx: &Ctx,
    parts: &Parts,
    a: Admitted,
    d: Dispatch,
    relay: Relay,
) -> Result<(Response<Body>, RouteId), ApiError> {
    let Dispatch {
        candidates,
        kind,
        deadline,
    } = d;
    let mut out = outgoing(cx, parts, &a.env, &candidates);
    // The body is kept to resend it to the next candidate: it counts
    // against the buffer budget while held (never refused: sync calls are
    // bounded by the in-flight cap), so async/stream admission sees it.
    let _held = cx.state.budget.reserve_forced(
        Holder::new(&a.env.tenant, cx.peer.ip()),
        out.body.len(),
        Some(tasks::deadline_millis(deadline)),
    );
    if relay == Relay::Stream {
        out.relay.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        out = out.stream();
    }
    let fwd = cx
        .state
        .forwarder
        .forward(&a.env.intent, &candidates, &out, kind, deadline)
        .await?;
    let route = fwd.route_id.clone();
    let resp = relay_response(fwd);
    let (head, mut body) = resp.into_parts();
    if relay == Relay::Sync {
        // A synchronous answer must be complete within the deadline too.
        body = with_deadline(body, deadline.instant());
    }
    // The in-flight slot is held until the relayed body is finished.
    Ok((Response::from_parts(head, guarded(body, a.guard)), route))
}
