'use strict';
'require baseclass';

// GENERATED from uci-schema's table (uci_schema::schema::SECTIONS) by
// uci-schema/tests/support/luci.rs; do not edit. Regenerate with
// `UPDATE_DOCS=1 cargo test -p uci-schema --test docs`.
// Every section of /etc/config/agentd and every option with its kind,
// label, range (u64 bounds as decimal strings), default, the meaning
// of an empty value and its doc line; agentd/validate.js checks values
// against it exactly as `agentd --check-config` does.

return baseclass.extend({
	sections: {
	  "agent": {
	    "doc": "Pins an origin to source networks or a key (route ownership, docs/trust-model.md).",
	    "many": true,
	    "name": "",
	    "options": {
	      "allow_loopback": {
	        "default": "0",
	        "doc": "The origin may register loopback endpoints (an agent running on the router itself).",
	        "kind": "bool",
	        "label": "Loopback endpoints",
	        "list": false
	      },
	      "key": {
	        "default": "",
	        "doc": "Only tokens signed by this key act for the origin (no bootstrap, no auth 'none').",
	        "empty": "any key of the tenant, or bootstrap",
	        "kind": "jwtkey",
	        "label": "Pinned JWT key",
	        "list": false
	      },
	      "origin": {
	        "doc": "The pinned origin 'agent://tenant/name'; unique.",
	        "kind": "agenturi",
	        "label": "Origin",
	        "list": false,
	        "required": true
	      },
	      "source": {
	        "default": [],
	        "doc": "Source networks the origin may register and bootstrap from (none: any source).",
	        "kind": "ipnet",
	        "label": "Source networks",
	        "list": true
	      }
	    },
	    "order": [
	      "origin",
	      "source",
	      "key",
	      "allow_loopback"
	    ]
	  },
	  "agentd": {
	    "doc": "Routing service: identity, leases, limits, health checks.",
	    "many": false,
	    "name": "main",
	    "options": {
	      "allow_loopback_endpoints": {
	        "default": "0",
	        "doc": "Let registrations name loopback or the router's own addresses as endpoints (lab/dev only: it lets LAN agents make the gateway call the router's own services). The suite's own listener ports stay refused.",
	        "kind": "bool",
	        "label": "Loopback endpoints (lab only)",
	        "list": false
	      },
	      "default_action": {
	        "default": "allow",
	        "doc": "Verdict when no rule matches.",
	        "kind": "enum",
	        "label": "Default action",
	        "list": false,
	        "values": [
	          "allow",
	          "deny"
	        ]
	      },
	      "default_lease": {
	        "default": "30",
	        "doc": "Lease (s) granted when a registration asks for none.",
	        "kind": "uint",
	        "label": "Default lease (s)",
	        "list": false,
	        "max": "86400",
	        "min": "1"
	      },
	      "domain": {
	        "default": "",
	        "doc": "Domain this router belongs to.",
	        "empty": "no domain",
	        "kind": "domainname",
	        "label": "Domain",
	        "list": false
	      },
	      "domain_ca": {
	        "default": "",
	        "doc": "Domain CA certificate (PEM).",
	        "empty": "none: peers must be pinned",
	        "kind": "path",
	        "label": "Domain CA",
	        "list": false
	      },
	      "enabled": {
	        "default": "1",
	        "doc": "Run the routing service.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "endpoint_allow_prefix": {
	        "default": [],
	        "doc": "Prefixes registrations may name as endpoints although they lie on a non-LAN link of the router or are a peer router's address (the LAN-scope check skips them; the loopback and listener checks still apply).",
	        "kind": "ipnet",
	        "label": "Allowed endpoint networks",
	        "list": true
	      },
	      "health_check": {
	        "default": "tcp",
	        "doc": "Endpoint probe: TCP connect, HTTP GET /healthz, or none.",
	        "kind": "enum",
	        "label": "Endpoint health check",
	        "list": false,
	        "values": [
	          "off",
	          "tcp",
	          "http"
	        ]
	      },
	      "health_fail_threshold": {
	        "default": "3",
	        "doc": "Consecutive failed probes that mark an endpoint unhealthy.",
	        "kind": "uint",
	        "label": "Failures before unhealthy",
	        "list": false,
	        "max": "100",
	        "min": "1"
	      },
	      "health_interval": {
	        "default": "5",
	        "doc": "Seconds between probes of one endpoint (host and port, however many routes use it).",
	        "kind": "uint",
	        "label": "Health check interval (s)",
	        "list": false,
	        "max": "3600",
	        "min": "1"
	      },
	      "health_max_probes_per_s": {
	        "default": "50",
	        "doc": "Most health probes started per second over all endpoints (one probe per distinct endpoint per interval, spread evenly; more endpoints than this allows are probed less often).",
	        "kind": "uint",
	        "label": "Most health probes per second",
	        "list": false,
	        "max": "10000",
	        "min": "1"
	      },
	      "health_recover_threshold": {
	        "default": "2",
	        "doc": "Consecutive good probes that mark it healthy again.",
	        "kind": "uint",
	        "label": "Successes before healthy",
	        "list": false,
	        "max": "100",
	        "min": "1"
	      },
	      "health_timeout_ms": {
	        "default": "1000",
	        "doc": "Probe timeout (ms).",
	        "kind": "uint",
	        "label": "Health check timeout (ms)",
	        "list": false,
	        "max": "60000",
	        "min": "1"
	      },
	      "identity": {
	        "default": "/etc/agentd/identity.key",
	        "doc": "Ed25519 identity key (created on first start, mode 0600; the OpenWrt feed creates it at first boot, 0640 group agent-gw so the gateway can read it).",
	        "kind": "path",
	        "label": "Identity key",
	        "list": false
	      },
	      "ipc_socket": {
	        "default": "/var/run/agentd/agentd.sock",
	        "doc": "Unix socket for agent-gw and agentctl.",
	        "kind": "path",
	        "label": "Control socket",
	        "list": false
	      },
	      "lan_interface": {
	        "default": [
	          "br-lan"
	        ],
	        "doc": "Interfaces whose subnets count as LAN for registration endpoints, besides the one the registration arrives on. An endpoint on any other link of the router (its address or subnet) is refused 'endpoint_not_lan' (docs/trust-model.md).",
	        "kind": "ifname",
	        "label": "LAN interfaces",
	        "list": true
	      },
	      "log_level": {
	        "default": "info",
	        "doc": "Log verbosity.",
	        "kind": "enum",
	        "label": "Log level",
	        "list": false,
	        "values": [
	          "error",
	          "warn",
	          "info",
	          "debug",
	          "trace"
	        ]
	      },
	      "max_lease": {
	        "default": "3600",
	        "doc": "Longest lease (s) granted; must be >= default_lease.",
	        "kind": "uint",
	        "label": "Longest lease (s)",
	        "list": false,
	        "max": "86400",
	        "min": "1"
	      },
	      "max_routes": {
	        "default": "10000",
	        "doc": "Most routes in the RIB (all sources).",
	        "kind": "uint",
	        "label": "Most local routes",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "max_routes_per_origin": {
	        "default": "64",
	        "doc": "Most local routes one origin (agent URI) may hold; registering more is refused 'quota_exceeded', renewals never are.",
	        "kind": "uint",
	        "label": "Most routes per origin",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "max_routes_per_source": {
	        "default": "1024",
	        "doc": "Most local routes registered from one source address (auth 'none' and bootstrap tokens); tenant-signed tokens count against tenant.max_routes instead.",
	        "kind": "uint",
	        "label": "Most routes per source address",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "min_lease": {
	        "default": "5",
	        "doc": "Shortest lease (s) granted; must be <= default_lease.",
	        "kind": "uint",
	        "label": "Shortest lease (s)",
	        "list": false,
	        "max": "86400",
	        "min": "1"
	      },
	      "router_cert": {
	        "default": "",
	        "doc": "This router's certificate signed by the domain CA (PEM).",
	        "empty": "none",
	        "kind": "path",
	        "label": "Router certificate",
	        "list": false
	      },
	      "router_id": {
	        "default": "",
	        "doc": "This router's name in the mesh.",
	        "empty": "the system host name",
	        "kind": "dnslabel",
	        "label": "Router ID",
	        "list": false
	      },
	      "state_dir": {
	        "default": "/var/run/agentd",
	        "doc": "Directory for runtime state.",
	        "kind": "path",
	        "label": "State directory",
	        "list": false
	      }
	    },
	    "order": [
	      "enabled",
	      "router_id",
	      "domain",
	      "identity",
	      "domain_ca",
	      "router_cert",
	      "ipc_socket",
	      "state_dir",
	      "default_lease",
	      "min_lease",
	      "max_lease",
	      "max_routes",
	      "max_routes_per_origin",
	      "max_routes_per_source",
	      "default_action",
	      "log_level",
	      "health_check",
	      "health_interval",
	      "health_timeout_ms",
	      "health_fail_threshold",
	      "health_recover_threshold",
	      "health_max_probes_per_s",
	      "allow_loopback_endpoints",
	      "lan_interface",
	      "endpoint_allow_prefix"
	    ]
	  },
	  "arpx": {
	    "doc": "Inter-router route exchange.",
	    "many": false,
	    "name": "arpx",
	    "options": {
	      "graceful_s": {
	        "default": "10",
	        "doc": "Seconds a lost peer's routes are retained (ineligible).",
	        "kind": "uint",
	        "label": "Routes kept after a loss (s)",
	        "list": false,
	        "max": "3600",
	        "min": "0"
	      },
	      "heartbeat_ms": {
	        "default": "1000",
	        "doc": "Heartbeat interval (ms).",
	        "kind": "uint",
	        "label": "Heartbeat (ms)",
	        "list": false,
	        "max": "60000",
	        "min": "50"
	      },
	      "listen": {
	        "default": "[::]:7444",
	        "doc": "ARPX listener (TLS 1.3 mTLS).",
	        "empty": "no inbound sessions",
	        "kind": "socketaddr",
	        "label": "Listener",
	        "list": false
	      },
	      "max_frame": {
	        "default": "65536",
	        "doc": "Largest ARPX frame (bytes, length prefix excluded); a larger one closes the session, updates are batched to fit.",
	        "kind": "uint",
	        "label": "Largest message (bytes)",
	        "list": false,
	        "max": "16777216",
	        "min": "1024"
	      },
	      "max_path": {
	        "default": "8",
	        "doc": "Longest accepted path vector (routers, origin included); a longer advertisement is dropped and counted.",
	        "kind": "uint",
	        "label": "Longest path vector",
	        "list": false,
	        "max": "64",
	        "min": "1"
	      },
	      "max_routes_per_origin": {
	        "default": "2500",
	        "doc": "Most paths held from one neighbour for one origin router; more are dropped and counted, the session stays (one origin's flood cannot crowd out the others').",
	        "kind": "uint",
	        "label": "Most routes per origin",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "miss_limit": {
	        "default": "3",
	        "doc": "Missed heartbeats that end a session.",
	        "kind": "uint",
	        "label": "Missed heartbeats before down",
	        "list": false,
	        "max": "100",
	        "min": "1"
	      },
	      "reflector": {
	        "default": "0",
	        "doc": "Re-advertise routes learned from one peer to the others.",
	        "kind": "bool",
	        "label": "Route reflector",
	        "list": false
	      }
	    },
	    "order": [
	      "listen",
	      "heartbeat_ms",
	      "miss_limit",
	      "graceful_s",
	      "reflector",
	      "max_frame",
	      "max_path",
	      "max_routes_per_origin"
	    ]
	  },
	  "cloud": {
	    "doc": "Optional cloud connector.",
	    "many": false,
	    "name": "cloud",
	    "options": {
	      "enabled": {
	        "default": "0",
	        "doc": "Run the cloud connector.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "pairing": {
	        "default": "",
	        "doc": "Pairing code.",
	        "empty": "none",
	        "kind": "token",
	        "label": "Pairing code",
	        "list": false
	      },
	      "url": {
	        "default": "",
	        "doc": "Cloud endpoint.",
	        "empty": "none (required when enabled)",
	        "kind": "url",
	        "label": "Cloud URL",
	        "list": false
	      }
	    },
	    "order": [
	      "enabled",
	      "url",
	      "pairing"
	    ]
	  },
	  "discovery": {
	    "doc": "mDNS/DNS-SD discovery and admission of routers.",
	    "many": false,
	    "name": "discovery",
	    "options": {
	      "admission": {
	        "default": "manual",
	        "doc": "How discovered routers become peers.",
	        "kind": "enum",
	        "label": "Admission",
	        "list": false,
	        "values": [
	          "off",
	          "manual",
	          "same-domain",
	          "allowlist"
	        ]
	      },
	      "allow_fingerprint": {
	        "default": [],
	        "doc": "Key fingerprints admitted in allowlist mode.",
	        "kind": "fingerprint",
	        "label": "Allowed key fingerprints",
	        "list": true
	      },
	      "candidate_lifetime_s": {
	        "default": "5",
	        "doc": "Seconds a candidate lives after its last announcement.",
	        "kind": "uint",
	        "label": "Candidate lifetime (s)",
	        "list": false,
	        "max": "3600",
	        "min": "1"
	      },
	      "enabled": {
	        "default": "1",
	        "doc": "Announce and browse via mDNS/DNS-SD.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "interface": {
	        "default": [
	          "br-lan"
	        ],
	        "doc": "Interfaces to announce and browse on.",
	        "kind": "ifname",
	        "label": "Interfaces",
	        "list": true
	      },
	      "nexus_alias": {
	        "default": "1",
	        "doc": "Also answer the mDNS host name nexus-router.local with this router's addresses on the discovery interfaces, so agents written for the Nexus SDK find the SDK API unchanged; when another device already holds that name, agentd leaves it to that device (agentctl status says so).",
	        "kind": "bool",
	        "label": "Answer nexus-router.local",
	        "list": false
	      },
	      "query_timeout_ms": {
	        "default": "2000",
	        "doc": "Unicast DNS-SD: how long one query waits for its answer (sent twice over UDP, then once over TCP when the answer is truncated).",
	        "kind": "uint",
	        "label": "DNS query timeout (ms)",
	        "list": false,
	        "max": "30000",
	        "min": "100"
	      },
	      "refresh_max_s": {
	        "default": "900",
	        "doc": "Unicast DNS-SD: the longest time between two lookups of a domain, whatever the records' TTL.",
	        "kind": "uint",
	        "label": "Longest lookup interval (s)",
	        "list": false,
	        "max": "86400",
	        "min": "1"
	      },
	      "refresh_min_s": {
	        "default": "5",
	        "doc": "Unicast DNS-SD: the shortest time between two lookups of a domain, whatever the records' TTL (also the retry time after an error).",
	        "kind": "uint",
	        "label": "Shortest lookup interval (s)",
	        "list": false,
	        "max": "3600",
	        "min": "1"
	      },
	      "require_dnssec": {
	        "default": "0",
	        "doc": "Accept unicast DNS-SD answers only when the resolver sets the AD bit (it validated them with DNSSEC); others count as errors in 'agentctl candidates'.",
	        "kind": "bool",
	        "label": "Require DNSSEC (AD bit)",
	        "list": false
	      },
	      "resolver": {
	        "default": "",
	        "doc": "DNS resolver asked for unicast DNS-SD (port 53 unless given): routers of other domains are found through it (docs/discovery.md). With require_dnssec it must be a validating resolver on a path you trust (the router itself or your own network): agentd believes its AD bit.",
	        "empty": "unicast DNS-SD off",
	        "kind": "resolver",
	        "label": "Unicast DNS resolver",
	        "list": false
	      },
	      "search_domain": {
	        "default": [],
	        "doc": "Domains browsed with unicast DNS-SD: for each, the PTR records of _arpx._tcp in it, then each instance's SRV and TXT, then the target's AAAA and A (RFC 6763). Found routers are candidates like mDNS ones.",
	        "kind": "domainname",
	        "label": "Search domains",
	        "list": true
	      }
	    },
	    "order": [
	      "enabled",
	      "interface",
	      "admission",
	      "candidate_lifetime_s",
	      "nexus_alias",
	      "allow_fingerprint",
	      "resolver",
	      "search_domain",
	      "require_dnssec",
	      "refresh_min_s",
	      "refresh_max_s",
	      "query_timeout_ms"
	    ]
	  },
	  "gateway": {
	    "doc": "agent-gw: listeners, authentication, limits, tasks and streams.",
	    "many": false,
	    "name": "gateway",
	    "options": {
	      "admin_listen": {
	        "default": "127.0.0.1:9101",
	        "doc": "Prometheus endpoint: GET /metrics (text format 0.0.4) with both daemons' counters (docs/metrics.md). No authentication: it stays on loopback unless set otherwise (9100 is prometheus-node-exporter-lua's). An address that cannot be bound is logged and the gateway runs without it.",
	        "empty": "disabled",
	        "kind": "socketaddr",
	        "label": "Metrics listener",
	        "list": false
	      },
	      "allowed_hosts": {
	        "default": [],
	        "doc": "Host names (or addresses) MCP and A2A clients may use in Host and Origin besides the listener addresses, localhost, 127.0.0.1, [::1] and the router's interface addresses (DNS-rebinding protection): another Host is refused 421, another Origin 403.",
	        "kind": "host",
	        "label": "Allowed Host headers",
	        "list": true
	      },
	      "assertion_ttl": {
	        "default": "30",
	        "doc": "Lifetime (s) of forwarding assertions.",
	        "kind": "uint",
	        "label": "Forwarding assertion lifetime (s)",
	        "list": false,
	        "max": "300",
	        "min": "1"
	      },
	      "auth": {
	        "default": "jwt",
	        "doc": "Caller authentication; 'none' is for labs only.",
	        "kind": "enum",
	        "label": "Caller authentication",
	        "list": false,
	        "values": [
	          "jwt",
	          "none"
	        ]
	      },
	      "body_read_timeout_ms": {
	        "default": "10000",
	        "doc": "Longest time to receive a request body once its head arrived (ms).",
	        "kind": "uint",
	        "label": "Request body timeout (ms)",
	        "list": false,
	        "max": "600000",
	        "min": "100"
	      },
	      "bootstrap": {
	        "default": "1",
	        "doc": "Serve POST /agent/v1/bootstrap (short-lived tokens for LAN agents).",
	        "kind": "bool",
	        "label": "Bootstrap tokens",
	        "list": false
	      },
	      "bootstrap_networks": {
	        "default": [
	          "127.0.0.0/8",
	          "::1/128",
	          "10.0.0.0/8",
	          "172.16.0.0/12",
	          "192.168.0.0/16",
	          "169.254.0.0/16",
	          "fc00::/7",
	          "fe80::/10"
	        ],
	        "doc": "Source networks that may use bootstrap (others get 403). Any line set here replaces the default networks rather than adding to them (agentctl status says so); to turn bootstrap off set bootstrap '0'.",
	        "kind": "ipnet",
	        "label": "Bootstrap networks",
	        "list": true
	      },
	      "bootstrap_tenant": {
	        "default": [
	          "default"
	        ],
	        "doc": "Tenants trusted-LAN bootstrap issues tokens for; a request for another tenant gets 403 'tenant_not_bootstrappable'.",
	        "kind": "name",
	        "label": "Bootstrap tenants",
	        "list": true
	      },
	      "bootstrap_ttl": {
	        "default": "300",
	        "doc": "Lifetime (s) of bootstrap tokens.",
	        "kind": "uint",
	        "label": "Bootstrap token lifetime (s)",
	        "list": false,
	        "max": "300",
	        "min": "1"
	      },
	      "buffer_budget": {
	        "default": "16777216",
	        "doc": "Bytes agent-gw holds for callers at most, all together: async task results (max_result_bytes reserved per running task), stream histories (320 KiB reserved per stream or MCP call; MCP sessions also hold what they keep for resumption) and request bodies kept to resend. When reached, new async and stream work is refused (503 overloaded); accepted work is never evicted.",
	        "kind": "uint",
	        "label": "Buffer budget (bytes)",
	        "list": false,
	        "max": "4294967296",
	        "min": "1048576"
	      },
	      "client_ca": {
	        "default": "",
	        "doc": "PEM CA certificate(s) whose client certificates authenticate callers on the public listener and the per-agent IPv6 addresses: the certificate names its agent as a subjectAltName URI agent://tenant/name (Ed25519 keys). With it those listeners are served in auth 'none' too, for callers with such a certificate only.",
	        "empty": "none: bearer tokens only",
	        "kind": "path",
	        "label": "Client certificate CA",
	        "list": false
	      },
	      "clock_skew": {
	        "default": "30",
	        "doc": "Tolerated clock skew (s) when checking iat/exp.",
	        "kind": "uint",
	        "label": "Clock skew allowed (s)",
	        "list": false,
	        "max": "300",
	        "min": "0"
	      },
	      "control_burst_per_source": {
	        "default": "40",
	        "doc": "Token bucket size of control_rate_per_source.",
	        "kind": "uint",
	        "label": "Registration burst per source",
	        "list": false,
	        "max": "1000000",
	        "min": "0"
	      },
	      "control_rate_per_source": {
	        "default": "20",
	        "doc": "register/renew/unregister/bootstrap requests per second one source address may make (token bucket refill; the tenant's rate applies too); beyond it 429 'rate_limited'.",
	        "kind": "uint",
	        "label": "Registrations per second per source",
	        "list": false,
	        "max": "1000000",
	        "min": "0"
	      },
	      "default_timeout_ms": {
	        "default": "30000",
	        "doc": "Deadline of a call that names none.",
	        "kind": "uint",
	        "label": "Default call timeout (ms)",
	        "list": false,
	        "max": "3600000",
	        "min": "1"
	      },
	      "expose_schemas": {
	        "default": "0",
	        "doc": "Also expose, as MCP tools, every registration whose contract carries an input schema (named after its capability; a mapping of the same name wins). Off: only mapping sections are exposed.",
	        "kind": "bool",
	        "label": "Expose input schemas",
	        "list": false
	      },
	      "hop_limit": {
	        "default": "8",
	        "doc": "Most hops a forwarded call may still take: the gateway forwards with min(hop_limit - 1, this) and refuses a call arriving with hop_limit 1 (hop_limit_exceeded).",
	        "kind": "uint",
	        "label": "Hop limit",
	        "list": false,
	        "max": "64",
	        "min": "1"
	      },
	      "issuer_key": {
	        "default": "",
	        "doc": "Key that signs trusted-LAN bootstrap tokens.",
	        "empty": "the router identity key",
	        "kind": "path",
	        "label": "Bootstrap signing key",
	        "list": false
	      },
	      "max_connections": {
	        "default": "1024",
	        "doc": "Most open client connections on the SDK listener; beyond it new ones are closed at accept.",
	        "kind": "uint",
	        "label": "Most connections",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "max_conns_per_source": {
	        "default": "128",
	        "doc": "Most open connections from one source (IPv4 address or IPv6 /64), counting those that have not sent a complete request head; beyond it the source's new connections are closed at accept.",
	        "kind": "uint",
	        "label": "Most connections per source",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "max_inflight": {
	        "default": "256",
	        "doc": "Most concurrent requests.",
	        "kind": "uint",
	        "label": "Most calls in flight",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "max_inflight_per_peer": {
	        "default": "128",
	        "doc": "Most concurrent calls one neighbour router may forward to this gateway (it carries many callers, whose own router applied max_inflight_per_source); beyond it its calls get 503 overloaded (reason peer_inflight) and the neighbour may move them elsewhere.",
	        "kind": "uint",
	        "label": "Most calls in flight per peer",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "max_inflight_per_source": {
	        "default": "64",
	        "doc": "Most concurrent requests from one source (IPv4 address or IPv6 /64).",
	        "kind": "uint",
	        "label": "Most calls in flight per source",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "max_request_bytes": {
	        "default": "65536",
	        "doc": "Largest buffered request body.",
	        "kind": "uint",
	        "label": "Largest request (bytes)",
	        "list": false,
	        "max": "67108864",
	        "min": "1024"
	      },
	      "max_result_bytes": {
	        "default": "1048576",
	        "doc": "Largest handler answer one async task keeps as its result; a larger answer fails the task with upstream_error. It is also what every running async task reserves from buffer_budget, so lowering it lets more async tasks run at once.",
	        "kind": "uint",
	        "label": "Largest result (bytes)",
	        "list": false,
	        "max": "16777216",
	        "min": "1024"
	      },
	      "max_token_lifetime": {
	        "default": "3600",
	        "doc": "Longest accepted JWT lifetime exp-iat (s).",
	        "kind": "uint",
	        "label": "Longest token lifetime (s)",
	        "list": false,
	        "max": "86400",
	        "min": "1"
	      },
	      "mcp_max_sessions": {
	        "default": "256",
	        "doc": "Most open MCP sessions (handshake revisions up to 2025-11-25; 2026-07-28 is sessionless); one caller identity holds at most a quarter. Beyond it initialize is refused (503).",
	        "kind": "uint",
	        "label": "Most MCP sessions",
	        "list": false,
	        "max": "65536",
	        "min": "1"
	      },
	      "mcp_session_idle": {
	        "default": "600",
	        "doc": "Seconds an MCP session without a running call may stay unused before it ends (its id then answers 404).",
	        "kind": "uint",
	        "label": "MCP session idle timeout (s)",
	        "list": false,
	        "max": "86400",
	        "min": "10"
	      },
	      "peer_listen": {
	        "default": "[::]:7447",
	        "doc": "Peer/relay data plane (h2 over mTLS).",
	        "empty": "disabled",
	        "kind": "socketaddr",
	        "label": "Peer data plane listener",
	        "list": false
	      },
	      "protocol_tenant": {
	        "default": "default",
	        "doc": "With auth 'none' (labs), the tenant MCP and A2A calls act for; their source agent is 'agent://<tenant>/mcp-client' or '.../a2a-client'. With JWT auth the token decides.",
	        "kind": "name",
	        "label": "MCP/A2A tenant",
	        "list": false
	      },
	      "public_cert": {
	        "default": "",
	        "doc": "PEM certificate chain the public listener presents (e.g. the one uhttpd or ACME uses).",
	        "empty": "the router's certificate: agentd.router_cert, else the self-signed certificate of the identity key",
	        "kind": "path",
	        "label": "Public certificate",
	        "list": false
	      },
	      "public_key": {
	        "default": "",
	        "doc": "PEM private key of public_cert (PKCS#8, SEC1 or PKCS#1; Ed25519, ECDSA or RSA).",
	        "empty": "none (required with public_cert)",
	        "kind": "path",
	        "label": "Public certificate key",
	        "list": false
	      },
	      "public_listen": {
	        "default": "[::]:7443",
	        "doc": "Public HTTPS ingress (TLS; HTTP/2 or HTTP/1.1): the invoke, task, MCP and A2A endpoints, never registration or bootstrap. Served only when auth is not 'none' (an unauthenticated public ingress would let anyone act for any tenant).",
	        "empty": "disabled",
	        "kind": "socketaddr",
	        "label": "Public HTTPS listener",
	        "list": false
	      },
	      "public_url": {
	        "default": "",
	        "doc": "Base URL (scheme, host, optional port and path prefix) A2A clients reach this gateway at, written into agent cards (e.g. behind a port forward or a DNS name). Empty: the scheme of the listener and the request's Host.",
	        "empty": "from the request",
	        "kind": "url",
	        "label": "Public URL",
	        "list": false
	      },
	      "rate_burst": {
	        "default": "400",
	        "doc": "Token bucket size.",
	        "kind": "uint",
	        "label": "Request burst",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "rate_per_second": {
	        "default": "200",
	        "doc": "Request rate limit per caller (token bucket refill).",
	        "kind": "uint",
	        "label": "Requests per second",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "replay_cache": {
	        "default": "4096",
	        "doc": "Replay windows of forwarding-assertion nonces kept per neighbour that signs its calls (one per sending gateway process, whatever its rate; a sender drawing random nonces uses one per assertion, for its lifetime); when a neighbour's windows are full, its assertions needing a new one are refused (assertion_cache_full) and no other neighbour is touched.",
	        "kind": "uint",
	        "label": "Replay cache (entries)",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "sdk_listen": {
	        "default": "[::]:7446",
	        "doc": "LAN SDK API listener (HTTP/1.1); an IPv6 address is dual-stack (IPv4 clients too); '[::]' falls back to 0.0.0.0 on a host without IPv6.",
	        "kind": "socketaddr",
	        "label": "LAN SDK listener",
	        "list": false
	      },
	      "source_share_percent": {
	        "default": "25",
	        "doc": "Most of the task table and of buffer_budget one client address may hold (%); beyond it that address's new async/stream work gets 429 share_exceeded.",
	        "kind": "uint",
	        "label": "Source share of the budget (%)",
	        "list": false,
	        "max": "100",
	        "min": "1"
	      },
	      "stream_drain_timeout_ms": {
	        "default": "5000",
	        "doc": "A stream follower that takes no bytes for this long is detached and its connection closed (the stream keeps running; resume with Last-Event-ID).",
	        "kind": "uint",
	        "label": "Stream drain timeout (ms)",
	        "list": false,
	        "max": "600000",
	        "min": "100"
	      },
	      "stream_history_bytes": {
	        "default": "1048576",
	        "doc": "Stream bytes kept per task for resume.",
	        "kind": "uint",
	        "label": "Stream history (bytes)",
	        "list": false,
	        "max": "67108864",
	        "min": "0"
	      },
	      "stream_history_events": {
	        "default": "64",
	        "doc": "Stream events kept per task for resume.",
	        "kind": "uint",
	        "label": "Stream history (events)",
	        "list": false,
	        "max": "65536",
	        "min": "0"
	      },
	      "task_capacity": {
	        "default": "512",
	        "doc": "Most async tasks; when full new async work is refused.",
	        "kind": "uint",
	        "label": "Most async tasks",
	        "list": false,
	        "max": "65536",
	        "min": "1"
	      },
	      "task_ttl": {
	        "default": "300",
	        "doc": "Seconds a finished task stays readable.",
	        "kind": "uint",
	        "label": "Task result lifetime (s)",
	        "list": false,
	        "max": "86400",
	        "min": "1"
	      },
	      "tenant_share_percent": {
	        "default": "50",
	        "doc": "Most of the task table and of buffer_budget one tenant may hold (%); beyond it that tenant's new async/stream work gets 429 share_exceeded.",
	        "kind": "uint",
	        "label": "Tenant share of the budget (%)",
	        "list": false,
	        "max": "100",
	        "min": "1"
	      }
	    },
	    "order": [
	      "sdk_listen",
	      "public_listen",
	      "public_cert",
	      "public_key",
	      "client_ca",
	      "peer_listen",
	      "admin_listen",
	      "auth",
	      "issuer_key",
	      "bootstrap",
	      "bootstrap_networks",
	      "bootstrap_tenant",
	      "bootstrap_ttl",
	      "max_token_lifetime",
	      "clock_skew",
	      "max_request_bytes",
	      "rate_per_second",
	      "rate_burst",
	      "max_inflight",
	      "max_inflight_per_source",
	      "max_inflight_per_peer",
	      "max_connections",
	      "max_conns_per_source",
	      "body_read_timeout_ms",
	      "control_rate_per_source",
	      "control_burst_per_source",
	      "default_timeout_ms",
	      "task_capacity",
	      "task_ttl",
	      "stream_history_events",
	      "stream_history_bytes",
	      "max_result_bytes",
	      "buffer_budget",
	      "tenant_share_percent",
	      "source_share_percent",
	      "stream_drain_timeout_ms",
	      "hop_limit",
	      "assertion_ttl",
	      "expose_schemas",
	      "protocol_tenant",
	      "public_url",
	      "allowed_hosts",
	      "mcp_max_sessions",
	      "mcp_session_idle",
	      "replay_cache"
	    ]
	  },
	  "ipv6": {
	    "doc": "Per-agent IPv6 /128 addresses.",
	    "many": false,
	    "name": "ipv6",
	    "options": {
	      "interface": {
	        "default": "agent0",
	        "doc": "Dummy interface holding the /128s.",
	        "kind": "ifname",
	        "label": "Address interface",
	        "list": false
	      },
	      "max_addresses": {
	        "default": "256",
	        "doc": "Most /128s at once.",
	        "kind": "uint",
	        "label": "Most addresses",
	        "list": false,
	        "max": "65536",
	        "min": "1"
	      },
	      "mode": {
	        "default": "off",
	        "doc": "Per-agent /128 addresses.",
	        "kind": "enum",
	        "label": "Mode",
	        "list": false,
	        "values": [
	          "off",
	          "routed-prefix",
	          "ndp-proxy"
	        ]
	      },
	      "prefix": {
	        "default": "",
	        "doc": "Prefix the /128s are derived from (/48 to /64), or 'auto': the delegated or WAN prefix of upstream_interface.",
	        "empty": "none (required unless mode is off)",
	        "kind": "agentprefix",
	        "label": "Prefix",
	        "list": false
	      },
	      "upstream_interface": {
	        "default": "wan",
	        "doc": "Interface for proxy NDP entries (ndp-proxy).",
	        "kind": "ifname",
	        "label": "Upstream interface",
	        "list": false
	      }
	    },
	    "order": [
	      "mode",
	      "prefix",
	      "interface",
	      "upstream_interface",
	      "max_addresses"
	    ]
	  },
	  "mapping": {
	    "doc": "An MCP tool or A2A skill backed by a capability.",
	    "many": true,
	    "name": "",
	    "options": {
	      "capability": {
	        "doc": "Capability invoked.",
	        "kind": "name",
	        "label": "Capability",
	        "list": false,
	        "required": true
	      },
	      "description": {
	        "default": "",
	        "doc": "Shown to MCP/A2A clients.",
	        "empty": "none",
	        "kind": "text",
	        "label": "Description",
	        "list": false
	      },
	      "enabled": {
	        "default": "1",
	        "doc": "Expose this mapping.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "input_schema": {
	        "default": "",
	        "doc": "Input JSON Schema shown to clients; at most one of input_schema and input_schema_file.",
	        "empty": "none: any object ({\"type\":\"object\"})",
	        "kind": "jsonobject",
	        "label": "Input schema",
	        "list": false
	      },
	      "input_schema_file": {
	        "default": "",
	        "doc": "File holding the input JSON Schema (a JSON object of at most 64 KiB), read when the configuration is loaded; at most one of input_schema and input_schema_file.",
	        "empty": "none",
	        "kind": "path",
	        "label": "Input schema file",
	        "list": false
	      },
	      "name": {
	        "doc": "Tool or skill name.",
	        "kind": "name",
	        "label": "Name",
	        "list": false,
	        "section_name": true
	      },
	      "protocol": {
	        "default": "mcp",
	        "doc": "MCP tool or A2A skill.",
	        "kind": "enum",
	        "label": "Protocol",
	        "list": false,
	        "values": [
	          "mcp",
	          "a2a"
	        ]
	      },
	      "title": {
	        "default": "",
	        "doc": "Human-readable name shown to MCP/A2A clients.",
	        "empty": "none",
	        "kind": "text",
	        "label": "Title",
	        "list": false
	      },
	      "version": {
	        "default": "1",
	        "doc": "Capability version invoked.",
	        "kind": "uint",
	        "label": "Version",
	        "list": false,
	        "max": "4294967295",
	        "min": "1"
	      }
	    },
	    "order": [
	      "enabled",
	      "protocol",
	      "name",
	      "capability",
	      "version",
	      "title",
	      "description",
	      "input_schema",
	      "input_schema_file"
	    ]
	  },
	  "peer": {
	    "doc": "A static peer router. At most 512 enabled (agentd sends agent-gw the peer list whole); agentd refuses more.",
	    "many": true,
	    "name": "",
	    "options": {
	      "address": {
	        "doc": "The peer's host name or IP address.",
	        "kind": "host",
	        "label": "Address",
	        "list": false,
	        "required": true
	      },
	      "data_port": {
	        "default": "7447",
	        "doc": "The peer's data-plane port.",
	        "kind": "uint",
	        "label": "Data plane port",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "discovered": {
	        "default": "0",
	        "doc": "Written by 'agentctl approve': a router admitted from discovery ('agentctl revoke' removes the section).",
	        "kind": "bool",
	        "label": "Discovered",
	        "list": false
	      },
	      "enabled": {
	        "default": "1",
	        "doc": "Keep a session with this peer.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "export_tenant": {
	        "default": [],
	        "doc": "Tenants whose routes are exported to this peer (none: every tenant).",
	        "kind": "name",
	        "label": "Exported tenants",
	        "list": true
	      },
	      "key_fingerprint": {
	        "default": "",
	        "doc": "Pinned key fingerprint (what `agentctl pki show` prints on the peer).",
	        "empty": "rely on domain_ca",
	        "kind": "fingerprint",
	        "label": "Pinned key fingerprint",
	        "list": false
	      },
	      "max_proof": {
	        "default": "jwt",
	        "doc": "Strongest origin proof a route learned from this peer may claim (none < bootstrap < static < jwt; a neighbour's proof is its own word; applied before reflection; docs/trust-model.md).",
	        "kind": "enum",
	        "label": "Strongest origin proof accepted",
	        "list": false,
	        "values": [
	          "none",
	          "bootstrap",
	          "static",
	          "jwt"
	        ]
	      },
	      "max_routes": {
	        "default": "10000",
	        "doc": "Most paths held from this peer; beyond it, paths of the origin router holding the most give way to smaller origins' and the rest are dropped and counted (the session stays).",
	        "kind": "uint",
	        "label": "Most routes accepted",
	        "list": false,
	        "max": "1000000",
	        "min": "1"
	      },
	      "max_trust": {
	        "default": "50",
	        "doc": "Highest trust granted to routes learned from this peer, whatever they advertise (applied before reflection; docs/trust-model.md).",
	        "kind": "uint",
	        "label": "Highest trust accepted",
	        "list": false,
	        "max": "100",
	        "min": "0"
	      },
	      "port": {
	        "default": "7444",
	        "doc": "The peer's ARPX port.",
	        "kind": "uint",
	        "label": "ARPX port",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "record_version": {
	        "default": "0",
	        "doc": "The discovery record version the approval binds to (0: none).",
	        "kind": "uint",
	        "label": "Approved record version",
	        "list": false,
	        "max": "4294967295",
	        "min": "0"
	      },
	      "reflector_client": {
	        "default": "0",
	        "doc": "Reflect other peers' routes to this peer.",
	        "kind": "bool",
	        "label": "Reflector client",
	        "list": false
	      },
	      "router_id": {
	        "doc": "The peer's router_id.",
	        "kind": "dnslabel",
	        "label": "Router ID",
	        "list": false,
	        "required": true
	      },
	      "sign_calls": {
	        "default": "0",
	        "doc": "Sign every call to and from this peer with a forwarding assertion, as calls across a domain boundary are. A peer pinned by key_fingerprint is outside our domain and always signed; one trusted through domain_ca is authenticated by its link alone unless this is set (docs/trust-model.md).",
	        "kind": "bool",
	        "label": "Sign calls",
	        "list": false
	      }
	    },
	    "order": [
	      "enabled",
	      "router_id",
	      "address",
	      "port",
	      "data_port",
	      "key_fingerprint",
	      "reflector_client",
	      "sign_calls",
	      "max_routes",
	      "max_trust",
	      "max_proof",
	      "export_tenant",
	      "discovered",
	      "record_version"
	    ]
	  },
	  "relay": {
	    "doc": "NAT relay.",
	    "many": false,
	    "name": "relay",
	    "options": {
	      "client_key_fingerprint": {
	        "default": [],
	        "doc": "Server mode: keys of client routers outside our domain; routers whose certificate our domain_ca issued need none.",
	        "kind": "fingerprint",
	        "label": "Client keys outside the domain",
	        "list": true
	      },
	      "data_port": {
	        "default": "7447",
	        "doc": "Client mode: the relays' data-plane port (their gateway.peer_listen), on the host of each server entry.",
	        "kind": "uint",
	        "label": "Relays' data-plane port",
	        "list": false,
	        "max": "65535",
	        "min": "1"
	      },
	      "max_bytes_in_flight": {
	        "default": "2097152",
	        "doc": "Server mode: answer bytes one client may have in flight toward the relay, unread (its tunnel's HTTP/2 connection window).",
	        "kind": "uint",
	        "label": "Answer bytes in flight per client",
	        "list": false,
	        "max": "67108864",
	        "min": "65536"
	      },
	      "max_clients": {
	        "default": "64",
	        "doc": "Server mode: most client routers at once; more are refused at their session's handshake.",
	        "kind": "uint",
	        "label": "Most client routers",
	        "list": false,
	        "max": "512",
	        "min": "1"
	      },
	      "max_streams_per_client": {
	        "default": "256",
	        "doc": "Server mode: most calls in flight toward one client; more are refused (503 relay_client_busy) before anything is sent.",
	        "kind": "uint",
	        "label": "Most calls in flight per client",
	        "list": false,
	        "max": "256",
	        "min": "1"
	      },
	      "mode": {
	        "default": "off",
	        "doc": "NAT relay role: 'client' (reach the mesh through a relay) or 'server' (be one). A relay sees the payloads it carries.",
	        "kind": "enum",
	        "label": "Mode",
	        "list": false,
	        "values": [
	          "off",
	          "client",
	          "server"
	        ]
	      },
	      "ping_interval_ms": {
	        "default": "5000",
	        "doc": "HTTP/2 PING interval on a tunnel, both ends.",
	        "kind": "uint",
	        "label": "Tunnel PING interval (ms)",
	        "list": false,
	        "max": "60000",
	        "min": "100"
	      },
	      "ping_timeout_ms": {
	        "default": "5000",
	        "doc": "A tunnel whose PING is not answered within this ends (its calls fail with a typed outcome).",
	        "kind": "uint",
	        "label": "Tunnel PING timeout (ms)",
	        "list": false,
	        "max": "60000",
	        "min": "100"
	      },
	      "prefer_hold_s": {
	        "default": "30",
	        "doc": "Client mode: how long a more preferred relay must stay up before the client moves back to it (no flapping).",
	        "kind": "uint",
	        "label": "Hold before a preferred relay (s)",
	        "list": false,
	        "max": "3600",
	        "min": "0"
	      },
	      "reconnect_max_ms": {
	        "default": "30000",
	        "doc": "Largest reconnect backoff (ms); >= reconnect_min_ms.",
	        "kind": "uint",
	        "label": "Longest reconnect delay (ms)",
	        "list": false,
	        "max": "3600000",
	        "min": "100"
	      },
	      "reconnect_min_ms": {
	        "default": "1000",
	        "doc": "First reconnect backoff (ms).",
	        "kind": "uint",
	        "label": "Shortest reconnect delay (ms)",
	        "list": false,
	        "max": "600000",
	        "min": "100"
	      },
	      "server": {
	        "default": [],
	        "doc": "Client mode: relays in preference order, each the 'host:port' of its ARPX listener (normally port 7444). The first that answers is used; a later one only while the earlier ones fail.",
	        "kind": "hostport",
	        "label": "Relay servers",
	        "list": true
	      },
	      "server_key_fingerprint": {
	        "default": [],
	        "doc": "Client mode: keys of relays outside our domain (what `agentctl pki show` prints on the relay); relays whose certificate our domain_ca issued need none.",
	        "kind": "fingerprint",
	        "label": "Relay keys outside the domain",
	        "list": true
	      }
	    },
	    "order": [
	      "mode",
	      "server",
	      "data_port",
	      "server_key_fingerprint",
	      "client_key_fingerprint",
	      "max_clients",
	      "max_streams_per_client",
	      "max_bytes_in_flight",
	      "reconnect_min_ms",
	      "reconnect_max_ms",
	      "prefer_hold_s",
	      "ping_interval_ms",
	      "ping_timeout_ms"
	    ]
	  },
	  "route": {
	    "doc": "A static route (never expires).",
	    "many": true,
	    "name": "",
	    "options": {
	      "allow_loopback": {
	        "default": "0",
	        "doc": "Let this route's endpoint be loopback or one of the router's own addresses (an operator's choice for handlers on the router). The suite's own listener ports stay refused.",
	        "kind": "bool",
	        "label": "Loopback endpoint",
	        "list": false
	      },
	      "allowed_sources": {
	        "default": [],
	        "doc": "Source agent patterns that may call it (none: any).",
	        "kind": "pattern",
	        "label": "Allowed callers",
	        "list": true
	      },
	      "allowed_tenants": {
	        "default": [],
	        "doc": "Other tenants that may call it (none: only its own).",
	        "kind": "name",
	        "label": "Allowed tenants",
	        "list": true
	      },
	      "capability": {
	        "doc": "Capability name, e.g. 'office.print'.",
	        "kind": "name",
	        "label": "Capability",
	        "list": false,
	        "required": true
	      },
	      "cost": {
	        "default": "0",
	        "doc": "Cost in millionths of a unit.",
	        "kind": "uint",
	        "label": "Cost (millionths)",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "description": {
	        "default": "",
	        "doc": "Contract description.",
	        "empty": "none",
	        "kind": "text",
	        "label": "Description",
	        "list": false
	      },
	      "effect": {
	        "default": "",
	        "doc": "Contract effect class.",
	        "empty": "no contract",
	        "kind": "enum",
	        "label": "Effect",
	        "list": false,
	        "values": [
	          "read",
	          "write",
	          "external"
	        ]
	      },
	      "enabled": {
	        "default": "1",
	        "doc": "Install this route.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "endpoint": {
	        "doc": "Handler URL 'http://host[:port]/path' (port 80 when absent; https is not supported).",
	        "kind": "url",
	        "label": "Endpoint",
	        "list": false,
	        "required": true
	      },
	      "id": {
	        "doc": "Stable route_id.",
	        "kind": "routeid",
	        "label": "Route ID",
	        "list": false,
	        "section_name": true
	      },
	      "idempotent": {
	        "default": "0",
	        "doc": "Contract: safe to retry after possible delivery.",
	        "kind": "bool",
	        "label": "Idempotent",
	        "list": false
	      },
	      "input_schema": {
	        "default": "",
	        "doc": "Contract input JSON Schema.",
	        "empty": "none",
	        "kind": "jsonobject",
	        "label": "Input schema",
	        "list": false
	      },
	      "latency_ms": {
	        "default": "0",
	        "doc": "Advertised latency (ms).",
	        "kind": "uint",
	        "label": "Latency (ms)",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "load": {
	        "default": "0",
	        "doc": "Load (permille).",
	        "kind": "uint",
	        "label": "Load (permille)",
	        "list": false,
	        "max": "1000",
	        "min": "0"
	      },
	      "origin": {
	        "doc": "Agent URI 'agent://tenant/name'.",
	        "kind": "agenturi",
	        "label": "Origin",
	        "list": false,
	        "required": true
	      },
	      "region": {
	        "default": "",
	        "doc": "Region label.",
	        "empty": "none",
	        "kind": "name",
	        "label": "Region",
	        "list": false
	      },
	      "tenant": {
	        "default": "",
	        "doc": "Owning tenant; must match origin.",
	        "empty": "the tenant of origin",
	        "kind": "name",
	        "label": "Tenant",
	        "list": false
	      },
	      "trust": {
	        "default": "50",
	        "doc": "Trust 0-100.",
	        "kind": "uint",
	        "label": "Trust",
	        "list": false,
	        "max": "100",
	        "min": "0"
	      },
	      "version": {
	        "doc": "Interface version (>= 1).",
	        "kind": "uint",
	        "label": "Version",
	        "list": false,
	        "max": "4294967295",
	        "min": "1",
	        "required": true
	      }
	    },
	    "order": [
	      "id",
	      "enabled",
	      "capability",
	      "version",
	      "origin",
	      "endpoint",
	      "allow_loopback",
	      "tenant",
	      "region",
	      "latency_ms",
	      "cost",
	      "load",
	      "trust",
	      "allowed_tenants",
	      "allowed_sources",
	      "effect",
	      "idempotent",
	      "description",
	      "input_schema"
	    ]
	  },
	  "rule": {
	    "doc": "A policy rule: match, verdict, constraints, score weights. All enabled rules together must encode to at most 128 KiB (agentd ships the policy to agent-gw in one IPC frame), about 900 rules with 100-byte patterns; agentd refuses a larger policy.",
	    "many": true,
	    "name": "",
	    "options": {
	      "action": {
	        "default": "allow",
	        "doc": "Verdict; a selected deny is final.",
	        "kind": "enum",
	        "label": "Action",
	        "list": false,
	        "values": [
	          "allow",
	          "deny"
	        ]
	      },
	      "capability": {
	        "default": "*",
	        "doc": "Capability pattern ('prefix.*' or exact).",
	        "kind": "pattern",
	        "label": "Capability",
	        "list": false
	      },
	      "d_cost": {
	        "default": "100",
	        "doc": "Cost divisor of the score.",
	        "kind": "uint",
	        "label": "Cost divisor",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "1"
	      },
	      "denied_peer": {
	        "default": "",
	        "doc": "Never routes via this peer.",
	        "empty": "none",
	        "kind": "dnslabel",
	        "label": "Denied peer",
	        "list": false
	      },
	      "enabled": {
	        "default": "1",
	        "doc": "Apply this rule.",
	        "kind": "bool",
	        "label": "Enabled",
	        "list": false
	      },
	      "endpoint_prefix": {
	        "default": "",
	        "doc": "Only endpoints starting with this.",
	        "empty": "any endpoint",
	        "kind": "text",
	        "label": "Endpoint prefix",
	        "list": false
	      },
	      "id": {
	        "doc": "Rule id; ties of priority go to the smaller id.",
	        "kind": "routeid",
	        "label": "Rule ID",
	        "list": false,
	        "section_name": true
	      },
	      "max_cost": {
	        "default": "18446744073709551615",
	        "doc": "Only routes with cost (millionths) <= this.",
	        "kind": "uint",
	        "label": "Highest cost (millionths)",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "max_hops": {
	        "default": "18446744073709551615",
	        "doc": "Only routes at most this many routers away.",
	        "kind": "uint",
	        "label": "Most hops",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "max_latency_ms": {
	        "default": "18446744073709551615",
	        "doc": "Only routes with latency_ms <= this.",
	        "kind": "uint",
	        "label": "Highest latency (ms)",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "max_load": {
	        "default": "18446744073709551615",
	        "doc": "Only routes with load (permille) <= this.",
	        "kind": "uint",
	        "label": "Highest load (permille)",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "min_proof": {
	        "default": "none",
	        "doc": "Only routes whose origin was proven at least this way (none < bootstrap < static < jwt).",
	        "kind": "enum",
	        "label": "Weakest origin proof",
	        "list": false,
	        "values": [
	          "none",
	          "bootstrap",
	          "static",
	          "jwt"
	        ]
	      },
	      "min_trust": {
	        "default": "0",
	        "doc": "Only routes with trust >= this.",
	        "kind": "uint",
	        "label": "Lowest trust",
	        "list": false,
	        "max": "100",
	        "min": "0"
	      },
	      "nonpreferred_penalty": {
	        "default": "50000",
	        "doc": "Score added to routes not via preferred_peer (when set).",
	        "kind": "uint",
	        "label": "Penalty off the preferred peer",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "preferred_peer": {
	        "default": "",
	        "doc": "Peer whose routes avoid the penalty.",
	        "empty": "none",
	        "kind": "dnslabel",
	        "label": "Preferred peer",
	        "list": false
	      },
	      "priority": {
	        "default": "0",
	        "doc": "Highest matching priority wins.",
	        "kind": "uint",
	        "label": "Priority",
	        "list": false,
	        "max": "65535",
	        "min": "0"
	      },
	      "region": {
	        "default": "",
	        "doc": "Only routes in this region.",
	        "empty": "any region",
	        "kind": "name",
	        "label": "Region",
	        "list": false
	      },
	      "required_peer": {
	        "default": "",
	        "doc": "Only routes via this peer.",
	        "empty": "any peer",
	        "kind": "dnslabel",
	        "label": "Required peer",
	        "list": false
	      },
	      "source": {
	        "default": "*",
	        "doc": "Source agent URI pattern.",
	        "kind": "pattern",
	        "label": "Source",
	        "list": false
	      },
	      "sources": {
	        "default": [
	          "local",
	          "static",
	          "peer",
	          "relay"
	        ],
	        "doc": "Permitted route sources.",
	        "kind": "enum",
	        "label": "Route sources",
	        "list": true,
	        "values": [
	          "local",
	          "static",
	          "peer",
	          "relay"
	        ]
	      },
	      "tenant": {
	        "default": "*",
	        "doc": "Caller tenant pattern.",
	        "kind": "pattern",
	        "label": "Tenant",
	        "list": false
	      },
	      "w_hops": {
	        "default": "10000",
	        "doc": "Score weight of hop count.",
	        "kind": "uint",
	        "label": "Hop weight",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "w_latency": {
	        "default": "1000",
	        "doc": "Score weight of latency (ms).",
	        "kind": "uint",
	        "label": "Latency weight",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "w_load": {
	        "default": "100",
	        "doc": "Score weight of load (permille).",
	        "kind": "uint",
	        "label": "Load weight",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "w_trust": {
	        "default": "5000",
	        "doc": "Score weight of distrust (100 - trust).",
	        "kind": "uint",
	        "label": "Distrust weight",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      }
	    },
	    "order": [
	      "id",
	      "enabled",
	      "priority",
	      "action",
	      "tenant",
	      "source",
	      "capability",
	      "region",
	      "max_latency_ms",
	      "max_cost",
	      "max_load",
	      "min_trust",
	      "min_proof",
	      "max_hops",
	      "sources",
	      "required_peer",
	      "denied_peer",
	      "endpoint_prefix",
	      "w_latency",
	      "d_cost",
	      "w_load",
	      "w_trust",
	      "w_hops",
	      "preferred_peer",
	      "nonpreferred_penalty"
	    ]
	  },
	  "tenant": {
	    "doc": "A tenant: JWT keys and rate limits.",
	    "many": true,
	    "name": "",
	    "options": {
	      "jwt_key": {
	        "default": [],
	        "doc": "Public keys that sign this tenant's tokens.",
	        "kind": "jwtkey",
	        "label": "JWT public keys",
	        "list": true
	      },
	      "max_routes": {
	        "default": "18446744073709551615",
	        "doc": "Most local routes the tenant's agents may hold together (default: only agentd.max_routes bounds them).",
	        "kind": "uint",
	        "label": "Most routes",
	        "list": false,
	        "max": "18446744073709551615",
	        "min": "0"
	      },
	      "max_trust": {
	        "default": "50",
	        "doc": "Highest trust a LAN registration of this tenant is granted, whatever it claims (tenants without a section get the default; docs/trust-model.md).",
	        "kind": "uint",
	        "label": "Highest trust",
	        "list": false,
	        "max": "100",
	        "min": "0"
	      },
	      "name": {
	        "doc": "Tenant name (JWT claim 'tenant').",
	        "kind": "name",
	        "label": "Name",
	        "list": false,
	        "section_name": true
	      },
	      "rate_burst": {
	        "default": "200",
	        "doc": "Token bucket size of the tenant.",
	        "kind": "uint",
	        "label": "Request burst",
	        "list": false,
	        "max": "1000000",
	        "min": "0"
	      },
	      "rate_per_second": {
	        "default": "100",
	        "doc": "Request rate limit of the tenant (0 blocks it).",
	        "kind": "uint",
	        "label": "Requests per second",
	        "list": false,
	        "max": "1000000",
	        "min": "0"
	      }
	    },
	    "order": [
	      "name",
	      "jwt_key",
	      "rate_per_second",
	      "rate_burst",
	      "max_routes",
	      "max_trust"
	    ]
	  }
	}
});
