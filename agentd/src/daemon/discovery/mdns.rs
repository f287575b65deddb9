//! The mDNS side of discovery, on the `mdns-sd` crate: it runs one
//! thread of its own (its sockets, its timers, RFC 6762 probing,
//! announcing, cache maintenance and goodbyes); we talk to it through its
//! bounded command channel (100 entries: a full channel answers `Again`)
//! and read its browse events on one bridge thread that forwards them,
//! already reduced to plain data, into the daemon's event loop. Nothing
//! polls: the loop wakes when an event arrives.
//!
//! The loop never waits on mdns-sd. Its start (the mdns-sd daemon with
//! its sockets, three commands into its fresh, empty channel, and our two
//! threads) is an [`MdnsStart`] the daemon's effect driver runs off the
//! loop, and every command (register, unregister, verify,
//! shutdown) goes in order to a command thread of ours, which retries
//! `Again` a bounded number of times with a pause, on its own time, and
//! logs what still fails.
//!
//! Announced: `_arpx._tcp.local.` (instance and host = router_id, SRV
//! port = ARPX port, the TXT record of `discovery::record`) and
//! `_agentd._tcp.local.` (the SDK API port), on the configured
//! interfaces only, with their current addresses (mdns-sd follows
//! address changes). Browsed: `_arpx._tcp.local.`.
//!
//! The host name `nexus-router.local.` ([`ALIAS_HOST`]), which agents
//! written for the Nexus SDK resolve, is claimed as RFC 6762 asks of a
//! unique name, and given up to any other device that holds it:
//!
//! 1. first a bounded lookup of the name (two seconds, two queries):
//!    if anyone but us answers it, we defer without ever sending a
//!    probe (the command thread waits for it, so a stop within those
//!    two seconds sends its goodbyes late);
//! 2. else a registration whose host is that name: mdns-sd probes it
//!    (§8.1, with §8.2 tie-breaking) before announcing it;
//! 3. if its probe meets a conflict, mdns-sd renames the host (§9) and
//!    reports a name change; we then withdraw the registration, so the
//!    renamed host is never kept.
//!
//! mdns-sd answers address queries only for hosts of registered
//! services, so the name rides on a service of its own,
//! `_agentd-nexus._tcp` ([`ALIAS_SERVICE`]: the SDK API's port). A name
//! given up stays given up for the life of this mdns-sd instance (a
//! restart of agentd or of discovery claims it afresh).

use std::net::IpAddr;
use std::time::Duration;

use mdns_sd::{IfKind, ServiceDaemon, ServiceEvent, ServiceInfo};
use tokio::sync::mpsc;

use super::super::input::Input;
use crate::discovery::record::Record;
use crate::log_warn;

pub const ARPX_SERVICE: &str = "_arpx._tcp.local.";
pub const SDK_SERVICE: &str = "_agentd._tcp.local.";
/// The host name the Nexus SDK resolves before it falls back to the
/// default gateway.
pub const ALIAS_HOST: &str = "nexus-router.local.";
/// The service that carries [`ALIAS_HOST`] (see the module).
pub const ALIAS_SERVICE: &str = "_agentd-nexus._tcp.local.";
/// [`ALIAS_HOST`] as people write it.
pub fn alias_name() -> &'static str {
    ALIAS_HOST.trim_end_matches('.')
}

/// How long the alias is looked up before it is claimed: long enough
/// for mdns-sd's second query (one second after the first), since a
/// responder that has just multicast its record does not repeat it
/// within a second (RFC 6762 §6), and a device that has just taken the
/// name (its announcement) would let the first query go unanswered.
const ALIAS_LOOKUP: Duration = Duration::from_millis(2000);

/// Tries of one command while mdns-sd's channel is full, and the pause
/// between them: at most ~100 ms of the command thread (never the event
/// loop), for a queue that mdns-sd's thread drains in microseconds.
const AGAIN_TRIES: u32 = 20;
const AGAIN_PAUSE: Duration = Duration::from_millis(5);

/// A browse event, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MdnsEvent {
    /// An `_arpx._tcp` instance resolved (new or changed).
    Resolved(Resolved),
    /// Its records were withdrawn (goodbye) or expired.
    Removed { fullname: String },
    /// Our claim on [`ALIAS_HOST`] moved on.
    Alias(AliasState),
}

/// Where our claim on [`ALIAS_HOST`] stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AliasState {
    /// Looking the name up, then probing it.
    Claiming,
    /// Probed and announced: we answer it.
    Answering,
    /// Another device holds it; we do not answer it. Says what showed it.
    Deferred(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub fullname: String,
    pub port: u16,
    pub addresses: Vec<IpAddr>,
    /// TXT strings as key and optional value bytes.
    pub txt: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// What we announce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    pub router_id: String,
    /// `_arpx._tcp`: our record and the ARPX port (`None`: not
    /// announced; discovery says why).
    pub arpx: Option<(Record, u16)>,
    pub sdk_port: Option<u16>,
    /// Claim [`ALIAS_HOST`] (with the SDK API's port).
    pub alias: bool,
}

/// The instance label of a full service name (`router-b._arpx._tcp.local.`
/// → `router-b`).
pub fn instance_of(fullname: &str) -> &str {
    fullname
        .strip_suffix(ARPX_SERVICE)
        .and_then(|s| s.strip_suffix('.'))
        .unwrap_or(fullname)
}

/// Runs `f` until it answers something else than `Again`, at most
/// [`AGAIN_TRIES`] times with [`AGAIN_PAUSE`] between: on the command
/// thread only.
fn retry<T>(mut f: impl FnMut() -> mdns_sd::Result<T>) -> Result<T, String> {
    for _ in 1..AGAIN_TRIES {
        match f() {
            Err(mdns_sd::Error::Again) => std::thread::sleep(AGAIN_PAUSE),
            other => return other.map_err(|e| e.to_string()),
        }
    }
    f().map_err(|e| e.to_string())
}

/// Once, for the start: mdns-sd's channel is new and empty, so `Again`
/// cannot happen; if it does, the start fails (and says so) rather than
/// wait.
fn once<T>(f: impl FnOnce() -> mdns_sd::Result<T>) -> Result<T, String> {
    f().map_err(|e| e.to_string())
}

/// What the command thread sends to mdns-sd, in order.
#[derive(Debug)]
enum Command {
    Register(Box<ServiceInfo>),
    /// Register the alias service unless someone else answers
    /// [`ALIAS_HOST`] (see the module).
    ClaimAlias(Box<ServiceInfo>),
    Unregister(String),
    Verify(String),
    /// Shut mdns-sd down (goodbyes out, bounded) and end the thread.
    Shutdown,
}

/// Who else answers [`ALIAS_HOST`]: their addresses, if any answer
/// within [`ALIAS_LOOKUP`]. Our own addresses do not count (mdns-sd may
/// still hold our earlier answers in its cache).
fn alias_holder(daemon: &ServiceDaemon) -> Result<Option<Vec<IpAddr>>, String> {
    use mdns_sd::HostnameResolutionEvent as H;
    let ms = u64::try_from(ALIAS_LOOKUP.as_millis()).unwrap_or(u64::MAX);
    let events = retry(|| daemon.resolve_hostname(ALIAS_HOST, Some(ms)))?;
    let ours = crate::endpoint::local_addrs().addrs;
    // mdns-sd ends the search itself at the timeout; this bound only
    // guards against a search that never reports.
    let deadline = std::time::Instant::now() + ALIAS_LOOKUP + Duration::from_millis(500);
    // The whole lookup: every address the holder answers (A and AAAA
    // come separately), IPv4 first.
    let mut found = std::collections::BTreeSet::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(H::AddressesFound(_, addrs)) => found.extend(
                addrs
                    .iter()
                    .map(|a| a.to_ip_addr())
                    .filter(|a| !ours.contains(a)),
            ),
            Ok(H::SearchTimeout(_) | H::SearchStopped(_)) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let found = (!found.is_empty()).then(|| found.into_iter().collect());
    let _ = retry(|| daemon.stop_resolve_hostname(ALIAS_HOST));
    Ok(found)
}

fn alias_event(inputs: &mpsc::Sender<Input>, state: AliasState) {
    let _ = inputs.blocking_send(Input::Discovered(MdnsEvent::Alias(state)));
}

/// The command thread: mdns-sd commands, in order, retried on `Again`.
fn run_commands(
    daemon: ServiceDaemon,
    commands: std::sync::mpsc::Receiver<Command>,
    inputs: mpsc::Sender<Input>,
) {
    while let Ok(cmd) = commands.recv() {
        let (what, result) = match cmd {
            Command::Register(info) => {
                let name = info.get_fullname().to_string();
                (name, retry(|| daemon.register((*info).clone())).map(drop))
            }
            Command::ClaimAlias(info) => {
                let name = info.get_fullname().to_string();
                alias_event(&inputs, AliasState::Claiming);
                let result = match alias_holder(&daemon) {
                    Ok(Some(holder)) => {
                        let list: Vec<String> = holder.iter().map(IpAddr::to_string).collect();
                        alias_event(
                            &inputs,
                            AliasState::Deferred(format!(
                                "{} answers {} (looked up before claiming it)",
                                list.join(", "),
                                alias_name()
                            )),
                        );
                        Ok(())
                    }
                    Ok(None) => retry(|| daemon.register((*info).clone())).map(drop),
                    Err(e) => Err(e),
                };
                (name, result)
            }
            // The goodbye is sent by the mdns-sd thread; its status
            // channel is not waited for.
            Command::Unregister(name) => {
                let r = retry(|| daemon.unregister(&name)).map(drop);
                (name, r)
            }
            Command::Verify(name) => {
                let r = retry(|| daemon.verify(name.clone(), mdns_sd::VERIFY_TIMEOUT_DEFAULT));
                (name, r)
            }
            Command::Shutdown => {
                if let Ok(done) = retry(|| daemon.shutdown()) {
                    // Bounded: the goodbyes go out before its thread exits.
                    let _ = done.recv_timeout(Duration::from_secs(1));
                }
                return;
            }
        };
        if let Err(e) = result {
            log_warn!("discovery: mDNS command for {what} failed: {e}");
        }
    }
}

/// One registered service, as far as telling a change needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Registered {
    fullname: String,
    port: u16,
    txt: Vec<String>,
    alias: bool,
}

/// A running mDNS responder and browser.
pub struct Mdns {
    /// To the command thread (see the module).
    commands: std::sync::mpsc::Sender<Command>,
    interfaces: Vec<String>,
    /// What we registered.
    registered: Vec<Registered>,
    /// [`ALIAS_HOST`] was given up (see the module).
    alias_deferred: bool,
    /// Ends when the command thread does (see [`MdnsStopped`]).
    ended: std::sync::mpsc::Receiver<()>,
}

impl std::fmt::Debug for Mdns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mdns")
            .field("interfaces", &self.interfaces)
            .field("registered", &self.registered)
            .finish_non_exhaustive()
    }
}

/// The start of an mDNS responder and browser, to be carried out off the
/// event loop ([`MdnsStart::run`]): mdns-sd's sockets and threads.
pub struct MdnsStart {
    /// Numbers the starts of this process; a failure report names it.
    pub serial: u64,
    interfaces: Vec<String>,
    commands: std::sync::mpsc::Receiver<Command>,
    /// Dropped by the command thread when it ends (after the shutdown's
    /// goodbyes), or with this start if it never runs.
    done: std::sync::mpsc::Sender<()>,
}

/// A stopped mDNS handle: its goodbyes are on their way (see
/// [`MdnsStopped::wait`]).
#[derive(Debug)]
pub struct MdnsStopped(std::sync::mpsc::Receiver<()>);

impl MdnsStopped {
    /// Blocks until the command thread has handed the goodbyes to
    /// mdns-sd and it shut down, at most `limit`. For the daemon's exit
    /// only: a process that ends first takes the goodbyes with it, and
    /// other routers then keep our candidate for the records' TTL.
    pub fn wait(self, limit: Duration) {
        // Nothing is ever sent: the thread's end drops the sender.
        let _ = self.0.recv_timeout(limit);
    }
}

impl std::fmt::Debug for MdnsStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MdnsStart({}: {:?})", self.serial, self.interfaces)
    }
}

impl Mdns {
    /// An mDNS handle on `interfaces` and the start that makes it run.
    /// No I/O: commands given to the handle wait in its channel until
    /// the start has set mdns-sd up.
    pub fn new(interfaces: &[String], serial: u64) -> (Mdns, MdnsStart) {
        let (commands, rx) = std::sync::mpsc::channel();
        let (done, ended) = std::sync::mpsc::channel();
        let mdns = Mdns {
            commands,
            interfaces: interfaces.to_vec(),
            registered: Vec::new(),
            alias_deferred: false,
            ended,
        };
        let start = MdnsStart {
            serial,
            interfaces: interfaces.to_vec(),
            commands: rx,
            done,
        };
        (mdns, start)
    }
}

impl MdnsStart {
    /// Starts mdns-sd on the interfaces only, browses `_arpx._tcp` (its
    /// events go to `inputs`) and then the command thread, which takes
    /// the handle's commands in order.
    pub fn run(self, inputs: mpsc::Sender<Input>) -> Result<(), String> {
        let MdnsStart {
            interfaces,
            commands: rx,
            done,
            ..
        } = self;
        let daemon = ServiceDaemon::new().map_err(|e| e.to_string())?;
        let started = Mdns::browse(&daemon, &interfaces);
        let events = match started {
            Ok(events) => events,
            Err(e) => {
                let _ = daemon.shutdown();
                return Err(e);
            }
        };
        let monitor = match daemon.monitor() {
            Ok(m) => m,
            Err(e) => {
                let _ = daemon.shutdown();
                return Err(format!("mDNS monitor: {e}"));
            }
        };
        let cmd_inputs = inputs.clone();
        std::thread::Builder::new()
            .name("agentd-mdns-cmd".into())
            .spawn(move || {
                run_commands(daemon, rx, cmd_inputs);
                drop(done);
            })
            .map_err(|e| format!("cannot start the mDNS command thread: {e}"))?;
        let mon_inputs = inputs.clone();
        std::thread::Builder::new()
            .name("agentd-mdns-mon".into())
            .spawn(move || watch_alias(monitor, mon_inputs))
            .map_err(|e| format!("cannot start the mDNS monitor thread: {e}"))?;
        std::thread::Builder::new()
            .name("agentd-mdns".into())
            .spawn(move || {
                // Ends when mdns-sd drops the sender (shutdown) or the
                // event loop is gone.
                while let Ok(ev) = events.recv() {
                    let ev = match ev {
                        ServiceEvent::ServiceResolved(r) => MdnsEvent::Resolved(Resolved {
                            fullname: r.fullname.clone(),
                            port: r.port,
                            addresses: r.addresses.iter().map(|a| a.to_ip_addr()).collect(),
                            txt: r
                                .txt_properties
                                .iter()
                                .map(|p| (p.key().as_bytes().to_vec(), p.val().map(<[u8]>::to_vec)))
                                .collect(),
                        }),
                        ServiceEvent::ServiceRemoved(_, fullname) => {
                            MdnsEvent::Removed { fullname }
                        }
                        _ => continue,
                    };
                    if inputs.blocking_send(Input::Discovered(ev)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot start the mDNS bridge thread: {e}"))?;
        Ok(())
    }
}

/// Forwards what mdns-sd reports about the alias: its announcement, or
/// the rename its probe forced (a conflict). Ends with mdns-sd.
fn watch_alias(events: mdns_sd::Receiver<mdns_sd::DaemonEvent>, inputs: mpsc::Sender<Input>) {
    use mdns_sd::DaemonEvent as D;
    while let Ok(ev) = events.recv() {
        let state = match ev {
            D::Announce(name, _) if name.ends_with(ALIAS_SERVICE) => AliasState::Answering,
            D::NameChange(c) if c.original.eq_ignore_ascii_case(ALIAS_HOST) => {
                AliasState::Deferred(format!(
                    "another device claimed {} while we probed it (RFC 6762 §8.2/§9; mDNS would have renamed us {})",
                    alias_name(),
                    c.new_name.trim_end_matches('.')
                ))
            }
            _ => continue,
        };
        if inputs
            .blocking_send(Input::Discovered(MdnsEvent::Alias(state)))
            .is_err()
        {
            return;
        }
    }
}

impl Mdns {
    /// Restricts mdns-sd to `interfaces` and browses `_arpx._tcp`.
    fn browse(
        daemon: &ServiceDaemon,
        interfaces: &[String],
    ) -> Result<mdns_sd::Receiver<ServiceEvent>, String> {
        once(|| daemon.disable_interface(IfKind::All))?;
        let names: Vec<IfKind> = interfaces.iter().map(IfKind::from).collect();
        if !names.is_empty() {
            once(|| daemon.enable_interface(names))?;
        }
        once(|| daemon.browse(ARPX_SERVICE))
    }

    fn send(&self, cmd: Command) -> Result<(), String> {
        self.commands
            .send(cmd)
            .map_err(|_| "the mDNS command thread has ended".to_string())
    }

    pub fn interfaces(&self) -> &[String] {
        &self.interfaces
    }

    /// Replaces what we announce (`None`: nothing). Records that change
    /// or go are withdrawn with goodbyes first; unchanged ones stay (an
    /// alias we hold is not probed again). A deferred alias is not
    /// claimed again.
    pub fn announce(&mut self, what: Option<&Announcement>) -> Result<(), String> {
        let wanted = match what {
            Some(a) => self.services(a)?,
            None => Vec::new(),
        };
        let keep: Vec<Registered> = std::mem::take(&mut self.registered)
            .into_iter()
            .filter_map(|r| {
                if wanted.iter().any(|(w, _)| *w == r) {
                    Some(r)
                } else {
                    let _ = self.send(Command::Unregister(r.fullname));
                    None
                }
            })
            .collect();
        self.registered = keep;
        for (reg, info) in wanted {
            if self.registered.contains(&reg) {
                continue;
            }
            let cmd = if reg.alias {
                Command::ClaimAlias(info)
            } else {
                Command::Register(info)
            };
            self.send(cmd)?;
            self.registered.push(reg);
        }
        Ok(())
    }

    /// The services `a` asks for, each with what identifies its records.
    fn services(&self, a: &Announcement) -> Result<Vec<(Registered, Box<ServiceInfo>)>, String> {
        let rid = &a.router_id;
        let own_host = format!("{rid}.local.");
        let kinds: Vec<IfKind> = self.interfaces.iter().map(IfKind::from).collect();
        let v1 = vec![("v", "1".to_string())];
        // (service type, host, port, TXT)
        type Service<'a> = (&'a str, &'a str, u16, Vec<(&'static str, String)>);
        let mut services: Vec<Service> = Vec::new();
        if let Some((record, port)) = &a.arpx {
            services.push((ARPX_SERVICE, &own_host, *port, record.pairs()));
        }
        if let Some(port) = a.sdk_port {
            services.push((SDK_SERVICE, &own_host, port, v1.clone()));
            if a.alias && !self.alias_deferred {
                services.push((ALIAS_SERVICE, ALIAS_HOST, port, v1));
            }
        }
        let mut out = Vec::new();
        for (ty, host, port, txt) in services {
            let props: Vec<(&str, &str)> = txt.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let mut info = ServiceInfo::new(ty, rid, host, (), port, &props[..])
                .map_err(|e| e.to_string())?
                .enable_addr_auto();
            info.set_interfaces(kinds.clone());
            let reg = Registered {
                fullname: info.get_fullname().to_string(),
                port,
                txt: props.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                alias: ty == ALIAS_SERVICE,
            };
            out.push((reg, Box::new(info)));
        }
        Ok(out)
    }

    /// Gives [`ALIAS_HOST`] up (another device holds it): its service is
    /// withdrawn and not claimed again by this instance.
    pub fn defer_alias(&mut self) {
        self.alias_deferred = true;
        let (alias, rest): (Vec<Registered>, Vec<Registered>) =
            std::mem::take(&mut self.registered)
                .into_iter()
                .partition(|r| r.alias);
        self.registered = rest;
        for r in alias {
            let _ = self.send(Command::Unregister(r.fullname));
        }
    }

    /// Asks whether `router_id`'s `_arpx._tcp` records are still answered
    /// (RFC 6762 §10.4, on a failure indication such as a lost session):
    /// without an answer within mdns-sd's default 10 s they are flushed
    /// and a `Removed` event follows.
    pub fn verify(&self, router_id: &str) -> Result<(), String> {
        self.send(Command::Verify(format!("{router_id}.{ARPX_SERVICE}")))
    }

    /// Withdraws every announcement (goodbye packets).
    fn withdraw(&mut self) {
        for r in std::mem::take(&mut self.registered) {
            let _ = self.send(Command::Unregister(r.fullname));
        }
    }

    /// Withdraws our records and stops the mdns-sd thread (which ends
    /// the bridge thread) and then the command thread; returns at once,
    /// with what to wait on at exit.
    pub fn stop(mut self) -> MdnsStopped {
        self.withdraw();
        let _ = self.send(Command::Shutdown);
        MdnsStopped(self.ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_are_the_router_id() {
        assert_eq!(instance_of("router-b._arpx._tcp.local."), "router-b");
        assert_eq!(instance_of("odd"), "odd");
    }
}
