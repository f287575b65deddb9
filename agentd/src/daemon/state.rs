//! The daemon's decisions, sans-IO: every input (an IPC request, a reload
//! with an already-loaded configuration, a lease deadline, a health probe
//! result) is a method call with the current time as an argument, and
//! every effect is a return value — a reply and the FIB changes to
//! publish. Tests drive it with made-up instants; the event loop in
//! `instance` only moves bytes and timers.
//!
//! Configuration is swapped atomically: a reload builds the complete new
//! table and policy first and replaces the live ones only when everything
//! succeeded, so a failure leaves the last valid state untouched (and
//! `status` reports why).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::origins::{scoped_route_id, Ledger};
use super::persist::{LeaseRef, SavedLease};
use crate::config::{LoadError, Runtime, STATIC_ID_PREFIX};
use crate::endpoint::{LocalAddrs, Refused};
use crate::fib::FibChange;
use crate::ipc::message::{
    AgentPage, AgentView, AgentsQuery, ConfigProblem, ConflictReason, GatewayStats, GatewayView,
    IpcError, LeaseGrant, Registration, Renewal, RequestBody, ResponseBody, RoutePage, RouteView,
    RoutesQuery, StatsView, StatusView, MAX_PAGE, MAX_STATUS_PROBLEMS,
};
use crate::owner::{may_act, Caller, Owner};
use crate::policy::Policy;
use crate::route::{Attributes, Lease, OriginProof, Route, RouteId, RouteSource};
use crate::table::{RouteTable, TableError, UpsertOutcome};
use crate::time::Millis;

mod claims;
mod leases;
mod links;
mod own_addrs;
mod peer_routes;
mod views;

pub use leases::derived_route_id;
pub use peer_routes::{
    data_plane_authority, data_plane_url, PeerPath, PeerPathError, MAX_PATH_LEN,
};

/// FIB changes a state transition produced, in order.
pub type Changes = Vec<FibChange>;

/// The reply to one request plus what to publish.
#[derive(Debug)]
pub struct Handled {
    pub reply: Result<ResponseBody, IpcError>,
    pub changes: Changes,
}

/// All routing state of one agentd.
#[derive(Debug)]
pub struct State {
    table: RouteTable,
    runtime: Runtime,
    /// Local routes whose agent asked for a public IPv6 address (pruned
    /// to live routes by [`State::ipv6_wanted`]).
    ipv6_wanted: HashSet<RouteId>,
    /// Owners, route ids and counts of the local routes (ownership and
    /// quotas).
    ledger: Ledger,
    /// Every route's claim of its origin, by origin router (mesh-wide
    /// ownership and the race rule, `claims`).
    claims: claims::Claims,
    /// Successful configuration loads; a refused reload keeps it.
    config_generation: u64,
    config_source: Box<str>,
    /// Why the last load or reload was refused; `None` once one succeeds.
    config_error: Option<Box<str>>,
    started: Millis,
    software: Box<str>,
    counters: BTreeMap<Box<str>, u64>,
    /// agent-gw's latest counters and when they arrived.
    gateway: Option<(GatewayStats, Millis)>,
    /// The router's interface addresses for endpoint checks, read at most
    /// once a second (the one input that is not an argument: tests
    /// replace its source).
    own_addrs: own_addrs::OwnAddrs,
    /// Established peer sessions for the data plane, sorted by router_id
    /// (`links`).
    links: Vec<crate::fib::PeerLink>,
    /// Routers admitted by discovery right now (peers in memory, not in
    /// the file): they may have links like configured peers.
    admitted: std::collections::BTreeSet<Box<str>>,
    /// Routers the relay roles brought (our relay clients, our relays):
    /// peers in memory as long as they stay connected.
    relayed: std::collections::BTreeSet<Box<str>>,
    /// Peer router addresses the driver knows besides the configured ones
    /// (admitted routers, discovery candidates), as of the last request
    /// that checks an endpoint: LAN endpoints never point at them.
    peer_addrs: Vec<std::net::IpAddr>,
}

impl State {
    /// State at startup, normally on the valid part of the file (problems
    /// listed in `status`). An unusable configuration (`Err`) leaves the
    /// tables empty and the policy denying everything, with the reason in
    /// `status`.
    pub fn start(
        loaded: Result<Runtime, LoadError>,
        source: &str,
        software: &str,
        now: Millis,
    ) -> State {
        let mut state = State {
            table: RouteTable::new(0),
            runtime: Runtime::default(),
            ipv6_wanted: HashSet::new(),
            ledger: Ledger::default(),
            claims: claims::Claims::default(),
            config_generation: 0,
            config_source: source.into(),
            config_error: None,
            started: now,
            software: software.into(),
            counters: BTreeMap::new(),
            gateway: None,
            own_addrs: own_addrs::OwnAddrs::new(crate::endpoint::local_addrs),
            links: Vec::new(),
            admitted: std::collections::BTreeSet::new(),
            relayed: std::collections::BTreeSet::new(),
            peer_addrs: Vec::new(),
        };
        let failure = match loaded {
            Ok(mut rt) => {
                // Like the file's own problems: a static route the table
                // cannot take is skipped and reported, the rest serves.
                let mut table = RouteTable::new(rt.max_routes);
                let mut kept = Vec::with_capacity(rt.static_routes.len());
                for r in std::mem::take(&mut rt.static_routes) {
                    match table.upsert(r.clone()) {
                        Ok(_) => kept.push(r),
                        Err(error) => rt.problems.push(static_route_problem(source, &r, error)),
                    }
                }
                rt.static_routes = kept;
                state.table = table;
                state.runtime = rt;
                state.config_generation = 1;
                None
            }
            Err(e) => Some((e.to_string(), Runtime::default())),
        };
        if let Some((reason, rt)) = failure {
            // Keep what is needed to serve at all (socket, limits) but no
            // routes and no permission: an unknown policy must not allow.
            state.table = RouteTable::new(rt.max_routes);
            state.runtime = Runtime {
                static_routes: Vec::new(),
                policy: Policy::invalid(&format!("configuration invalid: {reason}")),
                ..rt
            };
            state.config_error = Some(reason.into());
        }
        state.reclaim_all();
        state
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    pub fn policy(&self) -> &Policy {
        &self.runtime.policy
    }

    /// The table generation: FIB snapshots and deltas carry it.
    pub fn generation(&self) -> u64 {
        self.table.generation()
    }

    pub fn config_generation(&self) -> u64 {
        self.config_generation
    }

    pub fn config_error(&self) -> Option<&str> {
        self.config_error.as_deref()
    }

    /// When `expire` must run next (the earliest lease deadline).
    pub fn next_deadline(&self) -> Option<Millis> {
        self.table.next_deadline()
    }

    fn count(&mut self, name: &str) {
        *self.counters.entry(name.into()).or_insert(0) += 1;
    }

    // ===== reload =====

    /// Replaces static routes, policy and settings with `loaded`, or keeps
    /// everything and records why not. Returns the table generation after
    /// the change and the FIB changes to publish.
    ///
    /// The new static routes are first checked against a scratch table
    /// holding everything that will survive (capacity, id conflicts); only
    /// then is the live table edited, so a refusal changes nothing and the
    /// FIB generation stays continuous for subscribers.
    pub fn reload(
        &mut self,
        loaded: Result<Runtime, LoadError>,
    ) -> Result<(u64, Changes), IpcError> {
        let checked = loaded.map_err(|e| e.to_string()).and_then(|rt| {
            let dynamic = self
                .table
                .iter()
                .filter(|r| r.source != RouteSource::Static);
            build_table(&rt, dynamic).map_err(|e| e.to_string())?;
            self.static_claims_free(&rt).map_err(|e| e.to_string())?;
            Ok(rt)
        });
        let rt = match checked {
            Ok(rt) => rt,
            Err(reason) => {
                self.count("reloads.failed");
                self.config_error = Some(reason.as_str().into());
                return Err(IpcError::Invalid {
                    field: "config".into(),
                    reason: reason.into(),
                });
            }
        };
        let mut changes: Changes = Vec::new();
        let stale: Vec<RouteId> = self
            .table
            .iter()
            .filter(|r| {
                r.source == RouteSource::Static && !rt.static_routes.iter().any(|n| n.id == r.id)
            })
            .map(|r| r.id.clone())
            .collect();
        for id in stale {
            self.table.remove(&id);
            changes.push(FibChange::Remove(id));
        }
        self.table.set_max_routes(rt.max_routes);
        for new in &rt.static_routes {
            // A route_id names one route and ours wins: paths learned from
            // peers that hold a new static route's id go (new paths for it
            // are refused, `upsert_peer_path`).
            changes.extend(self.drop_paths_of(&new.id));
            // A static route keeps its health verdict across a reload.
            let healthy = self
                .table
                .get(&new.id)
                .map_or(new.healthy, |old| old.healthy);
            let route = Route {
                healthy,
                ..new.clone()
            };
            match self.table.upsert(route.clone()) {
                Ok(UpsertOutcome::Unchanged) => {}
                Ok(_) => changes.push(FibChange::Upsert(Box::new(route))),
                // The scratch table accepted the same routes, so this means
                // the check and the edit disagree: say so loudly.
                Err(e) => {
                    self.count("reloads.inconsistent");
                    self.config_error =
                        Some(format!("static route {} not applied: {e}", new.id).into());
                }
            }
        }
        if !rt.endpoints.allow_loopback {
            // The operator took the loopback leave back: registrations that
            // had it lose it, so the gateway's connect-time check refuses
            // their endpoints from now on (re-registering is refused too).
            let revoked: Vec<Route> = self
                .table
                .iter()
                .filter(|r| r.source == RouteSource::Local && r.allow_loopback)
                .map(|r| Route {
                    allow_loopback: false,
                    ..r.clone()
                })
                .collect();
            for route in revoked {
                if self.table.upsert(route.clone()).is_ok() {
                    changes.push(FibChange::Upsert(Box::new(route)));
                }
            }
        }
        if rt.policy != self.runtime.policy {
            changes.push(FibChange::Policy(Box::new(rt.policy.clone())));
        }
        let renamed = rt.router_id != self.runtime.router_id;
        self.runtime = rt;
        changes.extend(self.unlink_unconfigured());
        self.settle(&mut changes);
        if renamed {
            // Our claims compare under our new name.
            let origins: Vec<Box<str>> = self.claims.origins().map(Into::into).collect();
            for origin in origins {
                self.redecide(&origin, &mut changes);
            }
        }
        if !matches!(self.counters.get("reloads.inconsistent"), Some(n) if *n > 0) {
            self.config_error = None;
        }
        self.config_generation += 1;
        self.count("reloads.ok");
        Ok((self.table.generation(), changes))
    }

    // ===== requests =====

    /// Handles every request except `SubscribeFib` and `Reload`, which need
    /// the connection and the file system and are handled by the loop.
    pub fn handle(&mut self, body: RequestBody, now: Millis) -> Handled {
        self.count(&format!("requests.{}", body.kind()));
        let (reply, mut changes) = match body {
            RequestBody::Register(reg) => self.register(reg, now),
            RequestBody::Renew(renewal) => self.renew(renewal, now),
            RequestBody::Unregister { route_id, caller } => {
                self.unregister(&route_id, caller.as_ref())
            }
            RequestBody::Flush { origin } => self.flush(&origin),
            RequestBody::Status => (
                Ok(ResponseBody::Status(Box::new(self.status(now)))),
                Vec::new(),
            ),
            RequestBody::Routes(q) => (Ok(ResponseBody::Routes(self.routes(&q, now))), Vec::new()),
            RequestBody::Agents(q) => (Ok(ResponseBody::Agents(self.agents(&q))), Vec::new()),
            RequestBody::Lookup { query, explain } => (
                Ok(ResponseBody::Lookup(super::lookup::lookup(
                    self, &query, explain, now,
                ))),
                Vec::new(),
            ),
            RequestBody::Stats => (
                Ok(ResponseBody::Stats(Box::new(self.stats_at(now)))),
                Vec::new(),
            ),
            RequestBody::GatewayStats(s) => {
                self.gateway = Some((s, now));
                (Ok(ResponseBody::Noted), Vec::new())
            }
            RequestBody::SubscribeFib
            | RequestBody::Reload
            | RequestBody::Peers
            | RequestBody::Candidates
            | RequestBody::Approve { .. }
            | RequestBody::Revoke { .. } => (
                Err(IpcError::internal(
                    "request must be handled by the event loop",
                )),
                Vec::new(),
            ),
        };
        if let Err(e) = &reply {
            self.count(&format!("errors.{}", e.code()));
        }
        self.settle(&mut changes);
        Handled { reply, changes }
    }

    fn grant(&self, requested_s: Option<u32>) -> Result<u32, IpcError> {
        let secs = self.runtime.lease.grant_s(requested_s.map(u64::from))?;
        Ok(u32::try_from(secs).unwrap_or(u32::MAX))
    }

    /// The route `id` if `caller` (`None`: an administrator) may change
    /// it: it must be a local route and the caller its origin's owner.
    fn owned(&self, id: &RouteId, caller: Option<&Caller>) -> Result<&Route, IpcError> {
        let route = self.table.get(id).ok_or_else(|| IpcError::NotFound {
            route_id: id.clone(),
        })?;
        if route.source != RouteSource::Local {
            return Err(IpcError::Conflict {
                route_id: id.clone(),
                reason: ConflictReason::NotLocal,
            });
        }
        self.may_act(&route.origin, caller)?;
        Ok(route)
    }

    /// Replaces the source of interface addresses (tests).
    pub fn set_local_addrs(&mut self, f: fn() -> LocalAddrs) {
        self.own_addrs = own_addrs::OwnAddrs::new(f);
    }

    /// Sets the peer router addresses the driver knows (admitted routers,
    /// discovery candidates); configured peers and established links are
    /// added by [`Self::peer_addrs`] itself.
    pub fn set_peer_addrs(&mut self, addrs: Vec<std::net::IpAddr>) {
        self.peer_addrs = addrs;
    }

    /// Every known peer router address: `peer` sections (literal
    /// addresses), the data addresses of established links, and what the
    /// driver reported.
    fn peer_addrs(&self) -> Vec<std::net::IpAddr> {
        let configured = self.runtime.mesh.peers.iter();
        let mut out: Vec<std::net::IpAddr> = configured
            .filter_map(|p| p.address.parse().ok())
            .chain(self.links.iter().filter_map(|l| l.ip()))
            .chain(self.peer_addrs.iter().copied())
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Where a registration's endpoint may point (SSRF guard and, for a
    /// LAN caller, the LAN scope). A host name passes here; the gateway
    /// resolves it at registration and again at connect time, and checks
    /// every address with the same [`crate::endpoint::Guard`].
    fn check_endpoint(
        &mut self,
        origin: &str,
        endpoint: &str,
        caller: Option<&Caller>,
        now: Millis,
    ) -> Result<(), IpcError> {
        let guard = crate::endpoint::Guard {
            allow_loopback: self.loopback_allowed(origin),
            ..self.runtime.endpoints.clone()
        };
        let local = self.own_addrs.at(now);
        match caller {
            Some(c) => crate::endpoint::check_registration(
                endpoint,
                &guard,
                &local,
                c.source,
                &self.peer_addrs(),
            ),
            None => crate::endpoint::check_url(endpoint, &guard, &local),
        }
        .map(|_| ())
        .map_err(|e| match e {
            Refused::Invalid(e) => IpcError::invalid("endpoint", e),
            Refused::Address(reason) => IpcError::EndpointRefused {
                endpoint: endpoint.into(),
                reason,
            },
        })
    }

    /// Whether `origin`'s endpoints may be loopback or the router's own
    /// addresses: `agentd.allow_loopback_endpoints`, or the origin's
    /// `agent` section with `allow_loopback` — honoured only when that
    /// section also pins a source or a key, so naming the origin never
    /// reopens the guard to anyone.
    fn loopback_allowed(&self, origin: &str) -> bool {
        self.runtime.endpoints.allow_loopback
            || self
                .runtime
                .pins
                .get(origin)
                .is_some_and(|p| p.allow_loopback && (!p.sources.is_empty() || p.key.is_some()))
    }

    /// Whether `caller` may act for `origin` (ownership and pins).
    fn may_act(&self, origin: &str, caller: Option<&Caller>) -> Result<(), IpcError> {
        let pin = self.runtime.pins.get(origin);
        may_act(origin, self.claims.owner_of(origin), caller, pin).map_err(|reason| {
            IpcError::Forbidden {
                origin: origin.into(),
                reason,
            }
        })
    }

    /// May `caller` act for `origin` now (what the gateway's bootstrap
    /// check decides on its FIB replica)?
    pub fn check_origin(&self, origin: &str, caller: &Caller) -> Result<(), IpcError> {
        self.may_act(origin, Some(caller))
    }

    /// The live local routes whose agent asked for a public IPv6
    /// address, with who the agent is (what its address derives from).
    pub fn ipv6_wanted(&mut self) -> Vec<(RouteId, crate::ipv6::AgentKey)> {
        let table = &self.table;
        self.ipv6_wanted.retain(|id| {
            table
                .get(id)
                .is_some_and(|r| r.source == RouteSource::Local)
        });
        self.ipv6_wanted
            .iter()
            .filter_map(|id| table.get(id))
            .map(|r| {
                let key = crate::ipv6::AgentKey {
                    tenant: r.tenant.as_str().into(),
                    origin: r.origin.as_str().into(),
                    capability: r.capability.as_str().into(),
                };
                (r.id.clone(), key)
            })
            .collect()
    }

    // ===== persistence =====

    /// Every locally registered route with its granted lease length, for
    /// the lease file (borrowed: the file is encoded from the table).
    pub fn local_lease_refs(&self) -> impl Iterator<Item = LeaseRef<'_>> + Clone {
        self.table
            .iter_with_lease_secs()
            .filter(|(r, _)| r.source == RouteSource::Local)
            .map(|(r, lease_s)| LeaseRef {
                route: r,
                lease_s,
                public_ipv6: self.ipv6_wanted.contains(&r.id),
            })
    }

    /// [`State::local_lease_refs`], owned (what a restart reads back).
    #[cfg(test)]
    pub fn local_leases(&self) -> Vec<SavedLease> {
        self.local_lease_refs()
            .map(|l| SavedLease {
                route: l.route.clone(),
                lease_s: l.lease_s,
                public_ipv6: l.public_ipv6,
            })
            .collect()
    }

    /// Takes back leases saved by a previous agentd process. Each one is
    /// checked like a fresh registration (the file is not trusted);
    /// expired, invalid or conflicting ones are skipped. The lease is
    /// re-validated against the *current* bounds: a deadline further away
    /// than `max_lease` (a tampered file, or a bound lowered since) is cut
    /// to `now + max_lease`, and the granted length is brought into
    /// `min_lease..=max_lease`, so no restored route outlives what a fresh
    /// registration could get. Returns how many were restored.
    pub fn restore(&mut self, saved: Vec<SavedLease>, now: Millis) -> usize {
        let mut restored = 0;
        let bounds = self.runtime.lease;
        let max_ms = bounds.max_s().saturating_mul(1000);
        for SavedLease {
            mut route,
            lease_s,
            public_ipv6,
        } in saved
        {
            // The file does not grant leave; today's option does. The
            // proof follows from the owner; disputes are decided afresh.
            route.allow_loopback = self.loopback_allowed(&route.origin);
            route.proof = OriginProof::of_local(RouteSource::Local, route.owner);
            route.disputed = false;
            let live = matches!(route.lease, Lease::Until(d) if d > now);
            let latest = now.saturating_add_ms(max_ms);
            let lease_s = u64::from(lease_s).clamp(bounds.min_s(), bounds.max_s());
            let lease_s = u32::try_from(lease_s).unwrap_or(u32::MAX);
            if matches!(route.lease, Lease::Until(d) if d > latest) {
                route.lease = Lease::Until(latest);
                self.count("leases.restore_clamped");
            }
            let reg = Registration {
                route_id: Some(route.id.clone()),
                capability: route.capability.as_str().into(),
                version: route.version,
                origin: route.origin.as_str().into(),
                endpoint: route.endpoint.as_str().into(),
                tenant: route.tenant.as_str().into(),
                region: route.region.as_str().into(),
                attrs: route.attrs,
                access: (*route.access).clone(),
                contract: route.contract.as_deref().cloned(),
                lease_seconds: Some(lease_s),
                caller: None,
                owner: route.owner,
                public_ipv6: false,
            };
            let ok = live
                && route.source == RouteSource::Local
                && route.path.is_empty()
                && route.next_hop.is_none()
                && !route.id.as_str().starts_with(STATIC_ID_PREFIX)
                && reg.validate().is_ok()
                && self
                    .check_endpoint(&reg.origin, &reg.endpoint, None, now)
                    .is_ok()
                && self.table.get(&route.id).is_none();
            if !ok {
                self.count("leases.restore_skipped");
                continue;
            }
            let id = route.id.clone();
            let kept = route.clone();
            if self.table.upsert(route).is_ok() {
                self.ledger.add(&kept);
                self.claims.add_local(&kept);
                if public_ipv6 {
                    self.ipv6_wanted.insert(id.clone());
                }
                self.table.set_lease_secs(&id, lease_s);
                self.count("leases.restored");
                restored += 1;
            }
        }
        self.reclaim_all();
        restored
    }

    // ===== timers and health =====

    /// Removes every route whose lease ended at or before `now`.
    pub fn expire(&mut self, now: Millis) -> Changes {
        let gone = self.table.expire(now);
        let mut changes: Changes = gone
            .into_iter()
            .map(|r| {
                if r.source == RouteSource::Local {
                    self.ledger.remove(&r);
                    self.claims.remove_local(&r);
                }
                FibChange::Remove(r.id)
            })
            .collect();
        for _ in &changes {
            self.count("leases.expired");
        }
        self.settle(&mut changes);
        changes
    }

    /// Routes whose endpoints the health monitor watches: our own (peer
    /// routes are judged by their session, not by us), as (id, endpoint,
    /// healthy).
    pub fn probe_targets(&self) -> impl Iterator<Item = (&RouteId, &str, bool)> {
        self.table
            .iter()
            .filter(|r| matches!(r.source, RouteSource::Local | RouteSource::Static))
            .map(|r| (&r.id, &*r.endpoint, r.healthy))
    }

    /// Applies an endpoint verdict to routes on it (health checks exclude,
    /// never remove). Routes gone from the table or already agreeing are
    /// skipped.
    pub fn set_health(&mut self, ids: &[RouteId], healthy: bool) -> Changes {
        let mut changes = Changes::new();
        for id in ids {
            if self.table.get(id).is_none_or(|r| r.healthy == healthy) {
                continue;
            }
            if self.table.set_health(id, healthy).is_err() {
                continue;
            }
            self.count(if healthy { "health.up" } else { "health.down" });
            if let Some(r) = self.table.get(id) {
                changes.push(FibChange::Upsert(Box::new(r.clone())));
            }
        }
        changes
    }
}

/// Why a configuration's routes do not fit into a table.
#[derive(Debug)]
enum BuildError {
    Static {
        section: String,
        error: TableError,
    },
    TooSmall {
        max_routes: usize,
        error: TableError,
    },
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Static { section, error } => {
                write!(f, "route section '{section}': {error}")
            }
            BuildError::TooSmall { max_routes, error } => {
                write!(
                    f,
                    "max_routes {max_routes} cannot hold the routes already registered ({error})"
                )
            }
        }
    }
}

/// A static route the table refused at startup, as a config problem.
fn static_route_problem(source: &str, r: &Route, error: TableError) -> uci_schema::Problem {
    uci_schema::Problem {
        error: uci_schema::ConfigError {
            file: source.to_string(),
            section: None,
            option: None,
            kind: uci_schema::ConfigErrorKind::Refused {
                reason: format!("static route {}: {error}", r.id),
            },
        },
        recovery: uci_schema::Recovery::SectionSkipped,
    }
}

/// A table holding `rt`'s static routes plus `dynamic` (the local and peer
/// routes that survive a reload). Nothing live is touched.
fn build_table<'a>(
    rt: &Runtime,
    dynamic: impl Iterator<Item = &'a Route>,
) -> Result<RouteTable, BuildError> {
    let mut table = RouteTable::new(rt.max_routes);
    for r in &rt.static_routes {
        table
            .upsert(r.clone())
            .map_err(|error| BuildError::Static {
                section: r
                    .id
                    .as_str()
                    .strip_prefix(STATIC_ID_PREFIX)
                    .unwrap_or(r.id.as_str())
                    .to_string(),
                error,
            })?;
    }
    for r in dynamic {
        table
            .upsert(r.clone())
            .map_err(|error| BuildError::TooSmall {
                max_routes: rt.max_routes,
                error,
            })?;
    }
    Ok(table)
}
