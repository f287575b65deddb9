//! Serving: the listeners and their connections, and the tasks that
//! follow agentd. The top layer: it builds the gateway ([`Gateway`]) and
//! hands each request to its front end.
//!
//! ```text
//!  accept (one acceptor: LAN, public, peer) ─ admission before accept
//!      │  (per-source connection caps, handshake slots)
//!      ▼
//!  http (HTTP/1.1, h2) ─ router ─▶ front ends ─▶ pipeline ─▶ core
//! ```

pub mod accept;
pub mod agent;
pub mod follow;
pub mod gateway;
pub mod http;
pub mod http_guard;
pub mod peer;
pub mod public;
pub mod relay;

use std::io;
use std::rc::Rc;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::config::AuthMode;
use crate::core::agent_door::Door;

use accept::Listener;
pub use gateway::Gateway;

/// The whole gateway: bind, log the addresses, follow agentd's FIB and
/// the peer links, and serve. Must run inside a `LocalSet`.
pub async fn run(gw: Rc<Gateway>) -> io::Result<()> {
    let core = gw.core.clone();
    let listener = http::bind(core.cfg.sdk_listen).await?;
    agentd::log_notice!("listening sdk={}", listener.local_addr()?);
    if core.peer.enabled() {
        tokio::task::spawn_local(follow::run(core.clone()));
    }
    start_public(&gw).await?;
    crate::metrics::start(&crate::metrics::Scraped {
        core: core.clone(),
        requests: gw.requests.clone(),
    })
    .await?;
    if let (true, Some(addr)) = (core.peer.enabled(), core.cfg.peer_listen) {
        let peer = http::bind(addr).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("peer listener (gateway.peer_listen) {addr}: {e}"),
            )
        })?;
        agentd::log_notice!("listening peer={}", peer.local_addr()?);
        tokio::task::spawn_local(serve_peer(peer, gw.clone()));
    }
    tokio::task::spawn_local(crate::core::fib_follow::run(core.clone()));
    tokio::task::spawn_local(crate::task::live::expiry_driver(core.tasks.clone()));
    tokio::task::spawn_local(crate::core::relief::run(core.clone()));
    tokio::task::spawn_local(crate::stats::report(core));
    serve_lan(listener, gw).await;
    Ok(())
}

/// Binds and serves the public listener when it is configured, and the
/// agents' addresses — both when callers can authenticate there (auth
/// `jwt`, or client certificates of `gateway.client_ca`). Says in
/// `core.agent_door` how registration replies name the agent addresses,
/// or why they are not served.
async fn start_public(gw: &Rc<Gateway>) -> io::Result<()> {
    let state = &gw.core;
    let cfg = &state.cfg;
    if cfg.auth == AuthMode::None && cfg.client_ca.is_none() {
        let why = "gateway.auth is 'none' and no gateway.client_ca is set: the public listener and the agents' addresses are not served (a public ingress must authenticate its callers)";
        if let Some(addr) = cfg.public_listen {
            agentd::log_warn!("public listener {addr} not served: {why}");
        }
        *state.agent_door.borrow_mut() = Door::Closed(why.into());
        return Ok(());
    }
    let what = match cfg.public_listen {
        Some(addr) => format!("public listener (gateway.public_listen) {addr}"),
        None => "the agents' addresses".to_string(),
    };
    let (tls, endpoint) =
        public::tls_config(state).map_err(|e| io::Error::other(format!("{what}: {e}")))?;
    let acceptor = TlsAcceptor::from(tls);
    let port = public::agent_port(cfg);
    *state.agent_door.borrow_mut() = match endpoint {
        Ok(e) => Door::Open(e),
        Err(why) => {
            agentd::log_warn!("the agents' addresses are not served: {why}");
            Door::Closed(why.into())
        }
    };
    if let Some(addr) = cfg.public_listen {
        let listener = crate::listen::bind(addr)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("{what}: {e}")))?;
        agentd::log_notice!("listening public={}", listener.local_addr()?);
        tokio::task::spawn_local(serve_public(listener, acceptor.clone(), gw.clone()));
    }
    let open = matches!(*state.agent_door.borrow(), Door::Open(_));
    if open && !agent::covered_by(cfg.public_listen, port) {
        tokio::task::spawn_local(agent::run(gw.clone(), acceptor, port));
    }
    Ok(())
}

/// Serves the LAN SDK listener until the task is dropped. Must run
/// inside a `tokio::task::LocalSet`, as every `serve_*`.
pub async fn serve_lan(listener: TcpListener, gw: Rc<Gateway>) {
    accept::serve(listener, Listener::Lan, gw).await;
}

/// Serves the public HTTPS listener with `acceptor`'s TLS.
pub async fn serve_public(listener: TcpListener, acceptor: TlsAcceptor, gw: Rc<Gateway>) {
    accept::serve(listener, Listener::Public(acceptor), gw).await;
}

/// Serves the peer listener (mutual TLS with linked routers).
pub async fn serve_peer(listener: TcpListener, gw: Rc<Gateway>) {
    accept::serve(listener, Listener::Peer, gw).await;
}
