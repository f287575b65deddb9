//! One configured peer: its session (at most one survives collisions),
//! the paths learned from it and what it has been sent.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::io::{ConnId, PeerConfig, PeerState, PeerStatus};
use super::path::Path;
use super::shares::Shares;
use crate::message::{Close, RouteAd};
use crate::session::Session;
use edkey::Sha256;

/// What a session was sent for one route: a digest of everything an
/// export can change — the signed content (named by its serial and
/// signature), the path, and the trust and proof limits — so that an
/// export saying the same sends nothing. It is held for every route and
/// every peer it went to, so it is 16 bytes, not a copy of the path: the
/// first half of a SHA-256, which neither chance nor a neighbour shaping
/// a path can make two different exports share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sent([u8; 16]);

impl Sent {
    pub fn of(ad: &RouteAd) -> Sent {
        let mut h = Sha256::new();
        h.update(ad.serial.to_le_bytes());
        h.update(ad.signature.0);
        h.update((ad.path.len() as u64).to_le_bytes());
        for hop in &ad.path {
            h.update((hop.len() as u64).to_le_bytes());
            h.update(hop.as_bytes());
        }
        h.update(ad.trust_limit.to_le_bytes());
        h.update([ad.proof_limit as u8]);
        let digest = h.finalize();
        let mut half = [0; 16];
        half.copy_from_slice(&digest[..16]);
        Sent(half)
    }
}

/// Our snapshot to a session while it is being sent, a chunk at a time
/// (`export.rs`): a chunk goes once the transport has written all but
/// the last few, so a snapshot holds a few chunks, not the table.
#[derive(Debug)]
pub(super) struct Outgoing {
    pub conn: ConnId,
    pub version: u64,
    /// Route ids not sent yet; each is exported as it is when its chunk
    /// goes.
    pub remaining: BTreeSet<String>,
    /// Chunks sent and not yet reported written.
    pub unwritten: usize,
    /// Route ids that changed among those already sent (or were new):
    /// their deltas go after the snapshot's end, as a withdraw inside a
    /// snapshot is a protocol error.
    pub deferred: BTreeSet<String>,
}

#[derive(Debug)]
pub(super) struct Peer {
    pub cfg: PeerConfig,
    /// The router id, shared by the route holders that name this peer.
    pub name: Arc<str>,
    pub session: Option<Session>,
    /// Whether the driver was last told its paths are eligible.
    pub eligible: bool,
    /// A graceful expiry is armed.
    pub graceful: bool,
    /// Adj-RIB-In: route_id (shared with the instance's route holders)
    /// → path.
    pub paths: BTreeMap<Arc<str>, Path>,
    /// Adj-RIB-Out: route_id → what we advertised. A peer-learned
    /// route's id is the one copy the holders and paths share.
    pub sent: BTreeMap<Arc<str>, Sent>,
    /// Our snapshot to the session, while it is being sent.
    pub outgoing: Option<Outgoing>,
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
            name: cfg.router_id.as_str().into(),
            cfg,
            session: None,
            eligible: false,
            graceful: false,
            paths: BTreeMap::new(),
            sent: BTreeMap::new(),
            outgoing: None,
            idle_since_ms: now,
            last_error: None,
            last_close: None,
            boot_epoch: None,
            shares: Shares::default(),
            dropped: 0,
            last_drop: None,
        }
    }

    /// Ends the session (if any), and with it our snapshot to it.
    pub fn take_session(&mut self) -> Option<Session> {
        self.outgoing = None;
        self.session.take()
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
