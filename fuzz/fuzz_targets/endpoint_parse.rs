//! Arbitrary endpoint URLs: the shared URL model and the SSRF classifier
//! must never panic, and canonicalisation must be stable (the canonical
//! URL parses back to the same endpoint, with the same verdict).
#![no_main]

use agentd::endpoint::{check_registration, check_url, Endpoint, Guard, IfNet, LocalAddrs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(ep) = Endpoint::parse(&text) else {
        return;
    };
    let again = Endpoint::parse(&ep.to_url()).expect("canonical URL parses");
    assert_eq!(again, ep);
    let net = |ifname: &str, addr: &str, len: u8| IfNet {
        ifname: ifname.into(),
        addr: addr.parse().unwrap(),
        len,
        loopback: false,
        up: true,
        multicast: true,
        tentative: false,
    };
    let local = LocalAddrs {
        addrs: vec!["192.0.2.1".parse().unwrap(), "198.51.100.2".parse().unwrap()],
        broadcast: vec!["192.0.2.255".parse().unwrap()],
        nets: vec![net("lan0", "192.0.2.1", 24), net("link0", "198.51.100.2", 30)],
    };
    let caller = "192.0.2.50".parse().unwrap();
    let peers = ["198.51.100.1".parse().unwrap()];
    for allow_loopback in [false, true] {
        let g = Guard {
            allow_loopback,
            own_ports: vec![7446],
            lan: Default::default(),
        };
        let a = check_url(&text, &g, &local).map(|_| ());
        let b = check_url(&ep.to_url(), &g, &local).map(|_| ());
        assert_eq!(a, b);
        // The LAN scope gives every spelling of an address one verdict.
        let a = check_registration(&text, &g, &local, caller, &peers).map(|_| ());
        let b = check_registration(&ep.to_url(), &g, &local, caller, &peers).map(|_| ());
        assert_eq!(a, b);
    }
});
