//! The peer hop, seen from the forwarder: a call sent to the next
//! router's gateway over its link. The transport (TLS, h2, assertions)
//! is `peer`'s, behind [`PeerHop`]; dispatch only knows this interface.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use hyper::body::Incoming;

use crate::forward::deadline::Deadline;

/// Response header of a refusal made before dispatch (`rejected`,
/// `not_delivered`): the sender may move the call to another candidate.
pub const OUTCOME_HEADER: &str = "x-agentd-outcome";

/// Who a forwarded call acts for: from the caller's verified identity at
/// the ingress router, from the verified assertion at a transit router.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallIdentity {
    pub tenant: Box<str>,
    pub caller: Box<str>,
    pub capability: Box<str>,
    /// The router where the call entered the mesh.
    pub origin: Box<str>,
}

/// One request to send over a hop.
#[derive(Debug)]
pub struct HopRequest<'a> {
    pub next_hop: &'a str,
    /// The base route id the call is pinned to.
    pub route: &'a str,
    pub method: Method,
    /// `/agent/v1/...` on the next hop.
    pub path: &'a str,
    pub body: Bytes,
    /// Caller headers relayed as they are.
    pub relay: &'a HeaderMap,
    pub who: &'a CallIdentity,
    pub deadline: Deadline,
    /// Set once the request is handed to the connection (it may have
    /// been delivered from then on).
    pub sent: &'a std::cell::Cell<bool>,
}

/// How a hop failed.
#[derive(Debug)]
pub enum HopError {
    /// Provably not processed by the next hop: no connection, the request
    /// never left, the stream was refused, or the next hop refused it
    /// before dispatch (its typed answer kept for the caller).
    NotDelivered(String, Option<Response<Incoming>>),
    /// The request may have reached a handler.
    MaybeDelivered(String),
}

/// A transport's per-call resource (a relay client's stream slot) that
/// must last as long as the answer's body: it rides in the answer's
/// extensions and whoever takes the body keeps it with the body
/// ([`Held::take`]).
#[derive(Clone)]
pub struct Held(pub std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Held")
    }
}

impl Held {
    /// Takes what rides in an answer's extensions.
    pub fn take(ext: &mut http::Extensions) -> Option<Held> {
        ext.remove::<Held>()
    }
}

/// What a hop's send resolves to.
pub type HopFuture<'a> = Pin<Box<dyn Future<Output = Result<Response<Incoming>, HopError>> + 'a>>;

/// A transport to the next router.
pub trait PeerHop: std::fmt::Debug {
    /// Sends `req` to its next hop and returns the next hop's answer.
    fn send<'a>(&'a self, req: HopRequest<'a>) -> HopFuture<'a>;
}
