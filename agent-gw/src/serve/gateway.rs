//! One gateway: its core and the state each front end owns.

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
    pub requests: Rc<RequestCounts>,
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
            requests: Rc::default(),
            core,
        })
    }

    /// A gateway of `cfg`.
    pub fn of(cfg: GatewayConfig) -> Rc<Gateway> {
        Gateway::new(Core::new(cfg))
    }
}
