use super::*;

fn guard() -> Guard {
    Guard {
        allow_loopback: false,
        own_ports: vec![7443, 7444, 7446, 7447],
        lan: Default::default(),
    }
}

fn lab() -> Guard {
    Guard {
        allow_loopback: true,
        ..guard()
    }
}

/// A router with LAN address 192.0.2.1/24 and 2001:db8::1.
fn local() -> LocalAddrs {
    LocalAddrs {
        addrs: vec![
            "127.0.0.1".parse().unwrap(),
            "::1".parse().unwrap(),
            "192.0.2.1".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
            "fe80::1".parse().unwrap(),
        ],
        broadcast: vec!["192.0.2.255".parse().unwrap()],
        nets: Vec::new(),
    }
}

fn refusal(g: &Guard, url: &str) -> Option<Refusal> {
    match check_url(url, g, &local()) {
        Ok(_) => None,
        Err(Refused::Address(r)) => Some(r),
        Err(Refused::Invalid(e)) => panic!("{url}: not parsed: {e}"),
    }
}

fn host(url: &str) -> Host {
    Endpoint::parse(url).unwrap().host
}

fn v4(s: &str) -> Host {
    Host::Ip(IpAddr::V4(s.parse().unwrap()))
}

#[test]
fn every_numeric_ipv4_spelling_is_canonicalised() {
    for url in [
        "http://127.0.0.1:8080/ubus",
        "http://2130706433:8080/ubus",
        "http://0x7f000001:8080/",
        "http://0x7f.1:8080/",
        "http://0X7F.0.0.1:8080/",
        "http://0177.0.0.1:8080/",
        "http://0177.1:8080/",
        "http://127.1:8080/",
        "http://127.0.1:8080/",
        "http://127.0.0.1.:8080/",
        "http://[::ffff:127.0.0.1]:8080/",
        "http://[::ffff:7f00:1]:8080/",
        "HTTP://127.0.0.1:8080/",
    ] {
        assert_eq!(host(url), v4("127.0.0.1"), "{url}");
    }
    assert_eq!(host("http://0:1/"), v4("0.0.0.0"));
    assert_eq!(host("http://3221225985:1/"), v4("192.0.2.1"));
    assert_eq!(host("http://0xc0.0x00.0x02.0x0a:1/"), v4("192.0.2.10"));
}

#[test]
fn out_of_range_numeric_hosts_are_invalid_not_names() {
    for url in [
        "http://1.2.3.256:1/",
        "http://4294967296:1/",
        "http://0x1ffffffff:1/",
        "http://1.2.3.4.5:1/",
        "http://08.1:1/",
        "http://a.0x:1/",
        "http://printer.123:1/",
        "http://1.256.1:1/",
    ] {
        assert_eq!(Endpoint::parse(url), Err(EndpointError::BadHost), "{url}");
    }
}

#[test]
fn every_loopback_form_is_refused_at_register() {
    for url in [
        "http://127.0.0.1:8080/ubus",
        "http://127.9.9.9:8080/",
        "http://2130706433:8080/ubus",
        "http://0x7f.1:8080/",
        "http://0177.0.0.1:8080/",
        "http://127.1:8080/",
        "http://127.0.0.1.:8080/",
        "http://[::1]:8080/",
        "http://[0:0:0:0:0:0:0:1]:8080/",
        "http://[::ffff:127.0.0.1]:8080/",
        "http://[::127.0.0.1]:8080/",
        "http://[64:ff9b::127.0.0.1]:8080/",
        "http://localhost:8080/",
        "http://LOCALHOST.:8080/",
        "http://ubus.localhost:8080/",
    ] {
        assert_eq!(refusal(&guard(), url), Some(Refusal::Loopback), "{url}");
    }
}

#[test]
fn unspecified_multicast_broadcast_reserved_and_unscoped_link_local_are_refused() {
    let g = lab();
    let cases = [
        ("http://0.0.0.0:8080/", Refusal::Unspecified),
        ("http://0:8080/", Refusal::Unspecified),
        ("http://0.1.2.3:8080/", Refusal::Unspecified),
        ("http://[::]:8080/", Refusal::Unspecified),
        ("http://[::ffff:0.0.0.0]:8080/", Refusal::Unspecified),
        ("http://224.0.0.1:8080/", Refusal::Multicast),
        ("http://239.255.255.250:1900/", Refusal::Multicast),
        ("http://[ff02::1]:8080/", Refusal::Multicast),
        ("http://255.255.255.255:8080/", Refusal::Broadcast),
        ("http://192.0.2.255:8080/", Refusal::Broadcast),
        ("http://240.0.0.1:8080/", Refusal::Reserved),
        ("http://169.254.169.254:80/latest", Refusal::LinkLocal),
        ("http://[fe80::2]:8080/", Refusal::LinkLocal),
        ("http://[::ffff:169.254.1.1]:8080/", Refusal::LinkLocal),
    ];
    for (url, want) in cases {
        assert_eq!(refusal(&g, url), Some(want), "{url}");
        assert_eq!(refusal(&guard(), url), Some(want), "{url}");
    }
}

#[test]
fn scoped_link_local_is_a_lan_address() {
    let ep = check_url("http://[fe80::2%25eth0]:8080/x", &guard(), &local()).unwrap();
    assert_eq!(ep.zone.as_deref(), Some("eth0"));
    assert_eq!(ep.authority(), "[fe80::2%25eth0]:8080");
    assert_eq!(
        Endpoint::parse("http://[2001:db8::5%25eth0]:1/"),
        Err(EndpointError::BadZone)
    );
    assert_eq!(
        Endpoint::parse("http://[fe80::2%eth0]:1/"),
        Err(EndpointError::BadZone)
    );
    let numeric = Endpoint::parse("http://[fe80::2%253]:8080/").unwrap();
    assert_eq!(
        numeric.socket_addr(IpAddr::V6("fe80::2".parse().unwrap())),
        Some("[fe80::2%3]:8080".parse().unwrap())
    );
}

#[test]
fn own_addresses_are_refused_unless_loopback_is_allowed() {
    for url in [
        "http://192.0.2.1:8080/",
        "http://3221225985:8080/",
        "http://[::ffff:192.0.2.1]:8080/",
        "http://[2001:db8::1]:8080/",
        "http://[fe80::1%25eth0]:8080/",
    ] {
        assert_eq!(refusal(&guard(), url), Some(Refusal::OwnAddress), "{url}");
        assert_eq!(refusal(&lab(), url), None, "{url}");
    }
    assert_eq!(refusal(&lab(), "http://127.0.0.1:8080/"), None);
    assert_eq!(refusal(&lab(), "http://[::1]:8080/"), None);
}

#[test]
fn own_listener_ports_are_refused_on_every_local_address_even_in_lab_mode() {
    for g in [guard(), lab()] {
        for url in [
            "http://127.0.0.1:7446/agent/v1/invoke",
            "http://127.1:7446/agent/v1/invoke",
            "http://[::1]:7447/",
            "http://192.0.2.1:7443/",
            "http://[2001:db8::1]:7444/",
            "http://localhost:7446/agent/v1/invoke",
        ] {
            assert_eq!(refusal(&g, url), Some(Refusal::OwnListener), "{url}");
        }
    }
    // The same port on another host is somebody else's service.
    assert_eq!(refusal(&guard(), "http://192.0.2.10:7446/"), None);
}

#[test]
fn lan_addresses_and_names_pass_the_literal_check() {
    let g = guard();
    let l = local();
    assert_eq!(
        g.check_literal(&Endpoint::parse("http://192.0.2.10:8080/x").unwrap(), &l),
        Ok(false)
    );
    assert_eq!(
        g.check_literal(&Endpoint::parse("http://[2001:db8::5]:80/").unwrap(), &l),
        Ok(false)
    );
    assert_eq!(
        g.check_literal(
            &Endpoint::parse("http://printer.lab.example/x").unwrap(),
            &l
        ),
        Ok(true)
    );
    // localhost under lab mode still goes to the resolver check.
    assert_eq!(
        lab().check_literal(&Endpoint::parse("http://localhost:8080/").unwrap(), &l),
        Ok(true)
    );
}

#[test]
fn a_name_is_refused_if_any_address_it_resolves_to_is() {
    let g = guard();
    let l = local();
    let ep = Endpoint::parse("http://printer.lab.example:8080/").unwrap();
    let ips = |s: &[&str]| {
        s.iter()
            .map(|a| a.parse().unwrap())
            .collect::<Vec<IpAddr>>()
    };
    assert_eq!(
        g.check_resolved(&ep, &ips(&["192.0.2.10", "2001:db8::10"]), &l),
        Ok(())
    );
    assert_eq!(
        g.check_resolved(&ep, &ips(&["192.0.2.10", "127.0.0.1"]), &l),
        Err(Refusal::Loopback)
    );
    assert_eq!(
        g.check_resolved(&ep, &ips(&["::ffff:192.0.2.1"]), &l),
        Err(Refusal::OwnAddress)
    );
    assert_eq!(g.check_resolved(&ep, &[], &l), Err(Refusal::Unresolvable));
}

#[test]
fn syntax_rules_are_the_same_for_everyone() {
    let p = Endpoint::parse;
    assert_eq!(
        p("https://192.0.2.1:1/"),
        Err(EndpointError::HttpsUnsupported)
    );
    assert_eq!(p("ftp://192.0.2.1/"), Err(EndpointError::Scheme));
    assert_eq!(p("/x"), Err(EndpointError::Scheme));
    assert_eq!(p("http://"), Err(EndpointError::NoHost));
    assert_eq!(p("http:///x"), Err(EndpointError::NoHost));
    assert_eq!(p("http://u:p@192.0.2.1:1/"), Err(EndpointError::UserInfo));
    assert_eq!(p("http://192.0.2.1:0/"), Err(EndpointError::BadPort));
    assert_eq!(p("http://192.0.2.1:65536/"), Err(EndpointError::BadPort));
    assert_eq!(p("http://192.0.2.1:/"), Err(EndpointError::BadPort));
    assert_eq!(p("http://192.0.2.1:+80/"), Err(EndpointError::BadPort));
    assert_eq!(p("http://192.0.2.1 :1/"), Err(EndpointError::BadChar));
    assert_eq!(p("http://192.0.2.1:1/#frag"), Err(EndpointError::BadChar));
    assert_eq!(p("http://h%41st:1/"), Err(EndpointError::BadHost));
    assert_eq!(p("http://[::1:1/"), Err(EndpointError::BadHost));
    assert_eq!(p("http://[::1]x/"), Err(EndpointError::BadPort));
    assert_eq!(
        p(&format!("http://h:1/{}", "a".repeat(600))),
        Err(EndpointError::TooLong)
    );
    let ep = p("http://192.0.2.10/invoke").unwrap();
    assert_eq!((ep.port, &*ep.path), (HTTP_DEFAULT_PORT, "/invoke"));
    let ep = p("http://Printer.Lab.Example.:8080?a=1").unwrap();
    assert_eq!(ep.host, Host::Name("printer.lab.example".into()));
    assert_eq!(&*ep.path, "/?a=1");
    assert_eq!(ep.to_url(), "http://printer.lab.example:8080/?a=1");
    assert_eq!(
        p("http://[2001:db8::1]:9000/a?b=1").unwrap().authority(),
        "[2001:db8::1]:9000"
    );
}

#[test]
fn reason_codes_are_distinct_and_prefixed() {
    let mut codes: Vec<_> = Refusal::ALL.iter().map(|r| r.code()).collect();
    assert!(codes.iter().all(|c| c.starts_with("endpoint_")));
    codes.sort_unstable();
    codes.dedup();
    assert_eq!(codes.len(), Refusal::ALL.len());
}

#[test]
fn the_guard_takes_listener_ports_and_the_option_from_the_config() {
    let text = "config agentd 'main'\n\toption allow_loopback_endpoints '1'\n\
        config gateway 'gateway'\n\toption sdk_listen '127.0.0.1:9446'\n\toption public_listen 'off'\n\
        \toption admin_listen '127.0.0.1:9100'\n\
        config arpx 'arpx'\n\toption listen '[::]:9444'\n";
    let c = uci_schema::Config::from_str(text, "test").unwrap();
    let g = Guard::of_config(&c);
    assert!(g.allow_loopback);
    assert_eq!(g.own_ports, vec![7447, 9100, 9444, 9446]);
    let d = Guard::of_config(&uci_schema::Config::from_str("", "empty").unwrap());
    assert!(!d.allow_loopback);
}

#[test]
fn the_router_reports_its_own_loopback_address() {
    // Where 127.0.0.1 can be bound, lo carries it and getifaddrs lists it.
    if std::net::UdpSocket::bind("127.0.0.1:0").is_err() {
        return;
    }
    let l = local_addrs();
    assert!(
        l.addrs.iter().any(|a| a.is_loopback()),
        "getifaddrs listed no loopback address: {l:?}"
    );
}
