//! HTTP connections of the LAN and public listeners, and the dispatch
//! of each request to its front end.
//!
//! ```text
//!  accept loop ──spawn_local──▶ connection (hyper http1, keep-alive)
//!                                   │ one service call per request
//!                                   ▼
//!                     dispatch: router::resolve → endpoints::*
//! ```
//!
//! Everything runs on one current-thread runtime inside a `LocalSet`; the
//! number of open client connections is bounded in total
//! (`max_connections`) and per source (`max_conns_per_source`, see
//! `sources`), and a slow client cannot hold a connection open without
//! sending headers for long.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};

use crate::api::error::{ApiError, ErrorCode};
use crate::body::Body;
use crate::front::sdk::{auth, health, invoke, lease, tasks};
use crate::front::{ConnAbort, Ctx, Ingress, Verified};
use crate::http_head::HeadFault;
use crate::router::{self, Endpoint, NoEndpoint};
use crate::serve::http_guard::{ConnGuard, GuardedIo, Stream};

use super::gateway::Gateway;

/// A client must finish its request head within this time.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
pub use crate::http_head::MAX_HEAD_BYTES;

/// Most bytes hyper reads from a client at once: room for one whole
/// request of the largest body the gateway takes (`max_request_bytes`)
/// and the largest head, at most [`READ_BUFFER_MAX`].
///
/// It is not the head's bound ([`MAX_HEAD_BYTES`], set apart). With the
/// buffer as small as that bound, a 64 KiB body came in 16 KiB reads and
/// pieces to gather; with a buffer one request fits in, the request is
/// usually one read and the body one piece kept as it came (64 KiB
/// calls at c16: gateway CPU per call −15 % against a 64 KiB buffer
/// and about −27 % against the 16 KiB one; docs/bench.md). The buffer starts at 8 KiB and
/// grows only while reads fill it, so a connection of small calls keeps
/// a small one. hyper checks the head bound on a head still incomplete
/// too, so a head that never ends is refused (431) once that much of it
/// came, whatever the buffer.
pub fn read_buffer(max_request_bytes: usize) -> usize {
    max_request_bytes
        .saturating_add(MAX_HEAD_BYTES)
        .min(READ_BUFFER_MAX)
}

/// The client read buffer's largest size, whatever the body limit: a
/// larger body is gathered from several reads.
pub const READ_BUFFER_MAX: usize = 256 * 1024;

pub use crate::listen::{bind, means_no_ipv6};

/// A client connection as its requests see it.
#[derive(Debug)]
pub struct Link {
    pub peer: SocketAddr,
    pub ingress: Ingress,
    /// What its client certificate proved (public listeners).
    pub client: Option<Rc<Result<Verified, Box<str>>>>,
}

impl Link {
    /// A connection without a client certificate.
    pub fn plain(peer: SocketAddr, ingress: Ingress) -> Link {
        Link {
            peer,
            ingress,
            client: None,
        }
    }
}

/// A new request context for a client connection.
fn context(gw: &Gateway, link: Link) -> (Ctx, Rc<ConnAbort>) {
    let conn = Rc::new(ConnAbort::default());
    let cx = Ctx {
        state: gw.core.clone(),
        peer: link.peer,
        conn: conn.clone(),
        ingress: link.ingress,
        client: link.client,
    };
    (cx, conn)
}

/// Serves one HTTP/1.1 client connection (keep-alive) until it ends or
/// an endpoint aborts it.
pub(crate) async fn http1_connection<S: Stream + 'static>(stream: S, link: Link, gw: Rc<Gateway>) {
    let (cx, conn) = context(&gw, link);
    let read_buf = read_buffer(gw.core.cfg.max_request_bytes);
    // JSON errors also for heads hyper refuses itself (http_guard).
    let guard = ConnGuard::new();
    let g = guard.clone();
    let svc = service_fn(move |req| {
        let cx = cx.clone();
        let gw = gw.clone();
        let served = g.begin();
        async move {
            // hyper takes any number of Host lines; RFC 9112 §3.2 does not.
            let resp = match crate::http_head::check_host(req.version(), req.headers()) {
                Ok(()) => dispatch(&gw, &cx, req).await,
                Err(fault) => HeadFault::Host(fault).into_error().into_response(),
            };
            Ok::<_, Infallible>(served.finish(resp))
        }
    });
    let serve = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(read_buf)
        .max_header_size(MAX_HEAD_BYTES)
        .keep_alive(true)
        .serve_connection(TokioIo::new(GuardedIo::new(stream, guard.clone())), svc);
    // An endpoint may close the connection outright (a stalled stream
    // follower): dropping `serve` closes the socket.
    tokio::select! {
        result = serve => guard.close(result).await,
        () = conn.aborted() => {}
    }
}

/// Serves one HTTP/2 client connection (public listener, ALPN `h2`).
/// hyper's h2 server answers protocol faults itself (RST_STREAM or
/// GOAWAY), so no head guard is needed.
pub(crate) async fn h2_connection<S: Stream + 'static>(stream: S, link: Link, gw: Rc<Gateway>) {
    let (cx, conn) = context(&gw, link);
    let svc = service_fn(move |req| {
        let cx = cx.clone();
        let gw = gw.clone();
        async move { Ok::<_, Infallible>(dispatch(&gw, &cx, req).await) }
    });
    let mut b = hyper::server::conn::http2::Builder::new(crate::peer::LocalExec);
    b.timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_concurrent_streams(MAX_H2_STREAMS);
    let serve = b.serve_connection(TokioIo::new(stream), svc);
    tokio::select! {
        _ = serve => {}
        () = conn.aborted() => {}
    }
}

/// Most concurrent requests on one public HTTP/2 connection (the
/// in-flight caps bound them all together as well).
pub const MAX_H2_STREAMS: u32 = 64;

/// Routes one request to its endpoint and renders errors; counts the
/// answer for `/metrics`.
pub async fn dispatch(gw: &Gateway, cx: &Ctx, req: Request<Incoming>) -> Response<Body> {
    let unread = may_leave_body_unread(&req);
    cx.conn.request_begins();
    let mut resp = route(gw, cx, req).await;
    if unread && !cx.conn.was_body_read() {
        resp.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    gw.requests.note(&cx.ingress, resp.status(), resp.headers());
    resp
}

/// Whether `req` is an HTTP/1 request with a body (declared length above
/// zero, or chunked) that its answer could leave unread.
///
/// hyper keeps such a connection only if the rest of the body is already
/// in its buffer when the answer is written; otherwise it closes the
/// connection after the answer, which did not say so. A client that
/// sends its next request on it in the meantime (HTTP/1.1 keeps
/// connections unless told otherwise) loses that request: "server
/// disconnected without sending a response". So an answer given without
/// the body read to its end (`front::read_body_within`) — a refusal
/// before it (Host/Origin, limits, no such endpoint, too large), or an
/// endpoint that answers from the head — says `Connection: close`, and
/// the client opens a new connection.
fn may_leave_body_unread<B: hyper::body::Body>(req: &Request<B>) -> bool {
    req.version() <= http::Version::HTTP_11 && !req.body().is_end_stream()
}

async fn route(gw: &Gateway, cx: &Ctx, req: Request<Incoming>) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    // The identity headers of a link of our domain mean something only
    // on the peer listener; here they are a caller's words and go.
    crate::peer::identity::strip(&mut parts.headers);
    let ep = match router::resolve(&parts.method, parts.uri.path()) {
        Ok(ep) => ep,
        Err(NoEndpoint::NotFound) => {
            return ApiError::new(
                ErrorCode::NotFound,
                format!("no endpoint {}", parts.uri.path()),
            )
            .into_response()
        }
        Err(NoEndpoint::MethodNotAllowed(allow)) => {
            return ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{} does not accept {}", parts.uri.path(), parts.method),
            )
            .allow(allow)
            .into_response()
        }
    };
    if cx.ingress == Ingress::Public && !ep.public() {
        return ApiError::new(
            ErrorCode::NotFound,
            format!(
                "{} is not served on the public listener: agents register and bootstrap on their router's LAN listener",
                parts.uri.path()
            ),
        )
        .into_response();
    }
    if let (Some(pin), false) = (cx.ingress.pin(), ep.agent()) {
        return ApiError::new(
            ErrorCode::NotFound,
            format!(
                "{} is not served at {}: an agent's address serves its invoke, invoke-stream and task endpoints only ({} of {})",
                parts.uri.path(),
                pin.addr,
                pin.capability,
                pin.origin
            ),
        )
        .into_response();
    }
    let result = match ep {
        Endpoint::Healthz => Ok(health::healthz(cx)),
        Endpoint::Authentication => Ok(auth::authentication(cx).await),
        Endpoint::Bootstrap => auth::bootstrap(cx, &parts, body).await,
        Endpoint::Register => lease::register(cx, &parts, body).await,
        Endpoint::Renew => lease::renew(cx, &parts, body).await,
        Endpoint::Unregister => lease::unregister(cx, &parts, body).await,
        Endpoint::Route => invoke::route(cx, &parts, body)
            .await
            .map_err(ApiError::rejected),
        Endpoint::Invoke => invoke::invoke(cx, parts, body)
            .await
            .map_err(ApiError::rejected),
        Endpoint::InvokeStream => invoke::invoke_stream(cx, parts, body)
            .await
            .map_err(ApiError::rejected),
        Endpoint::Task { id, op } => tasks::task(cx, &parts, id, op).await,
        Endpoint::A2aCard { agent } => crate::front::a2a::rpc::agent_card(cx, &parts, agent.into()),
        // Boxed: A2A's JSON-RPC state is the largest of any endpoint, and
        // inline it would size every request's future.
        Endpoint::A2aRpc { agent } => {
            Box::pin(crate::front::a2a::rpc::rpc(
                cx,
                &gw.a2a,
                &parts,
                body,
                agent.into(),
            ))
            .await
        }
        Endpoint::Mcp => Ok(crate::front::mcp::handle(cx, &gw.mcp, parts, body).await),
    };
    result.unwrap_or_else(ApiError::into_response)
}

#[doc(hidden)]
pub use crate::front::Ctx as RequestContext;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_buffer_holds_one_whole_request_up_to_its_cap() {
        // The default body limit: a 64 KiB body and the largest head.
        assert_eq!(read_buffer(65_536), 65_536 + MAX_HEAD_BYTES);
        assert_eq!(read_buffer(1024), 1024 + MAX_HEAD_BYTES);
        assert_eq!(read_buffer(64 << 20), READ_BUFFER_MAX);
        assert_eq!(read_buffer(usize::MAX), READ_BUFFER_MAX);
    }
}
