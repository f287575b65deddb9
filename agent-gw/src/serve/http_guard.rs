//! JSON errors for requests the HTTP layer refuses before any endpoint
//! sees them.
//!
//! hyper's HTTP/1 server answers a request head it cannot parse (431 head
//! too large, 414 target too long, 400 for a bad request line, header
//! syntax, obs-fold, `Content-Length` or `Transfer-Encoding`) with its own
//! bare response and closes. The gateway promises the JSON error shape with
//! `X-Agentd-Outcome` on every error, so each connection's socket is
//! wrapped in [`GuardedIo`], which recognises hyper's own answer and puts
//! the gateway's in its place:
//!
//! ```text
//!            service call           response body dropped     flush done
//!   Idle ───────────────▶ Serving ───────────────────▶ Draining ─────────▶ Idle
//!    │ hyper writes while Idle: no call is pending, so it is hyper's own
//!    ▼ error answer (always the last thing on the connection)
//!  Swallowed ── hyper lets go of the socket ──▶ gateway writes JSON, FIN,
//!                                              drains briefly, closes
//! ```
//!
//! hyper reads the next request head only after the previous response has
//! been flushed (its keep-alive transition runs after a completed flush),
//! so a write seen while `Idle` cannot carry bytes of a served response;
//! pipelined requests behind a good one are covered. (The one exception:
//! a response finished before its request body was read, and the socket
//! not writable at that moment; then hyper's bare answer passes through
//! unchanged, never a corrupted one.)
//!
//! Why not pre-validate heads with `httparse` before hyper: a second
//! parser in front of the first is exactly the parser differential that
//! request smuggling lives on, it must also frame bodies to find the next
//! head on a keep-alive connection, and it costs a scan of every byte.
//! This wrapper reuses hyper's decision and costs one `Cell` check per
//! read/write call; no byte is copied.
//!
//! After the swallowed answer hyper drops the connection, which would close
//! the socket with the rest of an oversized head unread: the kernel then
//! resets the connection and the client may lose the answer. The socket is
//! handed back instead ([`ConnGuard::close`]): the gateway writes its
//! JSON, half-closes, and reads what the client still sends for a bounded
//! time and byte count before closing. The same holds for every
//! connection hyper ends: an endpoint that answers before reading the
//! request body (413 for a body over the limit) leaves the rest of that
//! body unread, and closing on it would reset the answer away just the
//! same, so every socket hyper lets go of is half-closed and drained.
//!
//! A request with both `Transfer-Encoding: chunked` and `Content-Length`
//! needs nothing here: hyper frames it by the chunked coding alone and
//! closes the connection after answering (RFC 9112 §6.3), which
//! `tests/http_errors.rs` checks.

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Response;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::api::error::{ApiError, ErrorCode, Outcome};
use crate::body::Body;
use crate::http_head::HeadFault;

/// Longest the gateway spends writing its refusal and draining the client.
const LINGER: Duration = Duration::from_secs(2);
/// Most bytes read and discarded from a refused client before closing.
const LINGER_BYTES: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No request is being served.
    Idle,
    /// A service call is running or its response is being written.
    Serving,
    /// The response body is finished; its last bytes may still sit in
    /// hyper's buffer until the next completed flush.
    Draining,
    /// hyper's own error answer was swallowed.
    Swallowed,
}

/// A client connection's byte stream: the TCP socket of the SDK
/// listener, or the TLS stream of the public one.
pub trait Stream: AsyncRead + AsyncWrite + Unpin {}

impl<S: AsyncRead + AsyncWrite + Unpin> Stream for S {}

/// The per-connection state shared by the socket wrapper and the service.
pub struct ConnGuard {
    phase: Cell<Phase>,
    /// Status of hyper's swallowed answer.
    status: Cell<u16>,
    /// The stream, handed back when hyper drops it after a swallowed answer.
    orphan: RefCell<Option<Box<dyn Stream>>>,
}

impl std::fmt::Debug for ConnGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnGuard")
            .field("phase", &self.phase.get())
            .field("status", &self.status.get())
            .finish_non_exhaustive()
    }
}

impl ConnGuard {
    pub fn new() -> Rc<ConnGuard> {
        Rc::new(ConnGuard {
            phase: Cell::new(Phase::Idle),
            status: Cell::new(0),
            orphan: RefCell::new(None),
        })
    }

    /// Marks the start of a service call; the returned token goes into
    /// the response with [`Served::finish`].
    pub fn begin(self: &Rc<Self>) -> Served {
        self.phase.set(Phase::Serving);
        Served {
            guard: self.clone(),
        }
    }

    /// After `serve_connection` returned `result`: closes the socket hyper
    /// left behind gracefully (bounded by [`LINGER`]), first writing the
    /// gateway's JSON refusal if hyper refused a request head.
    pub async fn close(&self, result: Result<(), hyper::Error>) {
        let Some(sock) = self.orphan.borrow_mut().take() else {
            return;
        };
        let answer = if self.phase.get() == Phase::Swallowed {
            refusal(self.status.get(), result.as_ref().err())
        } else {
            Vec::new()
        };
        let _ = tokio::time::timeout(LINGER, linger(sock, &answer)).await;
    }
}

/// A service call in progress; dropping it (with the response body) ends
/// the call.
#[derive(Debug)]
pub struct Served {
    guard: Rc<ConnGuard>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.guard.phase.get() == Phase::Serving {
            self.guard.phase.set(Phase::Draining);
        }
    }
}

impl Served {
    /// The service's response, its body carrying this token.
    pub fn finish(self, resp: Response<Body>) -> Response<ServedBody> {
        let (head, inner) = resp.into_parts();
        Response::from_parts(head, ServedBody::new(inner, self))
    }
}

/// A response body that ends its service call when hyper drops it.
pub type ServedBody = crate::body::Guarded<Served>;

/// The client stream as hyper sees it.
#[derive(Debug)]
pub struct GuardedIo<S: Stream + 'static> {
    /// Always `Some` until dropped.
    sock: Option<S>,
    guard: Rc<ConnGuard>,
}

impl<S: Stream + 'static> GuardedIo<S> {
    pub fn new(sock: S, guard: Rc<ConnGuard>) -> GuardedIo<S> {
        GuardedIo {
            sock: Some(sock),
            guard,
        }
    }

    fn sock(&mut self) -> Pin<&mut S> {
        Pin::new(self.sock.as_mut().expect("socket present until drop"))
    }

    /// Swallows `first` (the start of a write) if it is hyper's own error
    /// answer: a write while no call is pending.
    fn swallows(&self, first: &[u8]) -> bool {
        match self.guard.phase.get() {
            Phase::Swallowed => true,
            Phase::Idle => match auto_status(first) {
                Some(status) => {
                    self.guard.status.set(status);
                    self.guard.phase.set(Phase::Swallowed);
                    true
                }
                None => false,
            },
            Phase::Serving | Phase::Draining => false,
        }
    }
}

impl<S: Stream + 'static> Drop for GuardedIo<S> {
    /// Hands the socket back for [`ConnGuard::close`]: hyper may let go of
    /// it with request bytes unread.
    fn drop(&mut self) {
        *self.guard.orphan.borrow_mut() = self.sock.take().map(|s| Box::new(s) as Box<dyn Stream>);
    }
}

/// The status of a response head hyper wrote on its own: `HTTP/1.x NNN`
/// with a 4xx/5xx status.
fn auto_status(head: &[u8]) -> Option<u16> {
    let rest = head.strip_prefix(b"HTTP/1.")?;
    let digits = rest.get(2..5)?;
    if rest.get(1) != Some(&b' ') || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let status = digits
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    (400..600).contains(&status).then_some(status)
}

impl<S: Stream + 'static> AsyncRead for GuardedIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().sock().poll_read(cx, buf)
    }
}

impl<S: Stream + 'static> AsyncWrite for GuardedIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.swallows(buf) {
            return Poll::Ready(Ok(buf.len()));
        }
        this.sock().poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.guard.phase.get() != Phase::Serving {
            // hyper's head is one contiguous buffer: the first non-empty
            // slice starts it.
            let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
            if this.swallows(first) {
                return Poll::Ready(Ok(bufs.iter().map(|b| b.len()).sum()));
            }
        }
        this.sock().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.sock.as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let phase = this.guard.phase.get();
        if phase == Phase::Swallowed {
            return Poll::Ready(Ok(()));
        }
        let r = this.sock().poll_flush(cx);
        // hyper flushes its whole buffer through `poll_write` before it
        // flushes the socket: a finished response is now entirely out.
        if phase == Phase::Draining && matches!(r, Poll::Ready(Ok(()))) {
            this.guard.phase.set(Phase::Idle);
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.guard.phase.get() == Phase::Swallowed {
            // The gateway still has to answer on this socket.
            return Poll::Ready(Ok(()));
        }
        this.sock().poll_shutdown(cx)
    }
}

/// The gateway's answer to a request head hyper refused with `status`
/// (`error`: why, as hyper says).
fn refusal(status: u16, error: Option<&hyper::Error>) -> Vec<u8> {
    let reason = error.map_or_else(|| "unparsable request head".to_string(), |e| e.to_string());
    let e = match status {
        431 => ApiError::new(
            ErrorCode::HeaderTooLarge,
            format!(
                "request head larger than {} bytes or with more than 100 header lines ({reason}); the connection is closed",
                crate::http_head::MAX_HEAD_BYTES
            ),
        ),
        414 => ApiError::new(
            ErrorCode::UriTooLong,
            format!("request target too long ({reason}); the connection is closed"),
        ),
        _ => match error.and_then(HeadFault::of_hyper) {
            Some(fault) => fault.into_error(),
            // A fault hyper has no words for that match one of ours.
            None => ApiError::new(
                ErrorCode::MalformedRequest,
                format!("malformed HTTP/1.1 request head ({reason}); the connection is closed"),
            ),
        },
    }
    .outcome(Outcome::Rejected)
    .close();
    let body = e.body_json().to_string();
    let resp = e.into_response();
    let st = resp.status();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        st.as_u16(),
        st.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    for (name, value) in resp.headers() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body.as_bytes());
    out
}

/// Writes `answer`, half-closes, and discards what the client still sends
/// (bounded), so closing does not reset the connection under the answer.
/// A client that closed first ends this at once (end of stream).
async fn linger(mut sock: Box<dyn Stream>, answer: &[u8]) -> io::Result<()> {
    if !answer.is_empty() {
        sock.write_all(answer).await?;
    }
    sock.shutdown().await?;
    // On the heap: every HTTP/1 connection's task holds this future's
    // room from its start, and only refused heads ever linger.
    let mut sink = vec![0u8; 4096];
    let mut left = LINGER_BYTES;
    while left > 0 {
        let n = sock.read(&mut sink).await?;
        if n == 0 {
            break;
        }
        left = left.saturating_sub(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_error_status_lines_are_taken_for_hypers_own_answer() {
        assert_eq!(
            auto_status(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            Some(431)
        );
        assert_eq!(auto_status(b"HTTP/1.1 400 Bad Request\r\n"), Some(400));
        assert_eq!(auto_status(b"HTTP/1.0 414 URI Too Long\r\n"), Some(414));
        assert_eq!(auto_status(b"HTTP/1.1 200 OK\r\n"), None);
        assert_eq!(auto_status(b"HTTP/1.1 100 Continue\r\n"), None);
        assert_eq!(auto_status(b"HTTP/1.1 4x0 \r\n"), None);
        assert_eq!(auto_status(b"HTTP/1.1"), None);
        assert_eq!(auto_status(b"{\"error\""), None);
    }

    #[test]
    fn refusals_carry_the_json_error_shape_and_close() {
        for (status, code) in [
            (431, "header_too_large"),
            (414, "uri_too_long"),
            (400, "malformed_request"),
        ] {
            let raw = refusal(status, None);
            let text = String::from_utf8(raw).unwrap();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{head}");
            let lower = head.to_ascii_lowercase();
            assert!(lower.contains("\r\nconnection: close"), "{head}");
            assert!(lower.contains("\r\nx-agentd-outcome: rejected"), "{head}");
            assert!(
                lower.contains("\r\ncontent-type: application/json"),
                "{head}"
            );
            assert!(lower.contains(&format!("\r\ncontent-length: {}", body.len())));
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            assert_eq!(v["error"]["code"], code);
            assert_eq!(v["error"]["outcome"], "rejected");
            assert!(v["error"]["message"]
                .as_str()
                .unwrap()
                .ends_with("; the connection is closed"));
        }
    }
}
