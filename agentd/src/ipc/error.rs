//! Typed refusals of the IPC protocol. Each variant has a stable
//! [`code`](IpcError::code); the gateway maps variants (never code
//! strings) onto the SDK's error codes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::owner::Refusal;
use crate::route::RouteId;

/// Why an existing route may not be taken over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConflictReason {
    /// The route belongs to another origin.
    OtherOrigin,
    /// The route belongs to another tenant.
    OtherTenant,
    /// The route is static or learned from a peer, not registered here.
    NotLocal,
}

impl ConflictReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictReason::OtherOrigin => "belongs to another origin",
            ConflictReason::OtherTenant => "belongs to another tenant",
            ConflictReason::NotLocal => "is not a locally registered route",
        }
    }
}

/// A registration quota (UCI `agentd.max_routes_per_origin`,
/// `agentd.max_routes_per_source`, `tenant.max_routes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Quota {
    PerOrigin,
    PerSource,
    PerTenant,
}

impl Quota {
    /// The option that sets it, as the refusal names it.
    pub fn option(self) -> &'static str {
        match self {
            Quota::PerOrigin => "agentd.max_routes_per_origin",
            Quota::PerSource => "agentd.max_routes_per_source",
            Quota::PerTenant => "tenant.max_routes",
        }
    }
}

/// A refused request. Each variant has a stable [`code`](IpcError::code)
/// that the HTTP gateway returns as `{"error":{"code","message"}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IpcError {
    NotFound {
        route_id: RouteId,
    },
    Conflict {
        route_id: RouteId,
        reason: ConflictReason,
    },
    LeaseOutOfRange {
        requested: u64,
        min: u64,
        max: u64,
    },
    Invalid {
        field: Box<str>,
        reason: Box<str>,
    },
    /// The endpoint is a valid URL but points where no handler may be
    /// (loopback, the router itself, its listeners, ...).
    EndpointRefused {
        endpoint: Box<str>,
        reason: crate::endpoint::Refusal,
    },
    /// The table holds `max_routes` routes already.
    Full {
        max_routes: u64,
    },
    PermissionDenied {
        reason: Box<str>,
    },
    /// The caller may not act for `origin` (not its owner, or pinned to
    /// another source or key).
    Forbidden {
        origin: Box<str>,
        reason: Refusal,
    },
    /// The origin is held by another router of the mesh (DESIGN §3
    /// "Origins are owned mesh-wide"): only a tenant-signed token for it
    /// may add a replica here. 403 `forbidden`, reason
    /// [`ORIGIN_OWNED_ELSEWHERE`](crate::owner::ORIGIN_OWNED_ELSEWHERE).
    OwnedElsewhere {
        origin: Box<str>,
        /// The router_id of the origin router that holds it.
        router: Box<str>,
    },
    /// A new route would exceed `quota` (`limit` routes) for `holder`
    /// (the origin, source address or tenant). Renewals are never refused
    /// by a quota.
    QuotaExceeded {
        quota: Quota,
        holder: Box<str>,
        limit: u64,
    },
    Unsupported {
        what: Box<str>,
    },
    /// A frame from the client could not be decoded; the connection closes.
    Malformed {
        reason: Box<str>,
    },
    /// The daemon cannot take the request now (shutting down, overloaded).
    Unavailable {
        reason: Box<str>,
    },
    Internal {
        reason: Box<str>,
    },
}

impl IpcError {
    /// Stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            IpcError::NotFound { .. } => "not_found",
            IpcError::Conflict { .. } => "conflict",
            IpcError::LeaseOutOfRange { .. } => "lease_out_of_range",
            IpcError::Invalid { .. } => "invalid_field",
            IpcError::EndpointRefused { .. } => "endpoint_refused",
            IpcError::Full { .. } => "full",
            IpcError::PermissionDenied { .. } => "permission_denied",
            IpcError::Forbidden { .. } | IpcError::OwnedElsewhere { .. } => "forbidden",
            IpcError::QuotaExceeded { .. } => "quota_exceeded",
            IpcError::Unsupported { .. } => "unsupported",
            IpcError::Malformed { .. } => "malformed",
            IpcError::Unavailable { .. } => "unavailable",
            IpcError::Internal { .. } => "internal",
        }
    }

    /// The HTTP status the gateway answers with. `not_found` is 404 so the
    /// SDK re-registers after a renew of an unknown route.
    pub fn http_status(&self) -> u16 {
        match self {
            IpcError::NotFound { .. } => 404,
            IpcError::Conflict { .. } => 409,
            IpcError::LeaseOutOfRange { .. }
            | IpcError::Invalid { .. }
            | IpcError::EndpointRefused { .. }
            | IpcError::Malformed { .. } => 400,
            IpcError::PermissionDenied { .. }
            | IpcError::Forbidden { .. }
            | IpcError::OwnedElsewhere { .. }
            | IpcError::QuotaExceeded { .. } => 403,
            IpcError::Unsupported { .. } => 501,
            IpcError::Full { .. } | IpcError::Unavailable { .. } => 503,
            IpcError::Internal { .. } => 500,
        }
    }

    pub fn invalid(field: &str, reason: impl fmt::Display) -> IpcError {
        IpcError::Invalid {
            field: field.into(),
            reason: reason.to_string().into(),
        }
    }

    pub fn internal(reason: impl fmt::Display) -> IpcError {
        IpcError::Internal {
            reason: reason.to_string().into(),
        }
    }
}

impl fmt::Display for IpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpcError::NotFound { route_id } => write!(f, "route {route_id} not found"),
            IpcError::Conflict { route_id, reason } => {
                write!(f, "route {route_id} {}", reason.as_str())
            }
            IpcError::LeaseOutOfRange {
                requested,
                min,
                max,
            } => {
                write!(f, "lease of {requested} s is outside {min}..={max} s")
            }
            IpcError::Invalid { field, reason } => write!(f, "invalid {field}: {reason}"),
            IpcError::EndpointRefused { endpoint, reason } => {
                write!(
                    f,
                    "endpoint {endpoint} refused ({}): it {reason}",
                    reason.code()
                )
            }
            IpcError::Full { max_routes } => write!(f, "route table is full ({max_routes} routes)"),
            IpcError::PermissionDenied { reason } => write!(f, "permission denied: {reason}"),
            IpcError::Forbidden { origin, reason } => match reason {
                Refusal::OriginOwned => write!(
                    f,
                    "origin {origin} has live routes registered by another identity"
                ),
                Refusal::SourceNotPinned => write!(
                    f,
                    "origin {origin} is pinned to other source addresses (agent section)"
                ),
                Refusal::KeyNotPinned => write!(
                    f,
                    "origin {origin} is pinned to a key this request is not signed by (agent section)"
                ),
                Refusal::OtherSubject => {
                    write!(f, "the authenticated agent is not the owner of {origin}")
                }
            },
            IpcError::OwnedElsewhere { origin, router } => write!(
                f,
                "origin {origin} is owned elsewhere in the mesh, by router {router}; only a tenant-signed token for it may add a replica here"
            ),
            IpcError::QuotaExceeded {
                quota,
                holder,
                limit,
            } => write!(
                f,
                "{holder} already holds {limit} routes ({} = {limit})",
                quota.option()
            ),
            IpcError::Unsupported { what } => write!(f, "unsupported: {what}"),
            IpcError::Malformed { reason } => write!(f, "malformed request: {reason}"),
            IpcError::Unavailable { reason } => write!(f, "unavailable: {reason}"),
            IpcError::Internal { reason } => write!(f, "internal error: {reason}"),
        }
    }
}

impl std::error::Error for IpcError {}
