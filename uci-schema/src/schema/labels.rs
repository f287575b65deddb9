//! Short human labels of the options, for forms (LuCI's Settings, Policy
//! and Mappings pages title each field with one; the option's doc line is
//! the description under it). Kept beside the table rather than in it so
//! a label can be reworded without touching the option's contract; a
//! test requires one label for every option of [`super::SECTIONS`].

/// `(section type, option, label)`.
#[rustfmt::skip]
pub(super) const LABELS: &[(&str, &str, &str)] = &[
    ("agent", "origin", "Origin"),
    ("agent", "source", "Source networks"),
    ("agent", "key", "Pinned JWT key"),
    ("agent", "allow_loopback", "Loopback endpoints"),

    ("agentd", "enabled", "Enabled"),
    ("agentd", "router_id", "Router ID"),
    ("agentd", "domain", "Domain"),
    ("agentd", "identity", "Identity key"),
    ("agentd", "domain_ca", "Domain CA"),
    ("agentd", "router_cert", "Router certificate"),
    ("agentd", "ipc_socket", "Control socket"),
    ("agentd", "state_dir", "State directory"),
    ("agentd", "default_lease", "Default lease (s)"),
    ("agentd", "min_lease", "Shortest lease (s)"),
    ("agentd", "max_lease", "Longest lease (s)"),
    ("agentd", "max_routes", "Most local routes"),
    ("agentd", "max_routes_per_origin", "Most routes per origin"),
    ("agentd", "max_routes_per_source", "Most routes per source address"),
    ("agentd", "default_action", "Default action"),
    ("agentd", "log_level", "Log level"),
    ("agentd", "health_check", "Endpoint health check"),
    ("agentd", "health_interval", "Health check interval (s)"),
    ("agentd", "health_timeout_ms", "Health check timeout (ms)"),
    ("agentd", "health_fail_threshold", "Failures before unhealthy"),
    ("agentd", "health_recover_threshold", "Successes before healthy"),
    ("agentd", "health_max_probes_per_s", "Most health probes per second"),
    ("agentd", "allow_loopback_endpoints", "Loopback endpoints (lab only)"),
    ("agentd", "lan_interface", "LAN interfaces"),
    ("agentd", "endpoint_allow_prefix", "Allowed endpoint networks"),

    ("arpx", "listen", "Listener"),
    ("arpx", "heartbeat_ms", "Heartbeat (ms)"),
    ("arpx", "miss_limit", "Missed heartbeats before down"),
    ("arpx", "graceful_s", "Routes kept after a loss (s)"),
    ("arpx", "reflector", "Route reflector"),
    ("arpx", "max_frame", "Largest message (bytes)"),
    ("arpx", "max_path", "Longest path vector"),
    ("arpx", "max_routes_per_origin", "Most routes per origin"),

    ("cloud", "enabled", "Enabled"),
    ("cloud", "url", "Cloud URL"),
    ("cloud", "pairing", "Pairing code"),

    ("discovery", "enabled", "Enabled"),
    ("discovery", "interface", "Interfaces"),
    ("discovery", "admission", "Admission"),
    ("discovery", "candidate_lifetime_s", "Candidate lifetime (s)"),
    ("discovery", "allow_fingerprint", "Allowed key fingerprints"),
    ("discovery", "resolver", "Unicast DNS resolver"),
    ("discovery", "search_domain", "Search domains"),
    ("discovery", "require_dnssec", "Require DNSSEC (AD bit)"),
    ("discovery", "refresh_min_s", "Shortest lookup interval (s)"),
    ("discovery", "refresh_max_s", "Longest lookup interval (s)"),
    ("discovery", "query_timeout_ms", "DNS query timeout (ms)"),
    ("discovery", "nexus_alias", "Answer nexus-router.local"),

    ("gateway", "sdk_listen", "LAN SDK listener"),
    ("gateway", "public_listen", "Public HTTPS listener"),
    ("gateway", "public_cert", "Public certificate"),
    ("gateway", "public_key", "Public certificate key"),
    ("gateway", "client_ca", "Client certificate CA"),
    ("gateway", "peer_listen", "Peer data plane listener"),
    ("gateway", "admin_listen", "Metrics listener"),
    ("gateway", "auth", "Caller authentication"),
    ("gateway", "issuer_key", "Bootstrap signing key"),
    ("gateway", "bootstrap", "Bootstrap tokens"),
    ("gateway", "bootstrap_networks", "Bootstrap networks"),
    ("gateway", "bootstrap_tenant", "Bootstrap tenants"),
    ("gateway", "bootstrap_ttl", "Bootstrap token lifetime (s)"),
    ("gateway", "max_token_lifetime", "Longest token lifetime (s)"),
    ("gateway", "clock_skew", "Clock skew allowed (s)"),
    ("gateway", "max_request_bytes", "Largest request (bytes)"),
    ("gateway", "rate_per_second", "Requests per second"),
    ("gateway", "rate_burst", "Request burst"),
    ("gateway", "max_inflight", "Most calls in flight"),
    ("gateway", "max_inflight_per_source", "Most calls in flight per source"),
    ("gateway", "max_inflight_per_peer", "Most calls in flight per peer"),
    ("gateway", "max_connections", "Most connections"),
    ("gateway", "max_conns_per_source", "Most connections per source"),
    ("gateway", "body_read_timeout_ms", "Request body timeout (ms)"),
    ("gateway", "control_rate_per_source", "Registrations per second per source"),
    ("gateway", "control_burst_per_source", "Registration burst per source"),
    ("gateway", "default_timeout_ms", "Default call timeout (ms)"),
    ("gateway", "task_capacity", "Most async tasks"),
    ("gateway", "task_ttl", "Task result lifetime (s)"),
    ("gateway", "stream_history_events", "Stream history (events)"),
    ("gateway", "stream_history_bytes", "Stream history (bytes)"),
    ("gateway", "max_result_bytes", "Largest result (bytes)"),
    ("gateway", "buffer_budget", "Buffer budget (bytes)"),
    ("gateway", "tenant_share_percent", "Tenant share of the budget (%)"),
    ("gateway", "source_share_percent", "Source share of the budget (%)"),
    ("gateway", "stream_drain_timeout_ms", "Stream drain timeout (ms)"),
    ("gateway", "hop_limit", "Hop limit"),
    ("gateway", "assertion_ttl", "Forwarding assertion lifetime (s)"),
    ("gateway", "expose_schemas", "Expose input schemas"),
    ("gateway", "protocol_tenant", "MCP/A2A tenant"),
    ("gateway", "public_url", "Public URL"),
    ("gateway", "allowed_hosts", "Allowed Host headers"),
    ("gateway", "mcp_max_sessions", "Most MCP sessions"),
    ("gateway", "mcp_session_idle", "MCP session idle timeout (s)"),
    ("gateway", "replay_cache", "Replay cache (entries)"),

    ("ipv6", "mode", "Mode"),
    ("ipv6", "prefix", "Prefix"),
    ("ipv6", "interface", "Address interface"),
    ("ipv6", "upstream_interface", "Upstream interface"),
    ("ipv6", "max_addresses", "Most addresses"),

    ("mapping", "enabled", "Enabled"),
    ("mapping", "protocol", "Protocol"),
    ("mapping", "name", "Name"),
    ("mapping", "capability", "Capability"),
    ("mapping", "version", "Version"),
    ("mapping", "title", "Title"),
    ("mapping", "description", "Description"),
    ("mapping", "input_schema", "Input schema"),
    ("mapping", "input_schema_file", "Input schema file"),

    ("peer", "enabled", "Enabled"),
    ("peer", "router_id", "Router ID"),
    ("peer", "address", "Address"),
    ("peer", "port", "ARPX port"),
    ("peer", "data_port", "Data plane port"),
    ("peer", "key_fingerprint", "Pinned key fingerprint"),
    ("peer", "reflector_client", "Reflector client"),
    ("peer", "sign_calls", "Sign calls"),
    ("peer", "max_routes", "Most routes accepted"),
    ("peer", "max_trust", "Highest trust accepted"),
    ("peer", "max_proof", "Strongest origin proof accepted"),
    ("peer", "export_tenant", "Exported tenants"),
    ("peer", "discovered", "Discovered"),
    ("peer", "record_version", "Approved record version"),

    ("relay", "mode", "Mode"),
    ("relay", "server", "Relay servers"),
    ("relay", "data_port", "Relays' data-plane port"),
    ("relay", "server_key_fingerprint", "Relay keys outside the domain"),
    ("relay", "client_key_fingerprint", "Client keys outside the domain"),
    ("relay", "max_clients", "Most client routers"),
    ("relay", "max_streams_per_client", "Most calls in flight per client"),
    ("relay", "max_bytes_in_flight", "Answer bytes in flight per client"),
    ("relay", "reconnect_min_ms", "Shortest reconnect delay (ms)"),
    ("relay", "reconnect_max_ms", "Longest reconnect delay (ms)"),
    ("relay", "prefer_hold_s", "Hold before a preferred relay (s)"),
    ("relay", "ping_interval_ms", "Tunnel PING interval (ms)"),
    ("relay", "ping_timeout_ms", "Tunnel PING timeout (ms)"),

    ("route", "id", "Route ID"),
    ("route", "enabled", "Enabled"),
    ("route", "capability", "Capability"),
    ("route", "version", "Version"),
    ("route", "origin", "Origin"),
    ("route", "endpoint", "Endpoint"),
    ("route", "allow_loopback", "Loopback endpoint"),
    ("route", "tenant", "Tenant"),
    ("route", "region", "Region"),
    ("route", "latency_ms", "Latency (ms)"),
    ("route", "cost", "Cost (millionths)"),
    ("route", "load", "Load (permille)"),
    ("route", "trust", "Trust"),
    ("route", "allowed_tenants", "Allowed tenants"),
    ("route", "allowed_sources", "Allowed callers"),
    ("route", "effect", "Effect"),
    ("route", "idempotent", "Idempotent"),
    ("route", "description", "Description"),
    ("route", "input_schema", "Input schema"),

    ("rule", "id", "Rule ID"),
    ("rule", "enabled", "Enabled"),
    ("rule", "priority", "Priority"),
    ("rule", "action", "Action"),
    ("rule", "tenant", "Tenant"),
    ("rule", "source", "Source"),
    ("rule", "capability", "Capability"),
    ("rule", "region", "Region"),
    ("rule", "max_latency_ms", "Highest latency (ms)"),
    ("rule", "max_cost", "Highest cost (millionths)"),
    ("rule", "max_load", "Highest load (permille)"),
    ("rule", "min_trust", "Lowest trust"),
    ("rule", "min_proof", "Weakest origin proof"),
    ("rule", "max_hops", "Most hops"),
    ("rule", "sources", "Route sources"),
    ("rule", "required_peer", "Required peer"),
    ("rule", "denied_peer", "Denied peer"),
    ("rule", "endpoint_prefix", "Endpoint prefix"),
    ("rule", "w_latency", "Latency weight"),
    ("rule", "d_cost", "Cost divisor"),
    ("rule", "w_load", "Load weight"),
    ("rule", "w_trust", "Distrust weight"),
    ("rule", "w_hops", "Hop weight"),
    ("rule", "preferred_peer", "Preferred peer"),
    ("rule", "nonpreferred_penalty", "Penalty off the preferred peer"),

    ("tenant", "name", "Name"),
    ("tenant", "jwt_key", "JWT public keys"),
    ("tenant", "rate_per_second", "Requests per second"),
    ("tenant", "rate_burst", "Request burst"),
    ("tenant", "max_routes", "Most routes"),
    ("tenant", "max_trust", "Highest trust"),
];

#[cfg(test)]
mod tests {
    use super::super::SECTIONS;
    use super::LABELS;

    #[test]
    fn every_option_has_exactly_one_label_and_every_label_an_option() {
        for s in SECTIONS {
            for o in s.options {
                let n = LABELS
                    .iter()
                    .filter(|(t, name, _)| *t == s.ty && *name == o.name)
                    .count();
                assert_eq!(n, 1, "{}.{}: {n} labels", s.ty, o.name);
            }
        }
        for (t, name, label) in LABELS {
            let known = SECTIONS
                .iter()
                .any(|s| s.ty == *t && s.option(name).is_some());
            assert!(known, "label for unknown option {t}.{name}");
            assert!(
                !label.is_empty() && label.len() <= 40,
                "{t}.{name}: {label:?}"
            );
        }
    }
}
