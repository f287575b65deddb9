//! What the ARPX driver runs on, taken from the typed configuration
//! (`uci-schema` holds every default and range; nothing here invents
//! one). Compared across a reload to decide what to restart: the whole
//! mesh instance (identity, timers, limits), the listener, or single
//! peers.

use std::path::PathBuf;

/// The `arpx` section, the identity options of `agentd` and the enabled
/// `peer` sections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshSettings {
    /// `agentd.router_id` as configured; `None` when empty (the host
    /// name is good enough for logs, not for a mesh identity: sessions
    /// stay off).
    pub router_id: Option<String>,
    /// `agentd.domain`; empty: none.
    pub domain: String,
    pub identity: PathBuf,
    pub domain_ca: Option<PathBuf>,
    pub router_cert: Option<PathBuf>,
    /// `arpx.listen`; `None`: no inbound sessions.
    pub listen: Option<String>,
    pub heartbeat_ms: u32,
    pub miss_limit: u32,
    pub graceful_ms: u64,
    pub reflector: bool,
    pub max_frame: usize,
    pub max_path: usize,
    /// `arpx.max_routes_per_origin`.
    pub max_routes_per_origin: usize,
    /// Enabled peers, in file order.
    pub peers: Vec<PeerSettings>,
    /// The `relay` section.
    pub relay: RelaySettings,
}

/// The `relay` section (DESIGN §7 "Relay (NAT)").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelaySettings {
    pub mode: uci_schema::RelayMode,
    /// Client mode: each relay's ARPX `(host, port)`, in preference order.
    pub servers: Vec<(String, u16)>,
    /// Client mode: the relays' data-plane port.
    pub data_port: u16,
    /// Client mode: keys of relays outside our domain.
    pub server_pins: Vec<String>,
    /// Server mode: keys of client routers outside our domain.
    pub client_pins: Vec<String>,
    pub max_clients: usize,
    pub reconnect_min_ms: u64,
    pub reconnect_max_ms: u64,
    pub prefer_hold_ms: u64,
}

impl RelaySettings {
    pub fn is_server(&self) -> bool {
        self.mode == uci_schema::RelayMode::Server
    }

    pub fn is_client(&self) -> bool {
        self.mode == uci_schema::RelayMode::Client
    }
}

/// `host:port` (the schema checked it) as host and port; an IPv6
/// literal loses its brackets.
pub fn split_host_port(s: &str) -> Option<(String, u16)> {
    if let Ok(a) = s.parse::<std::net::SocketAddr>() {
        return Some((a.ip().to_string(), a.port()));
    }
    let (host, port) = s.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// Where a peer stands in the relay roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RelayRole {
    /// An ordinary peer (a `peer` section, or admitted by discovery).
    #[default]
    None,
    /// A client router behind NAT whose session came to our listener
    /// (we are its relay): never dialled, its routes are passed on to
    /// every peer with source `relay`, and calls reach it only through
    /// the tunnel it opens to our gateway.
    Client,
    /// The relay we use (client mode): our routes go out through it, and
    /// our gateway keeps a tunnel to it.
    Server,
    /// A more preferred relay that is up but still proving itself: no
    /// routes go out through it yet.
    Standby,
}

/// One enabled `peer` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSettings {
    pub router_id: String,
    pub address: String,
    pub port: u16,
    pub data_port: u16,
    /// `sha256:<hex>`; `None`: trust the domain CA.
    pub key_fingerprint: Option<String>,
    pub reflector_client: bool,
    /// Calls with this peer carry forwarding assertions although the
    /// domain CA vouches for it (`peer.sign_calls`).
    pub sign_calls: bool,
    pub max_routes: usize,
    pub export_tenants: Vec<String>,
    /// The highest trust granted to routes learned from this peer.
    pub max_trust: u64,
    /// The strongest origin proof a route learned from this peer may
    /// claim.
    pub max_proof: arpx::message::OriginProof,
    /// Set by the driver for the routers the relay roles bring (never
    /// from a `peer` section).
    pub relay: RelayRole,
}

impl PeerSettings {
    /// What a live session and its paths depend on: a change here
    /// reconnects the peer (the paths are learned again, with the new
    /// data-plane endpoint); anything else (export rules, limits) is
    /// applied in place.
    pub fn transport_key(&self) -> (&str, u16, u16, Option<&str>) {
        (
            &self.address,
            self.port,
            self.data_port,
            self.key_fingerprint.as_deref(),
        )
    }
}

/// Most enabled `peer` sections a router keeps sessions with. agent-gw
/// gets the whole list of peers that are down in the last frame of its
/// FIB snapshot, beside the policy ([`crate::policy::MAX_POLICY_BYTES`])
/// and a chunk of links; 512 router ids (at most 63 bytes each) plus the
/// 256 routers discovery may admit in memory keep that frame within the
/// IPC bound, and are far more sessions than a router can keep warm.
pub const MAX_PEERS: usize = 512;

impl MeshSettings {
    /// From a (valid part of a) configuration.
    pub fn of_config(c: &uci_schema::Config) -> MeshSettings {
        let a = &c.agentd;
        let x = &c.arpx;
        let path = |s: &str| (!s.is_empty()).then(|| PathBuf::from(s));
        MeshSettings {
            router_id: (!a.router_id.is_empty()).then(|| a.router_id.clone()),
            domain: a.domain.clone(),
            identity: PathBuf::from(&a.identity),
            domain_ca: path(&a.domain_ca),
            router_cert: path(&a.router_cert),
            listen: (!x.listen.is_empty()).then(|| x.listen.clone()),
            heartbeat_ms: u32::try_from(x.heartbeat_ms).unwrap_or(u32::MAX),
            miss_limit: u32::try_from(x.miss_limit).unwrap_or(u32::MAX),
            graceful_ms: x.graceful_s.saturating_mul(1000),
            reflector: x.reflector,
            max_frame: usize::try_from(x.max_frame).unwrap_or(usize::MAX),
            max_path: usize::try_from(x.max_path).unwrap_or(usize::MAX),
            max_routes_per_origin: usize::try_from(x.max_routes_per_origin).unwrap_or(usize::MAX),
            peers: c
                .peers
                .iter()
                .filter(|p| p.enabled)
                .map(|p| PeerSettings {
                    router_id: p.router_id.clone(),
                    address: p.address.clone(),
                    port: p.port,
                    data_port: p.data_port,
                    key_fingerprint: (!p.key_fingerprint.is_empty())
                        .then(|| p.key_fingerprint.clone()),
                    reflector_client: p.reflector_client,
                    sign_calls: p.sign_calls,
                    max_routes: usize::try_from(p.max_routes).unwrap_or(usize::MAX),
                    export_tenants: p.export_tenant.clone(),
                    max_trust: p.max_trust,
                    max_proof: match p.max_proof {
                        uci_schema::ProofLevel::None => arpx::message::OriginProof::None,
                        uci_schema::ProofLevel::Bootstrap => arpx::message::OriginProof::Bootstrap,
                        uci_schema::ProofLevel::Static => arpx::message::OriginProof::Static,
                        uci_schema::ProofLevel::Jwt => arpx::message::OriginProof::Jwt,
                    },
                    relay: RelayRole::None,
                })
                .collect(),
            relay: RelaySettings::of_config(&c.relay),
        }
    }

    /// Everything but the peer list and the listener: a change here
    /// restarts the whole instance (every session closes and reopens).
    pub fn instance_key(&self) -> impl PartialEq + '_ {
        (
            &self.router_id,
            &self.domain,
            &self.identity,
            &self.domain_ca,
            &self.router_cert,
            (self.heartbeat_ms, self.miss_limit, self.graceful_ms),
            (self.reflector, self.max_frame, self.max_path),
            self.max_routes_per_origin,
            // A relay role or server list change restarts the sessions:
            // who may connect and whom to dial both change.
            &self.relay,
        )
    }

    /// Whether `arpx.listen` is worth a socket: some router may connect
    /// (a peer, or a client router of our relay).
    pub fn wants_listener(&self) -> bool {
        !self.peers.is_empty() || self.relay.is_server()
    }

    pub fn peer(&self, router_id: &str) -> Option<&PeerSettings> {
        self.peers.iter().find(|p| p.router_id == router_id)
    }
}

impl RelaySettings {
    fn of_config(r: &uci_schema::Relay) -> RelaySettings {
        RelaySettings {
            mode: r.mode,
            servers: r.server.iter().filter_map(|s| split_host_port(s)).collect(),
            data_port: u16::try_from(r.data_port).unwrap_or(u16::MAX),
            server_pins: r.server_key_fingerprint.clone(),
            client_pins: r.client_key_fingerprint.clone(),
            max_clients: usize::try_from(r.max_clients).unwrap_or(usize::MAX),
            reconnect_min_ms: r.reconnect_min_ms,
            reconnect_max_ms: r.reconnect_max_ms.max(r.reconnect_min_ms),
            prefer_hold_ms: r.prefer_hold_s.saturating_mul(1000),
        }
    }
}

impl Default for MeshSettings {
    /// The schema defaults (no peers, no router_id).
    fn default() -> Self {
        MeshSettings::of_config(uci_schema::Config::defaults())
    }
}

/// What the reflection options of `mesh` cannot do as written: the
/// combinations operators confuse (`arpx.reflector` makes this router
/// pass what it learns from one peer on to *every* other peer;
/// `reflector_client` on a peer section makes it pass them on to *that*
/// peer, and says nothing about the peer itself). Warnings, not errors:
/// `agentd --check-config` prints them, agentd logs them at start and
/// reload. `more_peers_may_come`: discovery admits peers by itself, so a
/// router with one peer now may have more.
pub fn reflection_advice(mesh: &MeshSettings, more_peers_may_come: bool) -> Vec<String> {
    let mut out = Vec::new();
    let clients: Vec<&str> = mesh
        .peers
        .iter()
        .filter(|p| p.reflector_client)
        .map(|p| p.router_id.as_str())
        .collect();
    let reflecting = mesh.reflector || !clients.is_empty();
    if reflecting && mesh.peers.len() < 2 && !more_peers_may_come {
        let what = if mesh.reflector {
            "arpx.reflector '1'".to_string()
        } else {
            format!("reflector_client '1' on peer {}", clients.join(", "))
        };
        out.push(format!(
            "{what} reflects nothing: reflection passes the routes learned from one peer on to another, and this router has {} peer(s). To be a reflector's client, set nothing here: the reflector sets reflector_client on its section for you (docs/mesh.md, \"Reflection\")",
            mesh.peers.len()
        ));
    }
    if mesh.reflector && !clients.is_empty() {
        out.push(format!(
            "reflector_client '1' on peer {} adds nothing: arpx.reflector '1' already reflects to every peer",
            clients.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_schema_and_skip_disabled_peers() {
        let text = "
config agentd 'main'
\toption router_id 'router-a'
\toption identity '/tmp/x/identity.key'
config arpx 'arpx'
\toption listen '127.0.0.1:17444'
\toption graceful_s '4'
config peer 'b'
\toption router_id 'router-b'
\toption address '127.0.0.1'
\toption port '17445'
\toption key_fingerprint 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'
config peer 'c'
\toption enabled '0'
\toption router_id 'router-c'
\toption address '127.0.0.1'
";
        let c = uci_schema::Config::from_str_partial(text, "t").config;
        let m = MeshSettings::of_config(&c);
        assert_eq!(m.router_id.as_deref(), Some("router-a"));
        assert_eq!(m.listen.as_deref(), Some("127.0.0.1:17444"));
        assert_eq!(m.graceful_ms, 4000);
        assert_eq!(m.heartbeat_ms, 1000, "schema default");
        assert_eq!(m.max_frame, 65536, "schema default");
        assert_eq!(m.peers.len(), 1);
        let b = &m.peers[0];
        assert_eq!((b.port, b.data_port, b.max_routes), (17445, 7447, 10000));
        assert_eq!(
            b.key_fingerprint.as_deref(),
            Some("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
        );
        assert_eq!(m.domain_ca, None);
        let d = MeshSettings::default();
        assert_eq!(d.router_id, None);
        assert!(d.peers.is_empty());
    }

    fn mesh_of(text: &str) -> MeshSettings {
        let c =
            uci_schema::Config::from_package(&uci_schema::uci::Package::parse(text).unwrap(), "t")
                .unwrap();
        MeshSettings::of_config(&c)
    }

    const PEER_B: &str =
        "config peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n";
    const PEER_C: &str =
        "config peer 'c'\n\toption router_id 'router-c'\n\toption address '192.0.2.3'\n";

    #[test]
    fn reflection_that_cannot_reflect_is_named() {
        let main = "config agentd 'main'\n\toption router_id 'router-a'\n";
        // A spoke that marks its one peer, the hub, as its client: the
        // classic confusion.
        let spoke = mesh_of(&format!("{main}{PEER_B}\toption reflector_client '1'\n"));
        let advice = reflection_advice(&spoke, false);
        assert_eq!(advice.len(), 1, "{advice:?}");
        assert!(
            advice[0].contains("reflector_client '1' on peer router-b reflects nothing"),
            "{advice:?}"
        );
        assert!(advice[0].contains("1 peer(s)"), "{advice:?}");
        // With discovery admitting peers by itself, more may come.
        assert!(reflection_advice(&spoke, true).is_empty());
        // A reflector with one peer.
        let lone = mesh_of(&format!(
            "{main}config arpx 'arpx'\n\toption reflector '1'\n{PEER_B}"
        ));
        assert!(
            reflection_advice(&lone, false)[0].starts_with("arpx.reflector '1' reflects nothing")
        );
        // Both switches: the per-peer one is redundant.
        let both = mesh_of(&format!(
            "{main}config arpx 'arpx'\n\toption reflector '1'\n{PEER_B}\toption reflector_client '1'\n{PEER_C}"
        ));
        assert_eq!(
            reflection_advice(&both, false),
            ["reflector_client '1' on peer router-b adds nothing: arpx.reflector '1' already reflects to every peer"]
        );
        // What works says nothing.
        let hub = mesh_of(&format!(
            "{main}{PEER_B}\toption reflector_client '1'\n{PEER_C}\toption reflector_client '1'\n"
        ));
        assert!(reflection_advice(&hub, false).is_empty());
        let plain = mesh_of(&format!("{main}{PEER_B}{PEER_C}"));
        assert!(reflection_advice(&plain, false).is_empty());
    }
}
