//! What the gateway needs from `/etc/config/agentd`, with the defaults of
//! DESIGN §13. Filled from `uci_schema` by the binary; tests build it
//! directly.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    pub auth: AuthMode,
    pub ipc_socket: PathBuf,
    pub max_request_bytes: usize,
    pub rate: Rate,
    /// Per-tenant overrides from `tenant` sections.
    pub tenant_rates: HashMap<Box<str>, Rate>,
    pub max_inflight: usize,
    pub task_capacity: usize,
    pub task_ttl_s: u64,
    pub stream_history_events: usize,
    pub stream_history_bytes: usize,
    pub hop_limit: u8,
    /// Budget of a call whose caller named none.
    pub default_timeout_ms: u64,
    /// Most concurrent client connections; beyond it new ones are closed.
    pub max_connections: usize,
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
    pub issuer_key: Option<ed25519_dalek::SigningKey>,
    /// `jwt_key` values of the `tenant` sections, parsed.
    pub tenant_keys: Vec<(Box<str>, ed25519_dalek::VerifyingKey)>,
    /// Tolerated clock difference for token times, seconds.
    pub jwt_clock_skew_s: u64,
    /// Longest accepted token lifetime (`exp - iat`), seconds.
    pub jwt_max_lifetime_s: u64,
    /// Trusted-LAN bootstrap on `/agent/v1/bootstrap`.
    pub bootstrap: bool,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            router_id: "router".into(),
            sdk_listen: SocketAddr::from(([0, 0, 0, 0], 7446)),
            auth: AuthMode::Jwt,
            ipc_socket: PathBuf::from("/var/run/agentd/agentd.sock"),
            max_request_bytes: 65_536,
            rate: Rate {
                per_second: 200,
                burst: 400,
            },
            tenant_rates: HashMap::new(),
            max_inflight: 256,
            task_capacity: 512,
            task_ttl_s: 300,
            stream_history_events: 64,
            stream_history_bytes: 1_048_576,
            hop_limit: 8,
            default_timeout_ms: 30_000,
            max_connections: 1024,
            max_routes: 10_000,
            lease_min_s: 5,
            lease_max_s: 3600,
            domain: "".into(),
            issuer_key: None,
            tenant_keys: Vec::new(),
            jwt_clock_skew_s: 60,
            jwt_max_lifetime_s: 86_400,
            bootstrap: true,
        }
    }
}
