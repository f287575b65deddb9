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

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use router_pki::tls::public::{public_server_config, PublicCert};
use router_pki::RouterIdentity;
use tokio::net::TcpStream;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::core::Core;
use crate::front::Ingress;

use super::gateway::Gateway;

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
pub fn tls_config(state: &Core) -> Result<Arc<ServerConfig>, String> {
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

/// The TLS handshake of a public client, bounded in time; `None` (logged)
/// when it fails.
pub async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<TlsStream<TcpStream>> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            agentd::log_info!("public connection from {peer}: TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            agentd::log_info!(
                "public connection from {peer}: no TLS handshake within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            );
            None
        }
    }
}

/// Serves one public connection: h2 when ALPN chose it, else HTTP/1.1.
pub async fn connection(tls: TlsStream<TcpStream>, peer: SocketAddr, gw: Rc<Gateway>) {
    if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
        crate::serve::http::h2_connection(tls, peer, gw, Ingress::Public).await;
    } else {
        crate::serve::http::http1_connection(tls, peer, gw, Ingress::Public).await;
    }
}
