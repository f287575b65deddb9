//! IP networks (`addr/len`) and the "trusted LAN" of trusted-LAN
//! bootstrap: only peers inside one of `gateway.bootstrap_networks` may
//! ask for a token (DESIGN §9). The text form is parsed by
//! [`uci_schema::schema::parse_ip_net`], the same function that validated
//! the config, so the two cannot disagree.

use std::fmt;
use std::net::IpAddr;

/// An IPv4 or IPv6 network. Host bits of the configured address are
/// ignored (`10.1.2.3/8` is `10.0.0.0/8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    len: u8,
}

/// A value that is not `addr/len` or a bare address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadNet(pub String);

impl fmt::Display for BadNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not an IP network 'addr/len'", self.0)
    }
}

impl std::error::Error for BadNet {}

impl IpNet {
    pub fn parse(s: &str) -> Result<IpNet, BadNet> {
        uci_schema::schema::parse_ip_net(s)
            .map(|(addr, len)| IpNet { addr, len })
            .ok_or_else(|| BadNet(s.to_string()))
    }

    /// Whether `ip` lies in this network. An IPv4-mapped IPv6 peer
    /// (`::ffff:10.0.0.5`, what a dual-stack `[::]` listener reports for
    /// IPv4 clients) is matched as the IPv4 address it carries.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(
                u128::from(u32::from(net)),
                u128::from(u32::from(ip)),
                32,
                self.len,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(u128::from(net), u128::from(ip), 128, self.len)
            }
            _ => false,
        }
    }
}

/// The first `len` of the low `bits` bits of `a` and `b` agree.
fn prefix_eq(a: u128, b: u128, bits: u32, len: u8) -> bool {
    let host_bits = bits - u32::from(len).min(bits);
    (a ^ b).checked_shr(host_bits).unwrap_or(0) == 0
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The default trusted LAN, taken from the schema table (the single
/// source of defaults): loopback, RFC 1918, link-local and ULA ranges.
pub fn default_bootstrap_networks() -> Vec<IpNet> {
    let items = uci_schema::schema::section_spec("gateway")
        .and_then(|s| s.option("bootstrap_networks"))
        .map(|o| match o.default {
            uci_schema::schema::DefaultValue::Items(items) => items,
            _ => &[],
        })
        .unwrap_or(&[]);
    // Every default passes the schema's own checks (a uci-schema test).
    items.iter().filter_map(|s| IpNet::parse(s).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn contains_honours_the_prefix_length() {
        let n = IpNet::parse("192.168.0.0/16").unwrap();
        assert!(n.contains(ip("192.168.200.1")));
        assert!(!n.contains(ip("192.169.0.1")));
        let n = IpNet::parse("172.16.0.0/12").unwrap();
        assert!(n.contains(ip("172.31.255.255")));
        assert!(!n.contains(ip("172.32.0.0")));
        let host = IpNet::parse("127.0.0.1").unwrap();
        assert!(host.contains(ip("127.0.0.1")));
        assert!(!host.contains(ip("127.0.0.2")));
        let all = IpNet::parse("0.0.0.0/0").unwrap();
        assert!(all.contains(ip("203.0.113.9")));
        assert!(!all.contains(ip("2001:db8::1")), "families never mix");
        let ula = IpNet::parse("fc00::/7").unwrap();
        assert!(ula.contains(ip("fd00::1")));
        assert!(!ula.contains(ip("fe00::1")));
        assert!(IpNet::parse("::/0").unwrap().contains(ip("2001:db8::1")));
        assert!(IpNet::parse("10.9.9.9/8").unwrap().contains(ip("10.0.0.1")));
    }

    #[test]
    fn ipv4_mapped_peers_match_ipv4_networks() {
        let n = IpNet::parse("10.0.0.0/8").unwrap();
        assert!(n.contains(ip("::ffff:10.1.2.3")));
        assert!(!n.contains(ip("::ffff:192.0.2.1")));
    }

    #[test]
    fn bad_networks_are_refused_by_name() {
        let e = IpNet::parse("10.0.0.0/33").unwrap_err();
        assert!(e.to_string().contains("10.0.0.0/33"));
        assert!(IpNet::parse("lan").is_err());
    }

    #[test]
    fn default_is_the_private_lan_only() {
        let d = default_bootstrap_networks();
        assert_eq!(d.len(), 8);
        let trusted = |s: &str| d.iter().any(|n| n.contains(ip(s)));
        for s in [
            "127.0.0.1",
            "::1",
            "10.2.3.4",
            "172.20.0.1",
            "192.168.1.50",
            "169.254.1.1",
            "fd12::5",
            "fe80::1",
        ] {
            assert!(trusted(s), "{s} should be trusted");
        }
        for s in ["192.0.2.10", "203.0.113.1", "2001:db8::1", "8.8.8.8"] {
            assert!(!trusted(s), "{s} should not be trusted");
        }
    }
}
