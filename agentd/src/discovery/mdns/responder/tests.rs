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
    // The instance's SRV, TXT and the host's address come along.
    let extra: Vec<u16> = t.packet.additional.iter().map(|r| r.rtype).collect();
    assert!(extra.contains(&TYPE_SRV) && extra.contains(&TYPE_TXT) && extra.contains(&TYPE_A));
    assert_eq!(t.packet.additional.len(), 3, "{:#?}", t.packet.additional);
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
