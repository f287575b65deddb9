//! One configured peer: its session (at most one survives collisions),
//! the paths learned from it and what it has been sent.

use std::collections::BTreeMap;

use super::io::{ConnId, PeerConfig, PeerState, PeerStatus};
use super::shares::Shares;
use crate::bytes::Bytes;
use crate::message::{Close, RouteAd};
use crate::session::Session;

/// A path learned from a peer.
#[derive(Clone, Debug)]
pub(super) struct Path {
    /// As it arrived, but for `origin_cert` (empty: see `cert`).
    pub ad: RouteAd,
    /// The origin router's certificate the advertisement carried, shared
    /// with the origin's other paths (`certs.rs`).
    pub cert: Option<std::sync::Arc<[u8]>>,
    /// The connection whose messages last confirmed it (the snapshot sweep
    /// and graceful expiry remove paths not confirmed by the current one).
    pub mark: ConnId,
    /// The peer's boot epoch when it was learned: serials are compared
    /// only within one epoch (a restarted peer's snapshot replaces all).
    pub epoch: u64,
}

/// What a session was sent for one route: enough to tell whether a new
/// export differs (the signature names the signed content), a fraction of
/// the advertisement's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Sent {
    pub serial: u64,
    pub signature: Bytes<64>,
    pub path: Vec<String>,
    pub trust_limit: u64,
    pub proof_limit: crate::message::OriginProof,
}

impl Sent {
    pub fn of(ad: &RouteAd) -> Sent {
        Sent {
            serial: ad.serial,
            signature: ad.signature,
            path: ad.path.clone(),
            trust_limit: ad.trust_limit,
            proof_limit: ad.proof_limit,
        }
    }

    /// Whether `ad` says what was sent (its carried lease aside).
    pub fn same(&self, ad: &RouteAd) -> bool {
        self.serial == ad.serial
            && self.signature == ad.signature
            && self.path == ad.path
            && self.trust_limit == ad.trust_limit
            && self.proof_limit == ad.proof_limit
    }
}

#[derive(Debug)]
pub(super) struct Peer {
    pub cfg: PeerConfig,
    pub session: Option<Session>,
    /// Whether the driver was last told its paths are eligible.
    pub eligible: bool,
    /// A graceful expiry is armed.
    pub graceful: bool,
    /// Adj-RIB-In: route_id → path.
    pub paths: BTreeMap<String, Path>,
    /// Adj-RIB-Out: route_id → what we advertised.
    pub sent: BTreeMap<String, Sent>,
    pub idle_since_ms: u64,
    pub last_error: Option<String>,
    pub last_close: Option<(Close, bool)>,
    pub boot_epoch: Option<u64>,
    /// Adj-RIB-In by origin router: what the route limits share out.
    pub shares: Shares,
    /// Paths refused or given up for the route limits and for origin
    /// keys that contradict an authenticated one, since the peer was
    /// configured; the session stays up.
    pub dropped: u64,
    /// Why the last one was.
    pub last_drop: Option<String>,
}

impl Peer {
    pub fn new(cfg: PeerConfig, now: u64) -> Peer {
        Peer {
            cfg,
            session: None,
            eligible: false,
            graceful: false,
            paths: BTreeMap::new(),
            sent: BTreeMap::new(),
            idle_since_ms: now,
            last_error: None,
            last_close: None,
            boot_epoch: None,
            shares: Shares::default(),
            dropped: 0,
            last_drop: None,
        }
    }

    /// The session, when Opens are exchanged (we may send routes).
    pub fn open_session(&mut self) -> Option<&mut Session> {
        self.session.as_mut().filter(|s| s.is_open())
    }

    pub fn status(&self) -> PeerStatus {
        let (state, since_ms) = match &self.session {
            Some(s) => (s.state(), s.since_ms),
            None => (PeerState::Idle, self.idle_since_ms),
        };
        PeerStatus {
            router_id: self.cfg.router_id.clone(),
            state,
            since_ms,
            routes_in: self.paths.len(),
            routes_out: self.sent.len(),
            eligible: self.eligible,
            last_error: self.last_error.clone(),
            last_close: self.last_close.clone(),
            boot_epoch: self.boot_epoch,
            dropped_routes: self.dropped,
            last_drop: self.last_drop.clone(),
        }
    }

    /// Counts a path refused or given up, with the reason shown in status.
    pub fn drop_one(&mut self, why: String) {
        self.dropped += 1;
        self.last_drop = Some(why);
    }

    /// Whether routes of `tenant` may be exported to this peer.
    pub fn exports_tenant(&self, tenant: &str) -> bool {
        self.cfg.export
            && (self.cfg.export_tenants.is_empty()
                || self.cfg.export_tenants.iter().any(|t| t == tenant))
    }
}
