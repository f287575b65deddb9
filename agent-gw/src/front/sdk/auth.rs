//! `GET /agent/v1/authentication` (auth discovery in the Nexus schema) and
//! `POST /agent/v1/bootstrap` (trusted-LAN tokens bound to the caller's
//! address). Neither needs a token.

use agentd::ipc::message::IpcError;
use agentd::owner::{may_act, Caller, Proof};
use agentd::route::RouteSource;
use agentd::time::Millis;
use http::request::Parts;
use http::{Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::json::parse_object;
use crate::auth::bootstrap::{BootstrapRequest, MAX_BODY};
use crate::auth::UnixSeconds;
use crate::body::Body;
use crate::front::sdk::lease::admit_control;
use crate::front::{json, read_body_within, Ctx};

/// Advertises bootstrap only to a source that may use it, and which
/// transports this router offers agents (`cloud.transports`, as the
/// nexilume SDK reads them): `direct_ipv6` is true only while agentd can
/// bind agent addresses and this gateway serves them, so the SDK asks
/// for an address only where one would answer.
pub async fn authentication(cx: &Ctx) -> Response<Body> {
    let mut doc = cx.state.auth.metadata(cx.peer.ip());
    let direct_ipv6 = direct_ipv6(cx).await;
    doc["cloud"] = serde_json::json!({
        // No cloud connector runs here: the suite works without one.
        "connector_enabled": false,
        "enrolled": false,
        "status_endpoint": "/healthz",
        "transports": {"direct_ipv6": direct_ipv6, "relay": false, "auto": false},
        "manifest_schema_version": 1,
    });
    json(StatusCode::OK, &doc)
}

/// Whether agents get a served address here now: agent-gw serves agent
/// addresses and agentd's address service is ready (asked at most once
/// a second).
async fn direct_ipv6(cx: &Ctx) -> bool {
    use crate::core::agent_door::Door;
    if !matches!(*cx.state.agent_door.borrow(), Door::Open(_)) {
        return false;
    }
    let now = Millis::now();
    if let Some((at, ready)) = cx.state.ipv6_ready.get() {
        if now.saturating_sub(at) < 1000 {
            return ready;
        }
    }
    let ready = cx
        .state
        .control
        .status()
        .await
        .is_ok_and(|s| s.ipv6.is_some_and(|v| v.ready));
    cx.state.ipv6_ready.set(Some((now, ready)));
    ready
}

/// The bootstrap side of route ownership, decided with agentd's own rule
/// ([`may_act`]) on the FIB replica, which carries every local route's
/// owner: no token for an origin whose live routes are bound to another
/// identity, or that an `agent` section pins to other sources or a key.
/// (agentd checks again on every register/renew/unregister, so a replica
/// a moment behind cannot let anyone take a route over.) Mesh-wide, the
/// replica's peer routes say where else the origin lives: a claim of
/// another origin router that the race rule did not mark disputed holds
/// it, and a bootstrap token (an unproven claim) is refused with
/// `origin_owned_elsewhere` naming that router.
fn origin_free(cx: &Ctx, origin: &str, caller: &Caller) -> Result<(), ApiError> {
    let now = Millis::now();
    let own = &*cx.state.cfg.router_id;
    let mut owner = None;
    let mut elsewhere = None;
    for r in cx.state.fib.borrow().replica().table().iter() {
        if &*r.origin != origin {
            continue;
        }
        match r.source {
            RouteSource::Local if r.lease.live_at(now) => owner = owner.or(r.owner),
            RouteSource::Peer | RouteSource::Relay if !r.disputed => {
                elsewhere = elsewhere.or(r.path.first().filter(|o| &***o != own).cloned());
            }
            _ => {}
        }
    }
    if let Some(router) = elsewhere {
        let why = IpcError::OwnedElsewhere {
            origin: origin.into(),
            router,
        };
        return Err(ApiError::new(ErrorCode::Forbidden, why.to_string())
            .reason(agentd::owner::ORIGIN_OWNED_ELSEWHERE));
    }
    may_act(origin, owner, Some(caller), cx.state.cfg.pins.get(origin)).map_err(|reason| {
        let why = IpcError::Forbidden {
            origin: origin.into(),
            reason,
        };
        ApiError::new(ErrorCode::Forbidden, why.to_string()).reason(reason.as_str())
    })
}

pub async fn bootstrap(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let _guard = admit_control(cx)?;
    cx.state.auth.bootstrap_allowed(cx.peer.ip())?;
    let bytes = read_body_within(cx, parts, body, MAX_BODY).await?;
    // The shared strict decoder first (duplicate keys anywhere, depth),
    // then the bootstrap fields.
    parse_object(&bytes).map_err(|e| ApiError::from(crate::api::envelope::DecodeError::Json(e)))?;
    let req = BootstrapRequest::decode(&bytes)?;
    // Only tenants the operator lists (`gateway.bootstrap_tenant`): a LAN
    // host gets no token for a tenant whose agents live elsewhere.
    cx.state.auth.tenant_bootstrappable(&req.tenant)?;
    // agentd decides whether this source may act for the origin at all:
    // an origin with live routes bound to another identity, or pinned by
    // an `agent` section to other sources or a key, gets no token.
    let caller = Caller {
        source: cx.peer.ip().to_canonical(),
        proof: Proof::Bootstrap {
            subject: req.origin.as_str().into(),
        },
    };
    origin_free(cx, &req.origin, &caller)?;
    let issued = cx
        .state
        .auth
        .bootstrap(req, cx.peer.ip(), UnixSeconds::now())?;
    Ok(json(StatusCode::OK, &issued.to_json()))
}
