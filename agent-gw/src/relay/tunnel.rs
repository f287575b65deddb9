//! The relay tunnel: the one connection a client router (behind NAT)
//! opens to its relay, with the roles of HTTP/2 reversed on it.
//!
//! The client router dials (NAT lets only outbound connections through)
//! and then *serves* HTTP/2 on the connection; the relay is the HTTP/2
//! client and opens a stream per call toward the client router. Every
//! call rides its own stream, so HTTP/2 gives the tunnel what the
//! competing relay lacks: bodies of any allowed size flow under
//! per-stream and per-connection windows (nothing is buffered whole, a
//! slow reader stalls only its own stream), a refused or oversized call
//! resets only its stream, and hundreds of calls share the connection.
//!
//! Both ends send h2 PINGs ([`Liveness`]): a relay that stops answering
//! ends the client's connection (it then fails over, see `failover`),
//! and a client that stops answering ends the relay's, so its calls fail
//! with a typed outcome at once instead of waiting out their deadlines.
//!
//! The relay bounds each client ([`Tunnel`]): at most
//! `max_streams` calls at once (more are refused before anything is
//! sent, [`TunnelBusy`]), and the connection window it grants bounds
//! the answer bytes in flight.
//!
//! TLS (mutual, the link's keys, ALPN [`ALPN_RELAY`]) is the caller's:
//! these functions run on any byte stream.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::client::conn::http2::SendRequest;
use hyper::service::HttpService;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::peer::{h2_settings, LocalExec};

/// The ALPN a client router asks for on the relay's peer listener: the
/// same port and trust as the data plane, the roles reversed.
pub use router_pki::tls::ALPN_RELAY;

/// How a dead end of the tunnel is noticed: a PING every `interval`
/// while the connection is open (idle too), and the connection ends when
/// one is not answered within `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    pub interval: Duration,
    pub timeout: Duration,
}

impl Liveness {
    /// A dead relay is noticed within 10 s.
    pub const DEFAULT: Liveness = Liveness {
        interval: Duration::from_secs(5),
        timeout: Duration::from_secs(5),
    };
}

/// The client router's end: serves `svc` on the tunnel it dialled until
/// the relay closes it, stops answering PINGs, or the stream fails.
/// Must run inside a `LocalSet`.
pub async fn serve<T, S, B>(io: T, svc: S, live: Liveness) -> Result<(), hyper::Error>
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
    S: HttpService<Incoming, ResBody = B> + 'static,
    S::Future: 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut b = hyper::server::conn::http2::Builder::new(LocalExec);
    b.timer(TokioTimer::new());
    h2_settings::server(&mut b);
    b.keep_alive_interval(Some(live.interval))
        .keep_alive_timeout(live.timeout);
    b.serve_connection(TokioIo::new(io), svc).await
}

/// Per-client bounds at the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    /// Calls in flight toward the client at once.
    pub max_streams: u32,
    /// Answer bytes the client may have in flight toward the relay,
    /// unread (the connection window the relay grants).
    pub max_bytes_in_flight: u32,
}

/// The relay's end of one client's tunnel: the sender of calls toward
/// the client router, with its bounds.
pub struct Tunnel<B> {
    sender: SendRequest<B>,
    limits: ClientLimits,
    in_flight: Arc<AtomicU32>,
}

impl<B> fmt::Debug for Tunnel<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tunnel")
            .field("limits", &self.limits)
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

/// A call refused because the client has `max_streams` calls in flight:
/// nothing was sent, so the call may go elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelBusy {
    pub max_streams: u32,
}

impl fmt::Display for TunnelBusy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the relay client has {} calls in flight, its limit",
            self.max_streams
        )
    }
}

/// Holds one of a client's stream slots for as long as its call (and
/// its answer's body, if the caller keeps the guard with it) lasts.
/// Atomic only so that it may ride in an answer's extensions (which
/// must be `Send`); the gateway runs on one thread.
#[derive(Debug)]
pub struct StreamSlot(Arc<AtomicU32>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The relay's end: the HTTP/2 client handshake on the tunnel a client
/// router dialled. Returns the [`Tunnel`] and the connection's future,
/// which the caller drives (it ends when the client closes the tunnel or
/// stops answering PINGs; every call in flight then fails).
pub async fn open<T, B>(
    io: T,
    limits: ClientLimits,
    live: Liveness,
) -> Result<(Tunnel<B>, impl Future<Output = Result<(), hyper::Error>>), hyper::Error>
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
    B: Body + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut b = hyper::client::conn::http2::Builder::new(LocalExec);
    b.timer(TokioTimer::new());
    h2_settings::client(&mut b);
    b.initial_connection_window_size(limits.max_bytes_in_flight)
        .initial_stream_window_size(h2_settings::STREAM_WINDOW.min(limits.max_bytes_in_flight))
        .keep_alive_interval(live.interval)
        .keep_alive_timeout(live.timeout)
        .keep_alive_while_idle(true);
    let (sender, conn) = b.handshake(TokioIo::new(io)).await?;
    let tunnel = Tunnel {
        sender,
        limits,
        in_flight: Arc::new(AtomicU32::new(0)),
    };
    Ok((tunnel, conn))
}

impl<B> Tunnel<B>
where
    B: Body + Unpin + 'static,
{
    /// The connection's sender, for calls that bring their own bounds.
    pub fn sender(&self) -> SendRequest<B> {
        self.sender.clone()
    }

    /// Calls in flight toward the client now.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// One of the client's stream slots, or [`TunnelBusy`] when it has
    /// `max_streams` calls in flight (for callers that send on
    /// [`Tunnel::sender`] themselves).
    pub fn reserve(&self) -> Result<StreamSlot, TunnelBusy> {
        if self.in_flight() >= self.limits.max_streams {
            return Err(TunnelBusy {
                max_streams: self.limits.max_streams,
            });
        }
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Ok(StreamSlot(self.in_flight.clone()))
    }

    /// Whether the connection is gone (closed, or a PING went
    /// unanswered).
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends one call toward the client on a new stream, or refuses it
    /// with [`TunnelBusy`] (nothing sent) when the client has
    /// `max_streams` calls in flight. The answer comes with the call's
    /// [`StreamSlot`]: keep it while the answer's body streams (under
    /// the tunnel's windows) for the limit to count the whole call.
    pub fn send(
        &self,
        req: Request<B>,
    ) -> Result<
        impl Future<Output = Result<(Response<Incoming>, StreamSlot), hyper::Error>>,
        TunnelBusy,
    > {
        let slot = self.reserve()?;
        // The stream opens now, not when the answer is first awaited.
        let answer = self.sender.clone().send_request(req);
        Ok(async move {
            let resp = answer.await?;
            Ok((resp, slot))
        })
    }
}

impl<B: Body + Unpin + 'static> crate::peer::conns::CallBound for Tunnel<B> {
    fn reserve(&self) -> Result<crate::forward::hop::Held, String> {
        Tunnel::reserve(self)
            .map(|slot| crate::forward::hop::Held(Arc::new(slot)))
            .map_err(|busy| busy.to_string())
    }
}

#[cfg(test)]
mod tests;
