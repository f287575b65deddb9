//! IPC messages of discovery and admission (`agentctl candidates`,
//! `approve`, `revoke`; DESIGN §6). An admission refusal is an answer
//! of its own ([`AdmissionRefusal`], with a stable code), not an
//! [`IpcError`](super::error::IpcError): the request was understood and
//! the daemon decided.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Most candidate rows in one reply (the table holds at most 256).
pub const MAX_CANDIDATE_ROWS: usize = 256;

/// `agentctl candidates`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidatesView {
    /// `discovery.admission` (`off`, `manual`, `same-domain`, `allowlist`).
    pub admission: Box<str>,
    /// Why nothing is announced or browsed (`discovery.enabled 0`, no
    /// router_id, the mDNS daemon failed); `None` while it runs.
    pub off_reason: Option<Box<str>>,
    pub candidates: Vec<CandidateRow>,
    /// Why unicast DNS-SD does not run although search domains are set
    /// (no `discovery.resolver`); `None` when it runs or none is set.
    pub unicast_off_reason: Option<Box<str>>,
    /// One row per `discovery.search_domain` while unicast DNS-SD runs.
    pub unicast: Vec<DomainRow>,
}

/// Most search-domain rows in one reply.
pub const MAX_DOMAIN_ROWS: usize = 64;

/// The unicast DNS-SD lookups of one search domain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainRow {
    pub domain: Box<str>,
    /// `discovery.resolver` asked (with its port).
    pub resolver: Box<str>,
    /// How long ago the last lookup whose PTR answer came back.
    pub last_success_ago_ms: Option<u64>,
    /// The last error: the PTR lookup's, or the first instance that
    /// could not be resolved.
    pub last_error: Option<Box<str>>,
    pub last_error_ago_ms: Option<u64>,
    /// Routers found complete in the last lookup.
    pub instances: u32,
    /// When the next lookup starts; `None` while one runs.
    pub next_lookup_in_ms: Option<u64>,
}

/// One discovered router.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateRow {
    pub router_id: Box<str>,
    /// How it was found: `mdns` or `unicast`.
    pub source: Box<str>,
    /// mDNS: the instance label, the router_id unless mDNS renamed it
    /// because another host announces the same name (`router-b (2)`).
    /// Unicast: the full instance name (`router-b._arpx._tcp.lab.example`).
    pub instance: Box<str>,
    /// The record version an approval must name.
    pub version: u32,
    pub domain: Box<str>,
    /// `sha256:<hex>` of its identity key.
    pub fingerprint: Box<str>,
    pub address: Box<str>,
    /// ARPX port.
    pub port: u16,
    pub data_port: u16,
    /// `pending`, `approved`, `admitted`, `rejected`, `conflict`.
    pub state: Box<str>,
    /// Why it is in `conflict`: the key we know for its router_id (and
    /// where from) against the one announced.
    pub reason: Option<Box<str>>,
    /// Its announcement is current (the lifetime starts when it ends).
    pub announced: bool,
    /// At least this long left.
    pub expires_in_ms: u64,
}

/// What `approve` or `revoke` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionDone {
    pub router_id: Box<str>,
    pub version: u32,
    /// The `peer` section written or removed.
    pub section: Box<str>,
    /// The configuration generation after the reload.
    pub generation: u64,
}

/// Why `approve` or `revoke` changed nothing. Codes are stable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdmissionRefusal {
    /// `discovery.admission` is `off` (observe only).
    AdmissionOff,
    /// No such candidate (never seen, or its lifetime ended).
    NotFound { router_id: Box<str> },
    /// The candidate announces another record version.
    VersionMismatch {
        router_id: Box<str>,
        asked: u32,
        current: u32,
    },
    /// Revoke: no approval of that router in the file.
    NotApproved { router_id: Box<str> },
    /// A peer section not written by approve names the router.
    StaticPeer {
        router_id: Box<str>,
        section: Box<str>,
    },
    /// The daemon runs without a file of its own (`--demo`).
    NoConfigFile,
    /// The file or the edited file does not load; nothing was written.
    ConfigInvalid { reason: Box<str> },
    /// Writing the file failed.
    WriteFailed { reason: Box<str> },
    /// The file was written but the reload was refused.
    ReloadFailed { reason: Box<str> },
}

impl AdmissionRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            AdmissionRefusal::AdmissionOff => "admission_off",
            AdmissionRefusal::NotFound { .. } => "candidate_not_found",
            AdmissionRefusal::VersionMismatch { .. } => "version_mismatch",
            AdmissionRefusal::NotApproved { .. } => "not_approved",
            AdmissionRefusal::StaticPeer { .. } => "static_peer",
            AdmissionRefusal::NoConfigFile => "no_config_file",
            AdmissionRefusal::ConfigInvalid { .. } => "config_invalid",
            AdmissionRefusal::WriteFailed { .. } => "config_write_failed",
            AdmissionRefusal::ReloadFailed { .. } => "reload_failed",
        }
    }
}

impl fmt::Display for AdmissionRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdmissionRefusal::AdmissionOff => f.write_str(
                "discovery.admission is 'off' (observe only): set it to 'manual' to approve routers",
            ),
            AdmissionRefusal::NotFound { router_id } => write!(
                f,
                "router {router_id} is not a candidate (not announced, or its lifetime ended)"
            ),
            AdmissionRefusal::VersionMismatch {
                router_id,
                asked,
                current,
            } => write!(
                f,
                "router {router_id} announces record version {current}, not {asked}"
            ),
            AdmissionRefusal::NotApproved { router_id } => {
                write!(f, "router {router_id} has no approved (discovered) peer section")
            }
            AdmissionRefusal::StaticPeer { router_id, section } => write!(
                f,
                "router {router_id} is a configured peer ({section}); edit that section instead"
            ),
            AdmissionRefusal::NoConfigFile => {
                f.write_str("this agentd runs without a configuration file (--demo)")
            }
            AdmissionRefusal::ConfigInvalid { reason } => {
                write!(f, "nothing written: the configuration would not load: {reason}")
            }
            AdmissionRefusal::WriteFailed { reason } => f.write_str(reason),
            AdmissionRefusal::ReloadFailed { reason } => {
                write!(f, "the file was written but the reload was refused: {reason}")
            }
        }
    }
}
