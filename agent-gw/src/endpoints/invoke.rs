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
use crate::endpoints::streams::{self, Dispatch, Plan};
use crate::endpoints::{authenticate, inflight_slot, json, read_body, tasks, Ctx, Need};
use crate::fib_sync::Ranked;
use crate::forward::deadline::{budget_ms, Deadline};
use crate::forward::retry::CallKind;
use crate::forward::{relay_response, Candidate, Outgoing};
use crate::limits::InflightGuard;

// Pre-parsed names: a `&str` lookup parses the name on every request.
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
const IDEMPOTENT: HeaderName = HeaderName::from_static("x-agentd-idempotent");
const PREFER: HeaderName = HeaderName::from_static("prefer");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Longest accepted `Idempotency-Key`.
pub const MAX_IDEMPOTENCY_KEY: usize = 128;

/// An admitted, decoded, rate-checked call.
struct Admitted {
    env: Envelope,
    guard: InflightGuard,
}

async fn admit(cx: &Ctx, parts: &Parts, body: Incoming, need: Need) -> Result<Admitted, ApiError> {
    let guard = inflight_slot(cx)?;
    let who = authenticate(cx, parts, need)?;
    let bytes = read_body(cx, parts, body).await?;
    let mut env = Envelope::decode(bytes)?;
    if let Some(v) = who {
        env.apply_identity(&v.tenant, &v.subject);
    }
    cx.state
        .limiter
        .borrow_mut()
        .check(&env.tenant, Millis::now())
        .map_err(|wait_ms| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!("tenant {} is over its request rate", env.tenant),
            )
            .retry_after_ms(wait_ms.min(60_000))
        })?;
    Ok(Admitted { env, guard })
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

/// What a call walks down, in order.
fn candidates(cx: &Ctx, env: &Envelope) -> Result<Vec<Candidate>, ApiError> {
    cx.state.fib.borrow().candidates(&query(env), Millis::now())
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
fn last_event_id(h: &HeaderMap) -> Result<Option<u64>, ApiError> {
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
    let mut a = admit(cx, parts, body, Need::Invoke).await?;
    if let Some(answer) = tasks::direct_control(cx, &a.env)? {
        return Ok(answer);
    }
    a.env.consume_hop(cx.state.cfg.hop_limit)?;
    let is_async = wants_async(&parts.headers);
    let kind = call_kind(&parts.headers, !is_async, false)?;
    if is_async {
        let d = dispatch(cx, parts, &a.env, kind, start)?;
        return tasks::invoke_async(cx, parts, &a.env, d.candidates, d.kind, d.deadline);
    }
    forward(cx, parts, a, kind, start, None).await
}

/// Deadline and ordered candidates of a call, fixed once at ingress.
fn dispatch(
    cx: &Ctx,
    parts: &Parts,
    env: &Envelope,
    kind: CallKind,
    start: Instant,
) -> Result<Dispatch, ApiError> {
    let budget = budget_ms(
        &parts.headers,
        env.timeout_ms,
        cx.state.cfg.default_timeout_ms,
    )?;
    let deadline = Deadline::after_ms(start, budget);
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
    let mut a = admit(cx, parts, body, Need::Invoke).await?;
    a.env.consume_hop(cx.state.cfg.hop_limit)?;
    let cursor = header_cursor.max(a.env.resume_from).unwrap_or(0);
    let kind = call_kind(&parts.headers, false, cursor > 0)?;
    match streams::plan(cx, &a.env, cursor)? {
        Plan::Resume(id) => streams::follow(cx, id, cursor, a.guard),
        Plan::Start(key, digest) => {
            let d = dispatch(cx, parts, &a.env, kind, start)?;
            streams::start(cx, parts, &a.env, (key, digest), d, a.guard).await
        }
    }
}

async fn forward(
    cx: &Ctx,
    parts: &Parts,
    a: Admitted,
    kind: CallKind,
    start: Instant,
    accept: Option<&'static str>,
) -> Result<Response<Body>, ApiError> {
    let budget = budget_ms(
        &parts.headers,
        a.env.timeout_ms,
        cx.state.cfg.default_timeout_ms,
    )?;
    let deadline = Deadline::after_ms(start, budget);
    let candidates = candidates(cx, &a.env)?;
    let mut out = Outgoing::new(a.env.to_bytes(), &parts.headers);
    // The body is kept to resend it to the next candidate: it counts
    // against the buffer budget while held (never refused: sync calls are
    // bounded by the in-flight cap), so async/stream admission sees it.
    let _held = cx.state.budget.reserve_forced(
        Holder::new(&a.env.tenant, cx.peer.ip()),
        out.body.len(),
        Some(tasks::deadline_millis(deadline)),
    );
    if let Some(accept) = accept {
        out.relay
            .insert(header::ACCEPT, HeaderValue::from_static(accept));
    }
    let fwd = cx
        .state
        .forwarder
        .forward(&a.env.intent, &candidates, &out, kind, deadline)
        .await?;
    let resp = relay_response(fwd);
    let (head, mut body) = resp.into_parts();
    if accept.is_none() {
        // A synchronous answer must be complete within the deadline too.
        body = with_deadline(body, deadline.instant());
    }
    // The in-flight slot is held until the relayed body is finished.
    Ok(Response::from_parts(head, guarded(body, a.guard)))
}
