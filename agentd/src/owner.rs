//! Route ownership on the LAN (DESIGN §4: "nobody can register or renew
//! routes for someone else's agent").
//!
//! An origin (`agent://tenant/name`) with a live local registration is
//! bound to the identity that registered it until its last lease ends.
//! The gateway proves who asks — a [`Caller`]: the request's source
//! address plus what its authentication established — and agentd compares
//! the [`Owner`] that caller would be with the origin's recorded one.
//!
//! What each auth mode binds (docs/trust-model.md):
//!
//! * `none` — nothing but the TCP source address ([`Owner::Address`]):
//!   another host cannot renew, move or withdraw a route, but anyone on
//!   the same host can, and anyone may take an origin nobody holds.
//! * bootstrap tokens (router-signed, bound to the requester's address)
//!   — the source address *and* a token for that origin
//!   ([`Owner::Bootstrap`]).
//! * tenant-key JWTs — the token subject ([`Owner::Subject`]), whatever
//!   address it comes from.
//!
//! Plain data and pure functions: the daemon's sans-IO state decides with
//! them, the gateway only builds [`Caller`]s.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The identity a local route is bound to. Compact on purpose (it rides
/// in every local route of the RIB and the FIB): the subject of a token
/// owner is always the route's own origin, so it is not repeated here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Owner {
    /// Auth `none`: whoever registered from this source address.
    Address(IpAddr),
    /// A router-issued bootstrap token for the route's origin, presented
    /// from this source address (the token is bound to it).
    Bootstrap(IpAddr),
    /// A token signed by a tenant key whose subject is the route's origin.
    Subject,
}

impl Owner {
    /// The source address the identity is tied to, if any.
    pub fn source(self) -> Option<IpAddr> {
        match self {
            Owner::Address(a) | Owner::Bootstrap(a) => Some(a),
            Owner::Subject => None,
        }
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Owner::Address(a) => write!(f, "source {a}"),
            Owner::Bootstrap(a) => write!(f, "bootstrap token from {a}"),
            Owner::Subject => f.write_str("tenant-signed token"),
        }
    }
}

/// What the gateway's authentication established about a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proof {
    /// Auth `none`: no credential at all.
    Address,
    /// A router-issued token bound to the source address, for `subject`.
    Bootstrap { subject: Box<str> },
    /// A token signed by `key` (raw Ed25519 public key) for `subject`.
    Token { subject: Box<str>, key: [u8; 32] },
}

/// Who asks for a registration change: the request's TCP source address
/// and its proof. `None` in an IPC request means an administrator
/// (agentctl, or the gateway handing routes back after an agentd restart).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub source: IpAddr,
    pub proof: Proof,
}

impl Caller {
    /// A caller with no credential (auth `none`).
    pub fn address(source: IpAddr) -> Caller {
        Caller {
            source: source.to_canonical(),
            proof: Proof::Address,
        }
    }

    /// The owner a registration by this caller records.
    pub fn owner(&self) -> Owner {
        let source = self.source.to_canonical();
        match self.proof {
            Proof::Address => Owner::Address(source),
            Proof::Bootstrap { .. } => Owner::Bootstrap(source),
            Proof::Token { .. } => Owner::Subject,
        }
    }

    /// How a registration by this caller proves its origin.
    pub fn origin_proof(&self) -> crate::route::OriginProof {
        use crate::route::OriginProof;
        match self.proof {
            Proof::Address => OriginProof::None,
            Proof::Bootstrap { .. } => OriginProof::Bootstrap,
            Proof::Token { .. } => OriginProof::Jwt,
        }
    }

    /// The agent URI a token proved, if the caller has one.
    pub fn subject(&self) -> Option<&str> {
        match &self.proof {
            Proof::Address => None,
            Proof::Bootstrap { subject } | Proof::Token { subject, .. } => Some(subject),
        }
    }
}

/// Whether `ip` lies in `addr/len`. An IPv4-mapped IPv6 address counts as
/// the IPv4 address it carries; families never mix. The one prefix test
/// of the suite (the gateway's `bootstrap_networks` use it too).
pub fn prefix_contains(addr: IpAddr, len: u8, ip: IpAddr) -> bool {
    fn eq(a: u128, b: u128, bits: u32, len: u8) -> bool {
        let host_bits = bits - u32::from(len).min(bits);
        (a ^ b).checked_shr(host_bits).unwrap_or(0) == 0
    }
    match (addr.to_canonical(), ip.to_canonical()) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            eq(u128::from(u32::from(n)), u128::from(u32::from(i)), 32, len)
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => eq(u128::from(n), u128::from(i), 128, len),
        _ => false,
    }
}

/// An operator's pin of one origin (UCI `config agent`): who may register
/// it at all, whether or not it currently has routes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentPin {
    /// Section name, for messages.
    pub name: Box<str>,
    pub origin: Box<str>,
    /// Source prefixes `(addr, len)` the origin may register from; empty
    /// means any source.
    pub sources: Vec<(IpAddr, u8)>,
    /// When set, only tokens signed by this key may act for the origin
    /// (no bootstrap, no auth `none`).
    pub key: Option<[u8; 32]>,
    /// The origin may register loopback endpoints (an agent on the router
    /// itself).
    pub allow_loopback: bool,
}

/// The `reason` of the 403 `forbidden` refusing a claim of an origin that
/// another router of the mesh holds (`IpcError::OwnedElsewhere`).
pub const ORIGIN_OWNED_ELSEWHERE: &str = "origin_owned_elsewhere";

/// Why a caller may not act for an origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// The origin has live routes bound to another identity.
    OriginOwned,
    /// An `agent` section pins the origin to other sources.
    SourceNotPinned,
    /// An `agent` section pins the origin to a key this caller's token is
    /// not signed by.
    KeyNotPinned,
    /// The caller's token is for another agent than the route's origin.
    OtherSubject,
}

impl Refusal {
    /// Stable `reason` of the 403 `forbidden` the gateway answers.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::OriginOwned => "origin_owned",
            Refusal::SourceNotPinned => "origin_pinned_source",
            Refusal::KeyNotPinned => "origin_pinned_key",
            Refusal::OtherSubject => "not_owner",
        }
    }
}

impl AgentPin {
    /// Whether `caller` may act for the pinned origin at all.
    pub fn admits(&self, caller: &Caller) -> Result<(), Refusal> {
        if !self.sources.is_empty()
            && !self
                .sources
                .iter()
                .any(|&(a, l)| prefix_contains(a, l, caller.source))
        {
            return Err(Refusal::SourceNotPinned);
        }
        if let Some(pinned) = &self.key {
            match &caller.proof {
                Proof::Token { key, .. } if key == pinned => {}
                _ => return Err(Refusal::KeyNotPinned),
            }
        }
        Ok(())
    }
}

/// May `caller` act for `origin`, whose live routes are bound to
/// `current` (`None`: no live routes, or only an administrator's)?
/// Administrators (`caller` = `None`) always may. `pin` is the origin's
/// `agent` section, if any.
pub fn may_act(
    origin: &str,
    current: Option<Owner>,
    caller: Option<&Caller>,
    pin: Option<&AgentPin>,
) -> Result<(), Refusal> {
    let Some(caller) = caller else {
        return Ok(());
    };
    if caller.subject().is_some_and(|s| s != origin) {
        return Err(Refusal::OtherSubject);
    }
    if let Some(pin) = pin {
        pin.admits(caller)?;
    }
    match current {
        Some(owner) if owner != caller.owner() => Err(Refusal::OriginOwned),
        _ => Ok(()),
    }
}

/// `agent` sections as pins by origin: the one reading agentd and the
/// gateway share. The schema validated every value, so nothing here can
/// fail; a value that did not parse pins nothing rather than everything.
pub fn pins_of(c: &uci_schema::Config) -> std::collections::HashMap<Box<str>, AgentPin> {
    c.agents
        .iter()
        .map(|a| {
            let pin = AgentPin {
                name: a.section.as_deref().unwrap_or(&a.origin).into(),
                origin: a.origin.as_str().into(),
                sources: a
                    .source
                    .iter()
                    .filter_map(|s| uci_schema::schema::parse_ip_net(s))
                    .collect(),
                key: uci_schema::schema::parse_jwt_key(&a.key),
                allow_loopback: a.allow_loopback,
            };
            (pin.origin.clone(), pin)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn boot(src: &str, subject: &str) -> Caller {
        Caller {
            source: ip(src),
            proof: Proof::Bootstrap {
                subject: subject.into(),
            },
        }
    }

    const O: &str = "agent://lab/printer";

    #[test]
    fn an_owned_origin_refuses_every_other_identity() {
        let owner = boot("192.0.2.10", O).owner();
        assert_eq!(owner, Owner::Bootstrap(ip("192.0.2.10")));
        // The owner itself, with a fresh token from the same address.
        assert_eq!(
            may_act(O, Some(owner), Some(&boot("192.0.2.10", O)), None),
            Ok(())
        );
        // Another host with a token for the same origin.
        assert_eq!(
            may_act(O, Some(owner), Some(&boot("192.0.2.66", O)), None),
            Err(Refusal::OriginOwned)
        );
        // The same host without a token (auth none) is another identity.
        assert_eq!(
            may_act(
                O,
                Some(owner),
                Some(&Caller::address(ip("192.0.2.10"))),
                None
            ),
            Err(Refusal::OriginOwned)
        );
        // A token for another agent never acts for this origin.
        assert_eq!(
            may_act(O, None, Some(&boot("192.0.2.10", "agent://lab/x")), None),
            Err(Refusal::OtherSubject)
        );
        // Free origins are free; administrators always may.
        assert_eq!(may_act(O, None, Some(&boot("192.0.2.66", O)), None), Ok(()));
        assert_eq!(may_act(O, Some(owner), None, None), Ok(()));
    }

    #[test]
    fn ipv4_mapped_sources_are_the_same_owner() {
        let a = Caller::address(ip("::ffff:192.0.2.10")).owner();
        assert_eq!(a, Caller::address(ip("192.0.2.10")).owner());
    }

    #[test]
    fn pins_restrict_sources_and_keys() {
        let pin = AgentPin {
            name: "printer".into(),
            origin: O.into(),
            sources: vec![(ip("192.0.2.0"), 24)],
            key: None,
            allow_loopback: false,
        };
        assert_eq!(pin.admits(&boot("192.0.2.10", O)), Ok(()));
        assert_eq!(
            pin.admits(&boot("198.51.100.1", O)),
            Err(Refusal::SourceNotPinned)
        );
        let keyed = AgentPin {
            sources: vec![],
            key: Some([7; 32]),
            ..pin
        };
        let token = |key| Caller {
            source: ip("203.0.113.5"),
            proof: Proof::Token {
                subject: O.into(),
                key,
            },
        };
        assert_eq!(keyed.admits(&token([7; 32])), Ok(()));
        assert_eq!(keyed.admits(&token([8; 32])), Err(Refusal::KeyNotPinned));
        assert_eq!(
            keyed.admits(&boot("192.0.2.10", O)),
            Err(Refusal::KeyNotPinned)
        );
    }

    #[test]
    fn prefixes_honour_their_length_and_family() {
        assert!(prefix_contains(ip("10.0.0.0"), 8, ip("10.200.1.1")));
        assert!(!prefix_contains(ip("10.0.0.0"), 8, ip("11.0.0.1")));
        assert!(prefix_contains(ip("0.0.0.0"), 0, ip("203.0.113.9")));
        assert!(!prefix_contains(ip("0.0.0.0"), 0, ip("2001:db8::1")));
        assert!(prefix_contains(ip("2001:db8::"), 32, ip("2001:db8:1::5")));
        assert!(prefix_contains(ip("192.0.2.0"), 24, ip("::ffff:192.0.2.7")));
        assert!(prefix_contains(ip("127.0.0.1"), 32, ip("127.0.0.1")));
        assert!(!prefix_contains(ip("127.0.0.1"), 32, ip("127.0.0.2")));
    }
}
