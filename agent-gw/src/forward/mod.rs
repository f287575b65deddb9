//! Forwarding an invocation to a handler endpoint.
//!
//! Tries the candidates of one ordered FIB snapshot in order, over the
//! keep-alive pool, within the caller's one deadline, moving on only as
//! `retry::may_move` allows, and turns every failure into a typed outcome.
//! A stale pooled connection whose request hyper hands back unsent is a
//! "never delivered" case: the same candidate is retried on a fresh
//! connection before anything else.

pub mod deadline;
pub mod hop;
pub mod lookup;
pub mod opening;
pub mod pool;
pub mod quickack;
pub mod response;
pub mod retry;
pub mod target;
pub mod transit;

use std::cell::Cell;
use std::rc::Rc;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::time::{timeout_at, Instant};

use agentd::route::RouteId;

use crate::api::error::{ApiError, ErrorCode, Outcome};
use crate::forward::deadline::{Deadline, DEADLINE_NAME};
use crate::forward::hop::{CallIdentity, HopError, HopRequest, OutBody, PeerHop};
use crate::forward::opening::{Opener, Step};
use crate::forward::pool::{Pool, Sender};
use crate::forward::retry::{may_move, CallKind, Failure};
use crate::forward::target::{resolve_checked_from, LanCaller, ResolveError, Target};
use agentd::endpoint::{Guard, Refusal};

pub const ROUTE_ID_HEADER: &str = "x-agentd-route-id";
/// nexilume's agent server reads the route id from this header.
pub const NEXUS_ROUTE_ID_HEADER: &str = "x-nexus-route-id";
// Pre-parsed names for the per-request path: a `&str` name is parsed and
// hashed anew on every lookup.
const ROUTE_ID_NAME: HeaderName = HeaderName::from_static(ROUTE_ID_HEADER);
const NEXUS_ROUTE_ID_NAME: HeaderName = HeaderName::from_static(NEXUS_ROUTE_ID_HEADER);

/// Marks a request a gateway forwarded: `<router_id>;nonce=<hex>` per
/// gateway on the path (the caller's values are relayed, ours appended),
/// so a gateway recognises a call it forwarded itself when it comes back
/// (an endpoint pointing at a gateway listener) and refuses it.
pub const VIA_HEADER: &str = "x-agentd-via";
pub const VIA_NAME: HeaderName = HeaderName::from_static(VIA_HEADER);

/// Whether the caller's header `name` is relayed to its handler (a match
/// on the name's text: one comparison of lengths and bytes, not nine of
/// header names).
pub fn relayed(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        VIA_HEADER
            | "accept"
            | "prefer"
            | "last-event-id"
            | "idempotency-key"
            | "traceparent"
            | "tracestate"
            | "x-nexus-interactive"
            | "x-agentd-idempotent"
    )
}

/// Where a candidate's call goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dest {
    /// A handler endpoint this gateway calls over HTTP/1.1 (local and
    /// static routes), checked by the SSRF guard at connect time.
    Handler(Target),
    /// A path learned from a peer: the call goes to the next hop's
    /// gateway as an h2 stream on the warm mTLS connection (`peer`),
    /// never on an HTTP/1.1 connection to the peer's address; its
    /// endpoint is no handler URL.
    Peer { next_hop: Box<str> },
}

/// One place a call may go, copied out of the FIB snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub route_id: RouteId,
    pub dest: Dest,
    /// The route's contract says the capability is idempotent.
    pub idempotent: bool,
    /// The route may point at loopback / the router's own addresses
    /// (the FIB entry's `allow_loopback`).
    pub allow_loopback: bool,
    /// A LAN registration's source address (its owner's, for auth `none`
    /// and bootstrap tokens): each new connection re-checks the LAN scope
    /// from there, so a name that resolves into the mesh later is refused.
    pub lan_source: Option<std::net::IpAddr>,
}

/// The request to forward: body bytes plus the caller headers to relay,
/// and for peer paths who the call acts for and where it goes on the
/// next hop.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub body: OutBody,
    pub relay: HeaderMap,
    /// Signed into the forwarding assertion; without it a peer path is
    /// not used (never delivered).
    pub who: Option<Rc<CallIdentity>>,
    /// The next hop's endpoint: `/agent/v1/invoke` or `.../invoke-stream`.
    pub peer_path: &'static str,
    /// Hops left from the next router on (`HopRequest::hop_limit`).
    pub hop_limit: Option<u8>,
}

/// The caller's headers a call relays to its handler.
pub fn relayed_headers(caller: &HeaderMap) -> HeaderMap {
    // One pass over the caller's few headers beats nine lookups.
    let mut relay = HeaderMap::new();
    for (name, v) in caller {
        if relayed(name) {
            relay.append(name.clone(), v.clone());
        }
    }
    relay
}

impl Outgoing {
    /// Picks the relayed headers out of the caller's request.
    pub fn new(body: Bytes, caller: &HeaderMap) -> Outgoing {
        Outgoing::relaying(body, relayed_headers(caller))
    }

    /// `body` with headers already picked (`relayed_headers`).
    pub fn relaying(body: Bytes, relay: HeaderMap) -> Outgoing {
        Outgoing {
            body: OutBody::Whole(body),
            relay,
            who: None,
            peer_path: INVOKE_PATH,
            hop_limit: None,
        }
    }

    /// The identity peer paths sign for, and the hops the call has left.
    pub fn acting_for(mut self, who: Rc<CallIdentity>, hop_limit: u8) -> Outgoing {
        self.who = Some(who);
        self.hop_limit = Some(hop_limit);
        self
    }
}

/// The endpoints a call takes on the next hop.
pub const INVOKE_PATH: &str = "/agent/v1/invoke";
pub const INVOKE_STREAM_PATH: &str = "/agent/v1/invoke-stream";

impl Outgoing {
    /// For the next hop's stream endpoint.
    pub fn stream(mut self) -> Outgoing {
        self.peer_path = INVOKE_STREAM_PATH;
        self
    }
}

/// A handler's answer and the route that gave it.
#[derive(Debug)]
pub struct Forwarded {
    pub route_id: RouteId,
    pub response: Response<Incoming>,
}

#[derive(Debug)]
pub struct Forwarder {
    pool: Rc<Pool>,
    /// The endpoint rules checked before every new connection: this
    /// router's listener ports (loopback leave comes from each route).
    guard: Guard,
    /// This process's `X-Agentd-Via` value and the nonce inside it.
    via: HeaderValue,
    nonce: Box<str>,
    /// The hop to the next router, for `Dest::Peer` candidates.
    peer: Option<Rc<dyn PeerHop>>,
    /// Configured peer router addresses (LAN scope at connect time).
    peer_addrs: Rc<[std::net::IpAddr]>,
}

/// How one attempt on one candidate ended.
enum AttemptError {
    Failed(Failure, String),
    /// The handler answered something unusable.
    BadResponse(String),
    /// The endpoint resolved into a refused class: nothing was sent.
    Refused(Refusal),
    /// The next hop refused the call before dispatch; its typed answer
    /// is relayed if no other candidate takes the call.
    PeerRefused(String, Response<Incoming>),
}

impl Forwarder {
    /// `nonce`: random per process, so two gateways with one router id
    /// (or a restarted one) are still told apart.
    pub fn new(pool: Rc<Pool>, guard: Guard, router_id: &str, nonce: u64) -> Forwarder {
        let nonce = format!("{nonce:016x}");
        let via = HeaderValue::from_str(&format!("{router_id};nonce={nonce}"))
            .unwrap_or_else(|_| HeaderValue::from_static("agent-gw"));
        Forwarder {
            pool,
            guard,
            via,
            nonce: nonce.into(),
            peer: None,
            peer_addrs: Rc::from(Vec::new()),
        }
    }

    /// The peer router addresses a LAN route's endpoint must never
    /// resolve to (`peer` sections).
    pub fn with_peer_addrs(mut self, addrs: &[std::net::IpAddr]) -> Forwarder {
        self.peer_addrs = Rc::from(addrs.to_vec());
        self
    }

    /// Sends `Dest::Peer` candidates over `hop`.
    pub fn with_peer(mut self, hop: Rc<dyn PeerHop>) -> Forwarder {
        self.peer = Some(hop);
        self
    }

    /// Did this gateway forward the request with these headers itself?
    pub fn forwarded_by_us(&self, h: &HeaderMap) -> bool {
        h.get_all(&VIA_NAME)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|hop| hop.trim().split_once(";nonce="))
            .any(|(_, n)| n == &*self.nonce)
    }

    /// The hop to the next router, when the peer data plane is on.
    pub fn peer_hop(&self) -> Option<Rc<dyn PeerHop>> {
        self.peer.clone()
    }

    pub fn pool(&self) -> &Rc<Pool> {
        &self.pool
    }

    /// Forwards `out` to the first candidate that answers. `capability`
    /// only names the call in errors.
    pub async fn forward(
        &self,
        capability: &str,
        candidates: &[Candidate],
        out: &Outgoing,
        kind: CallKind,
        deadline: Deadline,
    ) -> Result<Forwarded, ApiError> {
        self.forward_observed(capability, candidates, out, kind, deadline, &|_| {})
            .await
    }

    /// [`Forwarder::forward`], telling `on_dispatch` the route of each
    /// candidate the moment an attempt on it starts (a task records the
    /// route it was sent to before any answer exists). A later call names
    /// the next candidate, which only happens while nothing was delivered.
    pub async fn forward_observed(
        &self,
        capability: &str,
        candidates: &[Candidate],
        out: &Outgoing,
        kind: CallKind,
        deadline: Deadline,
        on_dispatch: &dyn Fn(&RouteId),
    ) -> Result<Forwarded, ApiError> {
        let mut maybe_delivered = false;
        let mut last: Option<(Failure, String, RouteId)> = None;
        let mut refused: Option<(Refusal, RouteId)> = None;
        let mut peer_refusal: Option<(Response<Incoming>, RouteId)> = None;
        for cand in candidates {
            if deadline.passed(Instant::now()) {
                break;
            }
            let sent = Cell::new(false);
            on_dispatch(&cand.route_id);
            let attempt =
                timeout_at(deadline.instant(), self.attempt(cand, out, deadline, &sent)).await;
            let (failure, why) = match attempt {
                Ok(Ok(response)) if response.status().is_redirection() => {
                    return Err(response::redirect_error(
                        capability,
                        &cand.route_id,
                        response.status(),
                        response.headers(),
                    ));
                }
                Ok(Ok(response)) => {
                    return Ok(Forwarded {
                        route_id: cand.route_id.clone(),
                        response,
                    })
                }
                Ok(Err(AttemptError::BadResponse(why))) => {
                    return Err(ApiError::new(
                        ErrorCode::UpstreamError,
                        format!(
                            "handler of {capability} on route {} answered badly: {why}",
                            cand.route_id
                        ),
                    )
                    .outcome(Outcome::Error)
                    .capability(capability)
                    .route_id(cand.route_id.as_str()));
                }
                Ok(Err(AttemptError::Refused(r))) => {
                    // Never sent anywhere: the next candidate may go.
                    refused = Some((r, cand.route_id.clone()));
                    if kind.resumed_stream {
                        break;
                    }
                    continue;
                }
                Ok(Err(AttemptError::PeerRefused(why, resp))) => {
                    peer_refusal = Some((resp, cand.route_id.clone()));
                    (Failure::NotDelivered, why)
                }
                Ok(Err(AttemptError::Failed(f, why))) => (f, why),
                Err(_elapsed) => {
                    maybe_delivered |= sent.get();
                    let outcome = if maybe_delivered {
                        Outcome::Unknown
                    } else {
                        Outcome::NotDelivered
                    };
                    return Err(ApiError::new(
                        ErrorCode::DeadlineExceeded,
                        format!(
                            "deadline passed while calling {capability} on route {}",
                            cand.route_id
                        ),
                    )
                    .outcome(outcome)
                    .capability(capability)
                    .route_id(cand.route_id.as_str()));
                }
            };
            maybe_delivered |= failure == Failure::MaybeDelivered;
            let movable = may_move(kind, failure, cand.idempotent);
            last = Some((failure, why, cand.route_id.clone()));
            if !movable {
                break;
            }
        }
        if let (false, Some((response, route_id))) = (maybe_delivered, peer_refusal) {
            // Nothing reached a handler and a next hop said why: its typed
            // answer (hop limit, policy, assertion, ...) is the caller's.
            return Ok(Forwarded { route_id, response });
        }
        if let (None, Some((r, route))) = (&last, &refused) {
            return Err(ApiError::new(
                ErrorCode::EndpointRefused,
                format!(
                    "{capability}: not forwarded: the endpoint of route {route} {r} ({})",
                    r.code()
                ),
            )
            .outcome(Outcome::Rejected)
            .capability(capability)
            .route_id(route.as_str())
            .reason(r.code()));
        }
        Err(match last {
            None => ApiError::new(ErrorCode::DeadlineExceeded, format!("deadline passed before {capability} was sent"))
                .outcome(Outcome::Rejected)
                .capability(capability),
            Some((_, why, route)) if maybe_delivered => ApiError::new(
                ErrorCode::UpstreamUnknown,
                format!("{capability}: request sent to route {route} but no answer came back ({why})"),
            )
            .outcome(Outcome::Unknown)
            .capability(capability)
            .route_id(route.as_str()),
            Some((_, why, route)) => ApiError::new(
                ErrorCode::NotDelivered,
                format!("{capability}: no candidate accepted the connection (last: route {route}: {why})"),
            )
            .outcome(Outcome::NotDelivered)
            .capability(capability)
            .route_id(route.as_str()),
        })
    }

    fn request(
        &self,
        cand: &Candidate,
        target: &Target,
        body: &Bytes,
        out: &Outgoing,
        deadline: Deadline,
    ) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body.clone()));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = target.path.clone().into();
        // Sized once: the seven headers below plus the relayed ones.
        *req.headers_mut() = HeaderMap::with_capacity(7 + out.relay.len());
        let h = req.headers_mut();
        for (k, v) in &out.relay {
            h.append(k, v.clone());
        }
        h.append(VIA_NAME, self.via.clone());
        if let Some(host) = target.host_header() {
            h.insert(header::HOST, host);
        }
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
        if let Ok(id) = HeaderValue::from_str(cand.route_id.as_str()) {
            h.insert(ROUTE_ID_NAME, id.clone());
            h.insert(NEXUS_ROUTE_ID_NAME, id);
        }
        h.insert(
            DEADLINE_NAME,
            HeaderValue::from(deadline.remaining_ms(Instant::now())),
        );
        req
    }

    /// The address to connect to for `target`, checked against the
    /// endpoint guard (and the LAN rule for the candidate's source).
    async fn resolve(
        &self,
        cand: &Candidate,
        target: &Target,
    ) -> Result<std::net::SocketAddr, AttemptError> {
        let guard = self.guard.with_loopback(cand.allow_loopback);
        let lan = cand.lan_source.map(|source| LanCaller {
            source,
            peers: &self.peer_addrs,
        });
        match resolve_checked_from(&target.endpoint, &guard, lan).await {
            Ok(a) => Ok(a),
            Err(ResolveError::Refused(r)) => Err(AttemptError::Refused(r)),
            Err(e) => Err(AttemptError::Failed(Failure::NotDelivered, e.to_string())),
        }
    }

    async fn attempt(
        &self,
        cand: &Candidate,
        out: &Outgoing,
        deadline: Deadline,
        sent: &Cell<bool>,
    ) -> Result<Response<Incoming>, AttemptError> {
        let target = match &cand.dest {
            Dest::Handler(t) => t,
            Dest::Peer { next_hop } => {
                return self.attempt_peer(cand, next_hop, out, deadline, sent).await
            }
        };
        let OutBody::Whole(body) = &out.body else {
            // Transit calls take peer paths only (`pipeline::transit`).
            return Err(AttemptError::Failed(
                Failure::NotDelivered,
                format!(
                    "route {}: a body in transit is never sent to a handler here",
                    cand.route_id
                ),
            ));
        };
        let key: Box<str> = target.connect_addr().into();
        let mut req = self.request(cand, target, body, out, deadline);
        // A kept connection if there is one, else a new one, opened as
        // `opening` says; one that came back to the pool while this call
        // waited is taken instead.
        let mut right: Option<pool::Opening> = None;
        let mut opener = Opener::default();
        let mut addr = None;
        let mut sender: Sender = loop {
            if let Some(mut sender) = self.pool.take(target) {
                right = None;
                sent.set(true);
                match sender.try_send_request(req).await {
                    Ok(resp) if !head_within_bound(&resp) => return Err(head_too_large()),
                    Ok(resp) => {
                        self.pool.put_when_ready(key, sender);
                        return Ok(resp);
                    }
                    Err(mut e) => match e.take_message() {
                        // Handed back unsent: the kept connection was stale.
                        Some(r) => {
                            sent.set(false);
                            req = r;
                            continue;
                        }
                        None => return Err(classify(e.into_error())),
                    },
                }
            }
            match opener.next(right.is_some(), self.pool.last_connect(&key)) {
                Step::Wait(limit) => {
                    let wait = tokio::time::timeout(limit, self.pool.opening(&key));
                    right = wait.await.ok().flatten();
                }
                Step::Connect(within) => {
                    let addr = match addr {
                        Some(a) => a,
                        None => *addr.insert(self.resolve(cand, target).await?),
                    };
                    let began = Instant::now();
                    let made = match within {
                        None => self.pool.connect(addr).await,
                        Some(t) => match tokio::time::timeout(t, self.pool.connect(addr)).await {
                            Ok(made) => made,
                            Err(_) => {
                                // Dropped by a full accept queue; the
                                // socket closes here and the right (if
                                // held) goes to the next call.
                                right = None;
                                opener.refused();
                                continue;
                            }
                        },
                    };
                    let sender = made
                        .map_err(|e| AttemptError::Failed(Failure::NotDelivered, e.to_string()))?;
                    self.pool.connected(&key, began.elapsed());
                    break sender;
                }
            }
        };
        // The deadline header must reflect the moment of sending.
        req.headers_mut().insert(
            DEADLINE_NAME,
            HeaderValue::from(deadline.remaining_ms(Instant::now())),
        );
        sent.set(true);
        let answer = sender.try_send_request(req).await;
        // An answer (or its failure) came: the handler accepted this
        // connection, or never will.
        drop(right);
        match answer {
            Ok(resp) if !head_within_bound(&resp) => Err(head_too_large()),
            Ok(resp) => {
                self.pool.put_when_ready(key, sender);
                Ok(resp)
            }
            Err(mut e) => match e.take_message() {
                Some(_) => Err(AttemptError::Failed(
                    Failure::NotDelivered,
                    e.into_error().to_string(),
                )),
                None => Err(classify(e.into_error())),
            },
        }
    }
}

impl Forwarder {
    /// One attempt over a peer path: the next hop's gateway, pinned to
    /// the route's base id.
    async fn attempt_peer(
        &self,
        cand: &Candidate,
        next_hop: &str,
        out: &Outgoing,
        deadline: Deadline,
        sent: &Cell<bool>,
    ) -> Result<Response<Incoming>, AttemptError> {
        let (Some(hop), Some(who)) = (&self.peer, &out.who) else {
            return Err(AttemptError::Failed(
                Failure::NotDelivered,
                format!("route via router {next_hop}: this gateway has no peer data plane"),
            ));
        };
        // Our mark joins the caller's: a call that comes back to this
        // gateway (a handler endpoint leading to one of our listeners) is
        // refused at once instead of circling until its hop limit.
        let mut relay = out.relay.clone();
        relay.append(VIA_NAME, self.via.clone());
        let req = HopRequest {
            next_hop,
            route: cand.route_id.base(),
            method: Method::POST,
            path: out.peer_path,
            body: out.body.clone(),
            hop_limit: out.hop_limit,
            relay: &relay,
            who,
            deadline,
            sent,
        };
        match hop.send(req).await {
            Ok(resp) => Ok(resp),
            Err(HopError::NotDelivered(why, Some(resp))) => {
                Err(AttemptError::PeerRefused(why, resp))
            }
            Err(HopError::NotDelivered(why, None)) => {
                Err(AttemptError::Failed(Failure::NotDelivered, why))
            }
            Err(HopError::MaybeDelivered(why)) => {
                Err(AttemptError::Failed(Failure::MaybeDelivered, why))
            }
        }
    }
}

fn head_too_large() -> AttemptError {
    AttemptError::BadResponse(format!(
        "response head larger than {} bytes or with too many headers",
        response::MAX_RESPONSE_HEAD_BYTES
    ))
}

/// Whether a handler's answer has its head within the bound. hyper
/// enforces only its read buffer (`pool::READ_BUFFER`, larger so bodies
/// move in big reads); the head bound is checked here on what hyper
/// parsed. A connection whose answer is refused is not kept.
fn head_within_bound(resp: &Response<Incoming>) -> bool {
    response::head_len(resp) <= response::MAX_RESPONSE_HEAD_BYTES
}

fn classify(e: hyper::Error) -> AttemptError {
    if e.is_parse_too_large() {
        head_too_large()
    } else if e.is_parse() || e.is_parse_status() {
        AttemptError::BadResponse(e.to_string())
    } else {
        AttemptError::Failed(Failure::MaybeDelivered, e.to_string())
    }
}

/// Our response for a handler's answer: its status, the headers a handler
/// may relay (`response::filter_headers`) and body, plus the route that
/// served it.
pub fn relay_response(fwd: Forwarded) -> Response<crate::body::Body> {
    let (mut parts, incoming) = fwd.response.into_parts();
    let held = hop::Held::take(&mut parts.extensions);
    if fwd.route_id.next_hop().is_some() {
        response::filter_peer_headers(&mut parts.headers);
    } else {
        response::filter_headers(&mut parts.headers);
    }
    if let Ok(v) = HeaderValue::from_str(fwd.route_id.as_str()) {
        parts.headers.insert(ROUTE_ID_NAME, v);
    }
    let body = crate::body::relay(incoming);
    let body = match held {
        Some(h) => crate::body::guarded(body, h),
        None => body,
    };
    Response::from_parts(parts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relayed_caller_headers_are_kept_with_every_value() {
        let mut caller = HeaderMap::new();
        caller.insert(header::HOST, HeaderValue::from_static("gw:7446"));
        caller.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        caller.append("traceparent", HeaderValue::from_static("00-a-b-01"));
        caller.append(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        caller.append(header::ACCEPT, HeaderValue::from_static("application/json"));
        let out = Outgoing::new(Bytes::new(), &caller);
        assert_eq!(out.relay.len(), 3);
        assert!(out.relay.get(header::AUTHORIZATION).is_none());
        assert!(out.relay.get(header::HOST).is_none());
        let accept: Vec<_> = out.relay.get_all(header::ACCEPT).iter().collect();
        assert_eq!(accept, ["text/event-stream", "application/json"]);
        assert_eq!(out.relay["traceparent"], "00-a-b-01");
    }
}
