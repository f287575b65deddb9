//! The mesh instance, sans-IO: every session of this router, the paths
//! learned from each peer (Adj-RIB-In, one path per peer per route_id),
//! the route rules (loops, signatures, ownership, limits), and what is
//! exported to each peer (Adj-RIB-Out, deltas only).
//!
//! One input at a time ([`Instance::handle`]); time is an argument. The
//! driver maps [`Output`]s onto sockets, timers and agentd's RIB.
//!
//! Remote liveness: a path has no lease of its own. It is eligible while
//! the session it was learned on is up (and its snapshot complete) and it
//! has not been withdrawn. The origin withdraws at its lease end
//! (`WithdrawLocal` from the driver's expiry timer) and every router
//! forwards a withdraw, or the loss of a route's last eligible path, in
//! the same `handle` call. A renewal changes no exported field, so it
//! sends nothing; `lease_ms` travels as information only.
//!
//! * [`io`] — the inputs, outputs and status types (the driver contract).
//! * `sessions` — connections: collisions, closes, loss, graceful expiry.
//! * `accept` — applying a peer's updates and withdraws under the rules.
//! * `export` — what each peer is sent: snapshots and deltas.
//! * `local` — our own routes, signed, with serials that never go back.
//! * `path` — a path learned from a peer, held as its encoding.
//! * `keys` — the origin key directory (direct, certified, learned).
//! * `shares` — a neighbour's paths by origin router, for fair limits.

mod accept;
mod certs;
mod export;
pub mod io;
mod keys;
mod local;
mod path;
mod peer;
mod sessions;
mod shares;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use io::{
    ConnId, Counters, Input, InstanceConfig, LocalRoute, Output, PeerConfig, PeerState, PeerStatus,
    Timer,
};
pub use keys::{OriginCa, OriginCaRef};

use crate::session::SessionConfig;
use certs::Certs;
use keys::KeyDir;
use local::Locals;
use peer::Peer;

/// Who holds a remote route_id: its origin router (the first claim) and
/// the peers we hold a path from (most routes have one or two: a list,
/// not a tree node per route).
#[derive(Debug)]
struct Holders {
    origin: Arc<str>,
    peers: Vec<Arc<str>>,
}

#[derive(Debug)]
pub struct Instance {
    cfg: InstanceConfig,
    session_cfg: SessionConfig,
    peers: BTreeMap<String, Peer>,
    /// Live connections and their peer.
    conns: BTreeMap<ConnId, String>,
    /// Remote route_id → holders (paths of every peer). The key is the
    /// one copy of the id that every peer's path is keyed by.
    routes: HashMap<Arc<str>, Holders>,
    locals: Locals,
    keys: KeyDir,
    /// Origin certificates, one copy for all paths carrying each.
    certs: Certs,
    counters: Counters,
    /// Route ids whose export may have changed since the last flush.
    dirty: BTreeSet<String>,
    /// Our snapshot versions, one per session.
    snapshots: u64,
    shutting_down: bool,
}

impl Instance {
    pub fn new(cfg: InstanceConfig) -> Instance {
        let session_cfg = SessionConfig {
            router_id: cfg.router_id.clone(),
            domain: cfg.domain.clone(),
            boot_epoch: cfg.boot_epoch,
            heartbeat_ms: cfg.heartbeat_ms,
            miss_limit: cfg.miss_limit,
            max_frame: cfg.max_frame,
        };
        let keys = KeyDir::new(&cfg.router_id, cfg.key.verifying_key().to_bytes());
        Instance {
            locals: Locals::new(cfg.boot_epoch),
            cfg,
            session_cfg,
            peers: BTreeMap::new(),
            conns: BTreeMap::new(),
            routes: HashMap::new(),
            keys,
            certs: Certs::default(),
            counters: Counters::default(),
            dirty: BTreeSet::new(),
            snapshots: 0,
            shutting_down: false,
        }
    }

    /// Processes one input; everything it causes is appended to `out`.
    pub fn handle(&mut self, now: u64, input: Input, out: &mut Vec<Output>) {
        match input {
            Input::Connected {
                conn,
                peer,
                peer_key,
                outbound,
            } => self.connected(now, conn, peer, peer_key, outbound, out),
            Input::Frame { conn, msg } => self.frame(now, conn, msg, out),
            Input::FrameError { conn, error } => {
                let close = crate::message::Close::new(error.close_code(), error.to_string());
                self.close_conn(now, conn, close, out);
            }
            Input::Disconnected { conn, error } => self.disconnected(now, conn, error, out),
            Input::Timer(timer) => self.timer(now, timer, out),
            Input::UpsertLocal(route) => self.upsert_local(now, route, out),
            Input::WithdrawLocal(route_id) => self.withdraw_local(&route_id),
            Input::ConfigurePeers(peers) => self.configure_peers(now, peers, out),
            Input::Shutdown => self.shutdown(now, out),
            Input::Written { conn } => self.written(now, conn, out),
        }
        self.flush(now, out);
    }

    /// Every configured peer, by router id.
    pub fn peers(&self, now: u64) -> Vec<PeerStatus> {
        let _ = now;
        self.peers.values().map(Peer::status).collect()
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Paths held from `peer`, as they arrived but without their
    /// certificates (tests, fuzzing, status).
    pub fn paths_of(&self, peer: &str) -> impl Iterator<Item = crate::message::RouteAd> + '_ {
        self.peers
            .get(peer)
            .into_iter()
            .flat_map(|p| p.paths.iter().filter_map(|(id, path)| path.ad(id)))
    }

    /// Route ids currently advertised to `peer`.
    pub fn exported_to(&self, peer: &str) -> impl Iterator<Item = &str> {
        self.peers
            .get(peer)
            .into_iter()
            .flat_map(|p| p.sent.keys().map(|id| &**id))
    }
}
