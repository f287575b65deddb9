//! The front ends: each turns its own wire format into the pipeline's
//! typed `Invocation` (`pipeline::invoke`), and none imports another.
//!
//! * [`sdk`] — the SDK API (`/agent/v1/...`, `docs/sdk-api.md`);
//! * [`mcp`], [`a2a`] — the standard protocols, sharing [`protocol`]
//!   (identity, the Host/Origin guard, envelopes of protocol calls);
//! * [`neighbour`] — calls neighbour routers send over their links.
//!
//! What every front end's request has — its context, authentication,
//! the bounded body read — is here.

pub mod a2a;
pub mod mcp;
pub mod neighbour;
pub mod protocol;
pub mod sdk;

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;

use agentd::fib::AgentAddr;

use bytes::Bytes;
use http::request::Parts;
use http::{header, HeaderValue, Response, StatusCode};
use hyper::body::Incoming;

use crate::api::error::{ApiError, ErrorCode};
use agentd::owner::{Caller, Proof};

use crate::api::request_body::read_limited;
use crate::auth::{Caller as AuthCaller, Scope, UnixSeconds};
use crate::body::{full, Body};
use crate::core::Core;
use crate::limits::InflightGuard;
pub use crate::pipeline::ConnAbort;

/// Per-request context.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub state: Rc<Core>,
    pub peer: SocketAddr,
    /// Closes this request's client connection (e.g. a stream follower
    /// that stopped reading), whatever hyper is doing on it.
    pub conn: Rc<ConnAbort>,
    /// The listener the request came in on.
    pub ingress: Ingress,
    /// What the connection's client certificate proved (public listeners
    /// with `gateway.client_ca`): its agent, or why it names none.
    pub client: Option<Rc<Result<Verified, Box<str>>>>,
}

/// The listener a request came in on: what it may reach, and the scheme
/// of the URLs an answer names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ingress {
    /// The LAN SDK listener (HTTP/1.1).
    Lan,
    /// The public HTTPS listener: invocations, tasks and the protocol
    /// endpoints; never registration or bootstrap (agents register on
    /// their LAN).
    Public,
    /// A peer router's data connection.
    Peer,
    /// An agent's own address (DESIGN §7 "IPv6 /128"): TLS like the
    /// public listener, and every call goes to this agent or nowhere.
    Agent(Arc<AgentAddr>),
}

impl Ingress {
    /// A TLS listener open to callers off the LAN: each request must
    /// prove who it acts for (a token, or a client certificate).
    pub fn is_public(&self) -> bool {
        matches!(self, Ingress::Public | Ingress::Agent(_))
    }

    /// The agent an agent address pins every call to.
    pub fn pin(&self) -> Option<&Arc<AgentAddr>> {
        match self {
            Ingress::Agent(a) => Some(a),
            _ => None,
        }
    }
}

/// What an endpoint needs the caller to be allowed to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Register,
    Route,
    Invoke,
}

/// The identity a request acts for, when authentication proved one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub tenant: Box<str>,
    /// Agent URI of the caller (`sub`).
    pub subject: Box<str>,
    /// What the token proves, for route ownership.
    pub proof: Proof,
}

/// Who asks for a registration change, as agentd's ownership checks see
/// it: the TCP source address plus what authentication proved (nothing
/// in auth `none`).
pub fn caller(cx: &Ctx, who: Option<&Verified>) -> Caller {
    let source = cx.peer.ip().to_canonical();
    match who {
        Some(v) => Caller {
            source,
            proof: v.proof.clone(),
        },
        None => Caller::address(source),
    }
}

/// Authenticates the request for `need`. `Ok(None)` is lab mode (auth
/// `none`): the body's identity is used as sent.
pub fn authenticate(cx: &Ctx, parts: &Parts, need: Need) -> Result<Option<Verified>, ApiError> {
    let scope = match need {
        Need::Register => Scope::Register,
        Need::Route => Scope::Route,
        Need::Invoke => Scope::Invoke,
    };
    let bearer = parts.headers.contains_key(http::header::AUTHORIZATION);
    if let (Some(cert), false) = (&cx.client, bearer) {
        // A certificate proves an agent for invoking, not for managing
        // routes (registration stays on the LAN with tokens).
        return match (&**cert, need) {
            (Ok(v), Need::Invoke | Need::Route) => Ok(Some(v.clone())),
            (Ok(v), Need::Register) => Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "a client certificate ({}) may invoke, not register",
                    v.subject
                ),
            )),
            (Err(why), _) => Err(ApiError::new(ErrorCode::Unauthenticated, why.to_string())),
        };
    }
    match cx
        .state
        .auth
        .authenticate(&parts.headers, cx.peer.ip(), UnixSeconds::now(), scope)
    {
        // A public listener serves in auth 'none' only for callers with
        // a client certificate (`gateway.client_ca`).
        Ok(AuthCaller::Unauthenticated) if cx.ingress.is_public() => Err(ApiError::new(
            ErrorCode::Unauthenticated,
            "this listener needs a client certificate from gateway.client_ca (auth is 'none' here)",
        )),
        Ok(AuthCaller::Unauthenticated) => Ok(None),
        Ok(AuthCaller::Verified(v)) => Ok(Some(Verified {
            proof: v.proof(),
            tenant: v.tenant.into(),
            subject: v.subject.into(),
        })),
        Err(e) => Err(e.into()),
    }
}

/// A slot under the in-flight caps for this request's source
/// (`pipeline::admission`). Every endpoint that holds work in flight
/// takes its slot here.
pub fn inflight_slot(cx: &Ctx) -> Result<InflightGuard, ApiError> {
    crate::pipeline::admission::enter(&cx.state, cx.peer.ip())
}

/// Reads the whole body within the configured request size limit.
pub async fn read_body(cx: &Ctx, parts: &Parts, body: Incoming) -> Result<Bytes, ApiError> {
    read_body_within(cx, parts, body, cx.state.cfg.max_request_bytes).await
}

/// Reads the whole body of at most `limit` bytes. Every request body of
/// the LAN and public listeners is read here: a body read to its end is
/// noted on the connection (see [`ConnAbort::body_read`]).
pub async fn read_body_within(
    cx: &Ctx,
    parts: &Parts,
    body: Incoming,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let mut read = std::pin::pin!(read_limited(&parts.headers, body, limit));
    // Small bodies usually arrive with the head: finish them without
    // arming (and disarming) a timer on every request.
    let first = std::future::poll_fn(|task| Poll::Ready(read.as_mut().poll(task))).await;
    let done = match first {
        Poll::Ready(done) => done,
        Poll::Pending => {
            // A client trickling its body must not hold an in-flight slot
            // forever.
            let limit_ms = cx.state.cfg.body_read_timeout_ms;
            tokio::time::timeout(std::time::Duration::from_millis(limit_ms), read)
                .await
                .map_err(|_| {
                    ApiError::new(
                        ErrorCode::RequestTimeout,
                        format!("request body not received within {limit_ms} ms"),
                    )
                    .close()
                })?
        }
    };
    if done.is_ok() {
        cx.conn.body_read();
    }
    done
}

/// A JSON answer.
pub fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(full(value.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
