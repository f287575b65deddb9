//! The table itself: every section and option of `/etc/config/agentd`.
//!
//! Option names are the contract of DESIGN §13 (LuCI, tests and docs use
//! them). Numbers are in the unit their name says (`_ms`, `_s`; plain
//! durations are seconds). "Unlimited" bounds are `18446744073709551615`
//! (2^64-1): zero is always a real value, never "unset".

use super::{doc_text, DefaultValue, Kind, OptionSpec, SectionSpec};
use crate::enums::{
    Action, Admission, Auth, Effect, HealthCheck, Ipv6Mode, LogLevel, ProofLevel, Protocol,
    RelayMode, RouteSource,
};

const MAX: u64 = u64::MAX;
const U32: u64 = u32::MAX as u64;

const fn spec(
    name: &'static str,
    kind: Kind,
    default: DefaultValue,
    doc: &'static str,
) -> OptionSpec {
    OptionSpec {
        name,
        kind,
        list: false,
        default,
        empty: None,
        doc: doc_text(doc),
    }
}

/// Integer option with its default and inclusive range.
const fn uint(
    name: &'static str,
    default: &'static str,
    min: u64,
    max: u64,
    doc: &'static str,
) -> OptionSpec {
    spec(
        name,
        Kind::UInt { min, max },
        DefaultValue::Text(default),
        doc,
    )
}

const fn boolean(name: &'static str, default: &'static str, doc: &'static str) -> OptionSpec {
    spec(name, Kind::Bool, DefaultValue::Text(default), doc)
}

const fn one_of(
    name: &'static str,
    names: &'static [&'static str],
    default: &'static str,
    doc: &'static str,
) -> OptionSpec {
    spec(name, Kind::Enum(names), DefaultValue::Text(default), doc)
}

const fn text(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    doc: &'static str,
) -> OptionSpec {
    spec(name, kind, DefaultValue::Text(default), doc)
}

const fn required(name: &'static str, kind: Kind, doc: &'static str) -> OptionSpec {
    spec(name, kind, DefaultValue::Required, doc)
}

const fn section_name(name: &'static str, kind: Kind, doc: &'static str) -> OptionSpec {
    spec(name, kind, DefaultValue::SectionName, doc)
}

const fn list(
    name: &'static str,
    kind: Kind,
    items: &'static [&'static str],
    doc: &'static str,
) -> OptionSpec {
    OptionSpec {
        name,
        kind,
        list: true,
        default: DefaultValue::Items(items),
        empty: None,
        doc: doc_text(doc),
    }
}

impl OptionSpec {
    /// Also accept `''`, meaning `means`.
    const fn or_empty(mut self, means: &'static str) -> OptionSpec {
        self.empty = Some(doc_text(means));
        self
    }
}

#[rustfmt::skip]
const AGENTD: &[OptionSpec] = &[
    boolean("enabled", "1", "Run the routing service."),
    text("router_id", Kind::DnsLabel, "", "This router's name in the mesh.").or_empty("the system host name"),
    text("domain", Kind::DomainName, "", "Domain this router belongs to.").or_empty("no domain"),
    text("identity", Kind::Path, "/etc/agentd/identity.key", "Ed25519 identity key (created on first start, mode 0600; the OpenWrt feed creates it at first boot, 0640 group agent-gw so the gateway can read it)."),
    text("domain_ca", Kind::Path, "", "Domain CA certificate (PEM).").or_empty("none: peers must be pinned"),
    text("router_cert", Kind::Path, "", "This router's certificate signed by the domain CA (PEM).").or_empty("none"),
    text("ipc_socket", Kind::Path, "/var/run/agentd/agentd.sock", "Unix socket for agent-gw and agentctl."),
    text("state_dir", Kind::Path, "/var/run/agentd", "Directory for runtime state."),
    uint("default_lease", "30", 1, 86400, "Lease (s) granted when a registration asks for none."),
    uint("min_lease", "5", 1, 86400, "Shortest lease (s) granted; must be <= default_lease."),
    uint("max_lease", "3600", 1, 86400, "Longest lease (s) granted; must be >= default_lease."),
    uint("max_routes", "10000", 1, 1_000_000, "Most routes in the RIB (all sources)."),
    uint("max_routes_per_origin", "64", 1, 1_000_000, "Most local routes one origin (agent URI) may hold; registering more is refused 'quota_exceeded', renewals never are."),
    uint("max_routes_per_source", "1024", 1, 1_000_000, "Most local routes registered from one source address (auth 'none' and bootstrap tokens); tenant-signed tokens count against tenant.max_routes instead."),
    one_of("default_action", Action::NAMES, "allow", "Verdict when no rule matches."),
    one_of("log_level", LogLevel::NAMES, "info", "Log verbosity."),
    one_of("health_check", HealthCheck::NAMES, "tcp", "Endpoint probe: TCP connect, HTTP GET /healthz, or none."),
    uint("health_interval", "5", 1, 3600, "Seconds between probes of one endpoint (host and port, however many routes use it)."),
    uint("health_timeout_ms", "1000", 1, 60_000, "Probe timeout (ms)."),
    uint("health_fail_threshold", "3", 1, 100, "Consecutive failed probes that mark an endpoint unhealthy."),
    uint("health_recover_threshold", "2", 1, 100, "Consecutive good probes that mark it healthy again."),
    uint("health_max_probes_per_s", "50", 1, 10_000, "Most health probes started per second over all endpoints (one probe per distinct endpoint per interval, spread evenly; more endpoints than this allows are probed less often)."),
    boolean("allow_loopback_endpoints", "0", "Let registrations name loopback or the router's own addresses as endpoints (lab/dev only: it lets LAN agents make the gateway call the router's own services). The suite's own listener ports stay refused."),
    list("lan_interface", Kind::Ifname, &["br-lan"], "Interfaces whose subnets count as LAN for registration endpoints, besides the one the registration arrives on. An endpoint on any other link of the router (its address or subnet) is refused 'endpoint_not_lan' (docs/trust-model.md)."),
    list("endpoint_allow_prefix", Kind::IpNet, &[], "Prefixes registrations may name as endpoints although they lie on a non-LAN link of the router or are a peer router's address (the LAN-scope check skips them; the loopback and listener checks still apply)."),
];

/// The "trusted LAN" of trusted-LAN bootstrap: loopback, the private
/// (RFC 1918), link-local and unique-local (RFC 4193) ranges — addresses
/// that cannot arrive from the Internet side unrouted.
const BOOTSTRAP_NETWORKS: &[&str] = &[
    "127.0.0.0/8",
    "::1/128",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "fc00::/7",
    "fe80::/10",
];

#[rustfmt::skip]
const GATEWAY: &[OptionSpec] = &[
    text("sdk_listen", Kind::SocketAddr, "[::]:7446", "LAN SDK API listener (HTTP/1.1); an IPv6 address is dual-stack (IPv4 clients too); '[::]' falls back to 0.0.0.0 on a host without IPv6."),
    text("public_listen", Kind::SocketAddr, "[::]:7443", "Public HTTPS ingress (TLS; HTTP/2 or HTTP/1.1): the invoke, task, MCP and A2A endpoints, never registration or bootstrap. Served only when auth is not 'none' (an unauthenticated public ingress would let anyone act for any tenant).").or_empty("disabled"),
    text("public_cert", Kind::Path, "", "PEM certificate chain the public listener presents (e.g. the one uhttpd or ACME uses).").or_empty("the router's certificate: agentd.router_cert, else the self-signed certificate of the identity key"),
    text("public_key", Kind::Path, "", "PEM private key of public_cert (PKCS#8, SEC1 or PKCS#1; Ed25519, ECDSA or RSA).").or_empty("none (required with public_cert)"),
    text("client_ca", Kind::Path, "", "PEM CA certificate(s) whose client certificates authenticate callers on the public listener and the per-agent IPv6 addresses: the certificate names its agent as a subjectAltName URI agent://tenant/name (Ed25519 keys). With it those listeners are served in auth 'none' too, for callers with such a certificate only.").or_empty("none: bearer tokens only"),
    text("peer_listen", Kind::SocketAddr, "[::]:7447", "Peer/relay data plane (h2 over mTLS).").or_empty("disabled"),
    text("admin_listen", Kind::SocketAddr, "127.0.0.1:9101", "Prometheus endpoint: GET /metrics (text format 0.0.4) with both daemons' counters (docs/metrics.md). No authentication: it stays on loopback unless set otherwise (9100 is prometheus-node-exporter-lua's). An address that cannot be bound is logged and the gateway runs without it.").or_empty("disabled"),
    one_of("auth", Auth::NAMES, "jwt", "Caller authentication; 'none' is for labs only."),
    text("issuer_key", Kind::Path, "", "Key that signs trusted-LAN bootstrap tokens.").or_empty("the router identity key"),
    boolean("bootstrap", "1", "Serve POST /agent/v1/bootstrap (short-lived tokens for LAN agents)."),
    list("bootstrap_networks", Kind::IpNet, BOOTSTRAP_NETWORKS, "Source networks that may use bootstrap (others get 403). Any line set here replaces the default networks rather than adding to them (agentctl status says so); to turn bootstrap off set bootstrap '0'."),
    list("bootstrap_tenant", Kind::Name, &["default"], "Tenants trusted-LAN bootstrap issues tokens for; a request for another tenant gets 403 'tenant_not_bootstrappable'."),
    uint("bootstrap_ttl", "300", 1, 300, "Lifetime (s) of bootstrap tokens."),
    uint("max_token_lifetime", "3600", 1, 86400, "Longest accepted JWT lifetime exp-iat (s)."),
    uint("clock_skew", "30", 0, 300, "Tolerated clock skew (s) when checking iat/exp."),
    uint("max_request_bytes", "65536", 1024, 64 * 1024 * 1024, "Largest buffered request body."),
    uint("rate_per_second", "200", 1, 1_000_000, "Request rate limit per caller (token bucket refill)."),
    uint("rate_burst", "400", 1, 1_000_000, "Token bucket size."),
    uint("max_inflight", "256", 1, 65535, "Most concurrent requests."),
    uint("max_inflight_per_source", "64", 1, 65535, "Most concurrent requests from one source (IPv4 address or IPv6 /64)."),
    uint("max_inflight_per_peer", "128", 1, 65535, "Most concurrent calls one neighbour router may forward to this gateway (it carries many callers, whose own router applied max_inflight_per_source); beyond it its calls get 503 overloaded (reason peer_inflight) and the neighbour may move them elsewhere."),
    uint("max_connections", "1024", 1, 65535, "Most open client connections on the SDK listener; beyond it new ones are closed at accept."),
    uint("max_conns_per_source", "128", 1, 65535, "Most open connections from one source (IPv4 address or IPv6 /64), counting those that have not sent a complete request head; beyond it the source's new connections are closed at accept."),
    uint("body_read_timeout_ms", "10000", 100, 600_000, "Longest time to receive a request body once its head arrived (ms)."),
    uint("control_rate_per_source", "20", 0, 1_000_000, "register/renew/unregister/bootstrap requests per second one source address may make (token bucket refill; the tenant's rate applies too); beyond it 429 'rate_limited'."),
    uint("control_burst_per_source", "40", 0, 1_000_000, "Token bucket size of control_rate_per_source."),
    uint("default_timeout_ms", "30000", 1, 3_600_000, "Deadline of a call that names none."),
    uint("task_capacity", "512", 1, 65536, "Most async tasks; when full new async work is refused."),
    uint("task_ttl", "300", 1, 86400, "Seconds a finished task stays readable."),
    uint("stream_history_events", "64", 0, 65536, "Stream events kept per task for resume."),
    uint("stream_history_bytes", "1048576", 0, 64 * 1024 * 1024, "Stream bytes kept per task for resume."),
    uint("max_result_bytes", "1048576", 1024, 16 * 1024 * 1024, "Largest handler answer one async task keeps as its result; a larger answer fails the task with upstream_error. It is also what every running async task reserves from buffer_budget, so lowering it lets more async tasks run at once."),
    uint("buffer_budget", "16777216", 1024 * 1024, 4 * 1024 * 1024 * 1024, "Bytes agent-gw holds for callers at most, all together: async task results (max_result_bytes reserved per running task), stream histories (320 KiB reserved per stream or MCP call; MCP sessions also hold what they keep for resumption) and request bodies kept to resend. When reached, new async and stream work is refused (503 overloaded); accepted work is never evicted."),
    uint("tenant_share_percent", "50", 1, 100, "Most of the task table and of buffer_budget one tenant may hold (%); beyond it that tenant's new async/stream work gets 429 share_exceeded."),
    uint("source_share_percent", "25", 1, 100, "Most of the task table and of buffer_budget one client address may hold (%); beyond it that address's new async/stream work gets 429 share_exceeded."),
    uint("stream_drain_timeout_ms", "5000", 100, 600_000, "A stream follower that takes no bytes for this long is detached and its connection closed (the stream keeps running; resume with Last-Event-ID)."),
    uint("hop_limit", "8", 1, 64, "Most hops a forwarded call may still take: the gateway forwards with min(hop_limit - 1, this) and refuses a call arriving with hop_limit 1 (hop_limit_exceeded)."),
    uint("assertion_ttl", "30", 1, 300, "Lifetime (s) of forwarding assertions."),
    boolean("expose_schemas", "0", "Also expose, as MCP tools, every registration whose contract carries an input schema (named after its capability; a mapping of the same name wins). Off: only mapping sections are exposed."),
    text("protocol_tenant", Kind::Name, "default", "With auth 'none' (labs), the tenant MCP and A2A calls act for; their source agent is 'agent://<tenant>/mcp-client' or '.../a2a-client'. With JWT auth the token decides."),
    text("public_url", Kind::Url, "", "Base URL (scheme, host, optional port and path prefix) A2A clients reach this gateway at, written into agent cards (e.g. behind a port forward or a DNS name). Empty: the scheme of the listener and the request's Host.").or_empty("from the request"),
    list("allowed_hosts", Kind::Host, &[], "Host names (or addresses) MCP and A2A clients may use in Host and Origin besides the listener addresses, localhost, 127.0.0.1, [::1] and the router's interface addresses (DNS-rebinding protection): another Host is refused 421, another Origin 403."),
    uint("mcp_max_sessions", "256", 1, 65536, "Most open MCP sessions (handshake revisions up to 2025-11-25; 2026-07-28 is sessionless); one caller identity holds at most a quarter. Beyond it initialize is refused (503)."),
    uint("mcp_session_idle", "600", 10, 86400, "Seconds an MCP session without a running call may stay unused before it ends (its id then answers 404)."),
    uint("replay_cache", "4096", 1, 1_000_000, "Replay windows of forwarding-assertion nonces kept per neighbour that signs its calls (one per sending gateway process, whatever its rate; a sender drawing random nonces uses one per assertion, for its lifetime); when a neighbour's windows are full, its assertions needing a new one are refused (assertion_cache_full) and no other neighbour is touched."),
];

#[rustfmt::skip]
const ARPX: &[OptionSpec] = &[
    text("listen", Kind::SocketAddr, "[::]:7444", "ARPX listener (TLS 1.3 mTLS).").or_empty("no inbound sessions"),
    uint("heartbeat_ms", "1000", 50, 60_000, "Heartbeat interval (ms)."),
    uint("miss_limit", "3", 1, 100, "Missed heartbeats that end a session."),
    uint("graceful_s", "10", 0, 3600, "Seconds a lost peer's routes are retained (ineligible)."),
    boolean("reflector", "0", "Re-advertise routes learned from one peer to the others."),
    uint("max_frame", "65536", 1024, 16 * 1024 * 1024, "Largest ARPX frame (bytes, length prefix excluded); a larger one closes the session, updates are batched to fit."),
    uint("max_path", "8", 1, 64, "Longest accepted path vector (routers, origin included); a longer advertisement is dropped and counted."),
    uint("max_routes_per_origin", "2500", 1, 1_000_000, "Most paths held from one neighbour for one origin router; more are dropped and counted, the session stays (one origin's flood cannot crowd out the others')."),
];

#[rustfmt::skip]
const DISCOVERY: &[OptionSpec] = &[
    boolean("enabled", "1", "Announce and browse via mDNS/DNS-SD."),
    list("interface", Kind::Ifname, &["br-lan"], "Interfaces to announce and browse on."),
    one_of("admission", Admission::NAMES, "manual", "How discovered routers become peers."),
    uint("candidate_lifetime_s", "5", 1, 3600, "Seconds a candidate lives after its last announcement."),
    boolean("nexus_alias", "1", "Also answer the mDNS host name nexus-router.local with this router's addresses on the discovery interfaces, so agents written for the Nexus SDK find the SDK API unchanged; when another device already holds that name, agentd leaves it to that device (agentctl status says so)."),
    list("allow_fingerprint", Kind::Fingerprint, &[], "Key fingerprints admitted in allowlist mode."),
    text("resolver", Kind::Resolver, "", "DNS resolver asked for unicast DNS-SD (port 53 unless given): routers of other domains are found through it (docs/discovery.md). With require_dnssec it must be a validating resolver on a path you trust (the router itself or your own network): agentd believes its AD bit.").or_empty("unicast DNS-SD off"),
    list("search_domain", Kind::DomainName, &[], "Domains browsed with unicast DNS-SD: for each, the PTR records of _arpx._tcp in it, then each instance's SRV and TXT, then the target's AAAA and A (RFC 6763). Found routers are candidates like mDNS ones."),
    boolean("require_dnssec", "0", "Accept unicast DNS-SD answers only when the resolver sets the AD bit (it validated them with DNSSEC); others count as errors in 'agentctl candidates'."),
    uint("refresh_min_s", "5", 1, 3600, "Unicast DNS-SD: the shortest time between two lookups of a domain, whatever the records' TTL (also the retry time after an error)."),
    uint("refresh_max_s", "900", 1, 86400, "Unicast DNS-SD: the longest time between two lookups of a domain, whatever the records' TTL."),
    uint("query_timeout_ms", "2000", 100, 30000, "Unicast DNS-SD: how long one query waits for its answer (sent twice over UDP, then once over TCP when the answer is truncated)."),
];

#[rustfmt::skip]
const PEER: &[OptionSpec] = &[
    boolean("enabled", "1", "Keep a session with this peer."),
    required("router_id", Kind::DnsLabel, "The peer's router_id."),
    required("address", Kind::Host, "The peer's host name or IP address."),
    uint("port", "7444", 1, 65535, "The peer's ARPX port."),
    uint("data_port", "7447", 1, 65535, "The peer's data-plane port."),
    text("key_fingerprint", Kind::Fingerprint, "", "Pinned key fingerprint (what `agentctl pki show` prints on the peer).").or_empty("rely on domain_ca"),
    boolean("reflector_client", "0", "Reflect other peers' routes to this peer."),
    boolean("sign_calls", "0", "Sign every call to and from this peer with a forwarding assertion, as calls across a domain boundary are. A peer pinned by key_fingerprint is outside our domain and always signed; one trusted through domain_ca is authenticated by its link alone unless this is set (docs/trust-model.md)."),
    uint("max_routes", "10000", 1, 1_000_000, "Most paths held from this peer; beyond it, paths of the origin router holding the most give way to smaller origins' and the rest are dropped and counted (the session stays)."),
    uint("max_trust", "50", 0, 100, "Highest trust granted to routes learned from this peer, whatever they advertise (applied before reflection; docs/trust-model.md)."),
    one_of("max_proof", ProofLevel::NAMES, "jwt", "Strongest origin proof a route learned from this peer may claim (none < bootstrap < static < jwt; a neighbour's proof is its own word; applied before reflection; docs/trust-model.md)."),
    list("export_tenant", Kind::Name, &[], "Tenants whose routes are exported to this peer (none: every tenant)."),
    boolean("discovered", "0", "Written by 'agentctl approve': a router admitted from discovery ('agentctl revoke' removes the section)."),
    uint("record_version", "0", 0, 4_294_967_295, "The discovery record version the approval binds to (0: none)."),
];

#[rustfmt::skip]
const TENANT: &[OptionSpec] = &[
    section_name("name", Kind::Name, "Tenant name (JWT claim 'tenant')."),
    list("jwt_key", Kind::JwtKey, &[], "Public keys that sign this tenant's tokens."),
    uint("rate_per_second", "100", 0, 1_000_000, "Request rate limit of the tenant (0 blocks it)."),
    uint("rate_burst", "200", 0, 1_000_000, "Token bucket size of the tenant."),
    uint("max_routes", "18446744073709551615", 0, MAX, "Most local routes the tenant's agents may hold together (default: only agentd.max_routes bounds them)."),
    uint("max_trust", "50", 0, 100, "Highest trust a LAN registration of this tenant is granted, whatever it claims (tenants without a section get the default; docs/trust-model.md)."),
];

#[rustfmt::skip]
const AGENT: &[OptionSpec] = &[
    required("origin", Kind::AgentUri, "The pinned origin 'agent://tenant/name'; unique."),
    list("source", Kind::IpNet, &[], "Source networks the origin may register and bootstrap from (none: any source)."),
    text("key", Kind::JwtKey, "", "Only tokens signed by this key act for the origin (no bootstrap, no auth 'none').").or_empty("any key of the tenant, or bootstrap"),
    boolean("allow_loopback", "0", "The origin may register loopback endpoints (an agent running on the router itself)."),
];

#[rustfmt::skip]
const RULE: &[OptionSpec] = &[
    section_name("id", Kind::RouteId, "Rule id; ties of priority go to the smaller id."),
    boolean("enabled", "1", "Apply this rule."),
    uint("priority", "0", 0, 65535, "Highest matching priority wins."),
    one_of("action", Action::NAMES, "allow", "Verdict; a selected deny is final."),
    text("tenant", Kind::Pattern, "*", "Caller tenant pattern."),
    text("source", Kind::Pattern, "*", "Source agent URI pattern."),
    text("capability", Kind::Pattern, "*", "Capability pattern ('prefix.*' or exact)."),
    text("region", Kind::Name, "", "Only routes in this region.").or_empty("any region"),
    uint("max_latency_ms", "18446744073709551615", 0, MAX, "Only routes with latency_ms <= this."),
    uint("max_cost", "18446744073709551615", 0, MAX, "Only routes with cost (millionths) <= this."),
    uint("max_load", "18446744073709551615", 0, MAX, "Only routes with load (permille) <= this."),
    uint("min_trust", "0", 0, 100, "Only routes with trust >= this."),
    one_of("min_proof", ProofLevel::NAMES, "none", "Only routes whose origin was proven at least this way (none < bootstrap < static < jwt)."),
    uint("max_hops", "18446744073709551615", 0, MAX, "Only routes at most this many routers away."),
    list("sources", Kind::Enum(RouteSource::NAMES), &["local", "static", "peer", "relay"], "Permitted route sources."),
    text("required_peer", Kind::DnsLabel, "", "Only routes via this peer.").or_empty("any peer"),
    text("denied_peer", Kind::DnsLabel, "", "Never routes via this peer.").or_empty("none"),
    text("endpoint_prefix", Kind::Text, "", "Only endpoints starting with this.").or_empty("any endpoint"),
    uint("w_latency", "1000", 0, MAX, "Score weight of latency (ms)."),
    uint("d_cost", "100", 1, MAX, "Cost divisor of the score."),
    uint("w_load", "100", 0, MAX, "Score weight of load (permille)."),
    uint("w_trust", "5000", 0, MAX, "Score weight of distrust (100 - trust)."),
    uint("w_hops", "10000", 0, MAX, "Score weight of hop count."),
    text("preferred_peer", Kind::DnsLabel, "", "Peer whose routes avoid the penalty.").or_empty("none"),
    uint("nonpreferred_penalty", "50000", 0, MAX, "Score added to routes not via preferred_peer (when set)."),
];

#[rustfmt::skip]
const ROUTE: &[OptionSpec] = &[
    section_name("id", Kind::RouteId, "Stable route_id."),
    boolean("enabled", "1", "Install this route."),
    required("capability", Kind::Name, "Capability name, e.g. 'office.print'."),
    spec("version", Kind::UInt { min: 1, max: U32 }, DefaultValue::Required, "Interface version (>= 1)."),
    required("origin", Kind::AgentUri, "Agent URI 'agent://tenant/name'."),
    required("endpoint", Kind::Url, "Handler URL 'http://host[:port]/path' (port 80 when absent; https is not supported)."),
    boolean("allow_loopback", "0", "Let this route's endpoint be loopback or one of the router's own addresses (an operator's choice for handlers on the router). The suite's own listener ports stay refused."),
    text("tenant", Kind::Name, "", "Owning tenant; must match origin.").or_empty("the tenant of origin"),
    text("region", Kind::Name, "", "Region label.").or_empty("none"),
    uint("latency_ms", "0", 0, MAX, "Advertised latency (ms)."),
    uint("cost", "0", 0, MAX, "Cost in millionths of a unit."),
    uint("load", "0", 0, 1000, "Load (permille)."),
    uint("trust", "50", 0, 100, "Trust 0-100."),
    list("allowed_tenants", Kind::Name, &[], "Other tenants that may call it (none: only its own)."),
    list("allowed_sources", Kind::Pattern, &[], "Source agent patterns that may call it (none: any)."),
    one_of("effect", Effect::NAMES, "", "Contract effect class.").or_empty("no contract"),
    boolean("idempotent", "0", "Contract: safe to retry after possible delivery."),
    text("description", Kind::Text, "", "Contract description.").or_empty("none"),
    text("input_schema", Kind::JsonObject, "", "Contract input JSON Schema.").or_empty("none"),
];

#[rustfmt::skip]
const MAPPING: &[OptionSpec] = &[
    boolean("enabled", "1", "Expose this mapping."),
    one_of("protocol", Protocol::NAMES, "mcp", "MCP tool or A2A skill."),
    section_name("name", Kind::Name, "Tool or skill name."),
    required("capability", Kind::Name, "Capability invoked."),
    uint("version", "1", 1, U32, "Capability version invoked."),
    text("title", Kind::Text, "", "Human-readable name shown to MCP/A2A clients.").or_empty("none"),
    text("description", Kind::Text, "", "Shown to MCP/A2A clients.").or_empty("none"),
    text("input_schema", Kind::JsonObject, "", "Input JSON Schema shown to clients; at most one of input_schema and input_schema_file.").or_empty("none: any object ({\"type\":\"object\"})"),
    text("input_schema_file", Kind::Path, "", "File holding the input JSON Schema (a JSON object of at most 64 KiB), read when the configuration is loaded; at most one of input_schema and input_schema_file.").or_empty("none"),
];

#[rustfmt::skip]
const IPV6: &[OptionSpec] = &[
    one_of("mode", Ipv6Mode::NAMES, "off", "Per-agent /128 addresses."),
    text("prefix", Kind::AgentPrefix, "", "Prefix the /128s are derived from (/48 to /64), or 'auto': the delegated or WAN prefix of upstream_interface.").or_empty("none (required unless mode is off)"),
    text("interface", Kind::Ifname, "agent0", "Dummy interface holding the /128s."),
    text("upstream_interface", Kind::Ifname, "wan", "Interface for proxy NDP entries (ndp-proxy)."),
    uint("max_addresses", "256", 1, 65536, "Most /128s at once."),
];

#[rustfmt::skip]
const RELAY: &[OptionSpec] = &[
    one_of("mode", RelayMode::NAMES, "off", "NAT relay role: 'client' (reach the mesh through a relay) or 'server' (be one). A relay sees the payloads it carries."),
    list("server", Kind::HostPort, &[], "Client mode: relays in preference order, each the 'host:port' of its ARPX listener (normally port 7444). The first that answers is used; a later one only while the earlier ones fail."),
    uint("data_port", "7447", 1, 65535, "Client mode: the relays' data-plane port (their gateway.peer_listen), on the host of each server entry."),
    list("server_key_fingerprint", Kind::Fingerprint, &[], "Client mode: keys of relays outside our domain (what `agentctl pki show` prints on the relay); relays whose certificate our domain_ca issued need none."),
    list("client_key_fingerprint", Kind::Fingerprint, &[], "Server mode: keys of client routers outside our domain; routers whose certificate our domain_ca issued need none."),
    uint("max_clients", "64", 1, 512, "Server mode: most client routers at once; more are refused at their session's handshake."),
    uint("max_streams_per_client", "256", 1, 256, "Server mode: most calls in flight toward one client; more are refused (503 relay_client_busy) before anything is sent."),
    uint("max_bytes_in_flight", "2097152", 65536, 67108864, "Server mode: answer bytes one client may have in flight toward the relay, unread (its tunnel's HTTP/2 connection window)."),
    uint("reconnect_min_ms", "1000", 100, 600_000, "First reconnect backoff (ms)."),
    uint("reconnect_max_ms", "30000", 100, 3_600_000, "Largest reconnect backoff (ms); >= reconnect_min_ms."),
    uint("prefer_hold_s", "30", 0, 3600, "Client mode: how long a more preferred relay must stay up before the client moves back to it (no flapping)."),
    uint("ping_interval_ms", "5000", 100, 60_000, "HTTP/2 PING interval on a tunnel, both ends."),
    uint("ping_timeout_ms", "5000", 100, 60_000, "A tunnel whose PING is not answered within this ends (its calls fail with a typed outcome)."),
];

#[rustfmt::skip]
const CLOUD: &[OptionSpec] = &[
    boolean("enabled", "0", "Run the cloud connector."),
    text("url", Kind::Url, "", "Cloud endpoint.").or_empty("none (required when enabled)"),
    text("pairing", Kind::Token, "", "Pairing code.").or_empty("none"),
];

/// Every section type of `/etc/config/agentd`, in documentation order.
#[rustfmt::skip]
pub static SECTIONS: &[SectionSpec] = &[
    SectionSpec { ty: "agentd", many: false, canonical_name: "main", doc: doc_text("Routing service: identity, leases, limits, health checks."), options: AGENTD },
    SectionSpec { ty: "gateway", many: false, canonical_name: "gateway", doc: doc_text("agent-gw: listeners, authentication, limits, tasks and streams."), options: GATEWAY },
    SectionSpec { ty: "arpx", many: false, canonical_name: "arpx", doc: doc_text("Inter-router route exchange."), options: ARPX },
    SectionSpec { ty: "discovery", many: false, canonical_name: "discovery", doc: doc_text("mDNS/DNS-SD discovery and admission of routers."), options: DISCOVERY },
    SectionSpec { ty: "peer", many: true, canonical_name: "", doc: doc_text("A static peer router. At most 512 enabled (agentd sends agent-gw the peer list whole); agentd refuses more."), options: PEER },
    SectionSpec { ty: "tenant", many: true, canonical_name: "", doc: doc_text("A tenant: JWT keys and rate limits."), options: TENANT },
    SectionSpec { ty: "agent", many: true, canonical_name: "", doc: doc_text("Pins an origin to source networks or a key (route ownership, docs/trust-model.md)."), options: AGENT },
    SectionSpec { ty: "rule", many: true, canonical_name: "", doc: doc_text("A policy rule: match, verdict, constraints, score weights. All enabled rules together must encode to at most 128 KiB (agentd ships the policy to agent-gw in one IPC frame), about 900 rules with 100-byte patterns; agentd refuses a larger policy."), options: RULE },
    SectionSpec { ty: "route", many: true, canonical_name: "", doc: doc_text("A static route (never expires)."), options: ROUTE },
    SectionSpec { ty: "mapping", many: true, canonical_name: "", doc: doc_text("An MCP tool or A2A skill backed by a capability."), options: MAPPING },
    SectionSpec { ty: "ipv6", many: false, canonical_name: "ipv6", doc: doc_text("Per-agent IPv6 /128 addresses."), options: IPV6 },
    SectionSpec { ty: "relay", many: false, canonical_name: "relay", doc: doc_text("NAT relay."), options: RELAY },
    SectionSpec { ty: "cloud", many: false, canonical_name: "cloud", doc: doc_text("Optional cloud connector."), options: CLOUD },
];
