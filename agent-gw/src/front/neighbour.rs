//! The receiving end of one hop: a call a linked peer router sent us.
//!
//! Nothing in the request grants anything by itself. The TLS identity
//! says which router sent it. Over a link of our domain that router's
//! word is enough: its identity headers (`peer::identity`) say for whom
//! (ingress router, tenant, caller) and which capability. Across a
//! boundary (a pinned neighbour, or `peer.sign_calls`) only a forwarding
//! assertion it signed says so, over the body and until when, checked
//! against its key and its own replay windows; it comes in the headers,
//! or after a body the sender passed through, in the trailers. The route
//! header says which route the sender chose.
//! Then this router applies its own rules as for a local caller — its
//! in-flight cap, its tenant rate, the hop limit, its policy and the
//! route's eligibility for that tenant and caller — and serves the route
//! itself (a local handler: tasks and stream histories live here; the
//! body is read whole) or sends the call on over its own path to it with
//! the body streamed (`pipeline::transit`), re-signed.
//!
//! Every refusal before dispatch is typed and marked `x-agentd-outcome:
//! rejected`, so the sender may move the call elsewhere; it resets only
//! this stream, never the connection.

use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use edkey::Sha256;
use edkey::VerifyingKey;
use http::request::Parts;
use http::{HeaderMap, Request, Response};
use hyper::body::Incoming;
use tokio::time::Instant;

use agentd::route::RouteId;

use crate::api::envelope::Envelope;
use crate::api::error::{ApiError, ErrorCode, Outcome};
use crate::api::request_body::{content_length, read_with_trailers};
use crate::api::task_request::TaskRequest;
use crate::body::Body;
use crate::core::Core;
use crate::forward::hop::OutBody;
use crate::forward::transit::{Check, Transit, TransitError};
use crate::forward::ROUTE_ID_HEADER;
use crate::peer::assertion::{self, Assertion, AssertionError, Claims, Expect};
use crate::peer::outbound::{unix_ms, CallIdentity};
use crate::peer::{identity, PeerStats, ASSERTION_HEADER};
use crate::pipeline::{
    self, admission, transit, ConnAbort, Hints, Invocation, Mode, Neighbour, Principal,
};
use crate::router::{self, Endpoint, NoEndpoint, TaskOp};

/// The linked router a data connection is with.
#[derive(Debug)]
pub struct Peer {
    /// Shared with the in-flight slots its calls hold.
    pub router_id: Rc<str>,
    /// The linked key, decompressed once per connection (decompressing
    /// costs about a quarter of a verification).
    pub key: VerifyingKey,
    pub addr: SocketAddr,
    /// Calls over this link must carry a forwarding assertion (a peer
    /// outside our domain); else the link vouches for their identity
    /// headers.
    pub signed: bool,
}

/// Serves one request from `peer`.
pub async fn serve(state: &Rc<Core>, peer: &Peer, req: Request<Incoming>) -> Response<Body> {
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

fn identity_refused(e: identity::IdentityError) -> ApiError {
    ApiError::new(
        ErrorCode::Other {
            code: "identity_refused",
            status: 403,
        },
        e.to_string(),
    )
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

/// What vouches for whom a call from a neighbour acts for.
enum Vouch {
    /// A forwarding assertion (a signed link).
    Signed(Box<Assertion>),
    /// A forwarding assertion that follows the body in the trailers (a
    /// body the sender passed through from a link of its domain, hashed
    /// as it went).
    Trailer,
    /// The identity headers on a link of our domain.
    Link(CallIdentity),
}

/// The pinned route and what vouches for the call, decoded.
fn hop_headers(peer: &Peer, parts: &Parts) -> Result<(Vouch, RouteId), ApiError> {
    // A neighbour that signs although our link does not ask it to (its
    // section sets `sign_calls`, ours does not) is held to its assertion.
    let trailer = announces_assertion(&parts.headers);
    let vouch = if peer.signed || trailer || parts.headers.contains_key(ASSERTION_HEADER) {
        match parts.headers.get(ASSERTION_HEADER) {
            Some(v) => Vouch::Signed(Box::new(decode_assertion(v)?)),
            None if trailer => Vouch::Trailer,
            None => return Err(refused(AssertionError::Missing)),
        }
    } else {
        Vouch::Link(identity::decode(&parts.headers).map_err(identity_refused)?)
    };
    let route = RouteId::new(header(&parts.headers, ROUTE_ID_HEADER)?).map_err(|e| {
        ApiError::new(ErrorCode::InvalidField, format!("{ROUTE_ID_HEADER}: {e}")).rejected()
    })?;
    Ok((vouch, route))
}

/// Does the request say its assertion follows in the trailers
/// (`Trailer: x-agentd-assertion`)?
fn announces_assertion(h: &HeaderMap) -> bool {
    h.get_all(http::header::TRAILER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|name| name.trim().eq_ignore_ascii_case(ASSERTION_HEADER))
}

fn decode_assertion(v: &http::HeaderValue) -> Result<Assertion, ApiError> {
    let value = v
        .to_str()
        .map_err(|_| refused(AssertionError::Malformed("not text")))?;
    Assertion::decode(value).map_err(refused)
}

/// The assertion a request announced in its trailers, as they came.
fn trailed(trailers: Option<&HeaderMap>) -> Result<Vouch, ApiError> {
    let v = trailers
        .and_then(|t| t.get(ASSERTION_HEADER))
        .ok_or_else(|| refused(AssertionError::Missing))?;
    Ok(Vouch::Signed(Box::new(decode_assertion(v)?)))
}

/// Whom the call acts for: what the assertion proves (checked against
/// the TLS identity, this router, the capability and the body — `None`:
/// a body passed on unread, held to the claimed digest as it streams),
/// or what the link's router states (for the same capability).
fn identify(
    state: &Core,
    peer: &Peer,
    vouch: Vouch,
    capability: Option<&str>,
    body: Option<&[u8]>,
) -> Result<CallIdentity, ApiError> {
    match vouch {
        Vouch::Link(who) => match capability {
            Some(c) if c != &*who.capability => Err(ApiError::new(
                ErrorCode::Other {
                    code: "identity_refused",
                    status: 403,
                },
                format!(
                    "header x-agentd-capability names {}, the call invokes {c}",
                    who.capability
                ),
            )
            .rejected()),
            _ => Ok(who),
        },
        // Only a body read whole brings its trailers (`trailed`).
        Vouch::Trailer => Err(refused(AssertionError::Missing)),
        Vouch::Signed(a) => {
            let capability = capability.unwrap_or(&a.claims.capability);
            let claims = check(state, peer, &a, capability, body)?;
            Ok(CallIdentity {
                tenant: claims.tenant.as_str().into(),
                caller: claims.caller.as_str().into(),
                capability: claims.capability.as_str().into(),
                origin: claims.origin.as_str().into(),
            })
        }
    }
}

/// Checks `a` against the TLS identity, this router and the request.
fn check<'a>(
    state: &Core,
    peer: &Peer,
    a: &'a Assertion,
    capability: &str,
    body: Option<&[u8]>,
) -> Result<&'a Claims, ApiError> {
    let expect = Expect {
        peer: &peer.router_id,
        peer_key: &peer.key,
        us: state.peer.router_id(),
        capability,
        body_sha256: body.map(Sha256::digest),
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

/// The principal of a call from `peer` pinned to `route`, acting for
/// `who`.
fn neighbour(peer: &Peer, route: RouteId, who: CallIdentity) -> Rc<Neighbour> {
    Rc::new(Neighbour {
        router_id: peer.router_id.clone(),
        addr: peer.addr,
        route,
        who: Rc::new(who),
    })
}

/// `invoke` / `invoke-stream` from a peer: passed on unread when its
/// route is another router's (`pipeline::transit`), else read whole and
/// invoked here.
async fn call(
    state: &Rc<Core>,
    peer: &Peer,
    parts: &Parts,
    body: Incoming,
    stream: bool,
) -> Result<Response<Body>, ApiError> {
    let started = Instant::now();
    let mode = Mode::of_headers(&parts.headers, stream).map_err(ApiError::rejected)?;
    let slot = admission::enter_neighbour(state, &peer.router_id)?;
    let (vouch, route) = hop_headers(peer, parts)?;
    admission::refuse_own_forward(state, &parts.headers)?;
    let hops = identity::hop_limit(&parts.headers).map_err(identity_refused)?;
    let limit = state.cfg.max_request_bytes;
    // A body whose assertion follows it is read whole: nothing vouches
    // for the call before its end.
    let passes = hops
        .filter(|_| !matches!(vouch, Vouch::Trailer))
        .and_then(|h| Some((h, transit::passes(state, &route)?)));
    if let Some((hop_limit, signed_out)) = passes {
        // Refused before a byte is passed on, as a whole read would.
        let declared = content_length(&parts.headers).map_err(ApiError::rejected)?;
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(TransitError::TooLarge { limit }.to_api_error());
        }
        // A body declared within one stream window is in flow control's
        // grant anyway: read first, it goes on in one write with its
        // assertion (if any) in the headers. A larger or undeclared one
        // streams.
        let (who, body) = if declared.is_some_and(|n| n <= transit::WHOLE_UP_TO as u64) {
            let (bytes, _) = read_body(state, parts, body, limit).await?;
            let who = identify(state, peer, vouch, None, Some(&bytes))?;
            (who, OutBody::Whole(bytes))
        } else {
            let check = match &vouch {
                Vouch::Signed(a) => Check::Expect(a.claims.body_sha256),
                Vouch::Link(_) if signed_out => Check::Compute,
                Vouch::Link(_) | Vouch::Trailer => Check::Nothing,
            };
            let who = identify(state, peer, vouch, None, None)?;
            let t = Transit::new(Body::new(body), limit, check);
            (who, OutBody::Transit(t))
        };
        let pass = transit::Pass {
            neighbour: neighbour(peer, route, who),
            mode,
            stream,
            hints: Hints::of_headers(&parts.headers).map_err(ApiError::rejected)?,
            started,
            slot,
            hop_limit,
            body,
        };
        return transit::pass(state, pass).await;
    }
    let (bytes, trailers) = read_body(state, parts, body, limit).await?;
    let vouch = match vouch {
        Vouch::Trailer => trailed(trailers.as_ref())?,
        v => v,
    };
    let mut env = Envelope::decode(bytes.clone()).map_err(|e| ApiError::from(e).rejected())?;
    let who = identify(state, peer, vouch, Some(&env.intent), Some(&bytes))?;
    env.apply_identity(&who.tenant, &who.caller);
    if let Some(n) = hops {
        env.limit_hops(n);
    }
    let inv = Box::new(Invocation {
        principal: Principal::Neighbour(neighbour(peer, route, who)),
        envelope: env,
        mode,
        hints: Hints::of_headers(&parts.headers).map_err(ApiError::rejected)?,
        started,
        slot: Some(slot),
        conn: Rc::new(ConnAbort::default()),
    });
    Ok(pipeline::invoke(state, inv).await?.into_response())
}

/// The whole body of a request and its trailers, within
/// `gateway.body_read_timeout_ms`.
async fn read_body(
    state: &Core,
    parts: &Parts,
    body: Incoming,
    limit: usize,
) -> Result<(Bytes, Option<HeaderMap>), ApiError> {
    let read = read_with_trailers(&parts.headers, body, limit);
    tokio::time::timeout(
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
    .map_err(ApiError::rejected)
}

/// A task operation from a peer: served here when the task is ours,
/// else sent on toward the route it is pinned to.
async fn task(
    state: &Rc<Core>,
    peer: &Peer,
    parts: &Parts,
    id: &str,
    op: TaskOp,
) -> Result<Response<Body>, ApiError> {
    // A task operation may wait (`events?wait_ms`) or be sent on: it
    // holds one of the neighbour's in-flight slots like a call does.
    let _slot = admission::enter_neighbour(state, &peer.router_id)?;
    let (vouch, route) = hop_headers(peer, parts)?;
    // Task operations carry no body; an assertion signs the empty one.
    let who = identify(state, peer, vouch, None, Some(b""))?;
    let req = TaskRequest::of_request(id, op, parts.uri.query(), &parts.headers)
        .map_err(ApiError::rejected)?;
    pipeline::remote::neighbour_task_op(state, &neighbour(peer, route, who), &req).await
}
