//! `POST /agent/v1/register | renew | unregister`: decoded here, decided
//! by agentd (see `control`).
//!
//! Admission like an invocation, in the same order (cheap refusals
//! first): an in-flight slot, then the per-source bucket
//! (`gateway.control_rate_per_source`, so a registration storm from one
//! host cannot starve the others), auth, the bounded body, then the
//! tenant's bucket where the tenant is known. Every refusal answers 429 or
//! 503 with a `Retry-After` the bucket or cap computed.
//!
//! agentd decides ownership and quotas: the request carries the
//! [`Caller`](agentd::owner::Caller) (source address plus what the token
//! proved), and a non-owner gets 403 `forbidden`.
//!
//! A registration or withdrawal answers once this gateway's own FIB shows
//! it (bounded by `FIB_CATCH_UP`): an SDK that invokes right after
//! registering finds its route, and nothing is forwarded to a route after
//! its withdrawal was acknowledged.

use std::time::Duration;

use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;

use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::registration::{Registration, Renewal, Unregistration};
use crate::body::Body;
use crate::core::fib_follow::wait_fib;
use crate::forward::target::{resolve_checked_from, LanCaller, ResolveError};
use crate::front::{authenticate, caller, json, read_body, Ctx, Need, Verified};
use crate::limits::InflightGuard;
use agentd::endpoint::{Endpoint, Host, Refusal};

/// Longest wait for the FIB to reflect an acknowledged change. agentd
/// publishes the change before it answers, so this is normally one event
/// away; the bound only matters if the FIB stream broke meanwhile.
pub const FIB_CATCH_UP: Duration = Duration::from_secs(1);

/// A host-name endpoint is resolved now and refused if any address it
/// resolves to is in a refused class or outside the caller's LAN (agentd
/// checks literals itself and has no resolver; the forwarder resolves and
/// checks the classes again before each new connection).
async fn check_host_name(cx: &Ctx, endpoint: &str) -> Result<(), ApiError> {
    let Ok(ep) = Endpoint::parse(endpoint) else {
        return Ok(()); // decode already refused it
    };
    if !matches!(ep.host, Host::Name(_)) {
        return Ok(());
    }
    let mut peers: Vec<std::net::IpAddr> = cx.state.cfg.peer_addrs.clone();
    peers.extend(cx.state.fib.borrow().links().filter_map(|l| l.ip()));
    let lan = LanCaller {
        source: cx.peer.ip().to_canonical(),
        peers: &peers,
    };
    match resolve_checked_from(&ep, &cx.state.cfg.endpoints, Some(lan)).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let reason = match e {
                ResolveError::Refused(r) => r,
                ResolveError::Lookup(_) => Refusal::Unresolvable,
            };
            Err(ApiError::new(
                ErrorCode::EndpointRefused,
                format!("endpoint {endpoint} refused ({}): {e}", reason.code()),
            )
            .reason(reason.code()))
        }
    }
}

/// Longest `Retry-After` a bucket answers (a rate of 0 never refills).
const MAX_RETRY_MS: u64 = 60_000;

/// An in-flight slot and the source's control bucket: taken before auth
/// and before any body byte is read. Bootstrap uses it too. A refusal here
/// leaves the body unread, so it says `Connection: close` (the client
/// reconnects instead of writing into a connection being closed).
pub fn admit_control(cx: &Ctx) -> Result<InflightGuard, ApiError> {
    let guard = crate::front::inflight_slot(cx).map_err(ApiError::close)?;
    // Counted like every per-source cap: an IPv6 /64 is one source.
    let source = crate::sources::SourceKey::of(cx.peer.ip());
    cx.state
        .control_limiter
        .borrow_mut()
        .check(&source.to_string(), Millis::now())
        .map_err(|wait_ms| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "source {source} is over its registration rate (gateway.control_rate_per_source)"
                ),
            )
            .retry_after_ms(wait_ms.min(MAX_RETRY_MS))
            .close()
        })?;
    Ok(guard)
}

/// The tenant's own bucket (shared with its invocations).
fn tenant_rate(cx: &Ctx, tenant: &str) -> Result<(), ApiError> {
    cx.state
        .limiter
        .borrow_mut()
        .check(tenant, Millis::now())
        .map_err(|wait_ms| {
            ApiError::new(
                ErrorCode::RateLimited,
                format!("tenant {tenant} is over its request rate"),
            )
            .retry_after_ms(wait_ms.min(MAX_RETRY_MS))
        })
}

/// Admission of a renew or unregister: its tenant is known only from a
/// token (the body names just a route id).
async fn admit_lease_call(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<(InflightGuard, Option<Verified>, bytes::Bytes), ApiError> {
    let guard = admit_control(cx)?;
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    if let Some(v) = &who {
        tenant_rate(cx, &v.tenant)?;
    }
    Ok((guard, who, bytes))
}

pub async fn register(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let _guard = admit_control(cx)?;
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let mut reg = Registration::decode(&bytes)?;
    if let Some(v) = &who {
        // The token decides tenant and origin; the body cannot claim
        // someone else's agent.
        reg.tenant = v.tenant.clone();
        if reg.origin != v.subject {
            return Err(ApiError::new(
                ErrorCode::OriginMismatch,
                format!(
                    "origin {} is not the authenticated agent {}",
                    reg.origin, v.subject
                ),
            ));
        }
    }
    check_host_name(cx, &reg.endpoint).await?;
    // The tenant's bucket only for a verified tenant: in auth `none` the
    // body names any tenant, and one host must not drain another's.
    if let Some(v) = &who {
        tenant_rate(cx, &v.tenant)?;
    }
    let reply = cx
        .state
        .control
        .register(reg, caller(cx, who.as_ref()))
        .await?;
    let id = reply.route_id.clone();
    wait_fib(&cx.state, FIB_CATCH_UP, |f| {
        f.replica().table().get(&id).is_some()
    })
    .await;
    let mut doc = reply.to_json();
    if let Some(grant) = &reply.public_ipv6 {
        if let agentd::ipc::message::Ipv6Grant::Bound(addr) = grant {
            // The address is served from the moment the reply says so.
            let at = std::net::IpAddr::V6(*addr);
            wait_fib(&cx.state, FIB_CATCH_UP, |f| f.agent_at(at).is_some()).await;
        }
        super::public_ipv6::answer(&mut doc, grant, &cx.state.agent_door.borrow());
    }
    Ok(json(StatusCode::OK, &doc))
}

pub async fn renew(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let (_guard, who, bytes) = admit_lease_call(cx, parts, body).await?;
    let renewal = Renewal::decode(&bytes)?;
    if let Some(endpoint) = &renewal.endpoint {
        check_host_name(cx, endpoint).await?;
    }
    let reply = cx
        .state
        .control
        .renew(renewal, caller(cx, who.as_ref()))
        .await?;
    Ok(json(StatusCode::OK, &reply.to_json()))
}

pub async fn unregister(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let (_guard, who, bytes) = admit_lease_call(cx, parts, body).await?;
    let req = Unregistration::decode(&bytes)?;
    let reply = cx
        .state
        .control
        .unregister(req, caller(cx, who.as_ref()))
        .await?;
    let id = reply.route_id.clone();
    wait_fib(&cx.state, FIB_CATCH_UP, |f| {
        f.replica().table().get(&id).is_none()
    })
    .await;
    Ok(json(StatusCode::OK, &reply.to_json()))
}
