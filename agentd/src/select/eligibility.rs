//! The per-route filters and the policy decision, shared by the indexed
//! selection and the full-scan reference so both apply one definition.

use super::{Denial, Query, Reject};
use crate::policy::{Action, Constraints, Policy, Rule};
use crate::route::Route;
use crate::score::{score, Weights};
use crate::time::Millis;

/// What the policy decided for a request that it allows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub rule: Option<&'a Rule>,
    pub weights: &'a Weights,
}

/// Applies the policy: invalid policy and deny rules refuse outright (a
/// selected deny is final); otherwise the matched allow rule, or the
/// default weights, drive filtering and scoring.
pub(crate) fn decide<'a>(policy: &'a Policy, q: &Query<'_>) -> Result<Ctx<'a>, Denial<'a>> {
    if let Some(reason) = &policy.invalid {
        return Err(Denial::PolicyInvalid(reason));
    }
    match policy.match_rule(q.tenant, q.source, q.capability) {
        Some(r) if r.action == Action::Deny => Err(Denial::Rule(r)),
        Some(r) => Ok(Ctx {
            rule: Some(r),
            weights: &r.weights,
        }),
        None if policy.default_action == Action::Deny => Err(Denial::DefaultAction),
        None => Ok(Ctx {
            rule: None,
            weights: &policy.default_weights,
        }),
    }
}

/// Tenant/access filter: the caller's tenant is the route's, or listed
/// (or `*`) in its allowed tenants; a non-empty allowed-sources list must
/// name the calling agent (or be `*`), and an anonymous caller fails it.
#[inline]
pub(crate) fn admits(route: &Route, q: &Query<'_>) -> bool {
    let tenant_ok = *route.tenant == *q.tenant
        || route
            .access
            .allowed_tenants
            .iter()
            .any(|t| &**t == "*" || **t == *q.tenant);
    tenant_ok
        && (route.access.allowed_sources.is_empty()
            || q.source.is_some_and(|s| {
                route
                    .access
                    .allowed_sources
                    .iter()
                    .any(|a| &**a == "*" || **a == *s)
            }))
}

#[inline]
fn check_constraints(route: &Route, c: &Constraints) -> Result<(), Reject> {
    let a = &route.attrs;
    let next_hop = route.next_hop.as_deref();
    if c.region
        .as_ref()
        .is_some_and(|want| **want != *route.region)
    {
        return Err(Reject::Region);
    }
    if c.max_latency_ms.is_some_and(|m| a.latency_ms > m) {
        return Err(Reject::MaxLatency);
    }
    if c.max_cost.is_some_and(|m| a.cost_micros > m) {
        return Err(Reject::MaxCost);
    }
    if c.max_load.is_some_and(|m| a.load_permille > m) {
        return Err(Reject::MaxLoad);
    }
    // Trust above 100 counts as 100, as in the score.
    if c.min_trust.is_some_and(|m| a.trust.min(100) < m) {
        return Err(Reject::MinTrust);
    }
    if c.min_proof.is_some_and(|m| route.proof < m) {
        return Err(Reject::MinProof);
    }
    if c.max_hops.is_some_and(|m| route.hops() > m) {
        return Err(Reject::MaxHops);
    }
    if !c.sources.contains(route.source) {
        return Err(Reject::SourceNotPermitted);
    }
    if c.required_peer
        .as_deref()
        .is_some_and(|p| next_hop != Some(p))
    {
        return Err(Reject::RequiredPeer);
    }
    if c.denied_peer
        .as_deref()
        .is_some_and(|p| next_hop == Some(p))
    {
        return Err(Reject::DeniedPeer);
    }
    if c.endpoint_prefix
        .as_deref()
        .is_some_and(|p| !route.endpoint.starts_with(p))
    {
        return Err(Reject::EndpointPrefix);
    }
    Ok(())
}

/// Filters one candidate (capability and version already matched) and
/// scores it if eligible.
#[inline]
pub(crate) fn evaluate(
    route: &Route,
    peer_up: bool,
    q: &Query<'_>,
    ctx: &Ctx<'_>,
    now: Millis,
) -> Result<u64, Reject> {
    if q.target_agent.is_some_and(|t| *route.origin != *t) {
        return Err(Reject::TargetAgent);
    }
    if !admits(route, q) {
        return Err(Reject::TenantAccess);
    }
    if !route.lease.live_at(now) {
        return Err(Reject::LeaseExpired);
    }
    if !route.healthy {
        return Err(Reject::Unhealthy);
    }
    if !peer_up {
        return Err(Reject::PeerDown);
    }
    if route.disputed {
        return Err(Reject::OriginDisputed);
    }
    let penalty = match ctx.rule {
        Some(rule) => {
            check_constraints(route, &rule.constraints)?;
            rule.penalty_for(route.next_hop.as_deref())
        }
        None => 0,
    };
    Ok(score(&route.attrs, route.hops(), penalty, ctx.weights))
}
