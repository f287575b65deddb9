//! Write coalescing under the h2 connections: what the h2 codec writes
//! in one event-loop turn leaves in one TLS record and one syscall.
//!
//! hyper's h2 client writes a request's HEADERS when the connection task
//! first runs, but its body only after the stream got send capacity —
//! which the same task grants, so the DATA frame follows in a second
//! poll. Written straight through, that is two TLS records, two `writev`
//! and two wake-ups at the receiver for one small call (and under load,
//! one record per stream instead of one per turn). Here writes only fill
//! a buffer; the first flush of a burst yields once (the task is woken
//! at once and runs again after the tasks already runnable, among them
//! the body pipe), and the next flush writes everything that gathered.
//! Nothing waits on a timer; a full buffer pushes back like a socket.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Beyond this much unflushed data, writes first drain (backpressure;
/// the h2 windows bound what is in flight anyway).
const HIGH_WATER: usize = 64 * 1024;

#[derive(Debug)]
pub struct Coalesce<S> {
    inner: S,
    out: Vec<u8>,
    /// Written to `inner` already.
    sent: usize,
    /// This burst's flush already yielded once.
    yielded: bool,
}

impl<S> Coalesce<S> {
    pub fn new(inner: S) -> Coalesce<S> {
        Coalesce {
            inner,
            out: Vec::new(),
            sent: 0,
            yielded: false,
        }
    }

    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncWrite + Unpin> Coalesce<S> {
    /// Writes the buffer out; `Ready(Ok)` once all of it went.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = match Pin::new(&mut self.inner).poll_write(cx, &self.out[self.sent..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            self.sent += n;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Room for more: drains first when the buffer is full.
    fn room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.out.len() - self.sent >= HIGH_WATER {
            return self.drain(cx);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Coalesce<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.room(cx))?;
        self.out.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::task::ready!(self.room(cx))?;
        let mut n = 0;
        for b in bufs {
            self.out.extend_from_slice(b);
            n += b.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.sent < self.out.len() && !self.yielded {
            // Let the tasks already runnable (a body pipe) add theirs.
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        std::task::ready!(self.drain(cx))?;
        self.yielded = false;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Coalesce<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Counts the writes that reach the inner stream.
    #[derive(Default)]
    struct Counting {
        writes: Vec<Vec<u8>>,
    }

    impl AsyncWrite for Counting {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            // At most 1000 bytes at once: partial writes are resumed.
            let n = buf.len().min(1000);
            self.writes.push(buf[..n].to_vec());
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn writes_of_one_burst_leave_together_and_in_order() {
        let mut c = Coalesce::new(Counting::default());
        c.write_all(b"HEADERS").await.unwrap();
        c.write_all(b"DATA").await.unwrap();
        assert!(
            c.get_ref().writes.is_empty(),
            "nothing written before a flush"
        );
        c.flush().await.unwrap();
        assert_eq!(c.get_ref().writes, vec![b"HEADERSDATA".to_vec()]);
        // A big burst drains in pieces, all of it, in order.
        let big: Vec<u8> = (0..HIGH_WATER * 2 + 7).map(|i| i as u8).collect();
        c.write_all(&big).await.unwrap();
        c.flush().await.unwrap();
        let got: Vec<u8> = c.get_ref().writes[1..].concat();
        assert_eq!(got, big);
        // A flush with nothing buffered does not yield.
        let before = c.get_ref().writes.len();
        c.flush().await.unwrap();
        assert_eq!(c.get_ref().writes.len(), before);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn reads_pass_through() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut c = Coalesce::new(a);
        b.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        c.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        c.write_all(b"pong").await.unwrap();
        c.flush().await.unwrap();
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"pong");
    }
}
