//! Admission: the in-flight slot a call holds, its tenant's rate, and
//! the loop check. Cheap refusals come first: a front end takes the slot
//! before it reads a body ([`enter`], [`enter_neighbour`]); the tenant's
//! bucket is checked once the envelope names the tenant ([`rate`]).

use std::net::IpAddr;

use http::HeaderMap;

use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode};
use crate::core::Core;
use crate::limits::{InflightFull, InflightGuard};
use crate::sources::Cap;

use super::invocation::Principal;

/// A slot under the in-flight caps (in total and for the caller's
/// source), or the typed refusal: 503 `overloaded` with reason `inflight`
/// or `source_inflight` and `Retry-After: 1`, logged rate-limited.
pub fn enter(core: &Core, source: IpAddr) -> Result<InflightGuard, ApiError> {
    core.inflight
        .try_acquire(source)
        .map_err(|full| refusal(core, full))
}

/// A slot of neighbour `router_id`'s share of the calls it forwards
/// (`gateway.max_inflight_per_peer`); its refusal is marked rejected so
/// the neighbour may move the call elsewhere.
pub fn enter_neighbour(
    core: &Core,
    router_id: &std::rc::Rc<str>,
) -> Result<InflightGuard, ApiError> {
    core.inflight
        .try_acquire_peer(router_id)
        .map_err(|full| refusal(core, full).rejected())
}

/// The 503 `overloaded` answer (and rate-limited log line) of a refused
/// in-flight slot; its reason names the cap (`peer_inflight`: the
/// neighbour's share of calls it forwards).
fn refusal(core: &Core, full: InflightFull) -> ApiError {
    let (cap, reason) = match full {
        InflightFull::Total { .. } => (Cap::Inflight, "inflight"),
        InflightFull::Source { .. } => (Cap::InflightPerSource, "source_inflight"),
        InflightFull::Peer { .. } => (Cap::InflightPerPeer, "peer_inflight"),
    };
    let line = core.cap_log.borrow_mut().refused(cap, &full, Millis::now());
    if let Some(line) = line {
        agentd::log_warn!("{line}");
    }
    ApiError::new(ErrorCode::Overloaded, format!("{full}; retry shortly"))
        .reason(reason)
        .retry_after_ms(1000)
}

/// The tenant's request bucket: a caller's is the tenant's own; a call
/// a neighbour forwarded takes the tenant's own when a `tenant` section
/// configures it, else one of that neighbour's (`limits`), so its tenant
/// names cannot fill ours.
pub fn rate(core: &Core, principal: &Principal, tenant: &str) -> Result<(), ApiError> {
    let now = Millis::now();
    let mut limiter = core.limiter.borrow_mut();
    let (checked, whose) = match principal {
        Principal::Caller { .. } => (limiter.check(tenant, now), String::new()),
        Principal::Neighbour(n) => (
            limiter.check_from_peer(&n.router_id, tenant, now),
            format!(" of calls from neighbour {}", n.router_id),
        ),
    };
    checked.map_err(|wait_ms| {
        ApiError::new(
            ErrorCode::RateLimited,
            format!("tenant {tenant}{whose} is over its request rate"),
        )
        .retry_after_ms(wait_ms.min(60_000))
        .rejected()
    })
}

/// A call this gateway forwarded has come back to it (an endpoint that
/// leads to one of its own listeners): refused before anything else.
pub fn refuse_own_forward(core: &Core, headers: &HeaderMap) -> Result<(), ApiError> {
    if core.forwarder.forwarded_by_us(headers) {
        return Err(ApiError::new(
            ErrorCode::ForwardingLoop,
            format!(
                "forwarding loop: this gateway ({}) already forwarded this call; a route's endpoint leads back to it",
                core.cfg.router_id
            ),
        )
        .rejected());
    }
    Ok(())
}
