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
//! A protocol call is an [`Invocation`] run through the one pipeline
//! (`pipeline::invoke`): the same admission, policy, selection,
//! forwarding, retries, deadlines and peer paths as `/agent/v1/invoke`.

use std::net::IpAddr;

use http::request::Parts;
use http::{HeaderValue, Response};
use serde_json::Value;
use tokio::time::Instant;

use crate::api::envelope::{Envelope, NewCall, DIRECT_TASK_CONTROL};
use crate::api::error::{ApiError, ErrorCode};
use crate::api::task_request::TaskRequest;
use crate::body::Body;
use crate::front::{authenticate, inflight_slot, Ctx, Need};
use crate::origin;
use crate::pipeline::{Hints, Invocation, Mode, Principal};
use crate::router::TaskOp;

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

/// A fresh random id (hex) from the gateway's token generator: 128 bits
/// and more, never derived from anything a client sent.
pub fn random_id(bytes: usize) -> Result<String, ApiError> {
    let mut b = vec![0u8; bytes.clamp(16, 64)];
    crate::auth::fill_random(&mut b)
        .map_err(|e| ApiError::new(ErrorCode::Internal, format!("no randomness for an id: {e}")))?;
    Ok(crate::hex::encode(&b))
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
    Envelope::for_call(NewCall {
        intent: call.capability,
        intent_version: call.version,
        task_id: &random_id(16)?,
        tenant: &who.tenant,
        source_agent: &who.subject,
        hop_limit: entry_hop_limit(cx.state.cfg.hop_limit),
        payload: call.payload.clone(),
    })
}

/// The invocation of a protocol call: `env` for the caller of `cx`,
/// with the request's trace context and deadline, arrived at `started`.
/// `slot`: the in-flight slot it holds (`None`: the front end holds one
/// for the whole request).
pub fn invocation(
    cx: &Ctx,
    headers: &http::HeaderMap,
    (envelope, started): (Envelope, Instant),
    mode: Mode,
    slot: Option<crate::limits::InflightGuard>,
) -> Result<Box<Invocation>, ApiError> {
    Ok(Box::new(Invocation {
        principal: Principal::Caller {
            source: cx.peer.ip(),
            pin: cx.ingress.pin().cloned(),
        },
        envelope,
        mode,
        hints: Hints::of_protocol(headers)?,
        started,
        slot,
        conn: cx.conn.clone(),
    }))
}

/// Runs `env` as `/agent/v1/invoke` (sync) or `invoke-stream` does: the
/// handler's answer (status and body as the handler gave them), an event
/// stream with the stream task's id and token headers, or the typed
/// refusal.
pub async fn invoke(
    cx: &Ctx,
    headers: &http::HeaderMap,
    env: Envelope,
    stream: bool,
) -> Result<Response<Body>, ApiError> {
    let slot = inflight_slot(cx)?;
    let mode = if stream {
        Mode::Stream { cursor: None }
    } else {
        Mode::Sync
    };
    let inv = invocation(cx, headers, (env, Instant::now()), mode, Some(slot))?;
    Ok(crate::pipeline::invoke(&cx.state, inv)
        .await?
        .into_response())
}

/// Cancels the stream task `id` of `tenant` (what `DELETE
/// /agent/v1/tasks/{id}` does: the handler's connection closes, across
/// routers too).
pub async fn cancel_task(cx: &Ctx, tenant: &str, id: &str, token: &HeaderValue) {
    let req = TaskRequest::new(id, TaskOp::Cancel, token.clone());
    let _ = crate::pipeline::remote::task_op(&cx.state, &req, Some(tenant)).await;
}
