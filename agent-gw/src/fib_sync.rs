//! The gateway's FIB replica and the decision on it.
//!
//! Invocations are decided here, on the gateway's own copy of agentd's
//! routes and policy, with `agentd::select` — the same code `agentctl
//! lookup` explains — and never with an IPC round trip. Lease deadlines
//! are absolute `CLOCK_MONOTONIC` instants, so an expired route is
//! ineligible at its deadline even when agentd is gone; `expire_due` only
//! reclaims the memory, driven by the table's next deadline.

use agentd::policy::Policy;
use agentd::select::{self, Denial, Query, Refusal, Reject};
use agentd::table::RouteTable;
use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode};
use crate::forward::target::Target;
use crate::forward::Candidate;

#[derive(Debug)]
pub struct Fib {
    table: RouteTable,
    policy: Policy,
}

/// A candidate plus its score, for `/agent/v1/route`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ranked {
    pub candidate: Candidate,
    pub origin: Box<str>,
    pub tenant: Box<str>,
    pub region: Box<str>,
    pub source: &'static str,
    pub score: u64,
}

impl Fib {
    pub fn new(max_routes: usize) -> Fib {
        Fib {
            table: RouteTable::new(max_routes),
            policy: Policy::default(),
        }
    }

    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    pub fn table_mut(&mut self) -> &mut RouteTable {
        &mut self.table
    }

    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    pub fn generation(&self) -> u64 {
        self.table.generation()
    }

    /// Drops routes whose lease ended by `now`; returns how many.
    pub fn expire_due(&mut self, now: Millis) -> usize {
        self.table.expire(now).len()
    }

    pub fn next_deadline(&self) -> Option<Millis> {
        self.table.next_deadline()
    }

    /// The ordered candidates for `q` at `now` — one snapshot the whole
    /// retry sequence of a call walks down — or a typed refusal.
    pub fn decide(&self, q: &Query<'_>, now: Millis) -> Result<Vec<Ranked>, ApiError> {
        let ranked =
            select::select_ordered(&self.table, &self.policy, q, now).map_err(|r| refusal(q, r))?;
        let mut out = Vec::with_capacity(ranked.len());
        let mut unusable = 0usize;
        for s in ranked {
            let r = s.route;
            // Only endpoints we can reach over local HTTP/1.1 are
            // candidates here; peer/relay forwarding arrives later.
            let Ok(target) = Target::parse(&r.endpoint) else {
                unusable += 1;
                continue;
            };
            out.push(Ranked {
                candidate: Candidate {
                    route_id: r.id.clone(),
                    target,
                    idempotent: r.contract.as_ref().is_some_and(|c| c.idempotent),
                },
                origin: r.origin.clone(),
                tenant: r.tenant.clone(),
                region: r.region.clone(),
                source: r.source.as_str(),
                score: s.score,
            });
        }
        if out.is_empty() {
            return Err(ApiError::new(
                ErrorCode::NoRoute,
                format!(
                    "no usable route for {} v{}: {unusable} eligible route(s) have endpoints this gateway cannot reach",
                    q.capability, q.version
                ),
            )
            .rejected()
            .capability(q.capability)
            .reason("endpoint_unsupported"));
        }
        Ok(out)
    }
}

/// The typed answer for "nothing to call".
fn refusal(q: &Query<'_>, r: Refusal<'_>) -> ApiError {
    let cap = q.capability;
    let v = q.version;
    match r {
        Refusal::Denied(Denial::Rule(rule)) => ApiError::new(
            ErrorCode::PolicyDenied,
            format!(
                "{cap} v{v} denied for tenant {} by policy rule {}",
                q.tenant, rule.id
            ),
        ),
        Refusal::Denied(Denial::DefaultAction) => ApiError::new(
            ErrorCode::PolicyDenied,
            format!(
                "{cap} v{v} denied for tenant {}: no rule matched and the default action is deny",
                q.tenant
            ),
        ),
        Refusal::Denied(Denial::PolicyInvalid(why)) => ApiError::new(
            ErrorCode::PolicyDenied,
            format!("{cap} v{v} denied: the configured policy is invalid ({why})"),
        ),
        Refusal::NoRoute(reason) => {
            let why = match reason {
                Reject::CapabilityVersion => "no route offers this capability and version",
                Reject::TargetAgent => "no route of the named target agent",
                Reject::TenantAccess => "no route is open to this tenant or source",
                Reject::LeaseExpired => "every route's lease has expired",
                Reject::Unhealthy => "every route is unhealthy",
                Reject::PeerDown => "the peer router of every route is down",
                _ => "every route is excluded by the policy's constraints",
            };
            ApiError::new(
                ErrorCode::NoRoute,
                format!(
                    "no eligible route for {cap} v{v}: {why} ({})",
                    reason.as_str()
                ),
            )
            .reason(reason.as_str())
        }
    }
    .rejected()
    .capability(cap)
}
