//! agentd's ARPX driver: the mesh sessions with other routers.
//!
//! The daemon's single event loop owns one [`Peers`]. It holds the
//! sans-IO mesh instance (`arpx::instance`), feeds it inputs (frames from
//! connection tasks, timer expiries, local route changes, the peer set)
//! and maps its outputs: frames to connection writers, timers into
//! [`timers::Timers`], paths and eligibility into the RIB (the FIB
//! changes go back to the caller to publish).
//!
//! * [`settings`] — what the driver runs on, from the configuration.
//! * [`tls`] — identity, trust rule and TLS configs (router-pki).
//! * [`io`] — what the driver asks to be done outside the loop (listen,
//!   dial, serve, cut), and [`io::PeerTasks`], which does it.
//! * [`tasks`] — every spawned I/O task (listener, dials, connections).
//! * [`inbox`] — the connections' frames, queued per connection and
//!   taken in fair turns (one neighbour's flood delays only itself).
//! * [`timers`] — deadlines by key; the earliest is the loop's one sleep.
//! * [`backoff`] — when to dial a peer again (sans-IO).
//! * [`routes`] — agentd routes ↔ ARPX, field by field.
//! * `status` — `agentctl peers` and the `arpx.*` counters.
//! * `links` — the established sessions as FIB links for the data plane.
//! * [`debug`] — log text.
//!
//! Dialing: every configured peer has a dialer. While the peer has no
//! connection, a dial timer is armed from its backoff; the dial task
//! reports a verified handshake or a failure (kept as the peer's last
//! error, never shown to the instance). Both routers dial; the instance
//! resolves collisions.

pub mod backoff;
pub mod debug;
pub mod inbox;
pub mod io;
mod links;
pub mod routes;
pub mod settings;
mod status;
pub mod tasks;
pub mod timers;
pub mod tls;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use arpx::frame;
use arpx::instance::{self as mesh, ConnId, Output, PeerConfig, Timer};
use tokio::sync::watch;

use super::state::{Changes, State};
use crate::fib::FibChange;
use crate::route::RouteId;
use crate::time::Millis;
use backoff::{Backoff, BackoffConfig, Rng};
use inbox::{ConnEvent, Inbox};
use io::{PeerIo, Serve};
use settings::{MeshSettings, PeerSettings};
use tasks::{PeerEvent, SendQueue, QUEUE_FRAMES};
use tls::{Identity, TlsContext};

/// Bytes queued for one peer before it counts as not reading and is
/// disconnected: a few full snapshots' worth of frames.
pub const MAX_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// The driver's timers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Arpx(Timer),
    Dial(String),
}

#[derive(Debug)]
enum DialState {
    /// Not dialing: a dial timer may be armed.
    Waiting,
    /// A dial task runs ([`PeerIo::Dial`]).
    Dialing,
}

/// Driver state of one configured peer (the session is the instance's).
#[derive(Debug)]
struct Dialer {
    settings: PeerSettings,
    backoff: Backoff,
    state: DialState,
    /// The last handshake or transport failure.
    last_error: Option<String>,
}

/// One live connection.
#[derive(Debug)]
struct Conn {
    peer: String,
    /// In front of the connection's writer task.
    queue: SendQueue,
    /// The session reached Established on it.
    up: bool,
    /// The peer's Ed25519 key as the TLS handshake verified it.
    key: [u8; 32],
}

/// A running mesh: identity loaded, instance created.
#[derive(Debug)]
struct Mesh {
    /// Numbers the meshes of this process (a restart makes a new one).
    generation: u64,
    instance: mesh::Instance,
    identity: Identity,
    fingerprint: String,
    tls: Arc<TlsContext>,
    tls_tx: watch::Sender<Arc<TlsContext>>,
    conns: HashMap<ConnId, Conn>,
    /// The listener asked for ([`PeerIo::Listen`]'s serial) and, once
    /// it reported, the address it is bound to.
    listener: Option<(u64, Option<SocketAddr>)>,
    listen_error: Option<String>,
}

/// Counts of the driver's own events (the instance counts the protocol).
#[derive(Debug, Default)]
struct DriverCounters {
    dials: u64,
    dial_failures: u64,
    inbound_refused: u64,
    queue_overflows: u64,
    frames_too_large: u64,
    paths_refused: u64,
    /// Established sessions not published as links (no usable data
    /// address in the peer section).
    links_invalid: u64,
}

/// The ARPX driver.
#[derive(Debug)]
pub struct Peers {
    settings: MeshSettings,
    /// The identity files as last read with the configuration (a mesh
    /// restart builds on them; only a config read reads them again).
    identity: Result<Identity, String>,
    /// What the driver asks to be done outside the loop, in order.
    io: Vec<PeerIo>,
    /// Numbers the listeners asked for (a late report of a replaced one
    /// is ignored).
    listen_serial: u64,
    /// The connections' frames, per connection (see [`inbox`]).
    inbox: Inbox,
    rng: Rng,
    dialers: BTreeMap<String, Dialer>,
    /// `Err`: why sessions are off.
    mesh: Result<Mesh, String>,
    timers: timers::Timers<Key>,
    counters: DriverCounters,
    /// Peers whose paths are eligible (the RIB's mark).
    eligible: BTreeSet<String>,
    /// Peers with a link in the RIB: the connection whose session it
    /// came from and the key that session verified.
    linked: BTreeMap<String, (ConnId, [u8; 32])>,
    /// When a peer's dropped paths were last logged, and how many were
    /// dropped since (one line per peer per [`DROP_LOG_MS`]: a flood must
    /// not become a log flood).
    drop_log: HashMap<String, (u64, u64)>,
    /// The next connection number. Never reused, also not across a mesh
    /// restart: a late frame of an old connection must not pass for one
    /// of the new instance's.
    next_conn: u64,
    /// Meshes built so far.
    meshes: u64,
}

/// Flush and close (the instance's `Disconnect`, or our shutdown); if
/// even the close cannot be queued the connection is cut at once.
fn close_conn(conn: ConnId, queue: &SendQueue) -> PeerIo {
    if queue.close() {
        PeerIo::Release { conn }
    } else {
        PeerIo::Cut { conn }
    }
}

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Least time between two log lines about one peer's dropped paths.
const DROP_LOG_MS: u64 = 10_000;

fn peer_config(p: &PeerSettings) -> PeerConfig {
    PeerConfig {
        router_id: p.router_id.clone(),
        max_routes: p.max_routes,
        export_tenants: p.export_tenants.clone(),
        reflector_client: p.reflector_client,
        max_trust: p.max_trust,
        max_proof: p.max_proof,
    }
}

impl Peers {
    /// A driver that is not running yet ([`Peers::start`] starts it once
    /// the RIB holds its restored routes). `identity`: the identity files
    /// of `settings`, read before the loop runs ([`Identity::read`]).
    pub fn new(settings: MeshSettings, identity: Result<Identity, String>) -> Peers {
        let seed = wall_ms() ^ u64::from(std::process::id()).rotate_left(32);
        Peers {
            settings,
            identity,
            io: Vec::new(),
            listen_serial: 0,
            inbox: Inbox::default(),
            rng: Rng::seeded(seed),
            dialers: BTreeMap::new(),
            mesh: Err("not started".into()),
            timers: timers::Timers::new(),
            counters: DriverCounters::default(),
            eligible: BTreeSet::new(),
            linked: BTreeMap::new(),
            drop_log: HashMap::new(),
            next_conn: 1,
            meshes: 0,
        }
    }

    /// What the driver runs on now (configured plus admitted peers).
    pub fn settings(&self) -> &MeshSettings {
        &self.settings
    }

    /// What the driver asked to be done since the last call, in order
    /// (the daemon hands it to [`io::PeerTasks`]).
    pub fn take_io(&mut self) -> Vec<PeerIo> {
        std::mem::take(&mut self.io)
    }

    /// Our identity key's fingerprint while the mesh runs.
    pub fn fingerprint(&self) -> Option<&str> {
        self.mesh.as_ref().ok().map(|m| m.fingerprint.as_str())
    }

    // ===== start, reload, stop =====

    /// Creates the instance on the identity read last, offers it our routes and
    /// the peer set, starts the listener and the dialers. Sessions stay
    /// off (with the reason in `agentctl peers`) when there is no
    /// router_id or the identity cannot be loaded.
    pub fn start(&mut self, now: Millis, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        self.dialers = self
            .settings
            .peers
            .iter()
            .map(|p| {
                (
                    p.router_id.clone(),
                    Dialer {
                        settings: p.clone(),
                        backoff: Backoff::new(BackoffConfig::DEFAULT),
                        state: DialState::Waiting,
                        last_error: None,
                    },
                )
            })
            .collect();
        // A peer's paths are ineligible until its snapshot completes.
        for p in &self.settings.peers {
            changes.extend(state.set_peer_up(&p.router_id, false));
        }
        self.eligible.clear();
        self.mesh = self.build_mesh();
        match &self.mesh {
            Err(reason) => {
                debug::mesh_off(reason);
                return changes;
            }
            Ok(m) => debug::mesh_started(&self.settings, &m.fingerprint),
        }
        let peers: Vec<PeerConfig> = self.settings.peers.iter().map(peer_config).collect();
        changes.extend(self.feed(now, mesh::Input::ConfigurePeers(peers), state));
        let exports: Vec<routes::Export> = state
            .exportable_routes()
            .filter_map(|r| routes::export(r, now))
            .collect();
        for e in exports {
            if let routes::Export::Upsert(l) = e {
                changes.extend(self.feed(now, mesh::Input::UpsertLocal(*l), state));
            }
        }
        self.start_listener();
        let ids: Vec<String> = self.dialers.keys().cloned().collect();
        for id in ids {
            // Spread the first dials of a router that restarts with many
            // peers over the first backoff step.
            let at = now.0 + self.rng.below_inclusive(BackoffConfig::DEFAULT.initial_ms);
            self.timers.set(Key::Dial(id), at);
        }
        changes
    }

    fn build_mesh(&mut self) -> Result<Mesh, String> {
        self.meshes += 1;
        let generation = self.meshes;
        let s = &self.settings;
        let router_id = s.router_id.as_deref().ok_or_else(|| {
            "agentd.router_id is not set (a mesh needs a stable router identity)".to_string()
        })?;
        let identity = self.identity.clone()?;
        if identity.identity.router_id() != router_id {
            // Read for another configuration: only a config read (which
            // reads both) can tell which is meant.
            return Err(format!(
                "identity read for router_id {:?}, configured {router_id:?}: reload",
                identity.identity.router_id()
            ));
        }
        let fingerprint = identity.fingerprint();
        let tls = Arc::new(identity.context(&s.peers, generation)?);
        let (tls_tx, _) = watch::channel(tls.clone());
        let instance = mesh::Instance::new(mesh::InstanceConfig {
            router_id: router_id.to_string(),
            domain: s.domain.clone(),
            boot_epoch: wall_ms(),
            key: identity.identity.signing_key().clone(),
            heartbeat_ms: s.heartbeat_ms,
            miss_limit: s.miss_limit,
            graceful_ms: s.graceful_ms,
            reflector: s.reflector,
            max_path: s.max_path,
            max_frame: s.max_frame,
            max_routes_per_origin: s.max_routes_per_origin,
            origin_ca: identity.origin_ca(),
            cert: identity.attached_cert(),
        });
        Ok(Mesh {
            generation,
            instance,
            identity,
            fingerprint,
            tls,
            tls_tx,
            conns: HashMap::new(),
            listener: None,
            listen_error: None,
        })
    }

    fn start_listener(&mut self) {
        let Ok(m) = &mut self.mesh else { return };
        if m.listener.take().is_some() {
            self.io.push(PeerIo::StopListening);
        }
        m.listen_error = None;
        let Some(listen) = &self.settings.listen else {
            return;
        };
        if self.settings.peers.is_empty() {
            // Every inbound session must be a configured peer: with none,
            // a listening socket could only refuse.
            m.listen_error = Some("not listening: no peer configured".into());
            return;
        }
        let addr: SocketAddr = match listen.parse() {
            Ok(a) => a,
            Err(e) => {
                m.listen_error = Some(format!("{listen}: {e}"));
                return;
            }
        };
        self.listen_serial += 1;
        m.listener = Some((self.listen_serial, None));
        self.io.push(PeerIo::Listen {
            serial: self.listen_serial,
            addr,
            tls: m.tls_tx.subscribe(),
        });
    }

    /// What became of the listener numbered `serial`.
    fn listening(&mut self, serial: u64, bound: Result<SocketAddr, String>) {
        let Ok(m) = &mut self.mesh else { return };
        if m.listener.is_none_or(|(s, _)| s != serial) {
            return;
        }
        match bound {
            Ok(local) => {
                debug::listening(local);
                m.listener = Some((serial, Some(local)));
            }
            Err(e) => {
                debug::listen_failed(self.settings.listen.as_deref().unwrap_or(""), &e);
                m.listener = None;
                m.listen_error = Some(e);
            }
        }
    }

    /// A reload. A change of the router's own settings (router_id,
    /// identity, timers, limits) restarts the mesh; otherwise the
    /// instance gets the new peer set: removed peers are closed with
    /// `peer_removed` and their paths go, peers whose address, ports or
    /// pin changed are closed and dialled again, the others are untouched.
    /// `identity`: the identity files as just read with the configuration
    /// (`None`: not a config read, e.g. discovery admitted a peer).
    pub fn reconfigure(
        &mut self,
        new: MeshSettings,
        identity: Option<Result<Identity, String>>,
        now: Millis,
        state: &mut State,
    ) -> Changes {
        // Sessions that are off (no router_id, a bad key or certificate
        // file) are tried again on every reload: the operator may have
        // fixed the file.
        let key_changed = identity.is_some_and(|read| self.reload_identity(read));
        let restart =
            new.instance_key() != self.settings.instance_key() || self.mesh.is_err() || key_changed;
        if restart {
            let mut changes = self.stop(now, state);
            self.settings = new;
            changes.extend(self.start(now, state));
            return changes;
        }
        if new == self.settings {
            // A renewed certificate or CA file still applies to new
            // handshakes.
            self.rebuild_tls();
            return Changes::new();
        }
        let old = std::mem::replace(&mut self.settings, new);
        let mut changes = Changes::new();
        let changed: Vec<String> = old
            .peers
            .iter()
            .filter(|p| {
                self.settings
                    .peer(&p.router_id)
                    .is_none_or(|n| n.transport_key() != p.transport_key())
            })
            .map(|p| p.router_id.clone())
            .collect();
        // First without the removed and changed peers: the instance
        // closes their sessions (peer_removed) and drops their paths.
        let kept: Vec<PeerConfig> = self
            .settings
            .peers
            .iter()
            .filter(|p| !changed.contains(&p.router_id))
            .map(peer_config)
            .collect();
        changes.extend(self.feed(now, mesh::Input::ConfigurePeers(kept), state));
        for id in &changed {
            changes.extend(self.forget_peer(id, state));
        }
        // The trust rule and client configs of the new set.
        self.rebuild_tls();
        let all: Vec<PeerConfig> = self.settings.peers.iter().map(peer_config).collect();
        changes.extend(self.feed(now, mesh::Input::ConfigurePeers(all), state));
        // Dialers: gone ones stop, new and changed ones start.
        let peers = self.settings.peers.clone();
        for p in &peers {
            let fresh = changed.contains(&p.router_id) || !self.dialers.contains_key(&p.router_id);
            if fresh {
                changes.extend(state.set_peer_up(&p.router_id, false));
                self.dialers.insert(
                    p.router_id.clone(),
                    Dialer {
                        settings: p.clone(),
                        backoff: Backoff::new(BackoffConfig::DEFAULT),
                        state: DialState::Waiting,
                        last_error: None,
                    },
                );
                self.timers.set(Key::Dial(p.router_id.clone()), now.0);
            } else if let Some(d) = self.dialers.get_mut(&p.router_id) {
                d.settings = p.clone();
            }
        }
        if old.listen != self.settings.listen
            || old.peers.is_empty() != self.settings.peers.is_empty()
        {
            self.start_listener();
        }
        changes.extend(self.refresh_links(state));
        debug::peers_reconfigured(self.settings.peers.len(), changed.len());
        changes
    }

    /// Takes the identity key, certificate and domain CA files as just
    /// read. Returns whether the mesh must restart (the key itself
    /// changed: it signs our routes); a renewed certificate or CA applies
    /// to the running mesh's next handshakes. A file that could not be
    /// read keeps the running identity (and says so); a mesh (re)start
    /// then fails on it.
    fn reload_identity(&mut self, read: Result<Identity, String>) -> bool {
        self.identity = read.clone();
        let Ok(m) = &mut self.mesh else {
            return true;
        };
        match read {
            Ok(id) if id.identity.verifying_key() != m.identity.identity.verifying_key() => true,
            Ok(id) => {
                m.identity = id;
                false
            }
            Err(e) => {
                debug::identity_reload_failed(&e);
                false
            }
        }
    }

    /// New TLS configs from the running identity and peer set, for the
    /// listener and the next dials (sessions up stay as they are).
    fn rebuild_tls(&mut self) {
        if let Ok(m) = &mut self.mesh {
            match m.identity.context(&self.settings.peers, m.generation) {
                Ok(ctx) => {
                    m.tls = Arc::new(ctx);
                    m.tls_tx.send_replace(m.tls.clone());
                }
                Err(e) => debug::tls_rebuild_failed(&e),
            }
        }
    }

    /// Drops everything of a peer that is gone or reconnects: its dialer,
    /// dial timer and paths.
    fn forget_peer(&mut self, id: &str, state: &mut State) -> Changes {
        if let Some(d) = self.dialers.remove(id) {
            if matches!(d.state, DialState::Dialing) {
                self.io.push(PeerIo::StopDial {
                    peer: id.to_string(),
                });
            }
        }
        self.timers.cancel(&Key::Dial(id.to_string()));
        self.eligible.remove(id);
        // Its session ended already (SessionDown unlinked it); this only
        // catches what the instance did not report.
        let mut changes = self.unlink(id, state);
        // The instance removed the paths of a removed peer already (it
        // sent PathDown); this only catches what it did not know of.
        changes.extend(state.remove_paths_via(id));
        changes
    }

    /// Closes every session (admin_shutdown), stops the listener and the
    /// dialers, and removes every peer path.
    pub fn stop(&mut self, now: Millis, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        if self.mesh.is_ok() {
            changes.extend(self.feed(now, mesh::Input::Shutdown, state));
        }
        // Every session is over, whatever the instance reported.
        changes.extend(self.unlink_all(state));
        if let Ok(m) = &mut self.mesh {
            if m.listener.take().is_some() {
                self.io.push(PeerIo::StopListening);
            }
            for (conn, c) in m.conns.drain() {
                self.inbox.forget(conn);
                self.io.push(close_conn(conn, &c.queue));
            }
        }
        let ids: Vec<String> = self.dialers.keys().cloned().collect();
        for id in ids {
            changes.extend(self.forget_peer(&id, state));
        }
        self.timers = timers::Timers::new();
        self.mesh = Err("stopped".into());
        changes
    }

    // ===== inputs =====

    /// When [`Peers::fire_timers`] must run next.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.timers.next().map(Millis)
    }

    /// Every timer due at `now`.
    pub fn fire_timers(&mut self, now: Millis, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        while let Some(key) = self.timers.pop_due(now.0) {
            match key {
                Key::Arpx(t) => changes.extend(self.feed(now, mesh::Input::Timer(t), state)),
                Key::Dial(peer) => self.dial(&peer),
            }
        }
        changes
    }

    /// What the local/static route changes in `published` mean for the
    /// mesh: every change is offered (the instance sends nothing when no
    /// exported field changed, so renewals cost nothing on the wire).
    /// Taken before the batch is published; [`Peers::feed_all`] feeds it.
    pub fn exports_of(&self, published: &[FibChange], now: Millis) -> Vec<mesh::Input> {
        let mut inputs = Vec::new();
        if self.mesh.is_err() {
            return inputs;
        }
        for change in published {
            match change {
                FibChange::Upsert(route) => match routes::export(route, now) {
                    Some(routes::Export::Upsert(l)) => inputs.push(mesh::Input::UpsertLocal(*l)),
                    Some(routes::Export::Withdraw(id)) => {
                        inputs.push(mesh::Input::WithdrawLocal(id))
                    }
                    None => {}
                },
                FibChange::Remove(id) if id.next_hop().is_none() => {
                    inputs.push(mesh::Input::WithdrawLocal(id.as_str().to_string()))
                }
                _ => {}
            }
        }
        inputs
    }

    /// Feeds [`Peers::exports_of`]'s inputs to the instance.
    pub fn feed_all(
        &mut self,
        inputs: Vec<mesh::Input>,
        now: Millis,
        state: &mut State,
    ) -> Changes {
        let mut changes = Changes::new();
        for input in inputs {
            changes.extend(self.feed(now, input, state));
        }
        changes
    }

    /// One event of a driver task.
    pub fn event(&mut self, ev: PeerEvent, now: Millis, state: &mut State) -> Changes {
        match ev {
            PeerEvent::Handshaken(h) => self.handshaken(*h, now, state),
            PeerEvent::DialFailed { peer, error } => {
                self.counters.dial_failures += 1;
                let repeated = self
                    .dialers
                    .get(&peer)
                    .is_some_and(|d| d.last_error.as_deref() == Some(error.as_str()));
                debug::dial_failed(&peer, &error, repeated);
                self.dial_failed(&peer, error, now);
                Changes::new()
            }
            PeerEvent::Refused { remote, error } => {
                self.counters.inbound_refused += 1;
                let ip = remote.ip().to_string();
                let mut known = false;
                for d in self.dialers.values_mut() {
                    if d.settings.address == ip {
                        d.last_error = Some(format!("inbound from {remote}: {error}"));
                        known = true;
                    }
                }
                debug::inbound_refused(remote, &error, known);
                Changes::new()
            }
            PeerEvent::Listening { serial, bound } => {
                self.listening(serial, bound);
                Changes::new()
            }
            PeerEvent::ListenerFailed { serial, error } => {
                self.listening(serial, Err(error));
                Changes::new()
            }
        }
    }

    /// Rung when a connection's queue gets work (the loop then calls
    /// [`Peers::turn`]).
    pub fn bell(&self) -> Arc<tokio::sync::Notify> {
        self.inbox.bell()
    }

    /// Whether a connection has frames waiting for a turn.
    pub fn has_turn(&self) -> bool {
        self.inbox.has_ready()
    }

    /// One connection's turn: its frames, up to the inbox's budget of
    /// routes (see [`inbox`]), go to the instance.
    pub fn turn(&mut self, now: Millis, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        let Some((conn, events)) = self.inbox.turn() else {
            return changes;
        };
        for ev in events {
            changes.extend(self.conn_event(conn, ev, now, state));
        }
        changes
    }

    /// What a connection's reader or writer reported.
    fn conn_event(
        &mut self,
        conn: ConnId,
        ev: ConnEvent,
        now: Millis,
        state: &mut State,
    ) -> Changes {
        match ev {
            ConnEvent::Frame(msg) => {
                if !self.has_conn(conn) {
                    return Changes::new();
                }
                self.feed(now, mesh::Input::Frame { conn, msg }, state)
            }
            ConnEvent::FrameError(error) => {
                if !self.has_conn(conn) {
                    return Changes::new();
                }
                debug::frame_error(conn, &error);
                self.feed(now, mesh::Input::FrameError { conn, error }, state)
            }
            ConnEvent::Closed(error) => {
                let Some(peer) = self.drop_conn(conn, now, false) else {
                    return Changes::new();
                };
                if let Some(d) = self.dialers.get_mut(&peer) {
                    d.last_error = Some(error.clone());
                }
                self.feed(now, mesh::Input::Disconnected { conn, error }, state)
            }
        }
    }

    fn has_conn(&self, conn: ConnId) -> bool {
        self.mesh
            .as_ref()
            .is_ok_and(|m| m.conns.contains_key(&conn))
    }

    fn handshaken(&mut self, h: tasks::Handshake, now: Millis, state: &mut State) -> Changes {
        let max_frame = self.settings.max_frame;
        let Ok(m) = &mut self.mesh else {
            return Changes::new();
        };
        if h.mesh != m.generation {
            // Verified under a mesh (identity, trust) that is gone.
            return Changes::new();
        }
        if h.outbound {
            if let Some(d) = self.dialers.get_mut(&h.peer) {
                d.state = DialState::Waiting;
            }
        }
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        debug::connected(&h.peer, conn, h.outbound, h.remote);
        let (queue, writer) = SendQueue::new(QUEUE_FRAMES);
        self.io.push(PeerIo::Serve(Box::new(Serve {
            conn,
            stream: h.stream,
            prefix: h.prefix,
            max_frame,
            inbox: self.inbox.open(conn),
            writer,
        })));
        m.conns.insert(
            conn,
            Conn {
                peer: h.peer.clone(),
                queue,
                up: false,
                key: h.key,
            },
        );
        self.timers.cancel(&Key::Dial(h.peer.clone()));
        self.feed(
            now,
            mesh::Input::Connected {
                conn,
                peer: h.peer,
                peer_key: h.key,
                outbound: h.outbound,
            },
            state,
        )
    }

    fn dial(&mut self, peer: &str) {
        let Ok(m) = &self.mesh else { return };
        if m.conns.values().any(|c| c.peer == peer) {
            // A session (or one being opened) exists; its end re-arms us.
            return;
        }
        let Some(d) = self.dialers.get_mut(peer) else {
            return;
        };
        if matches!(d.state, DialState::Dialing) {
            return;
        }
        self.counters.dials += 1;
        d.state = DialState::Dialing;
        self.io.push(PeerIo::Dial {
            peer: peer.to_string(),
            address: d.settings.address.clone(),
            port: d.settings.port,
            tls: m.tls.clone(),
        });
    }

    fn dial_failed(&mut self, peer: &str, error: String, now: Millis) {
        let has_conn = self
            .mesh
            .as_ref()
            .is_ok_and(|m| m.conns.values().any(|c| c.peer == peer));
        let Some(d) = self.dialers.get_mut(peer) else {
            return;
        };
        d.state = DialState::Waiting;
        d.last_error = Some(error);
        if !has_conn {
            let delay = d.backoff.failed(&mut self.rng);
            self.timers.set(Key::Dial(peer.to_string()), now.0 + delay);
        }
    }

    /// Forgets a connection; re-arms the peer's dialer when it was its
    /// last. `close`: flush first (the instance's Disconnect) rather than
    /// cut. Returns the peer.
    fn drop_conn(&mut self, conn: ConnId, now: Millis, close: bool) -> Option<String> {
        let m = self.mesh.as_mut().ok()?;
        let c = m.conns.remove(&conn)?;
        self.inbox.forget(conn);
        self.io.push(if close {
            close_conn(conn, &c.queue)
        } else {
            PeerIo::Cut { conn }
        });
        let others = m.conns.values().any(|o| o.peer == c.peer);
        if let Some(d) = self.dialers.get_mut(&c.peer) {
            let idle = !others && matches!(d.state, DialState::Waiting);
            if idle {
                let delay = if c.up {
                    d.backoff.session_down(now.0, &mut self.rng)
                } else {
                    d.backoff.failed(&mut self.rng)
                };
                self.timers.set(Key::Dial(c.peer.clone()), now.0 + delay);
            }
        }
        Some(c.peer)
    }

    // ===== the instance =====

    /// Hands `input` to the instance and carries out what it says, until
    /// nothing follows (an output may cause an input, e.g. a peer whose
    /// send queue is full is disconnected).
    fn feed(&mut self, now: Millis, input: mesh::Input, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        let mut pending = VecDeque::from([input]);
        let mut out = Vec::new();
        while let Some(input) = pending.pop_front() {
            let Ok(m) = &mut self.mesh else { break };
            m.instance.handle(now.0, input, &mut out);
            for o in out.drain(..) {
                self.output(o, now, state, &mut changes, &mut pending);
            }
        }
        changes
    }

    fn output(
        &mut self,
        o: Output,
        now: Millis,
        state: &mut State,
        changes: &mut Changes,
        pending: &mut VecDeque<mesh::Input>,
    ) {
        match o {
            Output::Send { conn, msg } => {
                let Ok(m) = &self.mesh else { return };
                let Some(c) = m.conns.get(&conn) else { return };
                let bytes = match frame::encode(&msg, self.settings.max_frame) {
                    Ok(b) => b,
                    Err(e) => {
                        self.counters.frames_too_large += 1;
                        debug::frame_too_large(conn, msg.kind(), &e.to_string());
                        return;
                    }
                };
                if let Err(full) = c.queue.send(bytes, MAX_QUEUE_BYTES) {
                    self.counters.queue_overflows += 1;
                    let error = full.to_string();
                    debug::queue_full(&c.peer, conn, &error);
                    if let Some(peer) = self.drop_conn(conn, now, false) {
                        if let Some(d) = self.dialers.get_mut(&peer) {
                            d.last_error = Some(error.clone());
                        }
                    }
                    pending.push_back(mesh::Input::Disconnected { conn, error });
                }
            }
            Output::Disconnect { conn } => {
                self.drop_conn(conn, now, true);
            }
            Output::SetTimer { timer, at_ms } => self.timers.set(Key::Arpx(timer), at_ms),
            Output::CancelTimer(timer) => self.timers.cancel(&Key::Arpx(timer)),
            Output::PathUp { peer, ad } => {
                let Some(p) = self.settings.peer(&peer) else {
                    return;
                };
                let result: Result<Changes, String> = routes::peer_path(&ad, p)
                    .and_then(|path| path.into_route().map_err(|e| e.to_string()))
                    .and_then(|route| state.upsert_peer_path(route).map_err(|e| e.to_string()));
                match result {
                    Ok(c) => changes.extend(c),
                    Err(e) => {
                        self.counters.paths_refused += 1;
                        debug::path_refused(&peer, &ad.route_id, &e);
                    }
                }
            }
            Output::PathDown { peer, route_id } => {
                if let Ok(id) = RouteId::new(&route_id).and_then(|base| RouteId::via(&base, &peer))
                {
                    changes.extend(state.remove_peer_path(&id));
                }
            }
            Output::PathsDropped { peer, count, last } => {
                let (at, pending) = self.drop_log.entry(peer.clone()).or_insert((0, 0));
                *pending += count;
                if *at == 0 || now.0.saturating_sub(*at) >= DROP_LOG_MS {
                    debug::paths_dropped(&peer, *pending, &last);
                    *at = now.0.max(1);
                    *pending = 0;
                }
            }
            Output::PeerEligible { peer, up } => {
                if up {
                    self.eligible.insert(peer.clone());
                } else {
                    self.eligible.remove(&peer);
                }
                changes.extend(state.set_peer_up(&peer, up));
            }
            Output::SessionUp { peer, conn } => {
                debug::session_up(&peer, conn);
                if let Ok(m) = &mut self.mesh {
                    if let Some(c) = m.conns.get_mut(&conn) {
                        c.up = true;
                    }
                }
                if let Some(d) = self.dialers.get_mut(&peer) {
                    d.backoff.session_up(now.0);
                    d.last_error = None;
                }
                changes.extend(self.link_up(&peer, conn, state));
            }
            Output::SessionDown {
                peer,
                conn,
                close,
                by_us,
                error,
            } => {
                debug::session_down(&peer, conn, close.as_ref(), by_us, error.as_deref());
                // Before the instance's PeerEligible{up: false}, which
                // follows this output: the data plane stops using the
                // peer no later than the RIB does.
                changes.extend(self.link_down(&peer, conn, state));
            }
        }
    }
}
