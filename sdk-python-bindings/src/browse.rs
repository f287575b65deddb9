//! Finding the router by DNS-SD: a bounded `_agentd._tcp` browse over
//! mDNS (DESIGN §6, §9), the step of `router="auto"` between
//! `AGENTD_ROUTER_URL` and the default gateway.
//!
//! mDNS answers come in whatever order responders pick, so the choice
//! among several routers must not depend on arrival: every usable
//! `(address, port)` of every resolved instance is ranked by [`rank`] and
//! the lowest wins. The rank prefers the router this host already sends
//! its traffic through (an address equal to the IPv4 default gateway),
//! then a router on the default route's own subnet (the LAN this host
//! lives on; another interface's LAN is a second network it merely
//! touches), then any other; within a class IPv4 before IPv6 (an IPv6
//! link-local address would need a scope a URL cannot carry, so those are
//! not used) and the lowest address. The browse ends early only when the
//! best class is found (the gateway itself announces), otherwise it lasts
//! the whole window so that a later, better answer is not missed.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The SDK API's DNS-SD service type.
pub const SERVICE: &str = "_agentd._tcp.local.";

/// How long the browse listens. mDNS responders answer a query within
/// 20–120 ms (RFC 6762 §6) and a router's answer carries SRV, TXT and
/// address records together, so this leaves room for a retransmitted
/// query while keeping `router="auto"` fast when nothing announces.
pub const WINDOW: Duration = Duration::from_millis(1500);

/// Most instances looked at (a LAN with more routers than this is
/// misconfigured; the bound keeps a flood of announcements cheap).
const MAX_INSTANCES: usize = 64;

/// One resolved `_agentd._tcp` instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announced {
    pub instance: String,
    pub addresses: Vec<IpAddr>,
    pub port: u16,
}

/// What of this host's IPv4 routing ranks routers: the default gateway
/// and the subnets on the default route's interface.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routes {
    pub gateway: Option<Ipv4Addr>,
    /// (network, mask) of the directly connected routes of the default
    /// route's interface.
    pub home: Vec<(Ipv4Addr, Ipv4Addr)>,
}

fn hex_v4(field: &str) -> Option<Ipv4Addr> {
    let raw = u32::from_str_radix(field, 16).ok()?;
    Some(Ipv4Addr::from(raw.to_le_bytes()))
}

impl Routes {
    /// From the text of `/proc/net/route` (little-endian hex fields:
    /// Iface, Destination, Gateway, Flags, RefCnt, Use, Metric, Mask).
    pub fn parse(proc_net_route: &str) -> Routes {
        const RTF_GATEWAY: u32 = 0x2;
        let rows: Vec<Vec<&str>> = proc_net_route
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() >= 8)
            .collect();
        let flags = |f: &[&str]| u32::from_str_radix(f[3], 16).unwrap_or(0);
        let default = rows
            .iter()
            .find(|f| f[1] == "00000000" && flags(f) & RTF_GATEWAY != 0);
        let Some(default) = default else {
            return Routes::default();
        };
        let home = rows
            .iter()
            .filter(|f| f[0] == default[0] && flags(f) & RTF_GATEWAY == 0)
            .filter_map(|f| Some((hex_v4(f[1])?, hex_v4(f[7])?)))
            .collect();
        Routes {
            gateway: hex_v4(default[2]),
            home,
        }
    }

    fn at_home(&self, a: Ipv4Addr) -> bool {
        self.home
            .iter()
            .any(|(net, mask)| u32::from(a) & u32::from(*mask) == u32::from(*net))
    }
}

fn usable(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v) => !v.is_unspecified() && !v.is_loopback() && !v.is_multicast(),
        IpAddr::V6(v) => {
            !v.is_unspecified()
                && !v.is_loopback()
                && !v.is_multicast()
                && (v.segments()[0] & 0xffc0) != 0xfe80
        }
    }
}

/// The order of routers (lower first): class (0 the default gateway,
/// 1 on the default route's subnet, 2 elsewhere), IPv4 before IPv6, the
/// address, the port.
pub fn rank(addr: SocketAddr, routes: &Routes) -> (u8, u8, IpAddr, u16) {
    let (class, family) = match addr.ip() {
        IpAddr::V4(v) if Some(v) == routes.gateway => (0, 0),
        IpAddr::V4(v) if routes.at_home(v) => (1, 0),
        IpAddr::V4(_) => (2, 0),
        IpAddr::V6(_) => (2, 1),
    };
    (class, family, addr.ip(), addr.port())
}

/// The router to use among those announced (see the module).
pub fn choose(found: &[Announced], routes: &Routes) -> Option<SocketAddr> {
    found
        .iter()
        .filter(|a| a.port != 0)
        .flat_map(|a| {
            a.addresses
                .iter()
                .filter(|ip| usable(ip))
                .map(|ip| SocketAddr::new(*ip, a.port))
        })
        .min_by_key(|s| rank(*s, routes))
}

/// Browses `_agentd._tcp` for at most `window` (less when the default
/// gateway itself answers) and returns what resolved. An mDNS socket
/// that cannot be opened is an error, never a wait.
pub fn browse(window: Duration, routes: &Routes) -> Result<Vec<Announced>, String> {
    use mdns_sd::{ServiceDaemon, ServiceEvent};
    let daemon = ServiceDaemon::new().map_err(|e| format!("mDNS: {e}"))?;
    let events = match daemon.browse(SERVICE) {
        Ok(rx) => rx,
        Err(e) => {
            let _ = daemon.shutdown();
            return Err(format!("mDNS browse of {SERVICE}: {e}"));
        }
    };
    let deadline = Instant::now() + window;
    let mut found: Vec<Announced> = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let Ok(ev) = events.recv_timeout(left) else {
            break;
        };
        let ServiceEvent::ServiceResolved(r) = ev else {
            continue;
        };
        let a = Announced {
            instance: r.fullname.clone(),
            addresses: r.addresses.iter().map(|a| a.to_ip_addr()).collect(),
            port: r.port,
        };
        found.retain(|f| f.instance != a.instance);
        if found.len() < MAX_INSTANCES {
            found.push(a);
        }
        if choose(&found, routes).is_some_and(|s| rank(s, routes).0 == 0) {
            break;
        }
    }
    // Not waited for: the daemon's thread ends on its own.
    let _ = daemon.stop_browse(SERVICE);
    let _ = daemon.shutdown();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
        eth1\t006433C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
        eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";

    fn ann(name: &str, addrs: &[&str], port: u16) -> Announced {
        Announced {
            instance: name.into(),
            addresses: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            port,
        }
    }

    #[test]
    fn routes_name_the_gateway_and_only_the_default_interface_subnets() {
        let r = Routes::parse(ROUTE);
        assert_eq!(r.gateway, Some(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(
            r.home,
            vec![(Ipv4Addr::new(192, 0, 2, 0), Ipv4Addr::new(255, 255, 255, 0))]
        );
        assert_eq!(Routes::parse("header\n"), Routes::default());
    }

    #[test]
    fn the_gateway_wins_then_its_subnet_then_the_lowest_address() {
        let r = Routes::parse(ROUTE);
        let other_lan = ann("c", &["198.51.100.7"], 7446);
        let home = ann("b", &["192.0.2.200", "fe80::1"], 7446);
        let gw = ann("a", &["2001:db8::1", "192.0.2.1"], 17446);
        let all = [other_lan.clone(), home.clone(), gw];
        assert_eq!(choose(&all, &r), Some("192.0.2.1:17446".parse().unwrap()));
        assert_eq!(
            choose(&[other_lan.clone(), home.clone()], &r),
            Some("192.0.2.200:7446".parse().unwrap())
        );
        // The order of arrival does not matter.
        assert_eq!(
            choose(&[home.clone(), other_lan.clone()], &r),
            choose(&[other_lan, home], &r)
        );
    }

    #[test]
    fn without_routes_ipv4_comes_first_and_link_local_ipv6_is_never_used() {
        let none = Routes::default();
        let v6 = ann("a", &["2001:db8::9"], 7446);
        let v4 = ann("b", &["198.51.100.20", "198.51.100.3"], 7446);
        assert_eq!(
            choose(&[v6.clone(), v4], &none),
            Some("198.51.100.3:7446".parse().unwrap())
        );
        assert_eq!(
            choose(&[v6], &none),
            Some("[2001:db8::9]:7446".parse().unwrap())
        );
        assert_eq!(
            choose(&[ann("l", &["fe80::2", "127.0.0.1"], 7446)], &none),
            None
        );
        assert_eq!(choose(&[ann("z", &["192.0.2.5"], 0)], &none), None);
        assert_eq!(choose(&[], &none), None);
    }
}
