//! The TLS listeners (public and peer) take a handshake slot at accept,
//! before a connection's task exists, and give each source a share of
//! them: a burst of connections from one host that never starts its
//! handshake holds only its share, the rest are closed at once, and
//! another host's handshake is still answered.
//!
//! The burst is made while the gateway cannot run (blocking connects on
//! the test's own thread, which is the gateway's), so the accept loop
//! takes all of it in one turn: a counter raised inside the spawned
//! tasks would let every connection of the burst through.

mod common;

use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use edkey::SigningKey;
use router_pki::tls::{self as pki_tls, PeerTrust, Trust};
use router_pki::{Fingerprint, RouterIdentity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_rustls::rustls::ClientConnection;

use agent_gw::config::{AuthMode, GatewayConfig};
use agent_gw::core::Core;
use common::daemon::TempDir;
use common::*;

/// Connections in the burst from one host: more than either listener's
/// whole number of handshake slots.
const BURST: usize = 80;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// `n` connections from `src` to `to`, made with blocking connects (the
/// kernel completes them into the accept queue while the gateway, on this
/// thread, does not run).
fn burst_from(src: IpAddr, to: SocketAddr, n: usize) -> Vec<TcpStream> {
    use socket2::{Domain, Socket, Type};
    (0..n)
        .map(|_| {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
            s.bind(&SocketAddr::new(src, 0).into()).unwrap();
            s.connect(&to.into()).unwrap();
            s.set_nonblocking(true).unwrap();
            TcpStream::from_std(s.into()).unwrap()
        })
        .collect()
}

/// Waits until `want` of `conns` are closed by the gateway (bounded: 5 s,
/// or the test fails saying how many were). The others stay open, held
/// by their reader tasks.
async fn await_closed(conns: Vec<TcpStream>, want: usize) {
    let closed = Rc::new(Cell::new(0usize));
    let changed = Rc::new(Notify::new());
    for mut c in conns {
        let (closed, changed) = (closed.clone(), changed.clone());
        tokio::task::spawn_local(async move {
            let mut b = [0u8; 1];
            // The client sends nothing, so the gateway sends nothing
            // either: end of stream (or a reset) is the close.
            if matches!(c.read(&mut b).await, Ok(0) | Err(_)) {
                closed.set(closed.get() + 1);
                changed.notify_one();
            }
            std::future::pending::<()>().await;
        });
    }
    let waited = tokio::time::timeout(Duration::from_secs(5), async {
        while closed.get() < want {
            changed.notified().await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "only {} of the burst's connections were closed at accept, {want} expected",
        closed.get()
    );
}

/// A TLS 1.3 ClientHello as the peer data plane sends one.
fn client_hello() -> Vec<u8> {
    let id = RouterIdentity::new(SigningKey::from_bytes(&[9; 32]), None, "router-c").unwrap();
    let trust = Arc::new(Trust::new(
        None,
        vec![PeerTrust {
            router_id: "router".into(),
            pin: Some(Fingerprint::of_raw(&[1; 32])),
        }],
    ));
    let cfg = pki_tls::client_config(&id, trust, "router", &[b"h2"]).unwrap();
    let mut conn = ClientConnection::new(cfg, pki_tls::server_name("router").unwrap()).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

/// Sends a ClientHello from `src` and returns the first byte of the
/// answer (0x16: a handshake record, the ServerHello); fails if the
/// gateway closes the connection instead.
async fn hello_from(src: IpAddr, to: SocketAddr) -> u8 {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(src, 0)).unwrap();
    let mut s = sock.connect(to).await.unwrap();
    s.write_all(&client_hello()).await.unwrap();
    let mut b = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut b))
        .await
        .expect("no answer to the ClientHello")
        .unwrap_or(0);
    assert_eq!(n, 1, "the gateway closed {src}'s connection unanswered");
    b[0]
}

const HANDSHAKE_RECORD: u8 = 0x16;

#[test]
fn one_host_holds_only_its_share_of_public_handshakes() {
    run(async {
        let cfg = GatewayConfig {
            auth: AuthMode::Jwt,
            ..lab_config()
        };
        let state = Core::new(cfg);
        let identity =
            RouterIdentity::new(SigningKey::from_bytes(&[3; 32]), None, "router").unwrap();
        let tls = router_pki::tls::public::public_server_config(
            router_pki::tls::public::PublicCert::Router(&identity),
            &[b"h2", b"http/1.1"],
            None,
        )
        .unwrap();
        let listener = agent_gw::serve::http::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(agent_gw::serve::serve_public(
            listener,
            tokio_rustls::TlsAcceptor::from(tls),
            agent_gw::serve::Gateway::new(state),
        ));
        let burst = burst_from(ip("127.0.0.2"), addr, BURST);
        await_closed(
            burst,
            BURST - agent_gw::serve::public::MAX_HANDSHAKES_PER_SOURCE,
        )
        .await;
        assert_eq!(hello_from(ip("127.0.0.3"), addr).await, HANDSHAKE_RECORD);
    });
}

#[test]
fn one_host_holds_only_its_share_of_peer_handshakes() {
    run(async {
        let dir = TempDir::new("handshakes");
        let key_path = dir.0.join("identity.key");
        router_pki::identity::create_key_file(&key_path, &SigningKey::from_bytes(&[3; 32]))
            .unwrap();
        let cfg = GatewayConfig {
            mesh: true,
            identity: key_path,
            ..lab_config()
        };
        let state = Core::new(cfg);
        // One linked router: the data plane loads its TLS identity.
        let linked = SigningKey::from_bytes(&[4; 32]).verifying_key();
        state.peer.sync(vec![agent_gw::peer::Link {
            router_id: "router-b".into(),
            key: linked.to_bytes(),
            data: closed_port().await.to_string().into(),
            signed: true,
            relay: Default::default(),
        }]);
        assert!(state.peer.tls().is_some());
        let listener = agent_gw::serve::http::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::task::spawn_local(agent_gw::serve::serve_peer(
            listener,
            agent_gw::serve::Gateway::new(state),
        ));
        let burst = burst_from(ip("127.0.0.2"), addr, BURST);
        await_closed(
            burst,
            BURST - agent_gw::serve::peer::MAX_HANDSHAKES_PER_SOURCE,
        )
        .await;
        assert_eq!(hello_from(ip("127.0.0.3"), addr).await, HANDSHAKE_RECORD);
    });
}
