//! The IPC client used by agent-gw and agentctl.
//!
//! One connection carries any number of concurrent calls: each gets a
//! fresh request id, and a reader task routes responses back by id. A FIB
//! subscription shares the same connection; its events arrive on a
//! [`FibStream`].
//!
//! ```text
//!   call() --frame--> out queue --> writer task --> socket
//!   call() <--oneshot-- pending[id] <-- reader task <-- socket
//!   FibStream <--mpsc-------------------/
//! ```
//!
//! Dropping every clone of the [`Client`] closes the connection. If the
//! connection dies, outstanding and later calls fail with the reason and
//! the FIB stream yields that error once, then ends; reconnect with
//! [`Client::connect`].

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use crate::fib::FibEvent;
use crate::ipc::frame::{self, FrameDecoder, FrameError};
use crate::ipc::message::{
    AdmissionDone, AdmissionRefusal, AgentPage, AgentsQuery, CandidatesView, GatewayStats, Hello,
    IpcError, LeaseGrant, LookupQuery, LookupView, PeersView, Registration, Renewal, Request,
    RequestBody, ResponseBody, RoutePage, RoutesQuery, ServerMsg, StatsView, StatusView,
    CONNECTION_ERROR_ID, PROTOCOL_VERSION,
};
use crate::owner::Caller;
use crate::route::RouteId;

/// Default limit on one call (and on the handshake).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// FIB events buffered for a slow consumer before the reader waits (and
/// the server eventually disconnects us).
const FIB_QUEUE: usize = 64;
const OUT_QUEUE: usize = 64;
const READ_CHUNK: usize = 16 * 1024;

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The socket could not be reached.
    Connect(io::ErrorKind),
    Io(io::ErrorKind),
    /// The server sent bytes we cannot decode, or a message of ours is too
    /// big to send.
    Frame(FrameError),
    /// The server speaks another protocol version.
    ProtocolMismatch {
        ours: u32,
        theirs: u32,
        server: Box<str>,
    },
    /// The server closed the connection.
    Closed,
    Timeout,
    /// The server refused the request (or the whole connection).
    Server(IpcError),
    /// The server answered with the wrong kind of response.
    UnexpectedResponse {
        expected: &'static str,
        got: &'static str,
    },
    /// This connection already has a FIB subscription.
    AlreadySubscribed,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect(k) => write!(f, "cannot connect to agentd: {k}"),
            ClientError::Io(k) => write!(f, "agentd connection failed: {k}"),
            ClientError::Frame(e) => write!(f, "agentd connection: {e}"),
            ClientError::ProtocolMismatch {
                ours,
                theirs,
                server,
            } => {
                write!(f, "{server} speaks IPC protocol {theirs}, this program speaks {ours}: upgrade both together")
            }
            ClientError::Closed => f.write_str("agentd closed the connection"),
            ClientError::Timeout => f.write_str("agentd did not answer in time"),
            ClientError::Server(e) => e.fmt(f),
            ClientError::UnexpectedResponse { expected, got } => {
                write!(f, "agentd answered {got} where {expected} was expected")
            }
            ClientError::AlreadySubscribed => {
                f.write_str("this connection is already subscribed to the FIB")
            }
        }
    }
}

impl std::error::Error for ClientError {}

type Reply = Result<ResponseBody, ClientError>;

/// State the reader task shares with callers.
#[derive(Debug, Default)]
struct Shared {
    pending: HashMap<u64, oneshot::Sender<Reply>>,
    fib: Option<mpsc::Sender<Result<FibEvent, ClientError>>>,
    /// Set once the connection is dead; later calls fail with it.
    dead: Option<ClientError>,
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A connection to agentd. Cheap to clone; clones share the connection.
#[derive(Clone, Debug)]
pub struct Client {
    out: mpsc::Sender<Vec<u8>>,
    shared: Arc<Mutex<Shared>>,
    next_id: Arc<AtomicU64>,
    server: Arc<Hello>,
    timeout: Duration,
}

impl Client {
    /// Connects and performs the `Hello` exchange. `software` names this
    /// program in the server's logs (e.g. `agent-gw 0.1.0`).
    pub async fn connect(path: &Path, software: &str) -> Result<Client, ClientError> {
        let stream = UnixStream::connect(path)
            .await
            .map_err(|e| ClientError::Connect(e.kind()))?;
        tokio::time::timeout(DEFAULT_TIMEOUT, Client::handshake(stream, software))
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    async fn handshake(stream: UnixStream, software: &str) -> Result<Client, ClientError> {
        let (mut rd, mut wr) = stream.into_split();
        let hello = frame::encode(&Hello::ours(software)).map_err(ClientError::Frame)?;
        // A server that refuses us at accept answers and closes at once, so
        // the write may fail: its answer is still there to read.
        let written = wr.write_all(&hello).await;
        let mut decoder = FrameDecoder::new();
        let mut buf = vec![0u8; READ_CHUNK];
        let server: Hello = read_one(&mut rd, &mut decoder, &mut buf).await?;
        if server.protocol != PROTOCOL_VERSION {
            return Err(ClientError::ProtocolMismatch {
                ours: PROTOCOL_VERSION,
                theirs: server.protocol,
                server: server.software,
            });
        }
        if let Err(e) = written {
            return Err(
                match read_one::<ServerMsg>(&mut rd, &mut decoder, &mut buf).await {
                    Ok(ServerMsg::Response(crate::ipc::message::Response {
                        id: CONNECTION_ERROR_ID,
                        body: Err(err),
                    })) => ClientError::Server(err),
                    _ => ClientError::Io(e.kind()),
                },
            );
        }
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (out, out_rx) = mpsc::channel(OUT_QUEUE);
        tokio::spawn(write_loop(wr, out_rx));
        tokio::spawn(read_loop(rd, decoder, buf, Arc::clone(&shared)));
        Ok(Client {
            out,
            shared,
            next_id: Arc::new(AtomicU64::new(1)),
            server: Arc::new(server),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// The same connection with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// The server's `Hello` (its software name and protocol).
    pub fn server(&self) -> &Hello {
        &self.server
    }

    /// Sends one request and waits for its response.
    pub async fn call(&self, body: RequestBody) -> Result<ResponseBody, ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let bytes = frame::encode(&Request { id, body }).map_err(ClientError::Frame)?;
        let (tx, rx) = oneshot::channel();
        {
            let mut s = lock(&self.shared);
            if let Some(e) = &s.dead {
                return Err(e.clone());
            }
            s.pending.insert(id, tx);
        }
        let outcome = tokio::time::timeout(self.timeout, async {
            self.out
                .send(bytes)
                .await
                .map_err(|_| ClientError::Closed)?;
            rx.await.unwrap_or(Err(ClientError::Closed))
        })
        .await;
        match outcome {
            Ok(reply) => reply,
            Err(_) => {
                lock(&self.shared).pending.remove(&id);
                Err(ClientError::Timeout)
            }
        }
    }

    /// Subscribes this connection to the FIB. The stream yields a snapshot,
    /// then deltas, until the connection ends.
    pub async fn subscribe_fib(&self) -> Result<FibStream, ClientError> {
        let (tx, rx) = mpsc::channel(FIB_QUEUE);
        {
            let mut s = lock(&self.shared);
            if s.fib.as_ref().is_some_and(|f| !f.is_closed()) {
                return Err(ClientError::AlreadySubscribed);
            }
            s.fib = Some(tx);
        }
        match self.call(RequestBody::SubscribeFib).await {
            Ok(ResponseBody::Subscribed) => Ok(FibStream { rx }),
            other => {
                lock(&self.shared).fib = None;
                Err(expect_err("subscribed", other))
            }
        }
    }

    pub async fn register(&self, reg: Registration) -> Result<LeaseGrant, ClientError> {
        match self.call(RequestBody::Register(reg)).await {
            Ok(ResponseBody::Lease(l)) => Ok(l),
            other => Err(expect_err("lease", other)),
        }
    }

    pub async fn renew(&self, renewal: Renewal) -> Result<LeaseGrant, ClientError> {
        match self.call(RequestBody::Renew(renewal)).await {
            Ok(ResponseBody::Lease(l)) => Ok(l),
            other => Err(expect_err("lease", other)),
        }
    }

    /// Withdraws a route; returns the table generation after the removal.
    pub async fn unregister(
        &self,
        route_id: RouteId,
        caller: Option<Caller>,
    ) -> Result<u64, ClientError> {
        match self
            .call(RequestBody::Unregister { route_id, caller })
            .await
        {
            Ok(ResponseBody::Unregistered { generation, .. }) => Ok(generation),
            other => Err(expect_err("unregistered", other)),
        }
    }

    /// Withdraws every local route of `origin` (administrators only);
    /// returns how many, up to [`MAX_PAGE`](crate::ipc::message::MAX_PAGE)
    /// of their ids, and the table generation after the removal.
    pub async fn flush(&self, origin: &str) -> Result<(u64, Vec<RouteId>, u64), ClientError> {
        match self
            .call(RequestBody::Flush {
                origin: origin.into(),
            })
            .await
        {
            Ok(ResponseBody::Flushed {
                removed,
                route_ids,
                generation,
                ..
            }) => Ok((removed, route_ids, generation)),
            other => Err(expect_err("flushed", other)),
        }
    }

    pub async fn status(&self) -> Result<StatusView, ClientError> {
        match self.call(RequestBody::Status).await {
            Ok(ResponseBody::Status(s)) => Ok(*s),
            other => Err(expect_err("status", other)),
        }
    }

    pub async fn routes(&self, query: RoutesQuery) -> Result<RoutePage, ClientError> {
        match self.call(RequestBody::Routes(query)).await {
            Ok(ResponseBody::Routes(p)) => Ok(p),
            other => Err(expect_err("routes", other)),
        }
    }

    pub async fn agents(&self, query: AgentsQuery) -> Result<AgentPage, ClientError> {
        match self.call(RequestBody::Agents(query)).await {
            Ok(ResponseBody::Agents(p)) => Ok(p),
            other => Err(expect_err("agents", other)),
        }
    }

    pub async fn lookup(
        &self,
        query: LookupQuery,
        explain: bool,
    ) -> Result<LookupView, ClientError> {
        match self.call(RequestBody::Lookup { query, explain }).await {
            Ok(ResponseBody::Lookup(v)) => Ok(v),
            other => Err(expect_err("lookup", other)),
        }
    }

    /// Returns the configuration generation after the reload.
    pub async fn reload(&self) -> Result<u64, ClientError> {
        match self.call(RequestBody::Reload).await {
            Ok(ResponseBody::Reloaded { config_generation }) => Ok(config_generation),
            other => Err(expect_err("reloaded", other)),
        }
    }

    pub async fn stats(&self) -> Result<StatsView, ClientError> {
        match self.call(RequestBody::Stats).await {
            Ok(ResponseBody::Stats(s)) => Ok(*s),
            other => Err(expect_err("stats", other)),
        }
    }

    /// The ARPX sessions (`agentctl peers`).
    pub async fn peers(&self) -> Result<PeersView, ClientError> {
        match self.call(RequestBody::Peers).await {
            Ok(ResponseBody::Peers(p)) => Ok(p),
            other => Err(expect_err("peers", other)),
        }
    }

    /// Discovered routers (`agentctl candidates`).
    pub async fn candidates(&self) -> Result<CandidatesView, ClientError> {
        match self.call(RequestBody::Candidates).await {
            Ok(ResponseBody::Candidates(c)) => Ok(c),
            other => Err(expect_err("candidates", other)),
        }
    }

    /// `agentctl approve` (`approve: true`) or `revoke`: the daemon's
    /// decision, or a transport/permission failure.
    pub async fn admission(
        &self,
        approve: bool,
        router_id: &str,
        version: u32,
    ) -> Result<Result<AdmissionDone, AdmissionRefusal>, ClientError> {
        let router_id = router_id.into();
        let body = if approve {
            RequestBody::Approve { router_id, version }
        } else {
            RequestBody::Revoke { router_id, version }
        };
        match self.call(body).await {
            Ok(ResponseBody::Admission(a)) => Ok(a),
            other => Err(expect_err("admission", other)),
        }
    }

    /// agent-gw's report of its counters (see [`GatewayStats`]).
    pub async fn gateway_stats(&self, stats: GatewayStats) -> Result<(), ClientError> {
        match self.call(RequestBody::GatewayStats(stats)).await {
            Ok(ResponseBody::Noted) => Ok(()),
            other => Err(expect_err("noted", other)),
        }
    }
}

/// One request on a fresh connection, from synchronous code (agentctl,
/// the rpcd plugin): builds a current-thread runtime, connects, calls and
/// closes. Must not be called from inside a tokio runtime.
pub fn call_blocking(
    path: &Path,
    software: &str,
    body: RequestBody,
) -> Result<ResponseBody, ClientError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ClientError::Io(e.kind()))?;
    rt.block_on(async { Client::connect(path, software).await?.call(body).await })
}

fn expect_err(expected: &'static str, got: Reply) -> ClientError {
    match got {
        Ok(body) => ClientError::UnexpectedResponse {
            expected,
            got: body.kind(),
        },
        Err(e) => e,
    }
}

/// FIB events of a subscription, in order.
#[derive(Debug)]
pub struct FibStream {
    rx: mpsc::Receiver<Result<FibEvent, ClientError>>,
}

impl FibStream {
    /// The next event; `Some(Err)` once when the connection dies, then
    /// `None`.
    pub async fn next(&mut self) -> Option<Result<FibEvent, ClientError>> {
        self.rx.recv().await
    }
}

async fn write_loop(mut wr: OwnedWriteHalf, mut frames: mpsc::Receiver<Vec<u8>>) {
    while let Some(bytes) = frames.recv().await {
        if wr.write_all(&bytes).await.is_err() {
            return;
        }
    }
    // Every Client clone is gone: half-close so the server ends the
    // connection and our reader sees EOF.
    let _ = wr.shutdown().await;
}

async fn read_loop(
    mut rd: OwnedReadHalf,
    mut decoder: FrameDecoder,
    mut buf: Vec<u8>,
    shared: Arc<Mutex<Shared>>,
) {
    let reason = loop {
        match decoder.next_message::<ServerMsg>() {
            Err(e) => break ClientError::Frame(e),
            Ok(Some(ServerMsg::Response(r))) if r.id == CONNECTION_ERROR_ID => {
                break r
                    .body
                    .err()
                    .map_or(ClientError::Closed, ClientError::Server);
            }
            Ok(Some(ServerMsg::Response(r))) => {
                // A missing entry means the caller timed out; drop the reply.
                if let Some(tx) = lock(&shared).pending.remove(&r.id) {
                    let _ = tx.send(r.body.map_err(ClientError::Server));
                }
                continue;
            }
            Ok(Some(ServerMsg::Fib(ev))) => {
                let fib = lock(&shared).fib.clone();
                if let Some(fib) = fib {
                    if fib.send(Ok(ev)).await.is_err() {
                        lock(&shared).fib = None;
                    }
                }
                continue;
            }
            Ok(None) => {}
        }
        match rd.read(&mut buf).await {
            Ok(0) => {
                break match decoder.finish() {
                    Ok(()) => ClientError::Closed,
                    Err(e) => ClientError::Frame(e),
                }
            }
            Ok(n) => decoder.push(&buf[..n]),
            Err(e) => break ClientError::Io(e.kind()),
        }
    };
    let (pending, fib) = {
        let mut s = lock(&shared);
        s.dead = Some(reason.clone());
        (std::mem::take(&mut s.pending), s.fib.take())
    };
    for (_, tx) in pending {
        let _ = tx.send(Err(reason.clone()));
    }
    if let Some(fib) = fib {
        let _ = fib.send(Err(reason)).await;
    }
}

/// Reads until one whole message is decoded (the handshake).
async fn read_one<T: serde::de::DeserializeOwned>(
    rd: &mut OwnedReadHalf,
    decoder: &mut FrameDecoder,
    buf: &mut [u8],
) -> Result<T, ClientError> {
    loop {
        if let Some(m) = decoder.next_message::<T>().map_err(ClientError::Frame)? {
            return Ok(m);
        }
        match rd.read(buf).await {
            Ok(0) => return Err(ClientError::Closed),
            Ok(n) => decoder.push(&buf[..n]),
            Err(e) => return Err(ClientError::Io(e.kind())),
        }
    }
}
