//! Every I/O task of the ARPX driver, spawned by [`super::io::PeerTasks`]
//! when the driver asks (never by the loop itself). None decides anything:
//! they move bytes and report what happened: handshakes and dials as
//! [`PeerEvent`]s into the daemon's one input channel, each connection's
//! frames into its own queue of the [`super::inbox::Inbox`], which the
//! loop takes in fair turns. [`super::Peers`] (and through it the sans-IO
//! `arpx::instance`) decides.
//!
//! ```text
//!                      daemon event loop (one task)
//!          Instance::process(Input::Peer(ev) | Input::PeerTurn)
//!                    ^          ^              |
//!   Input::Peer(..)  |          | one conn's   | WriterCmd (bounded queue,
//!   (mpsc, bounded)  |          | frames/turn  |  bytes counted; full =>
//!                    |       +------+          v  the peer is disconnected)
//!                    |       |inbox |<--+--------------------------+
//!  +-------------+  Handshaken / Refused | per connection:          |
//!  | listener    |--(one handshake task ->| reader: header, body_len|
//!  | arpx.listen |   per accepted socket) |   (<= arpx.max_frame),   |
//!  +-------------+                        |   decode_body -> Frame / |
//!  +-------------+  Handshaken / Dial-    |   FrameError / Closed    |
//!  | dial task   |  Failed                |   (waits while its inbox |
//!  | (one at a   |----------------------->|   queue is full)         |
//!  | time, per   |                        |  writer: frames in order,|
//!  | peer)       |                        |   Close => flush, TLS    |
//!  +-------------+                        |   close_notify, abort    |
//!                                         |   the reader             |
//!                                         +--------------------------+
//! ```
//!
//! Handshake failures (unknown or wrongly pinned key, a certificate not
//! for the router_id, no ALPN `arpx/1`) end in the dial or handshake task
//! and never reach the instance: the driver records them as the peer's
//! last error.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arpx::frame::{self, HEADER_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::inbox::{ConnEvent, InboxSender};
use super::tls::TlsContext;
use crate::accept::Pacer;
use crate::daemon::input::Input;

/// TCP connect, and separately the TLS handshake, must finish within this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One frame write must finish within this (a peer that stops reading
/// is disconnected instead of holding the writer forever).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Inbound handshakes in progress at once; more connections wait in the
/// kernel's backlog.
pub const MAX_HANDSHAKES: usize = 16;
/// Frames queued for one connection.
pub const QUEUE_FRAMES: usize = 4096;

/// A TLS session to a peer.
pub type Stream = tokio_rustls::TlsStream<TcpStream>;

/// What the driver's tasks report.
pub enum PeerEvent {
    /// A TLS session is up and its peer verified.
    Handshaken(Box<Handshake>),
    /// A dial to `peer` failed (TCP or TLS); `relay`: it was relay
    /// number `relay` of `relay.server` (client mode).
    DialFailed {
        peer: String,
        relay: Option<usize>,
        error: String,
    },
    /// An inbound handshake failed; `remote` says from where.
    Refused { remote: SocketAddr, error: String },
    /// The listener of [`super::io::PeerIo::Listen`] number `serial` is
    /// bound (its address) or could not be.
    Listening {
        serial: u64,
        bound: Result<SocketAddr, String>,
    },
    /// Listener number `serial` stopped accepting.
    ListenerFailed { serial: u64, error: String },
}

impl fmt::Debug for PeerEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerEvent::Handshaken(h) => write!(
                f,
                "Handshaken({} {} {})",
                h.peer,
                if h.outbound { "to" } else { "from" },
                h.remote
            ),
            PeerEvent::DialFailed { peer, error, .. } => write!(f, "DialFailed({peer}: {error})"),
            PeerEvent::Refused { remote, error } => write!(f, "Refused({remote}: {error})"),
            PeerEvent::Listening { serial, bound } => write!(f, "Listening({serial}: {bound:?})"),
            PeerEvent::ListenerFailed { serial, error } => {
                write!(f, "ListenerFailed({serial}: {error})")
            }
        }
    }
}

/// A finished, verified handshake.
#[derive(Debug)]
pub struct Handshake {
    pub stream: Stream,
    /// Bytes already read from the session (a dialer waits for the
    /// server's first frame, see [`dial`]); the reader starts with them.
    pub prefix: Vec<u8>,
    /// [`TlsContext::mesh`] of the context that verified it.
    pub mesh: u64,
    /// The configured peer the certificate satisfied.
    pub peer: String,
    pub key: [u8; 32],
    /// Trusted by a pinned key rather than by our domain CA.
    pub pinned: bool,
    pub outbound: bool,
    pub remote: SocketAddr,
    /// A dial to relay number `relay` of `relay.server` (its router id
    /// is what its certificate proved).
    pub relay: Option<usize>,
}

async fn report(inputs: &mpsc::Sender<Input>, ev: PeerEvent) -> bool {
    inputs.send(Input::Peer(ev)).await.is_ok()
}

// ===== listener =====

/// Binds `addr` now (so a bad address is reported at once) and accepts in
/// a task; each accepted socket gets its own handshake task, at most
/// [`MAX_HANDSHAKES`] at a time. The TLS context is read at each accept,
/// so a reload's new peer set applies to the next connection.
pub fn spawn_listener(
    serial: u64,
    addr: SocketAddr,
    tls: watch::Receiver<Arc<TlsContext>>,
    inputs: mpsc::Sender<Input>,
) -> std::io::Result<(SocketAddr, AbortHandle)> {
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let local = std_listener.local_addr()?;
    let listener = TcpListener::from_std(std_listener)?;
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    let task = tokio::spawn(async move {
        let mut pacer = Pacer::new("ARPX listener");
        loop {
            let Ok(permit) = handshakes.clone().acquire_owned().await else {
                return;
            };
            // Out of descriptors (EMFILE), accept pauses, doubling up to a
            // second, instead of spinning on the loop's one core.
            let (tcp, remote) = match pacer.accept(&listener).await {
                Ok(x) => x,
                Err(e) => {
                    report(
                        &inputs,
                        PeerEvent::ListenerFailed {
                            serial,
                            error: e.to_string(),
                        },
                    )
                    .await;
                    return;
                }
            };
            let ctx = tls.borrow().clone();
            let inputs = inputs.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let ev = match accept(tcp, remote, &ctx).await {
                    Ok(h) => PeerEvent::Handshaken(Box::new(h)),
                    Err(error) => PeerEvent::Refused { remote, error },
                };
                report(&inputs, ev).await;
            });
        }
    });
    Ok((local, task.abort_handle()))
}

async fn accept(tcp: TcpStream, remote: SocketAddr, ctx: &TlsContext) -> Result<Handshake, String> {
    let _ = tcp.set_nodelay(true);
    let acceptor = TlsAcceptor::from(ctx.server.clone());
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, acceptor.accept(tcp))
        .await
        .map_err(|_| "TLS handshake timed out".to_string())?
        .map_err(|e| super::tls::handshake_error(&e))?;
    let stream = tokio_rustls::TlsStream::Server(stream);
    let v = ctx.verified(&stream, None)?;
    Ok(Handshake {
        stream,
        prefix: Vec::new(),
        mesh: ctx.mesh,
        peer: v.router_id,
        key: v.key,
        pinned: v.pinned,
        outbound: false,
        remote,
        relay: None,
    })
}

// ===== dialer =====

/// One dial attempt to `peer` at `address:port`; `relay`: to relay
/// number `relay`, known by address only (`peer` is then only the dial's
/// name).
pub fn spawn_dial(
    peer: String,
    relay: Option<usize>,
    address: String,
    port: u16,
    ctx: Arc<TlsContext>,
    inputs: mpsc::Sender<Input>,
) -> AbortHandle {
    tokio::spawn(async move {
        let ev = match dial(&peer, relay, &address, port, &ctx).await {
            Ok(h) => PeerEvent::Handshaken(Box::new(h)),
            Err(error) => PeerEvent::DialFailed { peer, relay, error },
        };
        report(&inputs, ev).await;
    })
    .abort_handle()
}

async fn dial(
    peer: &str,
    relay: Option<usize>,
    address: &str,
    port: u16,
    ctx: &TlsContext,
) -> Result<Handshake, String> {
    let config = match relay {
        None => ctx.client(peer)?,
        Some(_) => ctx.relay_client()?,
    };
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((address, port)))
        .await
        .map_err(|_| format!("connect to {address} port {port} timed out"))?
        .map_err(|e| format!("connect to {address} port {port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let remote = tcp
        .peer_addr()
        .map_err(|e| format!("connect to {address} port {port}: {e}"))?;
    let name = match relay {
        None => super::tls::server_name(peer)?,
        // The verifier judges the relay by its certificate (the Unlisted
        // rule); the name only makes SNI meaningful in its logs.
        Some(_) => super::tls::server_name(address)?,
    };
    let stream = tokio::time::timeout(
        CONNECT_TIMEOUT,
        TlsConnector::from(config).connect(name, tcp),
    )
    .await
    .map_err(|_| "TLS handshake timed out".to_string())?
    .map_err(|e| super::tls::handshake_error(&e))?;
    let mut stream = tokio_rustls::TlsStream::Client(stream);
    let v = match relay {
        None => ctx.verified(&stream, Some(peer))?,
        Some(_) => ctx.verified_relay(&stream)?,
    };
    // In TLS 1.3 the client finishes its handshake before the server has
    // judged the client certificate: a refusal arrives as an alert on the
    // first read. The server's Open comes first on every accepted
    // session, so the handshake counts as done only once bytes arrive;
    // a refusal stays a handshake error (never a session).
    let mut first = vec![0u8; 4096];
    let n = tokio::time::timeout(CONNECT_TIMEOUT, stream.read(&mut first))
        .await
        .map_err(|_| "handshake: no answer from the peer after TLS".to_string())?
        .map_err(|e| super::tls::handshake_error(&e))?;
    if n == 0 {
        return Err("handshake: the peer closed the connection".into());
    }
    first.truncate(n);
    Ok(Handshake {
        stream,
        prefix: first,
        mesh: ctx.mesh,
        peer: v.router_id,
        key: v.key,
        pinned: v.pinned,
        outbound: true,
        remote,
        relay,
    })
}

// ===== connections =====

/// What the driver hands a connection's writer.
#[derive(Debug)]
pub enum WriterCmd {
    Frame(Vec<u8>),
    /// Every frame before it is written: say so ([`ConnEvent::Written`]).
    NotifyWritten,
    /// Flush what is queued, send TLS close_notify, end the connection.
    Close,
}

/// The bounded queue in front of a connection's writer: at most
/// `frames` frames and a byte budget per send, so memory per peer stays
/// bounded whatever the peer does (one that stops reading fills it and
/// is disconnected).
#[derive(Debug)]
pub struct SendQueue {
    tx: mpsc::Sender<WriterCmd>,
    /// Bytes queued and not yet written (the writer subtracts).
    queued: Arc<AtomicUsize>,
}

/// The writer's end of a [`SendQueue`], handed to the task that writes.
#[derive(Debug)]
pub struct WriterEnd {
    rx: mpsc::Receiver<WriterCmd>,
    queued: Arc<AtomicUsize>,
}

impl SendQueue {
    /// A queue of at most `frames` frames. Made by the driver (no I/O):
    /// it keeps the queue, the connection's writer task gets the end.
    pub fn new(frames: usize) -> (SendQueue, WriterEnd) {
        let (tx, rx) = mpsc::channel(frames);
        let queued = Arc::new(AtomicUsize::new(0));
        (
            SendQueue {
                tx,
                queued: queued.clone(),
            },
            WriterEnd { rx, queued },
        )
    }

    /// Queues one encoded frame, or refuses when the queue would hold
    /// more than `max_bytes` (or its frame count is reached).
    pub fn send(&self, bytes: Vec<u8>, max_bytes: usize) -> Result<(), QueueFull> {
        let len = bytes.len();
        let queued = self.queued.load(Ordering::Relaxed);
        if queued.saturating_add(len) > max_bytes {
            return Err(QueueFull::Bytes(queued));
        }
        self.queued.fetch_add(len, Ordering::Relaxed);
        self.tx.try_send(WriterCmd::Frame(bytes)).map_err(|e| {
            self.queued.fetch_sub(len, Ordering::Relaxed);
            match e {
                mpsc::error::TrySendError::Full(_) => QueueFull::Frames,
                mpsc::error::TrySendError::Closed(_) => QueueFull::Gone,
            }
        })
    }

    /// Asks the writer to report when the frames queued so far are
    /// written. Takes a frame slot, not bytes; refused when the queue's
    /// frame count is reached.
    pub fn notify_written(&self) -> Result<(), QueueFull> {
        self.tx
            .try_send(WriterCmd::NotifyWritten)
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => QueueFull::Frames,
                mpsc::error::TrySendError::Closed(_) => QueueFull::Gone,
            })
    }

    /// Asks the writer to flush and close; `false` if it cannot take it.
    pub fn close(&self) -> bool {
        self.tx.try_send(WriterCmd::Close).is_ok()
    }
}

/// Why a frame could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueFull {
    Bytes(usize),
    Frames,
    /// The writer has ended (its error is reported on its own).
    Gone,
}

impl fmt::Display for QueueFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueFull::Bytes(n) => write!(
                f,
                "peer is not reading: {n} bytes queued for it (send queue full)"
            ),
            QueueFull::Frames => write!(
                f,
                "peer is not reading: {QUEUE_FRAMES} frames queued for it (send queue full)"
            ),
            QueueFull::Gone => write!(f, "connection writer has ended"),
        }
    }
}

/// Starts the reader and writer of a verified session; both report into
/// the connection's queue of the driver's [`super::inbox::Inbox`].
/// Returns the reader's abort handle and the writer (which ends the
/// reader when it ends).
pub fn spawn_connection(
    stream: Stream,
    prefix: Vec<u8>,
    max_frame: usize,
    inbox: InboxSender,
    writer: WriterEnd,
) -> (AbortHandle, JoinHandle<()>) {
    let (rd, wr) = tokio::io::split(stream);
    let rd = std::io::Cursor::new(prefix).chain(rd);
    let reader = tokio::spawn(read_frames(rd, max_frame, inbox.clone())).abort_handle();
    let writer = tokio::spawn(write_frames(wr, writer, reader.clone(), inbox));
    (reader, writer)
}

/// Reads frames until the stream ends or a frame is bad (framing is then
/// lost: the instance answers with the typed Close, sent by the writer).
/// Waits while the connection's inbox queue is full, so a peer that
/// sends faster than the loop takes its turns is held back by TCP.
async fn read_frames(mut rd: impl AsyncRead + Unpin, max_frame: usize, inbox: InboxSender) {
    let mut body = Vec::new();
    loop {
        let mut header = [0u8; HEADER_LEN];
        if let Err(e) = rd.read_exact(&mut header).await {
            inbox.last(ConnEvent::Closed(closed_text(&e)));
            return;
        }
        let len = match frame::body_len(header, max_frame) {
            Ok(len) => len,
            Err(error) => {
                inbox.last(ConnEvent::FrameError(error));
                return;
            }
        };
        body.resize(len, 0);
        if let Err(e) = rd.read_exact(&mut body).await {
            inbox.last(ConnEvent::Closed(closed_text(&e)));
            return;
        }
        match frame::decode_body(&body) {
            Ok(msg) => {
                if !inbox.frame(msg).await {
                    return;
                }
            }
            Err(error) => {
                inbox.last(ConnEvent::FrameError(error));
                return;
            }
        }
        if body.capacity() > 4 * 1024 {
            // A big snapshot frame should not pin its buffer for the
            // session's lifetime.
            body = Vec::new();
        }
    }
}

fn closed_text(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        "connection closed by the peer".into()
    } else {
        format!("connection lost: {}", super::tls::error_text(e))
    }
}

/// Why a timed write or flush failed, if it did.
fn failed(r: Result<std::io::Result<()>, tokio::time::error::Elapsed>) -> Option<String> {
    match r {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("write failed: {e}")),
        Err(_) => Some("peer is not reading: a write timed out".to_string()),
    }
}

async fn write_frames(
    mut wr: WriteHalf<Stream>,
    end: WriterEnd,
    reader: AbortHandle,
    inbox: InboxSender,
) {
    let WriterEnd { mut rx, queued } = end;
    let mut error = None;
    while let Some(cmd) = rx.recv().await {
        match cmd {
            WriterCmd::Frame(bytes) => {
                let len = bytes.len();
                let r = tokio::time::timeout(WRITE_TIMEOUT, wr.write_all(&bytes)).await;
                queued.fetch_sub(len, Ordering::Relaxed);
                // TLS records the socket could not take at once stay in
                // the TLS layer until something drives them out: flush
                // whenever the queue runs empty, or the last frame of a
                // burst waits for the next heartbeat (a second).
                let r = match r {
                    Ok(Ok(())) if rx.is_empty() => {
                        tokio::time::timeout(WRITE_TIMEOUT, wr.flush()).await
                    }
                    other => other,
                };
                if let Some(e) = failed(r) {
                    error = Some(e);
                    break;
                }
            }
            WriterCmd::NotifyWritten => {
                // Handed to TLS is not yet sent: flush first, as at the
                // end of any burst.
                if let Some(e) = failed(tokio::time::timeout(WRITE_TIMEOUT, wr.flush()).await) {
                    error = Some(e);
                    break;
                }
                inbox.written();
            }
            WriterCmd::Close => {
                let _ = tokio::time::timeout(WRITE_TIMEOUT, async {
                    let _ = wr.flush().await;
                    let _ = wr.shutdown().await;
                })
                .await;
                break;
            }
        }
    }
    reader.abort();
    if let Some(error) = error {
        inbox.last(ConnEvent::Closed(error));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_send_queue_is_bounded_in_bytes_and_frames() {
        let (q, end) = SendQueue::new(3);
        let WriterEnd { mut rx, queued } = end;
        assert_eq!(q.send(vec![0; 40], 100), Ok(()));
        assert_eq!(q.send(vec![0; 60], 100), Ok(()));
        // 100 bytes queued: one more byte is over the budget, and the
        // refused frame is not counted.
        assert_eq!(q.send(vec![0; 1], 100), Err(QueueFull::Bytes(100)));
        assert_eq!(queued.load(Ordering::Relaxed), 100);
        // The writer takes one frame off (and counts its bytes off).
        let Some(WriterCmd::Frame(b)) = rx.try_recv().ok() else {
            panic!("a frame")
        };
        queued.fetch_sub(b.len(), Ordering::Relaxed);
        assert_eq!(q.send(vec![0; 30], 100), Ok(()));
        // Frame count: 3 queued (60, 30, 10) is the channel's bound.
        assert_eq!(q.send(vec![0; 10], 1000), Ok(()));
        assert_eq!(q.send(vec![0; 10], 1000), Err(QueueFull::Frames));
        assert_eq!(queued.load(Ordering::Relaxed), 100);
        // A writer that ended: neither a frame nor the close is taken.
        drop(rx);
        assert_eq!(q.send(vec![0; 1], 1000), Err(QueueFull::Gone));
        assert!(!q.close());
    }
}
