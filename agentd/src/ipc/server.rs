//! agentd's side of the IPC socket: accept loop, credential check,
//! per-connection framing — and the interface to the daemon's state loop.
//!
//! ```text
//!                       +-------------------- IpcServer::run ---------------------+
//!  UnixListener ------> | accept, SO_PEERCRED + slot (admission), spawn a task    |
//!                       +---------------------------------------------------------+
//!   connection task (one per client; owns the socket and a FrameDecoder):
//!     socket bytes --decode--> ServerEvent::Request --(events: mpsc, bounded)--> daemon state loop
//!     socket  <--encode-- outbound queue (mpsc, bounded) <-- Replier::send / FibSink::offer
//!     on exit -------------------> ServerEvent::Disconnected
//! ```
//!
//! The daemon owns the RIB in one loop and consumes [`ServerEvent`]s from
//! the channel given to [`IpcServer::run`]:
//!
//! * `Request(IncomingRequest { conn, peer, id, body, reply })` — handle
//!   `body`, then call `reply.send(result)` exactly once (dropping the
//!   `Replier` unanswered sends `internal`). `peer` carries the client's
//!   uid/gid/pid from `SO_PEERCRED`; the server has already refused, at
//!   accept and before taking a slot, peers that are neither root nor in
//!   [`ServerConfig::allowed_uids`] or whose uid holds its share of slots
//!   ([`admission`](super::admission)), and the daemon may restrict admin
//!   commands further
//!   ([`RequestBody::is_admin_command`]).
//! * For `RequestBody::SubscribeFib`: take `reply.fib_sink()` first, send
//!   `Ok(ResponseBody::Subscribed)`, then call
//!   [`FibExporter::subscribe`](crate::fib::export::FibExporter::subscribe)
//!   `(sink, &table, &policy)` (queues the snapshot) and remember the
//!   returned `SubscriberId` under `conn`. After every batch of table
//!   changes call `exporter.publish(table.generation(), changes)`. Events
//!   and replies share the connection's outbound queue, so they arrive in
//!   the order they were queued.
//! * `Disconnected { conn, reason }` — the connection is gone; forget
//!   anything keyed by `conn` (`exporter.unsubscribe(id)`; a dead sink
//!   would also be dropped at its next event). `reason` is worth a log
//!   line: malformed frames, refused uids and protocol mismatches show up
//!   here.
//!
//! A daemon loop in outline:
//!
//! ```text
//! let (tx, mut rx) = mpsc::channel(256);
//! tokio::spawn(IpcServer::bind(path, config)?.run(tx));
//! loop { select! {
//!     Some(ev) = rx.recv() => match ev {
//!         ServerEvent::Request(req) => {
//!             let IncomingRequest { conn, peer, body, reply, .. } = *req;
//!             match body {
//!                 RequestBody::SubscribeFib => {
//!                     let sink = reply.fib_sink();
//!                     reply.send(Ok(ResponseBody::Subscribed));
//!                     if let Some(id) = exporter.subscribe(sink, &table, &policy) { subs.insert(conn, id); }
//!                 }
//!                 RequestBody::Register(reg) => reply.send(rib.register(reg, now)),  // publishes Upsert
//!                 ...
//!             }
//!         }
//!         ServerEvent::Disconnected { conn, reason } => { log(reason); subs.remove(&conn).map(|id| exporter.unsubscribe(id)); }
//!     },
//!     _ = sleep_until(table.next_deadline()) => { /* expire, publish Removes */ }
//! } }
//! ```
//!
//! Nothing the daemon calls here blocks: replies and FIB events are
//! encoded and go into a queue bounded in frames and in bytes
//! ([`ServerConfig::outbound_queue`], [`ServerConfig::outbound_bytes`]) with
//! `try_send`; a client over either bound is disconnected (a FIB
//! subscriber then reconnects and gets a snapshot).
//! A malformed frame gets a `malformed` error with request id 0, then that
//! connection closes; other connections never notice.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, Notify};

use super::admission::{Admission, Limits, Refusal};
use crate::fib::export;
use crate::fib::FibEvent;
use crate::ipc::frame::{self, FrameDecoder, FrameError};
use crate::ipc::message::{
    Hello, IpcError, Request, RequestBody, Response, ResponseBody, ServerMsg, CONNECTION_ERROR_ID,
    PROTOCOL_VERSION,
};

/// Tunables of the IPC server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Uids besides root that may connect (the agent-gw user).
    pub allowed_uids: Vec<u32>,
    /// Whether uid 0 may connect. Always true in the daemon; tests that
    /// run as root turn it off to see a refusal.
    pub allow_root: bool,
    /// Connections beyond this are refused with `unavailable`.
    pub max_connections: usize,
    /// Connections one non-root uid may hold at once (each uid counted
    /// on its own: the gateway's user, agentd's own user); see
    /// [`admission`](super::admission).
    pub max_per_uid: usize,
    /// Slots only root may take, so the operator's `agentctl` always gets
    /// in.
    pub root_reserve: usize,
    /// Frames (replies and FIB events) queued per connection before the
    /// client counts as stuck and is disconnected. Must exceed the number
    /// of chunks in a FIB snapshot (64 KiB each).
    pub outbound_queue: usize,
    /// Encoded bytes queued per connection before the client counts as
    /// stuck and is disconnected, like the frame bound: frames alone would
    /// let one slow client hold `outbound_queue` × 256 KiB. Must exceed
    /// the encoded FIB snapshot.
    pub outbound_bytes: usize,
    /// A client must send its `Hello` within this time.
    pub handshake_timeout: Duration,
    /// Sent in our `Hello`, e.g. `agentd 0.1.0`.
    pub software: Box<str>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            allowed_uids: Vec::new(),
            allow_root: true,
            max_connections: 64,
            max_per_uid: 8,
            root_reserve: 8,
            outbound_queue: 1024,
            outbound_bytes: DEFAULT_OUTBOUND_BYTES,
            handshake_timeout: Duration::from_secs(5),
            software: concat!("agentd ", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}

/// Default of [`ServerConfig::outbound_bytes`]: a snapshot of 16 MiB is
/// some 50 000 typical routes.
pub const DEFAULT_OUTBOUND_BYTES: usize = 16 * 1024 * 1024;

impl ServerConfig {
    /// The byte bound for a table of `max_routes`: the default, or room for
    /// a snapshot of that many routes of 1 KiB each when that is more.
    pub fn outbound_bytes_for(max_routes: usize) -> usize {
        DEFAULT_OUTBOUND_BYTES.max(max_routes.saturating_mul(1024))
    }

    /// Whether a peer with this uid may use the socket.
    pub fn permits(&self, uid: u32) -> bool {
        (uid == 0 && self.allow_root) || self.allowed_uids.contains(&uid)
    }
}

/// The connecting process as the kernel reports it (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub uid: u32,
    pub gid: u32,
    pub pid: Option<i32>,
}

impl PeerCred {
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }
}

/// Identifies one accepted connection for the daemon's bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// What the server hands to the daemon's state loop.
#[derive(Debug)]
pub enum ServerEvent {
    Request(Box<IncomingRequest>),
    Disconnected { conn: ConnId, reason: Disconnect },
}

/// One decoded request from an authorised peer.
#[derive(Debug)]
pub struct IncomingRequest {
    pub conn: ConnId,
    pub peer: PeerCred,
    pub id: u64,
    pub body: RequestBody,
    pub reply: Replier,
}

/// Why a connection ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disconnect {
    /// The client closed it cleanly.
    Closed,
    Io(io::ErrorKind),
    /// The client sent bytes that are not a valid frame or request.
    Malformed(FrameError),
    /// Neither root nor an allowed uid (refused at accept).
    PermissionDenied {
        uid: u32,
    },
    /// Turned away at accept: the peer's uid, or the server, has no free
    /// slot.
    Refused(Refusal),
    /// The client speaks another protocol version.
    ProtocolMismatch {
        theirs: u32,
        software: Box<str>,
    },
    HandshakeTimeout,
    /// The client did not read its replies/FIB events fast enough.
    QueueFull,
    /// A message of ours could not be framed (a FIB event over the frame
    /// limit); a bug on our side, reported rather than hidden.
    Unsendable(FrameError),
    /// The daemon stopped taking requests.
    ServerShutdown,
}

// ===== connection handle =====

/// Shared between the connection task and everything that queues frames
/// for it.
#[derive(Debug)]
struct ConnShared {
    id: ConnId,
    kill: Notify,
    killed: AtomicBool,
    /// Encoded bytes queued and not yet written.
    queued: AtomicUsize,
    max_bytes: usize,
}

impl ConnShared {
    fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        self.kill.notify_one();
    }
}

/// One queued frame, encoded when it was offered (so its size is known
/// and the bound is in bytes as well as frames).
#[derive(Debug)]
enum Outbound {
    Frame(Vec<u8>),
    /// A FIB event of ours that cannot be framed: the connection ends.
    Unsendable(FrameError),
}

#[derive(Clone, Debug)]
struct ConnHandle {
    tx: mpsc::Sender<Outbound>,
    shared: Arc<ConnShared>,
}

impl ConnHandle {
    /// Queues a frame without waiting. A full queue — in frames or in
    /// bytes — disconnects the client.
    fn offer(&self, msg: ServerMsg) -> bool {
        let out = match frame::encode(&msg) {
            Ok(bytes) => Outbound::Frame(bytes),
            // Only an oversized reply can fail here; answer it with an
            // error instead of dropping the request silently.
            Err(e) => match msg {
                ServerMsg::Response(r) => {
                    let body = Err(IpcError::internal(format_args!("reply not sendable: {e}")));
                    match frame::encode(&ServerMsg::Response(Response { id: r.id, body })) {
                        Ok(bytes) => Outbound::Frame(bytes),
                        Err(e) => Outbound::Unsendable(e),
                    }
                }
                ServerMsg::Fib(_) => Outbound::Unsendable(e),
            },
        };
        let len = match &out {
            Outbound::Frame(b) => b.len(),
            Outbound::Unsendable(_) => 0,
        };
        let queued = self.shared.queued.fetch_add(len, Ordering::Relaxed) + len;
        if queued > self.shared.max_bytes {
            self.shared.queued.fetch_sub(len, Ordering::Relaxed);
            self.shared.kill();
            return false;
        }
        match self.tx.try_send(out) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.shared.queued.fetch_sub(len, Ordering::Relaxed);
                self.shared.kill();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.shared.queued.fetch_sub(len, Ordering::Relaxed);
                false
            }
        }
    }
}

/// Answers one request. Send exactly once; dropping it unanswered sends an
/// `internal` error so the client never waits for its timeout.
#[derive(Debug)]
pub struct Replier {
    id: u64,
    conn: Option<ConnHandle>,
}

impl Replier {
    /// A replier with no connection behind it (its answer goes nowhere),
    /// for tests of the daemon's decisions.
    #[cfg(test)]
    pub(crate) fn detached(id: u64) -> Replier {
        Replier { id, conn: None }
    }

    pub fn send(mut self, body: Result<ResponseBody, IpcError>) {
        if let Some(conn) = self.conn.take() {
            conn.offer(ServerMsg::Response(Response { id: self.id, body }));
        }
    }

    /// A sink that queues FIB events on this request's connection.
    pub fn fib_sink(&self) -> FibSink {
        FibSink {
            conn: self.conn.clone(),
        }
    }

    pub fn conn(&self) -> Option<ConnId> {
        self.conn.as_ref().map(|c| c.shared.id)
    }
}

impl Drop for Replier {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let body = Err(IpcError::internal("request dropped without a reply"));
            conn.offer(ServerMsg::Response(Response { id: self.id, body }));
        }
    }
}

/// The FIB event queue of one subscribed connection.
#[derive(Clone, Debug)]
pub struct FibSink {
    conn: Option<ConnHandle>,
}

impl FibSink {
    pub fn conn(&self) -> Option<ConnId> {
        self.conn.as_ref().map(|c| c.shared.id)
    }

    /// Disconnects the subscriber (e.g. on daemon shutdown).
    pub fn close(&self) {
        if let Some(c) = &self.conn {
            c.shared.kill();
        }
    }
}

impl export::FibSink for FibSink {
    fn offer(&mut self, event: FibEvent) -> bool {
        match &self.conn {
            Some(c) if !c.shared.killed.load(Ordering::Relaxed) => c.offer(ServerMsg::Fib(event)),
            _ => false,
        }
    }
}

// ===== server =====

/// The listening socket plus its configuration.
#[derive(Debug)]
pub struct IpcServer {
    listener: UnixListener,
    config: Arc<ServerConfig>,
}

impl IpcServer {
    /// Binds `path`, replacing a stale socket file left by a crashed
    /// daemon but refusing to steal a socket a live daemon answers on.
    /// The file is made world-connectable: access control is the
    /// `SO_PEERCRED` check, which a file mode cannot express for "root or
    /// the agent-gw user".
    pub fn bind(path: &Path, config: ServerConfig) -> io::Result<IpcServer> {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running agentd", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
        Ok(IpcServer::from_listener(listener, config))
    }

    pub fn from_listener(listener: UnixListener, config: ServerConfig) -> IpcServer {
        IpcServer {
            listener,
            config: Arc::new(config),
        }
    }

    /// Accepts connections until the daemon drops the receiving end of
    /// `events`. Must run inside a tokio runtime (current-thread is fine).
    ///
    /// Each peer's credentials are checked at accept, before it gets a
    /// slot or a task: a refused peer (not permitted, or over its uid's
    /// share) is answered and closed at once, without waiting for its
    /// `Hello`.
    pub async fn run(self, events: mpsc::Sender<ServerEvent>) {
        let admission = Admission::new(Limits {
            total: self.config.max_connections,
            per_uid: self.config.max_per_uid,
            root_reserve: self.config.root_reserve,
        });
        let mut next_conn = 1u64;
        loop {
            let accepted = tokio::select! {
                a = self.listener.accept() => a,
                () = events.closed() => return,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // EMFILE and friends pass; back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(cred) = stream.peer_cred() else {
                continue;
            };
            let peer = PeerCred {
                uid: cred.uid(),
                gid: cred.gid(),
                pid: cred.pid(),
            };
            let conn = ConnId(next_conn);
            next_conn += 1;
            let config = Arc::clone(&self.config);
            let slot = match admission.admit(peer.uid, config.permits(peer.uid)) {
                Ok(slot) => slot,
                Err(refusal) => {
                    refuse(stream, &config, &refusal);
                    // Worth a log line in the daemon; never wait for room.
                    let reason = match refusal {
                        Refusal::NotPermitted { uid } => Disconnect::PermissionDenied { uid },
                        _ => Disconnect::Refused(refusal),
                    };
                    let _ = events.try_send(ServerEvent::Disconnected { conn, reason });
                    continue;
                }
            };
            let events = events.clone();
            tokio::spawn(async move {
                let reason = serve_connection(stream, conn, peer, &config, &events).await;
                drop(slot);
                let _ = events
                    .send(ServerEvent::Disconnected { conn, reason })
                    .await;
            });
        }
    }
}

/// Tells a refused client why, then closes: our `Hello` (so it can read
/// the error in its own protocol) and the error, written without waiting
/// (a fresh socket's buffer takes these few bytes; if not, the client
/// just sees the close). What the client already sent is read first, so
/// that closing does not reset the connection before it reads the answer.
fn refuse(stream: UnixStream, config: &ServerConfig, refusal: &Refusal) {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = stream.into_std() else {
        return;
    };
    let mut out = Vec::new();
    let ok = frame::encode_into(&Hello::ours(&config.software), &mut out).is_ok()
        && frame::encode_into(
            &ServerMsg::Response(Response {
                id: CONNECTION_ERROR_ID,
                body: Err(IpcError::from(refusal)),
            }),
            &mut out,
        )
        .is_ok();
    let mut sink = [0u8; 1024];
    let _ = stream.read(&mut sink);
    if ok {
        let _ = stream.write(&out);
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

/// Size of one socket read.
const READ_CHUNK: usize = 16 * 1024;

async fn serve_connection(
    mut stream: UnixStream,
    conn: ConnId,
    peer: PeerCred,
    config: &ServerConfig,
    events: &mpsc::Sender<ServerEvent>,
) -> Disconnect {
    let mut out = Vec::new();
    let mut decoder = FrameDecoder::new();
    let mut buf = vec![0u8; READ_CHUNK];

    // Handshake: our Hello first, so even a mismatched client learns our
    // version; then theirs.
    if let Err(e) = frame::encode_into(&Hello::ours(&config.software), &mut out) {
        return Disconnect::Unsendable(e);
    }
    if let Err(e) = stream.write_all(&out).await {
        return Disconnect::Io(e.kind());
    }
    out.clear();
    let hello = match tokio::time::timeout(
        config.handshake_timeout,
        read_message::<Hello>(&mut stream, &mut decoder, &mut buf),
    )
    .await
    {
        Err(_) => return Disconnect::HandshakeTimeout,
        Ok(Err(reason)) => {
            if let Disconnect::Malformed(e) = &reason {
                send_connection_error(
                    &mut stream,
                    IpcError::Malformed {
                        reason: e.to_string().into(),
                    },
                )
                .await;
            }
            return reason;
        }
        Ok(Ok(h)) => h,
    };
    if hello.protocol != PROTOCOL_VERSION {
        // The client compares versions itself on our Hello; nothing we
        // could send now is guaranteed to decode on its side.
        return Disconnect::ProtocolMismatch {
            theirs: hello.protocol,
            software: hello.software,
        };
    }

    let (tx, mut rx) = mpsc::channel(config.outbound_queue.max(1));
    let shared = Arc::new(ConnShared {
        id: conn,
        kill: Notify::new(),
        killed: AtomicBool::new(false),
        queued: AtomicUsize::new(0),
        max_bytes: config.outbound_bytes.max(1),
    });
    let handle = ConnHandle {
        tx,
        shared: Arc::clone(&shared),
    };
    let (mut rd, mut wr) = stream.split();

    loop {
        // Deliver every complete request already buffered (the first
        // may have arrived together with the client's Hello) before
        // waiting for more bytes.
        loop {
            let request = match decoder.next_message::<Request>() {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => {
                    let reason = e.to_string().into();
                    let err = ServerMsg::Response(Response {
                        id: CONNECTION_ERROR_ID,
                        body: Err(IpcError::Malformed { reason }),
                    });
                    out.clear();
                    if frame::encode_into(&err, &mut out).is_ok() {
                        let _ = tokio::time::timeout(config.handshake_timeout, wr.write_all(&out))
                            .await;
                    }
                    return Disconnect::Malformed(e);
                }
            };
            let reply = Replier {
                id: request.id,
                conn: Some(handle.clone()),
            };
            let event = ServerEvent::Request(Box::new(IncomingRequest {
                conn,
                peer,
                id: request.id,
                body: request.body,
                reply,
            }));
            tokio::select! {
                biased;
                () = shared.kill.notified() => return Disconnect::QueueFull,
                sent = events.send(event) => if let Err(mpsc::error::SendError(ev)) = sent {
                    if let ServerEvent::Request(req) = ev {
                        req.reply.send(Err(IpcError::Unavailable { reason: "agentd is shutting down".into() }));
                    }
                    // Flush that reply before closing.
                    while let Ok(Outbound::Frame(bytes)) = rx.try_recv() {
                        let _ = tokio::time::timeout(config.handshake_timeout, wr.write_all(&bytes)).await;
                    }
                    return Disconnect::ServerShutdown;
                },
            }
        }
        tokio::select! {
            biased;
            () = shared.kill.notified() => return Disconnect::QueueFull,
            msg = rx.recv() => {
                // `handle` keeps one sender alive, so `None` cannot happen.
                let bytes = match msg {
                    None => return Disconnect::ServerShutdown,
                    Some(Outbound::Unsendable(e)) => return Disconnect::Unsendable(e),
                    Some(Outbound::Frame(bytes)) => bytes,
                };
                tokio::select! {
                    biased;
                    () = shared.kill.notified() => return Disconnect::QueueFull,
                    w = wr.write_all(&bytes) => if let Err(e) = w { return Disconnect::Io(e.kind()) },
                }
                shared.queued.fetch_sub(bytes.len(), Ordering::Relaxed);
            }
            n = rd.read(&mut buf) => {
                let n = match n {
                    Ok(0) => return match decoder.finish() {
                        Ok(()) => Disconnect::Closed,
                        Err(e) => Disconnect::Malformed(e),
                    },
                    Ok(n) => n,
                    Err(e) => return Disconnect::Io(e.kind()),
                };
                decoder.push(&buf[..n]);
            }
        }
    }
}

/// Reads until one whole message is decoded.
async fn read_message<T: serde::de::DeserializeOwned>(
    stream: &mut UnixStream,
    decoder: &mut FrameDecoder,
    buf: &mut [u8],
) -> Result<T, Disconnect> {
    loop {
        match decoder.next_message::<T>() {
            Ok(Some(m)) => return Ok(m),
            Ok(None) => {}
            Err(e) => return Err(Disconnect::Malformed(e)),
        }
        match stream.read(buf).await {
            Ok(0) => {
                return Err(match decoder.finish() {
                    Ok(()) => Disconnect::Closed,
                    Err(e) => Disconnect::Malformed(e),
                })
            }
            Ok(n) => decoder.push(&buf[..n]),
            Err(e) => return Err(Disconnect::Io(e.kind())),
        }
    }
}

/// Best effort: one id-0 error frame before closing.
async fn send_connection_error(stream: &mut UnixStream, err: IpcError) {
    let msg = ServerMsg::Response(Response {
        id: CONNECTION_ERROR_ID,
        body: Err(err),
    });
    if let Ok(bytes) = frame::encode(&msg) {
        let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&bytes)).await;
    }
}
