//! The peer hop, seen from the forwarder: a call sent to the next
//! router's gateway over its link. The transport (TLS, h2, assertions)
//! is `peer`'s, behind [`PeerHop`]; dispatch only knows this interface.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

use crate::body::BoxError;
use crate::forward::deadline::Deadline;
use crate::forward::transit::Transit;

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
    pub body: OutBody,
    /// Hops the call may still take from the next router on (the
    /// envelope's, after this router's): a transit router passes the body
    /// on unread, so the count travels beside it. `None` for task
    /// operations, which carry no envelope.
    pub hop_limit: Option<u8>,
    /// Caller headers relayed as they are.
    pub relay: &'a HeaderMap,
    pub who: &'a CallIdentity,
    pub deadline: Deadline,
    /// Set once the request is handed to the connection (it may have
    /// been delivered from then on).
    pub sent: &'a std::cell::Cell<bool>,
}

/// The body a call sends on: built here (the envelope as handlers get
/// it, kept to resend), or a neighbour's passed through unread.
#[derive(Clone, Debug)]
pub enum OutBody {
    Whole(Bytes),
    Transit(Transit),
}

impl OutBody {
    /// Bytes this router holds for the call while it is sent.
    pub fn held(&self) -> usize {
        match self {
            OutBody::Whole(b) => b.len(),
            OutBody::Transit(_) => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, OutBody::Whole(b) if b.is_empty())
    }

    /// The request body of one attempt; `None` when a streamed body has
    /// already (partly) left toward another path.
    pub fn attempt(&self) -> Option<HopBody> {
        match self {
            OutBody::Whole(b) => Some(HopBody::Whole(Some(b.clone()))),
            OutBody::Transit(t) => t.available().then(|| HopBody::Transit(t.clone())),
        }
    }
}

/// Signs a passed-through body's digest once all of it has gone: the
/// trailers that carry its assertion (`peer::outbound`).
pub type EndSign = Box<dyn FnOnce([u8; 32]) -> TrailerFuture>;
pub type TrailerFuture = Pin<Box<dyn Future<Output = Result<HeaderMap, String>>>>;

/// The HTTP/2 request body of a peer hop.
pub enum HopBody {
    Whole(Option<Bytes>),
    Transit(Transit),
    /// A body in transit to a signed next hop that nothing signed to
    /// us: hashed as it passes, its assertion sent after it.
    SignedAtEnd {
        body: Transit,
        sign: Option<EndSign>,
        signing: Option<TrailerFuture>,
    },
}

impl std::fmt::Debug for HopBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HopBody::Whole(b) => f
                .debug_tuple("Whole")
                .field(&b.as_ref().map(Bytes::len))
                .finish(),
            HopBody::Transit(t) => f.debug_tuple("Transit").field(t).finish(),
            HopBody::SignedAtEnd { body, .. } => f.debug_tuple("SignedAtEnd").field(body).finish(),
        }
    }
}

impl HopBody {
    /// `body`, its assertion signed by `sign` and sent in the trailers.
    pub fn signed_at_end(body: Transit, sign: EndSign) -> HopBody {
        HopBody::SignedAtEnd {
            body,
            sign: Some(sign),
            signing: None,
        }
    }
}

impl HttpBody for HopBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            HopBody::Whole(b) => Poll::Ready(
                b.take()
                    .filter(|b| !b.is_empty())
                    .map(|b| Ok(Frame::data(b))),
            ),
            HopBody::Transit(t) => t.poll_frame(cx),
            HopBody::SignedAtEnd {
                body,
                sign,
                signing,
            } => loop {
                if let Some(f) = signing {
                    let done = std::task::ready!(f.as_mut().poll(cx));
                    *signing = None;
                    return Poll::Ready(Some(done.map(Frame::trailers).map_err(Into::into)));
                }
                let Some(s) = sign.take() else {
                    return Poll::Ready(None);
                };
                match body.poll_frame(cx) {
                    Poll::Ready(None) => match body.computed() {
                        Some(digest) => *signing = Some(s(digest)),
                        None => {
                            return Poll::Ready(Some(Err(
                                "the body in transit was not hashed".into()
                            )))
                        }
                    },
                    other => {
                        *sign = Some(s);
                        return other;
                    }
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            HopBody::Whole(b) => b.as_ref().is_none_or(Bytes::is_empty),
            HopBody::Transit(_) | HopBody::SignedAtEnd { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            HopBody::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            HopBody::Transit(t) | HopBody::SignedAtEnd { body: t, .. } => t.size_hint(),
        }
    }
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
