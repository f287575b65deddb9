//! The served handler endpoint's HTTP/1.1 server: std networking, one
//! thread per connection up to a bound.
//!
//! Why threads and not an async runtime: every request ends in a call into
//! Python, which serialises on the GIL anyway, and handlers may block for
//! as long as they like. A thread per connection keeps a slow handler from
//! stalling others' socket I/O (which runs without the GIL) and keeps the
//! extension small. Keep-alive is supported because the router forwards
//! over a keep-alive pool (DESIGN §7); connections beyond the bound get an
//! immediate 503 instead of queueing invisibly.
//!
//! ```text
//!  accept thread ──spawn──▶ connection thread ──Dispatch::dispatch──▶ (Python)
//!        ▲                        │ Reply::Full  → Content-Length body, keep-alive
//!   stop flag + self-connect      │ Reply::Stream→ SSE chunks until the source ends
//!                                 ▼ close on error, idle timeout or shutdown
//! ```

use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::http::body::{read_to_vec, BodyError, BodyReader};
use crate::http::head::{parse_request_head, read_head, HeadError, Headers, ReadHeadError};

#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// Largest request body accepted (413 beyond).
    pub max_body: usize,
    /// Concurrent connections served (503 beyond).
    pub max_connections: usize,
    /// An idle keep-alive connection is closed after this long.
    pub idle_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body: 1024 * 1024,
            max_connections: 64,
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// Fired when the caller hangs up while its request is being handled.
///
/// The router cancels an invocation by closing the connection to the
/// handler (DESIGN §8), so this is how cancellation reaches a handler of a
/// synchronous call. Hooks run once, on the thread that notices.
#[derive(Default)]
pub struct Cancel {
    fired: AtomicBool,
    hooks: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cancel({})", self.is_fired())
    }
}

impl Cancel {
    pub fn is_fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Runs `hook` on cancellation (at once if it already happened).
    pub fn on_cancel(&self, hook: Box<dyn FnOnce() + Send>) {
        let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_fired() {
            drop(hooks);
            hook();
        } else {
            hooks.push(hook);
        }
    }

    pub fn fire(&self) {
        let hooks = {
            let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
            if self.fired.swap(true, Ordering::SeqCst) {
                return;
            }
            std::mem::take(&mut *hooks)
        };
        for h in hooks {
            h();
        }
    }
}

/// One complete request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Headers,
    pub body: Vec<u8>,
    pub peer: SocketAddr,
    /// Fires if the caller disconnects before the reply is written.
    pub cancel: Arc<Cancel>,
}

impl Request {
    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target
            .split_once('?')
            .map_or(self.target.as_str(), |(p, _)| p)
    }

    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
}

/// Produces already-framed chunks of a streaming response.
pub trait ChunkSource: Send {
    /// The next bytes to send; `None` ends the response.
    fn next_chunk(&mut self) -> Option<Vec<u8>>;
    /// The client went away: stop producing (cancels the handler).
    fn cancel(&mut self);
}

pub enum Reply {
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A 200 response streamed until the source ends; the connection
    /// closes afterwards.
    Stream {
        headers: Vec<(String, String)>,
        source: Box<dyn ChunkSource>,
    },
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Full { status, body, .. } => {
                write!(f, "Reply::Full({status}, {} bytes)", body.len())
            }
            Reply::Stream { .. } => write!(f, "Reply::Stream"),
        }
    }
}

impl Reply {
    /// A JSON error in the suite's `{"error":{"code","message"}}` shape.
    pub fn error(status: u16, code: &str, message: &str) -> Reply {
        let body = serde_json::json!({"error": {"code": code, "message": message}});
        Reply::json(status, serde_json::to_vec(&body).unwrap_or_default())
    }

    pub fn json(status: u16, body: Vec<u8>) -> Reply {
        Reply::Full {
            status,
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("Cache-Control".into(), "no-store".into()),
            ],
            body,
        }
    }
}

pub trait Dispatch: Send + Sync + 'static {
    fn dispatch(&self, req: Request) -> Reply;
}

#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    active: AtomicUsize,
    next_id: AtomicU64,
    conns: Mutex<HashMap<u64, TcpStream>>,
}

/// A running server; `shutdown` (or drop) stops it.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` (e.g. `0.0.0.0:0`) and starts accepting.
    pub fn start(
        addr: SocketAddr,
        cfg: ServerConfig,
        dispatch: Arc<dyn Dispatch>,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let accept = thread::Builder::new()
            .name("agentd-sdk-accept".into())
            .spawn(move || accept_loop(listener, cfg, dispatch, s))?;
        Ok(Server {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections being served right now.
    pub fn active(&self) -> usize {
        self.shared.active.load(Ordering::SeqCst)
    }

    /// Stops accepting, closes open connections (which cancels running
    /// streams) and waits up to `grace` for connection threads to finish.
    pub fn shutdown(&mut self, grace: Duration) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept() with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = accept.join();
        for (_, c) in self
            .shared
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
        {
            let _ = c.shutdown(Shutdown::Both);
        }
        let until = Instant::now() + grace;
        while self.active() > 0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown(Duration::from_millis(500));
    }
}

fn accept_loop(
    listener: TcpListener,
    cfg: ServerConfig,
    dispatch: Arc<dyn Dispatch>,
    shared: Arc<Shared>,
) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = conn else { continue };
        if shared.active.load(Ordering::SeqCst) >= cfg.max_connections {
            let _ = refuse(&stream);
            continue;
        }
        let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
        if let Ok(clone) = stream.try_clone() {
            shared
                .conns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, clone);
        }
        shared.active.fetch_add(1, Ordering::SeqCst);
        let (d, s) = (dispatch.clone(), shared.clone());
        let spawned = thread::Builder::new()
            .name("agentd-sdk-conn".into())
            .spawn(move || {
                let _ = serve_connection(stream, cfg, d.as_ref(), &s);
                s.conns
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                s.active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared
                .conns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn refuse(stream: &TcpStream) -> io::Result<()> {
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    write_full(
        stream,
        &Reply::error(503, "overloaded", "too many concurrent connections"),
        true,
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn head_bytes(status: u16, headers: &[(String, String)], extra: &str) -> Vec<u8> {
    let mut h = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (n, v) in headers {
        if !n.contains([':', '\r', '\n']) && !v.contains(['\r', '\n']) {
            h.push_str(&format!("{n}: {v}\r\n"));
        }
    }
    h.push_str(extra);
    h.push_str("\r\n");
    h.into_bytes()
}

fn write_full(mut stream: &TcpStream, reply: &Reply, close: bool) -> io::Result<()> {
    let Reply::Full {
        status,
        headers,
        body,
    } = reply
    else {
        return Ok(());
    };
    let conn = if close { "close" } else { "keep-alive" };
    let mut out = head_bytes(
        *status,
        headers,
        &format!("Content-Length: {}\r\nConnection: {conn}\r\n", body.len()),
    );
    out.extend_from_slice(body);
    stream.write_all(&out)?;
    stream.flush()
}

fn serve_connection(
    stream: TcpStream,
    cfg: ServerConfig,
    dispatch: &dyn Dispatch,
    shared: &Shared,
) -> io::Result<()> {
    let peer = stream.peer_addr()?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    loop {
        stream.set_read_timeout(Some(cfg.idle_timeout))?;
        let raw = match read_head(&mut reader) {
            Ok(raw) => raw,
            Err(ReadHeadError::Head(HeadError::Truncated(0))) | Err(ReadHeadError::Io(_)) => {
                return Ok(())
            }
            Err(ReadHeadError::Head(e)) => {
                let status = if e == HeadError::TooLarge { 431 } else { 400 };
                return write_full(
                    &stream,
                    &Reply::error(status, "invalid_request", &e.to_string()),
                    true,
                );
            }
        };
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let head = match parse_request_head(&raw) {
            Ok(h) => h,
            Err(e) => {
                return write_full(
                    &stream,
                    &Reply::error(400, "invalid_request", &e.to_string()),
                    true,
                )
            }
        };
        if let crate::http::head::Framing::Length(n) = head.framing {
            if n > cfg.max_body as u64 {
                let msg = format!("request body of {n} bytes exceeds {} bytes", cfg.max_body);
                return write_full(&stream, &Reply::error(413, "payload_too_large", &msg), true);
            }
        }
        if head.headers.has_token("expect", "100-continue") {
            (&stream).write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let mut body_reader = BodyReader::new(&mut reader, head.framing);
        let body = match read_to_vec(&mut body_reader, cfg.max_body) {
            Ok(b) => b,
            Err(BodyError::TooLarge(n)) => {
                let msg = format!("request body exceeds {n} bytes");
                return write_full(&stream, &Reply::error(413, "payload_too_large", &msg), true);
            }
            Err(BodyError::Io(_)) => return Ok(()),
        };
        let close = head.close;
        let cancel = Arc::new(Cancel::default());
        let req = Request {
            method: head.method,
            target: head.target,
            headers: head.headers,
            body,
            peer,
            cancel: cancel.clone(),
        };
        let done = Arc::new(AtomicBool::new(false));
        watch_hangup(&stream, cancel, done.clone());
        let reply = dispatch.dispatch(req);
        done.store(true, Ordering::SeqCst);
        match reply {
            full @ Reply::Full { .. } => {
                write_full(&stream, &full, close)?;
                if close {
                    return Ok(());
                }
            }
            Reply::Stream {
                headers,
                mut source,
            } => {
                let extra = "Connection: close\r\nX-Accel-Buffering: no\r\n";
                let mut out = head_bytes(200, &headers, extra);
                let mut writer = &stream;
                let mut ok = writer.write_all(&out).is_ok();
                while ok {
                    match source.next_chunk() {
                        Some(chunk) => {
                            out = chunk;
                            ok = writer.write_all(&out).and_then(|_| writer.flush()).is_ok();
                        }
                        None => break,
                    }
                }
                if !ok {
                    source.cancel();
                }
                let _ = stream.shutdown(Shutdown::Write);
                return Ok(());
            }
        }
    }
}

/// Watches the connection while a handler runs and fires `cancel` when
/// the peer hangs up. Uses poll(2) rather than a read timeout so the
/// connection's own socket options stay untouched; exits within 50 ms of
/// `done`, or when request bytes of a pipelined next request arrive.
fn watch_hangup(stream: &TcpStream, cancel: Arc<Cancel>, done: Arc<AtomicBool>) {
    use std::os::fd::AsRawFd;
    let Ok(conn) = stream.try_clone() else { return };
    let spawned = thread::Builder::new()
        .name("agentd-sdk-hangup".into())
        .spawn(move || {
            let fd = conn.as_raw_fd();
            while !done.load(Ordering::SeqCst) {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN | libc::POLLRDHUP,
                    revents: 0,
                };
                // SAFETY: `pfd` is one valid pollfd for a descriptor `conn`
                // keeps open for the duration of the call.
                let n = unsafe { libc::poll(&mut pfd, 1, 50) };
                if n < 0 {
                    return;
                }
                if pfd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
                    if !done.load(Ordering::SeqCst) {
                        cancel.fire();
                    }
                    return;
                }
                if pfd.revents & libc::POLLIN != 0 {
                    let mut b = [0u8; 1];
                    match conn.peek(&mut b) {
                        // EOF without RDHUP (some stacks): the peer closed.
                        Ok(0) => {
                            if !done.load(Ordering::SeqCst) {
                                cancel.fire();
                            }
                            return;
                        }
                        // Pipelined bytes: the peer is alive; stop watching.
                        _ => return,
                    }
                }
            }
        });
    drop(spawned);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::client::{self, Request as ClientRequest};
    use crate::router_url::HttpUrl;
    use std::io::Read;

    struct Echo;
    impl Dispatch for Echo {
        fn dispatch(&self, req: Request) -> Reply {
            if req.path() == "/stream" {
                let chunks = vec![b"a".to_vec(), b"b".to_vec()];
                return Reply::Stream {
                    headers: vec![],
                    source: Box::new(Chunks(chunks)),
                };
            }
            let mut body = format!("{} {} ", req.method, req.target).into_bytes();
            body.extend(req.body);
            Reply::Full {
                status: 200,
                headers: vec![],
                body,
            }
        }
    }

    struct Chunks(Vec<Vec<u8>>);
    impl ChunkSource for Chunks {
        fn next_chunk(&mut self) -> Option<Vec<u8>> {
            if self.0.is_empty() {
                None
            } else {
                Some(self.0.remove(0))
            }
        }
        fn cancel(&mut self) {}
    }

    fn start(cfg: ServerConfig) -> Server {
        Server::start("127.0.0.1:0".parse().unwrap(), cfg, Arc::new(Echo)).unwrap()
    }

    fn post(server: &Server, target: &str, body: &[u8]) -> client::Response {
        let url = HttpUrl {
            host: "127.0.0.1".into(),
            port: server.local_addr().port(),
            path: String::new(),
        };
        let req = ClientRequest {
            method: "POST",
            url: &url,
            target,
            headers: &[],
            body,
            timeout: Duration::from_secs(5),
            read_timeout: Some(Duration::from_secs(5)),
        };
        client::send(&req, 1 << 20).unwrap()
    }

    #[test]
    fn serves_requests_and_streams() {
        let mut s = start(ServerConfig::default());
        let r = post(&s, "/x?q=1", b"hello");
        assert_eq!(
            (r.status, r.body.as_slice()),
            (200, &b"POST /x?q=1 hello"[..])
        );
        let r = post(&s, "/stream", b"");
        assert_eq!(r.body, b"ab");
        s.shutdown(Duration::from_secs(1));
    }

    #[test]
    fn keep_alive_serves_several_requests_on_one_connection() {
        let s = start(ServerConfig::default());
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nxPOST /b HTTP/1.1\r\nContent-Length: 1\r\nConnection: close\r\n\r\ny").unwrap();
        let mut all = String::new();
        c.read_to_string(&mut all).unwrap();
        assert_eq!(all.matches("HTTP/1.1 200 OK").count(), 2, "{all}");
        assert!(all.contains("POST /a x") && all.contains("POST /b y"));
    }

    #[test]
    fn oversized_bodies_get_413_without_reading_them() {
        let s = start(ServerConfig {
            max_body: 8,
            ..ServerConfig::default()
        });
        let r = post(&s, "/x", b"0123456789");
        assert_eq!(r.status, 413);
        assert!(String::from_utf8_lossy(&r.body).contains("payload_too_large"));
        // Chunked bodies are bounded while reading.
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n123456789\r\n0\r\n\r\n",
        )
        .unwrap();
        let mut all = String::new();
        c.read_to_string(&mut all).unwrap();
        assert!(all.starts_with("HTTP/1.1 413"), "{all}");
    }

    #[test]
    fn malformed_requests_get_400_and_close() {
        let s = start(ServerConfig::default());
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
            .unwrap();
        let mut all = String::new();
        c.read_to_string(&mut all).unwrap();
        assert!(
            all.starts_with("HTTP/1.1 400") && all.contains("invalid_request"),
            "{all}"
        );
    }

    struct Waits(Arc<AtomicBool>);
    impl Dispatch for Waits {
        fn dispatch(&self, req: Request) -> Reply {
            let seen = self.0.clone();
            req.cancel
                .on_cancel(Box::new(move || seen.store(true, Ordering::SeqCst)));
            let until = Instant::now() + Duration::from_secs(10);
            while !req.cancel.is_fired() && Instant::now() < until {
                thread::sleep(Duration::from_millis(5));
            }
            Reply::json(200, b"{}".to_vec())
        }
    }

    #[test]
    fn a_caller_hanging_up_fires_the_request_cancel() {
        let seen = Arc::new(AtomicBool::new(false));
        let s = Server::start(
            "127.0.0.1:0".parse().unwrap(),
            ServerConfig::default(),
            Arc::new(Waits(seen.clone())),
        )
        .unwrap();
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        c.write_all(b"POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while s.active() == 0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
        drop(c);
        let until = Instant::now() + Duration::from_secs(10);
        while !seen.load(Ordering::SeqCst) && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
        assert!(
            seen.load(Ordering::SeqCst),
            "hang-up did not fire the cancel hook"
        );
    }

    #[test]
    fn cancel_hooks_run_once_and_late_hooks_run_at_once() {
        let c = Cancel::default();
        let n = Arc::new(AtomicUsize::new(0));
        let n1 = n.clone();
        c.on_cancel(Box::new(move || {
            n1.fetch_add(1, Ordering::SeqCst);
        }));
        c.fire();
        c.fire();
        let n2 = n.clone();
        c.on_cancel(Box::new(move || {
            n2.fetch_add(10, Ordering::SeqCst);
        }));
        assert_eq!(n.load(Ordering::SeqCst), 11);
    }

    #[test]
    fn connections_beyond_the_bound_get_503() {
        let s = start(ServerConfig {
            max_connections: 1,
            ..ServerConfig::default()
        });
        // Hold one connection open mid-request so it stays active.
        let mut held = TcpStream::connect(s.local_addr()).unwrap();
        held.write_all(b"POST /x HTTP/1.1\r\n").unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while s.active() == 0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(5));
        }
        let mut c = TcpStream::connect(s.local_addr()).unwrap();
        let mut all = String::new();
        c.read_to_string(&mut all).unwrap();
        assert!(
            all.starts_with("HTTP/1.1 503") && all.contains("overloaded"),
            "{all}"
        );
    }
}
