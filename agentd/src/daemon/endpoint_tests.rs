//! The SSRF guard on the daemon's registration path (sans-IO: interface
//! addresses are a made-up list, so the test does not depend on the host).

use super::state::State;
use crate::config::load_str;
use crate::endpoint::{LocalAddrs, Refusal};
use crate::ipc::message::{IpcError, Registration, Renewal, RequestBody, ResponseBody};
use crate::route::{Access, Attributes, RouteId};
use crate::time::Millis;

const MAIN: &str = "
config agentd 'main'
\toption router_id 'r1'
\toption health_check 'off'
config gateway 'gateway'
\toption sdk_listen '0.0.0.0:7446'
";

/// A router with LAN address 192.0.2.1.
fn router_addrs() -> LocalAddrs {
    LocalAddrs {
        addrs: vec![
            "127.0.0.1".parse().unwrap(),
            "::1".parse().unwrap(),
            "192.0.2.1".parse().unwrap(),
        ],
        broadcast: vec!["192.0.2.255".parse().unwrap()],
        nets: Vec::new(),
    }
}

fn state(extra_main: &str, sections: &str) -> State {
    let text =
        MAIN.replacen("config gateway", &format!("{extra_main}config gateway"), 1) + sections;
    let loaded = load_str(&text, "test.conf");
    assert!(loaded.is_ok(), "{:?}", loaded.err());
    let mut s = State::start(loaded, "test.conf", "agentd test", Millis(1_000));
    s.set_local_addrs(router_addrs);
    s
}

fn reg(endpoint: &str) -> Registration {
    Registration {
        route_id: None,
        capability: "demo.echo".into(),
        version: 1,
        origin: "agent://lab/echo".into(),
        endpoint: endpoint.into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes::default(),
        access: Access::default(),
        contract: None,
        lease_seconds: None,
        caller: None,
        owner: None,
        public_ipv6: false,
    }
}

fn register(s: &mut State, endpoint: &str) -> Result<RouteId, IpcError> {
    let h = s.handle(RequestBody::Register(reg(endpoint)), Millis(1_000));
    match h.reply {
        Ok(ResponseBody::Lease(g)) => {
            assert_eq!(h.changes.len(), 1, "an accepted route is published");
            Ok(g.route_id)
        }
        Ok(other) => panic!("register answered {other:?}"),
        Err(e) => {
            assert!(h.changes.is_empty(), "a refused route reaches no FIB");
            Err(e)
        }
    }
}

fn reason(r: Result<RouteId, IpcError>) -> Refusal {
    match r {
        Err(IpcError::EndpointRefused { reason, .. }) => reason,
        other => panic!("expected endpoint_refused, got {other:?}"),
    }
}

#[test]
fn loopback_and_router_addresses_are_refused_and_never_reach_the_table() {
    let mut s = state("", "");
    for (url, want) in [
        ("http://127.0.0.1:8080/ubus", Refusal::Loopback),
        ("http://2130706433:8080/ubus", Refusal::Loopback),
        ("http://0x7f.1:8080/ubus", Refusal::Loopback),
        ("http://[::1]:8080/ubus", Refusal::Loopback),
        ("http://[::ffff:127.0.0.1]:8080/ubus", Refusal::Loopback),
        ("http://localhost:8080/ubus", Refusal::Loopback),
        ("http://0.0.0.0:8080/ubus", Refusal::Unspecified),
        ("http://192.0.2.1:80/ubus", Refusal::OwnAddress),
        ("http://192.0.2.255:80/", Refusal::Broadcast),
        (
            "http://127.0.0.1:7446/agent/v1/invoke",
            Refusal::OwnListener,
        ),
    ] {
        let e = register(&mut s, url);
        let code = e.as_ref().err().map(|e| e.code());
        assert_eq!(reason(e), want, "{url}");
        assert_eq!(code, Some("endpoint_refused"));
    }
    assert_eq!(s.table().len(), 0);
    assert!(register(&mut s, "http://192.0.2.20:8080/invoke").is_ok());
}

#[test]
fn https_and_bad_urls_are_invalid_fields() {
    let mut s = state("", "");
    for url in [
        "https://192.0.2.20:8443/",
        "http://192.0.2.20:0/",
        "ftp://x/",
    ] {
        match register(&mut s, url) {
            Err(IpcError::Invalid { field, .. }) => assert_eq!(&*field, "endpoint", "{url}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}

#[test]
fn lab_mode_allows_loopback_but_never_the_gateway_itself() {
    let mut s = state("\toption allow_loopback_endpoints '1'\n", "");
    let id = register(&mut s, "http://127.0.0.1:8080/invoke").unwrap();
    assert!(s.table().get(&id).unwrap().allow_loopback);
    assert!(register(&mut s, "http://192.0.2.1:8081/invoke").is_ok());
    assert_eq!(
        reason(register(&mut s, "http://127.0.0.1:7446/agent/v1/invoke")),
        Refusal::OwnListener
    );
    assert_eq!(
        reason(register(&mut s, "http://192.0.2.1:7446/agent/v1/invoke")),
        Refusal::OwnListener
    );
}

#[test]
fn a_renewal_cannot_move_an_endpoint_onto_the_router() {
    let mut s = state("", "");
    let id = register(&mut s, "http://192.0.2.20:8080/invoke").unwrap();
    let mut r = Renewal::of(id.clone());
    r.endpoint = Some("http://127.0.0.1:8080/ubus".into());
    let h = s.handle(RequestBody::Renew(r), Millis(2_000));
    assert!(matches!(
        h.reply,
        Err(IpcError::EndpointRefused {
            reason: Refusal::Loopback,
            ..
        })
    ));
    assert!(h.changes.is_empty());
    assert_eq!(
        &*s.table().get(&id).unwrap().endpoint,
        "http://192.0.2.20:8080/invoke"
    );
}

#[test]
fn static_routes_name_loopback_only_with_their_own_leave() {
    let route = |extra: &str| {
        format!(
            "config route 'ubus'\n\toption capability 'x.y'\n\toption version '1'\n\
             \toption origin 'agent://lab/x'\n\toption endpoint 'http://127.0.0.1:8080/ubus'\n{extra}"
        )
    };
    let refused = load_str(&(MAIN.to_string() + &route("")), "t.conf").unwrap_err();
    assert!(
        refused.to_string().contains("endpoint_loopback"),
        "{refused}"
    );
    let rt = load_str(
        &(MAIN.to_string() + &route("\toption allow_loopback '1'\n")),
        "t.conf",
    )
    .unwrap();
    assert!(rt.static_routes[0].allow_loopback);
    let listener = load_str(
        &(MAIN.to_string()
            + &route("\toption allow_loopback '1'\n").replace("8080/ubus", "7446/x")),
        "t.conf",
    )
    .unwrap_err();
    assert!(
        listener.to_string().contains("endpoint_own_listener"),
        "{listener}"
    );
}

#[test]
fn renewals_keep_attributes_in_the_schema_ranges() {
    let mut s = state("", "");
    let id = register(&mut s, "http://192.0.2.20:8080/invoke").unwrap();
    let mut r = Renewal::of(id.clone());
    r.load_permille = Some(5000);
    let h = s.handle(RequestBody::Renew(r), Millis(2_000));
    assert!(
        matches!(&h.reply, Err(IpcError::Invalid { field, .. }) if &**field == "load_permille"),
        "{:?}",
        h.reply
    );
    assert_eq!(s.table().get(&id).unwrap().attrs.load_permille, 0);
}

#[test]
fn a_reload_that_turns_the_leave_off_revokes_it_from_registered_routes() {
    let mut s = state("\toption allow_loopback_endpoints '1'\n", "");
    let id = register(&mut s, "http://127.0.0.1:8080/invoke").unwrap();
    assert!(s.table().get(&id).unwrap().allow_loopback);
    let (_, changes) = s.reload(load_str(MAIN, "test.conf")).unwrap();
    assert!(!s.table().get(&id).unwrap().allow_loopback);
    assert!(changes.iter().any(|c| matches!(
        c,
        crate::fib::FibChange::Upsert(r) if r.id == id && !r.allow_loopback
    )));
}

/// Router with LAN `lan0` 192.0.2.1/24 and a router link `link0`
/// 198.51.100.2/30 (its neighbour at .1).
fn linked_router() -> LocalAddrs {
    let net = |ifname: &str, addr: &str, len: u8| crate::endpoint::IfNet {
        ifname: ifname.into(),
        addr: addr.parse().unwrap(),
        len,
        loopback: ifname == "lo",
        up: true,
        multicast: true,
        tentative: false,
    };
    let nets = vec![
        net("lo", "127.0.0.1", 8),
        net("lan0", "192.0.2.1", 24),
        net("link0", "198.51.100.2", 30),
    ];
    LocalAddrs {
        addrs: nets.iter().map(|n| n.addr).collect(),
        broadcast: Vec::new(),
        nets,
    }
}

fn lan_reg(endpoint: &str) -> Registration {
    Registration {
        caller: Some(crate::owner::Caller::address("192.0.2.50".parse().unwrap())),
        ..reg(endpoint)
    }
}

fn lan_register(s: &mut State, endpoint: &str) -> Result<RouteId, IpcError> {
    match s
        .handle(RequestBody::Register(lan_reg(endpoint)), Millis(1_000))
        .reply
    {
        Ok(ResponseBody::Lease(g)) => Ok(g.route_id),
        Ok(other) => panic!("register answered {other:?}"),
        Err(e) => Err(e),
    }
}

#[test]
fn lan_registrations_cannot_point_into_the_mesh_but_the_operator_can() {
    use crate::endpoint::scope::NotLan;
    let peer = "config peer 'b'\n\toption router_id 'b'\n\toption address '198.51.100.1'\n";
    // Lab mode: the router's own addresses are allowed as endpoints, and
    // still not its non-LAN link's.
    let mut s = state("\toption allow_loopback_endpoints '1'\n", peer);
    s.set_local_addrs(linked_router);
    for (url, why) in [
        ("http://198.51.100.1:7444/", NotLan::PeerRouter),
        ("http://[::ffff:198.51.100.1]:22/", NotLan::PeerRouter),
        ("http://198.51.100.2:8080/", NotLan::RouterLink),
        ("http://198.51.100.3:8080/", NotLan::RouterLink),
    ] {
        let e = lan_register(&mut s, url);
        let text = e.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(reason(e), Refusal::NotLan(why), "{url}");
        assert!(
            text.contains(url) && text.contains("endpoint_not_lan"),
            "{text}"
        );
    }
    // A discovery candidate the driver reported counts like a peer.
    s.set_peer_addrs(vec!["192.0.2.9".parse().unwrap()]);
    assert_eq!(
        reason(lan_register(&mut s, "http://192.0.2.9:8080/")),
        Refusal::NotLan(NotLan::PeerRouter)
    );
    assert_eq!(s.table().len(), 0);
    assert!(lan_register(&mut s, "http://192.0.2.20:8080/invoke").is_ok());
    // A renewal cannot move the route there either.
    let id = lan_register(&mut s, "http://192.0.2.21:8080/invoke").unwrap();
    let mut r = Renewal::of(id);
    r.endpoint = Some("http://198.51.100.1:7447/".into());
    r.caller = lan_reg("").caller;
    assert!(matches!(
        s.handle(RequestBody::Renew(r), Millis(2_000)).reply,
        Err(IpcError::EndpointRefused {
            reason: Refusal::NotLan(NotLan::PeerRouter),
            ..
        })
    ));
    // An administrator (no caller) is the operator: not scoped.
    assert!(register(&mut s, "http://198.51.100.1:8080/").is_ok());
    // The operator allows the link explicitly.
    let mut s = state(
        "\toption allow_loopback_endpoints '1'\n\tlist endpoint_allow_prefix '198.51.100.0/30'\n",
        peer,
    );
    s.set_local_addrs(linked_router);
    assert!(lan_register(&mut s, "http://198.51.100.1:8080/").is_ok());
    assert!(lan_register(&mut s, "http://198.51.100.2:8080/").is_ok());
}
