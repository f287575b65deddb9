//! The gateway's body type: fixed bytes, relayed handler bodies, streams,
//! and the guards and deadlines bodies carry. Reading a request's body
//! under a bound is `api::request_body`.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};

pub type BoxError = Box<dyn StdError + Send + Sync>;

/// Every response body the gateway produces: fixed JSON, relayed handler
/// bodies and SSE streams. Neither `Send` nor `Sync`: the runtime is
/// single-threaded, so bodies may hold `Rc` state (in-flight slots, stream
/// history handles).
pub struct Body(Pin<Box<dyn HttpBody<Data = Bytes, Error = BoxError>>>);

impl Body {
    pub fn new<B>(body: B) -> Body
    where
        B: HttpBody<Data = Bytes> + 'static,
        B::Error: Into<BoxError>,
    {
        Body(Box::pin(body.map_err(Into::into)))
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Body")
    }
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.get_mut().0.as_mut().poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Body::new(Full::new(bytes.into()))
}

pub fn empty() -> Body {
    Body::new(Empty::<Bytes>::new())
}

/// Relays a handler's body as ours.
pub fn relay(incoming: Incoming) -> Body {
    Body::new(incoming)
}

/// A body fed chunk by chunk from a bounded channel (an SSE pump writes
/// events as they come); it ends when the sender is dropped, and a client
/// that goes away drops the receiver, which the pump sees as a closed
/// channel.
pub fn channel(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    Body::new(Channel(rx))
}

struct Channel(tokio::sync::mpsc::Receiver<Bytes>);

impl HttpBody for Channel {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

/// A body that keeps `guard` alive until the body is finished or dropped
/// (e.g. an in-flight slot held for the whole relayed response).
pub fn guarded<G: Unpin + 'static>(inner: Body, guard: G) -> Body {
    Body::new(Guarded::new(inner, guard))
}

/// `inner` with `guard` riding along, unboxed (for a body type hyper
/// names, such as the server's response body).
#[derive(Debug)]
pub struct Guarded<G> {
    inner: Body,
    _guard: G,
}

impl<G> Guarded<G> {
    pub fn new(inner: Body, guard: G) -> Guarded<G> {
        Guarded {
            inner,
            _guard: guard,
        }
    }
}

impl<G: Unpin> HttpBody for Guarded<G> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        // `Body` is Unpin (a pinned box), so projecting is safe.
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Ends `inner` with an error once `at` passes: the caller's deadline also
/// bounds a handler that stalls in the middle of its answer (the client
/// sees the response cut off, and the in-flight slot is released).
pub fn with_deadline(inner: Body, at: tokio::time::Instant) -> Body {
    Body::new(Deadlined {
        inner,
        at,
        sleep: None,
    })
}

struct Deadlined {
    inner: Body,
    at: tokio::time::Instant,
    /// Made only once the inner body has to wait: a body that is ready
    /// whenever it is polled (the usual small answer) never needs a timer.
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl HttpBody for Deadlined {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let at = this.at;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(
                "deadline passed while relaying the handler's answer".into(),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
