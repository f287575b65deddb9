//! What the standard protocol endpoints (MCP `/mcp`, A2A `/a2a`) share:
//! who a protocol call acts for, the Host/Origin guard, and turning a
//! protocol call into an ordinary invocation.
//!
//! Identity comes only from the request's own credentials
//! (`authenticate` with the invoke scope, exactly as `/agent/v1/invoke`);
//! with auth `none` (labs) a call acts for `gateway.protocol_tenant` as
//! `agent://<tenant>/<protocol>-client`. Nothing in a JSON-RPC payload
//! names a tenant or an identity.
//!
//! A protocol call is an envelope run through the same admission
//! (in-flight caps, tenant rate), policy, selection, forwarding, retries,
//! deadlines and peer paths as `/agent/v1/invoke` and `invoke-stream`:
//! the internal functions behind those endpoints take the envelope built
//! here and a synthetic request head carrying the caller's credentials.

use std::net::IpAddr;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Method, Response};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::api::envelope::{Envelope, DIRECT_TASK_CONTROL};
use crate::api::error::{ApiError, ErrorCode};
use crate::body::Body;
use crate::endpoints::invoke::{self, Admitted};
use crate::endpoints::{authenticate, inflight_slot, Ctx, Need};
use crate::origin;

/// Who a protocol call acts for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub tenant: Box<str>,
    /// Agent URI of the caller.
    pub subject: Box<str>,
}

/// The identity of a protocol request (`protocol`: `mcp` or `a2a`, used
/// for the lab-mode subject).
pub fn identity(cx: &Ctx, parts: &Parts, protocol: &str) -> Result<Identity, ApiError> {
    Ok(match authenticate(cx, parts, Need::Invoke)? {
        Some(v) => Identity {
            tenant: v.tenant,
            subject: v.subject,
        },
        None => {
            let tenant = &cx.state.cfg.protocol_tenant;
            Identity {
                tenant: tenant.clone(),
                subject: format!("agent://{tenant}/{protocol}-client").into(),
            }
        }
    })
}

/// The Host/Origin guard with this router's addresses: its interface
/// addresses (read now) and the configured listener addresses.
pub fn check_origin(cx: &Ctx, parts: &Parts) -> Result<(), origin::Refusal> {
    let mut addrs: Vec<IpAddr> = agentd::endpoint::local_addrs().addrs;
    let listen = cx.state.cfg.sdk_listen.ip();
    if !listen.is_unspecified() {
        addrs.push(listen);
    }
    origin::check(
        &parts.headers,
        origin::Allowed {
            names: &cx.state.cfg.allowed_hosts,
            addrs: &addrs,
        },
    )
}

/// The request head an internal invocation runs with: the caller's
/// credentials and trace headers, plus `extra`.
pub fn synthetic_parts(parts: &Parts, path: &str, extra: &[(&'static str, HeaderValue)]) -> Parts {
    let mut b = http::Request::builder().method(Method::POST).uri(path);
    for name in [header::AUTHORIZATION.as_str(), "traceparent", "tracestate"] {
        if let Some(v) = parts.headers.get(name) {
            b = b.header(name, v.clone());
        }
    }
    for (name, v) in extra {
        b = b.header(*name, v.clone());
    }
    match b.body(()) {
        Ok(r) => r.into_parts().0,
        // Every name and value above is valid; unreachable in practice.
        Err(_) => http::Request::new(()).into_parts().0,
    }
}

/// A fresh random id (hex) from the gateway's token generator: 128 bits
/// and more, never derived from anything a client sent.
pub fn random_id(bytes: usize) -> Result<String, ApiError> {
    let mut b = vec![0u8; bytes.clamp(16, 64)];
    crate::auth::fill_random(&mut b)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("no randomness for an id: {e}")))?;
    Ok(crate::task::id::hex(&b))
}

/// What to invoke.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    pub capability: &'a str,
    pub version: u32,
    /// The payload handlers receive (tool arguments, message).
    pub payload: Value,
}

/// Refuses a protocol payload that carries nexilume's direct task control
/// (`payload.nexus_direct_task_control`, see `endpoints::tasks`). Through
/// `/agent/v1/invoke` it is how nexilume's SDK reads or cancels a task;
/// as an MCP tool argument or in an A2A message it would be data that
/// acts on a task instead, here or in the handler's SDK, which no tool
/// call means: protocol calls carry data only.
pub fn data_only(payload: &Value) -> Result<(), ApiError> {
    if payload.get(DIRECT_TASK_CONTROL).is_none() {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::InvalidField,
        format!(
            "argument '{DIRECT_TASK_CONTROL}' is reserved (nexilume's task control); a tool call or message cannot carry it"
        ),
    )
    .rejected())
}

/// The `hop_limit` a protocol call enters the gateway with. An MCP or
/// A2A caller names none, so the gateway stands in for an SDK caller
/// that leaves it every hop it allows: the hop this gateway itself takes
/// (to the handler or the next router) comes on top of
/// `gateway.hop_limit`, and the call leaves with `gateway.hop_limit`,
/// as an SDK call does. Entering with `gateway.hop_limit` itself would
/// give protocol calls one hop less than SDK calls, and none at all
/// under `hop_limit 1`.
pub fn entry_hop_limit(gateway_hop_limit: u8) -> u8 {
    gateway_hop_limit.max(1).saturating_add(1)
}

/// The envelope of `call` for `who`, with a fresh random `task_id`.
pub fn envelope(cx: &Ctx, who: &Identity, call: &Call<'_>) -> Result<Envelope, ApiError> {
    data_only(&call.payload)?;
    let doc = json!({
        "version": "1.0",
        "intent": call.capability,
        "intent_version": call.version,
        "task_id": random_id(16)?,
        "source_agent": &*who.subject,
        "tenant": &*who.tenant,
        "hop_limit": entry_hop_limit(cx.state.cfg.hop_limit),
        "constraints": {},
        "payload": call.payload,
    });
    let mut env = Envelope::decode(Bytes::from(doc.to_string()))?;
    env.apply_identity(&who.tenant, &who.subject);
    Ok(env)
}

fn admitted(cx: &Ctx, env: Envelope) -> Result<Admitted, ApiError> {
    let guard = inflight_slot(cx)?;
    invoke::tenant_rate(&cx.state, &env.tenant)?;
    Ok(Admitted { env, guard })
}

/// Runs `env` as a synchronous `/agent/v1/invoke`: the handler's answer
/// (status and body as the handler gave them) or the typed refusal.
pub async fn invoke_sync(
    cx: &Ctx,
    parts: &Parts,
    env: Envelope,
) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    let a = admitted(cx, env)?;
    let p = synthetic_parts(parts, "/agent/v1/invoke", &[]);
    invoke::invoke_admitted(cx, &p, a, start).await
}

/// Runs `env` as `/agent/v1/invoke-stream`: an event stream (with the
/// stream task's id and token headers) when the handler streams, else
/// its plain answer.
pub async fn invoke_stream(
    cx: &Ctx,
    parts: &Parts,
    env: Envelope,
) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    let a = admitted(cx, env)?;
    let p = synthetic_parts(
        parts,
        "/agent/v1/invoke-stream",
        &[("accept", HeaderValue::from_static("text/event-stream"))],
    );
    invoke::invoke_stream_admitted(cx, &p, a, start, None).await
}

/// Cancels the stream task `id` (what `DELETE /agent/v1/tasks/{id}`
/// does: the handler's connection closes, across routers too).
pub async fn cancel_task(cx: &Ctx, parts: &Parts, id: &str, token: &HeaderValue) {
    let mut p = synthetic_parts(
        parts,
        "/agent/v1/tasks",
        &[(crate::task::TASK_TOKEN_HEADER, token.clone())],
    );
    p.method = Method::DELETE;
    let _ = crate::endpoints::tasks::task(cx, &p, id, crate::router::TaskOp::Cancel).await;
}
