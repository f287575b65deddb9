//! The LAN scope of registration endpoints: a LAN registration must point
//! into the LAN, never into the mesh. Without it a host on one router's
//! LAN could register an endpoint on a neighbour's side of a router link
//! (`198.51.100.2:7444`, `:22`, ...) and make the gateway connect there
//! for it — a port scan of the mesh run by the router.
//!
//! Sans-IO: the interface table ([`LocalAddrs`], read with `getifaddrs`
//! by the caller at check time) and the known peer router addresses are
//! arguments. The rule (docs/trust-model.md, docs/sdk-api.md):
//!
//! - **LAN links** are the router interfaces whose subnet holds the
//!   caller's source address (the link the registration came over) and
//!   those listed in `agentd.lan_interface` (default `br-lan`).
//! - An endpoint address is refused ([`NotLan`]) when it is a known peer
//!   router's address, when it is an address of a non-LAN link of the
//!   router, or when it lies in a non-LAN link's subnet and in no LAN
//!   link's subnet.
//! - `agentd.endpoint_allow_prefix` exempts prefixes from both checks (an
//!   operator's explicit word). The class rules of
//!   [`Guard`](super::Guard) (loopback, own listeners, ...) still apply:
//!   this check only narrows what they accept, and it looks at unicast
//!   addresses only (loopback is the router itself and has its own leave).
//! - Addresses on no link of the router (routed beyond it) are not
//!   affected: the router cannot tell a LAN behind a LAN router from
//!   anything else there.
//! - A caller on the router itself (loopback or one of its addresses) is
//!   not scoped: processes on the router are trusted like the operator.

use std::fmt;
use std::net::IpAddr;

use super::{classify, embedded_v4, is_link_local_v6, AddrClass, LocalAddrs};
use crate::owner::prefix_contains;

/// Why an endpoint address is outside the LAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NotLan {
    /// A known peer router's address (a `peer` section, a router admitted
    /// from discovery, a discovery candidate).
    PeerRouter,
    /// An address of the router on a link that is not LAN, or inside such
    /// a link's subnet (e.g. a neighbour's side of a router link).
    RouterLink,
}

impl NotLan {
    pub fn describe(self) -> &'static str {
        match self {
            NotLan::PeerRouter => {
                "is a peer router's address, not on the LAN (agentd.endpoint_allow_prefix can allow it)"
            }
            NotLan::RouterLink => {
                "is on a router link that is not LAN (LAN: the link the registration came over and agentd.lan_interface; agentd.endpoint_allow_prefix can allow it)"
            }
        }
    }
}

impl fmt::Display for NotLan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The operator's LAN settings (`agentd.lan_interface`,
/// `agentd.endpoint_allow_prefix`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LanScope {
    /// Interfaces that are LAN whatever the caller's link.
    pub lan_interfaces: Vec<Box<str>>,
    /// Prefixes `(addr, len)` exempt from the check.
    pub allow: Vec<(IpAddr, u8)>,
}

impl LanScope {
    /// The settings of `c`. Prefixes were validated with the config (the
    /// same parser); one that does not parse is left out.
    pub fn of_config(c: &uci_schema::Config) -> LanScope {
        LanScope {
            lan_interfaces: c
                .agentd
                .lan_interface
                .iter()
                .map(|s| s.as_str().into())
                .collect(),
            allow: c
                .agentd
                .endpoint_allow_prefix
                .iter()
                .filter_map(|s| uci_schema::schema::parse_ip_net(s))
                .collect(),
        }
    }

    /// May a registration from `caller` name `ip` (with IPv6 `zone`, if
    /// any) as its handler? `peers`: the known peer router addresses.
    pub fn check(
        &self,
        ip: IpAddr,
        zone: Option<&str>,
        caller: IpAddr,
        local: &LocalAddrs,
        peers: &[IpAddr],
    ) -> Result<(), NotLan> {
        let ip = canonical(ip);
        if classify(ip, zone.is_some()) != AddrClass::Unicast {
            return Ok(());
        }
        let caller = canonical(caller);
        if caller.is_loopback() || local.addrs.iter().any(|&a| canonical(a) == caller) {
            // A process on the router itself: trusted like the operator
            // (docs/trust-model.md); it has no LAN of its own.
            return Ok(());
        }
        if self.allow.iter().any(|&(a, l)| prefix_contains(a, l, ip)) {
            return Ok(());
        }
        if peers.iter().any(|&p| canonical(p) == ip) {
            return Err(NotLan::PeerRouter);
        }
        let links = || local.nets.iter().filter(|n| !n.loopback);
        let lan = |ifname: &str| {
            self.lan_interfaces.iter().any(|l| &**l == ifname)
                || links().any(|n| *n.ifname == *ifname && n.holds(caller))
        };
        if let IpAddr::V6(a) = ip {
            if is_link_local_v6(a) {
                // fe80::/64 is on every link: the zone says which one.
                return match zone {
                    Some(z) if links().any(|n| &*n.ifname == z) && !lan(z) => {
                        Err(NotLan::RouterLink)
                    }
                    _ => Ok(()),
                };
            }
        }
        if links().any(|n| n.addr.to_canonical() == ip && !lan(&n.ifname)) {
            return Err(NotLan::RouterLink);
        }
        let mut on_lan = false;
        let mut on_other = false;
        for n in links().filter(|n| n.holds(ip)) {
            if lan(&n.ifname) {
                on_lan = true;
            } else {
                on_other = true;
            }
        }
        if on_other && !on_lan {
            return Err(NotLan::RouterLink);
        }
        Ok(())
    }
}

/// IPv4-mapped and other IPv4-embedding forms as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => embedded_v4(a).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests;
