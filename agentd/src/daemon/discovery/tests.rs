//! Tests of the discovery driver.
use super::*;

#[test]
fn the_dial_address_prefers_ipv4_then_routable_ipv6() {
    let a = |s: &str| s.parse::<IpAddr>().unwrap();
    assert_eq!(
        pick_address(
            &[
                a("fe80::1"),
                a("2001:db8::2"),
                a("192.0.2.9"),
                a("192.0.2.3")
            ],
            false
        ),
        Some(a("192.0.2.3"))
    );
    assert_eq!(
        pick_address(&[a("fe80::1"), a("2001:db8::2")], false),
        Some(a("2001:db8::2"))
    );
    assert_eq!(pick_address(&[a("fe80::1"), a("127.0.0.1")], false), None);
    // Lab: a zone for routers on one host.
    assert_eq!(
        pick_address(&[a("fe80::1"), a("127.0.0.1")], true),
        Some(a("127.0.0.1"))
    );
}

/// Input: discovery configured with a resolver and a search domain,
/// then the resolver's answers to the questions it asks (PTR with
/// every record in the additional section). Output: the first
/// question goes out at configure, the router becomes a `pending`
/// candidate of source `unicast` (manual admission, nothing
/// admitted), and the domain's row shows the success; then a lookup
/// that times out leaves the candidate and shows the error.
#[test]
fn unicast_answers_make_candidates_of_the_same_table() {
    use crate::discovery::unicast::answer::{Data, Rr};
    let mut s = DiscoverySettings::default();
    s.interfaces.clear();
    s.resolver = Some("192.0.2.53:53".parse().unwrap());
    s.search_domains = vec!["lab.example".into()];
    let own = Own {
        router_id: Some("router-a".into()),
        fingerprint: Some(Fingerprint([1; 32])),
        domain: "lab.example".into(),
        domain_ca: false,
    };
    let mut d = Discovery::new(s.clone());
    assert!(!d.configure(s, own, Millis(0)));
    let qs = d.take_dns();
    assert_eq!(qs.len(), 1);
    assert_eq!(qs[0].ask.question.to_string(), "PTR _arpx._tcp.lab.example");
    assert_eq!(qs[0].resolver, "192.0.2.53:53".parse().unwrap());

    let rec = Record::ours(
        "router-b",
        "other.example",
        Fingerprint([2; 32]),
        7444,
        7447,
    );
    let inst = "router-b._arpx._tcp.lab.example";
    let rr = |name: &str, data: Data| Rr {
        name: name.into(),
        ttl: 30,
        data,
    };
    let answer = Answer {
        records: vec![
            rr("_arpx._tcp.lab.example", Data::Ptr(inst.into())),
            rr(
                inst,
                Data::Srv {
                    port: 7444,
                    target: "router-b.lab.example".into(),
                },
            ),
            rr(inst, Data::Txt(rec.to_rdata())),
            rr(
                "router-b.lab.example",
                Data::A("192.0.2.2".parse().unwrap()),
            ),
        ],
        ..Answer::default()
    };
    assert!(!d.dns_answered(&qs[0].ask, Ok(answer), Millis(5)));
    let v = d.view(Millis(5));
    assert_eq!(v.candidates.len(), 1);
    let c = &v.candidates[0];
    assert_eq!(
        (&*c.router_id, &*c.source, &*c.state, &*c.address, c.version),
        ("router-b", "unicast", "pending", "192.0.2.2", rec.version)
    );
    assert_eq!(&*c.instance, inst);
    assert_eq!(v.unicast.len(), 1);
    assert_eq!(v.unicast[0].last_success_ago_ms, Some(0));
    assert_eq!(v.unicast[0].instances, 1);
    assert_eq!(v.unicast[0].next_lookup_in_ms, Some(30_000));
    assert_eq!(d.next_deadline(), Some(Millis(30_005)));
    // A lost session verifies mDNS records only: none here.
    d.session_lost("router-b");
    let verifies = d
        .counters()
        .into_iter()
        .find(|(k, _)| *k == "discovery.verifies");
    assert_eq!(verifies, Some(("discovery.verifies", 0)));

    assert!(!d.expire(Millis(30_005)));
    let qs = d.take_dns();
    assert_eq!(qs.len(), 1);
    d.dns_answered(
        &qs[0].ask,
        Err(DnsError::Timeout { tries: 2 }),
        Millis(34_005),
    );
    let v = d.view(Millis(34_005));
    assert!(v.candidates[0].announced, "kept until its time runs out");
    assert_eq!(
        v.unicast[0].last_error.as_deref(),
        Some("PTR _arpx._tcp.lab.example: no answer after 2 tries")
    );
}

#[test]
fn search_domains_without_a_resolver_say_so() {
    let mut s = DiscoverySettings::default();
    s.interfaces.clear();
    s.search_domains = vec!["lab.example".into()];
    let mut d = Discovery::new(s.clone());
    d.configure(s, Own::default(), Millis(0));
    assert!(d.take_dns().is_empty());
    let v = d.view(Millis(0));
    assert!(v
        .unicast_off_reason
        .unwrap()
        .contains("discovery.resolver is not"));
}

fn alias_state(d: &Discovery) -> (String, Option<String>) {
    let v = d.alias_view();
    assert_eq!(&*v.name, "nexus-router.local");
    (v.state.to_string(), v.detail.map(|d| d.to_string()))
}

#[test]
fn a_deferred_alias_stays_deferred_and_says_why() {
    let mut d = Discovery::new(DiscoverySettings::default());
    let own = Own {
        router_id: Some("router-a".into()),
        ..Own::default()
    };
    // No I/O: the handle's commands wait for a start never run.
    d.configure(DiscoverySettings::default(), own, Millis(0));
    assert_eq!(alias_state(&d).0, "claiming");
    let why = "192.0.2.99 answers nexus-router.local.".to_string();
    d.event(
        MdnsEvent::Alias(AliasState::Deferred(why.clone())),
        Millis::ZERO,
    );
    assert_eq!(alias_state(&d), ("deferred".into(), Some(why.clone())));
    // A late announcement report does not revive a name given up.
    d.event(MdnsEvent::Alias(AliasState::Answering), Millis::ZERO);
    assert_eq!(alias_state(&d), ("deferred".into(), Some(why)));
}

#[test]
fn the_alias_is_off_when_the_option_is() {
    let s = DiscoverySettings {
        nexus_alias: false,
        ..DiscoverySettings::default()
    };
    let mut d = Discovery::new(s.clone());
    let own = Own {
        router_id: Some("router-a".into()),
        ..Own::default()
    };
    d.configure(s, own, Millis(0));
    d.event(MdnsEvent::Alias(AliasState::Answering), Millis::ZERO);
    assert_eq!(alias_state(&d).0, "off");
}

#[test]
fn an_admitted_candidate_becomes_a_peer_with_schema_defaults() {
    let p = peer_settings(&AdmittedPeer {
        router_id: "router-b".into(),
        address: "192.0.2.2".parse().unwrap(),
        port: 17444,
        data_port: 17447,
        pin: Some(Fingerprint([7; 32])),
    })
    .unwrap();
    assert_eq!(
        (p.address.as_str(), p.port, p.data_port),
        ("192.0.2.2", 17444, 17447)
    );
    assert_eq!(p.key_fingerprint, Some(Fingerprint([7; 32]).to_string()));
    assert_eq!(p.max_routes, 10000, "schema default");
    assert!(!p.reflector_client);
}
