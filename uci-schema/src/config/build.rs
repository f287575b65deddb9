//! Raw package → typed [`Config`]: one builder per section type, then the
//! checks that span options or sections (orderings, conditional
//! requirements, unique identifiers).

use std::collections::HashMap;

use super::error::{suggest, ConfigError, ConfigErrorKind, Problem, Recovery, SectionRef};
use super::read::Reader;
use super::types::*;
use super::whole::Shape;
use super::Config;
use crate::enums::{Ipv6Mode, RelayMode};
use crate::schema::{section_spec, SectionSpec, SECTIONS};
use crate::uci::{Package, Section};

/// What [`build`] found: the usable config and every problem.
pub(crate) struct Built {
    /// Complete: skipped sections are absent, masked options hold their
    /// defaults.
    pub config: Config,
    /// Every problem with what was done about it.
    pub problems: Vec<Problem>,
    /// The errors a strict load reports: what the file says, without the
    /// follow-on errors that only the fallbacks of a partial load cause.
    pub errors: Vec<ConfigError>,
    /// What the whole-file checks need to know of the package.
    pub shape: Shape,
}

/// Collects problems while building.
struct Ctx<'a> {
    file: &'a str,
    /// The last section of the package, cut short by a syntax error at
    /// this line.
    cut: Option<(&'a Section, u32)>,
    problems: Vec<Problem>,
    errors: Vec<ConfigError>,
}

impl Ctx<'_> {
    fn is_cut(&self, s: &Section) -> Option<u32> {
        self.cut
            .filter(|(c, _)| std::ptr::eq(*c, s))
            .map(|(_, line)| line)
    }

    fn report(&mut self, error: ConfigError, recovery: Recovery) {
        self.errors.push(error.clone());
        self.problems.push(Problem { error, recovery });
    }
}

/// Builds the typed config from everything in `pkg` that is valid (see
/// [`Recovery`] for what happens to the rest). `cut_line`: a syntax error
/// at that line cut the last section of `pkg` short.
pub(crate) fn build(pkg: &Package, file: &str, cut_line: Option<u32>) -> Built {
    let mut ctx = Ctx {
        file,
        cut: cut_line.and_then(|line| pkg.sections.last().map(|s| (s, line))),
        problems: Vec::new(),
        errors: Vec::new(),
    };
    let sorted = sort_sections(pkg, &mut ctx);
    let e = &mut ctx;
    let one = |ty: &str| sorted.get(ty).and_then(|v| v.first()).copied();
    let many = |ty: &str| sorted.get(ty).cloned().unwrap_or_default();
    // Built first: a peer is checked against this router's own router_id.
    let agentd = single("agentd", one("agentd"), e, agentd);
    let own_id = agentd.router_id.clone();
    let config = Config {
        agentd,
        gateway: single("gateway", one("gateway"), e, gateway),
        arpx: single("arpx", one("arpx"), e, arpx),
        discovery: single("discovery", one("discovery"), e, discovery),
        peers: multi(
            "peer",
            &many("peer"),
            e,
            |r| peer(r, &own_id),
            |p| Some(("peer router_id", "router_id", p.router_id.clone())),
        ),
        tenants: multi("tenant", &many("tenant"), e, tenant, |t| {
            Some(("tenant name", "name", t.name.clone()))
        }),
        agents: multi("agent", &many("agent"), e, agent, |a| {
            Some(("agent origin", "origin", a.origin.clone()))
        }),
        rules: multi("rule", &many("rule"), e, rule, |r| {
            Some(("rule id", "id", r.id.clone()))
        }),
        routes: multi("route", &many("route"), e, route, |r| {
            Some(("route id", "id", r.id.clone()))
        }),
        mappings: multi("mapping", &many("mapping"), e, mapping, |m| {
            Some(("mapping name", "name", format!("{}:{}", m.protocol, m.name)))
        }),
        ipv6: single("ipv6", one("ipv6"), e, ipv6),
        relay: single("relay", one("relay"), e, relay),
        cloud: single("cloud", one("cloud"), e, cloud),
    };
    let shape = Shape {
        sections: pkg.sections.len(),
        main: one("agentd").map(|(index, s)| SectionRef {
            ty: s.ty.clone(),
            name: s.name.clone(),
            index,
            label: None,
        }),
    };
    Built {
        config,
        problems: ctx.problems,
        errors: ctx.errors,
        shape,
    }
}

type Located<'a> = (usize, &'a Section);

/// Groups sections by type (with their `@type[idx]` index), skipping and
/// reporting unknown types and repeated singletons.
fn sort_sections<'a>(pkg: &'a Package, ctx: &mut Ctx) -> HashMap<&'a str, Vec<Located<'a>>> {
    let mut by_type: HashMap<&str, Vec<Located>> = HashMap::new();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for s in &pkg.sections {
        let count = counts.entry(s.ty.as_str()).or_insert(0);
        let index = *count;
        *count += 1;
        let at = SectionRef {
            ty: s.ty.clone(),
            name: s.name.clone(),
            index,
            label: None,
        };
        let err = |kind| ConfigError {
            file: ctx.file.to_string(),
            section: Some(at.clone()),
            option: None,
            kind,
        };
        match section_spec(&s.ty) {
            None => {
                let suggestion = suggest(&s.ty, SECTIONS.iter().map(|x| x.ty));
                let e = err(ConfigErrorKind::UnknownSection { suggestion });
                ctx.report(e, Recovery::SectionSkipped);
            }
            Some(spec) => {
                let list = by_type.entry(spec.ty).or_default();
                if !spec.many {
                    if let Some((i, first)) = list.first() {
                        let first = SectionRef {
                            ty: first.ty.clone(),
                            name: first.name.clone(),
                            index: *i,
                            label: None,
                        };
                        let first = first.to_string();
                        let e = err(ConfigErrorKind::DuplicateSection { first });
                        ctx.report(e, Recovery::SectionSkipped);
                        continue;
                    }
                }
                list.push((index, s));
            }
        }
    }
    by_type
}

fn spec(ty: &str) -> &'static SectionSpec {
    // Every caller passes a type from SECTIONS; the fallback keeps this
    // total without a panic path.
    section_spec(ty).unwrap_or(&SECTIONS[0])
}

/// The options to read as absent so that `e` goes away: the option it
/// names and, for a conditional requirement, the option that set the
/// condition. Empty for an unknown option (already ignored) and for
/// errors no option default can cure.
fn fallback(spec: &'static SectionSpec, e: &ConfigError) -> Vec<&'static str> {
    if matches!(e.kind, ConfigErrorKind::UnknownOption { .. }) {
        return Vec::new();
    }
    let mut names: Vec<&'static str> = e
        .option
        .as_deref()
        .and_then(|o| spec.option(o))
        .map(|os| os.name)
        .into_iter()
        .collect();
    if let ConfigErrorKind::RequiredWhen { trigger, .. } = e.kind {
        names.push(trigger);
    }
    names
}

/// Builds a singleton section. An option found wrong falls back to its
/// default (and the section is read again, so the default is checked
/// against the other options too) until the section is consistent; an
/// error no default can cure puts the whole section at its defaults.
fn single<T>(ty: &str, section: Option<Located>, ctx: &mut Ctx, build: fn(&mut Reader) -> T) -> T {
    let spec = spec(ty);
    let (index, s) = match section {
        Some((i, s)) => (i, Some(s)),
        None => (0, None),
    };
    let mut masked: Vec<&'static str> = Vec::new();
    let mut found: Vec<Problem> = Vec::new();
    let mut pass = 0;
    loop {
        let mut errors = Vec::new();
        let mut r = Reader::new(spec, s, index, ctx.file, &mut errors, &masked);
        let value = build(&mut r);
        let at = r.at().cloned();
        r.finish();
        let mut grew = false;
        let mut cured = true;
        for error in errors {
            if found.iter().any(|p| p.error == error) {
                continue;
            }
            let names = fallback(spec, &error);
            let recovery = match error.kind {
                ConfigErrorKind::UnknownOption { .. } => Recovery::OptionIgnored,
                _ if names.is_empty() => {
                    cured = false;
                    Recovery::SectionSkipped
                }
                _ => Recovery::OptionDefault,
            };
            for n in names {
                if !masked.contains(&n) {
                    masked.push(n);
                    grew = true;
                }
            }
            if pass == 0 {
                ctx.errors.push(error.clone());
            }
            found.push(Problem { error, recovery });
        }
        pass += 1;
        if !cured {
            for p in &mut found {
                p.recovery = Recovery::SectionSkipped;
            }
            ctx.problems.extend(found);
            let mut ignored = Vec::new();
            let mut r = Reader::new(spec, None, 0, ctx.file, &mut ignored, &[]);
            let value = build(&mut r);
            r.finish();
            return value;
        }
        if !grew {
            ctx.problems.extend(found);
            if let (Some(s), Some(at)) = (s, at) {
                if let Some(line) = ctx.is_cut(s) {
                    let error = ConfigError {
                        file: ctx.file.to_string(),
                        section: Some(at),
                        option: None,
                        kind: ConfigErrorKind::Incomplete { line },
                    };
                    ctx.problems.push(Problem {
                        error,
                        recovery: Recovery::SectionPartial,
                    });
                }
            }
            return value;
        }
    }
}

/// Builds every valid section of a repeatable type, skipping (and
/// reporting) each section with an error, and reports identifiers used
/// twice (`key` gives what must be unique, the option it comes from and
/// its value; the first valid section keeps it).
fn multi<T>(
    ty: &str,
    sections: &[Located],
    ctx: &mut Ctx,
    build: impl Fn(&mut Reader) -> T,
    key: fn(&T) -> Option<(&'static str, &'static str, String)>,
) -> Vec<T> {
    let mut out = Vec::with_capacity(sections.len());
    let mut seen: HashMap<String, SectionRef> = HashMap::new();
    for &(index, s) in sections {
        let mut errors = Vec::new();
        let mut r = Reader::new(spec(ty), Some(s), index, ctx.file, &mut errors, &[]);
        let value = build(&mut r);
        let mut unique = None;
        if let Some((what, option, k)) = key(&value) {
            if r.ok(option) && !k.is_empty() {
                match seen.get(&k) {
                    Some(first) => {
                        let first = first.to_string();
                        r.error(
                            Some(option),
                            ConfigErrorKind::Duplicate {
                                what,
                                value: k,
                                first,
                            },
                        );
                    }
                    None => unique = Some(k),
                }
            }
        }
        let at = r.at().cloned();
        r.finish();
        let cut = ctx.is_cut(s);
        let skipped = !errors.is_empty() || cut.is_some();
        for error in errors {
            ctx.report(error, Recovery::SectionSkipped);
        }
        if let (Some(line), Some(at)) = (cut, at.clone()) {
            let error = ConfigError {
                file: ctx.file.to_string(),
                section: Some(at),
                option: None,
                kind: ConfigErrorKind::Incomplete { line },
            };
            ctx.problems.push(Problem {
                error,
                recovery: Recovery::SectionSkipped,
            });
        }
        if skipped {
            continue;
        }
        if let (Some(k), Some(at)) = (unique, at) {
            seen.insert(k, at);
        }
        out.push(value);
    }
    out
}

fn section_name(r: &Reader) -> Option<String> {
    r.at().and_then(|a| a.name.clone())
}

fn at(r: &Reader) -> SectionRef {
    r.section_ref()
}

fn agentd(r: &mut Reader) -> Agentd {
    let a = Agentd {
        enabled: r.bool("enabled"),
        router_id: r.text("router_id"),
        domain: r.text("domain"),
        identity: r.text("identity"),
        domain_ca: r.text("domain_ca"),
        router_cert: r.text("router_cert"),
        ipc_socket: r.text("ipc_socket"),
        state_dir: r.text("state_dir"),
        default_lease: r.u64("default_lease"),
        min_lease: r.u64("min_lease"),
        max_lease: r.u64("max_lease"),
        max_routes: r.u64("max_routes"),
        max_routes_per_origin: r.u64("max_routes_per_origin"),
        max_routes_per_source: r.u64("max_routes_per_source"),
        default_action: r.choice("default_action"),
        log_level: r.choice("log_level"),
        health_check: r.choice("health_check"),
        health_interval: r.u64("health_interval"),
        health_timeout_ms: r.u64("health_timeout_ms"),
        health_fail_threshold: r.u64("health_fail_threshold"),
        health_recover_threshold: r.u64("health_recover_threshold"),
        health_max_probes_per_s: r.u64("health_max_probes_per_s"),
        allow_loopback_endpoints: r.bool("allow_loopback_endpoints"),
        lan_interface: r.list("lan_interface"),
        endpoint_allow_prefix: r.list("endpoint_allow_prefix"),
    };
    r.order("min_lease", a.min_lease, "default_lease", a.default_lease);
    r.order("default_lease", a.default_lease, "max_lease", a.max_lease);
    a
}

fn gateway(r: &mut Reader) -> Gateway {
    let g = Gateway {
        sdk_listen: r.text("sdk_listen"),
        public_listen: r.text("public_listen"),
        public_cert: r.text("public_cert"),
        public_key: r.text("public_key"),
        client_ca: r.text("client_ca"),
        peer_listen: r.text("peer_listen"),
        admin_listen: r.text("admin_listen"),
        auth: r.choice("auth"),
        issuer_key: r.text("issuer_key"),
        bootstrap: r.bool("bootstrap"),
        bootstrap_networks: r.list("bootstrap_networks"),
        bootstrap_tenant: r.list("bootstrap_tenant"),
        bootstrap_ttl: r.u64("bootstrap_ttl"),
        max_token_lifetime: r.u64("max_token_lifetime"),
        clock_skew: r.u64("clock_skew"),
        max_request_bytes: r.u64("max_request_bytes"),
        rate_per_second: r.u64("rate_per_second"),
        rate_burst: r.u64("rate_burst"),
        max_inflight: r.u64("max_inflight"),
        max_inflight_per_source: r.u64("max_inflight_per_source"),
        max_inflight_per_peer: r.u64("max_inflight_per_peer"),
        max_connections: r.u64("max_connections"),
        max_conns_per_source: r.u64("max_conns_per_source"),
        body_read_timeout_ms: r.u64("body_read_timeout_ms"),
        control_rate_per_source: r.u64("control_rate_per_source"),
        control_burst_per_source: r.u64("control_burst_per_source"),
        default_timeout_ms: r.u64("default_timeout_ms"),
        task_capacity: r.u64("task_capacity"),
        task_ttl: r.u64("task_ttl"),
        stream_history_events: r.u64("stream_history_events"),
        stream_history_bytes: r.u64("stream_history_bytes"),
        max_result_bytes: r.u64("max_result_bytes"),
        buffer_budget: r.u64("buffer_budget"),
        tenant_share_percent: r.u64("tenant_share_percent"),
        source_share_percent: r.u64("source_share_percent"),
        stream_drain_timeout_ms: r.u64("stream_drain_timeout_ms"),
        hop_limit: r.u64("hop_limit"),
        assertion_ttl: r.u64("assertion_ttl"),
        replay_cache: r.u64("replay_cache"),
        expose_schemas: r.bool("expose_schemas"),
        mcp_max_sessions: r.u64("mcp_max_sessions"),
        mcp_session_idle: r.u64("mcp_session_idle"),
        protocol_tenant: r.text("protocol_tenant"),
        allowed_hosts: r.list("allowed_hosts"),
        public_url: r.text("public_url"),
    };
    let cert = !g.public_cert.is_empty();
    required_when(
        r,
        "public_cert",
        cert,
        "public_key",
        &g.public_key,
        "public_cert is set".to_string(),
    );
    let key = !g.public_key.is_empty();
    required_when(
        r,
        "public_key",
        key,
        "public_cert",
        &g.public_cert,
        "public_key is set".to_string(),
    );
    g
}

fn arpx(r: &mut Reader) -> Arpx {
    Arpx {
        listen: r.text("listen"),
        heartbeat_ms: r.u64("heartbeat_ms"),
        miss_limit: r.u64("miss_limit"),
        graceful_s: r.u64("graceful_s"),
        reflector: r.bool("reflector"),
        max_frame: r.u64("max_frame"),
        max_path: r.u64("max_path"),
        max_routes_per_origin: r.u64("max_routes_per_origin"),
    }
}

fn discovery(r: &mut Reader) -> Discovery {
    let d = Discovery {
        enabled: r.bool("enabled"),
        interface: r.list("interface"),
        admission: r.choice("admission"),
        candidate_lifetime_s: r.u64("candidate_lifetime_s"),
        nexus_alias: r.bool("nexus_alias"),
        allow_fingerprint: r.list("allow_fingerprint"),
        resolver: r.text("resolver"),
        search_domain: r.list("search_domain"),
        require_dnssec: r.bool("require_dnssec"),
        refresh_min_s: r.u64("refresh_min_s"),
        refresh_max_s: r.u64("refresh_max_s"),
        query_timeout_ms: r.u64("query_timeout_ms"),
    };
    r.order(
        "refresh_min_s",
        d.refresh_min_s,
        "refresh_max_s",
        d.refresh_max_s,
    );
    d
}

/// `own_id`: this router's `agentd.router_id` (empty: the host name, known
/// only to the daemon); a peer naming it is refused, a router never peers
/// with itself (its routes would loop back as "remote" paths).
fn peer(r: &mut Reader, own_id: &str) -> Peer {
    let p = Peer {
        section: section_name(r),
        at: at(r),
        enabled: r.bool("enabled"),
        router_id: r.text("router_id"),
        address: r.text("address"),
        port: r.u16("port"),
        data_port: r.u16("data_port"),
        key_fingerprint: r.text("key_fingerprint"),
        reflector_client: r.bool("reflector_client"),
        sign_calls: r.bool("sign_calls"),
        max_routes: r.u64("max_routes"),
        max_trust: r.u64("max_trust"),
        max_proof: r.choice("max_proof"),
        export_tenant: r.list("export_tenant"),
        discovered: r.bool("discovered"),
        record_version: r.u64("record_version"),
    };
    if !own_id.is_empty() && p.router_id == own_id && r.ok("router_id") {
        let kind = ConfigErrorKind::OwnRouterId {
            router_id: p.router_id.clone(),
        };
        r.error(Some("router_id"), kind);
    }
    p
}

fn tenant(r: &mut Reader) -> Tenant {
    Tenant {
        section: section_name(r),
        at: at(r),
        name: r.text("name"),
        jwt_key: r.list("jwt_key"),
        rate_per_second: r.u64("rate_per_second"),
        rate_burst: r.u64("rate_burst"),
        max_routes: r.u64("max_routes"),
        max_trust: r.u64("max_trust"),
    }
}

fn agent(r: &mut Reader) -> Agent {
    Agent {
        section: section_name(r),
        at: at(r),
        origin: r.text("origin"),
        source: r.list("source"),
        key: r.text("key"),
        allow_loopback: r.bool("allow_loopback"),
    }
}

fn rule(r: &mut Reader) -> Rule {
    Rule {
        section: section_name(r),
        at: at(r),
        id: r.text("id"),
        enabled: r.bool("enabled"),
        priority: r.u32("priority"),
        action: r.choice("action"),
        tenant: r.text("tenant"),
        source: r.text("source"),
        capability: r.text("capability"),
        constraints: Constraints {
            region: r.text("region"),
            max_latency_ms: r.u64("max_latency_ms"),
            max_cost: r.u64("max_cost"),
            max_load: r.u64("max_load"),
            min_trust: r.u64("min_trust"),
            min_proof: r.choice("min_proof"),
            max_hops: r.u64("max_hops"),
            sources: r.choices("sources"),
            required_peer: r.text("required_peer"),
            denied_peer: r.text("denied_peer"),
            endpoint_prefix: r.text("endpoint_prefix"),
        },
        weights: Weights {
            w_latency: r.u64("w_latency"),
            d_cost: r.u64("d_cost"),
            w_load: r.u64("w_load"),
            w_trust: r.u64("w_trust"),
            w_hops: r.u64("w_hops"),
        },
        preferred_peer: r.text("preferred_peer"),
        nonpreferred_penalty: r.u64("nonpreferred_penalty"),
    }
}

fn route(r: &mut Reader) -> StaticRoute {
    let mut route = StaticRoute {
        section: section_name(r),
        at: at(r),
        id: r.text("id"),
        enabled: r.bool("enabled"),
        capability: r.text("capability"),
        version: r.u32("version"),
        origin: r.text("origin"),
        endpoint: r.text("endpoint"),
        allow_loopback: r.bool("allow_loopback"),
        tenant: r.text("tenant"),
        region: r.text("region"),
        latency_ms: r.u64("latency_ms"),
        cost: r.u64("cost"),
        load: r.u64("load"),
        trust: r.u64("trust"),
        allowed_tenants: r.list("allowed_tenants"),
        allowed_sources: r.list("allowed_sources"),
        effect: r.maybe("effect"),
        idempotent: r.bool("idempotent"),
        description: r.text("description"),
        input_schema: r.text("input_schema"),
    };
    if let Some((origin_tenant, _)) = crate::schema::agent_uri(&route.origin) {
        if route.tenant.is_empty() {
            route.tenant = origin_tenant.to_string();
        } else if r.ok("tenant") && route.tenant != origin_tenant {
            let kind = ConfigErrorKind::TenantMismatch {
                tenant: route.tenant.clone(),
                origin_tenant: origin_tenant.to_string(),
            };
            r.error(Some("tenant"), kind);
        }
    }
    route
}

fn mapping(r: &mut Reader) -> Mapping {
    let m = Mapping {
        section: section_name(r),
        at: at(r),
        enabled: r.bool("enabled"),
        protocol: r.choice("protocol"),
        name: r.text("name"),
        capability: r.text("capability"),
        version: r.u32("version"),
        title: r.text("title"),
        description: r.text("description"),
        input_schema: r.text("input_schema"),
        input_schema_file: r.text("input_schema_file"),
    };
    if !m.input_schema.is_empty() && !m.input_schema_file.is_empty() {
        r.error(
            Some("input_schema_file"),
            ConfigErrorKind::Exclusive {
                other: "input_schema",
            },
        );
    }
    m
}

/// Reports `option` as missing when `condition` (set by option `trigger`)
/// holds and it is empty.
fn required_when(
    r: &mut Reader,
    trigger: &'static str,
    holds: bool,
    option: &'static str,
    value: &str,
    condition: String,
) {
    if holds && value.is_empty() && r.ok(option) {
        r.error(
            Some(option),
            ConfigErrorKind::RequiredWhen { condition, trigger },
        );
    }
}

fn ipv6(r: &mut Reader) -> Ipv6 {
    let v = Ipv6 {
        mode: r.choice("mode"),
        prefix: r.text("prefix"),
        interface: r.text("interface"),
        upstream_interface: r.text("upstream_interface"),
        max_addresses: r.u64("max_addresses"),
    };
    let on = v.mode != Ipv6Mode::Off;
    required_when(
        r,
        "mode",
        on,
        "prefix",
        &v.prefix,
        format!("mode is '{}'", v.mode),
    );
    // Proxy NDP answers for addresses on the upstream's on-link subnet:
    // one /64, never a wider prefix the upstream does not put on its link.
    let len = v
        .prefix
        .rsplit_once('/')
        .and_then(|(_, l)| l.parse::<u8>().ok());
    let wide = v.prefix != "auto" && !v.prefix.is_empty() && len != Some(64);
    if v.mode == Ipv6Mode::NdpProxy && wide && r.ok("prefix") {
        r.error(
            Some("prefix"),
            ConfigErrorKind::Refused {
                reason: format!(
                    "mode 'ndp-proxy' answers neighbour solicitations on the upstream link's /64: the prefix must be that /64 (or 'auto'), not {}",
                    v.prefix
                ),
            },
        );
    }
    v
}

fn relay(r: &mut Reader) -> Relay {
    let v = Relay {
        mode: r.choice("mode"),
        server: r.list("server"),
        data_port: r.u64("data_port"),
        server_key_fingerprint: r.list("server_key_fingerprint"),
        client_key_fingerprint: r.list("client_key_fingerprint"),
        max_clients: r.u64("max_clients"),
        max_streams_per_client: r.u64("max_streams_per_client"),
        max_bytes_in_flight: r.u64("max_bytes_in_flight"),
        reconnect_min_ms: r.u64("reconnect_min_ms"),
        reconnect_max_ms: r.u64("reconnect_max_ms"),
        prefer_hold_s: r.u64("prefer_hold_s"),
        ping_interval_ms: r.u64("ping_interval_ms"),
        ping_timeout_ms: r.u64("ping_timeout_ms"),
    };
    let client = v.mode == RelayMode::Client;
    let servers = v.server.join(" ");
    required_when(
        r,
        "mode",
        client,
        "server",
        &servers,
        "mode is 'client'".to_string(),
    );
    r.order(
        "reconnect_min_ms",
        v.reconnect_min_ms,
        "reconnect_max_ms",
        v.reconnect_max_ms,
    );
    v
}

fn cloud(r: &mut Reader) -> Cloud {
    let v = Cloud {
        enabled: r.bool("enabled"),
        url: r.text("url"),
        pairing: r.text("pairing"),
    };
    required_when(
        r,
        "enabled",
        v.enabled,
        "url",
        &v.url,
        "enabled is '1'".to_string(),
    );
    v
}

/// A rule with every option at its default (the policy used when no rule
/// matches, apart from `default_action`).
pub(crate) fn default_rule() -> Rule {
    let mut ignored = Vec::new();
    let mut r = Reader::new(spec("rule"), None, 0, "<defaults>", &mut ignored, &[]);
    let value = rule(&mut r);
    r.finish();
    value
}
