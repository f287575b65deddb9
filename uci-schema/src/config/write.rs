//! Typed [`Config`] → raw [`Package`], for tools that write configs.
//! Options equal to their schema default are left out, so a written file
//! says only what differs; reading it back gives the same `Config`
//! (`Config::to_uci` checks exactly that).

use super::Config;
use crate::enums::UciEnum;
use crate::schema::{agent_uri, section_spec, DefaultValue, SectionSpec, SECTIONS};
use crate::uci::{Package, Section};

struct W {
    spec: &'static SectionSpec,
    s: Section,
}

impl W {
    fn new(ty: &str, name: Option<String>) -> W {
        let spec = section_spec(ty).unwrap_or(&SECTIONS[0]);
        let name = if spec.many {
            name
        } else {
            Some(spec.canonical_name.to_string())
        };
        W {
            spec,
            s: Section::new(ty, name),
        }
    }

    fn text(&mut self, name: &'static str, v: &str) -> &mut W {
        let spec = self.spec.option(name);
        // `''` would read as absent (the default): an empty meaning that is
        // not the default is written `off`.
        if v.is_empty() && spec.is_some_and(|o| o.needs_off()) {
            self.s.set(name, crate::schema::OFF);
            return self;
        }
        let is_default = match spec.map(|o| o.default) {
            Some(DefaultValue::Text(d)) => d == v,
            Some(DefaultValue::SectionName) => self.s.name.as_deref() == Some(v),
            _ => false,
        };
        if !is_default {
            self.s.set(name, v);
        }
        self
    }

    fn u64(&mut self, name: &'static str, v: u64) -> &mut W {
        self.text(name, &v.to_string())
    }

    fn bool(&mut self, name: &'static str, v: bool) -> &mut W {
        self.text(name, if v { "1" } else { "0" })
    }

    fn choice<T: UciEnum>(&mut self, name: &'static str, v: T) -> &mut W {
        self.text(name, v.as_str())
    }

    fn list(&mut self, name: &'static str, items: &[String]) -> &mut W {
        let default: &[&str] = match self.spec.option(name).map(|o| o.default) {
            Some(DefaultValue::Items(d)) => d,
            _ => &[],
        };
        let same = items.len() == default.len() && items.iter().zip(default).all(|(a, b)| a == b);
        if !same && !items.is_empty() {
            self.s.set_list(name, items.to_vec());
        }
        self
    }

    fn choices<T: UciEnum>(&mut self, name: &'static str, v: &[T]) -> &mut W {
        let items: Vec<String> = v.iter().map(|c| c.as_str().to_string()).collect();
        self.list(name, &items)
    }

    fn done(&mut self) -> Section {
        std::mem::replace(&mut self.s, Section::new("", None))
    }
}

pub(crate) fn to_package(c: &Config) -> Package {
    let mut sections = Vec::new();
    let a = &c.agentd;
    sections.push(
        W::new("agentd", None)
            .bool("enabled", a.enabled)
            .text("router_id", &a.router_id)
            .text("domain", &a.domain)
            .text("identity", &a.identity)
            .text("domain_ca", &a.domain_ca)
            .text("router_cert", &a.router_cert)
            .text("ipc_socket", &a.ipc_socket)
            .text("state_dir", &a.state_dir)
            .u64("default_lease", a.default_lease)
            .u64("min_lease", a.min_lease)
            .u64("max_lease", a.max_lease)
            .u64("max_routes", a.max_routes)
            .u64("max_routes_per_origin", a.max_routes_per_origin)
            .u64("max_routes_per_source", a.max_routes_per_source)
            .choice("default_action", a.default_action)
            .choice("log_level", a.log_level)
            .choice("health_check", a.health_check)
            .u64("health_interval", a.health_interval)
            .u64("health_timeout_ms", a.health_timeout_ms)
            .u64("health_fail_threshold", a.health_fail_threshold)
            .u64("health_recover_threshold", a.health_recover_threshold)
            .u64("health_max_probes_per_s", a.health_max_probes_per_s)
            .bool("allow_loopback_endpoints", a.allow_loopback_endpoints)
            .list("lan_interface", &a.lan_interface)
            .list("endpoint_allow_prefix", &a.endpoint_allow_prefix)
            .done(),
    );
    let g = &c.gateway;
    sections.push(
        W::new("gateway", None)
            .text("sdk_listen", &g.sdk_listen)
            .text("public_listen", &g.public_listen)
            .text("public_cert", &g.public_cert)
            .text("public_key", &g.public_key)
            .text("client_ca", &g.client_ca)
            .text("peer_listen", &g.peer_listen)
            .text("admin_listen", &g.admin_listen)
            .choice("auth", g.auth)
            .text("issuer_key", &g.issuer_key)
            .bool("bootstrap", g.bootstrap)
            .list("bootstrap_networks", &g.bootstrap_networks)
            .list("bootstrap_tenant", &g.bootstrap_tenant)
            .u64("bootstrap_ttl", g.bootstrap_ttl)
            .u64("max_token_lifetime", g.max_token_lifetime)
            .u64("clock_skew", g.clock_skew)
            .u64("max_request_bytes", g.max_request_bytes)
            .u64("rate_per_second", g.rate_per_second)
            .u64("rate_burst", g.rate_burst)
            .u64("max_inflight", g.max_inflight)
            .u64("max_inflight_per_source", g.max_inflight_per_source)
            .u64("max_inflight_per_peer", g.max_inflight_per_peer)
            .u64("max_connections", g.max_connections)
            .u64("max_conns_per_source", g.max_conns_per_source)
            .u64("body_read_timeout_ms", g.body_read_timeout_ms)
            .u64("control_rate_per_source", g.control_rate_per_source)
            .u64("control_burst_per_source", g.control_burst_per_source)
            .u64("default_timeout_ms", g.default_timeout_ms)
            .u64("task_capacity", g.task_capacity)
            .u64("task_ttl", g.task_ttl)
            .u64("stream_history_events", g.stream_history_events)
            .u64("stream_history_bytes", g.stream_history_bytes)
            .u64("max_result_bytes", g.max_result_bytes)
            .u64("buffer_budget", g.buffer_budget)
            .u64("tenant_share_percent", g.tenant_share_percent)
            .u64("source_share_percent", g.source_share_percent)
            .u64("stream_drain_timeout_ms", g.stream_drain_timeout_ms)
            .u64("hop_limit", g.hop_limit)
            .u64("assertion_ttl", g.assertion_ttl)
            .u64("replay_cache", g.replay_cache)
            .bool("expose_schemas", g.expose_schemas)
            .u64("mcp_max_sessions", g.mcp_max_sessions)
            .u64("mcp_session_idle", g.mcp_session_idle)
            .text("protocol_tenant", &g.protocol_tenant)
            .list("allowed_hosts", &g.allowed_hosts)
            .text("public_url", &g.public_url)
            .done(),
    );
    let x = &c.arpx;
    sections.push(
        W::new("arpx", None)
            .text("listen", &x.listen)
            .u64("heartbeat_ms", x.heartbeat_ms)
            .u64("miss_limit", x.miss_limit)
            .u64("graceful_s", x.graceful_s)
            .bool("reflector", x.reflector)
            .u64("max_frame", x.max_frame)
            .u64("max_path", x.max_path)
            .u64("max_routes_per_origin", x.max_routes_per_origin)
            .done(),
    );
    let d = &c.discovery;
    sections.push(
        W::new("discovery", None)
            .bool("enabled", d.enabled)
            .list("interface", &d.interface)
            .choice("admission", d.admission)
            .u64("candidate_lifetime_s", d.candidate_lifetime_s)
            .bool("nexus_alias", d.nexus_alias)
            .list("allow_fingerprint", &d.allow_fingerprint)
            .text("resolver", &d.resolver)
            .list("search_domain", &d.search_domain)
            .bool("require_dnssec", d.require_dnssec)
            .u64("refresh_min_s", d.refresh_min_s)
            .u64("refresh_max_s", d.refresh_max_s)
            .u64("query_timeout_ms", d.query_timeout_ms)
            .done(),
    );
    for p in &c.peers {
        sections.push(
            W::new("peer", p.section.clone())
                .bool("enabled", p.enabled)
                .text("router_id", &p.router_id)
                .text("address", &p.address)
                .u64("port", p.port.into())
                .u64("data_port", p.data_port.into())
                .text("key_fingerprint", &p.key_fingerprint)
                .bool("reflector_client", p.reflector_client)
                .bool("sign_calls", p.sign_calls)
                .u64("max_routes", p.max_routes)
                .u64("max_trust", p.max_trust)
                .choice("max_proof", p.max_proof)
                .list("export_tenant", &p.export_tenant)
                .bool("discovered", p.discovered)
                .u64("record_version", p.record_version)
                .done(),
        );
    }
    for t in &c.tenants {
        sections.push(
            W::new("tenant", t.section.clone())
                .text("name", &t.name)
                .list("jwt_key", &t.jwt_key)
                .u64("rate_per_second", t.rate_per_second)
                .u64("rate_burst", t.rate_burst)
                .u64("max_routes", t.max_routes)
                .u64("max_trust", t.max_trust)
                .done(),
        );
    }
    for a in &c.agents {
        sections.push(
            W::new("agent", a.section.clone())
                .text("origin", &a.origin)
                .list("source", &a.source)
                .text("key", &a.key)
                .bool("allow_loopback", a.allow_loopback)
                .done(),
        );
    }
    for r in &c.rules {
        let (k, w) = (&r.constraints, &r.weights);
        sections.push(
            W::new("rule", r.section.clone())
                .text("id", &r.id)
                .bool("enabled", r.enabled)
                .u64("priority", r.priority.into())
                .choice("action", r.action)
                .text("tenant", &r.tenant)
                .text("source", &r.source)
                .text("capability", &r.capability)
                .text("region", &k.region)
                .u64("max_latency_ms", k.max_latency_ms)
                .u64("max_cost", k.max_cost)
                .u64("max_load", k.max_load)
                .u64("min_trust", k.min_trust)
                .choice("min_proof", k.min_proof)
                .u64("max_hops", k.max_hops)
                .choices("sources", &k.sources)
                .text("required_peer", &k.required_peer)
                .text("denied_peer", &k.denied_peer)
                .text("endpoint_prefix", &k.endpoint_prefix)
                .u64("w_latency", w.w_latency)
                .u64("d_cost", w.d_cost)
                .u64("w_load", w.w_load)
                .u64("w_trust", w.w_trust)
                .u64("w_hops", w.w_hops)
                .text("preferred_peer", &r.preferred_peer)
                .u64("nonpreferred_penalty", r.nonpreferred_penalty)
                .done(),
        );
    }
    for r in &c.routes {
        let mut w = W::new("route", r.section.clone());
        w.text("id", &r.id)
            .bool("enabled", r.enabled)
            .text("capability", &r.capability)
            .u64("version", r.version.into())
            .text("origin", &r.origin)
            .text("endpoint", &r.endpoint)
            .bool("allow_loopback", r.allow_loopback);
        // An absent tenant means the origin's tenant.
        if agent_uri(&r.origin).map(|(t, _)| t) != Some(r.tenant.as_str()) {
            w.text("tenant", &r.tenant);
        }
        w.text("region", &r.region)
            .u64("latency_ms", r.latency_ms)
            .u64("cost", r.cost)
            .u64("load", r.load)
            .u64("trust", r.trust)
            .list("allowed_tenants", &r.allowed_tenants)
            .list("allowed_sources", &r.allowed_sources)
            .text("effect", r.effect.map_or("", |e| e.as_str()))
            .bool("idempotent", r.idempotent)
            .text("description", &r.description)
            .text("input_schema", &r.input_schema);
        sections.push(w.done());
    }
    for m in &c.mappings {
        sections.push(
            W::new("mapping", m.section.clone())
                .bool("enabled", m.enabled)
                .choice("protocol", m.protocol)
                .text("name", &m.name)
                .text("capability", &m.capability)
                .u64("version", m.version.into())
                .text("title", &m.title)
                .text("description", &m.description)
                .text("input_schema", &m.input_schema)
                .text("input_schema_file", &m.input_schema_file)
                .done(),
        );
    }
    let v = &c.ipv6;
    sections.push(
        W::new("ipv6", None)
            .choice("mode", v.mode)
            .text("prefix", &v.prefix)
            .text("interface", &v.interface)
            .text("upstream_interface", &v.upstream_interface)
            .u64("max_addresses", v.max_addresses)
            .done(),
    );
    let r = &c.relay;
    sections.push(
        W::new("relay", None)
            .choice("mode", r.mode)
            .list("server", &r.server)
            .u64("data_port", r.data_port)
            .list("server_key_fingerprint", &r.server_key_fingerprint)
            .list("client_key_fingerprint", &r.client_key_fingerprint)
            .u64("max_clients", r.max_clients)
            .u64("max_streams_per_client", r.max_streams_per_client)
            .u64("max_bytes_in_flight", r.max_bytes_in_flight)
            .u64("reconnect_min_ms", r.reconnect_min_ms)
            .u64("reconnect_max_ms", r.reconnect_max_ms)
            .u64("prefer_hold_s", r.prefer_hold_s)
            .u64("ping_interval_ms", r.ping_interval_ms)
            .u64("ping_timeout_ms", r.ping_timeout_ms)
            .done(),
    );
    let k = &c.cloud;
    sections.push(
        W::new("cloud", None)
            .bool("enabled", k.enabled)
            .text("url", &k.url)
            .text("pairing", &k.pairing)
            .done(),
    );
    Package {
        name: Some("agentd".to_string()),
        sections,
    }
}
