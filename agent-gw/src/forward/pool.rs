//! Bounded keep-alive pool of HTTP/1.1 connections to handler endpoints.
//!
//! One idle list per `host:port`, at most `max_idle_per_host` senders each
//! and at most `max_hosts` lists; anything beyond is closed instead of
//! kept. A connection goes back to the pool only when hyper says it is
//! ready for the next request, i.e. after its response body was consumed.
//! Idle connections older than `max_idle` are not reused: handlers close
//! idle keep-alive connections on their own schedule (nexilume's after
//! 15 s), and a request written just as the handler closes would count as
//! possibly delivered. Single-threaded runtime, so plain `RefCell`s.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
// foldhash (randomly seeded), not SipHash: the keys are handler addresses
// from our own route table, at most `max_hosts` and `MAX_OPENING_HOSTS` of
// them, so no caller can flood these maps, and every call hashes its
// handler's address into them up to three times.
use hashbrown::HashMap;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::forward::opening;
use crate::forward::quickack::QuickAck;
use crate::forward::target::Target;

pub type Sender = SendRequest<Full<Bytes>>;

/// Most bytes hyper reads from a handler at once, and so the largest body
/// piece it hands on. hyper's limit on a response head is this buffer, so
/// it bounds a head too (the gateway's own bound, 16 KiB, is checked on
/// the parsed head). At 16 KiB, a 64 KiB answer moved in five pieces,
/// each relayed and written on its own; at 64 KiB the local path at
/// concurrency 16 did 13–36 % more calls per second with about 20 % less
/// gateway CPU per call (64 KiB bodies, bench_peer `local` row, three
/// interleaved pairs; no change measurable at 1 and 8 KiB). At 64 KiB a
/// 64 KiB answer and its head still took two reads, the first ACKed at
/// once as a partial answer (`quickack`); with room for the largest head
/// besides they are one read (docs/bench.md has the figures). The buffer
/// grows to this only while reads fill it, but a kept connection holds
/// what it grew to until it closes, so it is no larger than that.
pub const READ_BUFFER: usize = 64 * 1024 + crate::http_head::MAX_HEAD_BYTES;

/// Handlers with connections being opened, tracked at most (others open
/// unpaced until one finishes).
const MAX_OPENING_HOSTS: usize = 64;

/// The right to open a connection to one handler, held until the first
/// answer on it arrives (`opening::PER_HANDLER`).
pub type Opening = tokio::sync::OwnedSemaphorePermit;

/// One handler's openings: the rights to open, and how long the last
/// connect to it took.
#[derive(Debug)]
struct Gate {
    rights: Arc<Semaphore>,
    last_connect: Option<Duration>,
}

/// A kept connection and the instant it became idle.
type Idle = (Sender, Instant);

#[derive(Debug)]
pub struct PoolConfig {
    pub max_idle_per_host: usize,
    pub max_hosts: usize,
    /// Longest time a connection may sit idle and still be reused.
    pub max_idle: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            max_idle_per_host: 32,
            max_hosts: 32,
            max_idle: Duration::from_secs(10),
        }
    }
}

#[derive(Debug)]
pub struct Pool {
    cfg: PoolConfig,
    /// Oldest first; each with the instant it became idle.
    idle: RefCell<HashMap<Box<str>, Vec<Idle>>>,
    /// Per handler address, the connections being opened (see
    /// [`opening`](crate::forward::opening)).
    opening: RefCell<HashMap<Box<str>, Gate>>,
}

/// Why no connection could be made. Always "never delivered".
#[derive(Debug)]
pub enum ConnectError {
    Tcp(io::Error),
    Handshake(hyper::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Tcp(e) => write!(f, "connect failed: {e}"),
            ConnectError::Handshake(e) => write!(f, "HTTP handshake failed: {e}"),
        }
    }
}

impl Pool {
    pub fn new(cfg: PoolConfig) -> Rc<Pool> {
        Rc::new(Pool {
            cfg,
            idle: RefCell::new(HashMap::new()),
            opening: RefCell::new(HashMap::new()),
        })
    }

    /// Waits for the right to open a connection to `key` (a handler's
    /// `host:port`); `None` when too many handlers are being connected to
    /// at once to track one more, which then goes unpaced.
    pub async fn opening(&self, key: &str) -> Option<Opening> {
        let gate = {
            let mut gates = self.opening.borrow_mut();
            if !gates.contains_key(key) && gates.len() >= MAX_OPENING_HOSTS {
                // Forget the handlers nobody is opening a connection to.
                gates.retain(|_, g| Arc::strong_count(&g.rights) > 1);
                if gates.len() >= MAX_OPENING_HOSTS {
                    return None;
                }
            }
            gates
                .entry(key.into())
                .or_insert_with(|| Gate {
                    rights: Arc::new(Semaphore::new(opening::PER_HANDLER)),
                    last_connect: None,
                })
                .rights
                .clone()
        };
        gate.acquire_owned().await.ok()
    }

    /// How long the last connect to `key` took, while its gate is kept.
    pub fn last_connect(&self, key: &str) -> Option<Duration> {
        self.opening.borrow().get(key)?.last_connect
    }

    /// Notes how long a connect to `key` took (kept with its gate, if it
    /// has one: a handler being connected to has).
    pub fn connected(&self, key: &str, took: Duration) {
        if let Some(g) = self.opening.borrow_mut().get_mut(key) {
            g.last_connect = Some(took);
        }
    }

    /// An idle connection to `target`, if one is still open.
    pub fn take(&self, target: &Target) -> Option<Sender> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(target.connect_addr())?;
        let now = Instant::now();
        while let Some((s, since)) = list.pop() {
            if now.saturating_duration_since(since) > self.cfg.max_idle {
                // The newest is too old, so is everything behind it.
                list.clear();
                return None;
            }
            if s.is_ready() {
                return Some(s);
            }
        }
        None
    }

    /// Keeps `sender` for reuse if the bounds allow.
    pub fn put(&self, key: &str, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        if !idle.contains_key(key) {
            if idle.len() >= self.cfg.max_hosts {
                idle.retain(|_, l| {
                    l.retain(|(s, _)| !s.is_closed());
                    !l.is_empty()
                });
                if idle.len() >= self.cfg.max_hosts {
                    return;
                }
            }
            idle.insert(key.into(), Vec::new());
        }
        if let Some(list) = idle.get_mut(key) {
            list.retain(|(s, _)| !s.is_closed());
            if list.len() < self.cfg.max_idle_per_host {
                list.push((sender, Instant::now()));
            }
        }
    }

    /// Returns `sender` to the pool once its current exchange has finished
    /// (or drops it when the connection closes).
    pub fn put_when_ready(self: &Rc<Self>, key: Box<str>, mut sender: Sender) {
        let pool = self.clone();
        tokio::task::spawn_local(async move {
            if sender.ready().await.is_ok() {
                pool.put(&key, sender);
            }
        });
    }

    /// Opens a fresh connection to `addr`, the address the caller already
    /// resolved and checked for `target` (see `target::resolve_checked`);
    /// the caller bounds it with the deadline.
    pub async fn connect(&self, addr: SocketAddr) -> Result<Sender, ConnectError> {
        let stream = TcpStream::connect(addr).await.map_err(ConnectError::Tcp)?;
        let _ = stream.set_nodelay(true);
        // The response head's own bound is checked on what hyper parsed
        // (`forward::head_within_bound`); hyper's limit is its read buffer.
        // Reads ACK at once: a handler that writes its head and body
        // apart must not wait for our delayed ACK (see `quickack`).
        let (sender, conn) = http1::Builder::new()
            .max_buf_size(READ_BUFFER)
            .handshake(TokioIo::new(QuickAck::new(stream)))
            .await
            .map_err(ConnectError::Handshake)?;
        tokio::task::spawn_local(async move {
            // Errors here surface on the request future as well.
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Closes every idle connection past `max_idle` (never handed out
    /// again) or already closed, and forgets emptied hosts, so a load's
    /// connections and their read buffers do not outlive it. Returns how
    /// many it let go.
    pub fn sweep(&self) -> usize {
        let now = Instant::now();
        let mut idle = self.idle.borrow_mut();
        let before: usize = idle.values().map(Vec::len).sum();
        idle.retain(|_, list| {
            list.retain(|(s, since)| {
                !s.is_closed() && now.saturating_duration_since(*since) <= self.cfg.max_idle
            });
            !list.is_empty()
        });
        if idle.is_empty() {
            idle.shrink_to_fit();
        }
        before - idle.values().map(Vec::len).sum::<usize>()
    }

    /// Idle connections currently kept for `addr` (tests, stats).
    pub fn idle_count(&self, addr: &str) -> usize {
        self.idle
            .borrow()
            .get(addr)
            .map_or(0, |l| l.iter().filter(|(s, _)| !s.is_closed()).count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    #[tokio::test(flavor = "current_thread")]
    async fn at_most_a_few_connections_to_one_handler_are_opened_at_once() {
        let pool = Pool::new(PoolConfig::default());
        let mut held = Vec::new();
        for _ in 0..opening::PER_HANDLER {
            held.push(pool.opening("192.0.2.1:80").await.expect("tracked"));
        }
        let mut next = Box::pin(pool.opening("192.0.2.1:80"));
        assert!(
            futures_poll_once(next.as_mut()).is_none(),
            "one more waits while {} are being opened",
            opening::PER_HANDLER
        );
        assert!(
            pool.opening("192.0.2.2:80").await.is_some(),
            "another handler is not held up"
        );
        held.pop();
        assert!(next.await.is_some(), "the waiter goes once one is answered");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_handler_being_connected_to_keeps_its_last_connect_time() {
        let pool = Pool::new(PoolConfig::default());
        let took = Duration::from_millis(3);
        pool.connected("192.0.2.1:80", took);
        assert_eq!(
            pool.last_connect("192.0.2.1:80"),
            None,
            "no gate, nothing kept"
        );
        let right = pool.opening("192.0.2.1:80").await;
        pool.connected("192.0.2.1:80", took);
        drop(right);
        assert_eq!(pool.last_connect("192.0.2.1:80"), Some(took));
        assert_eq!(pool.last_connect("192.0.2.2:80"), None);
    }

    /// Polls `f` once: its output if it is ready.
    fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
        let mut f = f;
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(&mut f).poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn handlers_beyond_the_tracked_ones_open_unpaced_and_idle_gates_are_forgotten() {
        let pool = Pool::new(PoolConfig::default());
        let held: Vec<_> = (0..MAX_OPENING_HOSTS)
            .map(|i| format!("192.0.2.{}:{}", i % 250, 1000 + i))
            .collect();
        let mut permits = Vec::new();
        for k in &held {
            permits.push(pool.opening(k).await.expect("tracked"));
        }
        assert!(
            pool.opening("198.51.100.1:80").await.is_none(),
            "untracked: unpaced"
        );
        permits.pop();
        assert!(
            pool.opening("198.51.100.1:80").await.is_some(),
            "a gate nobody holds is forgotten for a new handler"
        );
        assert!(pool.opening.borrow().len() <= MAX_OPENING_HOSTS);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_sweep_closes_connections_idle_past_their_reuse() {
        tokio::task::LocalSet::new()
            .run_until(async {
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let pool = Pool::new(PoolConfig {
                    max_idle: Duration::from_secs(10),
                    ..PoolConfig::default()
                });
                let key = addr.to_string();
                let (sender, accepted) = tokio::join!(pool.connect(addr), listener.accept());
                let (mut handler_side, _) = accepted.unwrap();
                pool.put(&key, sender.unwrap());
                assert_eq!(pool.sweep(), 0, "still reusable");
                assert_eq!(pool.idle_count(&key), 1);
                tokio::time::advance(Duration::from_secs(11)).await;
                assert_eq!(pool.sweep(), 1, "idle past max_idle");
                assert_eq!(pool.idle_count(&key), 0);
                assert!(pool.idle.borrow().is_empty(), "the host is forgotten");
                // The connection itself is closed, not just unlisted: the
                // handler reads the end of the stream.
                let mut byte = [0u8; 1];
                assert_eq!(handler_side.read(&mut byte).await.unwrap(), 0);
            })
            .await;
    }
}
