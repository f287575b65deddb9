use std::net::{Ipv4Addr, SocketAddr};

use super::*;

fn n(text: &str) -> Name {
    Name::dotted(text).unwrap()
}

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
}

fn config(alias: bool) -> Config {
    Config {
        host: b"router-a".to_vec(),
        services: vec![
            Service {
                kind: n("_arpx._tcp.local"),
                port: 7447,
                txt: b"\x04rv=1".to_vec(),
            },
            Service {
                kind: n("_agentd._tcp.local"),
                port: 7446,
                txt: b"\x03v=1".to_vec(),
            },
        ],
        alias: alias.then(|| n("nexus-router.local")),
        addrs: vec![v4(1)],
        own: vec![v4(1)],
    }
}

const MDNS: u16 = 5353;

fn peer(port: u16) -> SocketAddr {
    SocketAddr::new(v4(9), port)
}

/// Runs the responder's timers up to `until`; every packet sent, with
/// the time it went.
fn run(r: &mut Responder, from: Millis, until: Millis) -> Vec<(Millis, Transmit)> {
    let mut out = Vec::new();
    let mut now = from;
    loop {
        while let Some(t) = r.poll_transmit() {
            out.push((now, t));
        }
        match r.poll_timeout() {
            Some(t) if t <= until => {
                now = t.max(now);
                r.handle_timeout(now);
            }
            _ => return out,
        }
    }
}

fn claimed(alias: bool) -> Responder {
    let mut r = Responder::new(7);
    r.configure(Millis(0), config(alias));
    run(&mut r, Millis(0), Millis(5000));
    while r.poll_event().is_some() {}
    r
}

fn query(name: &str, qtype: u16) -> Packet {
    Packet {
        questions: vec![Question {
            name: n(name),
            qtype,
            unicast: false,
        }],
        ..Packet::default()
    }
}

fn response(records: Vec<Record>) -> Packet {
    Packet {
        flags: FLAG_RESPONSE | FLAG_AUTHORITATIVE,
        answers: records,
        ..Packet::default()
    }
}

fn has(p: &Packet, name: &str, rtype: u16) -> bool {
    p.answers
        .iter()
        .any(|r| r.name == n(name) && r.rtype == rtype)
}

#[test]
fn probes_three_times_then_announces_twice() {
    let mut r = Responder::new(1);
    r.configure(Millis(0), config(false));
    let sent = run(&mut r, Millis(0), Millis(3000));
    let probes: Vec<&(Millis, Transmit)> = sent
        .iter()
        .filter(|(_, t)| !t.packet.is_response())
        .collect();
    assert_eq!(probes.len(), 3, "{sent:#?}");
    assert!(probes[0].0 <= Millis(250));
    assert_eq!(probes[1].0.saturating_sub(probes[0].0), 250);
    assert_eq!(probes[2].0.saturating_sub(probes[1].0), 250);
    let p = &probes[0].1.packet;
    // One question per unique name, QU, type ANY; the proposed records
    // in the authority section.
    let asked: Vec<String> = p.questions.iter().map(|q| q.name.to_string()).collect();
    assert_eq!(
        asked,
        [
            "router-a.local.",
            "router-a._arpx._tcp.local.",
            "router-a._agentd._tcp.local."
        ]
    );
    assert!(p.questions.iter().all(|q| q.unicast && q.qtype == TYPE_ANY));
    assert!(p.authority.iter().any(|r| r.rtype == TYPE_SRV));
    let announcements: Vec<&(Millis, Transmit)> = sent
        .iter()
        .filter(|(_, t)| t.packet.is_response())
        .collect();
    assert_eq!(announcements.len(), 2, "{sent:#?}");
    assert_eq!(announcements[0].0.saturating_sub(probes[2].0), 250);
    assert_eq!(announcements[1].0.saturating_sub(announcements[0].0), 1000);
    let a = &announcements[0].1.packet;
    for (name, rtype) in [
        ("router-a.local", TYPE_A),
        ("router-a._arpx._tcp.local", TYPE_SRV),
        ("router-a._arpx._tcp.local", TYPE_TXT),
        ("_arpx._tcp.local", TYPE_PTR),
        ("_agentd._tcp.local", TYPE_PTR),
        ("_services._dns-sd._udp.local", TYPE_PTR),
    ] {
        assert!(has(a, name, rtype), "{name} {rtype} in {a:#?}");
    }
    // Unique records flush caches, shared ones do not.
    assert!(a
        .answers
        .iter()
        .all(|r| r.cache_flush == (r.rtype != TYPE_PTR)));
    let srv = a.answers.iter().find(|r| r.rtype == TYPE_SRV).unwrap();
    assert_eq!(srv.ttl, TTL_HOST);
    assert!(
        matches!(&srv.data, Data::Srv { port: 7447, target, .. } if *target == n("router-a.local"))
    );
    assert_eq!(announcements[1].1.packet.answers.len(), a.answers.len());
}

#[test]
fn answers_unique_records_at_once_and_shared_ones_after_a_delay() {
    let mut r = claimed(false);
    r.receive(Millis(10_000), peer(MDNS), &query("router-a.local", TYPE_A));
    let t = r.poll_transmit().expect("an immediate answer");
    assert!(has(&t.packet, "router-a.local", TYPE_A));
    assert_eq!(t.to, None);

    r.receive(
        Millis(20_000),
        peer(MDNS),
        &query("_arpx._tcp.local", TYPE_PTR),
    );
    assert!(r.poll_transmit().is_none(), "a shared answer waits");
    let due = r.poll_timeout().unwrap();
    assert!((Millis(20_020)..=Millis(20_120)).contains(&due), "{due:?}");
    r.handle_timeout(due);
    let t = r.poll_transmit().unwrap();
    assert!(has(&t.packet, "_arpx._tcp.local", TYPE_PTR));
    // The instance's SRV, TXT and the host's address come along, and
    // the NSEC saying the host has no IPv6 address (§6.2).
    let extra: Vec<u16> = t.packet.additional.iter().map(|r| r.rtype).collect();
    assert_eq!(
        extra,
        [TYPE_SRV, TYPE_TXT, TYPE_A, TYPE_NSEC],
        "{:#?}",
        t.packet.additional
    );
}

#[test]
fn a_known_answer_with_half_its_ttl_left_is_not_repeated() {
    let mut r = claimed(false);
    let ptr = |ttl| Record {
        name: n("_arpx._tcp.local"),
        rtype: TYPE_PTR,
        cache_flush: false,
        ttl,
        data: Data::Ptr(n("router-a._arpx._tcp.local")),
    };
    let mut q = query("_arpx._tcp.local", TYPE_PTR);
    q.answers.push(ptr(TTL_OTHER / 2));
    r.receive(Millis(10_000), peer(MDNS), &q);
    assert_eq!(r.poll_timeout(), None, "nothing to answer");
    q.answers[0] = ptr(TTL_OTHER / 2 - 1);
    r.receive(Millis(10_000), peer(MDNS), &q);
    assert!(
        r.poll_timeout().is_some(),
        "an aging known answer is refreshed"
    );
}

#[test]
fn a_record_is_multicast_at_most_once_a_second() {
    let mut r = claimed(false);
    let q = query("router-a.local", TYPE_A);
    r.receive(Millis(10_000), peer(MDNS), &q);
    assert!(r.poll_transmit().is_some());
    r.receive(Millis(10_500), peer(MDNS), &q);
    assert!(r.poll_transmit().is_none());
    r.receive(Millis(11_000), peer(MDNS), &q);
    assert!(r.poll_transmit().is_some());
}

#[test]
fn a_legacy_resolver_gets_a_unicast_dns_answer() {
    let mut r = claimed(false);
    let mut q = query("router-a.local", TYPE_A);
    q.id = 0x4242;
    r.receive(Millis(10_000), peer(40_000), &q);
    let t = r.poll_transmit().unwrap();
    assert_eq!(t.to, Some(peer(40_000)));
    assert_eq!(t.packet.id, 0x4242);
    assert_eq!(t.packet.questions, q.questions);
    assert!(t
        .packet
        .answers
        .iter()
        .all(|r| !r.cache_flush && r.ttl == 10));
}

#[test]
fn a_conflict_while_probing_renames_the_host() {
    let mut r = Responder::new(3);
    r.configure(Millis(0), config(false));
    r.handle_timeout(Millis(250));
    while r.poll_transmit().is_some() {}
    let theirs = Record {
        name: n("router-a.local"),
        rtype: TYPE_A,
        cache_flush: true,
        ttl: 120,
        data: Data::A(Ipv4Addr::new(192, 0, 2, 77)),
    };
    r.receive(Millis(300), peer(MDNS), &response(vec![theirs]));
    assert_eq!(
        r.poll_event(),
        Some(Event::Renamed {
            from: n("router-a.local"),
            to: n("router-a-2.local")
        })
    );
    let sent = run(&mut r, Millis(300), Millis(5000));
    let last = &sent.last().unwrap().1.packet;
    assert!(has(last, "router-a-2.local", TYPE_A), "{last:#?}");
    assert!(!has(last, "router-a.local", TYPE_A));
    let srv = last.answers.iter().find(|r| r.rtype == TYPE_SRV).unwrap();
    assert!(matches!(&srv.data, Data::Srv { target, .. } if *target == n("router-a-2.local")));
}

#[test]
fn our_own_announcement_heard_back_is_no_conflict() {
    let mut r = Responder::new(4);
    r.configure(Millis(0), config(false));
    let sent = run(&mut r, Millis(0), Millis(5000));
    let ours = sent.last().unwrap().1.packet.clone();
    r.receive(Millis(6000), SocketAddr::new(v4(1), MDNS), &ours);
    assert_eq!(r.poll_event(), None);
}

#[test]
fn a_conflict_after_the_claim_renames_the_instance_and_withdraws_the_old_one() {
    let mut r = claimed(false);
    let theirs = Record {
        name: n("router-a._arpx._tcp.local"),
        rtype: TYPE_SRV,
        cache_flush: true,
        ttl: 120,
        data: Data::Srv {
            priority: 0,
            weight: 0,
            port: 9,
            target: n("other.local"),
        },
    };
    r.receive(Millis(10_000), peer(MDNS), &response(vec![theirs]));
    assert_eq!(
        r.poll_event(),
        Some(Event::Renamed {
            from: n("router-a._arpx._tcp.local"),
            to: n("router-a (2)._arpx._tcp.local")
        })
    );
    let goodbye = r.poll_transmit().unwrap().packet;
    assert!(goodbye.answers.iter().all(|r| r.ttl == 0));
    assert!(has(&goodbye, "router-a._arpx._tcp.local", TYPE_SRV));
    assert!(has(&goodbye, "_arpx._tcp.local", TYPE_PTR));
    let sent = run(&mut r, Millis(10_000), Millis(15_000));
    assert!(sent
        .iter()
        .any(|(_, t)| has(&t.packet, "router-a (2)._arpx._tcp.local", TYPE_SRV)));
}

#[test]
fn a_simultaneous_prober_with_later_records_wins_the_tie_break() {
    for (their_last, we_win) in [(200u8, false), (0u8, true)] {
        let mut r = Responder::new(5);
        r.configure(Millis(0), config(false));
        r.handle_timeout(Millis(250));
        while r.poll_transmit().is_some() {}
        let probe = Packet {
            questions: vec![Question {
                name: n("router-a.local"),
                qtype: TYPE_ANY,
                unicast: true,
            }],
            authority: vec![Record {
                name: n("router-a.local"),
                rtype: TYPE_A,
                cache_flush: false,
                ttl: 120,
                data: Data::A(Ipv4Addr::new(192, 0, 2, their_last)),
            }],
            ..Packet::default()
        };
        r.receive(Millis(300), peer(MDNS), &probe);
        let sent = run(&mut r, Millis(300), Millis(1200));
        let announced = sent.iter().any(|(_, t)| t.packet.is_response());
        assert_eq!(announced, we_win, "their address .{their_last}: {sent:#?}");
    }
}

#[test]
fn the_shared_name_is_looked_up_and_left_to_its_holder_without_a_probe() {
    let mut r = Responder::new(6);
    let mut c = config(true);
    c.own.push(v4(2));
    r.configure(Millis(0), c);
    assert_eq!(r.poll_event(), Some(Event::AliasClaiming));
    r.handle_timeout(Millis(0));
    let mut lookups = 0;
    while let Some(t) = r.poll_transmit() {
        let q = &t.packet.questions;
        if q.iter().any(|q| q.name == n("nexus-router.local")) {
            lookups += 1;
            assert!(q.iter().all(|q| !q.unicast && q.qtype != TYPE_ANY));
        }
    }
    assert_eq!(lookups, 1);
    let a = |last| Record {
        name: n("nexus-router.local"),
        rtype: TYPE_A,
        cache_flush: true,
        ttl: 120,
        data: Data::A(Ipv4Addr::new(192, 0, 2, last)),
    };
    // Our own addresses do not count; another's does.
    r.receive(Millis(500), peer(MDNS), &response(vec![a(2), a(50)]));
    let sent = run(&mut r, Millis(500), Millis(6000));
    assert_eq!(r.poll_event(), Some(Event::AliasHeld(vec![v4(50)])));
    for (_, t) in &sent {
        let p = &t.packet;
        assert!(
            !p.authority
                .iter()
                .any(|r| r.name == n("nexus-router.local")),
            "a probe: {p:#?}"
        );
        assert!(!has(p, "nexus-router.local", TYPE_A));
    }
}

#[test]
fn the_shared_name_unheld_is_probed_answered_and_given_up_on_conflict() {
    let mut r = Responder::new(8);
    r.configure(Millis(0), config(true));
    let sent = run(&mut r, Millis(0), Millis(6000));
    let events: Vec<Event> = std::iter::from_fn(|| r.poll_event()).collect();
    assert_eq!(events, [Event::AliasClaiming, Event::AliasAnswering]);
    assert!(sent
        .iter()
        .any(|(_, t)| has(&t.packet, "nexus-router.local", TYPE_A)));
    r.receive(
        Millis(7000),
        peer(MDNS),
        &query("nexus-router.local", TYPE_A),
    );
    assert!(has(
        &r.poll_transmit().unwrap().packet,
        "nexus-router.local",
        TYPE_A
    ));

    let theirs = Record {
        name: n("nexus-router.local"),
        rtype: TYPE_A,
        cache_flush: true,
        ttl: 120,
        data: Data::A(Ipv4Addr::new(192, 0, 2, 50)),
    };
    r.receive(Millis(8000), peer(MDNS), &response(vec![theirs]));
    assert_eq!(r.poll_event(), Some(Event::AliasConflict));
    let goodbye = r.poll_transmit().unwrap().packet;
    assert!(has(&goodbye, "nexus-router.local", TYPE_A));
    assert!(goodbye.answers.iter().all(|r| r.ttl == 0));
    r.receive(
        Millis(9500),
        peer(MDNS),
        &query("nexus-router.local", TYPE_A),
    );
    assert!(
        r.poll_transmit().is_none(),
        "a name given up is not answered"
    );
}

#[test]
fn a_new_address_is_announced_and_the_old_one_said_goodbye_to() {
    let mut r = claimed(false);
    let mut c = config(false);
    c.addrs = vec![v4(3)];
    r.configure(Millis(10_000), c);
    let sent = run(&mut r, Millis(10_000), Millis(12_000));
    let gone = &sent[0].1.packet;
    assert!(gone.answers.iter().all(|r| r.ttl == 0));
    assert_eq!(gone.answers.len(), 1);
    assert!(matches!(gone.answers[0].data, Data::A(a) if IpAddr::V4(a) == v4(1)));
    let fresh: Vec<&Transmit> = sent[1..].iter().map(|(_, t)| t).collect();
    assert_eq!(fresh.len(), 2, "announced twice: {sent:#?}");
    assert!(
        matches!(fresh[0].packet.answers[..], [Record { data: Data::A(a), .. }] if IpAddr::V4(a) == v4(3))
    );
    // No probe: the names are ours already.
    assert!(sent.iter().all(|(_, t)| t.packet.is_response()));
}

#[test]
fn goodbye_withdraws_everything_published() {
    let mut r = claimed(true);
    let t = r.goodbye().unwrap();
    assert!(t.packet.answers.iter().all(|r| r.ttl == 0));
    for (name, rtype) in [
        ("router-a.local", TYPE_A),
        ("nexus-router.local", TYPE_A),
        ("_arpx._tcp.local", TYPE_PTR),
        ("router-a._agentd._tcp.local", TYPE_TXT),
    ] {
        assert!(has(&t.packet, name, rtype), "{name}");
    }
    assert!(r.goodbye().is_none());
    r.receive(Millis(9000), peer(MDNS), &query("router-a.local", TYPE_A));
    assert!(r.poll_transmit().is_none());
}

/// The NSEC records of `records`: (owner, the types it lists, TTL).
fn negatives(records: &[Record]) -> Vec<(Name, Vec<u16>, u32)> {
    records
        .iter()
        .filter(|r| r.rtype == TYPE_NSEC)
        .map(|r| {
            let Data::Other(rdata) = &r.data else {
                panic!("NSEC data kept raw: {r:?}");
            };
            let (next, types) = negative::nsec_types(rdata).expect("a well-formed NSEC");
            assert_eq!(next, r.name, "mDNS NSEC names its own owner (§6.1)");
            assert!(r.cache_flush, "an NSEC is unique");
            (r.name.clone(), types, r.ttl)
        })
        .collect()
}

#[test]
fn nsec_bitmap_is_rfc_4034_window_zero() {
    // A (1) and AAAA (28): bytes 0 and 3 of window 0, most significant
    // bit first.
    let r = negative::nsec(&n("router-a.local"), &[TYPE_AAAA, TYPE_A], 120);
    let Data::Other(rdata) = &r.data else {
        panic!("{r:?}")
    };
    let mut want = n("router-a.local").wire().to_vec();
    want.extend_from_slice(&[0, 4, 0x40, 0, 0, 0x08]);
    assert_eq!(rdata, &want);
    // SRV (33) and TXT (16).
    let r = negative::nsec(&n("x.local"), &[TYPE_SRV, TYPE_TXT], 120);
    let Data::Other(rdata) = &r.data else {
        panic!("{r:?}")
    };
    assert_eq!(&rdata[rdata.len() - 7..], &[0, 5, 0, 0, 0x80, 0, 0x40]);
    // It travels: encoded and decoded, it reads back the same.
    let p = response(vec![r]);
    assert_eq!(Packet::decode(&p.encode()).unwrap(), p);
}

#[test]
fn a_type_our_name_lacks_is_answered_with_an_nsec_at_once() {
    let mut r = claimed(false);
    // The host has an IPv4 address only.
    r.receive(
        Millis(10_000),
        peer(MDNS),
        &query("router-a.local", TYPE_AAAA),
    );
    let t = r.poll_transmit().expect("a negative answer, not silence");
    assert_eq!(t.to, None);
    assert_eq!(
        negatives(&t.packet.answers),
        [(n("router-a.local"), vec![TYPE_A], TTL_HOST)]
    );
    assert_eq!(t.packet.answers.len(), 1, "{:#?}", t.packet);
    // A TXT lookup of an instance: it has SRV and TXT, so TXT answers;
    // an A lookup of the instance name gets the NSEC listing both.
    r.receive(
        Millis(10_000),
        peer(MDNS),
        &query("router-a._arpx._tcp.local", TYPE_A),
    );
    let t = r.poll_transmit().unwrap();
    assert_eq!(
        negatives(&t.packet.answers),
        [(
            n("router-a._arpx._tcp.local"),
            vec![TYPE_TXT, TYPE_SRV],
            TTL_HOST
        )]
    );
    // The TTL is the one the missing record would have had (§6.1).
    r.receive(
        Millis(12_000),
        peer(MDNS),
        &query("router-a.local", TYPE_TXT),
    );
    let t = r.poll_transmit().unwrap();
    assert_eq!(negatives(&t.packet.answers)[0].2, TTL_OTHER);
}

#[test]
fn names_not_ours_or_not_yet_claimed_and_any_questions_get_no_nsec() {
    let mut r = claimed(false);
    for (name, qtype) in [
        ("router-b.local", TYPE_AAAA),
        // Service types are shared: others may hold records there.
        ("_arpx._tcp.local", TYPE_TXT),
        ("_services._dns-sd._udp.local", TYPE_SRV),
    ] {
        r.receive(Millis(10_000), peer(MDNS), &query(name, qtype));
        assert_eq!(r.poll_transmit(), None, "{name} {qtype}");
        assert_eq!(r.poll_timeout(), None, "{name} {qtype}");
    }
    // ANY gets what exists, nothing negative.
    r.receive(
        Millis(10_000),
        peer(MDNS),
        &query("router-a.local", TYPE_ANY),
    );
    let t = r.poll_transmit().unwrap();
    assert!(negatives(&t.packet.answers).is_empty(), "{:#?}", t.packet);
    // While the host name is still being probed, it is not ours yet.
    let mut r = Responder::new(1);
    r.configure(Millis(0), config(false));
    r.receive(Millis(1), peer(MDNS), &query("router-a.local", TYPE_AAAA));
    assert!(std::iter::from_fn(|| r.poll_transmit()).all(|t| !t.packet.is_response()));
}

#[test]
fn an_address_answer_carries_an_nsec_for_the_family_the_host_lacks() {
    let mut r = claimed(false);
    r.receive(Millis(10_000), peer(MDNS), &query("router-a.local", TYPE_A));
    let t = r.poll_transmit().unwrap();
    assert!(has(&t.packet, "router-a.local", TYPE_A));
    assert_eq!(
        negatives(&t.packet.additional),
        [(n("router-a.local"), vec![TYPE_A], TTL_HOST)]
    );
    // An SRV answer brings the target's address and its NSEC (RFC 6763
    // §12.2).
    r.receive(
        Millis(10_000),
        peer(MDNS),
        &query("router-a._arpx._tcp.local", TYPE_SRV),
    );
    let t = r.poll_transmit().unwrap();
    let extra: Vec<u16> = t.packet.additional.iter().map(|r| r.rtype).collect();
    assert_eq!(extra, [TYPE_A, TYPE_NSEC], "{:#?}", t.packet.additional);
    // With both families there is nothing to deny.
    let mut both = config(false);
    both.addrs.push("2001:db8::1".parse().unwrap());
    r.configure(Millis(11_000), both);
    run(&mut r, Millis(11_000), Millis(13_000));
    r.receive(Millis(20_000), peer(MDNS), &query("router-a.local", TYPE_A));
    let t = r.poll_transmit().unwrap();
    assert!(
        negatives(&t.packet.additional).is_empty(),
        "{:#?}",
        t.packet
    );
    assert!(t.packet.additional.iter().any(|r| r.rtype == TYPE_AAAA));
}

#[test]
fn an_nsec_is_rate_limited_and_suppressed_when_known() {
    let mut r = claimed(false);
    let q = query("router-a.local", TYPE_AAAA);
    r.receive(Millis(10_000), peer(MDNS), &q);
    let first = r.poll_transmit().unwrap();
    r.receive(Millis(10_500), peer(MDNS), &q);
    assert_eq!(r.poll_transmit(), None, "at most once a second");
    r.receive(Millis(11_000), peer(MDNS), &q);
    assert!(r.poll_transmit().is_some());
    // The asker already holds it with more than half its TTL left.
    let mut q = q.clone();
    q.answers.push(first.packet.answers[0].clone());
    r.receive(Millis(20_000), peer(MDNS), &q);
    assert_eq!(r.poll_transmit(), None);
}

#[test]
fn a_legacy_resolver_gets_nodata_with_the_nsec_as_authority() {
    let mut r = claimed(false);
    let mut q = query("router-a.local", TYPE_AAAA);
    q.id = 0x0bad;
    r.receive(Millis(10_000), peer(40_000), &q);
    let t = r
        .poll_transmit()
        .expect("an answer, so the resolver need not time out");
    assert_eq!(t.to, Some(peer(40_000)));
    assert_eq!(t.packet.id, 0x0bad);
    assert!(t.packet.answers.is_empty(), "{:#?}", t.packet);
    assert_eq!(t.packet.authority.len(), 1);
    let neg = &t.packet.authority[0];
    assert_eq!(
        (neg.rtype, neg.ttl, neg.cache_flush),
        (TYPE_NSEC, 10, false)
    );
}

fn qu(name: &str, qtype: u16) -> Packet {
    let mut q = query(name, qtype);
    q.questions[0].unicast = true;
    q
}

#[test]
fn a_qu_question_is_answered_by_unicast_unless_the_link_needs_a_refresh() {
    let mut r = claimed(false);
    // The announcements went out within the first seconds: well inside
    // a quarter of the A record's 120 s.
    r.receive(Millis(10_000), peer(MDNS), &qu("router-a.local", TYPE_A));
    let t = r.poll_transmit().expect("an answer");
    assert_eq!(t.to, Some(peer(MDNS)), "straight to the asker");
    assert!(has(&t.packet, "router-a.local", TYPE_A));
    assert!(t.packet.questions.is_empty());
    assert_eq!(r.poll_transmit(), None);
    // A shared PTR heard recently too: unicast, and at once.
    r.receive(
        Millis(10_000),
        peer(MDNS),
        &qu("_arpx._tcp.local", TYPE_PTR),
    );
    let t = r
        .poll_transmit()
        .expect("an answer without the shared delay");
    assert_eq!(t.to, Some(peer(MDNS)));
    assert!(has(&t.packet, "_arpx._tcp.local", TYPE_PTR));
    // More than 30 s after the A record was last multicast, the answer
    // is multicast, which refreshes every cache on the link...
    r.receive(Millis(40_000), peer(MDNS), &qu("router-a.local", TYPE_A));
    let t = r.poll_transmit().unwrap();
    assert_eq!(t.to, None);
    // ... and the next QU question is answered by unicast again.
    r.receive(Millis(41_000), peer(MDNS), &qu("router-a.local", TYPE_A));
    assert_eq!(r.poll_transmit().unwrap().to, Some(peer(MDNS)));
    // An NSEC never sent goes by multicast first.
    r.receive(Millis(41_000), peer(MDNS), &qu("router-a.local", TYPE_AAAA));
    let t = r.poll_transmit().unwrap();
    assert_eq!((t.to, negatives(&t.packet.answers).len()), (None, 1));
}

#[test]
fn a_probe_for_our_name_is_answered_by_multicast() {
    let mut r = claimed(false);
    let mut probe = qu("router-a.local", TYPE_ANY);
    probe.authority.push(Record {
        name: n("router-a.local"),
        rtype: TYPE_A,
        cache_flush: false,
        ttl: TTL_HOST,
        data: Data::A(Ipv4Addr::new(192, 0, 2, 77)),
    });
    r.receive(Millis(10_000), peer(MDNS), &probe);
    let t = r.poll_transmit().expect("a defence");
    assert_eq!(t.to, None, "the defence is for every cache on the link");
    assert!(has(&t.packet, "router-a.local", TYPE_A));
}
