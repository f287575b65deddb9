use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn net(ifname: &str, addr: &str, len: u8) -> crate::endpoint::IfNet {
    crate::endpoint::IfNet {
        ifname: ifname.into(),
        addr: ip(addr),
        len,
        loopback: ifname == "lo",
        up: true,
        multicast: true,
        tentative: false,
    }
}

/// Router C: LAN `lan0` 192.0.2.1/24 + 2001:db8:1::1/64, a router link
/// `link0` 198.51.100.2/30 (peer B at .1), a WAN `wan0` 203.0.113.2/24.
fn router_c() -> LocalAddrs {
    let nets = vec![
        net("lo", "127.0.0.1", 8),
        net("lo", "::1", 128),
        net("lan0", "192.0.2.1", 24),
        net("lan0", "2001:db8:1::1", 64),
        net("lan0", "fe80::1", 64),
        net("link0", "198.51.100.2", 30),
        net("link0", "fe80::2", 64),
        net("wan0", "203.0.113.2", 24),
    ];
    LocalAddrs {
        addrs: nets.iter().map(|n| n.addr).collect(),
        broadcast: Vec::new(),
        nets,
    }
}

const LAN_HOST: &str = "192.0.2.50";
const PEER_B: &str = "198.51.100.1";

fn scope() -> LanScope {
    LanScope::default()
}

fn check(s: &LanScope, endpoint: &str, caller: &str) -> Result<(), NotLan> {
    s.check(ip(endpoint), None, ip(caller), &router_c(), &[ip(PEER_B)])
}

#[test]
fn endpoints_on_the_callers_own_link_are_lan() {
    assert_eq!(check(&scope(), "192.0.2.77", LAN_HOST), Ok(()));
    assert_eq!(check(&scope(), "2001:db8:1::77", "2001:db8:1::50"), Ok(()));
    // The caller's link is the interface: both of its families are LAN.
    assert_eq!(check(&scope(), "192.0.2.200", "2001:db8:1::50"), Ok(()));
    // Its own address too (an agent serving on the host that registers).
    assert_eq!(check(&scope(), LAN_HOST, LAN_HOST), Ok(()));
}

#[test]
fn a_neighbours_side_of_a_router_link_is_refused_as_a_peer_address() {
    for caller in [LAN_HOST, "::ffff:192.0.2.50"] {
        assert_eq!(
            check(&scope(), PEER_B, caller),
            Err(NotLan::PeerRouter),
            "{caller}"
        );
    }
    // Every spelling of the same address is the same address.
    assert_eq!(
        check(&scope(), "::ffff:198.51.100.1", LAN_HOST),
        Err(NotLan::PeerRouter)
    );
}

#[test]
fn the_routers_own_link_address_and_the_links_subnet_are_refused() {
    assert_eq!(
        check(&scope(), "198.51.100.2", LAN_HOST),
        Err(NotLan::RouterLink)
    );
    // Another host on the link (not a known peer) is still the link.
    assert_eq!(
        check(&scope(), "198.51.100.3", LAN_HOST),
        Err(NotLan::RouterLink)
    );
    assert_eq!(
        check(&scope(), "203.0.113.9", LAN_HOST),
        Err(NotLan::RouterLink)
    );
}

#[test]
fn a_link_counts_as_lan_for_callers_on_it_or_when_listed() {
    // The registration came over wan0: wan0 is that caller's LAN.
    assert_eq!(check(&scope(), "203.0.113.9", "203.0.113.50"), Ok(()));
    // ... but a peer router there is still refused.
    let s = scope();
    assert_eq!(
        s.check(
            ip("203.0.113.7"),
            None,
            ip("203.0.113.50"),
            &router_c(),
            &[ip("203.0.113.7")]
        ),
        Err(NotLan::PeerRouter)
    );
    let listed = LanScope {
        lan_interfaces: vec!["wan0".into()],
        ..scope()
    };
    assert_eq!(check(&listed, "203.0.113.9", LAN_HOST), Ok(()));
    assert_eq!(
        check(&listed, "198.51.100.3", LAN_HOST),
        Err(NotLan::RouterLink)
    );
}

#[test]
fn an_allowed_prefix_wins_over_both_refusals() {
    let s = LanScope {
        allow: vec![(ip("198.51.100.0"), 30)],
        ..scope()
    };
    assert_eq!(check(&s, PEER_B, LAN_HOST), Ok(()));
    assert_eq!(check(&s, "198.51.100.3", LAN_HOST), Ok(()));
    assert_eq!(check(&s, "203.0.113.9", LAN_HOST), Err(NotLan::RouterLink));
}

#[test]
fn addresses_beyond_every_link_and_non_unicast_ones_are_left_to_the_guard() {
    // Routed beyond the router: not this check's to refuse.
    assert_eq!(check(&scope(), "8.8.8.8", LAN_HOST), Ok(()));
    // Loopback is the guard's (allow_loopback), even when a peer is there
    // (routers of a lab on one host).
    let s = scope();
    assert_eq!(
        s.check(
            ip("127.0.0.1"),
            None,
            ip("127.0.0.1"),
            &router_c(),
            &[ip("127.0.0.1")]
        ),
        Ok(())
    );
}

#[test]
fn callers_on_the_router_itself_are_not_scoped() {
    for caller in ["127.0.0.1", "::1", "198.51.100.2", "192.0.2.1"] {
        assert_eq!(check(&scope(), "198.51.100.3", caller), Ok(()), "{caller}");
        assert_eq!(check(&scope(), PEER_B, caller), Ok(()), "{caller}");
    }
}

#[test]
fn link_local_endpoints_are_judged_by_their_zone() {
    let s = scope();
    let ll = ip("fe80::99");
    let c = ip(LAN_HOST);
    let local = router_c();
    assert_eq!(s.check(ll, Some("lan0"), c, &local, &[]), Ok(()));
    assert_eq!(
        s.check(ll, Some("link0"), c, &local, &[]),
        Err(NotLan::RouterLink)
    );
    // A link-local caller has no link we can name: only listed ones count.
    let listed = LanScope {
        lan_interfaces: vec!["lan0".into()],
        ..scope()
    };
    assert_eq!(
        listed.check(ip("192.0.2.77"), None, ip("fe80::50"), &local, &[]),
        Ok(())
    );
    assert_eq!(
        s.check(ip("192.0.2.77"), None, ip("fe80::50"), &local, &[]),
        Err(NotLan::RouterLink)
    );
}

#[test]
fn the_settings_come_from_the_config() {
    let text = "config agentd 'main'\n\tlist lan_interface 'lan0'\n\
        \tlist lan_interface 'wlan0'\n\tlist endpoint_allow_prefix '198.51.100.0/30'\n";
    let c = uci_schema::Config::from_str(text, "test").unwrap();
    let s = LanScope::of_config(&c);
    assert_eq!(
        s.lan_interfaces,
        vec![Box::<str>::from("lan0"), "wlan0".into()]
    );
    assert_eq!(s.allow, vec![(ip("198.51.100.0"), 30)]);
    // Default: br-lan, nothing allowed.
    let d = LanScope::of_config(uci_schema::Config::defaults());
    assert_eq!(d.lan_interfaces, vec![Box::<str>::from("br-lan")]);
    assert!(d.allow.is_empty());
}
