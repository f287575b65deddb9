//! The peer data plane's state in one place: the identity and trust
//! built from the FIB links, the outbound connections, the inbound ones
//! (closed when their link goes), the replay cache and the remote task
//! handles.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use router_pki::RouterIdentity;
use tokio::sync::Notify;

use crate::config::GatewayConfig;
use crate::peer::assertion::{ReplayCache, RootCache};
use crate::peer::conns::PeerConns;
use crate::peer::link::Link;
use crate::peer::remote::RemoteTasks;
use crate::peer::signer::BatchSigner;
use crate::peer::tls::PeerTls;
use crate::peer::PeerStats;

#[derive(Debug)]
pub struct PeerPlane {
    /// Whether this gateway takes part at all (`agentd.router_id` set).
    enabled: bool,
    router_id: Box<str>,
    identity_path: std::path::PathBuf,
    router_cert: Option<std::path::PathBuf>,
    /// Loaded with the first link (agentd created the key by then).
    tls: RefCell<Option<Rc<RefCell<PeerTls>>>>,
    links: RefCell<Vec<Link>>,
    pub conns: PeerConns,
    pub stats: Rc<PeerStats>,
    pub replay: RefCell<ReplayCache>,
    /// Batch roots whose signatures we verified.
    pub roots: RefCell<RootCache>,
    /// Signs our outgoing assertions, one batch per turn and target.
    pub signer: Rc<BatchSigner>,
    pub remote: RefCell<RemoteTasks>,
    inbound: RefCell<Vec<Inbound>>,
    /// Our assertions' nonces: a random epoch for this process and a
    /// sequence per target router (see `replay`: one window per sender
    /// at the receiver, whatever the rate).
    epoch: u64,
    sequences: RefCell<std::collections::HashMap<Box<str>, u64>>,
}

/// An accepted data connection: closed when its router's link changes
/// or goes.
#[derive(Debug)]
struct Inbound {
    link: Link,
    close: Weak<Notify>,
}

impl PeerPlane {
    pub fn new(cfg: &GatewayConfig) -> PeerPlane {
        PeerPlane {
            enabled: cfg.mesh,
            router_id: cfg.router_id.clone(),
            identity_path: cfg.identity.clone(),
            router_cert: cfg.router_cert.clone(),
            tls: RefCell::new(None),
            links: RefCell::new(Vec::new()),
            conns: PeerConns::default(),
            stats: Rc::new(PeerStats::default()),
            replay: RefCell::new(ReplayCache::new(cfg.replay_cache)),
            roots: RefCell::new(RootCache::new(crate::peer::roots::DEFAULT_CAPACITY)),
            signer: Rc::new(BatchSigner::default()),
            remote: RefCell::new(
                RemoteTasks::new(cfg.task_capacity, cfg.task_ttl_s.saturating_mul(1000))
                    .with_shares(cfg.tenant_share_percent, cfg.source_share_percent),
            ),
            inbound: RefCell::new(Vec::new()),
            epoch: random_epoch(),
            sequences: RefCell::new(std::collections::HashMap::new()),
        }
    }

    /// The nonce of our next assertion to `target`.
    pub fn next_nonce(&self, target: &str) -> [u8; 16] {
        let mut seqs = self.sequences.borrow_mut();
        let seq = match seqs.get_mut(target) {
            Some(s) => {
                *s += 1;
                *s
            }
            None => {
                seqs.insert(target.into(), 1);
                1
            }
        };
        crate::peer::replay::nonce(self.epoch, seq)
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn router_id(&self) -> &str {
        &self.router_id
    }

    /// The TLS state, once loaded.
    pub fn tls(&self) -> Option<Rc<RefCell<PeerTls>>> {
        self.tls.borrow().clone()
    }

    /// The current link of `router_id`.
    pub fn link(&self, router_id: &str) -> Option<Link> {
        self.links
            .borrow()
            .iter()
            .find(|l| &*l.router_id == router_id)
            .cloned()
    }

    /// Whether calls with `router_id` are signed; a router that is not
    /// linked counts as signed (nothing is sent to it anyway).
    pub fn signed(&self, router_id: &str) -> bool {
        self.links
            .borrow()
            .iter()
            .find(|l| &*l.router_id == router_id)
            .is_none_or(|l| l.signed)
    }

    /// Applies a new link set: trust, outbound connections, and closes
    /// inbound connections whose link went away or changed.
    pub fn sync(&self, links: Vec<Link>) {
        if !self.enabled || *self.links.borrow() == links {
            return;
        }
        if self.tls.borrow().is_none() && !links.is_empty() {
            match self.load_identity() {
                Ok(t) => *self.tls.borrow_mut() = Some(Rc::new(RefCell::new(t))),
                Err(e) => {
                    agentd::log_error!("peer data plane off: {e}");
                    return;
                }
            }
        }
        let Some(tls) = self.tls() else {
            *self.links.borrow_mut() = links;
            return;
        };
        if let Err(e) = tls.borrow_mut().update(&links) {
            agentd::log_error!("peer data plane: cannot build the TLS configs: {e}");
            return;
        }
        self.conns.sync(&links, &tls, &self.stats);
        self.inbound.borrow_mut().retain(|c| {
            let Some(close) = c.close.upgrade() else {
                return false;
            };
            if links.contains(&c.link) {
                return true;
            }
            close.notify_one();
            false
        });
        *self.links.borrow_mut() = links;
    }

    fn load_identity(&self) -> Result<PeerTls, String> {
        let key = router_pki::identity::load_key(&self.identity_path).map_err(|e| e.to_string())?;
        let identity = RouterIdentity::new(key, self.router_cert.as_deref(), &self.router_id)
            .map_err(|e| e.to_string())?;
        PeerTls::new(identity)
    }

    /// Registers an accepted connection from `link`; the returned notify
    /// fires when it must close.
    pub fn accepted(&self, link: Link) -> Rc<Notify> {
        let close = Rc::new(Notify::new());
        let mut inbound = self.inbound.borrow_mut();
        inbound.retain(|c| c.close.strong_count() > 0);
        inbound.push(Inbound {
            link,
            close: Rc::downgrade(&close),
        });
        close
    }
}

/// A fresh epoch per process: a restarted gateway's sequences start over
/// in a new window at its peers.
fn random_epoch() -> u64 {
    let mut b = [0u8; 8];
    if crate::auth::fill_random(&mut b).is_err() {
        b = crate::peer::outbound::unix_ms().to_le_bytes();
    }
    u64::from_le_bytes(b)
}
