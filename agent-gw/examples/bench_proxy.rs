//! The `hyper1` row of `scripts/bench_local.py`: the floor of the local
//! path's design, with none of the gateway in it.
//!
//! DESIGN §10 fixes the parts of a local call's hop: hyper 1.x for
//! HTTP/1.1 on both sides, on a tokio current-thread runtime. This proxy
//! is those parts and nothing else, with the gateway's allocator: it
//! takes a request, sends it as it came (head and body, streamed) over a
//! kept HTTP/1.1 connection to the backend, and streams the answer back.
//! No envelope, no route, no policy, no budget, no task. Its distance to
//! nginx is what the design's HTTP stack costs; the distance from it to
//! `gw` is what the gateway adds.
//!
//! ```text
//! bench_proxy LISTEN BACKEND [envelope]
//!     # both host:port; prints "listening ADDR"
//! ```
//!
//! With `envelope` (the `hyper1e` row) it also does the part of a call's
//! work DESIGN asks of every call and that costs the most: the body is
//! read whole, validated and decoded as an invocation envelope by the
//! gateway's own decoder, and the handler's body is rebuilt from it
//! (`api::envelope`), as the gateway sends it. Still no route, policy,
//! budget, deadline or task.
//!
//! A connection goes back to the pool when the answer's last frame has
//! been read (no task per call), and `TCP_NODELAY` is set on both sides,
//! as the gateway does.

use std::cell::RefCell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use agent_gw::api::envelope::Envelope;
use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

#[cfg(target_pointer_width = "64")]
#[global_allocator]
static ALLOC: agent_gw::core::heap::GatewayHeap = agent_gw::core::heap::GatewayHeap;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Sender = SendRequest<Out>;
/// The request body toward the backend: the caller's as it came, or the
/// handler body rebuilt from its envelope.
type Out = Either<Incoming, Full<Bytes>>;
/// Idle connections to the one backend, most recently used last.
type Pool = Rc<RefCell<Vec<Sender>>>;

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, backend, envelope) = match args.as_slice() {
        [l, b] => (l, b, false),
        [l, b, e] if e == "envelope" => (l, b, true),
        _ => return Err("usage: bench_proxy LISTEN BACKEND [envelope]".into()),
    };
    let (listen, backend): (SocketAddr, SocketAddr) = (listen.parse()?, backend.parse()?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    tokio::task::LocalSet::new().block_on(&rt, serve(listen, backend, envelope))
}

async fn serve(listen: SocketAddr, backend: SocketAddr, envelope: bool) -> Result<(), BoxError> {
    let listener = TcpListener::bind(listen).await?;
    println!("listening {}", listener.local_addr()?);
    let pool: Pool = Rc::default();
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let pool = pool.clone();
        tokio::task::spawn_local(async move {
            let service = hyper::service::service_fn(move |req| {
                let pool = pool.clone();
                async move {
                    let req = if envelope {
                        match handler_request(req).await {
                            Some(r) => r,
                            None => return Ok::<_, Infallible>(status(StatusCode::BAD_REQUEST)),
                        }
                    } else {
                        req.map(Either::Left)
                    };
                    Ok::<_, Infallible>(forward(&pool, backend, req).await)
                }
            });
            // A client closing its connection is the normal end.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The request the gateway would send a handler for `req`: its envelope
/// read whole, validated and decoded, and the handler body rebuilt.
async fn handler_request(req: Request<Incoming>) -> Option<Request<Out>> {
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.ok()?.to_bytes();
    let env = Envelope::decode(bytes).ok()?;
    let out = env.to_bytes();
    let mut r = Request::new(Either::Right(Full::new(out.clone())));
    *r.method_mut() = parts.method;
    *r.uri_mut() = parts.uri;
    let h = r.headers_mut();
    if let Some(host) = parts.headers.get(hyper::header::HOST) {
        h.insert(hyper::header::HOST, host.clone());
    }
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    h.insert(hyper::header::CONTENT_LENGTH, out.len().into());
    Some(r)
}

async fn forward(pool: &Pool, backend: SocketAddr, req: Request<Out>) -> Response<Answer> {
    let mut sender = match take(pool).await {
        Some(s) => s,
        None => match connect(backend).await {
            Ok(s) => s,
            Err(_) => return bad_gateway(),
        },
    };
    match sender.send_request(req).await {
        Ok(resp) => resp.map(|body| Answer {
            body: Some(body),
            home: Some((sender, pool.clone())),
        }),
        Err(_) => bad_gateway(),
    }
}

/// The most recently used idle connection that is still open. One whose
/// last answer was read a moment ago may not have noticed yet: its
/// `ready` resolves as soon as its connection task has run.
async fn take(pool: &Pool) -> Option<Sender> {
    loop {
        let mut s = pool.borrow_mut().pop()?;
        if s.ready().await.is_ok() {
            return Some(s);
        }
    }
}

async fn connect(backend: SocketAddr) -> Result<Sender, BoxError> {
    let stream = TcpStream::connect(backend).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

fn bad_gateway() -> Response<Answer> {
    status(StatusCode::BAD_GATEWAY)
}

fn status(code: StatusCode) -> Response<Answer> {
    let mut resp = Response::new(Answer {
        body: None,
        home: None,
    });
    *resp.status_mut() = code;
    resp
}

/// The backend's answer, streamed to the caller; its connection goes back
/// to the pool once the body has ended (hyper's server may stop polling
/// a body that says it has ended, so that is checked after each frame).
struct Answer {
    body: Option<Incoming>,
    home: Option<(Sender, Pool)>,
}

impl Answer {
    fn settle(&mut self) {
        if self.is_end_stream() {
            if let Some((sender, pool)) = self.home.take() {
                pool.borrow_mut().push(sender);
            }
        }
    }
}

/// A body hyper never polled (it said at once that it had ended) still
/// gives its connection back.
impl Drop for Answer {
    fn drop(&mut self) {
        self.settle();
    }
}

impl Body for Answer {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if polled.is_ready() {
            self.settle();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}
