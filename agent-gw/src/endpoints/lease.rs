//! `POST /agent/v1/register | renew | unregister`: decoded here, decided
//! by agentd (see `control`).
//!
//! A registration or withdrawal answers once this gateway's own FIB shows
//! it (bounded by `FIB_CATCH_UP`): an SDK that invokes right after
//! registering finds its route, and nothing is forwarded to a route after
//! its withdrawal was acknowledged.

use std::time::Duration;

use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::registration::{Registration, Renewal, Unregistration};
use crate::body::Body;
use crate::endpoints::{authenticate, json, read_body, Ctx, Need};
use crate::fib_sync::wait_fib;
use crate::forward::target::{resolve_checked, ResolveError};
use agentd::endpoint::{Endpoint, Host, Refusal};

/// Longest wait for the FIB to reflect an acknowledged change. agentd
/// publishes the change before it answers, so this is normally one event
/// away; the bound only matters if the FIB stream broke meanwhile.
pub const FIB_CATCH_UP: Duration = Duration::from_secs(1);

/// A host-name endpoint is resolved now and refused if any address it
/// resolves to is in a refused class (agentd checks literals itself and
/// has no resolver; the forwarder resolves and checks again before each
/// new connection).
async fn check_host_name(cx: &Ctx, endpoint: &str) -> Result<(), ApiError> {
    let Ok(ep) = Endpoint::parse(endpoint) else {
        return Ok(()); // decode already refused it
    };
    if !matches!(ep.host, Host::Name(_)) {
        return Ok(());
    }
    match resolve_checked(&ep, &cx.state.cfg.endpoints).await {
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

pub async fn register(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let mut reg = Registration::decode(&bytes)?;
    if let Some(v) = who {
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
    let reply = cx.state.control.register(reg).await?;
    let id = reply.route_id.clone();
    wait_fib(&cx.state, FIB_CATCH_UP, |f| {
        f.replica().table().get(&id).is_some()
    })
    .await;
    Ok(json(StatusCode::OK, &reply.to_json()))
}

pub async fn renew(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let renewal = Renewal::decode(&bytes)?;
    if let Some(endpoint) = &renewal.endpoint {
        check_host_name(cx, endpoint).await?;
    }
    let reply = cx
        .state
        .control
        .renew(renewal, who.as_ref().map(|v| &*v.subject))
        .await?;
    Ok(json(StatusCode::OK, &reply.to_json()))
}

pub async fn unregister(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let who = authenticate(cx, parts, Need::Register)?;
    let bytes = read_body(cx, parts, body).await?;
    let req = Unregistration::decode(&bytes)?;
    let reply = cx
        .state
        .control
        .unregister(req, who.as_ref().map(|v| &*v.subject))
        .await?;
    let id = reply.route_id.clone();
    wait_fib(&cx.state, FIB_CATCH_UP, |f| {
        f.replica().table().get(&id).is_none()
    })
    .await;
    Ok(json(StatusCode::OK, &reply.to_json()))
}
