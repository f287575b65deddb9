//! The peer listener (`gateway.peer_listen`): TLS 1.3 with mutual auth,
//! ALPN `h2`, HTTP/2.
//!
//! A client is served only if its certificate carries the key of a
//! router whose ARPX session is established (the trust rule is the link
//! set, see `tls`); its connection closes when that link goes. Handshakes
//! are bounded in time and in number at once, in total and per source
//! (`handshake`), so a flood of slow handshakes cannot pile up nor one
//! host keep linked routers from reconnecting; everything after the
//! handshake is the h2 connection's own flow control and stream limits.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_rustls::TlsAcceptor;

use crate::core::Core;
use crate::front::neighbour as inbound;
use crate::peer::coalesce::Coalesce;
use crate::peer::tls::error_text;
use crate::peer::{h2_settings, LocalExec, PeerStats};

use super::gateway::Gateway;

/// Longest TLS handshake of an inbound data connection.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Most inbound handshakes in progress at once; more are closed at accept.
pub const MAX_HANDSHAKES: usize = 32;
/// Most of them one source may hold: a linked router needs one at a time
/// (a reconnect), so any host, linked or not, leaves the rest to others.
pub const MAX_HANDSHAKES_PER_SOURCE: usize = 4;

pub(super) type Tls = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// What an accepted router's connection is.
pub(super) struct Accepted {
    pub tls: Tls,
    pub link: crate::peer::Link,
    /// A relay client's tunnel (ALPN `agentd-relay/1`), not a data
    /// connection.
    pub tunnel: bool,
}

/// The mutual TLS handshake of a router, bounded in time, and the link
/// it proves; `None` (logged) when either fails.
pub(super) async fn accept(
    state: &Core,
    stream: tokio::net::TcpStream,
    from: SocketAddr,
) -> Option<Accepted> {
    let tls = state.peer.tls()?;
    let acceptor = TlsAcceptor::from(tls.borrow().server());
    let tls_stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            agentd::log_info!(
                "peer data connection from {from} refused: {}",
                error_text(&e)
            );
            return None;
        }
        Err(_) => {
            agentd::log_info!(
                "peer data connection from {from}: no handshake within {} s",
                HANDSHAKE_TIMEOUT.as_secs()
            );
            return None;
        }
    };
    let verified = tls.borrow().verified(tls_stream.get_ref().1, None);
    let v = match verified {
        Ok(v) => v,
        Err(e) => {
            agentd::log_info!("peer data connection from {from} refused: {e}");
            return None;
        }
    };
    // The trust rule is the link set of when the handshake began: check
    // the router is still linked, with that key.
    let link = state.peer.link(&v.router_id).filter(|l| l.key == v.key)?;
    PeerStats::add(&state.peer.stats.handshakes_in, 1);
    Some(Accepted {
        tls: tls_stream,
        link,
        tunnel: v.tunnel,
    })
}

/// The key a linked router's assertions are verified with. A weak
/// (small-order) key would let anyone sign as that router; `verify_strict`
/// refuses it on every call too, but refusing the link here says why once
/// instead of failing each call.
fn assertion_key(bytes: &[u8; 32]) -> Option<edkey::VerifyingKey> {
    edkey::VerifyingKey::from_bytes(bytes)
        .ok()
        .filter(|k| !k.is_weak())
}

/// Serves one linked router's h2 connection until it ends or its ARPX
/// session does.
pub(super) async fn connection(
    gw: Rc<Gateway>,
    tls: Tls,
    link: crate::peer::Link,
    from: SocketAddr,
) {
    let state = gw.core.clone();
    let close = state.peer.accepted(link.clone());
    let stats = state.peer.stats.clone();
    let Some(svc) = neighbour_service(&state, &link, from) else {
        return;
    };
    PeerStats::add(&stats.conns, 1);
    let mut b = hyper::server::conn::http2::Builder::new(LocalExec);
    b.timer(TokioTimer::new());
    h2_settings::server(&mut b);
    let conn = b.serve_connection(TokioIo::new(Coalesce::new(tls)), svc);
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                agentd::log_info!("peer data connection from {} ended: {e}", link.router_id);
            }
        }
        () = close.notified() => {
            agentd::log_info!("peer data connection from {} closed: its ARPX session ended", link.router_id);
        }
    }
    stats.conns.set(stats.conns.get().saturating_sub(1));
}

/// The service that answers the calls a linked router sends us: on its
/// data connection, or (our relay) on our tunnel to it. `None` (logged)
/// when its linked key is unusable.
pub(super) fn neighbour_service(
    state: &Rc<Core>,
    link: &crate::peer::Link,
    from: SocketAddr,
) -> Option<
    impl hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<crate::body::Body>,
            Error = Infallible,
        > + Clone,
> {
    let Some(key) = assertion_key(&link.key) else {
        agentd::log_warn!(
            "peer data connection with {}: its linked key is not a usable Ed25519 key",
            link.router_id
        );
        return None;
    };
    let peer = Rc::new(inbound::Peer {
        router_id: (*link.router_id).into(),
        key,
        addr: from,
        signed: link.signed,
    });
    let state = state.clone();
    Some(service_fn(move |req| {
        let state = state.clone();
        let peer = peer.clone();
        async move { Ok::<_, Infallible>(inbound::serve(&state, &peer, req).await) }
    }))
}

#[cfg(test)]
mod tests {
    use super::assertion_key;

    #[test]
    fn small_order_and_invalid_link_keys_are_refused() {
        let good = edkey::SigningKey::from_bytes(&[3; 32]).verifying_key();
        assert_eq!(assertion_key(good.as_bytes()), Some(good));
        // The identity point (y = 1), of order 1: every signature with
        // R = identity and S = 0 would verify under it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(assertion_key(&identity), None);
        // y = -1, of order 2.
        let mut order2 = [0xff; 32];
        order2[0] = 0xec;
        order2[31] = 0x7f;
        assert_eq!(assertion_key(&order2), None);
        // Not a point on the curve at all.
        let mut off = [0u8; 32];
        off[0] = 2;
        assert_eq!(assertion_key(&off), None);
    }
}
