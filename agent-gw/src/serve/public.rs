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

use crate::config::GatewayConfig;
use crate::core::agent_door::Endpoint;
use crate::core::Core;
use crate::front::{Ingress, Verified};

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

/// The TLS config the public listener and the per-agent addresses serve
/// with, and the endpoint registration replies name for the latter (or
/// why there is none: an operator's certificate that names no host).
pub fn tls_config(state: &Core) -> Result<(Arc<ServerConfig>, Result<Endpoint, String>), String> {
    let cfg = &state.cfg;
    let alpn: &[&[u8]] = &[ALPN_H2, ALPN_HTTP1];
    let client_ca = cfg.client_ca.as_deref();
    match &cfg.public_cert {
        Some((cert, key)) => {
            let tls = public_server_config(PublicCert::Files { cert, key }, alpn, client_ca)
                .map_err(|e| e.to_string())?;
            let leaf =
                router_pki::tls::public::load_certified(cert, key).map_err(|e| e.to_string())?;
            let name = router_pki::x509::read(&leaf.cert[0])
                .ok()
                .and_then(|s| s.dns_names.into_iter().next())
                .ok_or_else(|| {
                    format!(
                        "public_cert {} names no DNS host (subjectAltName), which callers of the agents' addresses verify",
                        cert.display()
                    )
                });
            Ok((tls, name.map(|n| endpoint(cfg, n, "system".into()))))
        }
        None => {
            let key = router_pki::identity::load_key(&cfg.identity).map_err(|e| e.to_string())?;
            let identity = RouterIdentity::new(key, cfg.router_cert.as_deref(), &cfg.router_id)
                .map_err(|e| e.to_string())?;
            let tls = public_server_config(PublicCert::Router(&identity), alpn, client_ca)
                .map_err(|e| e.to_string())?;
            let bundle = router_bundle(cfg, &identity);
            Ok((tls, Ok(endpoint(cfg, cfg.router_id.to_string(), bundle))))
        }
    }
}

fn endpoint(cfg: &GatewayConfig, name: String, bundle: String) -> Endpoint {
    Endpoint {
        port: agent_port(cfg),
        tls_server_name: name.into(),
        ca_bundle_id: bundle.into(),
    }
}

/// The port of the per-agent addresses: the public listener's.
pub fn agent_port(cfg: &GatewayConfig) -> u16 {
    cfg.public_listen.map_or(DEFAULT_PORT, |a| a.port())
}

/// :7443, when the public listener is off.
pub const DEFAULT_PORT: u16 = 7443;

/// The trust bundle of the router's own certificate: its domain CA's
/// (`agentd-ca-` and the CA key's fingerprint) when the CA issued it,
/// else its own key's (`agentd-router-`), as peers pin it.
fn router_bundle(cfg: &GatewayConfig, identity: &RouterIdentity) -> String {
    let short = |fp: router_pki::Fingerprint| {
        fp.0[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let ca = (!identity.is_self_signed())
        .then_some(cfg.domain_ca.as_deref())
        .flatten()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|pem| router_pki::pem::decode_all(&pem, "CERTIFICATE", 8, 16 * 1024).ok())
        .and_then(|ders| router_pki::x509::read(ders.first()?).ok())
        .and_then(|s| s.key.fingerprint());
    match ca {
        Some(fp) => format!("agentd-ca-{}", short(fp)),
        None => format!("agentd-router-{}", short(identity.fingerprint())),
    }
}

/// What a client certificate proved: the agent it names, or why it
/// names none (its requests are then refused, naming that).
pub fn client_identity(tls: &TlsStream<TcpStream>) -> Option<Rc<Result<Verified, Box<str>>>> {
    let leaf = tls.get_ref().1.peer_certificates()?.first()?;
    Some(Rc::new(verified_of(leaf)))
}

fn verified_of(der: &[u8]) -> Result<Verified, Box<str>> {
    let summary = router_pki::x509::read(der)
        .map_err(|e| format!("the client certificate cannot be read: {e}"))?;
    let uri = summary
        .uris
        .iter()
        .find(|u| agentd::route::check_agent_uri(u).is_ok())
        .ok_or(
            "the client certificate names no agent (a subjectAltName URI agent://tenant/name)",
        )?;
    let tenant = uri["agent://".len()..]
        .split('/')
        .next()
        .filter(|t| agentd::route::check_tenant(t).is_ok())
        .ok_or("the client certificate's agent URI names no valid tenant")?;
    let digest: [u8; 32] = edkey::Sha256::digest(der);
    Ok(Verified {
        tenant: tenant.into(),
        subject: uri.as_str().into(),
        proof: agentd::owner::Proof::Token {
            subject: uri.as_str().into(),
            key: digest,
        },
    })
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

/// Serves one public connection — of the public listener, or of an
/// agent's address (`ingress`) — h2 when ALPN chose it, else HTTP/1.1.
pub async fn connection(
    tls: TlsStream<TcpStream>,
    peer: SocketAddr,
    gw: Rc<Gateway>,
    ingress: Ingress,
) {
    let pin = ingress.pin().cloned();
    let link = crate::serve::http::Link {
        peer,
        ingress,
        client: client_identity(&tls),
    };
    let core = gw.core.clone();
    let serve = async move {
        if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
            crate::serve::http::h2_connection(tls, link, gw).await;
        } else {
            crate::serve::http::http1_connection(tls, link, gw).await;
        }
    };
    match pin {
        None => serve.await,
        Some(a) => {
            tokio::select! {
                () = serve => {}
                () = super::agent::released(&core, &a) => {
                    agentd::log_debug!("connection from {peer} to [{}] closed: the address was released", a.addr);
                }
            }
        }
    }
}
