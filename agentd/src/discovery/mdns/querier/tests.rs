use std::net::{Ipv4Addr, Ipv6Addr};

use super::*;
use crate::discovery::mdns::packet::{FLAG_AUTHORITATIVE, FLAG_RESPONSE};

const SEED: u64 = 0x5eed_1234;
const LONG: u32 = 4500;

fn service() -> Name {
    Name::dotted("_arpx._tcp.local").unwrap()
}

fn instance(label: &str) -> Name {
    service().prefixed(label.as_bytes()).unwrap()
}

fn host(label: &str) -> Name {
    Name::dotted(&format!("{label}.local")).unwrap()
}

fn record(name: Name, rtype: u16, ttl: u32, data: Data) -> Record {
    Record {
        name,
        rtype,
        cache_flush: rtype != TYPE_PTR,
        ttl,
        data,
    }
}

fn ptr(inst: &Name, ttl: u32) -> Record {
    record(service(), TYPE_PTR, ttl, Data::Ptr(inst.clone()))
}

fn srv(inst: &Name, port: u16, target: &Name, ttl: u32) -> Record {
    let data = Data::Srv {
        priority: 0,
        weight: 0,
        port,
        target: target.clone(),
    };
    record(inst.clone(), TYPE_SRV, ttl, data)
}

/// TXT data: the strings, each with its length byte.
fn wire(strings: &[&str]) -> Vec<u8> {
    let mut raw = Vec::new();
    for s in strings {
        raw.push(s.len() as u8);
        raw.extend_from_slice(s.as_bytes());
    }
    raw
}

fn txt(inst: &Name, strings: &[&str], ttl: u32) -> Record {
    record(inst.clone(), TYPE_TXT, ttl, Data::Txt(wire(strings)))
}

fn a(target: &Name, ip: [u8; 4], ttl: u32) -> Record {
    record(target.clone(), TYPE_A, ttl, Data::A(Ipv4Addr::from(ip)))
}

fn aaaa(target: &Name, ip: &str, ttl: u32) -> Record {
    let ip: Ipv6Addr = ip.parse().unwrap();
    record(target.clone(), TYPE_AAAA, ttl, Data::Aaaa(ip))
}

fn response(answers: Vec<Record>, additional: Vec<Record>) -> Packet {
    Packet {
        flags: FLAG_RESPONSE | FLAG_AUTHORITATIVE,
        answers,
        additional,
        ..Packet::default()
    }
}

/// PTR in the answers, the rest in the additional section, as a
/// responder sends it (RFC 6763 §12).
fn full(inst: &Name, target: &Name, port: u16, txt_strings: &[&str], ttl: u32) -> Packet {
    response(
        vec![ptr(inst, ttl)],
        vec![
            srv(inst, port, target, ttl),
            txt(inst, txt_strings, ttl),
            a(target, [192, 168, 1, 9], ttl),
        ],
    )
}

fn querier() -> Querier {
    Querier::new(service(), Millis(0), SEED)
}

fn events(q: &mut Querier) -> Vec<Event> {
    std::iter::from_fn(|| q.poll_event()).collect()
}

fn removed(events: &[Event]) -> Vec<Name> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Removed(n) => Some(n.clone()),
            Event::Resolved(_) => None,
        })
        .collect()
}

fn resolved(events: &[Event]) -> Vec<Resolved> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Resolved(r) => Some(r.clone()),
            Event::Removed(_) => None,
        })
        .collect()
}

/// Runs every timeout up to and including `until`, returning what was
/// sent, stamped with when.
fn run(q: &mut Querier, until: Millis) -> Vec<(Millis, Packet)> {
    let mut sent = Vec::new();
    for _ in 0..100_000 {
        match q.poll_timeout() {
            Some(at) if at <= until => {
                q.handle_timeout(at);
                sent.extend(std::iter::from_fn(|| q.poll_transmit()).map(|p| (at, p)));
            }
            _ => return sent,
        }
    }
    panic!("poll_timeout does not advance");
}

fn asks(packet: &Packet, name: &Name, qtype: u16) -> bool {
    packet
        .questions
        .iter()
        .any(|q| q.name == *name && q.qtype == qtype)
}

/// When a question for `name`/`qtype` was sent.
fn times(sent: &[(Millis, Packet)], name: &Name, qtype: u16) -> Vec<u64> {
    sent.iter()
        .filter(|(_, p)| asks(p, name, qtype))
        .map(|(at, _)| at.0)
        .collect()
}

#[test]
fn first_query_in_window_then_doubling_to_an_hour() {
    for seed in 0..200 {
        let q = Querier::new(service(), Millis(1000), seed);
        let first = q.poll_timeout().unwrap().0;
        assert!((1020..=1120).contains(&first), "seed {seed}: {first}");
    }
    let mut q = querier();
    assert!(
        q.poll_transmit().is_none(),
        "nothing before the first timeout"
    );
    let sent = run(&mut q, Millis(6 * 3_600_000));
    let browse = times(&sent, &service(), TYPE_PTR);
    assert!((20..=120).contains(&browse[0]));
    let gaps: Vec<u64> = browse.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps[..5], [1000, 2000, 4000, 8000, 16000]);
    assert_eq!(gaps[11], 2_048_000);
    assert!(gaps[12..].iter().all(|&g| g == 3_600_000), "{gaps:?}");
    let (_, packet) = &sent[0];
    assert_eq!((packet.id, packet.flags), (0, 0));
    assert_eq!(
        packet.questions,
        [Question {
            name: service(),
            qtype: TYPE_PTR,
            unicast: false
        }]
    );
    assert!(packet.answers.is_empty());
}

#[test]
fn known_answers_follow_the_half_ttl_rule() {
    let mut q = querier();
    let (short, long) = (instance("short"), instance("long"));
    q.receive(
        Millis(200),
        &response(vec![ptr(&short, 10), ptr(&long, LONG)], vec![]),
    );
    let sent = run(&mut q, Millis(9_000));
    let browses: Vec<&(Millis, Packet)> = sent
        .iter()
        .filter(|(_, p)| asks(p, &service(), TYPE_PTR))
        .collect();
    assert!(browses.len() >= 3);
    for (at, packet) in browses {
        let known: Vec<&Record> = packet.answers.iter().collect();
        assert!(known.iter().all(|r| r.name == service() && !r.cache_flush));
        let has = |inst: &Name| known.iter().find(|r| r.data == Data::Ptr(inst.clone()));
        // "short" expires at 10 200: listed while more than 5 s remain.
        assert_eq!(
            has(&short).is_some(),
            (10_200 - at.0) * 2 > 10_000,
            "at {at:?}"
        );
        let long_ttl = has(&long).expect("long always listed").ttl;
        assert_eq!(u64::from(long_ttl), (200 + 4_500_000 - at.0) / 1000);
    }
}

#[test]
fn resolves_from_one_packet_once() {
    let mut q = querier();
    let (inst, target) = (instance("router-b"), host("router-b"));
    let packet = response(
        vec![ptr(&inst, LONG)],
        vec![
            aaaa(&target, "fe80::2", LONG),
            a(&target, [10, 0, 0, 9], LONG),
            srv(&inst, 4443, &target, LONG),
            aaaa(&target, "2001:db8::1", LONG),
            txt(
                &inst,
                &["id=7", "flag", "", "=nokey", "v=a=b", "ID=dup"],
                LONG,
            ),
            a(&target, [10, 0, 0, 2], LONG),
        ],
    );
    q.receive(Millis(100), &packet);
    let got = resolved(&events(&mut q));
    let expected = Resolved {
        instance: inst.clone(),
        port: 4443,
        addresses: vec![
            "10.0.0.2".parse().unwrap(),
            "10.0.0.9".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
            "fe80::2".parse().unwrap(),
        ],
        // As received: the record's own decoder judges what it says.
        txt: wire(&["id=7", "flag", "", "=nokey", "v=a=b", "ID=dup"]),
    };
    assert_eq!(got, [expected]);
    // An identical refresh reports nothing, and nothing is missing.
    q.receive(Millis(2000), &packet);
    assert!(events(&mut q).is_empty());
    let sent = run(&mut q, Millis(60_000));
    assert!(times(&sent, &inst, TYPE_SRV).is_empty());
    assert!(times(&sent, &target, TYPE_A).is_empty());
    assert_eq!(q.cached_records(), 7);
}

#[test]
fn changed_txt_port_or_address_is_reported_again() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    q.receive(Millis(100), &full(&inst, &target, 1000, &["v=1"], LONG));
    assert_eq!(resolved(&events(&mut q)).len(), 1);

    q.receive(
        Millis(3000),
        &response(vec![txt(&inst, &["v=2"], LONG)], vec![]),
    );
    let got = resolved(&events(&mut q));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].txt, wire(&["v=2"]));

    q.receive(
        Millis(6000),
        &response(vec![srv(&inst, 2000, &target, LONG)], vec![]),
    );
    let got = resolved(&events(&mut q));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].port, 2000);

    let mut extra = aaaa(&target, "2001:db8::5", LONG);
    extra.cache_flush = false;
    q.receive(Millis(9000), &response(vec![extra], vec![]));
    let got = resolved(&events(&mut q));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].addresses.len(), 2);

    // The flushed TXT and SRV are gone a second later, with no report:
    // what is left resolves to what was last reported.
    run(&mut q, Millis(20_000));
    assert!(events(&mut q).is_empty());
    assert_eq!(q.cached_records(), 5);
}

#[test]
fn goodbye_removes_after_one_second() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    q.receive(Millis(100), &full(&inst, &target, 1000, &[], LONG));
    assert_eq!(resolved(&events(&mut q)).len(), 1);
    q.receive(Millis(5000), &response(vec![ptr(&inst, 0)], vec![]));
    run(&mut q, Millis(5999));
    assert!(events(&mut q).is_empty());
    run(&mut q, Millis(6000));
    assert_eq!(events(&mut q), [Event::Removed(inst.clone())]);
    assert_eq!(q.instance_count(), 0);
    assert_eq!(q.cached_records(), 0);
    // A goodbye for something never seen caches nothing.
    q.receive(Millis(7000), &response(vec![ptr(&inst, 0)], vec![]));
    assert_eq!(q.instance_count(), 0);
}

#[test]
fn cache_flush_replaces_an_old_address_after_one_second() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    q.receive(Millis(100), &full(&inst, &target, 1000, &[], LONG));
    events(&mut q);
    q.receive(
        Millis(5000),
        &response(vec![a(&target, [10, 0, 0, 2], LONG)], vec![]),
    );
    // Another flushing record of the same burst (within a second) does
    // not flush the first.
    q.receive(
        Millis(5400),
        &response(vec![a(&target, [10, 0, 0, 3], LONG)], vec![]),
    );
    run(&mut q, Millis(6000));
    let last = resolved(&events(&mut q)).pop().unwrap();
    let expected: Vec<IpAddr> = vec!["10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap()];
    assert_eq!(last.addresses, expected);
}

#[test]
fn ptr_expiry_removes_after_refresh_queries() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    let mut packet = full(&inst, &target, 1000, &[], LONG);
    packet.answers[0].ttl = 10;
    q.receive(Millis(100), &packet);
    events(&mut q);
    let sent = run(&mut q, Millis(10_099));
    assert!(events(&mut q).is_empty());
    let refreshes: Vec<u64> = times(&sent, &service(), TYPE_PTR)
        .into_iter()
        .filter(|&t| t > 8000)
        .collect();
    assert!(refreshes.len() >= 3, "{refreshes:?}");
    run(&mut q, Millis(10_100));
    assert_eq!(events(&mut q), [Event::Removed(inst)]);
    assert_eq!(q.cached_records(), 0);
}

#[test]
fn refresh_queries_at_80_to_95_percent_and_restart() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    let mut packet = full(&inst, &target, 1000, &[], LONG);
    packet.additional[2].ttl = 100;
    q.receive(Millis(200), &packet);
    let sent = run(&mut q, Millis(120_000));
    let mut asked = times(&sent, &target, TYPE_A);
    asked.retain(|&t| t < 100_200);
    assert_eq!(asked.len(), 4, "{asked:?}");
    for (at, percent) in asked.iter().zip([80, 85, 90, 95]) {
        let from = 200 + percent * 1000;
        assert!((from..=from + 2000).contains(at), "{at} for {percent} %");
    }
    // Unanswered, the address expires: the instance is no longer
    // resolved (no Removed), and its addresses are asked for.
    assert!(removed(&events(&mut q)).is_empty());
    assert_eq!(times(&sent, &target, TYPE_AAAA)[..2], [100_200, 101_200]);

    // An answer restarts the schedule from its arrival.
    let mut q = querier();
    q.receive(Millis(200), &packet);
    let sent = run(&mut q, Millis(83_000));
    assert_eq!(times(&sent, &target, TYPE_A).len(), 1);
    q.receive(
        Millis(83_000),
        &response(vec![a(&target, [192, 168, 1, 9], 100)], vec![]),
    );
    let sent = run(&mut q, Millis(200_000));
    let asked = times(&sent, &target, TYPE_A);
    assert!((163_000..=165_000).contains(&asked[0]), "{asked:?}");
    assert!(events(&mut q).len() == 1, "only the first resolution");
}

#[test]
fn missing_parts_are_asked_for_at_doubling_intervals() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    q.receive(Millis(200), &response(vec![ptr(&inst, LONG)], vec![]));
    let sent = run(&mut q, Millis(9000));
    assert_eq!(times(&sent, &inst, TYPE_SRV), [1200, 2200, 4200, 8200]);
    assert_eq!(times(&sent, &inst, TYPE_TXT), [1200, 2200, 4200, 8200]);
    assert!(events(&mut q).is_empty());

    q.receive(
        Millis(9000),
        &response(
            vec![srv(&inst, 1, &target, LONG), txt(&inst, &[], LONG)],
            vec![],
        ),
    );
    let sent = run(&mut q, Millis(17_000));
    assert!(times(&sent, &inst, TYPE_SRV).is_empty());
    assert_eq!(times(&sent, &target, TYPE_A), [16_200]);
    assert_eq!(times(&sent, &target, TYPE_AAAA), [16_200]);

    q.receive(
        Millis(17_000),
        &response(vec![aaaa(&target, "fe80::1", LONG)], vec![]),
    );
    assert_eq!(resolved(&events(&mut q)).len(), 1);
    // Backoff stops at a minute.
    let mut q = querier();
    q.receive(Millis(200), &response(vec![ptr(&inst, LONG)], vec![]));
    let sent = run(&mut q, Millis(600_000));
    let asked = times(&sent, &inst, TYPE_SRV);
    let gaps: Vec<u64> = asked.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(gaps.iter().max(), Some(&60_000));
}

#[test]
fn lost_srv_is_asked_again_without_removed() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    let mut packet = full(&inst, &target, 1000, &["a"], LONG);
    packet.additional[0].ttl = 10;
    q.receive(Millis(100), &packet);
    let first = resolved(&events(&mut q));
    let sent = run(&mut q, Millis(12_000));
    assert!(events(&mut q).is_empty(), "no Removed for a lost SRV");
    assert!(times(&sent, &inst, TYPE_SRV).iter().any(|&t| t >= 10_100));
    // The same SRV again is no news; a different one is.
    q.receive(
        Millis(12_000),
        &response(vec![srv(&inst, 1000, &target, LONG)], vec![]),
    );
    assert!(events(&mut q).is_empty());
    q.receive(
        Millis(15_000),
        &response(vec![srv(&inst, 1001, &target, LONG)], vec![]),
    );
    let got = resolved(&events(&mut q));
    assert_eq!(got.len(), 1);
    assert_eq!((first[0].port, got[0].port), (1000, 1001));
}

#[test]
fn verify_removes_after_ten_seconds_without_answer() {
    let mut q = querier();
    let (inst, other, target) = (instance("r"), instance("other"), host("r"));
    q.receive(Millis(100), &full(&inst, &target, 1000, &[], LONG));
    q.receive(Millis(100), &full(&other, &host("o"), 1000, &[], LONG));
    events(&mut q);
    run(&mut q, Millis(20_000));
    q.verify(Millis(20_000), &inst);
    let now = q.poll_transmit().expect("verification query at once");
    assert!(asks(&now, &inst, TYPE_SRV) && asks(&now, &service(), TYPE_PTR));
    assert!(now
        .answers
        .iter()
        .all(|r| r.name != inst && r.data != Data::Ptr(inst.clone())));
    assert!(now
        .answers
        .iter()
        .any(|r| r.data == Data::Ptr(other.clone())));
    let sent = run(&mut q, Millis(29_999));
    assert_eq!(times(&sent, &inst, TYPE_SRV), [22_000]);
    let doubted = Data::Ptr(inst.clone());
    assert!(sent
        .iter()
        .all(|(_, p)| p.answers.iter().all(|r| r.data != doubted)));
    assert!(events(&mut q).is_empty());
    run(&mut q, Millis(30_000));
    assert_eq!(events(&mut q), [Event::Removed(inst.clone())]);
    assert_eq!(q.instance_count(), 1);
    q.verify(Millis(31_000), &inst);
    assert!(
        q.poll_transmit().is_none(),
        "unknown instance: nothing to ask"
    );
}

#[test]
fn verify_is_cancelled_by_an_answer() {
    let mut q = querier();
    let (inst, target) = (instance("r"), host("r"));
    q.receive(Millis(100), &full(&inst, &target, 1000, &[], LONG));
    events(&mut q);
    q.verify(Millis(20_000), &inst);
    q.receive(
        Millis(25_000),
        &response(vec![srv(&inst, 1000, &target, LONG)], vec![]),
    );
    run(&mut q, Millis(60_000));
    assert!(events(&mut q).is_empty());
    assert_eq!(q.instance_count(), 1);
}

#[test]
fn unrelated_records_are_ignored() {
    let mut q = querier();
    let other_service = Name::dotted("_http._tcp.local").unwrap();
    let nested = Name::dotted("a.b._arpx._tcp.local").unwrap();
    let stranger = instance("stranger");
    let mut query_with_answers = full(&instance("q"), &host("q"), 1, &[], LONG);
    query_with_answers.flags = 0;
    q.receive(Millis(100), &query_with_answers);
    let junk = response(
        vec![
            record(
                other_service.clone(),
                TYPE_PTR,
                LONG,
                Data::Ptr(other_service.prefixed(b"x").unwrap()),
            ),
            ptr(&nested, LONG),
            record(
                service(),
                TYPE_PTR,
                LONG,
                Data::Ptr(other_service.prefixed(b"y").unwrap()),
            ),
            srv(&stranger, 1, &host("s"), LONG),
            txt(&stranger, &["a"], LONG),
            a(&host("s"), [1, 2, 3, 4], LONG),
            // A PTR whose data is not a name.
            record(service(), TYPE_PTR, LONG, Data::Other(vec![1, 2])),
        ],
        vec![],
    );
    q.receive(Millis(200), &junk);
    assert_eq!((q.cached_records(), q.instance_count()), (0, 0));
    assert!(events(&mut q).is_empty());
}

#[test]
fn cache_bound_holds_under_a_flood() {
    let mut q = querier();
    for i in 0..10_000 {
        let inst = instance(&format!("flood-{i}"));
        let target = host(&format!("h{i}"));
        let mut packet = full(&inst, &target, 1, &["x=y"], LONG);
        // The first target also tries to fill the cache on its own.
        for j in 0..if i == 0 { 200u8 } else { 0 } {
            packet.additional.push(a(&target, [10, 1, 0, j], LONG));
        }
        q.receive(Millis(100 + i), &packet);
        assert!(q.instance_count() <= MAX_INSTANCES);
        assert!(q.cached_records() <= MAX_RECORDS);
    }
    assert_eq!(q.instance_count(), MAX_INSTANCES);
    assert!(events(&mut q).len() <= MAX_INSTANCES);
    let sent = run(&mut q, Millis(20_000));
    for (_, packet) in &sent {
        assert!(packet.answers.len() <= MAX_KNOWN_ANSWERS);
    }
    assert!(sent
        .iter()
        .any(|(_, p)| p.answers.len() == MAX_KNOWN_ANSWERS));
    // Unpolled queries stay bounded too.
    for t in 0..1000 {
        q.verify(Millis(20_000 + t), &instance(&format!("flood-{t}")));
    }
    assert!(std::iter::from_fn(|| q.poll_transmit()).count() <= 32);
}

#[test]
fn flush_bit_on_a_shared_ptr_spares_other_instances() {
    let mut q = querier();
    let (one, two) = (instance("one"), instance("two"));
    q.receive(Millis(100), &full(&one, &host("one"), 1, &[], LONG));
    let mut packet = full(&two, &host("two"), 2, &[], LONG);
    packet.answers[0].cache_flush = true;
    q.receive(Millis(5000), &packet);
    run(&mut q, Millis(20_000));
    assert!(removed(&events(&mut q)).is_empty());
    assert_eq!(q.instance_count(), 2);
}
