//! The receiving end of one hop: a call a linked peer router sent us.
//!
//! Nothing in the request grants anything by itself. The TLS identity
//! says which router sent it; the forwarding assertion, signed by that
//! router, says for whom (tenant, caller), for which capability and body,
//! and until when; the route header says which route the sender chose.
//! Then this router applies its own rules as for a local caller — its
//! in-flight cap, its tenant rate, the hop limit, its policy and the
//! route's eligibility for that tenant and caller — and serves the route
//! itself (a local handler: tasks and stream histories live here) or
//! sends the call on over its own path to it, re-signed.
//!
//! Every refusal before dispatch is typed and marked `x-agentd-outcome:
//! rejected`, so the sender may move the call elsewhere; it resets only
//! this stream, never the connection.

use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use ed25519_dalek::VerifyingKey;
use http::request::Parts;
use http::{HeaderMap, Request, Response};
use hyper::body::Incoming;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use agentd::route::{RouteId, RouteSource};
use agentd::select::Query;
use agentd::time::Millis;

use crate::api::envelope::Envelope;
use crate::api::error::{ApiError, ErrorCode, Outcome};
use crate::body::{read_limited, Body};
use crate::endpoints::invoke::{self, Admitted};
use crate::endpoints::{remote, tasks, ConnAbort, Ctx};
use crate::forward::{Candidate, Dest, ROUTE_ID_HEADER};
use crate::peer::assertion::{self, Assertion, AssertionError, Claims, Expect};
use crate::peer::outbound::{unix_ms, CallIdentity};
use crate::peer::{PeerStats, ASSERTION_HEADER};
use crate::router::{self, Endpoint, NoEndpoint, TaskOp};
use crate::state::AppState;
use crate::task::TaskId;

/// The linked router a data connection is with.
#[derive(Debug)]
pub struct Peer {
    /// Shared with the in-flight slots its calls hold.
    pub router_id: Rc<str>,
    /// The linked key, decompressed once per connection (decompressing
    /// costs about a quarter of a verification).
    pub key: VerifyingKey,
    pub addr: SocketAddr,
}

/// What a call that came from a peer carries into the endpoints: whom
/// it came from, the route it is pinned to and whom it acts for.
#[derive(Debug)]
pub struct InboundHop {
    pub from: Box<str>,
    pub route: RouteId,
    pub who: Rc<CallIdentity>,
}

impl InboundHop {
    /// `all` (the ordered candidates for the call's tenant and caller)
    /// narrowed to the pinned route: the route itself when it is ours,
    /// else our paths to it, never back through the sender.
    pub fn pinned(
        &self,
        all: Vec<Candidate>,
        capability: &str,
    ) -> Result<Vec<Candidate>, ApiError> {
        let pinned: Vec<Candidate> = all
            .into_iter()
            .filter(|c| c.route_id.base() == self.route.as_str())
            .filter(|c| !matches!(&c.dest, Dest::Peer { next_hop } if **next_hop == *self.from))
            .collect();
        if pinned.is_empty() {
            return Err(ApiError::new(
                ErrorCode::NoRoute,
                format!(
                    "route {} is not eligible here for tenant {} (its lease ended, its path is gone, or policy excludes it)",
                    self.route, self.who.tenant
                ),
            )
            .rejected()
            .capability(capability)
            .route_id(self.route.as_str()));
        }
        Ok(pinned)
    }
}

/// Serves one request from `peer`.
pub async fn serve(state: &Rc<AppState>, peer: &Peer, req: Request<Incoming>) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let result = match router::resolve(&parts.method, parts.uri.path()) {
        Ok(Endpoint::Invoke) => call(state, peer, &parts, body, false).await,
        Ok(Endpoint::InvokeStream) => call(state, peer, &parts, body, true).await,
        Ok(Endpoint::Task { id, op }) => task(state, peer, &parts, id, op).await,
        Ok(_) | Err(NoEndpoint::NotFound) => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no peer endpoint {}", parts.uri.path()),
        )
        .rejected()),
        Err(NoEndpoint::MethodNotAllowed(allow)) => Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{} does not accept {}", parts.uri.path(), parts.method),
        )
        .allow(allow)
        .rejected()),
    };
    result.unwrap_or_else(|mut e| {
        if matches!(e.outcome, Some(Outcome::Rejected | Outcome::NotDelivered)) {
            PeerStats::add(&state.peer.stats.streams_refused, 1);
        }
        // HTTP/2 has no connection-level "close": the stream ends alone.
        e.close = false;
        e.into_response()
    })
}

fn refused(e: AssertionError) -> ApiError {
    let status = match e {
        AssertionError::CacheFull => 503,
        _ => 403,
    };
    ApiError::new(
        ErrorCode::Other {
            code: "assertion_refused",
            status,
        },
        e.to_string(),
    )
    .reason(e.code())
    .rejected()
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Result<&'h str, ApiError> {
    h.get(name).and_then(|v| v.to_str().ok()).ok_or_else(|| {
        ApiError::new(
            ErrorCode::InvalidField,
            format!("a peer request needs the {name} header"),
        )
        .rejected()
    })
}

/// The assertion and pinned route of a request, decoded.
fn hop_headers(parts: &Parts) -> Result<(Assertion, RouteId), ApiError> {
    let value = parts
        .headers
        .get(ASSERTION_HEADER)
        .ok_or_else(|| refused(AssertionError::Missing))?
        .to_str()
        .map_err(|_| refused(AssertionError::Malformed("not text")))?;
    let a = Assertion::decode(value).map_err(refused)?;
    let route = RouteId::new(header(&parts.headers, ROUTE_ID_HEADER)?).map_err(|e| {
        ApiError::new(ErrorCode::InvalidField, format!("{ROUTE_ID_HEADER}: {e}")).rejected()
    })?;
    Ok((a, route))
}

/// Checks `a` against the TLS identity, this router and the request.
fn check<'a>(
    state: &AppState,
    peer: &Peer,
    a: &'a Assertion,
    capability: &str,
    body: &[u8],
) -> Result<&'a Claims, ApiError> {
    let expect = Expect {
        peer: &peer.router_id,
        peer_key: &peer.key,
        us: state.peer.router_id(),
        capability,
        body_sha256: Sha256::digest(body).into(),
        now_ms: unix_ms(),
        ttl_ms: state.cfg.assertion_ttl_ms,
        skew_ms: state.cfg.jwt_clock_skew_s.saturating_mul(1000),
    };
    assertion::verify(
        a,
        &expect,
        &mut state.peer.roots.borrow_mut(),
        &mut state.peer.replay.borrow_mut(),
    )
    .inspect(|_| PeerStats::add(&state.peer.stats.assertions_verified, 1))
    .map_err(refused)
}

/// The request context of a call from `peer`, and its hop.
fn context(
    state: &Rc<AppState>,
    peer: &Peer,
    route: RouteId,
    claims: &Claims,
) -> (Ctx, Rc<InboundHop>) {
    let hop = Rc::new(InboundHop {
        from: (*peer.router_id).into(),
        route,
        who: Rc::new(CallIdentity {
            tenant: claims.tenant.as_str().into(),
            caller: claims.caller.as_str().into(),
            capability: claims.capability.as_str().into(),
            origin: claims.origin.as_str().into(),
        }),
    });
    let cx = Ctx {
        state: state.clone(),
        peer: peer.addr,
        conn: Rc::new(ConnAbort::default()),
        hop: Some(hop.clone()),
        ingress: crate::endpoints::Ingress::Peer,
    };
    (cx, hop)
}

/// `invoke` / `invoke-stream` from a peer.
async fn call(
    state: &Rc<AppState>,
    peer: &Peer,
    parts: &Parts,
    body: Incoming,
    stream: bool,
) -> Result<Response<Body>, ApiError> {
    let start = Instant::now();
    let header_cursor = if stream {
        invoke::last_event_id(&parts.headers).map_err(ApiError::rejected)?
    } else {
        None
    };
    let guard = state
        .inflight
        .try_acquire_peer(&peer.router_id)
        .map_err(|full| crate::endpoints::inflight_refusal(state, full).rejected())?;
    let (a, route) = hop_headers(parts)?;
    if state.forwarder.forwarded_by_us(&parts.headers) {
        return Err(ApiError::new(
            ErrorCode::ForwardingLoop,
            format!(
                "forwarding loop: this gateway ({}) already forwarded this call",
                state.cfg.router_id
            ),
        )
        .rejected());
    }
    let limit = state.cfg.max_request_bytes;
    let read = read_limited(&parts.headers, body, limit);
    let bytes: Bytes = tokio::time::timeout(
        std::time::Duration::from_millis(state.cfg.body_read_timeout_ms),
        read,
    )
    .await
    .map_err(|_| {
        ApiError::new(
            ErrorCode::RequestTimeout,
            "request body not received in time",
        )
        .rejected()
    })?
    .map_err(ApiError::rejected)?;
    let mut env = Envelope::decode(bytes.clone()).map_err(|e| ApiError::from(e).rejected())?;
    let claims = check(state, peer, &a, &env.intent, &bytes)?;
    env.apply_identity(&claims.tenant, &claims.caller);
    invoke::peer_tenant_rate(state, &peer.router_id, &env.tenant)?;
    let (cx, _) = context(state, peer, route, claims);
    let admitted = Admitted { env, guard };
    if stream {
        invoke::invoke_stream_admitted(&cx, parts, admitted, start, header_cursor).await
    } else {
        invoke::invoke_admitted(&cx, parts, admitted, start).await
    }
}

/// A task operation from a peer: served here when the task is ours,
/// else sent on toward the route it is pinned to.
async fn task(
    state: &Rc<AppState>,
    peer: &Peer,
    parts: &Parts,
    id: &str,
    op: TaskOp,
) -> Result<Response<Body>, ApiError> {
    // A task operation may wait (`events?wait_ms`) or be sent on: it
    // holds one of the neighbour's in-flight slots like a call does.
    let _slot = state
        .inflight
        .try_acquire_peer(&peer.router_id)
        .map_err(|full| crate::endpoints::inflight_refusal(state, full).rejected())?;
    let (a, route) = hop_headers(parts)?;
    // Task operations carry no body; the assertion signs the empty one.
    let claims = check(state, peer, &a, &a.claims.capability, b"")?;
    let (cx, hop) = context(state, peer, route.clone(), claims);
    let task_id = TaskId::parse(id);
    let local = task_id.filter(|t| state.tasks.borrow_mut().task(t).is_some());
    if let Some(tid) = local {
        if op == TaskOp::Events {
            // As for a caller here: the router following the task (its
            // A2A front end) learns of the next step when it happens,
            // instead of asking again at once.
            tasks::wait_for_events(&cx, parts, &tid, Some(&claims.tenant)).await?;
        }
        return tasks::task_for(&cx, parts, id, op, Some(&claims.tenant));
    }
    let Some((capability, version)) = route_info(state, &route) else {
        return Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no task {id} here and no route {route} to send it on"),
        )
        .rejected());
    };
    let q = Query {
        capability: &capability,
        version,
        tenant: &claims.tenant,
        source: Some(&claims.caller),
        target_agent: None,
    };
    let all = state
        .fib
        .borrow()
        .candidates(&q, Millis::now())
        .map_err(ApiError::rejected)?;
    let paths: Vec<Candidate> = hop
        .pinned(all, &capability)?
        .into_iter()
        .filter(|c| matches!(c.dest, Dest::Peer { .. }))
        .collect();
    if paths.is_empty() {
        // Route is ours but the task is not (expired, or never here).
        return tasks::task_for(&cx, parts, id, op, Some(&claims.tenant));
    }
    remote::forward_task_op(&cx, parts, op, &route, &paths, &hop.who).await
}

/// The capability and version of route `route` as this router knows it:
/// the route itself, or any path to it.
fn route_info(state: &AppState, route: &RouteId) -> Option<(String, u32)> {
    let fib = state.fib.borrow();
    let table = fib.replica().table();
    if let Some(r) = table.get(route) {
        if matches!(r.source, RouteSource::Local | RouteSource::Static) {
            return Some((r.capability.to_string(), r.version));
        }
    }
    let found = table
        .next_hops()
        .filter_map(|hop| RouteId::via(route, hop).ok())
        .find_map(|id| {
            table
                .get(&id)
                .map(|r| (r.capability.to_string(), r.version))
        });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::target::Target;

    fn cand(id: &str, dest: Dest) -> Candidate {
        Candidate {
            route_id: RouteId::parse_table_id(id).unwrap(),
            dest,
            idempotent: false,
            allow_loopback: false,
            lan_source: None,
        }
    }

    fn peer(hop: &str) -> Dest {
        Dest::Peer {
            next_hop: hop.into(),
        }
    }

    fn hop(from: &str, route: &str) -> InboundHop {
        InboundHop {
            from: from.into(),
            route: RouteId::new(route).unwrap(),
            who: Rc::new(CallIdentity {
                tenant: "lab".into(),
                caller: "agent://lab/c".into(),
                capability: "demo.echo".into(),
                origin: "router-c".into(),
            }),
        }
    }

    #[test]
    fn a_pinned_call_keeps_its_route_and_never_goes_back_to_its_sender() {
        let all = vec![
            cand("other@router-a", peer("router-a")),
            cand("r1@router-c", peer("router-c")),
            cand("r1@router-a", peer("router-a")),
            cand("r1@router-d", peer("router-d")),
        ];
        let got = hop("router-c", "r1").pinned(all, "demo.echo").unwrap();
        let ids: Vec<&str> = got.iter().map(|c| c.route_id.as_str()).collect();
        assert_eq!(ids, ["r1@router-a", "r1@router-d"], "rank order kept");
    }

    #[test]
    fn our_own_route_is_served_here_and_a_missing_one_is_a_typed_refusal() {
        let local = Dest::Handler(Target::parse("http://192.0.2.10:8080/x").unwrap());
        let all = vec![cand("r1", local.clone()), cand("r2", local)];
        let got = hop("router-c", "r1")
            .pinned(all.clone(), "demo.echo")
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].route_id.as_str(), "r1");
        let e = hop("router-c", "r9").pinned(all, "demo.echo").unwrap_err();
        assert_eq!(e.code, ErrorCode::NoRoute);
        assert_eq!(e.outcome, Some(Outcome::Rejected), "the sender may move on");
    }
}
