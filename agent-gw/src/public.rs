//! The public HTTPS ingress (`gateway.public_listen`, :7443): callers off
//! the LAN — agents elsewhere, MCP and A2A clients — reach the invoke,
//! task and protocol endpoints over TLS, HTTP/2 or HTTP/1.1 by ALPN.
//!
//! ```text
//!  accept ─ handshake slot (per source, `handshake`) ─ caps (shared with
//!  the LAN listener) ─ TLS handshake (bounded in time) ─ ALPN h2 ──▶ http2 connection ─┐
//!                                   └ else ───▶ http1 connection ─┴▶ dispatch
//! ```
//!
//! Every request here must carry a token: with `gateway.auth 'none'` the
//! listener is not served at all (logged), since an unauthenticated public
//! ingress would let anyone act for any tenant. Registration and bootstrap
//! are LAN-only (`router::Endpoint::public`).

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use router_pki::tls::public::{public_server_config, PublicCert};
use router_pki::RouterIdentity;
use tokio::net::TcpListener;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use crate::config::AuthMode;
use crate::endpoints::Ingress;
use crate::handshake::Handshakes;
use crate::state::AppState;

/// Longest TLS handshake of a public client.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Most public handshakes in progress at once; more are closed at accept.
pub const MAX_HANDSHAKES: usize = 64;
/// Most of them one source may hold (a handshake takes milliseconds, so
/// even many clients behind one NAT address rarely need more at once).
pub const MAX_HANDSHAKES_PER_SOURCE: usize = 8;

const ALPN_H2: &[u8] = b"h2";
const ALPN_HTTP1: &[u8] = b"http/1.1";

/// The TLS config the public listener serves with.
pub fn tls_config(state: &AppState) -> Result<Arc<ServerConfig>, String> {
    let cfg = &state.cfg;
    let alpn: &[&[u8]] = &[ALPN_H2, ALPN_HTTP1];
    match &cfg.public_cert {
        Some((cert, key)) => public_server_config(PublicCert::Files { cert, key }, alpn),
        None => {
            let key = router_pki::identity::load_key(&cfg.identity).map_err(|e| e.to_string())?;
            let identity = RouterIdentity::new(key, cfg.router_cert.as_deref(), &cfg.router_id)
                .map_err(|e| e.to_string())?;
            public_server_config(PublicCert::Router(&identity), alpn)
        }
    }
    .map_err(|e| e.to_string())
}

/// Binds and serves the public listener when it is configured and
/// authentication is on.
pub async fn start(state: &Rc<AppState>) -> io::Result<()> {
    let Some(addr) = state.cfg.public_listen else {
        return Ok(());
    };
    if state.cfg.auth == AuthMode::None {
        agentd::log_warn!(
            "public listener {addr} not served: gateway.auth is 'none' (a public ingress must authenticate its callers)"
        );
        return Ok(());
    }
    let tls = tls_config(state).map_err(|e| {
        io::Error::other(format!(
            "public listener (gateway.public_listen) {addr}: {e}"
        ))
    })?;
    let listener = crate::server::bind(addr).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("public listener (gateway.public_listen) {addr}: {e}"),
        )
    })?;
    agentd::log_notice!("listening public={}", listener.local_addr()?);
    tokio::task::spawn_local(serve(listener, TlsAcceptor::from(tls), state.clone()));
    Ok(())
}

/// Serves connections from `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, state: Rc<AppState>) {
    let mut pacer = agentd::accept::Pacer::new("public listener");
    let handshakes = Handshakes::new("public listener", MAX_HANDSHAKES, MAX_HANDSHAKES_PER_SOURCE);
    loop {
        let (stream, peer) = match pacer.accept(&listener).await {
            Ok(x) => x,
            Err(e) => {
                // Already paced (EMFILE and friends pause, doubling up
                // to a second) and logged by the pacer.
                agentd::log_debug!("public listener: accept failed: {e}");
                continue;
            }
        };
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        // Both slots are taken here, not in the task: a burst accepted in
        // one turn of this loop counts before any of its tasks runs.
        let handshake = match handshakes.take(peer.ip()) {
            Ok(h) => h,
            Err(refused) => {
                crate::server::note_handshake_refusal(&state, refused);
                continue;
            }
        };
        let slot = match state.conns.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refused) => {
                crate::server::note_refusal(&state, refused);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (state, acceptor) = (state.clone(), acceptor.clone());
        tokio::task::spawn_local(async move {
            let tls = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await;
            drop(handshake);
            let tls = match tls {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    agentd::log_info!("public connection from {peer}: TLS handshake failed: {e}");
                    return;
                }
                Err(_) => {
                    agentd::log_info!(
                        "public connection from {peer}: no TLS handshake within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    );
                    return;
                }
            };
            if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
                crate::server::h2_connection(tls, peer, state, Ingress::Public).await;
            } else {
                crate::server::http1_connection(tls, peer, state, Ingress::Public).await;
            }
            drop(slot);
        });
    }
}
