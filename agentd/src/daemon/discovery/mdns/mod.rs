//! The mDNS side of discovery: one task on the daemon's runtime that
//! owns the two mDNS sockets ([`socket`]) and, for each configured
//! interface, a sans-IO responder and querier
//! (`crate::discovery::mdns`). The event loop talks to it through an
//! unbounded command channel (commands are few: one per configuration
//! change, verify or stop) and hears from it through its input
//! channel; neither side ever waits on the other.
//!
//! Announced: `_arpx._tcp.local.` (instance and host = router_id, SRV
//! port = ARPX port, the TXT record of `discovery::record`) and
//! `_agentd._tcp.local.` (the SDK API port), on the configured
//! interfaces only, each with that interface's addresses (re-read every
//! few seconds: a change is announced, a removed address said goodbye
//! to). Browsed: `_arpx._tcp.local.`.
//!
//! The host name `nexus-router.local.` ([`ALIAS_HOST`]), which agents
//! written for the Nexus SDK resolve, is claimed as RFC 6762 asks of a
//! unique name, and given up to any other device that holds it: first
//! a lookup (two queries a second apart); an answer from anyone else
//! defers it without a probe; else it is probed (§8.1, with §8.2
//! tie-breaking) and announced; a conflict later (§9) gives it up too.
//! A name given up stays given up for the life of this mDNS instance
//! (a restart of agentd or of discovery claims it afresh).

mod driver;
pub mod socket;

use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::mpsc;

use super::super::input::Input;
use crate::discovery::record::Record;

pub const ARPX_SERVICE: &str = "_arpx._tcp.local.";
pub const SDK_SERVICE: &str = "_agentd._tcp.local.";
/// The host name the Nexus SDK resolves before it falls back to the
/// default gateway.
pub const ALIAS_HOST: &str = "nexus-router.local.";
/// [`ALIAS_HOST`] as people write it.
pub fn alias_name() -> &'static str {
    ALIAS_HOST.trim_end_matches('.')
}

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
    /// The TXT record's data as on the wire.
    pub txt: Vec<u8>,
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

/// What the event loop asks of the mDNS task, in order.
#[derive(Debug)]
enum Command {
    /// Publish this (`None`: nothing).
    Announce(Option<Box<Announcement>>),
    /// Give [`ALIAS_HOST`] up for good.
    DeferAlias,
    /// Doubt this router id's `_arpx._tcp` instance.
    Verify(String),
    /// Say goodbye and end.
    Shutdown,
}

/// A running mDNS responder and browser.
#[derive(Debug)]
pub struct Mdns {
    commands: mpsc::UnboundedSender<Command>,
    interfaces: Vec<String>,
    /// What we asked to publish, to skip repeats.
    announced: Option<Announcement>,
    /// Taken by [`Mdns::stop`].
    ended: Option<tokio::sync::oneshot::Receiver<()>>,
}

/// The start of an mDNS responder and browser, to be carried out off the
/// event loop ([`MdnsStart::run`]): the sockets, then the task.
pub struct MdnsStart {
    /// Numbers the starts of this process; a failure report names it.
    pub serial: u64,
    interfaces: Vec<String>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Dropped when the task ends (after the goodbyes), or with this
    /// start if it never runs.
    done: tokio::sync::oneshot::Sender<()>,
}

impl std::fmt::Debug for MdnsStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MdnsStart({}: {:?})", self.serial, self.interfaces)
    }
}

/// A stopped mDNS handle: its goodbyes are on their way (see
/// [`MdnsStopped::wait`]).
#[derive(Debug)]
pub struct MdnsStopped(Option<tokio::sync::oneshot::Receiver<()>>);

impl MdnsStopped {
    /// Waits until the task has sent its goodbyes and ended, at most
    /// `limit`. For the daemon's exit only: a process that ends first
    /// takes the goodbyes with it, and other routers then keep our
    /// candidate for the records' TTL.
    pub async fn wait(self, limit: Duration) {
        if let Some(ended) = self.0 {
            // Nothing is ever sent: the task's end drops the sender.
            let _ = tokio::time::timeout(limit, ended).await;
        }
    }
}

impl Mdns {
    /// An mDNS handle on `interfaces` and the start that makes it run.
    /// No I/O: commands given to the handle wait in its channel until
    /// the start has opened the sockets.
    pub fn new(interfaces: &[String], serial: u64) -> (Mdns, MdnsStart) {
        let (commands, rx) = mpsc::unbounded_channel();
        let (done, ended) = tokio::sync::oneshot::channel();
        let mdns = Mdns {
            commands,
            interfaces: interfaces.to_vec(),
            announced: None,
            ended: Some(ended),
        };
        let start = MdnsStart {
            serial,
            interfaces: interfaces.to_vec(),
            commands: rx,
            done,
        };
        (mdns, start)
    }

    fn send(&self, cmd: Command) -> Result<(), String> {
        self.commands
            .send(cmd)
            .map_err(|_| "the mDNS task has ended".to_string())
    }

    pub fn interfaces(&self) -> &[String] {
        &self.interfaces
    }

    /// Replaces what we announce (`None`: nothing). Records that change
    /// or go are withdrawn with goodbyes; unchanged ones stay (an alias
    /// we hold is not probed again). A deferred alias is not claimed
    /// again.
    pub fn announce(&mut self, what: Option<&Announcement>) -> Result<(), String> {
        if self.announced.as_ref() == what {
            return Ok(());
        }
        self.send(Command::Announce(what.cloned().map(Box::new)))?;
        self.announced = what.cloned();
        Ok(())
    }

    /// Gives [`ALIAS_HOST`] up (another device holds it): its records
    /// are withdrawn and it is not claimed again by this instance.
    pub fn defer_alias(&mut self) {
        let _ = self.send(Command::DeferAlias);
    }

    /// Asks whether `router_id`'s `_arpx._tcp` records are still answered
    /// (RFC 6762 §10.4, on a failure indication such as a lost session):
    /// without an answer within ten seconds they are flushed and a
    /// `Removed` event follows.
    pub fn verify(&self, router_id: &str) -> Result<(), String> {
        self.send(Command::Verify(router_id.to_string()))
    }

    /// Withdraws our records (goodbyes) and ends the task; returns at
    /// once, with what to wait on at exit.
    pub fn stop(mut self) -> MdnsStopped {
        let _ = self.send(Command::Shutdown);
        MdnsStopped(self.ended.take())
    }
}

impl MdnsStart {
    /// Opens the sockets and starts the task on the current runtime;
    /// its events go to `inputs`. Called from the blocking pool, which
    /// runs inside the daemon's runtime.
    pub fn run(self, inputs: mpsc::Sender<Input>) -> Result<(), String> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|e| format!("mDNS needs the daemon's runtime: {e}"))?;
        let _entered = handle.enter();
        let sockets = socket::MdnsSockets::open()?;
        if let Some(why) = sockets.left_out() {
            crate::log_warn!("discovery: mDNS on one address family only: {why}");
        }
        handle.spawn(driver::run(
            sockets,
            self.interfaces,
            self.commands,
            inputs,
            self.done,
        ));
        Ok(())
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
