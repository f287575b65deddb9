//! Paths learned from ARPX peers: the State API the peer driver
//! (`daemon/peers`) calls with what its sessions decided.
//!
//! Multipath keeps one path per advertising peer, each its own table entry
//! `<route_id>@<next_hop>` (ISSUE7 "Route ids of peer paths"). A path is
//! eligible while its session is up (`set_peer_up`, the table's per-peer
//! index flips only that peer's paths) and until it is withdrawn
//! (`remove_peer_path`) or its peer's paths go (`remove_paths_via`); it has
//! no lease of its own (`Lease::Permanent`).
//!
//! The arpx layer checks ownership of route_ids across the mesh; the RIB
//! keeps its own guard so that no path ever shadows a route of ours and
//! one route_id never names two different routes here:
//! - a local or static route holding the route_id wins (and a local
//!   registration of a route_id some peer path holds is refused in turn);
//! - all paths of one route_id agree on its identity (origin router,
//!   tenant, origin agent): the first claim stays.
//!
//! Every call returns the FIB changes the instance publishes, like the
//! other state transitions.

use std::fmt;

use super::{Changes, State};
use crate::fib::FibChange;
use crate::ipc::message::{MAX_ACCESS_ENTRIES, MAX_TEXT_LEN};
use crate::route::{
    check_agent_uri, check_capability, check_router_id, check_tenant, Access, Attributes, Contract,
    Effect, Lease, OriginProof, Route, RouteId, RouteSource, MAX_ENDPOINT_LEN, MAX_ID_LEN,
};
use crate::table::{TableError, UpsertOutcome};

/// Longest path vector the RIB takes at all (the schema's upper bound of
/// `arpx.max_path`; the arpx layer applies the configured value).
pub const MAX_PATH_LEN: usize = 64;

/// Why the RIB refused a peer path. The driver counts these by
/// [`code`](PeerPathError::code); none of them touches the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerPathError {
    /// A field of the path is malformed (the advertisement, or the route
    /// the driver built from it).
    Invalid { field: &'static str, reason: String },
    /// The path contains this router: a loop.
    Loop { router_id: Box<str> },
    /// A local or static route of this router holds the route_id.
    HeldLocally {
        route_id: RouteId,
        source: RouteSource,
    },
    /// Paths with another identity (origin router, tenant or origin
    /// agent) already hold the route_id: the first claim stays.
    HeldByOther {
        route_id: RouteId,
        origin_router: Box<str>,
        origin: Box<str>,
    },
    /// The RIB holds `agentd.max_routes` routes (all sources) already.
    Full { max_routes: usize },
}

impl PeerPathError {
    /// Stable name for counters and logs.
    pub fn code(&self) -> &'static str {
        match self {
            PeerPathError::Invalid { .. } => "invalid",
            PeerPathError::Loop { .. } => "loop",
            PeerPathError::HeldLocally { .. } => "held_locally",
            PeerPathError::HeldByOther { .. } => "held_by_other",
            PeerPathError::Full { .. } => "full",
        }
    }
}

impl fmt::Display for PeerPathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerPathError::Invalid { field, reason } => write!(f, "peer path: {field}: {reason}"),
            PeerPathError::Loop { router_id } => {
                write!(f, "peer path contains this router ({router_id}): a loop")
            }
            PeerPathError::HeldLocally { route_id, source } => write!(
                f,
                "route_id {route_id} is held by a {} route of this router",
                source.as_str()
            ),
            PeerPathError::HeldByOther {
                route_id,
                origin_router,
                origin,
            } => write!(
                f,
                "route_id {route_id} is held by origin {origin} of router {origin_router} (first claim stays)"
            ),
            PeerPathError::Full { max_routes } => write!(
                f,
                "route table is full ({max_routes} routes, agentd.max_routes)"
            ),
        }
    }
}

impl std::error::Error for PeerPathError {}

fn invalid(field: &'static str, reason: impl fmt::Display) -> PeerPathError {
    PeerPathError::Invalid {
        field,
        reason: reason.to_string(),
    }
}

/// What the peer driver knows of one path: the fields of the route
/// advertisement, the peer it came from and that peer's data-plane
/// address (from its `peer` section). [`PeerPath::into_route`] makes the
/// table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPath {
    /// The route_id as advertised (a plain id, never `x@y`).
    pub route_id: RouteId,
    pub capability: Box<str>,
    /// Interface version, ≥ 1.
    pub version: u32,
    /// The origin agent, `agent://tenant/name`.
    pub origin_agent: Box<str>,
    pub tenant: Box<str>,
    pub region: Box<str>,
    pub attrs: Attributes,
    pub access: Access,
    /// The contract's effect class; `None`: the route has no contract.
    pub effect: Option<Effect>,
    /// Contract: safe to retry after possible delivery.
    pub idempotent: bool,
    /// Routers traversed, origin router first, the advertising router
    /// (`next_hop`) last.
    pub path: Vec<Box<str>>,
    /// The peer that advertised it (its router_id).
    pub next_hop: Box<str>,
    /// The peer's host name or IP address (`peer.address`).
    pub next_hop_address: Box<str>,
    /// The peer's data-plane port (`peer.data_port`).
    pub next_hop_data_port: u16,
    /// Whether the origin judges it eligible (health); `true` unless the
    /// advertisement says otherwise.
    pub healthy: bool,
    /// How the origin router says the origin was proven (signed into the
    /// advertisement).
    pub proof: OriginProof,
    /// `Peer`, or `Relay` for a path from a client router of our relay.
    pub source: RouteSource,
}

impl PeerPath {
    /// The table entry of this path: id `<route_id>@<next_hop>`, source
    /// `Peer`, permanent (remote liveness is the session's), endpoint the
    /// next hop's data plane `https://<address>:<data_port>` (never a LAN
    /// endpoint). Checks every field like [`State::upsert_peer_path`] does.
    pub fn into_route(self) -> Result<Route, PeerPathError> {
        let id =
            RouteId::via(&self.route_id, &self.next_hop).map_err(|e| invalid("route_id", e))?;
        let endpoint = data_plane_url(&self.next_hop_address, self.next_hop_data_port)?;
        let route = Route {
            id,
            capability: self.capability.into(),
            version: self.version,
            origin: self.origin_agent.into(),
            endpoint: endpoint.into(),
            tenant: self.tenant.into(),
            region: self.region.into(),
            attrs: self.attrs,
            access: self.access.into(),
            contract: self
                .effect
                .map(|effect| Contract {
                    effect,
                    idempotent: self.idempotent,
                    input_schema: None,
                    description: None,
                })
                .map(Box::new),
            source: self.source,
            path: self.path.into(),
            next_hop: Some(self.next_hop.into()),
            lease: Lease::Permanent,
            healthy: self.healthy,
            allow_loopback: false,
            owner: None,
            proof: self.proof,
            disputed: false,
        };
        check_path(&route, None)?;
        Ok(route)
    }
}

/// `https://<address>:<port>`, an IPv6 literal in brackets.
pub fn data_plane_url(address: &str, port: u16) -> Result<String, PeerPathError> {
    data_plane_authority(address, port).map(|a| format!("https://{a}"))
}

/// `<address>:<port>` (what a peer link's `data` says), an IPv6 literal
/// in brackets.
pub fn data_plane_authority(address: &str, port: u16) -> Result<String, PeerPathError> {
    let ok = !address.is_empty()
        && address.len() <= 253
        && address
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
    if !ok || port == 0 {
        return Err(invalid(
            "next_hop_address",
            format_args!("not a host and port: {address:?} {port}"),
        ));
    }
    Ok(if address.contains(':') {
        format!("[{address}]:{port}")
    } else {
        format!("{address}:{port}")
    })
}

/// Everything a peer path must be, apart from ownership. `own`: this
/// router's id (a path through it is a loop).
fn check_path(r: &Route, own: Option<&str>) -> Result<(), PeerPathError> {
    if !matches!(r.source, RouteSource::Peer | RouteSource::Relay) {
        return Err(invalid("source", "a peer path has source peer or relay"));
    }
    let hop = r
        .next_hop
        .as_deref()
        .ok_or_else(|| invalid("next_hop", "missing"))?;
    check_router_id(hop).map_err(|e| invalid("next_hop", e))?;
    if r.id.next_hop() != Some(hop) || RouteId::new(r.id.base()).is_err() {
        return Err(invalid(
            "route_id",
            format_args!("{} is not <route_id>@{hop}", r.id),
        ));
    }
    if r.path.is_empty() || r.path.len() > MAX_PATH_LEN {
        return Err(invalid(
            "path",
            format_args!("{} routers (1..={MAX_PATH_LEN})", r.path.len()),
        ));
    }
    for (i, router) in r.path.iter().enumerate() {
        check_router_id(router).map_err(|e| invalid("path", e))?;
        if r.path[..i].contains(router) {
            return Err(invalid("path", format_args!("{router} appears twice")));
        }
        if own == Some(&**router) {
            return Err(PeerPathError::Loop {
                router_id: router.clone(),
            });
        }
    }
    if r.path.last().map(|p| &**p) != Some(hop) {
        return Err(invalid(
            "path",
            format_args!("does not end at the next hop {hop}"),
        ));
    }
    if r.lease != Lease::Permanent {
        return Err(invalid("lease", "a peer path has no lease of its own"));
    }
    if r.owner.is_some() || r.allow_loopback {
        return Err(invalid(
            "owner",
            "a peer path has no local owner or loopback leave",
        ));
    }
    if !r.endpoint.starts_with("https://") || r.endpoint.len() > MAX_ENDPOINT_LEN {
        return Err(invalid("endpoint", "not the next hop's https data plane"));
    }
    check_capability(&r.capability).map_err(|e| invalid("capability", e))?;
    if r.version == 0 {
        return Err(invalid("version", "must be at least 1"));
    }
    check_agent_uri(&r.origin).map_err(|e| invalid("origin_agent", e))?;
    check_tenant(&r.tenant).map_err(|e| invalid("tenant", e))?;
    let uri_tenant = r
        .origin
        .strip_prefix("agent://")
        .and_then(|x| x.split_once('/'))
        .map(|(t, _)| t);
    if uri_tenant != Some(&*r.tenant) {
        return Err(invalid(
            "origin_agent",
            "tenant of the agent uri differs from the tenant",
        ));
    }
    r.attrs.check().map_err(|e| invalid("attrs", e))?;
    if r.region.len() > MAX_TEXT_LEN {
        return Err(invalid(
            "region",
            format_args!("longer than {MAX_TEXT_LEN} bytes"),
        ));
    }
    for list in [&r.access.allowed_tenants, &r.access.allowed_sources] {
        if list.len() > MAX_ACCESS_ENTRIES {
            return Err(invalid(
                "access",
                format_args!("more than {MAX_ACCESS_ENTRIES} entries"),
            ));
        }
        if let Some(e) = list.iter().find(|e| e.is_empty() || e.len() > MAX_ID_LEN) {
            return Err(invalid(
                "access",
                format_args!("entry of {} bytes", e.len()),
            ));
        }
    }
    Ok(())
}

impl State {
    /// Installs or updates one peer path (`route` from
    /// [`PeerPath::into_route`]). Refused, with the table untouched, if it
    /// is malformed, loops through this router, names a route_id a local
    /// or static route holds or that paths of another identity hold, or
    /// the RIB is full. A path of a peer marked down is installed
    /// ineligible (the driver marks a peer down before its snapshot and up
    /// at its end). Returns the `Upsert` to publish (none if unchanged).
    pub fn upsert_peer_path(&mut self, route: Route) -> Result<Changes, PeerPathError> {
        let mut result = self.try_upsert_peer_path(route);
        if let Ok(changes) = &mut result {
            self.settle(changes);
        }
        match &result {
            Ok(c) if c.is_empty() => self.count("peer_paths.unchanged"),
            Ok(_) => self.count("peer_paths.upserted"),
            Err(e) => self.count(&format!("peer_paths.refused.{}", e.code())),
        }
        result
    }

    fn try_upsert_peer_path(&mut self, route: Route) -> Result<Changes, PeerPathError> {
        let own = (!self.runtime.router_id.is_empty()).then_some(&*self.runtime.router_id);
        check_path(&route, own)?;
        let base = RouteId::new(route.id.base()).map_err(|e| invalid("route_id", e))?;
        // An update keeps the path's dispute mark (`settle` decides it
        // again), so a re-advertisement of an unchanged path is no change.
        let mut route = route;
        route.disputed = self.table.get(&route.id).is_some_and(|r| r.disputed);
        if let Some(local) = self.table.get(&base) {
            return Err(PeerPathError::HeldLocally {
                route_id: base,
                source: local.source,
            });
        }
        let other = self
            .paths_of(&base)
            .find(|p| p.id != route.id && !same_identity(p, &route))
            .map(|p| {
                (
                    p.path.first().cloned().unwrap_or_default(),
                    p.origin.clone(),
                )
            });
        if let Some((origin_router, origin)) = other {
            return Err(PeerPathError::HeldByOther {
                route_id: base,
                origin_router,
                origin: origin.into(),
            });
        }
        match self.table.upsert(route.clone()) {
            Ok(UpsertOutcome::Unchanged) => Ok(Vec::new()),
            Ok(_) => Ok(vec![FibChange::Upsert(Box::new(route))]),
            Err(TableError::Full { max_routes }) => Err(PeerPathError::Full { max_routes }),
            Err(TableError::Conflict {
                existing_origin, ..
            }) => {
                // The same peer re-advertising its path with another
                // identity: the installed one stays.
                let installed = self.table.get(&route.id);
                Err(PeerPathError::HeldByOther {
                    origin_router: installed
                        .and_then(|p| p.path.first().cloned())
                        .unwrap_or_default(),
                    origin: existing_origin,
                    route_id: base,
                })
            }
            Err(e) => Err(invalid("route", e)),
        }
    }

    /// The paths of route_id `base` (one per next hop holding one). Costs
    /// one lookup per peer with paths, whatever the table size.
    pub fn paths_of<'a>(&'a self, base: &'a RouteId) -> impl Iterator<Item = &'a Route> + 'a {
        self.table.next_hops().filter_map(move |hop| {
            RouteId::via(base, hop)
                .ok()
                .and_then(|id| self.table.get(&id))
        })
    }

    /// Removes one path (a withdraw). Only peer paths are removed through
    /// here; an unknown id changes nothing.
    pub fn remove_peer_path(&mut self, id: &RouteId) -> Changes {
        if self
            .table
            .get(id)
            .is_none_or(|r| !matches!(r.source, RouteSource::Peer | RouteSource::Relay))
        {
            return Vec::new();
        }
        self.table.remove(id);
        self.count("peer_paths.removed");
        let mut changes = vec![FibChange::Remove(id.clone())];
        self.settle(&mut changes);
        changes
    }

    /// Removes every path whose next hop is `next_hop` (a session closed
    /// with a typed `Close`, or graceful retention ending). Touches only
    /// that peer's paths. The peer's up/down mark stays as it is.
    pub fn remove_paths_via(&mut self, next_hop: &str) -> Changes {
        let gone = self.table.remove_paths_via(next_hop);
        for _ in &gone {
            self.count("peer_paths.removed");
        }
        let mut changes = gone.into_iter().map(|r| FibChange::Remove(r.id)).collect();
        self.settle(&mut changes);
        changes
    }

    /// Marks the session to `next_hop` up or down: its paths (and paths
    /// that arrive later) are eligible only while it is up. Returns the
    /// `PeerUp` change to publish, none if nothing changed.
    pub fn set_peer_up(&mut self, next_hop: &str, up: bool) -> Changes {
        if !self.table.set_peer_up(next_hop, up) {
            return Vec::new();
        }
        self.count(if up { "peers.up" } else { "peers.down" });
        vec![FibChange::PeerUp {
            router_id: next_hop.into(),
            up,
        }]
    }

    /// This router's own routes, which the driver advertises to its peers:
    /// every local and static route (eligible or not: the driver decides
    /// what an advertisement says about health).
    pub fn exportable_routes(&self) -> impl Iterator<Item = &Route> {
        self.table
            .iter()
            .filter(|r| matches!(r.source, RouteSource::Local | RouteSource::Static))
    }

    /// Removes the paths of route_id `base` (a static route of ours now
    /// holds it).
    pub(super) fn drop_paths_of(&mut self, base: &RouteId) -> Changes {
        let ids: Vec<RouteId> = self.paths_of(base).map(|p| p.id.clone()).collect();
        for id in &ids {
            self.table.remove(id);
            self.count("peer_paths.shadowed");
        }
        ids.into_iter().map(FibChange::Remove).collect()
    }

    /// Whether a peer path holds route_id `id` (a local registration of it
    /// is refused: a route_id names one route).
    pub(super) fn held_by_peer(&self, id: &RouteId) -> bool {
        self.paths_of(id).next().is_some()
    }
}

/// Two paths of one route_id describe the same route.
fn same_identity(a: &Route, b: &Route) -> bool {
    a.path.first() == b.path.first() && a.tenant == b.tenant && a.origin == b.origin
}

#[cfg(test)]
mod tests;
