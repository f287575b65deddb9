//! Test harness: a real gateway on 127.0.0.1:0, real backend handlers
//! (small hyper servers), a raw HTTP client, and FIB loading through the
//! replica's own snapshot events.
#![allow(dead_code)]

pub mod daemon;

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use agent_gw::config::{AuthMode, GatewayConfig};
use agent_gw::core::Core;
use agentd::fib::FibEvent;
use agentd::policy::Policy;
use agentd::route::{Access, Attributes, Contract, Effect, Lease, Route, RouteId, RouteSource};
use agentd::time::Millis;

pub fn lab_config() -> GatewayConfig {
    GatewayConfig {
        // A fixed name (the default is the host name): tokens name it.
        router_id: "router".into(),
        sdk_listen: "127.0.0.1:0".parse().unwrap(),
        // Many test gateways run at once: none binds the default 9101.
        admin_listen: None,
        auth: AuthMode::None,
        ipc_socket: "/nonexistent/agentd.sock".into(),
        // Test handlers listen on 127.0.0.1 (agentd.allow_loopback_endpoints).
        endpoints: agentd::endpoint::Guard {
            allow_loopback: true,
            ..GatewayConfig::default().endpoints
        },
        ..GatewayConfig::default()
    }
}

/// Starts a gateway (no agentd) and returns its address.
pub async fn start_gateway(cfg: GatewayConfig) -> (SocketAddr, Rc<Core>) {
    let state = Core::new(cfg);
    let listener = agent_gw::serve::http::bind(state.cfg.sdk_listen)
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::task::spawn_local(agent_gw::serve::serve_lan(
        listener,
        agent_gw::serve::Gateway::new(state.clone()),
    ));
    (addr, state)
}

/// A local route to `endpoint` with a live lease.
pub fn route(
    id: &str,
    capability: &str,
    endpoint: &str,
    latency_ms: u64,
    idempotent: bool,
) -> Route {
    Route {
        id: RouteId::new(id).unwrap(),
        capability: capability.into(),
        version: 1,
        origin: format!("agent://lab/{id}").into(),
        endpoint: endpoint.into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms,
            cost_micros: 0,
            load_permille: 0,
            trust: 50,
        },
        access: Access {
            allowed_tenants: vec!["other".into()],
            allowed_sources: vec![],
        }
        .into(),
        contract: idempotent.then_some(Box::new(Contract {
            effect: Effect::Read,
            idempotent: true,
            input_schema: None,
            description: None,
        })),
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(Millis::now().saturating_add_ms(600_000)),
        healthy: true,
        // Test handlers listen on 127.0.0.1 (lab mode).
        allow_loopback: true,
        owner: None,
        proof: Default::default(),
        disputed: false,
    }
}

/// Starts a gateway (no agentd) whose FIB holds `routes` (generation 1).
pub async fn gateway_with(cfg: GatewayConfig, routes: Vec<Route>) -> (SocketAddr, Rc<Core>) {
    let (gw, state) = start_gateway(cfg).await;
    load_fib(&state, 1, routes);
    (gw, state)
}

/// An echo backend `"a"` and a gateway whose FIB holds its one route
/// `r-a` for `demo.echo` (tenant `lab`, open to tenant `other`).
pub async fn echo_gateway(cfg: GatewayConfig) -> (Backend, SocketAddr, Rc<Core>) {
    let b = backend("a", Mode::Echo).await;
    let (gw, state) = gateway_with(
        cfg,
        vec![route("r-a", "demo.echo", &b.endpoint(), 1, false)],
    )
    .await;
    (b, gw, state)
}

/// The handler URL of a raw test listener at `addr`.
pub fn endpoint_of(addr: SocketAddr) -> String {
    format!("http://{addr}/invoke")
}

/// Replaces the gateway's FIB with `routes` (default allow policy) the way
/// agentd's stream does: a complete snapshot.
pub fn load_fib(state: &Core, generation: u64, routes: Vec<Route>) {
    let mut fib = state.fib.borrow_mut();
    let now = Millis::now();
    fib.apply(FibEvent::SnapshotBegin { generation }, now)
        .unwrap();
    fib.apply(FibEvent::SnapshotChunk(routes), now).unwrap();
    fib.apply(
        FibEvent::SnapshotEnd {
            generation,
            policy: Box::new(Policy::default()),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        },
        now,
    )
    .unwrap();
}

/// What a backend saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// How a backend answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `{"echo": <request body>, "backend": name}` with status 200.
    Echo,
    /// Waits for `release` before answering (holds the call in flight).
    Hold,
}

/// A real HTTP/1.1 handler endpoint.
pub struct Backend {
    pub addr: SocketAddr,
    pub seen: Rc<RefCell<Vec<Seen>>>,
    pub connections: Rc<Cell<usize>>,
    pub release: Rc<Notify>,
    /// Notified (one stored permit) whenever a request arrives.
    pub arrived: Rc<Notify>,
}

impl Backend {
    pub fn endpoint(&self) -> String {
        format!("http://{}/invoke", self.addr)
    }

    pub fn count(&self) -> usize {
        self.seen.borrow().len()
    }
}

pub async fn backend(name: &'static str, mode: Mode) -> Backend {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let connections = Rc::new(Cell::new(0));
    let release = Rc::new(Notify::new());
    let arrived = Rc::new(Notify::new());
    let (s, c, r, a) = (
        seen.clone(),
        connections.clone(),
        release.clone(),
        arrived.clone(),
    );
    tokio::task::spawn_local(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            c.set(c.get() + 1);
            let (s, r, a) = (s.clone(), r.clone(), a.clone());
            tokio::task::spawn_local(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (s, r, a) = (s.clone(), r.clone(), a.clone());
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        s.borrow_mut().push(Seen {
                            headers: parts.headers,
                            body: body.clone(),
                        });
                        a.notify_one();
                        if mode == Mode::Hold {
                            r.notified().await;
                        }
                        let echo: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        let out = serde_json::json!({"echo": echo, "backend": name});
                        let mut resp = Response::new(Full::new(Bytes::from(out.to_string())));
                        resp.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Backend {
        addr,
        seen,
        connections,
        release,
        arrived,
    }
}

/// A backend that reads each request completely and then closes the
/// connection without answering: the request was delivered, no response.
pub async fn swallowing_backend() -> (SocketAddr, Rc<Cell<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Rc::new(Cell::new(0));
    let g = got.clone();
    tokio::task::spawn_local(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let g = g.clone();
            tokio::task::spawn_local(async move {
                if read_request(&mut stream).await.is_some() {
                    g.set(g.get() + 1);
                }
                drop(stream);
            });
        }
    });
    (addr, got)
}

/// Reads one HTTP/1.1 request with a Content-Length body from a raw socket.
pub async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(buf);
            }
        }
    }
}

/// A port nothing listens on (bound, then released).
pub async fn closed_port() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
}

/// One response as the client saw it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn error_code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Sends one request on a fresh connection.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let stream = TcpStream::connect(addr).await.unwrap();
    send_on(stream, method, path, headers, body).await
}

/// Sends one request from a chosen loopback source address (the
/// 127.0.0.0/8 trick: any of them reaches a 127.0.0.1 listener).
pub async fn send_from(
    src: std::net::IpAddr,
    gw: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(src, 0)).unwrap();
    let stream = sock.connect(gw).await.unwrap();
    send_on(stream, method, path, headers, body).await
}

/// Sends one request on `stream` (HTTP/1.1).
pub async fn send_on(
    stream: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let host = stream.peer_addr().unwrap().to_string();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::task::spawn_local(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", host);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    send(addr, "POST", path, headers, body.as_bytes()).await
}

/// `POST /agent/v1/invoke` of `capability` for tenant `lab`.
pub async fn invoke(
    gw: SocketAddr,
    capability: &str,
    headers: &[(&str, &str)],
    payload: &str,
) -> Reply {
    post(
        gw,
        "/agent/v1/invoke",
        headers,
        &envelope(capability, "lab", payload),
    )
    .await
}

/// The task id and access token of a 202 answer (asserting its shape).
pub fn task_handle(r: &Reply) -> (String, String) {
    assert_eq!(r.status, 202, "{:?}", r.body);
    let id = r.headers["x-nexus-task-id"].to_str().unwrap().to_string();
    let token = r.headers["x-nexus-task-token"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        r.headers["location"].to_str().unwrap(),
        format!("/agent/v1/tasks/{id}")
    );
    (id, token)
}

/// `method /agent/v1/tasks/{id}{suffix}` with the task token.
pub async fn task_request(
    gw: SocketAddr,
    method: &str,
    id: &str,
    suffix: &str,
    token: &str,
) -> Reply {
    send(
        gw,
        method,
        &format!("/agent/v1/tasks/{id}{suffix}"),
        &[("x-nexus-task-token", token)],
        b"",
    )
    .await
}

/// Polls the task's status (bounded: 1000 polls, 5 ms apart) until it is
/// neither pending nor running, and returns that status document.
pub async fn settle(
    gw: SocketAddr,
    id: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> serde_json::Value {
    let path = format!("/agent/v1/tasks/{id}");
    let mut h = headers.to_vec();
    h.push(("x-nexus-task-token", token));
    for _ in 0..1000 {
        let doc = send(gw, "GET", &path, &h, b"").await.json();
        if doc["status"] != "running" && doc["status"] != "pending" {
            return doc;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("task {id} did not finish");
}

/// A nexilume-shaped envelope.
pub fn envelope(intent: &str, tenant: &str, payload: &str) -> String {
    format!(
        r#"{{"version":"1.0","intent":"{intent}","intent_version":1,"task_id":"t-1","source_agent":"agent://{tenant}/caller","tenant":"{tenant}","hop_limit":8,"constraints":{{}},"payload":{payload}}}"#
    )
}

/// Writes raw bytes and reads until the peer closes or `max` bytes.
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    // The peer may answer and close before we finish writing: that is
    // what an early 413 does. Ignore write errors, read what came back.
    let _ = s.write_all(request).await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs a test body on a current-thread runtime inside a `LocalSet`, as
/// the daemon does.
pub fn run<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

/// A backend that answers each request with a response head promising
/// `content-length: 100`, sends one byte of body and then stalls.
pub async fn stalling_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::task::spawn_local(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::task::spawn_local(async move {
                if read_request(&mut stream).await.is_some() {
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
                        .await;
                    // Hold the connection open without finishing the body,
                    // until the gateway lets go of it.
                    let mut sink = [0u8; 64];
                    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                }
            });
        }
    });
    addr
}

/// Writes `request` and reads until the peer closes, keeping our write
/// side open (a client that stops sending but is still there).
pub async fn raw_exchange_open(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Serves `state`'s peer inbound path to `peer` on a plain TCP listener.
pub async fn peer_plane(
    state: Rc<agent_gw::core::Core>,
    peer: agent_gw::front::neighbour::Peer,
) -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let peer = Rc::new(peer);
    tokio::task::spawn_local(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            let (state, peer) = (state.clone(), peer.clone());
            let svc = hyper::service::service_fn(move |req| {
                let (state, peer) = (state.clone(), peer.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        agent_gw::front::neighbour::serve(&state, &peer, req).await,
                    )
                }
            });
            tokio::task::spawn_local(
                hyper::server::conn::http2::Builder::new(agent_gw::peer::LocalExec)
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc),
            );
        }
    });
    addr
}
