//! Dispatch: sending a decided call down its candidates — a handler on
//! this router's LAN over the pool, or the next router over its link
//! (`forward`) — and relaying the answer.

use std::rc::Rc;

use bytes::Bytes;
use http::{header, HeaderValue, Response};

use agentd::route::RouteId;

use crate::api::envelope::Envelope;
use crate::api::error::ApiError;
use crate::body::{guarded, with_deadline, Body};
use crate::budget::Holder;
use crate::core::Core;
use crate::forward::hop::CallIdentity;
use crate::forward::{relay_response, Candidate, Dest, Outgoing};
use crate::limits::InflightGuard;

use super::decision::deadline_millis;
use super::decision::Dispatch;
use super::invocation::{Invocation, Principal};

/// How a forwarded call's answer is relayed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// Complete within the deadline.
    Sync,
    /// An event stream for as long as it lasts.
    Stream,
}

/// The request a call sends: `body` (the envelope as handlers get it),
/// the relayed headers, and — when a candidate is a peer path — whom
/// the call acts for.
pub fn outgoing(core: &Core, inv: &Invocation, body: Bytes, candidates: &[Candidate]) -> Outgoing {
    let out = Outgoing::relaying(body, inv.hints.relay.clone());
    if !candidates
        .iter()
        .any(|c| matches!(c.dest, Dest::Peer { .. }))
    {
        return out;
    }
    out.acting_for(
        call_identity(core, &inv.principal, &inv.envelope),
        inv.envelope.hop_limit,
    )
}

/// Whom a call acts for on the next hop: carried over from the link of
/// a call a neighbour sent, else this router's caller.
pub fn call_identity(core: &Core, principal: &Principal, env: &Envelope) -> Rc<CallIdentity> {
    match principal {
        Principal::Neighbour(n) => n.who.clone(),
        Principal::Caller { .. } => Rc::new(CallIdentity {
            tenant: env.tenant.clone(),
            caller: env.source_agent.clone(),
            capability: env.intent.clone(),
            origin: core.cfg.router_id.clone(),
        }),
    }
}

/// Forwards the call down `d`'s candidates and relays the answer, with
/// the route that gave it. `out` is the request ([`outgoing`], adjusted
/// by the caller of this function).
pub async fn send(
    core: &Core,
    inv: &Invocation,
    d: &Dispatch,
    mut out: Outgoing,
    relay: Relay,
) -> Result<(Response<Body>, RouteId), ApiError> {
    // The body is kept to resend it to the next candidate: it counts
    // against the buffer budget while held (never refused: sync calls are
    // bounded by the in-flight cap), so async/stream admission sees it.
    let _held = core.budget.reserve_forced(
        Holder::new(&inv.envelope.tenant, inv.principal.source()),
        out.body.held(),
        Some(deadline_millis(d.deadline)),
    );
    if relay == Relay::Stream {
        out.relay.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        out = out.stream();
    }
    let fwd = core
        .forwarder
        .forward(
            &inv.envelope.intent,
            &d.candidates,
            &out,
            d.kind,
            d.deadline,
        )
        .await?;
    let route = fwd.route_id.clone();
    let resp = relay_response(fwd);
    if relay == Relay::Stream {
        return Ok((resp, route));
    }
    // A synchronous answer must be complete within the deadline too.
    let (head, body) = resp.into_parts();
    let body = with_deadline(body, d.deadline.instant());
    Ok((Response::from_parts(head, body), route))
}

/// [`send`] of the call's own envelope, the answer holding `slot` until
/// its body is finished.
pub async fn forward(
    core: &Core,
    mut inv: Box<Invocation>,
    d: Dispatch,
    relay: Relay,
) -> Result<Response<Body>, ApiError> {
    let body = inv.envelope.take_handler_body();
    let out = outgoing(core, &inv, body, &d.candidates);
    let (resp, _) = send(core, &inv, &d, out, relay).await?;
    Ok(hold(resp, inv.slot))
}

/// `resp` with the in-flight slot held until its body is finished.
pub fn hold(resp: Response<Body>, slot: Option<InflightGuard>) -> Response<Body> {
    match slot {
        None => resp,
        Some(slot) => {
            let (head, body) = resp.into_parts();
            Response::from_parts(head, guarded(body, slot))
        }
    }
}
