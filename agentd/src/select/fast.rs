//! The hot-path form of the filters in `eligibility.rs`, reading each
//! candidate's 64-byte hot record instead of its `Route`.
//!
//! It must reject for exactly the same reason and score exactly the same
//! as `eligibility::evaluate`; the full-scan reference and `explain` use
//! that plain definition, and the randomized tests and the benchmark
//! compare the two on every query. Text comparisons that cannot be turned
//! into symbol comparisons (target agent, access lists, region, endpoint
//! prefix) fall back to the `Route`, and only when the query or the rule
//! asks for them.

use super::eligibility::{admits, Ctx};
use super::{Query, Reject};
use crate::route::{Attributes, Route};
use crate::score::score;
use crate::table::{Hot, RouteTable, DISPUTED, HEALTHY, PEER_UP, SHARED, SOURCES};
use crate::time::Millis;

/// A request's strings resolved to table symbols once per lookup.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved<'a> {
    pub ctx: Ctx<'a>,
    tenant: u32,
    preferred: Option<u32>,
    required: Option<u32>,
    denied: Option<u32>,
}

impl<'a> Resolved<'a> {
    pub fn new(table: &RouteTable, ctx: Ctx<'a>, q: &Query<'_>) -> Resolved<'a> {
        let sym = |p: &Option<Box<str>>| p.as_deref().map(|p| table.symbol(p));
        let (preferred, required, denied) = match ctx.rule {
            Some(r) => (
                sym(&r.preferred_peer),
                sym(&r.constraints.required_peer),
                sym(&r.constraints.denied_peer),
            ),
            None => (None, None, None),
        };
        Resolved {
            ctx,
            tenant: table.symbol(q.tenant),
            preferred,
            required,
            denied,
        }
    }
}

#[inline]
pub(crate) fn evaluate(
    table: &RouteTable,
    slot: u32,
    h: &Hot,
    q: &Query<'_>,
    res: &Resolved<'_>,
    now: Millis,
) -> Result<u64, Reject> {
    let route = || -> Option<&Route> { table.route_in(slot) };
    if let Some(t) = q.target_agent {
        if route().is_none_or(|r| *r.origin != *t) {
            return Err(Reject::TargetAgent);
        }
    }
    let admitted = if h.flags & (SHARED | SOURCES) != 0 {
        route().is_some_and(|r| admits(r, q))
    } else {
        h.tenant == res.tenant
    };
    if !admitted {
        return Err(Reject::TenantAccess);
    }
    if !h.live_at(now) {
        return Err(Reject::LeaseExpired);
    }
    if !h.has(HEALTHY) {
        return Err(Reject::Unhealthy);
    }
    if !h.has(PEER_UP) {
        return Err(Reject::PeerDown);
    }
    if h.has(DISPUTED) {
        return Err(Reject::OriginDisputed);
    }
    let mut penalty = 0;
    if let Some(rule) = res.ctx.rule {
        let c = &rule.constraints;
        if let Some(want) = c.region.as_deref() {
            if route().is_none_or(|r| *r.region != *want) {
                return Err(Reject::Region);
            }
        }
        if c.max_latency_ms.is_some_and(|m| h.latency_ms > m) {
            return Err(Reject::MaxLatency);
        }
        if c.max_cost.is_some_and(|m| h.cost_micros > m) {
            return Err(Reject::MaxCost);
        }
        if c.max_load.is_some_and(|m| h.load_permille > m) {
            return Err(Reject::MaxLoad);
        }
        if c.min_trust.is_some_and(|m| h.trust.min(100) < m) {
            return Err(Reject::MinTrust);
        }
        if c.min_proof.is_some_and(|m| h.proof < m) {
            return Err(Reject::MinProof);
        }
        if c.max_hops.is_some_and(|m| u64::from(h.hops) > m) {
            return Err(Reject::MaxHops);
        }
        if !c.sources.intersects(h.source) {
            return Err(Reject::SourceNotPermitted);
        }
        if res.required.is_some_and(|p| h.next_hop != p) {
            return Err(Reject::RequiredPeer);
        }
        if res.denied.is_some_and(|p| h.next_hop == p) {
            return Err(Reject::DeniedPeer);
        }
        if let Some(prefix) = c.endpoint_prefix.as_deref() {
            if route().is_none_or(|r| !r.endpoint.starts_with(prefix)) {
                return Err(Reject::EndpointPrefix);
            }
        }
        if res.preferred.is_some_and(|p| h.next_hop != p) {
            penalty = rule.nonpreferred_penalty;
        }
    }
    let attrs = Attributes {
        latency_ms: h.latency_ms,
        cost_micros: h.cost_micros,
        load_permille: h.load_permille,
        trust: h.trust,
    };
    Ok(score(&attrs, u64::from(h.hops), penalty, res.ctx.weights))
}
