//! The typed configuration: one struct per section type. Field names are
//! the option names; numbers are never `Option` — an absent option holds
//! its default from the schema table, and `0` is a value like any other.
//! Strings whose option accepts `''` use the empty string for the meaning
//! the schema documents (e.g. "disabled").

use super::error::SectionRef;
use crate::enums::{
    Action, Admission, Auth, Effect, HealthCheck, Ipv6Mode, LogLevel, ProofLevel, Protocol,
    RelayMode, RouteSource,
};

/// `config agentd 'main'`: the routing service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agentd {
    pub enabled: bool,
    /// Empty: use the system host name.
    pub router_id: String,
    pub domain: String,
    pub identity: String,
    pub domain_ca: String,
    pub router_cert: String,
    pub ipc_socket: String,
    pub state_dir: String,
    /// Seconds; `min_lease <= default_lease <= max_lease` is validated.
    pub default_lease: u64,
    pub min_lease: u64,
    pub max_lease: u64,
    pub max_routes: u64,
    pub max_routes_per_origin: u64,
    pub max_routes_per_source: u64,
    pub default_action: Action,
    pub log_level: LogLevel,
    pub health_check: HealthCheck,
    /// Seconds.
    pub health_interval: u64,
    pub health_timeout_ms: u64,
    pub health_fail_threshold: u64,
    pub health_recover_threshold: u64,
    /// Global cap on probe starts per second.
    pub health_max_probes_per_s: u64,
    /// Registrations may name loopback / the router's own addresses.
    pub allow_loopback_endpoints: bool,
    /// Interfaces whose subnets are LAN for registration endpoints.
    pub lan_interface: Vec<String>,
    /// `addr/len` strings (validated) exempt from the LAN-scope check.
    pub endpoint_allow_prefix: Vec<String>,
}

/// `config gateway`: agent-gw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    /// Socket address strings (validated); empty = listener disabled
    /// (not allowed for `sdk_listen`).
    pub sdk_listen: String,
    pub public_listen: String,
    /// Empty: the router's own certificate.
    pub public_cert: String,
    /// Required with `public_cert`.
    pub public_key: String,
    /// Empty: callers authenticate with tokens only.
    pub client_ca: String,
    pub peer_listen: String,
    pub admin_listen: String,
    pub auth: Auth,
    /// Empty: the router identity key.
    pub issuer_key: String,
    pub bootstrap: bool,
    /// `addr/len` or bare address strings (validated).
    pub bootstrap_networks: Vec<String>,
    /// Tenants bootstrap may issue tokens for.
    pub bootstrap_tenant: Vec<String>,
    pub bootstrap_ttl: u64,
    pub max_token_lifetime: u64,
    pub clock_skew: u64,
    pub max_request_bytes: u64,
    pub rate_per_second: u64,
    pub rate_burst: u64,
    pub max_inflight: u64,
    pub max_inflight_per_source: u64,
    pub max_inflight_per_peer: u64,
    pub max_connections: u64,
    pub max_conns_per_source: u64,
    pub body_read_timeout_ms: u64,
    pub control_rate_per_source: u64,
    pub control_burst_per_source: u64,
    pub default_timeout_ms: u64,
    pub task_capacity: u64,
    pub task_ttl: u64,
    pub stream_history_events: u64,
    pub stream_history_bytes: u64,
    pub max_result_bytes: u64,
    pub buffer_budget: u64,
    pub tenant_share_percent: u64,
    pub source_share_percent: u64,
    pub stream_drain_timeout_ms: u64,
    pub hop_limit: u64,
    pub assertion_ttl: u64,
    pub replay_cache: u64,
    pub expose_schemas: bool,
    pub mcp_max_sessions: u64,
    /// Seconds.
    pub mcp_session_idle: u64,
    pub protocol_tenant: String,
    pub allowed_hosts: Vec<String>,
    pub public_url: String,
}

/// `config arpx`: inter-router route exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arpx {
    /// Empty: no inbound sessions.
    pub listen: String,
    pub heartbeat_ms: u64,
    pub miss_limit: u64,
    pub graceful_s: u64,
    pub reflector: bool,
    /// Bytes of one frame, length prefix excluded.
    pub max_frame: u64,
    /// Routers in an accepted path vector, origin included.
    pub max_path: u64,
    /// Paths held from one neighbour for one origin router.
    pub max_routes_per_origin: u64,
}

/// `config discovery`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    pub enabled: bool,
    pub interface: Vec<String>,
    pub admission: Admission,
    pub candidate_lifetime_s: u64,
    /// Answer `nexus-router.local` (mDNS) for Nexus SDK agents.
    pub nexus_alias: bool,
    pub allow_fingerprint: Vec<String>,
    /// Empty: cross-domain lookups off.
    pub resolver: String,
    pub search_domain: Vec<String>,
    pub require_dnssec: bool,
    pub refresh_min_s: u64,
    pub refresh_max_s: u64,
    pub query_timeout_ms: u64,
}

/// `config peer`: a static peer router.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// UCI section name; `None` for an anonymous section (`@peer[i]` where
    /// `i` is this entry's position in `Config::peers`).
    pub section: Option<String>,
    /// Where the section is in the file, for messages about it.
    pub at: SectionRef,
    pub enabled: bool,
    pub router_id: String,
    pub address: String,
    pub port: u16,
    pub data_port: u16,
    /// Empty: rely on `domain_ca`.
    pub key_fingerprint: String,
    pub reflector_client: bool,
    /// Calls to and from this peer carry forwarding assertions even
    /// though the domain CA vouches for it.
    pub sign_calls: bool,
    /// Paths held from this peer (the excess is dropped, fairly by origin).
    pub max_routes: u64,
    /// Highest trust granted to routes learned from this peer.
    pub max_trust: u64,
    /// Strongest origin proof a route learned from this peer may claim.
    pub max_proof: ProofLevel,
    /// Tenant names exported to this peer; empty: every tenant.
    pub export_tenant: Vec<String>,
    /// Written by `agentctl approve` (a router admitted from discovery).
    pub discovered: bool,
    /// The discovery record version the approval binds to; 0: none.
    pub record_version: u64,
}

/// `config tenant`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    pub section: Option<String>,
    /// Where the section is in the file, for messages about it.
    pub at: SectionRef,
    /// Defaults to the section name.
    pub name: String,
    /// `ed25519:BASE64` public keys.
    pub jwt_key: Vec<String>,
    pub rate_per_second: u64,
    pub rate_burst: u64,
    /// Local routes of the tenant's agents together; 2^64-1: unlimited.
    pub max_routes: u64,
    /// Highest trust a LAN registration of the tenant is granted.
    pub max_trust: u64,
}

/// `config agent`: an origin pinned to sources or a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    pub section: Option<String>,
    /// Where the section is in the file, for messages about it.
    pub at: SectionRef,
    pub origin: String,
    /// `addr/len` strings (validated); empty: any source.
    pub source: Vec<String>,
    /// `ed25519:BASE64`; empty: no key pin.
    pub key: String,
    pub allow_loopback: bool,
}

/// `config rule`: one policy rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub section: Option<String>,
    /// Where the section is in the file, for messages about it.
    pub at: SectionRef,
    /// Defaults to the section name; unique.
    pub id: String,
    pub enabled: bool,
    pub priority: u32,
    pub action: Action,
    /// Patterns: `*`, exact, or `prefix.*`.
    pub tenant: String,
    pub source: String,
    pub capability: String,
    pub constraints: Constraints,
    pub weights: Weights,
    /// Empty: no preferred peer (no penalty applies).
    pub preferred_peer: String,
    /// Added to the score of routes not via `preferred_peer` (when set).
    pub nonpreferred_penalty: u64,
}

/// Eligibility constraints of an allow rule. `Default` is "no constraint"
/// (the schema defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraints {
    /// Empty: any region.
    pub region: String,
    pub max_latency_ms: u64,
    pub max_cost: u64,
    pub max_load: u64,
    pub min_trust: u64,
    pub min_proof: ProofLevel,
    pub max_hops: u64,
    pub sources: Vec<RouteSource>,
    /// Empty: any peer.
    pub required_peer: String,
    /// Empty: none.
    pub denied_peer: String,
    /// Empty: any endpoint.
    pub endpoint_prefix: String,
}

/// Score weights (DESIGN §4). `Default` gives the schema defaults, which
/// also apply when no rule matches. `d_cost >= 1` is validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weights {
    pub w_latency: u64,
    pub d_cost: u64,
    pub w_load: u64,
    pub w_trust: u64,
    pub w_hops: u64,
}

/// `config route`: a static route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticRoute {
    pub section: Option<String>,
    /// Where the section is in the file, for messages about it.
    pub at: SectionRef,
    /// route_id; defaults to the section name; unique.
    pub id: String,
    pub enabled: bool,
    pub capability: String,
    /// >= 1.
    pub version: u32,
    pub origin: String,
    pub endpoint: String,
    /// The endpoint may be loopback / one of the router's own addresses.
    pub allow_loopback: bool,
    /// Filled from `origin` when absent.
    pub tenant: String,
    pub region: String,
    pub latency_ms: u64,
    /// Millionths of a unit.
    pub cost: u64,
    /// Permille.
    pub load: u64,
    pub trust: u64,
    /// Empty: only the route's own tenant.
    pub allowed_tenants: Vec<String>,
    /// Empty: any source agent.
    pub allowed_sources: Vec<String>,
    /// `None`: the route has no contract.
    pub effect: Option<Effect>,
    pub idempotent: bool,
    pub description: String,
    /// JSON object text; empty: none.
    pub input_schema: String,
}

/// `config mapping`: an MCP tool or A2A skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub section: Option<String>,
    /// Where the section is in the file, for messages about it.
    pub at: SectionRef,
    pub enabled: bool,
    pub protocol: Protocol,
    /// Defaults to the section name; unique per protocol.
    pub name: String,
    pub capability: String,
    pub version: u32,
    pub title: String,
    pub description: String,
    /// JSON object text; empty: none.
    pub input_schema: String,
    /// Path of a file holding the schema instead; empty: none. Read with
    /// [`read_schema_file`](crate::read_schema_file).
    pub input_schema_file: String,
}

/// `config ipv6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6 {
    pub mode: Ipv6Mode,
    /// Required unless `mode` is off.
    pub prefix: String,
    pub interface: String,
    pub upstream_interface: String,
    pub max_addresses: u64,
}

/// `config relay`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay {
    pub mode: RelayMode,
    /// ARPX `host:port` of each relay, in preference order; at least one
    /// in client mode.
    pub server: Vec<String>,
    pub data_port: u64,
    pub server_key_fingerprint: Vec<String>,
    pub client_key_fingerprint: Vec<String>,
    pub max_clients: u64,
    pub max_streams_per_client: u64,
    pub max_bytes_in_flight: u64,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    pub prefer_hold_s: u64,
    pub ping_interval_ms: u64,
    pub ping_timeout_ms: u64,
}

/// `config cloud`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cloud {
    pub enabled: bool,
    /// Required when enabled.
    pub url: String,
    pub pairing: String,
}

impl Default for Weights {
    /// The schema defaults (wL 1000, dC 100, wU 100, wT 5000, wH 10000).
    fn default() -> Weights {
        super::build::default_rule().weights
    }
}

impl Default for Constraints {
    /// No constraint: every bound at its schema default.
    fn default() -> Constraints {
        super::build::default_rule().constraints
    }
}
