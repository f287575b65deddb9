//! The gateway's FIB replica and the decision on it.
//!
//! Invocations are decided here, on the gateway's own copy of agentd's
//! routes and policy, with `agentd::select` — the same code `agentctl
//! lookup` explains — and never with an IPC round trip. Lease deadlines
//! are absolute `CLOCK_MONOTONIC` instants, so an expired route is
//! ineligible at its deadline even when agentd is gone; `expire_due` only
//! reclaims the memory, driven by the table's next deadline.

use std::cell::RefCell;
use std::collections::HashMap;

use agentd::fib::replica::{Applied, FibReplica, ReplicaError};
use agentd::fib::{AgentAddr, FibEvent, PeerLink};
use agentd::route::{Route, RouteSource};
use agentd::select::{self, Denial, Query, Refusal, Reject};
use agentd::time::Millis;

use crate::api::error::{ApiError, ErrorCode};
use crate::forward::target::Target;
use crate::forward::{Candidate, Dest};

#[derive(Debug)]
pub struct Fib {
    replica: FibReplica,
    /// Parsed endpoint URLs by their text, so a call does not re-parse
    /// its route's URL. Bounded: emptied when it reaches `max_targets`,
    /// then refilled by the calls that follow.
    targets: RefCell<HashMap<Box<str>, Target>>,
    max_targets: usize,
}

/// Most parsed endpoints kept. An entry costs ~340 B and a parse about a
/// microsecond: sized to a route table, the cache grew to 3.4 MB at 10k
/// routes once each had been called (more than the routes themselves),
/// for calls that this many hot endpoints already serve.
const MAX_TARGETS: usize = 1024;

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
            replica: FibReplica::new(max_routes),
            targets: RefCell::new(HashMap::new()),
            max_targets: max_routes.clamp(16, MAX_TARGETS),
        }
    }

    pub fn replica(&self) -> &FibReplica {
        &self.replica
    }

    /// Applies one event of agentd's FIB stream.
    pub fn apply(&mut self, event: FibEvent, now: Millis) -> Result<Applied, ReplicaError> {
        self.replica.apply(event, now)
    }

    /// The subscription ended; keep serving the last complete state.
    pub fn disconnected(&mut self) {
        self.replica.disconnected();
    }

    /// Generation of the served state; `None` before the first snapshot.
    pub fn generation(&self) -> Option<u64> {
        self.replica.generation()
    }

    /// The established peer sessions agentd published (sorted by
    /// router_id): whom the peer data plane dials and accepts, each with
    /// the key its ARPX session verified.
    pub fn links(&self) -> impl Iterator<Item = &PeerLink> {
        self.replica.links()
    }

    /// The link of `router_id`, if its session is established.
    pub fn link(&self, router_id: &str) -> Option<&PeerLink> {
        self.replica.link(router_id)
    }

    /// Grows whenever the link set changes.
    pub fn links_generation(&self) -> u64 {
        self.replica.links_generation()
    }

    /// The agent bound to local address `ip` (DESIGN §7 "IPv6 /128").
    /// An IPv4 address (or IPv4-mapped one) is never an agent's.
    pub fn agent_at(&self, ip: std::net::IpAddr) -> Option<std::sync::Arc<AgentAddr>> {
        let addrs = self.replica.agent_addrs();
        match ip.to_canonical() {
            std::net::IpAddr::V6(v6) if !addrs.is_empty() => addrs.get(&v6).cloned(),
            _ => None,
        }
    }

    /// The agent addresses, with a generation that grows when they change.
    pub fn agent_addrs(&self) -> &agentd::fib::agent_addrs::AgentAddrs {
        self.replica.agent_addrs()
    }

    pub fn routes(&self) -> usize {
        self.replica.table().len()
    }

    /// Drops routes whose lease ended by `now`; returns how many.
    pub fn expire_due(&mut self, now: Millis) -> usize {
        self.replica.expire(now).len()
    }

    pub fn next_deadline(&self) -> Option<Millis> {
        self.replica.next_deadline()
    }

    /// The ordered candidates for `q` at `now` — one snapshot the whole
    /// retry sequence of a call walks down — or a typed refusal.
    pub fn decide(&self, q: &Query<'_>, now: Millis) -> Result<Vec<Ranked>, ApiError> {
        self.decide_with(q, now, |r, candidate, score| Ranked {
            candidate,
            origin: r.origin.as_str().into(),
            tenant: r.tenant.as_str().into(),
            region: r.region.as_str().into(),
            source: r.source.as_str(),
            score,
        })
    }

    /// [`Fib::decide`] without the per-route details only `/route` shows:
    /// what a call walks down.
    pub fn candidates(&self, q: &Query<'_>, now: Millis) -> Result<Vec<Candidate>, ApiError> {
        self.decide_with(q, now, |_, candidate, _| candidate)
    }

    fn decide_with<T>(
        &self,
        q: &Query<'_>,
        now: Millis,
        mut make: impl FnMut(&Route, Candidate, u64) -> T,
    ) -> Result<Vec<T>, ApiError> {
        if self.replica.generation().is_none() {
            return Err(ApiError::new(
                ErrorCode::ControlPlaneUnavailable,
                format!(
                    "cannot route {} v{}: no FIB received from agentd yet",
                    q.capability, q.version
                ),
            )
            .rejected()
            .capability(q.capability)
            .retry_after_ms(1000));
        }
        let ranked = select::select_ordered(self.replica.table(), self.replica.policy(), q, now)
            .map_err(|r| refusal(q, r))?;
        let mut out = Vec::with_capacity(ranked.len());
        let mut unusable = 0usize;
        for s in ranked {
            let r = s.route;
            // A peer path is a candidate of its own kind: its endpoint is
            // the next hop's data plane, not a handler URL, so it is never
            // parsed or SSRF-checked as one. Local and static routes need
            // an endpoint we can reach over HTTP/1.1. A relay route is
            // a peer path whose next hop is our relay client (its link
            // says how to reach it).
            let dest = match (r.source, &r.next_hop) {
                (RouteSource::Peer | RouteSource::Relay, Some(hop)) => Dest::Peer {
                    next_hop: hop.as_str().into(),
                },
                (RouteSource::Local | RouteSource::Static, _) => match self.target(&r.endpoint) {
                    Some(target) => Dest::Handler(target),
                    None => {
                        unusable += 1;
                        continue;
                    }
                },
                _ => {
                    unusable += 1;
                    continue;
                }
            };
            let candidate = Candidate {
                route_id: r.id.clone(),
                dest,
                idempotent: r.contract.as_ref().is_some_and(|c| c.idempotent),
                allow_loopback: r.allow_loopback,
                lan_source: match r.source {
                    RouteSource::Local => r.owner.and_then(|o| o.source()),
                    _ => None,
                },
            };
            out.push(make(r, candidate, s.score));
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

impl Fib {
    /// `endpoint` parsed, from the cache when seen before; `None` when it
    /// is not a URL this gateway can forward to.
    fn target(&self, endpoint: &str) -> Option<Target> {
        let mut cache = self.targets.borrow_mut();
        if let Some(t) = cache.get(endpoint) {
            return Some(t.clone());
        }
        let t = Target::parse(endpoint).ok()?;
        if cache.len() >= self.max_targets {
            cache.clear();
        }
        cache.insert(endpoint.into(), t.clone());
        Some(t)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_targets_are_cached_within_a_bound() {
        let fib = Fib::new(1);
        let url = "http://192.0.2.10:8080/invoke";
        assert_eq!(fib.target(url), Target::parse(url).ok());
        assert_eq!(fib.target(url), Target::parse(url).ok());
        assert_eq!(fib.targets.borrow().len(), 1);
        assert_eq!(fib.target("https://192.0.2.10:1/x"), None);
        assert_eq!(fib.targets.borrow().len(), 1);
        for port in 1..=40 {
            let u = format!("http://192.0.2.10:{port}/x");
            assert_eq!(
                fib.target(&u).unwrap().connect_addr(),
                format!("192.0.2.10:{port}")
            );
            assert!(fib.targets.borrow().len() <= fib.max_targets);
        }
    }
}
