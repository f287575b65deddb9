//! Selection (DESIGN §4): policy decision, eligibility filters in the
//! documented order, and the score; lower score wins, ties by route id.
//!
//! The same functions run in agentd (`agentctl lookup`) and in agent-gw on
//! its FIB replica, so an explanation always describes the decision the
//! gateway makes. `select` is the hot path: one policy match, one index
//! probe, a pass over that capability's candidates, no allocation.
//! `select_ordered` returns the whole ranking once, for the gateway's retry
//! of the next candidate of the *same* snapshot; `explain` adds per-reason
//! rejection counts for humans.
//!
//! The filters are defined once, plainly, on `Route` (`eligibility.rs`);
//! `explain` and the full-scan reference use that definition. `select` and
//! `select_ordered` run the same filters on each candidate's 64-byte hot
//! record (`fast.rs`) and must agree with it exactly — randomized tests and
//! the benchmark compare them on every query.
//!
//! A route ineligible for several reasons is counted once, under the first
//! failing filter in this order. `NoRoute` reports the *furthest* filter
//! any candidate reached (the most specific reason): "3 routes, all
//! unhealthy" says more than "wrong version" for a fourth one.

mod eligibility;
mod fast;
#[doc(hidden)]
pub mod scan;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::policy::{Policy, Rule};
use crate::route::Route;
use crate::table::{RouteTable, SlotId};
use crate::time::Millis;
pub(crate) use eligibility::{decide, evaluate};

/// A lookup request. Tenant and source agent are the verified identity of
/// the caller (agent-gw overwrites whatever the payload claimed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query<'q> {
    pub capability: &'q str,
    pub version: u32,
    pub tenant: &'q str,
    /// The calling agent's URI, if known.
    pub source: Option<&'q str>,
    /// Restrict to routes of this origin agent (caller named a target).
    pub target_agent: Option<&'q str>,
}

impl<'q> Query<'q> {
    pub fn new(capability: &'q str, version: u32, tenant: &'q str) -> Query<'q> {
        Query {
            capability,
            version,
            tenant,
            source: None,
            target_agent: None,
        }
    }
}

/// Why a route was not eligible, in filter order (DESIGN §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reject {
    /// No route for this capability at all, or the name matched with
    /// another interface version (only the latter are counted).
    CapabilityVersion,
    TargetAgent,
    TenantAccess,
    LeaseExpired,
    Unhealthy,
    PeerDown,
    /// Another origin router's claim of the route's origin wins (the race
    /// rule of DESIGN §3 "Origins are owned mesh-wide").
    OriginDisputed,
    Region,
    MaxLatency,
    MaxCost,
    MaxLoad,
    MinTrust,
    /// The rule's `min_proof`: the origin was proven less strongly.
    MinProof,
    MaxHops,
    SourceNotPermitted,
    RequiredPeer,
    DeniedPeer,
    EndpointPrefix,
}

impl Reject {
    pub const COUNT: usize = 18;
    pub const ALL: [Reject; Reject::COUNT] = [
        Reject::CapabilityVersion,
        Reject::TargetAgent,
        Reject::TenantAccess,
        Reject::LeaseExpired,
        Reject::Unhealthy,
        Reject::PeerDown,
        Reject::OriginDisputed,
        Reject::Region,
        Reject::MaxLatency,
        Reject::MaxCost,
        Reject::MaxLoad,
        Reject::MinTrust,
        Reject::MinProof,
        Reject::MaxHops,
        Reject::SourceNotPermitted,
        Reject::RequiredPeer,
        Reject::DeniedPeer,
        Reject::EndpointPrefix,
    ];

    /// Stable name for JSON output and error codes.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::CapabilityVersion => "capability_version",
            Reject::TargetAgent => "target_agent",
            Reject::TenantAccess => "tenant_access",
            Reject::LeaseExpired => "lease_expired",
            Reject::Unhealthy => "unhealthy",
            Reject::PeerDown => "peer_down",
            Reject::OriginDisputed => "origin_disputed",
            Reject::Region => "region",
            Reject::MaxLatency => "max_latency",
            Reject::MaxCost => "max_cost",
            Reject::MaxLoad => "max_load",
            Reject::MinTrust => "min_trust",
            Reject::MinProof => "min_proof",
            Reject::MaxHops => "max_hops",
            Reject::SourceNotPermitted => "source_not_permitted",
            Reject::RequiredPeer => "required_peer",
            Reject::DeniedPeer => "denied_peer",
            Reject::EndpointPrefix => "endpoint_prefix",
        }
    }
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Rejected routes per reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RejectionCounts([u32; Reject::COUNT]);

impl RejectionCounts {
    pub fn get(&self, r: Reject) -> u32 {
        self.0[r as usize]
    }

    fn add(&mut self, r: Reject, n: u32) {
        self.0[r as usize] = self.0[r as usize].saturating_add(n);
    }

    /// Every reason in filter order, zeros included.
    pub fn iter(&self) -> impl Iterator<Item = (Reject, u32)> + '_ {
        Reject::ALL.iter().map(|&r| (r, self.get(r)))
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|&n| u64::from(n)).sum()
    }
}

/// An eligible route with its score.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selected<'a> {
    pub slot: SlotId,
    pub route: &'a Route,
    pub score: u64,
}

impl Selected<'_> {
    /// Ranking order: lower score, then smaller route id.
    #[inline]
    pub fn ranks_before(&self, other: &Selected<'_>) -> bool {
        (self.score, &self.route.id) < (other.score, &other.route.id)
    }
}

/// Why the policy refused the request outright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial<'a> {
    /// A deny rule matched (final: no lower rule is consulted).
    Rule(&'a Rule),
    /// No rule matched and the default action is deny.
    DefaultAction,
    /// The configured policy failed to load; the reason is its error.
    PolicyInvalid(&'a str),
}

/// Why there is no route to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal<'a> {
    Denied(Denial<'a>),
    /// Nothing eligible; the most specific reason.
    NoRoute(Reject),
}

/// The best eligible route for `q` at `now`.
pub fn select<'a>(
    table: &'a RouteTable,
    policy: &'a Policy,
    q: &Query<'_>,
    now: Millis,
) -> Result<Selected<'a>, Refusal<'a>> {
    // Index first: the policy work below overlaps the candidates' fetch.
    let group = table.group(q.capability);
    let ctx = decide(policy, q).map_err(Refusal::Denied)?;
    let res = fast::Resolved::new(table, ctx, q);
    let slots = table.narrow(group, q.version).slots;
    let mut best: Option<(u32, u64)> = None;
    let mut furthest = Reject::CapabilityVersion;
    for &s in slots {
        match fast::evaluate(table, s, table.hot(s), q, &res, now) {
            Ok(score) => {
                let better = match best {
                    None => true,
                    Some((b, b_score)) => {
                        score < b_score
                            || (score == b_score
                                && table.route_in(s).map(|r| &r.id)
                                    < table.route_in(b).map(|r| &r.id))
                    }
                };
                if better {
                    best = Some((s, score));
                }
            }
            Err(r) => furthest = furthest.max(r),
        }
    }
    best.and_then(|(s, score)| {
        let slot = table.slot_id(s);
        table
            .route_in(s)
            .map(|route| Selected { slot, route, score })
    })
    .ok_or(Refusal::NoRoute(furthest))
}

/// Every eligible route, best first (never empty on `Ok`). The gateway
/// retries down this list so a retry never consults a newer table.
pub fn select_ordered<'a>(
    table: &'a RouteTable,
    policy: &'a Policy,
    q: &Query<'_>,
    now: Millis,
) -> Result<Vec<Selected<'a>>, Refusal<'a>> {
    let group = table.group(q.capability);
    let ctx = decide(policy, q).map_err(Refusal::Denied)?;
    let res = fast::Resolved::new(table, ctx, q);
    let mut furthest = Reject::CapabilityVersion;
    let mut ranked = Vec::new();
    let slots = table.narrow(group, q.version).slots;
    for &s in slots {
        match fast::evaluate(table, s, table.hot(s), q, &res, now) {
            Ok(score) => {
                if let Some(route) = table.route_in(s) {
                    ranked.push(Selected {
                        slot: table.slot_id(s),
                        route,
                        score,
                    });
                }
            }
            Err(r) => furthest = furthest.max(r),
        }
    }
    if ranked.is_empty() {
        return Err(Refusal::NoRoute(furthest));
    }
    ranked.sort_unstable_by(|a, b| (a.score, &a.route.id).cmp(&(b.score, &b.route.id)));
    Ok(ranked)
}

/// What `agentctl lookup --explain` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation<'a> {
    pub outcome: Result<Selected<'a>, Refusal<'a>>,
    /// The rule that decided (allow or deny), if any matched.
    pub matched_rule: Option<&'a Rule>,
    /// Eligible routes, best first. Empty when the policy denied.
    pub ranked: Vec<Selected<'a>>,
    /// Per-reason counts; all zero when the policy denied (no route was
    /// evaluated). `CapabilityVersion` counts routes with the capability's
    /// name but another version.
    pub rejections: RejectionCounts,
}

pub fn explain<'a>(
    table: &'a RouteTable,
    policy: &'a Policy,
    q: &Query<'_>,
    now: Millis,
) -> Explanation<'a> {
    let mut rejections = RejectionCounts::default();
    let ctx = match decide(policy, q) {
        Ok(ctx) => ctx,
        Err(d) => {
            let matched_rule = match d {
                Denial::Rule(r) => Some(r),
                _ => None,
            };
            return Explanation {
                outcome: Err(Refusal::Denied(d)),
                matched_rule,
                ranked: Vec::new(),
                rejections,
            };
        }
    };
    let run = table.run(q.capability, q.version);
    rejections.add(
        Reject::CapabilityVersion,
        u32::try_from(run.other_versions).unwrap_or(u32::MAX),
    );
    let mut furthest = Reject::CapabilityVersion;
    let mut ranked = Vec::new();
    for &s in run.slots {
        let Some((slot, route, peer_up)) = table.cell(s) else {
            continue;
        };
        match evaluate(route, peer_up, q, &ctx, now) {
            Ok(score) => ranked.push(Selected { slot, route, score }),
            Err(r) => {
                rejections.add(r, 1);
                furthest = furthest.max(r);
            }
        }
    }
    ranked.sort_unstable_by(|a, b| (a.score, &a.route.id).cmp(&(b.score, &b.route.id)));
    let outcome = ranked.first().copied().ok_or(Refusal::NoRoute(furthest));
    Explanation {
        outcome,
        matched_rule: ctx.rule,
        ranked,
        rejections,
    }
}
