//! The messages of the agentd IPC protocol (DESIGN §9 "IPC").
//!
//! A connection starts with one [`Hello`] frame in each direction (the
//! server sends first). After that the client sends [`Request`] frames and
//! the server sends [`ServerMsg`] frames: responses matched by request id,
//! and — once the client asked for `SubscribeFib` — pushed FIB events.
//!
//! `Hello` is the one type whose encoding must never change: it carries
//! [`PROTOCOL_VERSION`], so binaries built from different protocol versions
//! stop at the handshake with a clear error instead of misreading frames.
//! Every other type may change only together with a version bump.
//!
//! Request id 0 is reserved: a response with id 0 is a connection-level
//! error (permission denied, malformed frame) sent just before the server
//! closes the connection.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fib::FibEvent;
pub use crate::ipc::discovery::{AdmissionDone, AdmissionRefusal, CandidatesView};
pub use crate::ipc::error::{ConflictReason, IpcError, Quota};
use crate::owner::{Caller, Owner};
use crate::route::{self, Access, Attributes, Contract, RouteId, RouteSource};
use crate::time::Millis;

/// Bumped whenever any message other than `Hello` changes its encoding.
/// 6: lookup candidates carry their path and next hop.
/// 7: route rows say whether their peer session is up.
/// 8: the FIB carries peer links (`SnapshotEnd.links`, `Link`, `Unlink`);
///    gateway stats count peer data connections.
/// 9: discovery (`Candidates`, `Approve`, `Revoke`).
/// 11: routes carry their origin proof and dispute mark; route rows and
///     lookup candidates show the proof; `OwnedElsewhere` refusals.
/// 12: gateway stats count the remote task table (held, refusals by
///     reason, released); status carries the configuration's warnings.
/// 13: peer links say whether calls over them are signed (`signed`);
///     discovery candidates carry their source and the unicast search
///     domains their state.
/// 14: peer links say how the data plane reaches the router (`relay`:
///     direct, a relay client's tunnel, or our relay).
/// 15–16: the per-agent IPv6 service: its status, registrations that
///     ask for an address and what became of the request.
/// 17: the FIB carries the bound agent addresses (`SnapshotEnd`,
///     `Bind`/`Unbind`).
pub const PROTOCOL_VERSION: u32 = 17;

/// Request id reserved for connection-level errors.
pub const CONNECTION_ERROR_ID: u64 = 0;

/// Longest accepted input schema in a contract.
pub const MAX_SCHEMA_LEN: usize = 64 * 1024;
/// Longest accepted contract description or region name.
pub const MAX_TEXT_LEN: usize = 1024;
/// Most entries in each access list of a registration.
pub const MAX_ACCESS_ENTRIES: usize = 64;
/// Most rows in one page of `Routes`/`Agents`; keeps every reply within
/// one frame.
pub const MAX_PAGE: u32 = 256;

/// First frame in each direction. Its encoding is frozen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// Program and version, for error messages (`agentd 0.1.0`).
    pub software: Box<str>,
}

impl Hello {
    pub fn ours(software: &str) -> Hello {
        Hello {
            protocol: PROTOCOL_VERSION,
            software: software.into(),
        }
    }
}

/// One client request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Chosen by the client, unique among its outstanding requests, never 0.
    pub id: u64,
    pub body: RequestBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RequestBody {
    /// Register (or idempotently re-register) a route → `Lease`.
    Register(Registration),
    /// Extend a lease and update live attributes → `Lease`.
    Renew(Renewal),
    /// Withdraw a route → `Unregistered`.
    Unregister {
        route_id: RouteId,
        /// Who asks (must own the route's origin); `None` for an
        /// administrator (`agentctl unregister`).
        caller: Option<Caller>,
    },
    /// Withdraw every local route of an origin → `Flushed`
    /// (`agentctl flush --origin`; administrators only).
    Flush { origin: Box<str> },
    /// Start receiving the FIB on this connection → `Subscribed`, then
    /// `ServerMsg::Fib` frames: a snapshot, then deltas.
    SubscribeFib,
    /// → `Status`.
    Status,
    /// One page of the route table → `Routes`.
    Routes(RoutesQuery),
    /// One page of the registered agents → `Agents`.
    Agents(AgentsQuery),
    /// Run selection as a caller would → `Lookup`.
    Lookup { query: LookupQuery, explain: bool },
    /// Re-read the configuration → `Reloaded`.
    Reload,
    /// → `Stats`.
    Stats,
    /// agent-gw's own counters (buffer budget, task table, refusals), sent
    /// when they change (at most once a second, and every few seconds
    /// anyway) → `Noted`. agentd keeps the latest for `Stats`.
    GatewayStats(GatewayStats),
    /// The ARPX sessions → `Peers`.
    Peers,
    /// Discovered routers → `Candidates`.
    Candidates,
    /// Admit a candidate at exactly this record version: a `peer`
    /// section is written into agentd's file and the file reloaded →
    /// `Admission` (administrators only).
    Approve { router_id: Box<str>, version: u32 },
    /// Remove the approval made at this version, reload → `Admission`
    /// (administrators only).
    Revoke { router_id: Box<str>, version: u32 },
}

impl RequestBody {
    /// Short name for logs and counters.
    pub fn kind(&self) -> &'static str {
        match self {
            RequestBody::Register(_) => "register",
            RequestBody::Renew(_) => "renew",
            RequestBody::Unregister { .. } => "unregister",
            RequestBody::Flush { .. } => "flush",
            RequestBody::SubscribeFib => "subscribe_fib",
            RequestBody::Status => "status",
            RequestBody::Routes(_) => "routes",
            RequestBody::Agents(_) => "agents",
            RequestBody::Lookup { .. } => "lookup",
            RequestBody::Reload => "reload",
            RequestBody::Stats => "stats",
            RequestBody::GatewayStats(_) => "gateway_stats",
            RequestBody::Peers => "peers",
            RequestBody::Candidates => "candidates",
            RequestBody::Approve { .. } => "approve",
            RequestBody::Revoke { .. } => "revoke",
        }
    }

    /// Whether the request changes state only an administrator may change
    /// (the daemon decides who counts as one, e.g. root).
    pub fn is_admin_command(&self) -> bool {
        matches!(
            self,
            RequestBody::Reload
                | RequestBody::Flush { .. }
                | RequestBody::Approve { .. }
                | RequestBody::Revoke { .. }
                | RequestBody::Unregister { caller: None, .. }
        )
    }
}

/// A registration as DESIGN §4 names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// Re-register this route (idempotent upsert for the same tenant and
    /// origin); `None` lets agentd assign one.
    pub route_id: Option<RouteId>,
    pub capability: Box<str>,
    /// Interface version, ≥ 1.
    pub version: u32,
    /// Agent URI `agent://tenant/name`.
    pub origin: Box<str>,
    pub endpoint: Box<str>,
    pub tenant: Box<str>,
    pub region: Box<str>,
    pub attrs: Attributes,
    pub access: Access,
    pub contract: Option<Contract>,
    /// Requested lease; `None` means the configured default.
    pub lease_seconds: Option<u32>,
    /// Who registers: the origin is bound to this caller's identity while
    /// it has live routes. `None` for an administrator.
    pub caller: Option<Caller>,
    /// Administrators only (`caller` is `None`): the owner to record —
    /// the gateway handing a restarted agentd the routes of its last FIB
    /// keeps their owners. Ignored when `caller` is set.
    pub owner: Option<Owner>,
    /// The agent asks for a public IPv6 address of its own (nexilume's
    /// `public_ipv6: "auto"`, our SDK's `public_ipv6=True`; docs/ipv6.md).
    pub public_ipv6: bool,
}

impl Registration {
    /// Checks every field an agent controls, naming the first bad one. The
    /// daemon calls this on every registration; the gateway may call it
    /// earlier to answer without an IPC round trip.
    pub fn validate(&self) -> Result<(), IpcError> {
        let invalid = |field: &str, reason: &dyn fmt::Display| IpcError::Invalid {
            field: field.into(),
            reason: reason.to_string().into(),
        };
        route::check_capability(&self.capability).map_err(|e| invalid("capability", &e))?;
        if self.version == 0 {
            return Err(invalid("version", &"must be at least 1"));
        }
        route::check_agent_uri(&self.origin).map_err(|e| invalid("origin", &e))?;
        route::check_tenant(&self.tenant).map_err(|e| invalid("tenant", &e))?;
        if let Some(uri_tenant) = self
            .origin
            .strip_prefix("agent://")
            .and_then(|r| r.split_once('/'))
        {
            if uri_tenant.0 != &*self.tenant {
                return Err(invalid(
                    "origin",
                    &"tenant of the agent uri differs from the tenant",
                ));
            }
        }
        check_endpoint(&self.endpoint).map_err(|r| invalid("endpoint", &r))?;
        self.attrs.check().map_err(|e| invalid(e.field, &e))?;
        if self.region.len() > MAX_TEXT_LEN {
            return Err(invalid(
                "region",
                &format_args!("longer than {MAX_TEXT_LEN} bytes"),
            ));
        }
        for (field, list) in [
            ("access.allowed_tenants", &self.access.allowed_tenants),
            ("access.allowed_sources", &self.access.allowed_sources),
        ] {
            if list.len() > MAX_ACCESS_ENTRIES {
                return Err(invalid(
                    field,
                    &format_args!("more than {MAX_ACCESS_ENTRIES} entries"),
                ));
            }
            if let Some(e) = list
                .iter()
                .find(|e| e.is_empty() || e.len() > route::MAX_ID_LEN)
            {
                return Err(invalid(field, &format_args!("entry of {} bytes", e.len())));
            }
        }
        if let Some(c) = &self.contract {
            if c.input_schema
                .as_ref()
                .is_some_and(|s| s.len() > MAX_SCHEMA_LEN)
            {
                return Err(invalid(
                    "contract.input_schema",
                    &format_args!("longer than {MAX_SCHEMA_LEN} bytes"),
                ));
            }
            if c.description
                .as_ref()
                .is_some_and(|s| s.len() > MAX_TEXT_LEN)
            {
                return Err(invalid(
                    "contract.description",
                    &format_args!("longer than {MAX_TEXT_LEN} bytes"),
                ));
            }
        }
        Ok(())
    }
}

/// The syntax of an endpoint, by the one URL model the gateway forwards
/// with ([`crate::endpoint::Endpoint`]). Where it may point is checked
/// by the daemon with its [`crate::endpoint::Guard`].
pub fn check_endpoint(s: &str) -> Result<(), crate::endpoint::EndpointError> {
    crate::endpoint::Endpoint::parse(s).map(|_| ())
}

/// A lease renewal, optionally carrying fresh live attributes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Renewal {
    pub route_id: RouteId,
    /// Who asks; must own the route's origin. `None` for an administrator.
    pub caller: Option<Caller>,
    /// New lease length; `None` keeps the route's current length.
    pub lease_seconds: Option<u32>,
    pub latency_ms: Option<u64>,
    pub load_permille: Option<u64>,
    pub healthy: Option<bool>,
    pub endpoint: Option<Box<str>>,
}

impl Renewal {
    /// A plain lease extension of `route_id`.
    pub fn of(route_id: RouteId) -> Renewal {
        Renewal {
            route_id,
            caller: None,
            lease_seconds: None,
            latency_ms: None,
            load_permille: None,
            healthy: None,
            endpoint: None,
        }
    }
}

/// Paging through the route table in route-id order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutesQuery {
    /// Only routes of this capability.
    pub capability: Option<Box<str>>,
    /// Start after this route id (the previous page's `next`).
    pub after: Option<RouteId>,
    /// Rows wanted; the server caps it at [`MAX_PAGE`]. 0 means the cap.
    pub limit: u32,
}

/// Paging through the registered agents in origin order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentsQuery {
    pub after: Option<Box<str>>,
    pub limit: u32,
}

/// What a caller asks selection for (`agentctl lookup`, `/agent/v1/route`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupQuery {
    pub capability: Box<str>,
    pub version: u32,
    pub tenant: Box<str>,
    pub source_agent: Option<Box<str>>,
    pub target_agent: Option<Box<str>>,
}

/// Server → client frame after the handshake.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ServerMsg {
    Response(Response),
    Fib(FibEvent),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The request's id, or [`CONNECTION_ERROR_ID`].
    pub id: u64,
    pub body: Result<ResponseBody, IpcError>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ResponseBody {
    Lease(LeaseGrant),
    /// `generation`: the route table generation right after the removal
    /// (what a FIB subscriber must reach to no longer see the route).
    Unregistered {
        route_id: RouteId,
        generation: u64,
    },
    Subscribed,
    /// Boxed: the largest answer by far, and one of the rarest.
    Status(Box<StatusView>),
    Routes(RoutePage),
    Agents(AgentPage),
    Lookup(LookupView),
    /// The configuration generation after the reload (what `status`
    /// calls `config_generation`; not the route table's generation).
    Reloaded {
        config_generation: u64,
    },
    /// Boxed: the gateway's counters make it the largest after status.
    Stats(Box<StatsView>),
    /// `removed` routes of `origin` were withdrawn (at most [`MAX_PAGE`]
    /// of their ids listed); `generation` as for `Unregistered`.
    Flushed {
        origin: Box<str>,
        removed: u64,
        route_ids: Vec<RouteId>,
        generation: u64,
    },
    /// The report was kept.
    Noted,
    Peers(PeersView),
    Candidates(CandidatesView),
    /// The answer to `Approve` / `Revoke`: done, or why not.
    Admission(Result<AdmissionDone, AdmissionRefusal>),
}

impl ResponseBody {
    pub fn kind(&self) -> &'static str {
        match self {
            ResponseBody::Lease(_) => "lease",
            ResponseBody::Unregistered { .. } => "unregistered",
            ResponseBody::Subscribed => "subscribed",
            ResponseBody::Status(_) => "status",
            ResponseBody::Routes(_) => "routes",
            ResponseBody::Agents(_) => "agents",
            ResponseBody::Lookup(_) => "lookup",
            ResponseBody::Reloaded { .. } => "reloaded",
            ResponseBody::Stats(_) => "stats",
            ResponseBody::Flushed { .. } => "flushed",
            ResponseBody::Noted => "noted",
            ResponseBody::Peers(_) => "peers",
            ResponseBody::Candidates(_) => "candidates",
            ResponseBody::Admission(_) => "admission",
        }
    }
}

/// The answer to register and renew; maps 1:1 onto the SDK's JSON lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrant {
    pub route_id: RouteId,
    /// Table generation after the change.
    pub generation: u64,
    pub lease_seconds: u32,
    /// Absolute deadline on the system-wide monotonic clock.
    pub expires_at: Millis,
    /// The answer to `public_ipv6`; `None` when the agent did not ask.
    pub public_ipv6: Option<Ipv6Grant>,
}

/// What became of an agent's request for a public IPv6 address. The
/// registration succeeds either way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ipv6Grant {
    /// The agent's address, bound.
    Bound(std::net::Ipv6Addr),
    /// Why none was bound.
    NotBound { why: Ipv6Refusal, reason: Box<str> },
}

/// Why an agent got no address, as a stable code (the reply's
/// `public_ipv6_status.code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ipv6Refusal {
    /// `ipv6.mode 'off'`.
    Off,
    /// The service cannot bind addresses now (status says why).
    NotReady,
    /// All `ipv6.max_addresses` are bound.
    Full,
    /// The kernel refused the address, or none could be derived.
    Failed,
}

impl Ipv6Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Ipv6Refusal::Off => "ipv6_off",
            Ipv6Refusal::NotReady => "ipv6_not_ready",
            Ipv6Refusal::Full => "ipv6_max_addresses",
            Ipv6Refusal::Failed => "ipv6_bind_failed",
        }
    }
}

/// `agentctl status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusView {
    pub router_id: Box<str>,
    pub software: Box<str>,
    pub uptime_s: u64,
    pub generation: u64,
    pub routes: u64,
    pub local_routes: u64,
    pub static_routes: u64,
    pub peer_routes: u64,
    pub fib_subscribers: u64,
    /// `None` when the running configuration is valid; otherwise why the
    /// last load or reload was refused.
    pub config_error: Option<Box<str>>,
    /// What the running configuration left out of its file (the first
    /// [`MAX_STATUS_PROBLEMS`]); empty when the file was valid.
    pub config_problems: Vec<ConfigProblem>,
    /// How many problems there are in all.
    pub config_problems_total: u64,
    /// Where the configuration comes from (file path or the demo config).
    pub config_source: Box<str>,
    /// Successful configuration loads (startup counts as the first);
    /// a refused reload leaves it unchanged.
    pub config_generation: u64,
    /// Set while the policy is unusable: every request is denied for this
    /// reason until a reload repairs it.
    pub policy_error: Option<Box<str>>,
    /// Valid options that cannot do what they say, or do more than their
    /// line shows (what `agentd --check-config` warns about).
    pub warnings: Vec<Box<str>>,
    /// Our claim on the mDNS name `nexus-router.local`
    /// (`discovery.nexus_alias`).
    pub nexus_alias: AliasView,
    /// The relay role (`relay.mode`), `None` when off.
    pub relay: Option<Box<RelayView>>,
    /// The per-agent address service (`ipv6.mode`), `None` when off.
    pub ipv6: Option<Box<Ipv6View>>,
}

/// The per-agent address service as `agentctl status` and ubus show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ipv6View {
    /// `routed-prefix` or `ndp-proxy`.
    pub mode: Box<str>,
    /// The prefix in use (`auto` resolved); `None` when none could be.
    pub prefix: Option<Box<str>>,
    /// `ipv6.prefix` as written (`auto` or a prefix).
    pub configured_prefix: Box<str>,
    pub interface: Box<str>,
    pub upstream_interface: Box<str>,
    /// Addresses bound to agents now, and the most allowed.
    pub bound: u64,
    pub max_addresses: u64,
    /// Addresses can be bound (no problem below).
    pub ready: bool,
    /// Why addresses cannot be bound now.
    pub problems: Vec<Box<str>>,
    /// Cautions that do not stop it (odhcpd relaying NDP upstream).
    pub warnings: Vec<Box<str>>,
    /// Addresses and proxy entries an earlier run left, removed at start.
    pub stale_removed: u64,
}

/// The relay role as `agentctl status` / `peers` and ubus show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayView {
    /// `client` or `server`.
    pub mode: Box<str>,
    /// Client mode: the relays in preference order.
    pub servers: Vec<RelayServerView>,
    /// Server mode: the client routers connected now.
    pub clients: Vec<Box<str>>,
    pub max_clients: u64,
    /// Client routers refused at their handshake so far.
    pub refused: u64,
}

/// One relay of a client's `relay.server` list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayServerView {
    /// `host:port` as configured.
    pub server: Box<str>,
    /// The router its certificate proved, while connected.
    pub router_id: Option<Box<str>>,
    /// `idle`, `dialing`, `standby` (up, proving itself) or `in_use`.
    pub state: Box<str>,
    /// Milliseconds in `standby` or `in_use`.
    pub since_ms: Option<u64>,
    /// When it is dialled next, if idle.
    pub retry_in_ms: Option<u64>,
    pub failures: u64,
    pub last_error: Option<Box<str>>,
}

/// What both ends of a relay are told (DESIGN §7): a relay reads the calls
/// it carries.
pub const RELAY_SEES_PAYLOADS: &str =
    "the relay terminates TLS and sees the payloads of the calls it carries";

/// Where a host name we may answer over mDNS stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasView {
    /// The name, without the root dot.
    pub name: Box<str>,
    /// `off`, `claiming` (looked up, then probed), `answering` or
    /// `deferred` (another device holds it; we do not answer it).
    pub state: Box<str>,
    /// Why it is off or deferred.
    pub detail: Option<Box<str>>,
}

/// Most config problems one `status` reply lists (it must fit one frame).
pub const MAX_STATUS_PROBLEMS: usize = 32;

/// One problem of the running configuration file and what agentd did
/// about it (`agentctl status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigProblem {
    /// Section type (`rule`), `None` for the whole file.
    pub section_type: Option<Box<str>>,
    /// How the section is named in messages: `rule 'bad'`, `@route[2]`.
    pub section: Option<Box<str>>,
    pub option: Option<Box<str>>,
    /// What is wrong.
    pub reason: Box<str>,
    /// What was done: `section_skipped`, `option_default`, ... (see
    /// `uci_schema::Recovery::as_str`).
    pub action: Box<str>,
    /// The whole message (file, section, option, reason, action).
    pub message: Box<str>,
}

impl ConfigProblem {
    pub fn of(p: &uci_schema::Problem) -> ConfigProblem {
        let clip = |s: String| -> Box<str> {
            const MAX: usize = 512;
            match s.char_indices().nth(MAX) {
                Some((i, _)) => format!("{}...", &s[..i]).into(),
                None => s.into(),
            }
        };
        let e = &p.error;
        ConfigProblem {
            section_type: e.section.as_ref().map(|s| clip(s.ty.clone())),
            section: e.section.as_ref().map(|s| clip(s.to_string())),
            option: e.option.clone().map(clip),
            reason: clip(e.kind.to_string()),
            action: p.recovery.as_str().into(),
            message: clip(p.to_string()),
        }
    }
}

/// One row of `agentctl routes`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteView {
    pub route_id: RouteId,
    pub capability: Box<str>,
    pub version: u32,
    pub origin: Box<str>,
    pub endpoint: Box<str>,
    pub tenant: Box<str>,
    pub region: Box<str>,
    pub source: RouteSource,
    pub attrs: Attributes,
    pub healthy: bool,
    /// Seconds left on the lease at the time of the reply; `None` for
    /// permanent (static) routes.
    pub expires_in_s: Option<u64>,
    pub path: Vec<Box<str>>,
    pub next_hop: Option<Box<str>>,
    /// False while the session to the next hop is down (a lost peer's
    /// paths are kept for `arpx.graceful_s`, ineligible); true for routes
    /// of our own.
    pub session_up: bool,
    /// How the origin was proven.
    pub proof: route::OriginProof,
    /// Another origin router's claim of the origin wins (ineligible).
    pub disputed: bool,
}

impl RouteView {
    pub fn of(route: &route::Route, now: Millis) -> RouteView {
        RouteView {
            route_id: route.id.clone(),
            capability: route.capability.as_str().into(),
            version: route.version,
            origin: route.origin.as_str().into(),
            endpoint: route.endpoint.as_str().into(),
            tenant: route.tenant.as_str().into(),
            region: route.region.as_str().into(),
            source: route.source,
            attrs: route.attrs,
            healthy: route.healthy,
            expires_in_s: match route.lease {
                route::Lease::Permanent => None,
                route::Lease::Until(t) => Some(t.saturating_sub(now) / 1000),
            },
            path: route.path.to_vec(),
            next_hop: route.next_hop.as_deref().map(Into::into),
            session_up: true,
            proof: route.proof,
            disputed: route.disputed,
        }
    }

    /// Whether selection may pick it (health, session and the origin's
    /// ownership; policy aside). A route whose lease ended is not in the
    /// table any more.
    pub fn eligible(&self) -> bool {
        self.healthy && self.session_up && !self.disputed
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutePage {
    pub routes: Vec<RouteView>,
    /// Pass as `after` to get the next page; `None` on the last page.
    pub next: Option<RouteId>,
}

/// One row of `agentctl agents`: an origin and what it registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentView {
    pub origin: Box<str>,
    pub tenant: Box<str>,
    pub routes: u64,
    pub capabilities: Vec<Box<str>>,
    pub healthy_routes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPage {
    pub agents: Vec<AgentView>,
    pub next: Option<Box<str>>,
}

/// One ranked candidate in a lookup answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateView {
    /// The table id: `<route_id>@<next_hop>` for a peer path.
    pub route_id: RouteId,
    pub origin: Box<str>,
    pub endpoint: Box<str>,
    /// Routers traversed, origin router first (empty for our own routes);
    /// its length is the hop count in the score.
    pub path: Vec<Box<str>>,
    pub next_hop: Option<Box<str>>,
    pub source: RouteSource,
    /// How the origin was proven.
    pub proof: route::OriginProof,
    pub score: u64,
}

/// `agentctl lookup [--explain]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LookupView {
    /// Id of the policy rule that decided; `None` for the default action.
    pub rule: Option<Box<str>>,
    /// A deny rule, the default action or an invalid policy refused the
    /// request; no route was evaluated.
    pub denied: bool,
    /// Why nothing can be used, when nothing can: `policy_denied`,
    /// `default_deny`, `policy_invalid`, or the most specific rejection
    /// reason of the candidates (`lease_expired`, `unhealthy`, …).
    pub refusal: Option<Box<str>>,
    /// Best first; the winner is `candidates[0]`. Without `explain` only
    /// the winner is listed.
    pub candidates: Vec<CandidateView>,
    /// Rejections per eligibility reason, non-zero ones only; filled only
    /// with `explain`.
    pub rejections: BTreeMap<Box<str>, u64>,
}

/// `agentctl stats`: named counters, and the gateway's latest report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsView {
    pub counters: BTreeMap<Box<str>, u64>,
    /// `None` until an agent-gw reported.
    pub gateway: Option<GatewayView>,
}

/// `agentctl peers`: this router's side of the mesh and one row per
/// configured peer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeersView {
    /// `agentd.router_id` as configured; `None` when empty.
    pub router_id: Option<Box<str>>,
    /// Why no session runs at all (no router_id, unreadable identity or
    /// certificate); `None` while the mesh is running.
    pub off_reason: Option<Box<str>>,
    /// `sha256:<hex>` of the identity key (what peers pin).
    pub fingerprint: Option<Box<str>>,
    /// `arpx.listen`, `None` when inbound sessions are off.
    pub listen: Option<Box<str>>,
    /// Why the listener is not running although configured.
    pub listen_error: Option<Box<str>>,
    pub peers: Vec<PeerView>,
    /// The relay role, `None` when off.
    pub relay: Option<Box<RelayView>>,
}

/// One configured peer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerView {
    pub router_id: Box<str>,
    pub address: Box<str>,
    pub port: u16,
    /// The session state (`idle`, `connecting`, `open_sent`, `snapshot`,
    /// `established`, ...).
    pub state: Box<str>,
    /// Milliseconds in that state (the uptime when established).
    pub state_ms: u64,
    pub established: bool,
    /// Paths held from it / routes advertised to it.
    pub routes_in: u64,
    pub routes_out: u64,
    /// The last transport or handshake failure (these never reach the
    /// session; e.g. an unpinned key).
    pub last_error: Option<Box<str>>,
    pub last_close: Option<CloseView>,
    /// Milliseconds until the next dial, while waiting to retry.
    pub next_dial_ms: Option<u64>,
    /// Failed attempts since the backoff was last reset.
    pub dial_failures: u32,
    /// Paths from it refused or given up while its session stayed (route
    /// limits, contradicted origin keys), and why the last one was.
    pub dropped_routes: u64,
    pub last_drop: Option<Box<str>>,
}

/// How a session ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseView {
    /// The ARPX close code (`peer_removed`, `hold_expired`, ...).
    pub code: Box<str>,
    pub reason: Box<str>,
    /// Whether this router sent the Close.
    pub by_us: bool,
}

/// What agent-gw reports about its memory budget and task table. Fixed
/// fields (no maps, no strings): decoding stays bounded and typed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayStats {
    /// `buffer_budget` in use / its limit / the most ever in use.
    pub buffer_used: u64,
    pub buffer_limit: u64,
    pub buffer_peak: u64,
    /// Tasks held / `task_capacity`.
    pub tasks: u64,
    pub task_capacity: u64,
    /// New async/stream work refused because the whole budget was used
    /// (503 overloaded), or a tenant's / a client address's share of it
    /// (429 share_exceeded).
    pub refused_budget: u64,
    pub refused_budget_tenant: u64,
    pub refused_budget_source: u64,
    /// Refused because the task table was full (503 task_table_full), or a
    /// tenant's / address's share of it was held (429 share_exceeded).
    pub refused_tasks_full: u64,
    pub refused_tasks_tenant: u64,
    pub refused_tasks_source: u64,
    /// Stream events pushed with a degraded history bound (budget full).
    pub history_degraded: u64,
    /// Finished async tasks released when their result was fetched.
    pub results_released: u64,
    /// Stream followers detached for taking no bytes.
    pub stalled_followers: u64,
    /// Open peer data-plane connections (HTTP/2 over mTLS with other
    /// routers' gateways), both directions.
    pub peer_conns: u64,
    /// Completed TLS handshakes of peer connections since start, dialled
    /// by us / accepted from a peer.
    pub peer_handshakes_out: u64,
    pub peer_handshakes_in: u64,
    /// HTTP/2 streams the peer listener refused or reset.
    pub peer_streams_refused: u64,
    /// Forwarding assertions issued to peers, and the Ed25519 signatures
    /// they took (calls of one event-loop turn share one; see
    /// `peer::signer`).
    pub peer_assertions_signed: u64,
    pub peer_signatures: u64,
    /// Peer assertions accepted, and the signature verifications made
    /// (a batch's root is verified once; forged signatures, refused,
    /// count too, so checks above accepted assertions mean refusals).
    pub peer_assertions_verified: u64,
    pub peer_signature_checks: u64,
    /// Calls passed through to another router with their body streamed
    /// unread (a relay, a path through a reflector), and the body bytes
    /// they carried: held here only within the HTTP/2 windows.
    pub peer_transit_calls: u64,
    pub peer_transit_bytes: u64,
    /// Handles of tasks that live on other routers (async calls and
    /// streams sent on to a peer path, held by the router that calls the
    /// handler), held here out of `task_capacity`; refusals of that table
    /// (full, a tenant's or an address's share); handles freed because
    /// their result was collected.
    pub remote_tasks: u64,
    pub refused_remote_full: u64,
    pub refused_remote_tenant: u64,
    pub refused_remote_source: u64,
    pub remote_released: u64,
}

/// The gateway's latest report as agentd holds it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayView {
    pub stats: GatewayStats,
    /// Milliseconds since it arrived (agent-gw reports at least every few
    /// seconds; a large age means the gateway is gone or stuck).
    pub age_ms: u64,
}

#[cfg(test)]
mod tests;
