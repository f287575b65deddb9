//! What the gateway needs from `/etc/config/agentd`. Filled from
//! `uci_schema` by the binary; tests build it directly from
//! `GatewayConfig::default()`, which is the schema's defaults too (the one
//! source of defaults, DESIGN §9).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::auth::net::IpNet;
use crate::limits::Rate;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthMode {
    /// Bearer JWTs (the default).
    Jwt,
    /// Lab mode: no authentication; loudly logged.
    None,
}

#[derive(Clone, Debug)]
pub struct GatewayConfig {
    pub router_id: Box<str>,
    pub sdk_listen: SocketAddr,
    /// `gateway.peer_listen`; `None`: no inbound peer data connections.
    pub peer_listen: Option<SocketAddr>,
    /// `gateway.public_listen`; `None`: no public HTTPS ingress.
    pub public_listen: Option<SocketAddr>,
    /// `gateway.admin_listen`; `None`: no Prometheus endpoint.
    pub admin_listen: Option<SocketAddr>,
    /// `gateway.public_cert` and `public_key`; `None`: the public
    /// listener presents the router's own certificate.
    pub public_cert: Option<(PathBuf, PathBuf)>,
    /// `gateway.client_ca`: callers of the public listeners may show a
    /// certificate it issued instead of a token.
    pub client_ca: Option<PathBuf>,
    /// `agentd.domain_ca`: names the trust bundle of the router's own
    /// certificate in registration replies.
    pub domain_ca: Option<PathBuf>,
    /// `agentd.router_id` was configured: the gateway takes part in the
    /// mesh data plane (a host-name fallback is no mesh identity, as in
    /// agentd's ARPX driver).
    pub mesh: bool,
    /// `gateway.assertion_ttl` in ms.
    pub assertion_ttl_ms: u64,
    /// `gateway.replay_cache`.
    pub replay_cache: usize,
    /// `agentd.identity` and `agentd.router_cert`: the data plane presents
    /// the same identity as ARPX (agentd creates the key; the gateway only
    /// reads it, once the first peer is linked).
    pub identity: PathBuf,
    pub router_cert: Option<PathBuf>,
    pub auth: AuthMode,
    pub ipc_socket: PathBuf,
    pub max_request_bytes: usize,
    pub rate: Rate,
    /// Per-tenant overrides from `tenant` sections.
    pub tenant_rates: HashMap<Box<str>, Rate>,
    pub max_inflight: usize,
    /// Most requests in flight from one source (IPv4 address, IPv6 /64).
    pub max_inflight_per_source: usize,
    /// Most calls in flight that one neighbour router forwarded.
    pub max_inflight_per_peer: usize,
    /// register/renew/unregister/bootstrap per source address.
    pub control_rate: Rate,
    pub task_capacity: usize,
    pub task_ttl_s: u64,
    pub stream_history_events: usize,
    pub stream_history_bytes: usize,
    /// `max_result_bytes`: largest answer an async task keeps, and what a
    /// running async task reserves from the budget.
    pub max_result_bytes: usize,
    /// `buffer_budget`: bytes held for callers at most (see `budget`).
    pub buffer_budget: usize,
    /// `tenant_share_percent` / `source_share_percent`: most of the task
    /// table and of the budget one tenant / one client address may hold.
    pub tenant_share_percent: u64,
    pub source_share_percent: u64,
    /// `stream_drain_timeout_ms`: a follower that takes nothing for this
    /// long is detached.
    pub stream_drain_timeout_ms: u64,
    pub hop_limit: u8,
    /// Budget of a call whose caller named none.
    pub default_timeout_ms: u64,
    /// Most concurrent client connections; beyond it new ones are closed.
    pub max_connections: usize,
    /// Most open connections from one source; beyond it that source's new
    /// connections are closed at accept.
    pub max_conns_per_source: usize,
    /// Longest time to receive a request body once its head arrived.
    pub body_read_timeout_ms: u64,
    /// Most routes the FIB replica holds.
    pub max_routes: usize,
    /// Lease bounds (`agentd.min_lease` / `max_lease`), seconds.
    pub lease_min_s: u64,
    pub lease_max_s: u64,
    /// `agentd.domain`, part of the advertised JWT issuer.
    pub domain: Box<str>,
    /// The router issuer key (gateway `issuer_key` file, else agentd's
    /// `identity`), loaded by the binary with `auth::load_or_create_key`.
    /// `None`: a fresh key per start (tests, lab).
    pub issuer_key: Option<edkey::SigningKey>,
    /// `jwt_key` values of the `tenant` sections, parsed.
    pub tenant_keys: Vec<(Box<str>, edkey::VerifyingKey)>,
    /// Tolerated clock difference for token times, seconds.
    pub jwt_clock_skew_s: u64,
    /// Longest accepted token lifetime (`exp - iat`), seconds.
    pub jwt_max_lifetime_s: u64,
    /// Trusted-LAN bootstrap on `/agent/v1/bootstrap`.
    pub bootstrap: bool,
    /// Source networks allowed to bootstrap (the trusted LAN).
    pub bootstrap_networks: Vec<IpNet>,
    /// Lifetime of bootstrap tokens, seconds (at most 300).
    pub bootstrap_ttl_s: u64,
    /// Tenants bootstrap issues tokens for (`gateway.bootstrap_tenant`).
    pub bootstrap_tenants: Vec<String>,
    /// Literal addresses of the enabled `peer` sections: a LAN
    /// registration's host name never resolves to one of them (nor to a
    /// linked peer's, which the FIB carries).
    pub peer_addrs: Vec<std::net::IpAddr>,
    /// Where handler endpoints may point: the suite's listener ports and
    /// `agentd.allow_loopback_endpoints` (the same rules agentd applies).
    pub endpoints: agentd::endpoint::Guard,
    /// `agent` sections by origin: who may get bootstrap tokens for them.
    pub pins: HashMap<Box<str>, agentd::owner::AgentPin>,
    /// Enabled `mapping` sections (MCP tools, A2A skills), schema files
    /// read.
    pub mappings: Vec<crate::catalog::Entry>,
    /// `gateway.expose_schemas`.
    pub expose_schemas: bool,
    /// `gateway.mcp_max_sessions`.
    pub mcp_max_sessions: usize,
    /// `gateway.mcp_session_idle` in ms.
    pub mcp_session_idle_ms: u64,
    /// `gateway.protocol_tenant`: the tenant of MCP/A2A calls in auth
    /// `none`.
    pub protocol_tenant: Box<str>,
    /// `gateway.allowed_hosts` (Host/Origin names besides the router's own
    /// addresses).
    pub allowed_hosts: Vec<Box<str>>,
    /// `gateway.public_url` (no trailing slash): the base URL written into
    /// A2A agent cards; empty: from the request.
    pub public_url: Box<str>,
    /// The `relay` section's data-plane part.
    pub relay: RelayConfig,
}

/// What the data plane takes from the `relay` section (which relay is
/// used is agentd's choice; the gateway follows the FIB's links).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelayConfig {
    /// Server mode: calls in flight toward one client router.
    pub max_streams_per_client: u32,
    /// Server mode: a client's tunnel's HTTP/2 connection window.
    pub max_bytes_in_flight: u32,
    pub ping_interval_ms: u64,
    pub ping_timeout_ms: u64,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
}

impl RelayConfig {
    fn of(r: &uci_schema::Relay) -> RelayConfig {
        let u32_of = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        RelayConfig {
            max_streams_per_client: u32_of(r.max_streams_per_client),
            max_bytes_in_flight: u32_of(r.max_bytes_in_flight),
            ping_interval_ms: r.ping_interval_ms,
            ping_timeout_ms: r.ping_timeout_ms,
            reconnect_min_ms: r.reconnect_min_ms,
            reconnect_max_ms: r.reconnect_max_ms.max(r.reconnect_min_ms),
        }
    }
}

impl Default for GatewayConfig {
    /// Every option at its schema default (what an empty file gives), so
    /// tests that build a config directly start from the real defaults.
    fn default() -> Self {
        GatewayConfig::from_partial(uci_schema::Config::defaults()).0
    }
}

/// Why the shared config cannot drive the gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The per-source rate of control calls (schema defaults where unset).
fn control_rate(g: &uci_schema::Gateway) -> Rate {
    Rate {
        per_second: g.control_rate_per_source,
        burst: g.control_burst_per_source,
    }
}

/// A listener option: empty in the typed config (`'off'` in the file; an
/// empty or absent option is the default address) disables the listener.
fn optional_listener(option: &str, value: &str, problems: &mut Vec<String>) -> Option<SocketAddr> {
    if value.is_empty() {
        return None;
    }
    let parsed = value.parse().ok();
    if parsed.is_none() {
        problems.push(format!(
            "gateway: option '{option}': {value:?} is not a socket address; listener disabled"
        ));
    }
    parsed
}

fn usize_of(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The enabled mappings as catalog entries. A schema file that cannot be
/// used leaves its mapping out (a tool without its declared schema would
/// accept what the operator meant to refuse), with a message.
impl GatewayConfig {
    /// The task table's bounds these options set, with the reserves the
    /// gateway's own limits imply.
    pub fn task_config(&self) -> crate::task::TaskConfig {
        let sse = crate::task::live::SseLimits::default();
        crate::task::TaskConfig {
            capacity: self.task_capacity,
            ttl_ms: self.task_ttl_s.saturating_mul(1000),
            history_events: self.stream_history_events,
            history_bytes: self.stream_history_bytes,
            tenant_share_percent: self.tenant_share_percent,
            source_share_percent: self.source_share_percent,
            result_reserve: self.max_result_bytes,
            stream_reserve: sse.max_event + sse.max_line + crate::task::history::EVENT_OVERHEAD,
        }
    }
}

fn mappings_of(c: &uci_schema::Config, problems: &mut Vec<String>) -> Vec<crate::catalog::Entry> {
    let text = |s: &str| (!s.is_empty()).then(|| Box::<str>::from(s));
    let mut out = Vec::new();
    for m in c.mappings.iter().filter(|m| m.enabled) {
        let input_schema = if m.input_schema_file.is_empty() {
            text(&m.input_schema)
        } else {
            match uci_schema::read_schema_file(std::path::Path::new(&m.input_schema_file)) {
                Ok(s) => Some(s.into()),
                Err(e) => {
                    problems.push(format!(
                        "{}: option 'input_schema_file': {:?} {e}; mapping not used",
                        m.at, m.input_schema_file
                    ));
                    continue;
                }
            }
        };
        out.push(crate::catalog::Entry {
            protocol: m.protocol,
            name: m.name.as_str().into(),
            title: text(&m.title),
            description: text(&m.description),
            capability: m.capability.as_str().into(),
            version: m.version,
            input_schema,
            mapped: true,
        });
    }
    out
}

impl GatewayConfig {
    /// The gateway's view of a validated `/etc/config/agentd`; refuses a
    /// value the gateway cannot use.
    pub fn from_uci(c: &uci_schema::Config) -> Result<GatewayConfig, ConfigError> {
        let (cfg, problems) = GatewayConfig::from_partial(c);
        match problems.into_iter().next() {
            None => Ok(cfg),
            Some(p) => Err(ConfigError(p)),
        }
    }

    /// The gateway's view of the valid part of a file (a partial load):
    /// a value the gateway cannot use is left out like the schema leaves
    /// out invalid parts (a tenant key that does not parse drops that
    /// tenant's key; an option falls back to its default), each with a
    /// message for the log.
    pub fn from_partial(c: &uci_schema::Config) -> (GatewayConfig, Vec<String>) {
        let mut problems = Vec::new();
        let g = &c.gateway;
        let d = &uci_schema::Config::defaults().gateway;
        let sdk_listen = g.sdk_listen.parse().unwrap_or_else(|_| {
            problems.push(format!(
                "gateway: option 'sdk_listen': {:?} is not a socket address; using the default {}",
                g.sdk_listen, d.sdk_listen
            ));
            d.sdk_listen
                .parse()
                .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0)))
        });
        let peer_listen = optional_listener("peer_listen", &g.peer_listen, &mut problems);
        let public_listen = optional_listener("public_listen", &g.public_listen, &mut problems);
        let admin_listen = optional_listener("admin_listen", &g.admin_listen, &mut problems);
        let public_cert = (!g.public_cert.is_empty() && !g.public_key.is_empty())
            .then(|| (PathBuf::from(&g.public_cert), PathBuf::from(&g.public_key)));
        let router_id = if c.agentd.router_id.is_empty() {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "router".into())
        } else {
            c.agentd.router_id.clone()
        };
        let tenant_rates = c
            .tenants
            .iter()
            .map(|t| {
                (
                    t.name.as_str().into(),
                    Rate {
                        per_second: t.rate_per_second,
                        burst: t.rate_burst,
                    },
                )
            })
            .collect();
        let mut tenant_keys = Vec::new();
        for t in &c.tenants {
            for k in &t.jwt_key {
                match crate::auth::parse_public_key(k) {
                    Ok(key) => tenant_keys.push((t.name.as_str().into(), key)),
                    Err(e) => {
                        problems.push(format!("{}: option 'jwt_key': {e}; key not used", t.at))
                    }
                }
            }
        }
        let mut bootstrap_networks = Vec::new();
        for n in &g.bootstrap_networks {
            match IpNet::parse(n) {
                Ok(net) => bootstrap_networks.push(net),
                Err(e) => problems.push(format!(
                    "gateway: option 'bootstrap_networks': {e}; network not used"
                )),
            }
        }
        let mappings = mappings_of(c, &mut problems);
        let cfg = GatewayConfig {
            router_id: router_id.into(),
            sdk_listen,
            peer_listen,
            public_listen,
            admin_listen,
            public_cert,
            client_ca: (!g.client_ca.is_empty()).then(|| PathBuf::from(&g.client_ca)),
            domain_ca: (!c.agentd.domain_ca.is_empty()).then(|| PathBuf::from(&c.agentd.domain_ca)),
            mesh: !c.agentd.router_id.is_empty(),
            assertion_ttl_ms: g.assertion_ttl.saturating_mul(1000),
            replay_cache: usize_of(g.replay_cache),
            relay: RelayConfig::of(&c.relay),
            identity: PathBuf::from(&c.agentd.identity),
            router_cert: (!c.agentd.router_cert.is_empty())
                .then(|| PathBuf::from(&c.agentd.router_cert)),
            auth: match g.auth {
                uci_schema::enums::Auth::Jwt => AuthMode::Jwt,
                uci_schema::enums::Auth::None => AuthMode::None,
            },
            ipc_socket: PathBuf::from(&c.agentd.ipc_socket),
            max_request_bytes: usize_of(g.max_request_bytes),
            rate: Rate {
                per_second: g.rate_per_second,
                burst: g.rate_burst,
            },
            tenant_rates,
            max_inflight: usize_of(g.max_inflight),
            max_inflight_per_source: usize_of(g.max_inflight_per_source),
            max_inflight_per_peer: usize_of(g.max_inflight_per_peer),
            control_rate: control_rate(g),
            task_capacity: usize_of(g.task_capacity),
            task_ttl_s: g.task_ttl,
            stream_history_events: usize_of(g.stream_history_events),
            stream_history_bytes: usize_of(g.stream_history_bytes),
            max_result_bytes: usize_of(g.max_result_bytes),
            buffer_budget: usize_of(g.buffer_budget),
            tenant_share_percent: g.tenant_share_percent,
            source_share_percent: g.source_share_percent,
            stream_drain_timeout_ms: g.stream_drain_timeout_ms,
            hop_limit: u8::try_from(g.hop_limit).unwrap_or(u8::MAX),
            default_timeout_ms: g.default_timeout_ms,
            max_connections: usize_of(g.max_connections),
            max_conns_per_source: usize_of(g.max_conns_per_source),
            body_read_timeout_ms: g.body_read_timeout_ms,
            max_routes: usize_of(c.agentd.max_routes),
            lease_min_s: c.agentd.min_lease,
            lease_max_s: c.agentd.max_lease,
            domain: c.agentd.domain.as_str().into(),
            // I/O: the binary loads it (see `issuer_key_path`).
            issuer_key: None,
            tenant_keys,
            jwt_clock_skew_s: g.clock_skew,
            jwt_max_lifetime_s: g.max_token_lifetime,
            bootstrap: g.bootstrap,
            bootstrap_networks,
            bootstrap_ttl_s: g.bootstrap_ttl,
            bootstrap_tenants: g.bootstrap_tenant.clone(),
            peer_addrs: c
                .peers
                .iter()
                .filter(|p| p.enabled)
                .filter_map(|p| p.address.parse().ok())
                .collect(),
            endpoints: agentd::endpoint::Guard::of_config(c),
            pins: agentd::owner::pins_of(c),
            mappings,
            expose_schemas: g.expose_schemas,
            mcp_max_sessions: usize_of(g.mcp_max_sessions),
            mcp_session_idle_ms: g.mcp_session_idle.saturating_mul(1000),
            protocol_tenant: g.protocol_tenant.as_str().into(),
            allowed_hosts: g.allowed_hosts.iter().map(|h| h.as_str().into()).collect(),
            public_url: g.public_url.trim_end_matches('/').into(),
        };
        (cfg, problems)
    }

    /// The file holding the router's token-issuer key: the gateway's
    /// `issuer_key`, else the router identity key.
    pub fn issuer_key_path(c: &uci_schema::Config) -> PathBuf {
        if c.gateway.issuer_key.is_empty() {
            PathBuf::from(&c.agentd.identity)
        } else {
            PathBuf::from(&c.gateway.issuer_key)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_gateway_tenant_and_lease_options_from_uci() {
        let text = "config agentd 'main'\n\toption router_id 'router-a'\n\toption ipc_socket '/tmp/x.sock'\n\
            \toption min_lease '10'\n\toption max_lease '600'\n\
            config gateway 'gateway'\n\toption sdk_listen '127.0.0.1:7999'\n\toption auth 'none'\n\
            \toption max_request_bytes '1024'\n\toption rate_per_second '7'\n\toption rate_burst '9'\n\
            config tenant 'lab'\n\toption rate_per_second '3'\n\toption rate_burst '4'\n";
        let c = uci_schema::Config::from_str(text, "test").unwrap();
        let g = GatewayConfig::from_uci(&c).unwrap();
        assert_eq!(g.sdk_listen, "127.0.0.1:7999".parse().unwrap());
        assert_eq!(g.auth, AuthMode::None);
        assert_eq!(g.ipc_socket, PathBuf::from("/tmp/x.sock"));
        assert_eq!(g.max_request_bytes, 1024);
        assert_eq!(
            g.rate,
            Rate {
                per_second: 7,
                burst: 9
            }
        );
        assert_eq!(
            g.tenant_rates["lab"],
            Rate {
                per_second: 3,
                burst: 4
            }
        );
        assert_eq!((g.lease_min_s, g.lease_max_s), (10, 600));
        assert_eq!(&*g.router_id, "router-a");
    }

    #[test]
    fn defaults_match_the_design() {
        let c = uci_schema::Config::from_str("", "empty").unwrap();
        let g = GatewayConfig::from_uci(&c).unwrap();
        assert_eq!(g.auth, AuthMode::Jwt);
        assert_eq!(g.max_request_bytes, 65_536);
        assert_eq!(g.sdk_listen.port(), 7446);
        assert_eq!(
            g.bootstrap_networks,
            crate::auth::net::default_bootstrap_networks()
        );
        assert_eq!(g.bootstrap_ttl_s, 300);
        assert_eq!(g.buffer_budget, 16 * 1024 * 1024);
        assert_eq!(g.max_result_bytes, 1024 * 1024);
        assert_eq!((g.tenant_share_percent, g.source_share_percent), (50, 25));
        assert_eq!(g.stream_drain_timeout_ms, 5000);
        assert_eq!(
            (
                g.max_connections,
                g.max_conns_per_source,
                g.max_inflight_per_source,
                g.max_inflight_per_peer
            ),
            (1024, 128, 64, 128)
        );
        let d = GatewayConfig::default();
        assert_eq!(
            (
                d.max_connections,
                d.max_conns_per_source,
                d.max_inflight_per_source,
                d.max_inflight_per_peer
            ),
            (1024, 128, 64, 128)
        );
    }

    #[test]
    fn connection_and_inflight_caps_come_from_uci() {
        let text = "config gateway 'gateway'\n\toption max_connections '300'\n\
            \toption max_conns_per_source '7'\n\toption max_inflight_per_source '5'\n\
            \toption max_inflight_per_peer '9'\n";
        let c = uci_schema::Config::from_str(text, "test").unwrap();
        let g = GatewayConfig::from_uci(&c).unwrap();
        assert_eq!(
            (
                g.max_connections,
                g.max_conns_per_source,
                g.max_inflight_per_source,
                g.max_inflight_per_peer
            ),
            (300, 7, 5, 9)
        );
    }

    #[test]
    fn every_default_is_the_schemas() {
        // Literal design numbers: a second default anywhere shows here.
        let g = GatewayConfig::default();
        assert_eq!((g.jwt_clock_skew_s, g.jwt_max_lifetime_s), (30, 3600));
        assert_eq!((g.max_connections, g.body_read_timeout_ms), (1024, 10_000));
        let a = crate::auth::AuthConfig::new("r", "");
        assert_eq!((a.clock_skew_s, a.max_lifetime_s), (30, 3600));
        assert_eq!((a.bootstrap, a.bootstrap_ttl_s), (true, 300));
        let t = g.task_config();
        assert_eq!((t.capacity, t.ttl_ms, t.history_events), (512, 300_000, 64));
        assert_eq!(t.history_bytes, 1 << 20);
    }

    #[test]
    fn mappings_and_protocol_options_come_from_uci() {
        let dir = std::env::temp_dir().join(format!("gw-mapping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let schema = dir.join("sum.json");
        std::fs::write(&schema, r#"{"type":"object","required":["a"]}"#).unwrap();
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "[]").unwrap();
        let text = format!(
            "config gateway 'gateway'\n\toption expose_schemas '1'\n\toption protocol_tenant 'lab'\n\
             \tlist allowed_hosts 'router.lan'\n\
             config mapping 'echo'\n\toption capability 'demo.echo'\n\toption title 'Echo'\n\
             \toption input_schema '{{\"type\":\"object\"}}'\n\
             config mapping 'sum'\n\toption protocol 'a2a'\n\toption capability 'calc.sum'\n\
             \toption version '2'\n\toption input_schema_file '{}'\n\
             config mapping 'off'\n\toption enabled '0'\n\toption capability 'x.y'\n\
             config mapping 'broken'\n\toption capability 'x.z'\n\toption input_schema_file '{}'\n",
            schema.display(),
            bad.display()
        );
        let c = uci_schema::Config::from_str(&text, "test").unwrap();
        let (g, problems) = GatewayConfig::from_partial(&c);
        assert!(g.expose_schemas);
        assert_eq!(&*g.protocol_tenant, "lab");
        assert_eq!(g.allowed_hosts, vec![Box::<str>::from("router.lan")]);
        let names: Vec<&str> = g.mappings.iter().map(|m| &*m.name).collect();
        assert_eq!(names, ["echo", "sum"]);
        assert_eq!(g.mappings[0].title.as_deref(), Some("Echo"));
        assert_eq!(g.mappings[0].protocol, uci_schema::Protocol::Mcp);
        assert_eq!(g.mappings[1].protocol, uci_schema::Protocol::A2a);
        assert_eq!(g.mappings[1].version, 2);
        assert_eq!(
            g.mappings[1].input_schema.as_deref(),
            Some(r#"{"type":"object","required":["a"]}"#)
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("broken") && problems[0].contains("input_schema_file"));
        assert!(GatewayConfig::from_uci(&c).is_err());
        let d = GatewayConfig::default();
        assert_eq!((d.expose_schemas, &*d.protocol_tenant), (false, "default"));
        assert_eq!((d.mcp_max_sessions, d.mcp_session_idle_ms), (256, 600_000));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bootstrap_networks_and_ttl_come_from_uci() {
        let text = "config gateway 'gateway'\n\tlist bootstrap_networks '192.0.2.0/24'\n\
            \tlist bootstrap_networks '2001:db8::1'\n\toption bootstrap_ttl '60'\n";
        let c = uci_schema::Config::from_str(text, "test").unwrap();
        let g = GatewayConfig::from_uci(&c).unwrap();
        assert_eq!(
            g.bootstrap_networks,
            vec![
                IpNet::parse("192.0.2.0/24").unwrap(),
                IpNet::parse("2001:db8::1/128").unwrap()
            ]
        );
        assert_eq!(g.bootstrap_ttl_s, 60);
        // Bootstrap tenants: `default` alone unless listed.
        assert_eq!(g.bootstrap_tenants, vec!["default".to_string()]);
        let text = "config gateway 'gateway'\n\tlist bootstrap_tenant 'lab'\n\
            \tlist bootstrap_tenant 'default'\n";
        let c = uci_schema::Config::from_str(text, "test").unwrap();
        let g = GatewayConfig::from_uci(&c).unwrap();
        assert_eq!(
            g.bootstrap_tenants,
            vec!["lab".to_string(), "default".into()]
        );
    }
}
