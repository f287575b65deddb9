//! What the daemon's loop reacts to ([`Input`]), and the requests that
//! travel with some inputs until they are answered.

use std::path::PathBuf;

use super::discovery::mdns::MdnsEvent;
use super::peers::tasks::PeerEvent;
use super::peers::tls::Identity;
use super::probe::ProbeTarget;
use crate::config::{LoadError, Runtime};
use crate::discovery::approval::EditError;
use crate::discovery::table::Candidate;
use crate::discovery::unicast::answer::{Answer, DnsError};
use crate::discovery::unicast::browse::Ask;
use crate::ipc::server::{Replier, ServerEvent};

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
    /// The health monitor may start a probe.
    ProbeDue,
    /// One probe's result.
    Probed {
        target: ProbeTarget,
        ok: bool,
    },
    /// Time to write the lease file (changes were coalesced).
    Persist,
    /// An ARPX driver task's report (handshake, frame, close, ...).
    Peer(PeerEvent),
    /// The ARPX driver's earliest timer is due.
    PeerTimer,
    /// A connection's frames wait in the ARPX driver's inbox: one
    /// connection's turn (see `peers::inbox`).
    PeerTurn,
    /// An mDNS browse event (discovery).
    Discovered(MdnsEvent),
    /// `Effect::StartMdns` number `serial` failed.
    MdnsFailed {
        serial: u64,
        error: String,
    },
    /// The earliest candidate lifetime has ended, or a unicast DNS-SD
    /// lookup is due.
    DiscoveryTimer,
    /// `Effect::Dns`'s answer (or why there is none).
    DnsAnswered {
        ask: Ask,
        result: Box<Result<Answer, DnsError>>,
    },
    /// `Effect::ReadConfig`'s result: the configuration, and the
    /// identity files it names (read with it, so a renewed certificate
    /// or a fixed key file applies on reload).
    ConfigRead {
        loaded: Box<Result<Runtime, LoadError>>,
        identity: Box<Result<Identity, String>>,
        cause: ReloadCause,
    },
    /// `Effect::EditConfig`'s result: the section written or removed.
    ConfigEdited {
        result: Result<String, EditError>,
        admission: Admission,
    },
    /// `Effect::SaveLeases` failed: the lease file is behind again.
    PersistFailed {
        error: String,
    },
}

/// Why the configuration is read.
#[derive(Debug)]
pub enum ReloadCause {
    /// SIGHUP.
    Signal,
    /// `agentctl reload`: answered with the generation.
    Request(Replier),
    /// `approve`/`revoke` edited the file: answered once it is loaded.
    Admission(Admission, String),
}

/// An `approve` or `revoke` in progress.
#[derive(Debug)]
pub struct Admission {
    pub approve: bool,
    pub router_id: String,
    pub version: u32,
    pub path: PathBuf,
    pub reply: Replier,
}

/// The edit `approve` or `revoke` makes to the config file.
#[derive(Debug)]
pub enum ConfigEdit {
    Approve(Box<Candidate>),
    Revoke { router_id: String, version: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Continue,
    Stop,
}
