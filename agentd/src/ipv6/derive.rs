//! The address of one agent in a prefix, RFC 7217-style.
//!
//! RFC 7217 §5 builds an interface identifier as
//! `F(Prefix, Net_Iface, Network_ID, DAD_Counter, secret_key)` with a
//! pseudo-random function F. Here the "interface" is the agent: F is
//! SHA-256 over the prefix, the agent's tenant, origin and capability,
//! a counter and the router's secret, each length-prefixed so no two
//! inputs share an encoding. The host bits of the address are the
//! leading bits of that hash; the counter moves on past identifiers
//! that must not be used (RFC 5453 reserved ones, the subnet-router
//! anycast all-zero one) and past an address another agent holds.
//!
//! What stays the same gives the same address: a restart (the secret is
//! the router's, kept with its identity), a re-registration after the
//! lease ended, a new route id. What differs gives another: a different
//! capability of the same origin is another agent to a caller.

use std::fmt;
use std::net::Ipv6Addr;

use edkey::Sha256;

/// Shortest and longest prefix an agent pool may use (the schema's
/// `ipv6.prefix` rule).
pub const MIN_LEN: u8 = *uci_schema::schema::AGENT_PREFIX_LEN.start();
pub const MAX_LEN: u8 = *uci_schema::schema::AGENT_PREFIX_LEN.end();

/// A prefix addresses are taken from: the network address (host bits
/// cleared) and its length, [`MIN_LEN`]..=[`MAX_LEN`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    net: Ipv6Addr,
    len: u8,
}

/// Why a prefix cannot hold agent addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// Not `addr/len` with an IPv6 address and a decimal length.
    Syntax,
    /// Longer than /64 (too few host bits) or shorter than /48.
    Length(u8),
    /// Not a global unicast or unique local prefix (link-local,
    /// multicast, loopback, unspecified, IPv4-mapped).
    Scope,
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::Syntax => f.write_str("not an IPv6 prefix 'addr/len'"),
            PrefixError::Length(l) => write!(
                f,
                "a /{l} cannot hold agent addresses: the prefix must be /{MIN_LEN} to /{MAX_LEN}"
            ),
            PrefixError::Scope => {
                f.write_str("not a global unicast or unique local prefix (2000::/3 or fc00::/7)")
            }
        }
    }
}

impl std::error::Error for PrefixError {}

impl Prefix {
    /// `net`/`len`, host bits cleared.
    pub fn new(net: Ipv6Addr, len: u8) -> Result<Prefix, PrefixError> {
        if !(MIN_LEN..=MAX_LEN).contains(&len) {
            return Err(PrefixError::Length(len));
        }
        let first = net.segments()[0];
        let global = first & 0xe000 == 0x2000;
        let unique_local = first & 0xfe00 == 0xfc00;
        if !global && !unique_local {
            return Err(PrefixError::Scope);
        }
        let mask = u128::MAX << (128 - u32::from(len));
        Ok(Prefix {
            net: Ipv6Addr::from(u128::from(net) & mask),
            len,
        })
    }

    pub fn parse(s: &str) -> Result<Prefix, PrefixError> {
        let (addr, len) = s.trim().split_once('/').ok_or(PrefixError::Syntax)?;
        let net: Ipv6Addr = addr.parse().map_err(|_| PrefixError::Syntax)?;
        if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err(PrefixError::Syntax);
        }
        let len: u8 = len.parse().map_err(|_| PrefixError::Syntax)?;
        if len > 128 {
            return Err(PrefixError::Syntax);
        }
        Prefix::new(net, len)
    }

    pub fn network(&self) -> Ipv6Addr {
        self.net
    }

    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    pub fn contains(&self, a: Ipv6Addr) -> bool {
        let mask = u128::MAX << (128 - u32::from(self.len));
        u128::from(a) & mask == u128::from(self.net)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

/// Who an address is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AgentKey {
    pub tenant: Box<str>,
    pub origin: Box<str>,
    pub capability: Box<str>,
}

/// Most counter values tried before giving up (each one is a fresh
/// pseudo-random identifier: reaching this means the secret or the
/// taken set is broken, not bad luck).
const MAX_TRIES: u32 = 64;

/// The address of `agent` in `prefix` under `secret`: the first one, by
/// counter, whose identifier is usable and for which `taken` is false.
/// `None` only after [`MAX_TRIES`] refusals.
pub fn derive(
    prefix: &Prefix,
    agent: &AgentKey,
    secret: &[u8; 32],
    taken: impl Fn(Ipv6Addr) -> bool,
) -> Option<Ipv6Addr> {
    (0..MAX_TRIES)
        .map(|counter| candidate(prefix, agent, secret, counter))
        .find(|&a| usable(a) && !taken(a))
}

/// The address for one counter value.
fn candidate(prefix: &Prefix, agent: &AgentKey, secret: &[u8; 32], counter: u32) -> Ipv6Addr {
    let mut h = Sha256::new();
    h.update(b"agentd ipv6 agent address v1\0");
    h.update(prefix.net.octets());
    h.update([prefix.len]);
    for part in [&agent.tenant, &agent.origin, &agent.capability] {
        h.update((part.len() as u32).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.update(counter.to_be_bytes());
    h.update(secret);
    let digest = h.finalize();
    let mut bits = [0u8; 16];
    bits.copy_from_slice(&digest[..16]);
    let host_mask = u128::MAX >> u32::from(prefix.len);
    Ipv6Addr::from(u128::from(prefix.net) | (u128::from_be_bytes(bits) & host_mask))
}

/// May this address be given to an agent? Its interface identifier (the
/// low 64 bits: every prefix here is /64 or shorter, so the address lies
/// in one /64 subnet) must not be one RFC 5453 reserves, nor the
/// subnet-router anycast identifier (all zero, RFC 4291 §2.6.1).
pub fn usable(a: Ipv6Addr) -> bool {
    let iid = u128::from(a) as u64;
    !reserved_iid(iid)
}

/// RFC 5453 §3 (and the IANA registry it set up): the reserved
/// interface identifiers.
fn reserved_iid(iid: u64) -> bool {
    // Subnet-router anycast (RFC 4291).
    iid == 0
        // 0200:5EFF:FE00:0000 – 0200:5EFF:FEFF:FFFF: the identifiers of
        // IANA's Ethernet block (RFC 4291 modified EUI-64), of which
        // 0200:5EFF:FE00:5213 is Proxy Mobile IPv6 (RFC 6543).
        || (0x0200_5eff_fe00_0000..=0x0200_5eff_feff_ffff).contains(&iid)
        // FDFF:FFFF:FFFF:FF80 – FDFF:FFFF:FFFF:FFFF: reserved subnet
        // anycast addresses (RFC 2526).
        || (0xfdff_ffff_ffff_ff80..=0xfdff_ffff_ffff_ffff).contains(&iid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn agent(cap: &str) -> AgentKey {
        AgentKey {
            tenant: "lab".into(),
            origin: "agent://lab/weather".into(),
            capability: cap.into(),
        }
    }

    const SECRET: [u8; 32] = [7; 32];

    #[test]
    fn prefixes_are_48_to_64_bits_of_global_or_unique_local_space() {
        let p = Prefix::parse("2001:db8:1:2ab:3::9/56").unwrap();
        assert_eq!(p.to_string(), "2001:db8:1:200::/56", "host bits cleared");
        assert!(Prefix::parse("fd00:1:2:3::/64").is_ok());
        assert!(Prefix::parse("2001:db8::/48").is_ok());
        assert_eq!(Prefix::parse("2001:db8::/65"), Err(PrefixError::Length(65)));
        assert_eq!(Prefix::parse("2001:db8::/40"), Err(PrefixError::Length(40)));
        assert_eq!(Prefix::parse("fe80::/64"), Err(PrefixError::Scope));
        assert_eq!(Prefix::parse("ff02::/64"), Err(PrefixError::Scope));
        assert_eq!(Prefix::parse("::ffff:0:0/64"), Err(PrefixError::Scope));
        for bad in [
            "2001:db8::",
            "2001:db8::/",
            "2001:db8::/+64",
            "192.0.2.0/24",
            "x/64",
            "2001:db8::/1000",
        ] {
            assert_eq!(Prefix::parse(bad), Err(PrefixError::Syntax), "{bad}");
        }
        let e = PrefixError::Length(72).to_string();
        assert!(e.contains("/72") && e.contains("/48 to /64"), "{e}");
    }

    #[test]
    fn the_same_agent_gets_the_same_address_and_another_agent_another() {
        let p = Prefix::parse("2001:db8:5:100::/56").unwrap();
        let a = derive(&p, &agent("weather.now"), &SECRET, |_| false).unwrap();
        assert!(p.contains(a), "{a} in {p}");
        assert_eq!(
            derive(&p, &agent("weather.now"), &SECRET, |_| false),
            Some(a)
        );
        let b = derive(&p, &agent("weather.week"), &SECRET, |_| false).unwrap();
        assert_ne!(a, b, "another capability is another agent");
        let other_tenant = AgentKey {
            tenant: "ops".into(),
            ..agent("weather.now")
        };
        assert_ne!(derive(&p, &other_tenant, &SECRET, |_| false), Some(a));
        // Another router (secret) or prefix: another address.
        assert_ne!(
            derive(&p, &agent("weather.now"), &[8; 32], |_| false),
            Some(a)
        );
        let q = Prefix::parse("2001:db8:6::/64").unwrap();
        let c = derive(&q, &agent("weather.now"), &SECRET, |_| false).unwrap();
        assert!(q.contains(c) && c != a);
    }

    #[test]
    fn fields_cannot_be_shifted_into_one_another() {
        let p = Prefix::parse("2001:db8::/64").unwrap();
        let one = AgentKey {
            tenant: "lab".into(),
            origin: "ab".into(),
            capability: "c".into(),
        };
        let two = AgentKey {
            tenant: "lab".into(),
            origin: "a".into(),
            capability: "bc".into(),
        };
        assert_ne!(
            derive(&p, &one, &SECRET, |_| false),
            derive(&p, &two, &SECRET, |_| false)
        );
    }

    #[test]
    fn a_taken_address_moves_the_counter_on_deterministically() {
        let p = Prefix::parse("2001:db8::/64").unwrap();
        let first = derive(&p, &agent("x.y"), &SECRET, |_| false).unwrap();
        let second = derive(&p, &agent("x.y"), &SECRET, |a| a == first).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            derive(&p, &agent("x.y"), &SECRET, |a| a == first),
            Some(second)
        );
        assert_eq!(derive(&p, &agent("x.y"), &SECRET, |_| true), None);
    }

    #[test]
    fn rfc5453_reserved_identifiers_and_the_anycast_one_are_never_used() {
        let net = 0x2001_0db8_0000_0001_u128 << 64;
        for iid in [
            0u64,
            0x0200_5eff_fe00_0000,
            0x0200_5eff_fe00_5213,
            0x0200_5eff_feff_ffff,
            0xfdff_ffff_ffff_ff80,
            0xfdff_ffff_ffff_ffff,
        ] {
            assert!(!usable(Ipv6Addr::from(net | u128::from(iid))), "{iid:x}");
        }
        for iid in [
            1u64,
            0x0200_5eff_fdff_ffff,
            0x0200_5eff_ff00_0000,
            0xfdff_ffff_ffff_ff7f,
        ] {
            assert!(usable(Ipv6Addr::from(net | u128::from(iid))), "{iid:x}");
        }
        // Over many agents none lands in a reserved range, and in a /64
        // they spread over the whole identifier space.
        let p = Prefix::parse("2001:db8::/64").unwrap();
        let got: HashSet<Ipv6Addr> = (0..2000)
            .map(|i| derive(&p, &agent(&format!("cap.n{i}")), &SECRET, |_| false).unwrap())
            .collect();
        assert_eq!(got.len(), 2000);
        assert!(got.iter().all(|&a| usable(a) && p.contains(a)));
        assert!(got.iter().any(|&a| u128::from(a) as u64 > 1 << 63));
    }
}
