//! Handler connections that ACK at once when the handler waits for it.
//!
//! Many handlers answer in two writes: the response head, then the body.
//! Python's `http.server` (which the nexilume SDK's handler server is
//! built on) does exactly that, without `TCP_NODELAY`. Nagle's algorithm
//! then holds the body back until the head is acknowledged, and Linux
//! delays that ACK (up to ~40 ms) on a connection it judges interactive,
//! as a kept request/response connection is. Every call through such a
//! handler paid ~40 ms.
//!
//! Setting `TCP_QUICKACK` after a read that got bytes sends an ACK that
//! the kernel delayed right away, and leaves delayed-ACK ("pingpong")
//! mode for what arrives next. The flag is not sticky (the kernel returns
//! to delayed ACKs on its own), so it is set again after every such read.
//!
//! But an ACK sent at once costs a `setsockopt` and a segment of its own
//! that both kernels handle; a delayed one rides on our next request for
//! free. When the first read after a request holds the whole answer, no
//! more is coming, so nothing waits for that ACK: [`Acks`] then leaves it
//! to the kernel. Sending the ACK after every read cost the gateway ~7 %
//! of its CPU per call at concurrency 16 (`scripts/bench_local.py`,
//! 128 B and 8 KiB bodies: 20.9 → 19.4 and 25.5 → 23.9 µs).

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A handler connection whose reads send a delayed ACK at once when the
/// handler may be waiting for it.
#[derive(Debug)]
pub struct QuickAck {
    stream: TcpStream,
    acks: Acks,
}

impl QuickAck {
    pub fn new(stream: TcpStream) -> QuickAck {
        QuickAck {
            stream,
            acks: Acks::default(),
        }
    }
}

/// Asks the kernel to acknowledge what it received without delay.
/// Failure only costs the delay, so it is ignored.
pub fn ack_now(stream: &TcpStream) {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket descriptor owned by `stream`, and a pointer
    // to a c_int that lives across the call with its size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// When a handler connection's reads need an ACK at once (sans-IO: the
/// bytes read and written are its only inputs).
///
/// An HTTP/1.1 client sends its next request only once the answer to the
/// last has ended (hyper does not pipeline), so after a write the next
/// read starts an answer. If that one read holds a whole answer — a final
/// status with a `Content-Length` body, all of it — the handler has
/// nothing left to send and waits for no ACK. Anything else (a head
/// alone, part of a body, a chunked or unframed body, an interim `1xx`,
/// a head that does not parse) is acknowledged at once, as is every
/// later read until the next write.
#[derive(Debug, Default)]
pub struct Acks {
    /// A request was written and nothing of its answer has been read.
    awaiting: bool,
}

impl Acks {
    /// We wrote (part of) a request.
    pub fn wrote(&mut self) {
        self.awaiting = true;
    }

    /// We read `bytes` (not empty); whether to ACK them at once.
    pub fn read(&mut self, bytes: &[u8]) -> bool {
        let first = std::mem::take(&mut self.awaiting);
        !(first && whole_answer(bytes))
    }
}

/// Most header lines looked at; an answer with more is taken as not
/// whole (it is then ACKed at once, as before).
const MAX_HEADERS: usize = 32;

/// `bytes` is exactly one final answer with a `Content-Length` body.
///
/// Not a parser: hyper parses the answer. This only has to be sure that
/// nothing more of it is coming, and says no to anything it does not
/// plainly recognise (bare LF line ends, folded lines, odd statuses):
/// those are ACKed at once, which is never wrong, only a little dearer.
fn whole_answer(bytes: &[u8]) -> bool {
    let mut lines = Lines(bytes);
    let Some(status) = lines.next() else {
        return false;
    };
    // `HTTP/1.x SSS`, then a space and a reason, or nothing.
    let code = match status {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', _, b' ', s @ ..] if s.len() >= 3 => &s[..3],
        _ => return false,
    };
    if !code.iter().all(u8::is_ascii_digit) || !(status.len() == 12 || status[12] == b' ') {
        return false;
    }
    // 1xx is followed by the real answer; 204 and 304 have no body
    // whatever they say (not worth a special case).
    if code[0] < b'2' || code == b"204" || code == b"304" {
        return false;
    }
    let mut length = None;
    for _ in 0..MAX_HEADERS {
        let Some(line) = lines.next() else {
            return false;
        };
        if line.is_empty() {
            return length == Some(lines.0.len() as u64);
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return false;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return false;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let value = value.trim_ascii();
            let digits =
                !value.is_empty() && value.len() <= 15 && value.iter().all(u8::is_ascii_digit);
            if !digits || length.is_some() {
                return false;
            }
            // At most 15 digits: no overflow in a u64 (a usize is 32
            // bits on MIPS and ARM routers).
            length = Some(value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
        }
    }
    false
}

/// The CRLF-ended lines at the front of an answer; stops (for good) at a
/// line without CRLF or with a bare LF in it.
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let nl = memchr::memchr(b'\n', self.0)?;
        let line = self.0[..nl].strip_suffix(b"\r")?;
        self.0 = &self.0[nl + 1..];
        Some(line)
    }
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(())))
            && buf.filled().len() > before
            && this.acks.read(&buf.filled()[before..])
        {
            ack_now(&this.stream);
        }
        polled
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.acks.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            this.acks.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What Python's `http.server` writes first: the head alone.
    const HEAD_ALONE: &[u8] =
        b"HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n";
    const WHOLE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}";

    fn first_read_acks(bytes: &[u8]) -> bool {
        let mut acks = Acks::default();
        acks.wrote();
        acks.read(bytes)
    }

    #[test]
    fn a_whole_answer_in_the_first_read_is_left_to_the_kernel() {
        assert!(!first_read_acks(WHOLE));
        assert!(!first_read_acks(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!first_read_acks(
            b"HTTP/1.1 503 Service Unavailable\r\nCONTENT-LENGTH: 2\r\nConnection: keep-alive\r\n\r\nno"
        ));
        // A status line without a reason, a length with spaces around.
        assert!(!first_read_acks(
            b"HTTP/1.0 200\r\nContent-Length:\t 2 \r\n\r\nok"
        ));
    }

    #[test]
    fn an_answer_that_may_have_more_coming_is_acked_at_once() {
        for bytes in [
            // The head alone (Python's http.server, nexilume's handlers).
            HEAD_ALONE,
            // Part of the body.
            &b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\""[..],
            // Part of the head.
            &b"HTTP/1.1 200 OK\r\nContent-Len"[..],
            // Chunked, and a length next to an encoding.
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                [..],
            // No length: the body ends when the connection does.
            &b"HTTP/1.1 200 OK\r\n\r\nhello"[..],
            // Interim and bodiless statuses.
            &b"HTTP/1.1 100 Continue\r\n\r\n"[..],
            &b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"[..],
            &b"HTTP/1.1 304 Not Modified\r\nContent-Length: 0\r\n\r\n"[..],
            // Lengths that do not frame the bytes read.
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nok"[..],
            // 2^32 + 2: a length a 32-bit count would wrap to the 2 bytes here.
            &b"HTTP/1.1 200 OK\r\nContent-Length: 4294967298\r\n\r\nok"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nok"[..],
            // Line ends and lines it does not plainly recognise.
            &b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"[..],
            &b"HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok"[..],
            &b"HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 2\r\n\r\nok"[..],
            &b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"[..],
            &b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok"[..],
            &b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
            // Not HTTP.
            &b"\x16\x03\x01\x00\x05hello"[..],
        ] {
            assert!(
                first_read_acks(bytes),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        // More header lines than are looked at.
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        assert!(first_read_acks(&many));
    }

    #[test]
    fn only_the_first_read_after_a_write_may_skip_the_ack() {
        let mut acks = Acks::default();
        // Bytes with no request written (a handler talking out of turn).
        assert!(acks.read(WHOLE));
        // The split handler: its head, then its body; both acked.
        acks.wrote();
        assert!(acks.read(HEAD_ALONE));
        assert!(acks.read(b"{\"ok\":true}"));
        // A whole answer after the next request is not; what follows it
        // before another request is.
        acks.wrote();
        assert!(!acks.read(WHOLE));
        assert!(acks.read(WHOLE));
        // A request written in several pieces still starts one answer.
        acks.wrote();
        acks.wrote();
        assert!(!acks.read(WHOLE));
    }

    /// The wrapper passes bytes through both ways and notes the writes.
    #[tokio::test]
    async fn a_wrapped_connection_carries_requests_and_answers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut req = [0u8; 4];
            s.read_exact(&mut req).await.unwrap();
            assert_eq!(&req, b"ping");
            s.write_all(WHOLE).await.unwrap();
        });
        let mut conn = QuickAck::new(TcpStream::connect(addr).await.unwrap());
        assert!(!conn.acks.awaiting);
        conn.write_all(b"ping").await.unwrap();
        assert!(conn.acks.awaiting);
        let mut got = Vec::new();
        conn.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, WHOLE);
        assert!(!conn.acks.awaiting);
        handler.await.unwrap();
    }
}
