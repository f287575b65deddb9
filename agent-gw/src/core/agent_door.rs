//! How callers reach the per-agent IPv6 addresses (DESIGN §7 "IPv6
//! /128"), as registration replies name it: the port and the TLS
//! identity they verify — or why the addresses agentd binds are not
//! served, so a reply never offers an endpoint nothing answers on.

/// The endpoint every bound address shares, but for its address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub port: u16,
    /// The name the certificate carries, for SNI and verification (the
    /// caller connects to the literal address).
    pub tls_server_name: Box<str>,
    /// Which trust bundle verifies it: `system` for the operator's
    /// certificate (ACME and the like), else one that names this
    /// router's domain CA or — self-signed — its key.
    pub ca_bundle_id: Box<str>,
}

/// Whether the addresses are served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Door {
    Open(Endpoint),
    /// Why not, for the registration reply.
    Closed(Box<str>),
}

impl Door {
    /// Before the listeners have started.
    pub fn starting() -> Door {
        Door::Closed("agent-gw has not started its per-agent listeners yet".into())
    }
}
