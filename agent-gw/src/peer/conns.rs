//! One warm HTTP/2 connection per linked peer router.
//!
//! A link appearing in the FIB (its ARPX session established) starts a
//! driver that dials the peer's data plane at once, so the first call
//! pays no handshake; many calls share the connection as h2 streams. A
//! lost connection is redialled with backoff for as long as the link
//! lasts; the link going away stops the driver and closes the connection
//! (its calls fail at once, their routes are already ineligible).
//!
//! A call never waits on a peer that is known down: [`PeerConns::sender`]
//! answers at once with why, so the call moves to its next candidate. It
//! waits only for a dial already in progress, within the call's deadline.

use std::cell::RefCell;
use std::collections::HashMap;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{timeout, timeout_at, Instant};
use tokio_rustls::TlsConnector;

use crate::forward::hop::{Held, HopBody};
use crate::peer::coalesce::Coalesce;
use crate::peer::link::Link;
use crate::peer::tls::{error_text, server_name, PeerTls, Verified};
use crate::peer::{h2_settings, LocalExec, PeerStats};

/// Longest TCP connect plus TLS handshake plus the peer's first frame.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(5);
/// First redial delay after a failure; doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A connection that lived this long resets the backoff.
const STABLE: Duration = Duration::from_secs(10);
/// Both routers learn of their session from their own agentd, a few
/// milliseconds apart: for this long after a link appears, a dial the
/// peer refuses (it does not know us yet) is retried every
/// [`GRACE_RETRY`] and calls wait for it, rather than failing as "down".
const LINK_GRACE: Duration = Duration::from_secs(2);
const GRACE_RETRY: Duration = Duration::from_millis(20);

pub type PeerSender = SendRequest<HopBody>;

/// The data connections this gateway dials, one per link.
#[derive(Debug, Default)]
pub struct PeerConns {
    slots: RefCell<HashMap<Box<str>, Rc<Slot>>>,
}

#[derive(Debug)]
struct Slot {
    link: Link,
    state: RefCell<ConnState>,
    /// Woken on every state change (waiters for a dial in progress).
    changed: Notify,
    task: RefCell<Option<JoinHandle<()>>>,
    /// Breaks the current connection's socket: hyper runs the h2
    /// connection in a task of its own, so aborting the driver alone
    /// would leave calls on a silently dead link hanging until their
    /// deadlines.
    kill: RefCell<Rc<KillSwitch>>,
    /// A relay client's link: numbers the tunnels it opened to us, so
    /// the end of a replaced one leaves its successor alone.
    tunnels: std::cell::Cell<u64>,
    /// A relay client's link: the per-client bound of the tunnel up.
    bound: RefCell<Option<Rc<dyn CallBound>>>,
}

/// A bound on the calls in flight over one connection (a relay client's
/// `relay.max_streams_per_client`): a call takes a slot before it is
/// sent, or is refused with why (nothing was sent).
pub trait CallBound: std::fmt::Debug {
    fn reserve(&self) -> Result<Held, String>;
}

#[derive(Debug)]
enum ConnState {
    Dialing,
    Ready(PeerSender),
    Down { why: String },
}

/// Why no connection to a peer can carry a call now (never delivered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl PeerConns {
    /// Follows the link set: starts a driver for each new (or changed)
    /// link, stops the drivers of links that went away.
    pub fn sync(&self, links: &[Link], tls: &Rc<RefCell<PeerTls>>, stats: &Rc<PeerStats>) {
        let mut slots = self.slots.borrow_mut();
        slots.retain(|id, slot| {
            let keep = links
                .iter()
                .any(|l| *l == slot.link && **id == *l.router_id);
            if !keep {
                slot.stop();
            }
            keep
        });
        for l in links {
            if slots.contains_key(&l.router_id) {
                continue;
            }
            let slot = Rc::new(Slot {
                link: l.clone(),
                state: RefCell::new(ConnState::Dialing),
                changed: Notify::new(),
                task: RefCell::new(None),
                kill: RefCell::new(Rc::new(KillSwitch::default())),
                tunnels: std::cell::Cell::new(0),
                bound: RefCell::new(None),
            });
            let handle = if l.relay == agentd::fib::LinkRelay::Client {
                // Behind NAT: never dialled, reached through the tunnel
                // it opens to our listener.
                tokio::task::spawn_local(await_tunnel(slot.clone()))
            } else {
                tokio::task::spawn_local(drive(slot.clone(), tls.clone(), stats.clone()))
            };
            *slot.task.borrow_mut() = Some(handle);
            slots.insert(l.router_id.clone(), slot);
        }
    }

    /// A sender on `router_id`'s connection: at once when it is up, after
    /// the dial in progress (until `deadline`), or why not. With it, the
    /// call's slot when the connection bounds its calls (keep it until
    /// the answer's body is done).
    pub async fn sender(
        &self,
        router_id: &str,
        deadline: Instant,
    ) -> Result<(PeerSender, Option<Held>), Unavailable> {
        let slot = self.slots.borrow().get(router_id).cloned().ok_or_else(|| {
            Unavailable(format!(
                "no data connection to router {router_id}: its ARPX session is not established"
            ))
        })?;
        loop {
            let wait = slot.changed.notified();
            match &*slot.state.borrow() {
                ConnState::Ready(s) if !s.is_closed() => {
                    let held = match &*slot.bound.borrow() {
                        Some(b) => Some(b.reserve().map_err(Unavailable)?),
                        None => None,
                    };
                    return Ok((s.clone(), held));
                }
                ConnState::Ready(_) | ConnState::Dialing => {}
                ConnState::Down { why } => {
                    return Err(Unavailable(format!(
                        "data connection to router {router_id} is down: {why}"
                    )))
                }
            }
            if timeout_at(deadline, wait).await.is_err() {
                return Err(Unavailable(format!(
                    "data connection to router {router_id} still connecting at the deadline"
                )));
            }
        }
    }
}

impl PeerConns {
    /// A relay client's tunnel to us is up: calls toward it ride
    /// `sender`. Returns the tunnel's number for [`PeerConns::tunnel_down`],
    /// or `None` when `link` is not (or no longer) the router's link.
    pub fn tunnel_up(
        &self,
        link: &Link,
        sender: PeerSender,
        bound: Rc<dyn CallBound>,
    ) -> Option<u64> {
        let slot = self.slots.borrow().get(&link.router_id).cloned()?;
        if slot.link != *link || link.relay != agentd::fib::LinkRelay::Client {
            return None;
        }
        let n = slot.tunnels.get() + 1;
        slot.tunnels.set(n);
        *slot.bound.borrow_mut() = Some(bound);
        slot.set(ConnState::Ready(sender));
        Some(n)
    }

    /// Tunnel number `n` of `router_id` ended, for `why`.
    pub fn tunnel_down(&self, router_id: &str, n: u64, why: String) {
        let Some(slot) = self.slots.borrow().get(router_id).cloned() else {
            return;
        };
        if slot.tunnels.get() == n {
            slot.set(ConnState::Down { why });
        }
    }
}

/// A relay client's link: calls wait for its tunnel while the link is
/// new (its agentd told it of the session a moment ago, and it dials
/// us now), and are refused at once after that until a tunnel is up.
async fn await_tunnel(slot: Rc<Slot>) {
    tokio::time::sleep(LINK_GRACE).await;
    if matches!(*slot.state.borrow(), ConnState::Dialing) {
        slot.set(ConnState::Down {
            why: "the relay client has no tunnel open to this relay".into(),
        });
    }
}

impl Slot {
    fn set(&self, state: ConnState) {
        *self.state.borrow_mut() = state;
        self.changed.notify_waiters();
    }

    fn stop(&self) {
        if let Some(t) = self.task.borrow_mut().take() {
            t.abort();
        }
        // Every call on the connection ends now (typed by how far it got),
        // not at its deadline.
        self.kill.borrow().kill();
        self.set(ConnState::Down {
            why: "its ARPX session closed".into(),
        });
    }
}

/// Dials, serves and redials one link until aborted.
async fn drive(slot: Rc<Slot>, tls: Rc<RefCell<PeerTls>>, stats: Rc<PeerStats>) {
    let mut backoff = MIN_BACKOFF;
    let id = slot.link.router_id.clone();
    let linked = Instant::now();
    loop {
        slot.set(ConnState::Dialing);
        let started = Instant::now();
        let kill = Rc::new(KillSwitch::default());
        *slot.kill.borrow_mut() = kill.clone();
        match dial(&slot.link, &tls, kill).await {
            Ok((sender, conn)) => {
                stats.handshakes_out.set(stats.handshakes_out.get() + 1);
                stats.conns.set(stats.conns.get() + 1);
                agentd::log_info!("peer data connection to {id} at {} up", slot.link.data);
                slot.set(ConnState::Ready(sender));
                let ended = conn.await;
                stats.conns.set(stats.conns.get().saturating_sub(1));
                let why = match ended {
                    Ok(()) => "closed by the peer".to_string(),
                    Err(e) => e.to_string(),
                };
                agentd::log_info!("peer data connection to {id} ended: {why}");
                if started.elapsed() >= STABLE {
                    backoff = MIN_BACKOFF;
                }
                slot.set(ConnState::Down { why });
            }
            Err(why) if linked.elapsed() < LINK_GRACE => {
                // Still "connecting" for waiting calls.
                agentd::log_debug!("peer data connection to {id}: {why}; retrying (link just up)");
                tokio::time::sleep(GRACE_RETRY).await;
                continue;
            }
            Err(why) => {
                agentd::log_warn!("peer data connection to {id} at {}: {why}", slot.link.data);
                slot.set(ConnState::Down { why });
            }
        }
        tokio::time::sleep(jitter(backoff)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

type Conn = hyper::client::conn::http2::Connection<
    TokioIo<Coalesce<Prefixed<tokio_rustls::client::TlsStream<TcpStream>>>>,
    HopBody,
    LocalExec,
>;

/// TCP (no Nagle) and TLS 1.3 with our identity to the linked router at
/// `link.data`, with `cfg` (`h2`, or a relay tunnel's ALPN), and what the
/// handshake verified of it: the data connection and a relay client's
/// tunnel dial alike. Not bounded in time (the caller bounds it).
pub async fn connect_tls(
    link: &Link,
    tls: &Rc<RefCell<PeerTls>>,
    cfg: std::sync::Arc<tokio_rustls::rustls::ClientConfig>,
) -> Result<(tokio_rustls::client::TlsStream<TcpStream>, Verified), String> {
    let name = server_name(&link.router_id)?;
    let tcp = TcpStream::connect(&*link.data)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let stream = TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {}", error_text(&e)))?;
    // The pin is the link's key, so a verified peer presented it.
    let v = tls
        .borrow()
        .verified(stream.get_ref().1, Some(&link.router_id))
        .map_err(|e| format!("handshake: {e}"))?;
    Ok((stream, v))
}

/// TCP, TLS 1.3 with our identity, the peer's verified identity, then
/// its first bytes (the server checks our certificate only after the
/// client side of a TLS 1.3 handshake finished: the first frame is what
/// says it accepted us), then the h2 handshake.
async fn dial(
    link: &Link,
    tls: &Rc<RefCell<PeerTls>>,
    kill: Rc<KillSwitch>,
) -> Result<(PeerSender, Conn), String> {
    let cfg = tls
        .borrow()
        .client(&link.router_id)
        .ok_or_else(|| format!("router {} is not linked", link.router_id))?;
    let work = async {
        let (mut stream, _) = connect_tls(link, tls, cfg).await?;
        let mut first = vec![0u8; 512];
        let n = stream
            .read(&mut first)
            .await
            .map_err(|e| format!("handshake: refused by the peer: {}", error_text(&e)))?;
        if n == 0 {
            return Err("handshake: the peer closed the connection".to_string());
        }
        first.truncate(n);
        Ok(Prefixed {
            prefix: Bytes::from(first),
            inner: stream,
            kill,
        })
    };
    let io = timeout(DIAL_TIMEOUT, work)
        .await
        .map_err(|_| format!("no handshake within {} s", DIAL_TIMEOUT.as_secs()))??;
    let mut b = hyper::client::conn::http2::Builder::new(LocalExec);
    b.timer(TokioTimer::new());
    h2_settings::client(&mut b);
    b.handshake(TokioIo::new(Coalesce::new(io)))
        .await
        .map_err(|e| format!("h2 handshake: {e}"))
}

/// `d` ± 20 %, so peers that lost each other at once do not redial in
/// lockstep.
pub fn jitter(d: Duration) -> Duration {
    let mut b = [0u8; 1];
    let r = if crate::auth::fill_random(&mut b).is_ok() {
        b[0]
    } else {
        128
    };
    let ms = d.as_millis() as u64;
    let delta = ms / 5;
    Duration::from_millis(ms - delta + (u64::from(r) * 2 * delta) / 255)
}

/// Ends a connection from outside: its reads and writes fail from then
/// on, and the task blocked reading it is woken to see that.
#[derive(Debug, Default)]
pub struct KillSwitch {
    dead: std::cell::Cell<bool>,
    reader: RefCell<Option<std::task::Waker>>,
}

impl KillSwitch {
    pub fn kill(&self) {
        self.dead.set(true);
        if let Some(w) = self.reader.borrow_mut().take() {
            w.wake();
        }
    }

    fn check(&self) -> std::io::Result<()> {
        if self.dead.get() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "the ARPX session with this router ended",
            ));
        }
        Ok(())
    }
}

/// A stream whose first bytes were already read (the peer's first
/// frame), served again before the rest; and that a [`KillSwitch`] ends.
#[derive(Debug)]
pub struct Prefixed<S> {
    prefix: Bytes,
    inner: S,
    kill: Rc<KillSwitch>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.kill.check()?;
        *self.kill.reader.borrow_mut() = Some(cx.waker().clone());
        if self.prefix.has_remaining() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.kill.check()?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.kill.check()?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
