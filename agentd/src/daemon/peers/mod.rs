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
//! * [`crate::backoff`] — when to dial a peer again (sans-IO).
//! * [`routes`] — agentd routes ↔ ARPX, field by field.
//! * `status` — `agentctl peers` and the `arpx.*` counters.
//! * `links` — the established sessions as FIB links for the data plane.
//! * `relay` — the routers the relay roles bring: client routers that
//!   connect to our relay, and the relays we use (DESIGN §7).
//! * [`debug`] — log text.
//!
//! Dialing: every configured peer has a dialer. While the peer has no
//! connection, a dial timer is armed from its backoff; the dial task
//! reports a verified handshake or a failure (kept as the peer's last
//! error, never shown to the instance). Both routers dial; the instance
//! resolves collisions.

pub mod debug;
pub mod inbox;
pub mod io;
mod lifecycle;
mod links;
mod output;
mod relay;
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
use crate::backoff::{Backoff, BackoffConfig, Rng};
use crate::fib::FibChange;
use crate::route::RouteId;
use crate::time::Millis;
use inbox::{ConnEvent, Inbox};
use io::{PeerIo, Serve};
use settings::{MeshSettings, PeerSettings, RelayRole};
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
    /// Client mode: the relay choice has something to do.
    Relay,
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
    /// What the driver runs on: [`Peers::given`] plus the routers the
    /// relay roles brought.
    settings: MeshSettings,
    /// The configured and admitted peers as last handed in.
    given: MeshSettings,
    relay: relay::RelayState,
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
        export: p.relay != RelayRole::Standby,
        relay_client: p.relay == RelayRole::Client,
    }
}

impl Peers {
    /// A driver that is not running yet ([`Peers::start`] starts it once
    /// the RIB holds its restored routes). `identity`: the identity files
    /// of `settings`, read before the loop runs ([`Identity::read`]).
    pub fn new(settings: MeshSettings, identity: Result<Identity, String>) -> Peers {
        let seed = wall_ms() ^ u64::from(std::process::id()).rotate_left(32);
        Peers {
            given: settings.clone(),
            settings,
            relay: relay::RelayState::default(),
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

    /// What the driver runs on now: the configured and admitted peers
    /// plus the routers the relay roles brought.
    pub fn settings(&self) -> &MeshSettings {
        &self.settings
    }

    /// The configured plus admitted peers last handed in (the relay
    /// roles' routers are the driver's own).
    pub fn given(&self) -> &MeshSettings {
        &self.given
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
                Key::Relay => changes.extend(self.relay_poll(now, state)),
            }
        }
        changes.extend(self.relay_settle(now, state));
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
        let mut changes = self.event_inner(ev, now, state);
        changes.extend(self.relay_settle(now, state));
        changes
    }

    fn event_inner(&mut self, ev: PeerEvent, now: Millis, state: &mut State) -> Changes {
        match ev {
            PeerEvent::Handshaken(h) => self.handshaken(*h, now, state),
            PeerEvent::DialFailed {
                relay: Some(i),
                error,
                ..
            } => {
                self.counters.dial_failures += 1;
                self.relay_dial_failed(i, error, now);
                Changes::new()
            }
            PeerEvent::DialFailed {
                peer,
                relay: None,
                error,
            } => {
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
        changes.extend(self.relay_settle(now, state));
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
            ConnEvent::Written => {
                if !self.has_conn(conn) {
                    return Changes::new();
                }
                self.feed(now, mesh::Input::Written { conn }, state)
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
        // A router no peer section names: a relay we dialled, or a client
        // router at our relay; the relay roles decide.
        let mut changes = Changes::new();
        if h.relay.is_some() || self.settings.peer(&h.peer).is_none() {
            match self.relay_handshaken(&h, now, state) {
                Some(c) => changes = c,
                None => return Changes::new(),
            }
        }
        let Ok(m) = &mut self.mesh else {
            return changes;
        };
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
        changes.extend(self.feed(
            now,
            mesh::Input::Connected {
                conn,
                peer: h.peer.clone(),
                peer_key: h.key,
                outbound: h.outbound,
            },
            state,
        ));
        if let Some(i) = h.relay {
            changes.extend(self.relay_up(i, now, state));
        }
        changes
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
        // The relay roles' routers are dialled by the relay choice, or
        // (our relay clients) never.
        if matches!(d.state, DialState::Dialing) || d.settings.relay != RelayRole::None {
            return;
        }
        self.counters.dials += 1;
        d.state = DialState::Dialing;
        self.io.push(PeerIo::Dial {
            peer: peer.to_string(),
            relay: None,
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
        if !others {
            self.relay.session_gone(&c.peer);
        }
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
}
