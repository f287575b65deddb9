//! ARPX messages: what two routers say to each other, and the checks every
//! decoded message passes before any logic sees it.
//!
//! The serde derive order of every enum and struct below *is* the wire
//! format (postcard encodes variants by index and fields in order): add
//! new variants and fields only at the end, and bump [`PROTOCOL_VERSION`]
//! when an old peer could misread what we send.

use std::fmt;

use serde::{Deserialize, Serialize};
use uci_schema::schema::{check_value, Kind};

use crate::bytes::Bytes;

/// The protocol version carried in `Open`; peers must agree on it.
/// 2: route advertisements carry the origin's proof, a trust limit and
/// the origin router's certificate.
pub const PROTOCOL_VERSION: u16 = 2;

/// Longest path vector on the wire, whatever `arpx.max_path` says (that
/// option is a local acceptance rule, below this hard bound).
pub const MAX_PATH_WIRE: usize = 64;
/// Most entries in each access list of one advertisement.
pub const MAX_ACCESS_ENTRIES: usize = 64;
/// Longest close reason (bytes).
pub const MAX_REASON: usize = 256;
/// Longest origin router certificate carried in an advertisement (DER
/// bytes; an Ed25519 certificate from `agentctl pki` is about 400).
pub const MAX_ORIGIN_CERT: usize = 2048;
/// Highest trust term (`Attrs::trust`, `RouteAd::trust_limit`).
pub const MAX_TRUST: u64 = 100;
/// Longest origin agent URI (bytes).
pub const MAX_AGENT_URI: usize = 2 * uci_schema::schema::MAX_ID_LEN + 8;

/// Everything that crosses an ARPX session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    Open(Open),
    Heartbeat,
    Update(Update),
    Withdraw(Withdraw),
    /// A full copy of the sender's exported routes follows, up to the
    /// `SnapshotEnd` with the same version.
    SnapshotBegin {
        version: u64,
    },
    SnapshotEnd {
        version: u64,
    },
    Close(Close),
}

impl Message {
    /// Short name for logs and counters.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Open(_) => "open",
            Message::Heartbeat => "heartbeat",
            Message::Update(_) => "update",
            Message::Withdraw(_) => "withdraw",
            Message::SnapshotBegin { .. } => "snapshot-begin",
            Message::SnapshotEnd { .. } => "snapshot-end",
            Message::Close(_) => "close",
        }
    }

    /// The structural checks of the wire format (identifier syntax,
    /// ranges, list bounds). Semantic rules (loops, signatures, ownership,
    /// limits) belong to the session and instance.
    pub fn validate(&self) -> Result<(), Invalid> {
        match self {
            Message::Open(o) => o.validate(),
            Message::Heartbeat | Message::SnapshotBegin { .. } | Message::SnapshotEnd { .. } => {
                Ok(())
            }
            Message::Update(u) => {
                if u.routes.is_empty() {
                    return Err(Invalid::new("update.routes", Problem::Empty));
                }
                u.routes.iter().try_for_each(RouteAd::validate)
            }
            Message::Withdraw(w) => {
                if w.route_ids.is_empty() {
                    return Err(Invalid::new("withdraw.route_ids", Problem::Empty));
                }
                w.route_ids
                    .iter()
                    .try_for_each(|id| check("withdraw.route_id", Kind::RouteId, id))
            }
            Message::Close(c) => {
                if c.reason.len() > MAX_REASON {
                    Err(Invalid::new("close.reason", Problem::TooLong(MAX_REASON)))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// The first message of each side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Open {
    pub version: u16,
    pub router_id: String,
    /// The sender's domain; empty when it has none.
    pub domain: String,
    /// Changes on every start of the sender's daemon, so the receiver can
    /// tell a restart (whose snapshot replaces everything) from a flap.
    pub boot_epoch: u64,
    /// How often the sender sends heartbeats; the receiver's hold time is
    /// this times its own miss limit.
    pub heartbeat_ms: u32,
    /// The sender asks to be served reflected routes.
    pub reflector_client: bool,
}

impl Open {
    fn validate(&self) -> Result<(), Invalid> {
        check("open.router_id", Kind::DnsLabel, &self.router_id)?;
        if !self.domain.is_empty() {
            check("open.domain", Kind::DomainName, &self.domain)?;
        }
        if self.heartbeat_ms == 0 {
            return Err(Invalid::new("open.heartbeat_ms", Problem::Zero));
        }
        Ok(())
    }
}

/// Advertisements, in order (`seq` numbers every Update and Withdraw of a
/// session and direction: 1, 2, 3 ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    pub seq: u64,
    pub routes: Vec<RouteAd>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Withdraw {
    pub seq: u64,
    pub route_ids: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Close {
    pub code: CloseCode,
    pub reason: String,
}

impl Close {
    /// A close whose reason is cut to the wire bound at a char boundary.
    pub fn new(code: CloseCode, reason: impl Into<String>) -> Close {
        let mut reason = reason.into();
        if reason.len() > MAX_REASON {
            let mut end = MAX_REASON;
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            reason.truncate(end);
        }
        Close { code, reason }
    }
}

/// Why a session ends. Stable: peers log and count them by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CloseCode {
    /// The operator stopped the daemon or disabled the peer.
    AdminShutdown,
    /// The peer section was removed or changed (reload).
    PeerRemoved,
    UnsupportedVersion,
    /// The Open's router_id is not the TLS-verified identity.
    IdentityMismatch,
    /// No frame within the hold time.
    HoldExpired,
    SequenceGap,
    FrameTooLarge,
    /// Bytes that are not a message.
    Decode,
    /// A message that breaks the wire rules (identifier syntax, bounds).
    InvalidMessage,
    /// A message the session state does not allow (e.g. Update before Open).
    UnexpectedMessage,
    /// A path vector that contains the receiver.
    LoopDetected,
    /// An origin signature that does not verify. (An origin key that
    /// contradicts the known one costs only its route since protocol 2.)
    BadSignature,
    /// More paths than `peer.max_routes`. Not sent since protocol 2:
    /// limits drop the excess paths, never the session.
    RouteLimit,
    /// Both routers dialled; this connection lost (the one initiated by
    /// the higher router_id survives).
    Collision,
}

impl CloseCode {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseCode::AdminShutdown => "admin_shutdown",
            CloseCode::PeerRemoved => "peer_removed",
            CloseCode::UnsupportedVersion => "unsupported_version",
            CloseCode::IdentityMismatch => "identity_mismatch",
            CloseCode::HoldExpired => "hold_expired",
            CloseCode::SequenceGap => "sequence_gap",
            CloseCode::FrameTooLarge => "frame_too_large",
            CloseCode::Decode => "decode",
            CloseCode::InvalidMessage => "invalid_message",
            CloseCode::UnexpectedMessage => "unexpected_message",
            CloseCode::LoopDetected => "loop_detected",
            CloseCode::BadSignature => "bad_signature",
            CloseCode::RouteLimit => "route_limit",
            CloseCode::Collision => "collision",
        }
    }

    /// Whether the sender of this code saw the other side break the
    /// protocol: such a close removes the offender's paths at once (no
    /// graceful retention), like a BGP NOTIFICATION.
    pub fn is_violation(self) -> bool {
        !matches!(
            self,
            CloseCode::AdminShutdown
                | CloseCode::PeerRemoved
                | CloseCode::HoldExpired
                | CloseCode::Collision
        )
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Effect class of a capability's contract (agentd's `route::Effect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    Read,
    Write,
    External,
}

/// What a remote router needs of a contract to forward safely (retry only
/// idempotent calls), plus the digest that names the full contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractRef {
    pub effect: Effect,
    pub idempotent: bool,
    /// SHA-256 of the origin's full contract (schema, description).
    pub digest: Bytes<32>,
}

/// Score inputs, as the origin set them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attrs {
    pub latency_ms: u64,
    pub cost_micros: u64,
    /// 0–1000.
    pub load_permille: u64,
    /// 0–100.
    pub trust: u64,
}

/// One route as a router advertises it. The origin router signs the
/// stable fields (everything before `signature`); `lease_ms` and `path`
/// change on the way and are not signed. No LAN endpoint is ever carried:
/// the advertising router is the next hop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteAd {
    pub route_id: String,
    pub capability: String,
    /// Interface version, ≥ 1.
    pub version: u32,
    /// `agent://tenant/name` of the registering agent.
    pub origin_agent: String,
    pub tenant: String,
    /// Empty: no region.
    pub region: String,
    pub attrs: Attrs,
    /// Other tenants that may call it (empty: only its own).
    pub allowed_tenants: Vec<String>,
    /// Source agent patterns that may call it (empty: any).
    pub allowed_sources: Vec<String>,
    pub contract: Option<ContractRef>,
    /// The router whose agent registered it (first in `path`).
    pub origin_router: String,
    /// The origin router's Ed25519 public key.
    pub origin_key: Bytes<32>,
    /// Grows with every change the origin makes to the stable fields, so
    /// a stale copy never replaces a newer one.
    pub serial: u64,
    /// Ed25519 over [`crate::sign::signed_bytes`], by `origin_key`.
    pub signature: Bytes<64>,
    /// The origin lease's remaining time when the origin sent it (0 =
    /// permanent). Information, not a receiver-side expiry: remote routes
    /// live by session liveness and explicit withdraws.
    pub lease_ms: u64,
    /// Routers traversed, origin first, the sender last.
    pub path: Vec<String>,
    /// How the origin router established that the registrant speaks for
    /// `origin_agent`. Signed: no router on the way can raise it.
    #[serde(default)]
    pub proof: OriginProof,
    /// The highest trust any router on the path allows this route
    /// (0–100): each router that re-advertises lowers it to the trust it
    /// granted the route itself (its own cap for the neighbour it learned
    /// the route from). Not signed; a receiver applies its own cap for
    /// the sender too, so a router can only lower what it passes on.
    #[serde(default = "full_trust")]
    pub trust_limit: u64,
    /// The strongest proof any router on the path lets this route's
    /// origin claim: like `trust_limit`, each reflecting router lowers it
    /// to what it granted (its `peer.max_proof` for the neighbour it
    /// learned the route from), and a receiver takes the least of this,
    /// `proof` and its own cap. Not signed: a router can only lower it.
    #[serde(default = "full_proof")]
    pub proof_limit: OriginProof,
    /// The origin router's certificate (DER), issued by its domain CA;
    /// empty when it has none. A receiver whose domain CA issued it takes
    /// the origin key from it, authoritatively (DESIGN §3 "Origin keys are
    /// authenticated"). Not signed: it authenticates itself.
    #[serde(default)]
    pub origin_cert: Vec<u8>,
}

fn full_trust() -> u64 {
    MAX_TRUST
}

fn full_proof() -> OriginProof {
    OriginProof::Jwt
}

/// How an origin was proven at its router, weakest first (the derived
/// order is the ranking `target_agent` lookups and ownership races use).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum OriginProof {
    /// Auth `none`: whoever registered from a source address.
    #[default]
    None,
    /// A router-issued trusted-LAN bootstrap token bound to an address.
    Bootstrap,
    /// An operator's static route (`config route`).
    Static,
    /// A tenant-signed JWT whose subject is the origin: the only
    /// cryptographic proof.
    Jwt,
}

impl OriginProof {
    pub fn as_str(self) -> &'static str {
        match self {
            OriginProof::None => "none",
            OriginProof::Bootstrap => "bootstrap",
            OriginProof::Static => "static",
            OriginProof::Jwt => "jwt",
        }
    }

    /// Only a tenant-signed token proves an origin; the rest are claims.
    pub fn is_proven(self) -> bool {
        self == OriginProof::Jwt
    }
}

impl fmt::Display for OriginProof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RouteAd {
    pub fn validate(&self) -> Result<(), Invalid> {
        check("route.route_id", Kind::RouteId, &self.route_id)?;
        check("route.capability", Kind::Name, &self.capability)?;
        if self.version == 0 {
            return Err(Invalid::new("route.version", Problem::Zero));
        }
        if self.origin_agent.len() > MAX_AGENT_URI {
            return Err(Invalid::new(
                "route.origin_agent",
                Problem::TooLong(MAX_AGENT_URI),
            ));
        }
        check("route.origin_agent", Kind::AgentUri, &self.origin_agent)?;
        check("route.tenant", Kind::Name, &self.tenant)?;
        if !self.region.is_empty() {
            check("route.region", Kind::Name, &self.region)?;
        }
        if self.attrs.load_permille > 1000 {
            return Err(Invalid::new("route.load_permille", Problem::OutOfRange));
        }
        if self.attrs.trust > MAX_TRUST {
            return Err(Invalid::new("route.trust", Problem::OutOfRange));
        }
        check_list("route.allowed_tenants", Kind::Name, &self.allowed_tenants)?;
        check_list(
            "route.allowed_sources",
            Kind::Pattern,
            &self.allowed_sources,
        )?;
        check("route.origin_router", Kind::DnsLabel, &self.origin_router)?;
        if self.path.is_empty() {
            return Err(Invalid::new("route.path", Problem::Empty));
        }
        if self.path.len() > MAX_PATH_WIRE {
            return Err(Invalid::new("route.path", Problem::TooMany(MAX_PATH_WIRE)));
        }
        for hop in &self.path {
            check("route.path", Kind::DnsLabel, hop)?;
        }
        if self.path[0] != self.origin_router {
            return Err(Invalid::new("route.path", Problem::NotOriginFirst));
        }
        if self.trust_limit > MAX_TRUST {
            return Err(Invalid::new("route.trust_limit", Problem::OutOfRange));
        }
        if self.origin_cert.len() > MAX_ORIGIN_CERT {
            return Err(Invalid::new(
                "route.origin_cert",
                Problem::TooLong(MAX_ORIGIN_CERT),
            ));
        }
        Ok(())
    }

    /// The router this advertisement came from (last in the path).
    pub fn sender(&self) -> &str {
        self.path.last().map_or("", String::as_str)
    }
}

fn check(what: &'static str, kind: Kind, value: &str) -> Result<(), Invalid> {
    if check_value(kind, value) {
        Ok(())
    } else if value.is_empty() {
        Err(Invalid::new(what, Problem::Empty))
    } else {
        Err(Invalid::new(what, Problem::Syntax))
    }
}

fn check_list(what: &'static str, kind: Kind, values: &[String]) -> Result<(), Invalid> {
    if values.len() > MAX_ACCESS_ENTRIES {
        return Err(Invalid::new(what, Problem::TooMany(MAX_ACCESS_ENTRIES)));
    }
    values.iter().try_for_each(|v| check(what, kind, v))
}

/// A decoded message that breaks the wire rules: which field, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid {
    pub field: &'static str,
    pub problem: Problem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    Empty,
    Syntax,
    Zero,
    OutOfRange,
    TooLong(usize),
    TooMany(usize),
    NotOriginFirst,
}

impl Invalid {
    pub const fn new(field: &'static str, problem: Problem) -> Invalid {
        Invalid { field, problem }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = self.field;
        match self.problem {
            Problem::Empty => write!(f, "{field} is empty"),
            Problem::Syntax => write!(f, "{field} has invalid syntax"),
            Problem::Zero => write!(f, "{field} is zero"),
            Problem::OutOfRange => write!(f, "{field} is out of range"),
            Problem::TooLong(max) => write!(f, "{field} is longer than {max} bytes"),
            Problem::TooMany(max) => write!(f, "{field} has more than {max} entries"),
            Problem::NotOriginFirst => write!(f, "{field} does not start at the origin router"),
        }
    }
}

impl std::error::Error for Invalid {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ad;

    #[test]
    fn a_well_formed_advertisement_validates() {
        assert_eq!(ad("r1", &["router-a"]).validate(), Ok(()));
    }

    #[test]
    fn advertisements_breaking_wire_rules_name_the_field() {
        let mut a = ad("r1", &["router-a"]);
        a.route_id = "r 1".into();
        assert_eq!(
            a.validate(),
            Err(Invalid::new("route.route_id", Problem::Syntax))
        );
        let mut a = ad("r1", &["router-a"]);
        a.path = vec!["router-b".into()];
        assert_eq!(
            a.validate(),
            Err(Invalid::new("route.path", Problem::NotOriginFirst))
        );
        let mut a = ad("r1", &["router-a"]);
        a.path = vec!["router-a".into(); MAX_PATH_WIRE + 1];
        assert_eq!(
            a.validate(),
            Err(Invalid::new("route.path", Problem::TooMany(MAX_PATH_WIRE)))
        );
        let mut a = ad("r1", &["router-a"]);
        a.attrs.load_permille = 1001;
        assert_eq!(
            a.validate().unwrap_err().to_string(),
            "route.load_permille is out of range"
        );
        let mut a = ad("r1", &["router-a"]);
        a.version = 0;
        assert!(a.validate().is_err());
        let mut a = ad("r1", &["router-a"]);
        a.origin_agent = "http://x/y".into();
        assert!(a.validate().is_err());
    }

    #[test]
    fn empty_updates_and_withdraws_are_refused() {
        let u = Message::Update(Update {
            seq: 1,
            routes: vec![],
        });
        assert_eq!(
            u.validate(),
            Err(Invalid::new("update.routes", Problem::Empty))
        );
        let w = Message::Withdraw(Withdraw {
            seq: 1,
            route_ids: vec!["ok".into(), "not ok".into()],
        });
        assert_eq!(
            w.validate(),
            Err(Invalid::new("withdraw.route_id", Problem::Syntax))
        );
    }

    #[test]
    fn close_reasons_are_cut_at_a_char_boundary() {
        let c = Close::new(CloseCode::Decode, "é".repeat(200));
        assert!(c.reason.len() <= MAX_REASON);
        assert!(c.reason.chars().all(|ch| ch == 'é'));
        assert_eq!(Message::Close(c).validate(), Ok(()));
    }

    #[test]
    fn only_protocol_violations_skip_graceful_retention() {
        assert!(CloseCode::SequenceGap.is_violation());
        assert!(CloseCode::BadSignature.is_violation());
        assert!(!CloseCode::HoldExpired.is_violation());
        assert!(!CloseCode::Collision.is_violation());
        assert!(!CloseCode::AdminShutdown.is_violation());
    }
}
