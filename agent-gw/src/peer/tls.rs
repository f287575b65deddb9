//! The data plane's TLS: this router's identity and a trust rule made of
//! exactly the peers whose ARPX session is established, each pinned to
//! the key that session verified.
//!
//! The gateway has no trust configuration of its own: agentd's ARPX
//! handshake already applied the configured rule (pin or domain CA), and
//! the data plane accepts the same key and nothing else — a router whose
//! session is down, or that presents another key, fails the handshake.
//! The configs are rebuilt whenever the link set changes; a handshake in
//! progress keeps the config it started with.

use std::collections::HashMap;
use std::sync::Arc;

use router_pki::tls::{self as pki_tls, PeerTrust, Trust, ALPN_H2, ALPN_RELAY};
use router_pki::{Fingerprint, RouterIdentity};
use tokio_rustls::rustls::pki_types::{ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, CommonState, ServerConfig};

use crate::peer::link::Link;

/// The configs of one link set.
#[derive(Debug)]
pub struct PeerTls {
    identity: RouterIdentity,
    /// The identity key and id, shared with the batch signer's task.
    key: std::rc::Rc<edkey::SigningKey>,
    id: std::rc::Rc<str>,
    trust: Arc<Trust>,
    server: Arc<ServerConfig>,
    clients: HashMap<Box<str>, Arc<ClientConfig>>,
    /// Per relay we use: the config of our tunnel to it.
    tunnels: HashMap<Box<str>, Arc<ClientConfig>>,
}

/// The verified router at the other end of a data connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    pub router_id: Box<str>,
    pub key: [u8; 32],
    /// The connection is a relay client's tunnel (ALPN
    /// `agentd-relay/1`), not a data connection.
    pub tunnel: bool,
}

/// What the peer listener speaks: data connections, and the tunnels of
/// our relay clients.
const SERVER_ALPN: &[&[u8]] = &[ALPN_H2, ALPN_RELAY];

impl PeerTls {
    /// No links yet: the listener refuses every client.
    pub fn new(identity: RouterIdentity) -> Result<PeerTls, String> {
        let mut t = PeerTls {
            key: std::rc::Rc::new(identity.signing_key().clone()),
            id: identity.router_id().into(),
            trust: Arc::new(Trust::default()),
            server: pki_tls::server_config(&identity, Arc::new(Trust::default()), SERVER_ALPN)
                .map_err(|e| e.to_string())?,
            identity,
            clients: HashMap::new(),
            tunnels: HashMap::new(),
        };
        t.update(&[])?;
        Ok(t)
    }

    pub fn router_id(&self) -> &str {
        self.identity.router_id()
    }

    pub fn signing_key(&self) -> &edkey::SigningKey {
        self.identity.signing_key()
    }

    /// The identity key and router id, for the batch signer.
    pub fn signer(&self) -> (std::rc::Rc<edkey::SigningKey>, std::rc::Rc<str>) {
        (self.key.clone(), self.id.clone())
    }

    /// Rebuilds the trust rule and configs for `links`.
    pub fn update(&mut self, links: &[Link]) -> Result<(), String> {
        let peers = links
            .iter()
            .map(|l| PeerTrust {
                router_id: l.router_id.to_string(),
                pin: Some(Fingerprint::of_raw(&l.key)),
            })
            .collect();
        let trust = Arc::new(Trust::new(None, peers));
        let server = pki_tls::server_config(&self.identity, trust.clone(), SERVER_ALPN)
            .map_err(|e| e.to_string())?;
        let mut clients = HashMap::with_capacity(links.len());
        let mut tunnels = HashMap::new();
        for l in links {
            let config = |alpn: &[u8]| {
                pki_tls::client_config(&self.identity, trust.clone(), &l.router_id, &[alpn])
                    .map_err(|e| e.to_string())
            };
            clients.insert(l.router_id.clone(), config(ALPN_H2)?);
            if l.relay == agentd::fib::LinkRelay::Server {
                tunnels.insert(l.router_id.clone(), config(ALPN_RELAY)?);
            }
        }
        self.trust = trust;
        self.server = server;
        self.clients = clients;
        self.tunnels = tunnels;
        Ok(())
    }

    pub fn server(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }

    /// The config to dial `router_id` with, while it is linked.
    pub fn client(&self, router_id: &str) -> Option<Arc<ClientConfig>> {
        self.clients.get(router_id).cloned()
    }

    /// The config of our tunnel to `router_id`, while it is our relay.
    pub fn tunnel(&self, router_id: &str) -> Option<Arc<ClientConfig>> {
        self.tunnels.get(router_id).cloned()
    }

    /// Who a finished handshake is with (`expected`: whom we dialled),
    /// after checking that it negotiated `h2` or (a relay client's
    /// tunnel) `agentd-relay/1`.
    pub fn verified(
        &self,
        state: &CommonState,
        expected: Option<&str>,
    ) -> Result<Verified, String> {
        let tunnel = match state.alpn_protocol() {
            Some(ALPN_H2) => false,
            Some(ALPN_RELAY) => true,
            _ => return Err("the peer did not negotiate ALPN h2 or agentd-relay/1".into()),
        };
        let id = pki_tls::peer_identity(state, &self.trust, expected, UnixTime::now())
            .map_err(|e| e.to_string())?;
        Ok(Verified {
            router_id: id.router_id.into(),
            key: id.public_key,
            tunnel,
        })
    }
}

/// The SNI to dial `router_id` with.
pub fn server_name(router_id: &str) -> Result<ServerName<'static>, String> {
    pki_tls::server_name(router_id).map_err(|e| e.to_string())
}

/// A TLS error in words: the typed trust error inside, when our verifier
/// refused the peer.
pub fn error_text(e: &std::io::Error) -> String {
    match e.get_ref() {
        Some(inner) => match router_pki::tls::TrustError::find(inner) {
            Some(t) => t.to_string(),
            None => inner.to_string(),
        },
        None => e.to_string(),
    }
}
