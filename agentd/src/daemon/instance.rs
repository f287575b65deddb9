//! The running daemon: one loop owns the [`State`]; all I/O happens in
//! child tasks that talk to it over channels.
//!
//! ```text
//!   IpcServer (accept + one task per connection) --ServerEvent--+
//!   signal task (SIGHUP, SIGTERM, SIGINT) --------Input::Signal--+
//!   one task per health probe ---------------------Input::Probed-+--> Instance::process(input, now)
//!   sleep_until(state.next_deadline()) ------------Input::Timer--+        |
//!   sleep_until(monitor.next_wakeup()) ------------Input::ProbeDue       +--> Replier::send (reply)
//!   ARPX tasks (listener, dials, connections) -----Input::Peer   |        +--> FibExporter::publish (deltas)
//!   sleep_until(peers.next_deadline()) ------------Input::PeerTimer       +--> Peers (local route changes,
//!   ARPX connections' inbox (bell) ----------------Input::PeerTurn              frames to peers)
//! ```
//!
//! ARPX: the driver [`Peers`] (see `peers/tasks.rs` for its tasks) turns
//! the mesh instance's decisions into RIB changes, which are published
//! like any other; every published change of a local or static route is
//! offered back to the driver in the same turn.
//!
//! `process` is the only place state changes, one input at a time, so
//! there are no locks and every reply reflects every earlier input. It
//! does no I/O, spawns nothing and never waits: reading the
//! configuration with the identity files it names (reload), rewriting it
//! (approve, revoke), writing the lease file, starting a health probe,
//! the ARPX driver's listener, dials and connections (`peers::io`) and
//! the mDNS start are [`Effect`]s it returns, which the effect
//! [`Driver`](super::effect::Driver) carries out off the loop; their
//! results come back as inputs (`ConfigRead`, `ConfigEdited`,
//! `PersistFailed`, `Probed`, `Peer`, `MdnsFailed`). So a test drives
//! `process` with inputs and reads the effects, without files, sockets
//! or even a runtime (`instance_tests`). mDNS commands never wait on the
//! loop either (see `discovery::mdns`).
//!
//! Health checks: every FIB change passes through the health
//! [`Monitor`] on its way out, so it always knows which local/static route
//! uses which endpoint without scanning the table; it paces probes per
//! endpoint (not per route) under the global `health_max_probes_per_s`
//! cap, and a verdict change comes back as health changes of every route
//! on that endpoint.

use std::collections::HashMap;
use std::path::PathBuf;

use super::discovery::{Discovery, Own};
use super::effect::Effect;
use super::input::{Admission, ConfigEdit, Control, Input, ReloadCause, Signal};
use super::ipv6::Ipv6Service;
use super::options::ConfigSource;
use super::peers::tls::Identity;
use super::peers::Peers;
use super::probe::ProbeTarget;
use super::state::{Changes, State};
use crate::config::{HealthSettings, LoadError, Runtime};
use crate::discovery::approval::EditError;
use crate::fib::export::{FibExporter, SubscriberId};
use crate::fib::FibChange;
use crate::health::monitor::{Monitor, MonitorConfig};
use crate::health::schedule::Pacing;
use crate::ipc::message::{
    AdmissionDone, AdmissionRefusal, IpcError, Ipv6Grant, RequestBody, ResponseBody,
};
use crate::ipc::server::{ConnId, Disconnect, FibSink, IncomingRequest, Replier, ServerEvent};
use crate::route::RouteSource;
use crate::time::Millis;
use crate::{log_debug, log_info, log_notice, log_warn};

/// Health probes running at once, whatever their timeout.
const PROBES_IN_FLIGHT: usize = 32;

#[derive(Debug)]
pub struct Instance {
    state: State,
    source: ConfigSource,
    exporter: FibExporter<FibSink>,
    subscribers: HashMap<ConnId, SubscriberId>,
    /// Our own uid: a client running as it may reload, like root.
    own_uid: u32,
    monitor: Monitor,
    /// Local leases changed since the lease file was last written.
    dirty: bool,
    boot_id: Box<str>,
    /// The ARPX driver.
    peers: Peers,
    /// mDNS and the candidate table.
    discovery: Discovery,
    /// What the input being processed asks the driver to do.
    effects: Vec<Effect>,
    /// When the table has shrunk enough to give memory back.
    trim: super::memory::TrimPolicy,
    /// The per-agent address service (`ipv6.mode`), `None` when off.
    ipv6: Option<Ipv6Service>,
    /// The table generation the addresses were last brought in line with.
    ipv6_seen: u64,
    /// The agent addresses the FIB subscribers hold, sorted.
    agent_addrs: Vec<crate::fib::AgentAddr>,
}

/// Brings up the per-agent address service `rt` configures.
fn start_ipv6(rt: &Runtime) -> Option<Ipv6Service> {
    let env = super::ipv6::Env {
        identity: &rt.mesh.identity,
        dhcp_config: std::path::Path::new(super::ipv6::DHCP_CONFIG),
        odhcpd_running: rt.ipv6.mode != uci_schema::Ipv6Mode::Off && super::ipv6::odhcpd_running(),
    };
    Ipv6Service::start(&rt.ipv6, &env)
}

impl Instance {
    /// `identity`: the identity files the configuration names, read
    /// before the loop runs ([`Identity::read`]).
    pub fn new(state: State, source: ConfigSource, identity: Result<Identity, String>) -> Instance {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own_uid = unsafe { libc::geteuid() };
        let monitor = Monitor::new(monitor_config(&state.runtime().health));
        let peers = Peers::new(state.runtime().mesh.clone(), identity);
        let discovery = Discovery::new(state.runtime().discovery.clone());
        let ipv6 = start_ipv6(state.runtime());
        Instance {
            state,
            source,
            exporter: FibExporter::new(),
            subscribers: HashMap::new(),
            own_uid,
            monitor,
            dirty: false,
            boot_id: super::persist::boot_id(),
            peers,
            discovery,
            effects: Vec::new(),
            trim: super::memory::TrimPolicy::default(),
            ipv6,
            ipv6_seen: u64::MAX,
            agent_addrs: Vec::new(),
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// One input. What it needs done outside (files, probes) is added to
    /// `effects`, for the effect [`Driver`](super::effect::Driver).
    pub fn process(&mut self, input: Input, now: Millis, effects: &mut Vec<Effect>) -> Control {
        let control = self.step(input, now);
        self.sync_ipv6(false);
        if self.trim.observe(self.state.table().len()) {
            self.effects.push(Effect::TrimMemory);
        }
        self.take_effects(effects);
        control
    }

    /// Everything asked for since the last call, in order within each
    /// source: the loop's own effects, the ARPX driver's I/O, an mDNS
    /// start. (`process` calls it; the daemon also after start and stop.)
    pub fn take_effects(&mut self, effects: &mut Vec<Effect>) {
        effects.append(&mut self.effects);
        effects.extend(self.peers.take_io().into_iter().map(Effect::Peer));
        if let Some(start) = self.discovery.take_start() {
            effects.push(Effect::StartMdns(start));
        }
        effects.extend(self.discovery.take_dns().into_iter().map(Effect::Dns));
    }

    fn step(&mut self, input: Input, now: Millis) -> Control {
        match input {
            Input::Ipc(ServerEvent::Request(req)) => self.request(*req, now),
            Input::Ipc(ServerEvent::Disconnected { conn, reason }) => {
                // A clean close is every agentctl call's end: only the
                // others are worth a line (a poll loop would bury them).
                if !matches!(reason, Disconnect::Closed) {
                    log_debug!("ipc connection {} closed: {reason:?}", conn.0);
                }
                if let Some(id) = self.subscribers.remove(&conn) {
                    self.exporter.unsubscribe(id);
                }
            }
            Input::Signal(Signal::Reload) => self.read_config(ReloadCause::Signal),
            Input::Signal(Signal::Terminate) => {
                log_notice!("terminating");
                return Control::Stop;
            }
            Input::Timer => {
                let changes = self.state.expire(now);
                if !changes.is_empty() {
                    log_info!("{} lease(s) expired", changes.len());
                }
                self.publish(changes, now);
            }
            Input::ProbeDue => self.start_probes(now),
            Input::Probed { target, ok } => {
                if let Some(v) = self.monitor.complete(&target, ok) {
                    let changes = self.state.set_health(&v.routes, v.healthy);
                    log_notice!(
                        "endpoint {} is now {}: {} route(s) on it, {} changed",
                        v.target,
                        if v.healthy { "healthy" } else { "unhealthy" },
                        v.routes.len(),
                        changes.len()
                    );
                    self.publish(changes, now);
                }
                self.start_probes(now);
            }
            Input::Persist => {
                if let Some(e) = self.save_leases() {
                    self.effects.push(e);
                }
            }
            Input::PersistFailed { error } => {
                // The loop tries again at its next flush.
                log_warn!("{error}");
                self.dirty = true;
            }
            Input::ConfigRead {
                loaded,
                identity,
                cause,
            } => self.config_read(*loaded, *identity, cause, now),
            Input::ConfigEdited { result, admission } => self.config_edited(result, admission),
            Input::Peer(ev) => {
                let changes = self.peers.event(ev, now, &mut self.state);
                self.publish(changes, now);
            }
            Input::PeerTimer => {
                let changes = self.peers.fire_timers(now, &mut self.state);
                self.publish(changes, now);
            }
            Input::PeerTurn => {
                let changes = self.peers.turn(now, &mut self.state);
                self.publish(changes, now);
            }
            Input::MdnsFailed { serial, error } => self.discovery.start_failed(serial, &error),
            Input::Discovered(ev) => {
                if self.discovery.event(ev, now) {
                    self.apply_admitted(now);
                }
            }
            Input::DnsAnswered { ask, result } => {
                if self.discovery.dns_answered(&ask, *result, now) {
                    self.apply_admitted(now);
                }
            }
            Input::DiscoveryTimer => {
                if self.discovery.expire(now) {
                    self.apply_admitted(now);
                }
            }
        }
        Control::Continue
    }

    fn request(&mut self, req: IncomingRequest, now: Millis) {
        let IncomingRequest {
            peer,
            body,
            reply,
            conn,
            ..
        } = req;
        if let Err(e) = admin_check(&body, peer.uid, self.own_uid) {
            log_notice!("{} from uid {} refused: {e}", body.kind(), peer.uid);
            reply.send(Err(e));
            return;
        }
        match body {
            RequestBody::Reload => self.read_config(ReloadCause::Request(reply)),
            RequestBody::Peers => reply.send(Ok(ResponseBody::Peers(self.peers.view(now)))),
            RequestBody::Candidates => {
                reply.send(Ok(ResponseBody::Candidates(self.discovery.view(now))));
            }
            RequestBody::Approve { router_id, version } => {
                self.admission(true, router_id.into(), version, reply);
            }
            RequestBody::Revoke { router_id, version } => {
                self.admission(false, router_id.into(), version, reply);
            }
            RequestBody::SubscribeFib => {
                let sink = reply.fib_sink();
                reply.send(Ok(ResponseBody::Subscribed));
                match self.exporter.subscribe(
                    sink,
                    self.state.table(),
                    self.state.policy(),
                    self.state.links(),
                    &self.agent_addrs,
                ) {
                    Some(id) => {
                        if let Some(old) = self.subscribers.insert(conn, id) {
                            self.exporter.unsubscribe(old);
                        }
                    }
                    None => log_warn!(
                        "FIB subscriber on connection {} could not take the snapshot",
                        conn.0
                    ),
                }
            }
            body => {
                let kind = body.kind();
                if matches!(body, RequestBody::Register(_) | RequestBody::Renew(_)) {
                    let known = super::peer_addrs::known(&self.peers, &self.discovery, now);
                    self.state.set_peer_addrs(known);
                }
                let wants_ipv6 = matches!(&body, RequestBody::Register(r) if r.public_ipv6);
                let mut handled = self.state.handle(body, now);
                if let (true, Ok(ResponseBody::Lease(grant))) = (wants_ipv6, &mut handled.reply) {
                    self.sync_ipv6(true);
                    grant.public_ipv6 = Some(match &self.ipv6 {
                        Some(v6) => v6.grant(&grant.route_id),
                        None => Ipv6Grant::NotBound {
                            why: crate::ipc::message::Ipv6Refusal::Off,
                            reason: "IPv6 binding is off on this router (ipv6.mode 'off')".into(),
                        },
                    });
                }
                match &mut handled.reply {
                    Ok(ResponseBody::Status(s)) => {
                        s.fib_subscribers = self.exporter.len() as u64;
                        s.nexus_alias = self.discovery.alias_view();
                        s.relay = self.peers.relay_view(now).map(Box::new);
                        s.ipv6 = self.ipv6.as_ref().map(|v| Box::new(v.view()));
                    }
                    Ok(ResponseBody::Stats(s)) => {
                        let e = self.exporter.stats();
                        for (k, v) in [
                            ("fib.subscribers", self.exporter.len() as u64),
                            ("fib.snapshots", e.snapshots),
                            ("fib.deltas", e.deltas),
                            ("fib.dropped", e.dropped),
                            ("health.endpoints", self.monitor.endpoints() as u64),
                            (
                                "health.endpoints_down",
                                self.monitor.endpoints_down() as u64,
                            ),
                            ("health.probes", self.monitor.probes_started()),
                            ("health.probes_ok", self.monitor.probe_results().0),
                            ("health.probes_failed", self.monitor.probe_results().1),
                        ] {
                            s.counters.insert(k.into(), v);
                        }
                        for (k, v) in self.peers.counters() {
                            s.counters.insert(k.into(), v);
                        }
                        for (k, v) in self.discovery.counters() {
                            s.counters.insert(k.into(), v);
                        }
                    }
                    Err(e) => log_debug!("{kind} from uid {} refused: {e}", peer.uid),
                    Ok(_) => {}
                }
                // FIB deltas first: a gateway that sent this request over its
                // subscribed connection then applies the change before it
                // sees the reply (one ordered queue per connection), so an
                // unregister is in effect when the caller hears "removed".
                self.publish(handled.changes, now);
                reply.send(handled.reply);
            }
        }
    }

    /// Asks the driver to read the configuration (a reload).
    fn read_config(&mut self, cause: ReloadCause) {
        self.effects.push(Effect::ReadConfig {
            source: self.source.clone(),
            cause,
        });
    }

    /// The configuration was read: applied, and whoever asked answered.
    fn config_read(
        &mut self,
        loaded: Result<Runtime, LoadError>,
        identity: Result<Identity, String>,
        cause: ReloadCause,
        now: Millis,
    ) {
        let result = self.reload(loaded, identity, now);
        match cause {
            ReloadCause::Signal => {}
            ReloadCause::Request(reply) => {
                reply.send(
                    result.map(|config_generation| ResponseBody::Reloaded { config_generation }),
                );
            }
            ReloadCause::Admission(a, section) => {
                let done = result
                    .map(|generation| AdmissionDone {
                        router_id: a.router_id.as_str().into(),
                        version: a.version,
                        section: section.into(),
                        generation,
                    })
                    .map_err(|e| AdmissionRefusal::ReloadFailed {
                        reason: e.to_string().into(),
                    });
                a.reply.send(Ok(ResponseBody::Admission(done)));
            }
        }
    }

    /// Applies a configuration read from the file; on failure the live
    /// state stays. Returns the configuration generation (applied
    /// configurations, `agentctl status`'s `config_generation`), not the
    /// route table's.
    fn reload(
        &mut self,
        loaded: Result<Runtime, LoadError>,
        identity: Result<Identity, String>,
        now: Millis,
    ) -> Result<u64, IpcError> {
        let old_socket = self.state.runtime().socket.clone();
        match self.state.reload(loaded) {
            Ok((generation, changes)) => {
                let rt = self.state.runtime();
                crate::log::set_level(rt.log_level);
                log_notice!(
                    "configuration {} reloaded: config generation {}, route table generation {generation}, {} static route(s), {} change(s)",
                    self.source.describe(),
                    self.state.config_generation(),
                    rt.static_routes.len(),
                    changes.len()
                );
                if rt.socket != old_socket {
                    log_notice!(
                        "ipc_socket changed to {}; takes effect on restart",
                        rt.socket.display()
                    );
                }
                if let Some(reason) = &rt.policy.invalid {
                    log_warn!("policy invalid, denying every request: {reason}");
                }
                for advice in rt.advice() {
                    log_warn!("{advice}");
                }
                self.publish(changes, now);
                // Discovery first (the admission policy may have changed
                // which candidates are peers), then the mesh with both,
                // then discovery again with the identity the mesh runs.
                let own = self.own();
                let settings = self.state.runtime().discovery.clone();
                self.discovery.configure(settings.clone(), own, now);
                let mesh = self.discovery.mesh(&self.state.runtime().mesh);
                self.state.set_admitted(self.discovery.admitted_ids());
                let changes = self
                    .peers
                    .reconfigure(mesh, Some(identity), now, &mut self.state);
                self.publish(changes, now);
                if self.discovery.configure(settings, self.own(), now) {
                    self.apply_admitted(now);
                }
                // Check kind, pacing or thresholds may have changed.
                self.sync_health(now);
                let rt = self.state.runtime();
                let same = match &self.ipv6 {
                    Some(s) => s.same_config(&rt.ipv6),
                    None => rt.ipv6.mode == uci_schema::Ipv6Mode::Off,
                };
                if !same {
                    if let Some(old) = self.ipv6.take() {
                        old.stop();
                    }
                    self.ipv6 = start_ipv6(self.state.runtime());
                    self.sync_ipv6(true);
                }
                Ok(self.state.config_generation())
            }
            Err(e) => {
                log_warn!(
                    "reload of {} refused, keeping the running configuration: {e}",
                    self.source.describe()
                );
                Err(e)
            }
        }
    }

    /// Brings the per-agent addresses in line with the routes that asked
    /// for one, when the table changed since the last time (or `force`:
    /// a registration that asks needs its answer now).
    /// What was bound or released goes out to the FIB subscribers at once
    /// (agent-gw serves exactly the bound addresses).
    fn sync_ipv6(&mut self, force: bool) {
        let generation = self.state.table().generation();
        let bound = match &mut self.ipv6 {
            None => Vec::new(),
            Some(v6) if !force && generation == self.ipv6_seen => return,
            Some(v6) => {
                self.ipv6_seen = generation;
                v6.reconcile(&self.state.ipv6_wanted());
                v6.agent_addrs()
            }
        };
        let changes = crate::fib::agent_addrs::changes(&mut self.agent_addrs, bound);
        for gone in self.exporter.publish(generation, changes) {
            self.subscribers.retain(|_, id| *id != gone);
        }
    }

    /// Publishes FIB changes, and offers those of local/static routes to
    /// the ARPX driver in the same turn (a lease that ends here is
    /// withdrawn from every peer now, not at some later poll). What the
    /// driver's answer changes in the RIB (rarely anything: our own
    /// routes do not touch peer paths) is published right after.
    fn publish(&mut self, changes: Changes, now: Millis) {
        let mut batch = changes;
        // This ends: the driver reacts only to changes of local/static
        // routes, and what it changes is peer paths and peer marks only,
        // which it does not react to. So the second batch is the last.
        while !batch.is_empty() {
            self.watch(&mut batch, now);
            for change in batch.iter() {
                if let FibChange::Unlink(peer) = change {
                    self.discovery.session_lost(peer);
                }
            }
            // Peer paths are not in the lease file: their churn writes
            // nothing.
            self.dirty |= batch.iter().any(|c| match c {
                FibChange::Upsert(r) => !matches!(r.source, RouteSource::Peer | RouteSource::Relay),
                FibChange::Remove(id) => id.next_hop().is_none(),
                FibChange::Policy(_) => true,
                _ => false,
            });
            let exports = self.peers.exports_of(&batch, now);
            for gone in self.exporter.publish(self.state.generation(), batch) {
                self.subscribers.retain(|_, id| *id != gone);
            }
            batch = self.peers.feed_all(exports, now, &mut self.state);
        }
    }

    /// Starts the ARPX driver (after the restored leases are in the RIB,
    /// so the first snapshot carries them).
    pub fn start_peers(&mut self, now: Millis) {
        let changes = self.peers.start(now, &mut self.state);
        self.publish(changes, now);
    }

    /// Starts discovery (after the mesh: it announces the mesh's key).
    pub fn start_discovery(&mut self, now: Millis) {
        let settings = self.state.runtime().discovery.clone();
        if self.discovery.configure(settings, self.own(), now) {
            self.apply_admitted(now);
        }
    }

    /// When the earliest candidate expires.
    pub fn next_discovery_timer(&self) -> Option<Millis> {
        self.discovery.next_deadline()
    }

    /// Withdraws our mDNS announcements (goodbyes) at daemon stop;
    /// returns what to wait on for them to be sent.
    pub fn stop_discovery(&mut self) -> Option<super::discovery::mdns::MdnsStopped> {
        self.discovery.stop()
    }

    /// Who we are for discovery: the configured router_id, the key the
    /// mesh runs with, the domain and whether a domain CA is set.
    fn own(&self) -> Own {
        let m = &self.state.runtime().mesh;
        Own {
            router_id: m.router_id.clone(),
            fingerprint: self.peers.fingerprint().and_then(|f| f.parse().ok()),
            domain: m.domain.clone(),
            domain_ca: m.domain_ca.is_some(),
        }
    }

    /// Hands the ARPX driver the configured peers plus the candidates
    /// admitted right now (when that differs from what it runs).
    fn apply_admitted(&mut self, now: Millis) {
        let mesh = self.discovery.mesh(&self.state.runtime().mesh);
        self.state.set_admitted(self.discovery.admitted_ids());
        if &mesh == self.peers.given() {
            return;
        }
        let changes = self.peers.reconfigure(mesh, None, now, &mut self.state);
        self.publish(changes, now);
    }

    /// `approve` (write a discovered peer section) or `revoke` (remove
    /// it): the driver edits the file ([`Effect::EditConfig`]), then the
    /// configuration is read again so the ARPX driver follows the file,
    /// and the request is answered.
    fn admission(&mut self, approve: bool, router_id: String, version: u32, reply: Replier) {
        let path = match &self.source {
            ConfigSource::Explicit(p) => p.clone(),
            ConfigSource::Default => PathBuf::from(super::options::DEFAULT_CONFIG),
            ConfigSource::Demo => {
                reply.send(Ok(ResponseBody::Admission(Err(
                    AdmissionRefusal::NoConfigFile,
                ))));
                return;
            }
        };
        let edit = if approve {
            match self.discovery.check_approve(&router_id, version) {
                Ok(c) => ConfigEdit::Approve(Box::new(c)),
                Err(refused) => {
                    reply.send(Ok(ResponseBody::Admission(Err(refused))));
                    return;
                }
            }
        } else {
            ConfigEdit::Revoke {
                router_id: router_id.clone(),
                version,
            }
        };
        self.effects.push(Effect::EditConfig {
            edit,
            admission: Admission {
                approve,
                router_id,
                version,
                path,
                reply,
            },
        });
    }

    /// The config file was edited for an approve or revoke.
    fn config_edited(&mut self, result: Result<String, EditError>, a: Admission) {
        let section = match result {
            Ok(section) => section,
            Err(e) => {
                let refused = match e {
                    EditError::NotApproved { router_id } => AdmissionRefusal::NotApproved {
                        router_id: router_id.into(),
                    },
                    EditError::VersionMismatch {
                        router_id,
                        asked,
                        approved,
                    } => AdmissionRefusal::VersionMismatch {
                        router_id: router_id.into(),
                        asked,
                        current: approved,
                    },
                    EditError::StaticPeer { router_id, section } => AdmissionRefusal::StaticPeer {
                        router_id: router_id.into(),
                        section: section.into(),
                    },
                    EditError::Invalid(reason) => AdmissionRefusal::ConfigInvalid {
                        reason: reason.into(),
                    },
                    EditError::Io(reason) => AdmissionRefusal::WriteFailed {
                        reason: reason.into(),
                    },
                };
                a.reply.send(Ok(ResponseBody::Admission(Err(refused))));
                return;
            }
        };
        log_notice!(
            "discovery: {} router {} at record version {} ({} {section} in {})",
            if a.approve { "approved" } else { "revoked" },
            a.router_id,
            a.version,
            if a.approve { "wrote" } else { "removed" },
            a.path.display()
        );
        self.read_config(ReloadCause::Admission(a, section));
    }

    /// Rung when an ARPX connection has frames for a turn.
    pub fn peer_bell(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.peers.bell()
    }

    /// Whether an ARPX connection has frames waiting for a turn.
    pub fn peer_turn_ready(&self) -> bool {
        self.peers.has_turn()
    }

    /// The ARPX driver, for tests of what it shows.
    #[cfg(test)]
    pub(crate) fn peers(&self) -> &Peers {
        &self.peers
    }

    /// Discovery, for tests of what it shows.
    #[cfg(test)]
    pub(crate) fn discovery(&self) -> &Discovery {
        &self.discovery
    }

    /// When the ARPX driver's next timer is due.
    pub fn next_peer_timer(&self) -> Option<Millis> {
        self.peers.next_deadline()
    }

    /// Closes every ARPX session (admin_shutdown) at daemon stop (the
    /// Close frames are queued; [`Instance::take_effects`] has the rest).
    pub fn stop_peers(&mut self, now: Millis) {
        let _ = self.peers.stop(now, &mut self.state);
    }

    /// Tells the health monitor about every route change before it goes
    /// out. A route that joins an endpoint known to be down is marked down
    /// in the table and in the change itself, so no FIB replica ever sees
    /// it eligible.
    fn watch(&mut self, changes: &mut Changes, now: Millis) {
        for change in changes.iter_mut() {
            match change {
                FibChange::Upsert(route)
                    if matches!(route.source, RouteSource::Local | RouteSource::Static) =>
                {
                    let verdict =
                        self.monitor
                            .track(&route.id, &route.endpoint, route.healthy, now);
                    if let Some(healthy) = verdict {
                        // Same route, same verdict: the change carries it.
                        let _ = self
                            .state
                            .set_health(std::slice::from_ref(&route.id), healthy);
                        route.healthy = healthy;
                    }
                }
                FibChange::Upsert(route) => self.monitor.untrack(&route.id),
                FibChange::Remove(id) => self.monitor.untrack(id),
                _ => {}
            }
        }
    }

    /// Hands every local/static route to the health monitor again, under
    /// the running configuration (startup after restoring leases, reload).
    pub fn sync_health(&mut self, now: Millis) {
        let cfg = monitor_config(&self.state.runtime().health);
        let fixes = self.monitor.sync(cfg, self.state.probe_targets(), now);
        let mut changes = Changes::new();
        for (id, healthy) in fixes {
            changes.extend(self.state.set_health(&[id], healthy));
        }
        log_info!(
            "health checks: {} endpoint(s) for {} route(s)",
            self.monitor.endpoints(),
            self.monitor.routes()
        );
        self.publish(changes, now);
    }

    /// When the health monitor next wants to start a probe.
    pub fn next_probe(&mut self) -> Option<Millis> {
        self.monitor.next_wakeup()
    }

    /// The probes the monitor hands out now, as effects (each runs in its
    /// own task that reports back as `Input::Probed`).
    fn start_probes(&mut self, now: Millis) {
        let timeout = self.state.runtime().health.timeout;
        while let Some(target) = self.monitor.poll(now) {
            let guard = self.probe_guard(&target);
            self.effects.push(Effect::Probe {
                target,
                guard,
                timeout,
            });
        }
    }

    /// The endpoint rules a probe of `target` connects under: the
    /// router's, with loopback allowed when a route on it was granted
    /// that (`route.allow_loopback`, the lab option, a pinned agent).
    fn probe_guard(&self, target: &ProbeTarget) -> crate::endpoint::Guard {
        let mut guard = self.state.runtime().endpoints.clone();
        let table = self.state.table();
        guard.allow_loopback = guard.allow_loopback
            || self
                .monitor
                .routes_on(target)
                .any(|id| table.get(id).is_some_and(|r| r.allow_loopback));
        guard
    }

    /// Whether the lease file is behind the table.
    pub fn wants_persist(&self) -> bool {
        self.dirty
    }

    /// The lease file's contents as an effect, when it is behind the
    /// table (coalesced by the loop; also at exit, where the driver saves
    /// it at once). A failed write comes back as `Input::PersistFailed`.
    pub fn save_leases(&mut self) -> Option<Effect> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        match super::persist::encode(&self.boot_id, self.state.local_lease_refs()) {
            Ok(file) => Some(Effect::SaveLeases {
                dir: self.state.runtime().state_dir.clone(),
                file,
            }),
            Err(e) => {
                crate::log_error!("cannot encode the lease file: {e}");
                None
            }
        }
    }

    /// Takes back the leases a previous agentd process saved.
    pub fn restore(&mut self, now: Millis) {
        let dir = self.state.runtime().state_dir.clone();
        let path = super::persist::path_in(&dir);
        match super::persist::load(&dir, &self.boot_id) {
            Ok(saved) if saved.is_empty() => {}
            Ok(saved) => {
                let offered = saved.len();
                let restored = self.state.restore(saved, now);
                log_notice!(
                    "restored {restored} of {offered} local lease(s) from {}",
                    path.display()
                );
            }
            Err(e) => log_warn!("ignoring {}: {e}", path.display()),
        }
        // The restored routes that asked for an address get it back.
        self.sync_ipv6(true);
    }

    /// Closes every FIB subscription (shutdown).
    pub fn close_subscribers(&mut self) {
        for (_, id) in self.subscribers.drain() {
            if let Some(sink) = self.exporter.unsubscribe(id) {
                sink.close();
            }
        }
    }
}

/// The monitor's view of the health options.
fn monitor_config(h: &HealthSettings) -> MonitorConfig {
    MonitorConfig {
        enabled: h.interval.is_some(),
        tcp_only: h.tcp_only,
        pacing: Pacing {
            interval_ms: h.interval.map_or(u64::MAX, |d| {
                u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
            }),
            max_per_s: h.max_probes_per_s,
            max_in_flight: PROBES_IN_FLIGHT,
        },
        thresholds: h.thresholds,
    }
}

/// Admin commands (reload, flush, an operator's unregister) change state
/// for everyone, so only root and agentd's own user may send them; the
/// gateway's service user may use the socket too, but only for what the
/// data plane needs (register/renew/unregister on behalf of a proven
/// caller, FIB, stats). A compromised gateway thus cannot flush the RIB.
fn admin_check(body: &RequestBody, uid: u32, own_uid: u32) -> Result<(), IpcError> {
    if !body.is_admin_command() || uid == 0 || uid == own_uid {
        return Ok(());
    }
    Err(IpcError::PermissionDenied {
        reason: format!(
            "uid {uid} may not send '{}' (root or agentd's own user only)",
            body.kind()
        )
        .into(),
    })
}

#[cfg(test)]
mod admin_tests {
    use super::*;

    #[test]
    fn only_root_and_agentds_user_may_send_admin_commands() {
        let own = 1000;
        let gateway = 1001;
        let flush = RequestBody::Flush {
            origin: "agent://lab/a".into(),
        };
        for body in [RequestBody::Reload, flush] {
            assert!(admin_check(&body, 0, own).is_ok());
            assert!(admin_check(&body, own, own).is_ok());
            let err = admin_check(&body, gateway, own).unwrap_err();
            assert!(
                matches!(&err, IpcError::PermissionDenied { reason } if reason.contains("uid 1001")),
                "{err:?}"
            );
        }
        // What the gateway's user needs stays open to it.
        assert!(admin_check(&RequestBody::Status, gateway, own).is_ok());
        assert!(admin_check(&RequestBody::SubscribeFib, gateway, own).is_ok());
    }
}
