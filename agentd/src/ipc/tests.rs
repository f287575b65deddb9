//! Client and server over a real Unix socket, with a small stand-in for
//! the daemon's state loop (a map of routes and a FIB exporter).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

use crate::fib::export::FibExporter;
use crate::fib::{FibChange, FibEvent};
use crate::ipc::client::{Client, ClientError};
use crate::ipc::frame::{self, FrameDecoder, FrameError};
use crate::ipc::message::*;
use crate::ipc::server::{Disconnect, FibSink, IpcServer, ServerConfig, ServerEvent};
use crate::policy::Policy;
use crate::route::{Access, Attributes, Contract, Effect, Lease, Route, RouteId, RouteSource};
use crate::table::RouteTable;
use crate::time::Millis;

/// A directory of its own per test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "agentd-ipc-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn sock(&self) -> PathBuf {
        self.0.join("agentd.sock")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn registration(name: &str) -> Registration {
    Registration {
        route_id: None,
        capability: "demo.echo".into(),
        version: 1,
        origin: format!("agent://lab/{name}").into(),
        endpoint: "http://192.0.2.10:8080/invoke".into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms: 5,
            cost_micros: 0,
            load_permille: 0,
            trust: 90,
        },
        access: Access::default(),
        contract: None,
        lease_seconds: Some(30),
        caller: None,
        owner: None,
        public_ipv6: false,
    }
}

fn route_of(id: RouteId, reg: &Registration, expires: Millis) -> Route {
    Route {
        id,
        capability: reg.capability.clone().into(),
        version: reg.version,
        origin: reg.origin.clone().into(),
        endpoint: reg.endpoint.clone().into(),
        tenant: reg.tenant.clone().into(),
        region: reg.region.clone().into(),
        attrs: reg.attrs,
        access: reg.access.clone().into(),
        contract: reg.contract.clone().map(Box::new),
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(expires),
        healthy: true,
        allow_loopback: false,
        owner: None,
        proof: Default::default(),
        disputed: false,
    }
}

/// Stand-in for the daemon's single state loop. A `Lookup` for capability
/// `hold` is answered only after the next request (to reorder replies);
/// one for `never` is never answered; one for `drop` drops its replier.
async fn fake_daemon(
    mut events: mpsc::Receiver<ServerEvent>,
    now: Millis,
    disconnects: mpsc::UnboundedSender<Disconnect>,
) {
    let mut routes = RouteTable::new(10_000);
    let policy = Policy::default();
    let mut n = 0u64;
    let mut fib: FibExporter<FibSink> = FibExporter::new();
    let mut held = None;
    let mut never = Vec::new();
    while let Some(ev) = events.recv().await {
        let req = match ev {
            ServerEvent::Request(r) => *r,
            ServerEvent::Disconnected { reason, .. } => {
                let _ = disconnects.send(reason);
                continue;
            }
        };
        let result = match req.body {
            RequestBody::Register(reg) => match reg.validate() {
                Err(e) => Err(e),
                Ok(()) => {
                    n += 1;
                    let id = reg
                        .route_id
                        .clone()
                        .unwrap_or_else(|| RouteId::new(&format!("r{n}")).unwrap());
                    let expires = now.saturating_add_ms(30_000);
                    let route = route_of(id.clone(), &reg, expires);
                    routes.upsert(route.clone()).unwrap();
                    fib.publish(
                        routes.generation(),
                        vec![FibChange::Upsert(Box::new(route))],
                    );
                    Ok(ResponseBody::Lease(LeaseGrant {
                        route_id: id,
                        generation: routes.generation(),
                        lease_seconds: 30,
                        expires_at: expires,
                        public_ipv6: None,
                    }))
                }
            },
            RequestBody::Unregister { route_id, .. } => match routes.remove(&route_id) {
                None => Err(IpcError::NotFound { route_id }),
                Some(_) => {
                    fib.publish(
                        routes.generation(),
                        vec![FibChange::Remove(route_id.clone())],
                    );
                    Ok(ResponseBody::Unregistered {
                        route_id,
                        generation: routes.generation(),
                    })
                }
            },
            RequestBody::SubscribeFib => {
                let sink = req.reply.fib_sink();
                req.reply.send(Ok(ResponseBody::Subscribed));
                fib.subscribe(sink, &routes, &policy, &[], &[]);
                continue;
            }
            RequestBody::Status => Ok(ResponseBody::Status(Box::new(StatusView {
                router_id: "router-a".into(),
                generation: routes.generation(),
                routes: routes.len() as u64,
                fib_subscribers: fib.len() as u64,
                ..StatusView::default()
            }))),
            RequestBody::Lookup { query, .. } if &*query.capability == "hold" => {
                held = Some(req.reply);
                continue;
            }
            RequestBody::Lookup { query, .. } if &*query.capability == "never" => {
                never.push(req.reply);
                continue;
            }
            RequestBody::Lookup { query, .. } if &*query.capability == "drop" => {
                drop(req.reply);
                continue;
            }
            RequestBody::Lookup { query, .. } => Ok(ResponseBody::Lookup(LookupView {
                rule: Some(query.capability),
                ..LookupView::default()
            })),
            // A page of `limit` rows of ~2 KiB each, whatever the size.
            RequestBody::Routes(q) => {
                let mut r = route_of(RouteId::new("big").unwrap(), &registration("big"), now);
                r.region = "x".repeat(2048).into();
                let row = RouteView::of(&r, now);
                Ok(ResponseBody::Routes(RoutePage {
                    routes: vec![row; q.limit as usize],
                    next: None,
                }))
            }
            other => Err(IpcError::Unsupported {
                what: other.kind().into(),
            }),
        };
        req.reply.send(result);
        if let Some(h) = held.take() {
            h.send(Ok(ResponseBody::Lookup(LookupView {
                rule: Some("hold".into()),
                ..LookupView::default()
            })));
        }
    }
}

struct Harness {
    _dir: TempDir,
    path: PathBuf,
    disconnects: mpsc::UnboundedReceiver<Disconnect>,
}

impl Harness {
    fn start(config: ServerConfig) -> Harness {
        let dir = TempDir::new();
        let path = dir.sock();
        let server = IpcServer::bind(&path, config).unwrap();
        let (tx, rx) = mpsc::channel(64);
        let (dtx, drx) = mpsc::unbounded_channel();
        tokio::spawn(server.run(tx));
        tokio::spawn(fake_daemon(rx, Millis(1_000_000), dtx));
        Harness {
            _dir: dir,
            path,
            disconnects: drx,
        }
    }

    async fn client(&self) -> Client {
        Client::connect(&self.path, "test-client").await.unwrap()
    }

    /// The next connection end the daemon was told about.
    async fn next_disconnect(&mut self) -> Disconnect {
        tokio::time::timeout(Duration::from_secs(10), self.disconnects.recv())
            .await
            .expect("no disconnect reported within 10 s")
            .expect("daemon stopped")
    }
}

fn lookup(cap: &str) -> RequestBody {
    RequestBody::Lookup {
        query: LookupQuery {
            capability: cap.into(),
            version: 1,
            tenant: "lab".into(),
            source_agent: None,
            target_agent: None,
        },
        explain: false,
    }
}

/// A raw connection that has done the handshake, for sending bad bytes.
async fn raw_connect(path: &Path) -> (UnixStream, FrameDecoder) {
    let mut s = UnixStream::connect(path).await.unwrap();
    s.write_all(&frame::encode(&Hello::ours("raw")).unwrap())
        .await
        .unwrap();
    let mut d = FrameDecoder::new();
    let hello: Hello = read_msg(&mut s, &mut d).await.unwrap();
    assert_eq!(hello.protocol, PROTOCOL_VERSION);
    (s, d)
}

/// Next message, or `None` at end of stream.
async fn read_msg<T: serde::de::DeserializeOwned>(
    s: &mut UnixStream,
    d: &mut FrameDecoder,
) -> Option<T> {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(m) = d.next_message::<T>().unwrap() {
            return Some(m);
        }
        let n = s.read(&mut buf).await.unwrap();
        if n == 0 {
            return None;
        }
        d.push(&buf[..n]);
    }
}

#[tokio::test(flavor = "current_thread")]
async fn register_then_status_over_a_real_socket() {
    let h = Harness::start(ServerConfig::default());
    let c = h.client().await;
    assert_eq!(c.server().protocol, PROTOCOL_VERSION);
    let lease = c.register(registration("a")).await.unwrap();
    assert_eq!(lease.route_id.as_str(), "r1");
    assert_eq!(lease.generation, 1);
    assert_eq!(lease.expires_at, Millis(1_030_000));
    let st = c.status().await.unwrap();
    assert_eq!((st.routes, st.generation), (1, 1));
    // A typed refusal travels back as such.
    let mut bad = registration("b");
    bad.version = 0;
    let err = c.register(bad).await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Server(IpcError::Invalid { field, .. }) if &**field == "version"),
        "{err}"
    );
    let err = c
        .unregister(RouteId::new("nope").unwrap(), None)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ClientError::Server(IpcError::NotFound {
            route_id: RouteId::new("nope").unwrap()
        })
    );
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_calls_on_one_connection_get_their_own_replies() {
    let h = Harness::start(ServerConfig::default());
    let c = h.client().await;
    // The held request is answered after the later one: ids, not order,
    // match replies to calls.
    let held = {
        let c = c.clone();
        tokio::spawn(async move {
            c.lookup(
                LookupQuery {
                    capability: "hold".into(),
                    ..query()
                },
                false,
            )
            .await
        })
    };
    tokio::task::yield_now().await;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..50 {
        let c = c.clone();
        set.spawn(async move {
            let name = format!("cap{i}");
            let v = c
                .lookup(
                    LookupQuery {
                        capability: name.clone().into(),
                        ..query()
                    },
                    false,
                )
                .await
                .unwrap();
            assert_eq!(v.rule.as_deref(), Some(name.as_str()));
        });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    let v = held.await.unwrap().unwrap();
    assert_eq!(v.rule.as_deref(), Some("hold"));
}

fn query() -> LookupQuery {
    LookupQuery {
        capability: "x".into(),
        version: 1,
        tenant: "lab".into(),
        source_agent: None,
        target_agent: None,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn unanswered_call_times_out_and_dropped_replier_reports_internal() {
    let h = Harness::start(ServerConfig::default());
    let c = h.client().await.with_timeout(Duration::from_millis(100));
    assert_eq!(c.call(lookup("never")).await, Err(ClientError::Timeout));
    let err = c.call(lookup("drop")).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Server(IpcError::Internal { .. })),
        "{err}"
    );
    // The connection is still usable after both.
    assert!(c.call(lookup("fine")).await.is_ok());
}

#[tokio::test(flavor = "current_thread")]
async fn malformed_frame_closes_only_that_connection() {
    let mut h = Harness::start(ServerConfig::default());
    let good = h.client().await;
    let (mut raw, mut d) = raw_connect(&h.path).await;
    // A well-framed payload that is not a Request.
    raw.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    let msg: ServerMsg = read_msg(&mut raw, &mut d).await.unwrap();
    let ServerMsg::Response(Response {
        id,
        body: Err(IpcError::Malformed { .. }),
    }) = msg
    else {
        panic!("expected a malformed error, got {msg:?}")
    };
    assert_eq!(id, CONNECTION_ERROR_ID);
    assert_eq!(
        read_msg::<ServerMsg>(&mut raw, &mut d).await,
        None,
        "connection closed"
    );
    // The other client never noticed.
    assert_eq!(
        good.register(registration("a")).await.unwrap().generation,
        1
    );
    let d = h.next_disconnect().await;
    assert!(
        matches!(d, Disconnect::Malformed(FrameError::Decode(_))),
        "{d:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn oversized_frame_header_is_refused_with_a_typed_error() {
    let mut h = Harness::start(ServerConfig::default());
    let (mut raw, mut d) = raw_connect(&h.path).await;
    raw.write_all(&[0x7f, 0xff, 0xff, 0xff]).await.unwrap();
    let msg: ServerMsg = read_msg(&mut raw, &mut d).await.unwrap();
    let ServerMsg::Response(Response {
        body: Err(IpcError::Malformed { reason }),
        ..
    }) = msg
    else {
        panic!("expected a malformed error, got {msg:?}")
    };
    assert!(reason.contains("exceeds"), "{reason}");
    assert_eq!(read_msg::<ServerMsg>(&mut raw, &mut d).await, None);
    // The server still accepts new clients.
    let c = h.client().await;
    assert!(c.status().await.is_ok());
    let d = h.next_disconnect().await;
    assert!(
        matches!(d, Disconnect::Malformed(FrameError::TooLarge { .. })),
        "{d:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn truncated_frame_at_close_is_reported() {
    let mut h = Harness::start(ServerConfig::default());
    let (mut raw, _) = raw_connect(&h.path).await;
    raw.write_all(&[0, 0, 0, 10, 1, 2]).await.unwrap();
    drop(raw);
    assert_eq!(
        h.next_disconnect().await,
        Disconnect::Malformed(FrameError::Truncated {
            buffered: 6,
            needed: 14
        })
    );
}

#[tokio::test(flavor = "current_thread")]
async fn peer_without_permission_gets_permission_denied() {
    // Tests run as root; turning root off stands in for an unlisted uid.
    let mut h = Harness::start(ServerConfig {
        allow_root: false,
        allowed_uids: vec![4242],
        ..ServerConfig::default()
    });
    let c = h.client().await;
    let err = c.status().await.unwrap_err();
    assert!(
        matches!(&err, ClientError::Server(IpcError::PermissionDenied { reason }) if reason.contains("uid 0")),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "permission denied: uid 0 may not use the agentd socket"
    );
    // Later calls fail the same way without hanging.
    assert!(matches!(
        c.status().await,
        Err(ClientError::Server(IpcError::PermissionDenied { .. }))
    ));
    assert_eq!(
        h.next_disconnect().await,
        Disconnect::PermissionDenied { uid: 0 }
    );
}

#[tokio::test(flavor = "current_thread")]
async fn an_allowed_uid_is_admitted() {
    let me = unsafe_free_uid();
    let h = Harness::start(ServerConfig {
        allow_root: false,
        allowed_uids: vec![me],
        ..ServerConfig::default()
    });
    let c = h.client().await;
    assert!(c.status().await.is_ok());
}

/// Our own uid, read from /proc rather than through libc.
fn unsafe_free_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn protocol_mismatch_fails_clearly_on_both_sides() {
    // Client side: a server speaking protocol 99.
    let dir = TempDir::new();
    let path = dir.sock();
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let hello = Hello {
            protocol: 99,
            software: "agentd 9.9".into(),
        };
        s.write_all(&frame::encode(&hello).unwrap()).await.unwrap();
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await;
    });
    let err = Client::connect(&path, "test").await.unwrap_err();
    assert_eq!(
        err,
        ClientError::ProtocolMismatch {
            ours: PROTOCOL_VERSION,
            theirs: 99,
            server: "agentd 9.9".into()
        }
    );
    assert!(
        err.to_string()
            .contains("agentd 9.9 speaks IPC protocol 99"),
        "{err}"
    );

    // Server side: a client speaking protocol 99 is closed and logged.
    let mut h = Harness::start(ServerConfig::default());
    let mut s = UnixStream::connect(&h.path).await.unwrap();
    s.write_all(
        &frame::encode(&Hello {
            protocol: 99,
            software: "agent-gw 9.9".into(),
        })
        .unwrap(),
    )
    .await
    .unwrap();
    let mut d = FrameDecoder::new();
    let hello: Hello = read_msg(&mut s, &mut d).await.unwrap();
    assert_eq!(hello.protocol, PROTOCOL_VERSION);
    assert_eq!(read_msg::<ServerMsg>(&mut s, &mut d).await, None);
    assert_eq!(
        h.next_disconnect().await,
        Disconnect::ProtocolMismatch {
            theirs: 99,
            software: "agent-gw 9.9".into()
        }
    );
}

#[tokio::test(flavor = "current_thread")]
async fn bind_replaces_a_stale_socket_but_not_a_live_one() {
    let dir = TempDir::new();
    let path = dir.sock();
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap()); // stale file
    let live = IpcServer::bind(&path, ServerConfig::default()).unwrap();
    let err = IpcServer::bind(&path, ServerConfig::default()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    drop(live);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"not a socket").unwrap();
    let err = IpcServer::bind(&path, ServerConfig::default()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
}

#[tokio::test(flavor = "current_thread")]
async fn server_stops_when_the_daemon_drops_its_receiver() {
    let dir = TempDir::new();
    let server = IpcServer::bind(&dir.sock(), ServerConfig::default()).unwrap();
    let (tx, rx) = mpsc::channel(4);
    let run = tokio::spawn(server.run(tx));
    // A client connected before the daemon stops.
    let early = Client::connect(&dir.sock(), "early").await.unwrap();
    drop(rx);
    // The accept loop ends on its own, within a bound (no hang).
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("server still running 5 s after the daemon stopped")
        .unwrap();
    // The connected client learns it with a typed answer, not a timeout.
    let err = early.status().await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Server(IpcError::Unavailable { .. }) | ClientError::Closed
        ),
        "{err}"
    );
    // And nobody can connect any more: the listener is gone.
    assert!(Client::connect(&dir.sock(), "late").await.is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn connections_beyond_the_limit_are_refused_as_unavailable() {
    let h = Harness::start(ServerConfig {
        max_connections: 1,
        ..ServerConfig::default()
    });
    let first = h.client().await;
    assert!(first.status().await.is_ok());
    let second = h.client().await;
    let err = second.status().await.unwrap_err();
    assert!(
        matches!(err, ClientError::Server(IpcError::Unavailable { .. })),
        "{err}"
    );
    assert!(first.status().await.is_ok());
}

#[test]
fn blocking_call_from_synchronous_code() {
    // The server runs on its own runtime thread; the caller has none.
    let dir = TempDir::new();
    let path = dir.sock();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let server_path = path.clone();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let server = IpcServer::bind(&server_path, ServerConfig::default()).unwrap();
            let (tx, rx) = mpsc::channel(8);
            let (dtx, mut drx) = mpsc::unbounded_channel();
            tokio::spawn(server.run(tx));
            tokio::spawn(fake_daemon(rx, Millis(0), dtx));
            ready_tx.send(()).unwrap();
            // Serve until the blocking client has come and gone.
            drx.recv().await
        })
    });
    ready_rx.recv().unwrap();
    let body = crate::ipc::client::call_blocking(&path, "agentctl", RequestBody::Status).unwrap();
    let ResponseBody::Status(st) = body else {
        panic!("{body:?}")
    };
    assert_eq!(&*st.router_id, "router-a");
    assert_eq!(server.join().unwrap(), Some(Disconnect::Closed));
    let err = crate::ipc::client::call_blocking(
        &dir.0.join("missing.sock"),
        "agentctl",
        RequestBody::Status,
    );
    assert_eq!(err, Err(ClientError::Connect(std::io::ErrorKind::NotFound)));
}

#[tokio::test(flavor = "current_thread")]
async fn request_arriving_in_the_same_read_as_hello_is_served() {
    let h = Harness::start(ServerConfig::default());
    let mut s = UnixStream::connect(&h.path).await.unwrap();
    let mut wire = frame::encode(&Hello::ours("eager")).unwrap();
    frame::encode_into(
        &Request {
            id: 7,
            body: RequestBody::Status,
        },
        &mut wire,
    )
    .unwrap();
    s.write_all(&wire).await.unwrap();
    let mut d = FrameDecoder::new();
    let _: Hello = read_msg(&mut s, &mut d).await.unwrap();
    let reply = tokio::time::timeout(
        Duration::from_secs(10),
        read_msg::<ServerMsg>(&mut s, &mut d),
    )
    .await
    .expect("request left unanswered in the server's buffer");
    assert!(matches!(
        reply,
        Some(ServerMsg::Response(Response {
            id: 7,
            body: Ok(ResponseBody::Status(_))
        }))
    ));
}

#[tokio::test(flavor = "current_thread")]
async fn reply_too_big_for_a_frame_becomes_an_internal_error() {
    let h = Harness::start(ServerConfig::default());
    let c = h.client().await;
    let small = c
        .routes(RoutesQuery {
            limit: 10,
            ..RoutesQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(small.routes.len(), 10);
    let err = c
        .routes(RoutesQuery {
            limit: 200,
            ..RoutesQuery::default()
        })
        .await
        .unwrap_err();
    let ClientError::Server(IpcError::Internal { reason }) = &err else {
        panic!("{err}")
    };
    assert!(reason.contains("exceeds the 262144-byte limit"), "{reason}");
    // The connection survives its oversized reply.
    assert!(c.status().await.is_ok());
}

mod fib;
