//! Registration calls to agentd (the control plane).
//!
//! The gateway keeps no registration state: register/renew/unregister are
//! relayed to agentd over its IPC socket, and the answer comes back as the
//! SDK's lease JSON. While agentd is unreachable these calls fail fast with
//! a typed 503 `control_plane_unavailable`; invocations are unaffected
//! (they are decided on the FIB replica). The connection is owned by the
//! FIB sync loop, which sets and clears it here.

use std::cell::RefCell;

use agentd::ipc::client::{Client, ClientError};
use agentd::ipc::message::{self as ipc, IpcError, LeaseGrant};
use agentd::owner::Caller;

use crate::api::error::{ApiError, ErrorCode};
use crate::api::registration::{LeaseReply, Registration, Renewal, Unregistration};

#[derive(Debug)]
pub struct Control {
    link: RefCell<Option<Client>>,
    /// Lease bounds of the shared config: requests are clamped into them,
    /// and the reply says what was granted.
    lease_min_s: u64,
    lease_max_s: u64,
}

fn unavailable(why: &str) -> ApiError {
    ApiError::new(
        ErrorCode::ControlPlaneUnavailable,
        format!("agentd is not reachable ({why}); retry shortly"),
    )
    .retry_after_ms(1000)
}

/// The typed answer for a failed IPC call.
fn from_client(e: ClientError) -> ApiError {
    match e {
        ClientError::Server(s) => from_ipc(s),
        other => unavailable(&other.to_string()),
    }
}

fn from_ipc(e: IpcError) -> ApiError {
    let msg = e.to_string();
    if let IpcError::EndpointRefused { reason, .. } = e {
        return ApiError::new(ErrorCode::EndpointRefused, msg).reason(reason.code());
    }
    // Refusals with a stable reason carry it.
    let reason = match &e {
        IpcError::Forbidden { reason, .. } => Some(reason.as_str()),
        IpcError::OwnedElsewhere { .. } => Some(agentd::owner::ORIGIN_OWNED_ELSEWHERE),
        IpcError::QuotaExceeded { quota, .. } => Some(quota.option()),
        _ => None,
    };
    let code = match e {
        IpcError::NotFound { .. } => ErrorCode::NotFound,
        IpcError::Conflict { .. } => ErrorCode::Conflict,
        IpcError::LeaseOutOfRange { .. } | IpcError::Invalid { .. } => ErrorCode::InvalidField,
        IpcError::EndpointRefused { .. } => ErrorCode::EndpointRefused,
        IpcError::Full { .. } => ErrorCode::Other {
            code: "route_table_full",
            status: 503,
        },
        IpcError::PermissionDenied { .. }
        | IpcError::Forbidden { .. }
        | IpcError::OwnedElsewhere { .. } => ErrorCode::Forbidden,
        IpcError::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
        IpcError::Unsupported { .. } => ErrorCode::Other {
            code: "unsupported",
            status: 501,
        },
        IpcError::Unavailable { .. } => ErrorCode::ControlPlaneUnavailable,
        IpcError::Malformed { .. } | IpcError::Internal { .. } => ErrorCode::Internal,
    };
    let err = ApiError::new(code, msg);
    match reason {
        Some(r) => err.reason(r),
        None => err,
    }
}

fn reply(g: LeaseGrant, ignored: Vec<&'static str>) -> LeaseReply {
    LeaseReply {
        route_id: g.route_id,
        generation: g.generation,
        lease_seconds: u64::from(g.lease_seconds),
        removed: false,
        ignored,
        public_ipv6: g.public_ipv6,
    }
}

impl Control {
    pub fn new(lease_min_s: u64, lease_max_s: u64) -> Control {
        Control {
            link: RefCell::new(None),
            lease_min_s,
            lease_max_s,
        }
    }

    pub fn is_up(&self) -> bool {
        self.link.borrow().is_some()
    }

    pub fn set_link(&self, link: Option<Client>) {
        *self.link.borrow_mut() = link;
    }

    fn link(&self) -> Result<Client, ApiError> {
        self.link
            .borrow()
            .clone()
            .ok_or_else(|| unavailable("no connection"))
    }

    fn clamp(&self, requested: Option<u64>) -> Option<u32> {
        requested.map(|s| {
            s.clamp(self.lease_min_s, self.lease_max_s)
                .min(u64::from(u32::MAX)) as u32
        })
    }

    /// `caller` is who asks (source address and what authentication
    /// proved); agentd binds the origin to it.
    pub async fn register(
        &self,
        reg: Registration,
        caller: Caller,
    ) -> Result<LeaseReply, ApiError> {
        let link = self.link()?;
        let req = ipc::Registration {
            route_id: reg.route_id,
            capability: reg.capability,
            version: reg.version,
            origin: reg.origin,
            endpoint: reg.endpoint,
            tenant: reg.tenant,
            region: reg.region,
            attrs: reg.attrs,
            access: reg.access,
            contract: reg.contract,
            lease_seconds: self.clamp(reg.lease_seconds),
            caller: Some(caller),
            owner: None,
            public_ipv6: reg.public_ipv6,
        };
        let grant = link.register(req).await.map_err(from_client)?;
        Ok(reply(grant, reg.ignored))
    }

    /// `caller` must own the route's origin.
    pub async fn renew(&self, r: Renewal, caller: Caller) -> Result<LeaseReply, ApiError> {
        let link = self.link()?;
        let req = ipc::Renewal {
            route_id: r.route_id,
            caller: Some(caller),
            lease_seconds: self.clamp(r.lease_seconds),
            latency_ms: r.latency_ms,
            load_permille: r.load_permille,
            healthy: r.healthy,
            endpoint: r.endpoint,
        };
        let grant = link.renew(req).await.map_err(from_client)?;
        Ok(reply(grant, r.ignored))
    }

    /// Sends the gateway's counters to agentd (`agentctl stats`).
    pub async fn report_stats(&self, stats: ipc::GatewayStats) -> Result<(), ApiError> {
        let link = self.link()?;
        link.gateway_stats(stats).await.map_err(from_client)
    }

    /// agentd's status (`agentctl status`).
    pub async fn status(&self) -> Result<ipc::StatusView, ApiError> {
        let link = self.link()?;
        link.status().await.map_err(from_client)
    }

    /// agentd's counters (`agentctl stats`), for `/metrics`.
    pub async fn stats(&self) -> Result<ipc::StatsView, ApiError> {
        let link = self.link()?;
        link.stats().await.map_err(from_client)
    }

    pub async fn unregister(
        &self,
        u: Unregistration,
        caller: Caller,
    ) -> Result<LeaseReply, ApiError> {
        let link = self.link()?;
        let generation = link
            .unregister(u.route_id.clone(), Some(caller))
            .await
            .map_err(from_client)?;
        Ok(LeaseReply {
            route_id: u.route_id,
            generation,
            lease_seconds: 0,
            removed: true,
            ignored: Vec::new(),
            public_ipv6: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd::route::RouteId;

    #[test]
    fn ipc_refusals_map_to_sdk_codes() {
        let id = RouteId::new("r-1").unwrap();
        let e = from_client(ClientError::Server(IpcError::NotFound { route_id: id }));
        assert_eq!(
            (e.code, e.code.status().as_u16()),
            (ErrorCode::NotFound, 404)
        );
        let e = from_client(ClientError::Closed);
        assert_eq!(e.code, ErrorCode::ControlPlaneUnavailable);
        assert_eq!(e.code.status().as_u16(), 503);
    }

    #[test]
    fn requested_leases_are_clamped_into_the_configured_bounds() {
        let c = Control::new(5, 3600);
        assert_eq!(c.clamp(Some(1)), Some(5));
        assert_eq!(c.clamp(Some(86_400)), Some(3600));
        assert_eq!(c.clamp(Some(300)), Some(300));
        assert_eq!(c.clamp(None), None);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn calls_without_agentd_answer_control_plane_unavailable() {
        let c = Control::new(5, 3600);
        let e = c
            .unregister(
                Unregistration {
                    route_id: RouteId::new("r-1").unwrap(),
                },
                Caller::address("192.0.2.1".parse().unwrap()),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ControlPlaneUnavailable);
    }
}
