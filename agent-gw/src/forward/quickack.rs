//! Handler connections that ACK at once.
//!
//! Many handlers answer in two writes: the response head, then the body.
//! Python's `http.server` (which the nexilume SDK's handler server is
//! built on) does exactly that, without `TCP_NODELAY`. Nagle's algorithm
//! then holds the body back until the head is acknowledged, and Linux
//! delays that ACK (up to ~40 ms) on a connection it judges interactive,
//! as a kept request/response connection is. Every call through such a
//! handler paid ~40 ms.
//!
//! Setting `TCP_QUICKACK` after each read that got bytes sends an ACK
//! that the kernel delayed right away, and leaves delayed-ACK
//! ("pingpong") mode for what arrives next. The flag is not sticky (the
//! kernel returns to delayed ACKs on its own), so it is set again around
//! every read: one `setsockopt` per read, on handler connections only.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A handler connection whose reads re-arm `TCP_QUICKACK`.
#[derive(Debug)]
pub struct QuickAck(pub TcpStream);

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

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            ack_now(&self.0);
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
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
