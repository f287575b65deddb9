//! `POST /agent/v1/route | invoke | invoke-stream`: the SDK API's
//! invocation front end. It turns a request into an [`Invocation`] and
//! hands it to the pipeline.
//!
//! Order matters: cheap refusals that need no body come first (the loop
//! mark, the in-flight slot, auth), then the bounded body read; the
//! tenant's bucket is the pipeline's first step (the tenant is known only
//! after auth or decoding).

use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;
use tokio::time::Instant;

use crate::api::envelope::Envelope;
use crate::api::error::ApiError;
use crate::body::Body;
use crate::front::{authenticate, json, read_body, Ctx, Need};
use crate::limits::InflightGuard;
use crate::pipeline::{self, admission, decision, Hints, Invocation, Mode, Principal};

/// The slot, identity and envelope of a request: admitted up to its
/// tenant's rate.
async fn admit(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
    need: Need,
) -> Result<(Envelope, InflightGuard), ApiError> {
    let slot = admission::enter(&cx.state, cx.peer.ip())?;
    let who = authenticate(cx, parts, need)?;
    let bytes = read_body(cx, parts, body).await?;
    let mut env = Envelope::decode(bytes)?;
    if let Some(v) = who {
        env.apply_identity(&v.tenant, &v.subject);
    }
    Ok((env, slot))
}

fn principal(cx: &Ctx) -> Principal {
    Principal::Caller {
        source: cx.peer.ip(),
        pin: cx.ingress.pin().cloned(),
    }
}

pub async fn route(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let (env, _slot) = admit(cx, parts, body, Need::Route).await?;
    admission::rate(&cx.state, &principal(cx), &env.tenant)?;
    let ranked = decision::rank(&cx.state, &env)?;
    let best = &ranked[0];
    let candidates: Vec<_> = ranked
        .iter()
        .map(|r| json!({"route_id": r.candidate.route_id.as_str(), "origin": &*r.origin, "score": r.score}))
        .collect();
    Ok(json(
        StatusCode::OK,
        &json!({
            "intent": &*env.intent,
            "intent_version": env.intent_version,
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

/// `invoke` (sync, or async with `Prefer: respond-async`).
pub async fn invoke(cx: &Ctx, parts: Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    call(cx, parts, body, false).await
}

/// `invoke-stream`.
pub async fn invoke_stream(
    cx: &Ctx,
    parts: Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    call(cx, parts, body, true).await
}

/// The request's head is taken by value and dropped once the invocation
/// is built: its header values are slices of the connection's read
/// buffer, and held across the call they would keep that buffer from
/// being read into again (hyper then reads the next bytes into another).
async fn call(
    cx: &Ctx,
    parts: Parts,
    body: Incoming,
    stream: bool,
) -> Result<Response<Body>, ApiError> {
    let started = Instant::now();
    let mode = Mode::of_headers(&parts.headers, stream)?;
    admission::refuse_own_forward(&cx.state, &parts.headers)?;
    let (envelope, slot) = admit(cx, &parts, body, Need::Invoke).await?;
    let inv = Box::new(Invocation {
        principal: principal(cx),
        envelope,
        mode,
        hints: Hints::of_headers(&parts.headers)?,
        started,
        slot: Some(slot),
        conn: cx.conn.clone(),
    });
    drop(parts);
    Ok(pipeline::invoke(&cx.state, inv).await?.into_response())
}
