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
pub mod follow;
pub mod http;
pub mod http_guard;
pub mod peer;
pub mod public;

use std::io;
use std::rc::Rc;

use crate::config::GatewayConfig;
use crate::core::Core;
use crate::front::{a2a, mcp};
use crate::metrics::requests::RequestCounts;

/// One gateway: its core, and the state each front end owns.
#[derive(Debug)]
pub struct Gateway {
    pub core: Rc<Core>,
    /// MCP's sessions (handshake revisions).
    pub mcp: mcp::Sessions,
    /// What A2A remembers of its tasks.
    pub a2a: a2a::rpc::Tasks,
    /// Requests answered per listener, for `/metrics`.
    pub requests: RequestCounts,
}

impl Gateway {
    /// The gateway around `core`, with fresh front-end state.
    pub fn new(core: Rc<Core>) -> Rc<Gateway> {
        let cfg = &core.cfg;
        let mcp = Rc::new(std::cell::RefCell::new(mcp::session::Sessions::new(
            cfg.mcp_max_sessions,
            cfg.mcp_session_idle_ms,
        )));
        Rc::new(Gateway {
            mcp,
            a2a: Rc::default(),
            requests: RequestCounts::default(),
            core,
        })
    }

    /// A gateway of `cfg`.
    pub fn of(cfg: GatewayConfig) -> Rc<Gateway> {
        Gateway::new(Core::new(cfg))
    }
}

/// The whole gateway: bind, log the addresses, follow agentd's FIB and
/// the peer links, and serve. Must run inside a `LocalSet`.
pub async fn run(gw: Rc<Gateway>) -> io::Result<()> {
    let core = gw.core.clone();
    let listener = http::bind(core.cfg.sdk_listen).await?;
    agentd::log_notice!("listening sdk={}", listener.local_addr()?);
    if core.peer.enabled() {
        tokio::task::spawn_local(follow::run(core.clone()));
    }
    public::start(&gw).await?;
    crate::metrics::start(&gw).await?;
    if let (true, Some(addr)) = (core.peer.enabled(), core.cfg.peer_listen) {
        let peer = http::bind(addr).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("peer listener (gateway.peer_listen) {addr}: {e}"),
            )
        })?;
        agentd::log_notice!("listening peer={}", peer.local_addr()?);
        tokio::task::spawn_local(peer::serve(peer, gw.clone()));
    }
    tokio::task::spawn_local(crate::core::fib_follow::run(core.clone()));
    tokio::task::spawn_local(crate::task::live::expiry_driver(core.tasks.clone()));
    tokio::task::spawn_local(crate::stats::report(core));
    http::serve(listener, gw).await;
    Ok(())
}
