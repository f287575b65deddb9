//! The running daemon: one loop owns the [`State`]; all I/O happens in
//! child tasks that talk to it over channels.
//!
//! ```text
//!   IpcServer (accept + one task per connection) --ServerEvent--+
//!   signal task (SIGHUP, SIGTERM, SIGINT) --------Input::Signal--+
//!   health round task (probes, bounded fan-out) --Input::Health--+--> Instance::process(input, now)
//!   sleep_until(state.next_deadline()) ------------Input::Timer--+        |
//!   sleep_until(next health round) ----------------Input::HealthRound    +--> Replier::send (reply)
//!                                                                        +--> FibExporter::publish (deltas)
//! ```
//!
//! `process` is the only place state changes, one input at a time, so
//! there are no locks and every reply reflects every earlier input.

use std::collections::HashMap;
use std::time::Duration;

use tokio::sync::mpsc;

use super::options::ConfigSource;
use super::probe::{self, ProbeTarget};
use super::state::{Changes, State};
use crate::config::{self, LoadError, Runtime};
use crate::fib::export::{FibExporter, SubscriberId};
use crate::ipc::message::{IpcError, RequestBody, ResponseBody};
use crate::ipc::server::{ConnId, FibSink, IncomingRequest, ServerEvent};
use crate::route::RouteId;
use crate::time::Millis;
use crate::{log_debug, log_info, log_notice, log_warn};

/// Probes in flight at once during a health round.
const PROBE_FAN_OUT: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGHUP: re-read the configuration.
    Reload,
    /// SIGTERM / SIGINT: stop.
    Terminate,
}

/// Everything the loop reacts to.
#[derive(Debug)]
pub enum Input {
    Ipc(ServerEvent),
    Signal(Signal),
    /// The earliest lease deadline has passed.
    Timer,
    /// Time to start a health round.
    HealthRound,
    /// One probe's verdict.
    Health {
        route_id: RouteId,
        ok: bool,
    },
    /// The running health round finished.
    HealthRoundDone,
    /// Time to write the lease file (changes were coalesced).
    Persist,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Stop,
}

/// Reads the configuration the daemon was started with (also on reload).
/// The default path may be absent on a fresh install: built-in defaults
/// then apply.
pub fn load_config(source: &ConfigSource) -> Result<Runtime, LoadError> {
    match source {
        ConfigSource::Demo => config::load_demo(),
        ConfigSource::Explicit(path) => config::load_file(path),
        ConfigSource::Default => {
            let path = std::path::Path::new(super::options::DEFAULT_CONFIG);
            match config::load_file(path) {
                Err(LoadError::Read {
                    kind: std::io::ErrorKind::NotFound,
                    ..
                }) => {
                    log_warn!("{} not found; running on built-in defaults", path.display());
                    Ok(Runtime::default())
                }
                other => other,
            }
        }
    }
}

#[derive(Debug)]
pub struct Instance {
    state: State,
    source: ConfigSource,
    exporter: FibExporter<FibSink>,
    subscribers: HashMap<ConnId, SubscriberId>,
    /// Our own uid: a client running as it may reload, like root.
    own_uid: u32,
    /// For child tasks that report back (health probes).
    inputs: mpsc::Sender<Input>,
    health_running: bool,
    /// Local leases changed since the lease file was last written.
    dirty: bool,
    boot_id: Box<str>,
}

impl Instance {
    pub fn new(state: State, source: ConfigSource, inputs: mpsc::Sender<Input>) -> Instance {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let own_uid = unsafe { libc::geteuid() };
        Instance {
            state,
            source,
            exporter: FibExporter::new(),
            subscribers: HashMap::new(),
            own_uid,
            inputs,
            health_running: false,
            dirty: false,
            boot_id: super::persist::boot_id(),
        }
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn process(&mut self, input: Input, now: Millis) -> Control {
        match input {
            Input::Ipc(ServerEvent::Request(req)) => self.request(*req, now),
            Input::Ipc(ServerEvent::Disconnected { conn, reason }) => {
                log_debug!("ipc connection {} closed: {reason:?}", conn.0);
                if let Some(id) = self.subscribers.remove(&conn) {
                    self.exporter.unsubscribe(id);
                }
            }
            Input::Signal(Signal::Reload) => {
                let _ = self.reload();
            }
            Input::Signal(Signal::Terminate) => {
                log_notice!("terminating");
                return Control::Stop;
            }
            Input::Timer => {
                let changes = self.state.expire(now);
                if !changes.is_empty() {
                    log_info!("{} lease(s) expired", changes.len());
                }
                self.publish(changes);
            }
            Input::HealthRound => self.start_health_round(),
            Input::Health { route_id, ok } => {
                let changes = self.state.health_result(&route_id, ok);
                if !changes.is_empty() {
                    log_notice!(
                        "route {route_id} is now {}",
                        if ok { "healthy" } else { "unhealthy" }
                    );
                }
                self.publish(changes);
            }
            Input::HealthRoundDone => self.health_running = false,
            Input::Persist => self.persist(),
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
        match body {
            RequestBody::Reload => {
                if peer.uid != 0 && peer.uid != self.own_uid {
                    let reason = format!("uid {} may not reload agentd", peer.uid).into();
                    reply.send(Err(IpcError::PermissionDenied { reason }));
                    return;
                }
                reply.send(
                    self.reload()
                        .map(|generation| ResponseBody::Reloaded { generation }),
                );
            }
            RequestBody::SubscribeFib => {
                let sink = reply.fib_sink();
                reply.send(Ok(ResponseBody::Subscribed));
                match self
                    .exporter
                    .subscribe(sink, self.state.table(), self.state.policy())
                {
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
                let mut handled = self.state.handle(body, now);
                match &mut handled.reply {
                    Ok(ResponseBody::Status(s)) => s.fib_subscribers = self.exporter.len() as u64,
                    Ok(ResponseBody::Stats(s)) => {
                        let e = self.exporter.stats();
                        for (k, v) in [
                            ("fib.subscribers", self.exporter.len() as u64),
                            ("fib.snapshots", e.snapshots),
                            ("fib.deltas", e.deltas),
                            ("fib.dropped", e.dropped),
                        ] {
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
                self.publish(handled.changes);
                reply.send(handled.reply);
            }
        }
    }

    /// Re-reads the configuration; on failure the live state stays.
    pub fn reload(&mut self) -> Result<u64, IpcError> {
        let loaded = load_config(&self.source);
        let old_socket = self.state.runtime().socket.clone();
        match self.state.reload(loaded) {
            Ok((generation, changes)) => {
                let rt = self.state.runtime();
                crate::log::set_level(rt.log_level);
                log_notice!(
                    "configuration {} reloaded: generation {generation}, {} static route(s), {} change(s)",
                    self.source.describe(),
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
                self.publish(changes);
                Ok(generation)
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

    fn publish(&mut self, changes: Changes) {
        if changes.is_empty() {
            return;
        }
        self.dirty = true;
        for gone in self.exporter.publish(self.state.generation(), changes) {
            self.subscribers.retain(|_, id| *id != gone);
        }
    }

    /// Probes every local/static endpoint in a child task; results come
    /// back as inputs. At most one round runs at a time.
    fn start_health_round(&mut self) {
        if self.health_running {
            return;
        }
        let tcp_only = self.state.runtime().health.tcp_only;
        let targets: Vec<(RouteId, ProbeTarget)> = self
            .state
            .probe_targets()
            .into_iter()
            .filter_map(|(id, endpoint)| {
                let target = ProbeTarget::for_endpoint(&endpoint).ok()?;
                Some((id, if tcp_only { target.tcp_only() } else { target }))
            })
            .collect();
        if targets.is_empty() {
            return;
        }
        self.health_running = true;
        let timeout = self.state.runtime().health.timeout;
        let inputs = self.inputs.clone();
        tokio::spawn(health_round(targets, timeout, inputs));
    }

    /// Whether the lease file is behind the table.
    pub fn wants_persist(&self) -> bool {
        self.dirty
    }

    /// Writes the lease file now (coalesced by the loop; also on exit).
    pub fn persist(&mut self) {
        let dir = self.state.runtime().state_dir.clone();
        match super::persist::save(&dir, &self.boot_id, &self.state.local_leases()) {
            Ok(()) => self.dirty = false,
            Err(e) => {
                // Keep `dirty`: the loop retries at its next flush.
                log_warn!(
                    "cannot write {}: {e}",
                    super::persist::path_in(&dir).display()
                );
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

async fn health_round(
    targets: Vec<(RouteId, ProbeTarget)>,
    timeout: Duration,
    inputs: mpsc::Sender<Input>,
) {
    let mut set = tokio::task::JoinSet::new();
    let mut targets = targets.into_iter();
    loop {
        while set.len() < PROBE_FAN_OUT {
            let Some((route_id, target)) = targets.next() else {
                break;
            };
            set.spawn(async move {
                let ok = probe::probe(&target, timeout).await;
                if let Err(e) = &ok {
                    log_debug!(
                        "health probe of {route_id} ({}) failed: {e}",
                        target.authority()
                    );
                }
                (route_id, ok.is_ok())
            });
        }
        let Some(done) = set.join_next().await else {
            break;
        };
        if let Ok((route_id, ok)) = done {
            if inputs.send(Input::Health { route_id, ok }).await.is_err() {
                return;
            }
        }
    }
    let _ = inputs.send(Input::HealthRoundDone).await;
}
