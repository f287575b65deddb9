//! The router's TLS side of ARPX, built with `router-pki`: the identity
//! (key loaded or created 0600, the router certificate or a self-signed
//! one), the trust rule over the configured peers (pin, else the domain
//! CA and the router_id's dNSName), one server config for the listener
//! and one client config per peer. ALPN `arpx/1`, TLS 1.3 only, mutual
//! authentication, no fallback.

use std::collections::HashMap;
use std::sync::Arc;

use router_pki::tls::{
    self as pki_tls, DomainCa, PeerTrust, Trust, TrustError, Unlisted, ALPN_ARPX,
};
use router_pki::{Fingerprint, RouterIdentity};
use tokio_rustls::rustls::pki_types::{ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, ServerConfig};

use super::settings::{MeshSettings, PeerSettings, RelaySettings};

/// Everything a handshake needs; rebuilt when the peer set changes and
/// shared with the listener and dial tasks.
#[derive(Debug)]
pub struct TlsContext {
    /// The mesh instance this context belongs to: a handshake finished
    /// under an earlier instance (identity since replaced) is dropped.
    pub mesh: u64,
    pub trust: Arc<Trust>,
    pub server: Arc<ServerConfig>,
    /// Per peer: its client config, or why it cannot be dialled (a
    /// malformed pin).
    clients: HashMap<String, Result<Arc<ClientConfig>, String>>,
    /// Client mode: the config to dial relays with, known by address
    /// only (the [`Unlisted`] rule judges them).
    relay: Option<Arc<ClientConfig>>,
}

/// The router's identity, read with the configuration that names its
/// files (off the daemon's loop) and kept by the mesh instance.
#[derive(Debug, Clone)]
pub struct Identity {
    pub identity: RouterIdentity,
    pub ca: Option<DomainCa>,
}

impl Identity {
    /// The identity files `s` names, for its router_id; an error says
    /// why sessions cannot run on them. Without a router_id nothing is
    /// read (or created).
    pub fn read(s: &MeshSettings) -> Result<Identity, String> {
        let router_id = s.router_id.as_deref().ok_or_else(|| {
            "agentd.router_id is not set (a mesh needs a stable router identity)".to_string()
        })?;
        Identity::load(s, router_id)
    }

    /// Loads (or creates, 0600, never overwriting) `agentd.identity`, the
    /// router certificate or a self-signed one, and the domain CA.
    pub fn load(s: &MeshSettings, router_id: &str) -> Result<Identity, String> {
        let identity = RouterIdentity::load(&s.identity, s.router_cert.as_deref(), router_id)
            .map_err(|e| e.to_string())?;
        let domain = (!s.domain.is_empty()).then_some(s.domain.as_str());
        let ca = match &s.domain_ca {
            None => None,
            Some(path) => Some(DomainCa::load(path, domain).map_err(|e| e.to_string())?),
        };
        Ok(Identity { identity, ca })
    }

    pub fn fingerprint(&self) -> String {
        self.identity.fingerprint().to_string()
    }

    /// Our certificate (DER) to attach to our routes, when our domain CA
    /// issued it: routers of the domain that never meet us authenticate
    /// our origin key from it. Empty with a self-signed identity.
    pub fn attached_cert(&self) -> Vec<u8> {
        if self.ca.is_none() || self.identity.is_self_signed() {
            return Vec::new();
        }
        self.identity
            .certificate_chain()
            .first()
            .map(|c| c.to_vec())
            .unwrap_or_default()
    }

    /// The domain CA as the mesh instance's origin-key authority.
    pub fn origin_ca(&self) -> Option<arpx::instance::OriginCaRef> {
        let ca = self.ca.clone()?;
        Some(arpx::instance::OriginCaRef(Arc::new(OriginCerts(ca))))
    }
}

/// Checks certificates attached to routes against the domain CA, at the
/// wall-clock time of the check.
struct OriginCerts(DomainCa);

impl arpx::instance::OriginCa for OriginCerts {
    fn origin_key(&self, router_id: &str, cert: &[u8]) -> Option<[u8; 32]> {
        self.0
            .origin_key(cert, router_id, std::time::SystemTime::now())
            .ok()
    }
}

impl Identity {
    /// The handshake context for `peers`, of mesh number `mesh`. A peer
    /// with a malformed pin is left out of the trust rule (it can neither
    /// dial nor be accepted) and its client entry says why. The relay
    /// role adds the routers no `peer` section names: a relay server
    /// accepts client routers of our domain or with a listed key, and a
    /// relay client dials relays on the same terms.
    pub fn context(
        &self,
        peers: &[PeerSettings],
        relay: &RelaySettings,
        mesh: u64,
    ) -> Result<TlsContext, String> {
        let mut trusted = Vec::new();
        let mut bad = HashMap::new();
        for p in peers {
            match p.key_fingerprint.as_deref().map(str::parse::<Fingerprint>) {
                None => trusted.push(PeerTrust {
                    router_id: p.router_id.clone(),
                    pin: None,
                }),
                Some(Ok(pin)) => trusted.push(PeerTrust {
                    router_id: p.router_id.clone(),
                    pin: Some(pin),
                }),
                Some(Err(e)) => {
                    bad.insert(p.router_id.clone(), format!("peer key_fingerprint: {e}"));
                }
            }
        }
        let pins = if relay.is_server() {
            &relay.client_pins
        } else if relay.is_client() {
            &relay.server_pins
        } else {
            &Vec::new()
        };
        let unlisted = Unlisted {
            domain: self.ca.is_some() && (relay.is_server() || relay.is_client()),
            pins: pins
                .iter()
                .map(|p| {
                    p.parse::<Fingerprint>()
                        .map_err(|e| format!("relay key fingerprint {p}: {e}"))
                })
                .collect::<Result<_, _>>()?,
        };
        let trust = Arc::new(Trust::new(self.ca.clone(), trusted).with_unlisted(unlisted));
        let server = pki_tls::server_config(&self.identity, trust.clone(), &[ALPN_ARPX])
            .map_err(|e| e.to_string())?;
        let mut clients = HashMap::new();
        for p in peers {
            let entry = match bad.remove(&p.router_id) {
                Some(why) => Err(why),
                None => pki_tls::client_config(
                    &self.identity,
                    trust.clone(),
                    &p.router_id,
                    &[ALPN_ARPX],
                )
                .map_err(|e| e.to_string()),
            };
            clients.insert(p.router_id.clone(), entry);
        }
        let relay = if relay.is_client() {
            Some(
                pki_tls::client_config_unlisted(&self.identity, trust.clone(), &[ALPN_ARPX])
                    .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        Ok(TlsContext {
            mesh,
            trust,
            server,
            clients,
            relay,
        })
    }
}

impl TlsContext {
    /// The client config to dial `peer` with.
    pub fn client(&self, peer: &str) -> Result<Arc<ClientConfig>, String> {
        match self.clients.get(peer) {
            Some(Ok(c)) => Ok(c.clone()),
            Some(Err(why)) => Err(why.clone()),
            None => Err(format!("router {peer} is not a configured peer")),
        }
    }

    /// The client config to dial a relay with (client mode).
    pub fn relay_client(&self) -> Result<Arc<ClientConfig>, String> {
        self.relay
            .clone()
            .ok_or_else(|| "not a relay client (relay.mode is not 'client')".to_string())
    }

    /// Which relay a finished handshake to an address is with, after
    /// checking the negotiated ALPN.
    pub fn verified_relay(&self, stream: &super::tasks::Stream) -> Result<Verified, String> {
        let (_, state) = stream.get_ref();
        if state.alpn_protocol() != Some(ALPN_ARPX) {
            return Err("handshake: the relay did not negotiate ALPN arpx/1".into());
        }
        let id = pki_tls::peer_identity_unlisted(state, &self.trust, UnixTime::now())
            .map_err(|e| format!("handshake: {e}"))?;
        Ok(Verified::of(id))
    }

    /// Which configured peer a finished handshake is with, after
    /// checking the negotiated ALPN (`expected`: whom we dialled).
    pub fn verified(
        &self,
        stream: &super::tasks::Stream,
        expected: Option<&str>,
    ) -> Result<Verified, String> {
        let (_, state) = stream.get_ref();
        if state.alpn_protocol() != Some(ALPN_ARPX) {
            return Err("handshake: the peer did not negotiate ALPN arpx/1".into());
        }
        let id = pki_tls::peer_identity(state, &self.trust, expected, UnixTime::now())
            .map_err(|e| format!("handshake: {e}"))?;
        Ok(Verified::of(id))
    }
}

/// Who a finished handshake proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub router_id: String,
    pub key: [u8; 32],
    /// Trusted by a pinned key (a router outside our domain), not by our
    /// domain CA: calls with it carry signed forwarding assertions.
    pub pinned: bool,
}

impl Verified {
    fn of(id: router_pki::tls::PeerIdentity) -> Verified {
        Verified {
            router_id: id.router_id,
            key: id.public_key,
            pinned: id.pinned,
        }
    }
}

/// The SNI for dialling `peer`.
pub fn server_name(peer: &str) -> Result<ServerName<'static>, String> {
    pki_tls::server_name(peer).map_err(|e| format!("handshake: {e}"))
}

/// A failed handshake (or TLS read) in words: the typed trust error when
/// our verifier refused the peer, else what rustls or the socket said.
pub fn handshake_error(e: &std::io::Error) -> String {
    format!("handshake: {}", error_text(e))
}

/// A TLS stream error in words (the trust error inside, if any).
pub fn error_text(e: &std::io::Error) -> String {
    let text = match e.get_ref() {
        Some(inner) => match TrustError::find(inner) {
            Some(t) => return t.to_string(),
            None => inner.to_string(),
        },
        None => e.to_string(),
    };
    if text.starts_with("received fatal alert") {
        // The peer's verifier refused us (our key is not pinned there,
        // our certificate is not from its domain CA, ...).
        format!("refused by the peer ({text})")
    } else {
        text
    }
}
