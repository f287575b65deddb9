use std::net::IpAddr;

use router_pki::Fingerprint;

use super::*;
use crate::discovery::unicast::answer::Rr;

const SVC: &str = "_arpx._tcp.lab.example";
const INST: &str = "router-b._arpx._tcp.lab.example";
const HOST: &str = "router-b.lab.example";

fn settings() -> BrowseSettings {
    BrowseSettings {
        domains: vec!["lab.example".into()],
        require_dnssec: false,
        refresh_min_ms: 5_000,
        refresh_max_ms: 900_000,
    }
}

fn record() -> Record {
    Record::ours("router-b", "lab.example", Fingerprint([2; 32]), 7444, 7447)
}

fn rr(name: &str, ttl: u32, data: Data) -> Rr {
    Rr {
        name: name.into(),
        ttl,
        data,
    }
}

fn ptr(to: &str) -> Rr {
    rr(SVC, 300, Data::Ptr(to.into()))
}
fn srv() -> Rr {
    rr(
        INST,
        120,
        Data::Srv {
            port: 7444,
            target: HOST.into(),
        },
    )
}
fn txt() -> Rr {
    rr(INST, 120, Data::Txt(record().to_rdata()))
}
fn addr(ip: &str) -> Rr {
    match ip.parse::<IpAddr>().unwrap() {
        IpAddr::V4(v) => rr(HOST, 60, Data::A(v)),
        IpAddr::V6(v) => rr(HOST, 60, Data::Aaaa(v)),
    }
}

fn answer(records: Vec<Rr>) -> Result<Answer, DnsError> {
    Ok(Answer {
        authentic: false,
        nxdomain: false,
        records,
    })
}

fn asks(events: &[Event]) -> Vec<Ask> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ask(a) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

fn found(events: &[Event]) -> Vec<Found> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Found(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

fn questions(events: &[Event]) -> Vec<String> {
    asks(events)
        .iter()
        .map(|a| a.question.to_string())
        .collect()
}

/// Input: the first tick, a PTR answer whose additional section holds
/// SRV, TXT, A and AAAA (RFC 6763 §12.1). Output: one PTR question,
/// then the router found at once with both addresses, no further
/// question; the next lookup after the smallest TTL (60 s).
#[test]
fn additionals_complete_a_lookup_without_more_questions() {
    let mut b = Browser::new(settings(), Millis(0));
    let out = b.tick(Millis(0));
    assert_eq!(questions(&out), vec![format!("PTR {SVC}")]);
    let ask = asks(&out).remove(0);
    let out = b.answered(
        &ask,
        answer(vec![
            ptr(INST),
            srv(),
            txt(),
            addr("192.0.2.2"),
            addr("2001:db8::2"),
        ]),
        Millis(10),
    );
    assert!(asks(&out).is_empty(), "{out:?}");
    let f = found(&out);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].instance, INST);
    assert_eq!(f[0].record, record());
    assert_eq!(f[0].port, 7444);
    assert_eq!(f[0].addresses.len(), 2);
    let st = &b.status()[0];
    assert_eq!(
        (st.last_success, st.instances, st.last_error.clone()),
        (Some(Millis(10)), 1, None)
    );
    assert_eq!(b.next_deadline(), Some(Millis(60_010)));
    assert!(b.tick(Millis(60_009)).is_empty());
    assert_eq!(
        questions(&b.tick(Millis(60_010))),
        vec![format!("PTR {SVC}")]
    );
}

/// Input: bare answers, one question at a time. Output: the chain PTR
/// → SRV and TXT of the instance → AAAA and A of the SRV target, then
/// the router found.
#[test]
fn without_additionals_the_chain_is_asked_step_by_step() {
    let mut b = Browser::new(settings(), Millis(0));
    let ptr_ask = asks(&b.tick(Millis(0))).remove(0);
    let out = b.answered(&ptr_ask, answer(vec![ptr(INST)]), Millis(1));
    assert_eq!(
        questions(&out),
        vec![format!("SRV {INST}"), format!("TXT {INST}")]
    );
    let [srv_ask, txt_ask] = <[Ask; 2]>::try_from(asks(&out)).unwrap();
    let out = b.answered(&txt_ask, answer(vec![txt()]), Millis(2));
    assert!(out.is_empty(), "{out:?}");
    let out = b.answered(&srv_ask, answer(vec![srv()]), Millis(3));
    assert_eq!(
        questions(&out),
        vec![format!("AAAA {HOST}"), format!("A {HOST}")]
    );
    let [aaaa_ask, a_ask] = <[Ask; 2]>::try_from(asks(&out)).unwrap();
    let out = b.answered(&aaaa_ask, answer(vec![]), Millis(4));
    assert!(found(&out).is_empty(), "the round waits for A");
    let out = b.answered(&a_ask, answer(vec![addr("192.0.2.2")]), Millis(5));
    let f = found(&out);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].addresses, vec!["192.0.2.2".parse::<IpAddr>().unwrap()]);
}

/// Input: a router found, then a later round whose PTR answer no
/// longer lists it. Output: `Lost` for it, and the status counts none.
#[test]
fn an_instance_gone_from_the_ptr_answer_is_lost() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    b.answered(
        &ask,
        answer(vec![ptr(INST), srv(), txt(), addr("192.0.2.2")]),
        Millis(0),
    );
    let ask = asks(&b.tick(Millis(60_000))).remove(0);
    let out = b.answered(&ask, answer(vec![]), Millis(60_001));
    assert_eq!(
        out,
        vec![Event::Lost {
            instance: INST.into()
        }]
    );
    assert_eq!(b.status()[0].instances, 0);
    assert_eq!(b.known().count(), 0);
}

/// Input: a router found, then the resolver times out. Output: the
/// error in the domain's status with the retry after refresh_min; the
/// router stays found until its refresh time plus one retry pass,
/// then `Lost` (its candidate lifetime starts).
#[test]
fn a_failing_resolver_keeps_what_was_found_until_its_time_runs_out() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    b.answered(
        &ask,
        answer(vec![ptr(INST), srv(), txt(), addr("192.0.2.2")]),
        Millis(0),
    );
    let ask = asks(&b.tick(Millis(60_000))).remove(0);
    let out = b.answered(&ask, Err(DnsError::Timeout { tries: 2 }), Millis(64_000));
    assert!(out.is_empty(), "{out:?}");
    let st = &b.status()[0];
    assert_eq!(st.last_success, Some(Millis(0)));
    assert_eq!(
        st.last_error,
        Some((
            Millis(64_000),
            format!("PTR {SVC}: no answer after 2 tries")
        ))
    );
    assert_eq!(st.next_lookup, Some(Millis(69_000)));
    // Valid until 60 s + 5 s: lost at that tick, before the retry.
    assert_eq!(b.next_deadline(), Some(Millis(65_000)));
    let out = b.tick(Millis(65_000));
    assert_eq!(
        out,
        vec![Event::Lost {
            instance: INST.into()
        }]
    );
}

/// Input: TTLs of 0 and of a week. Output: the next lookup after
/// refresh_min and after refresh_max.
#[test]
fn refresh_follows_the_ttl_within_its_bounds() {
    for (ttl, want) in [(0u32, 5_000u64), (604_800, 900_000)] {
        let mut b = Browser::new(settings(), Millis(0));
        let ask = asks(&b.tick(Millis(0))).remove(0);
        let out = b.answered(
            &ask,
            answer(vec![rr(SVC, ttl, Data::Ptr(INST.into()))]),
            Millis(0),
        );
        // SRV/TXT fail: the round ends with the PTR's TTL only.
        for a in asks(&out) {
            b.answered(&a, Err(DnsError::Timeout { tries: 2 }), Millis(0));
        }
        assert_eq!(b.status()[0].next_lookup, Some(Millis(want)), "ttl {ttl}");
    }
}

/// Input: a PTR answer listing more than MAX_INSTANCES instances, one
/// PTR target outside the service, and a duplicate. Output: questions
/// for MAX_INSTANCES instances only (SRV and TXT each), and the skipped
/// ones said in the status.
#[test]
fn instances_are_bounded_and_must_belong_to_the_service() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    let mut records: Vec<Rr> = (0..MAX_INSTANCES + 3)
        .map(|i| ptr(&format!("r{i}.{SVC}")))
        .collect();
    records.push(ptr("evil._arpx._tcp.other.example"));
    records.push(ptr(&format!("r0.{SVC}")));
    let out = b.answered(&ask, answer(records), Millis(0));
    let qs = questions(&out);
    assert_eq!(qs.len(), 2 * MAX_INSTANCES);
    assert!(qs.iter().all(|q| !q.contains("other.example")), "{qs:?}");
    for a in asks(&out) {
        b.answered(&a, Err(DnsError::Timeout { tries: 2 }), Millis(1));
    }
    let err = b.status()[0].last_error.clone().unwrap().1;
    assert!(err.contains("no answer after 2 tries"), "{err}");
}

/// Input: an instance whose TXT record is not ours. Output: not found;
/// the domain's status names the instance and the TXT error.
#[test]
fn a_bad_txt_record_is_named_in_the_status() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    let bad = rr(INST, 60, Data::Txt(b"\x03v=9".to_vec()));
    let out = b.answered(
        &ask,
        answer(vec![ptr(INST), srv(), bad, addr("192.0.2.2")]),
        Millis(0),
    );
    assert!(found(&out).is_empty());
    let err = b.status()[0].last_error.clone().unwrap().1;
    assert!(err.starts_with(INST) && err.contains("v=\"9\""), "{err}");
}

/// Input: an answer for a round that was abandoned, and a tick past
/// the round limit. Output: the late answer changes nothing; the
/// abandoned round is an error and the next one starts after
/// refresh_min.
#[test]
fn a_round_that_never_ends_is_abandoned() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    assert_eq!(b.next_deadline(), Some(Millis(ROUND_LIMIT_MS)));
    assert!(b.tick(Millis(ROUND_LIMIT_MS)).is_empty());
    assert!(b.status()[0].last_error.is_some());
    let late = b.answered(
        &ask,
        answer(vec![ptr(INST), srv(), txt(), addr("192.0.2.2")]),
        Millis(ROUND_LIMIT_MS + 1),
    );
    assert!(late.is_empty(), "{late:?}");
    let out = b.tick(Millis(ROUND_LIMIT_MS + 5_000));
    assert_eq!(asks(&out)[0].round, ask.round + 1);
}

/// Input: the target's A answer is a CNAME chain. Output: the address
/// at its end is the router's.
#[test]
fn addresses_follow_cnames() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    let out = b.answered(&ask, answer(vec![ptr(INST), srv(), txt()]), Millis(0));
    let [aaaa_ask, a_ask] = <[Ask; 2]>::try_from(asks(&out)).unwrap();
    b.answered(&aaaa_ask, answer(vec![]), Millis(0));
    let out = b.answered(
        &a_ask,
        answer(vec![
            rr(HOST, 60, Data::Cname("box.lab.example".into())),
            rr("box.lab.example", 60, Data::A("192.0.2.9".parse().unwrap())),
        ]),
        Millis(0),
    );
    assert_eq!(
        found(&out)[0].addresses,
        vec!["192.0.2.9".parse::<IpAddr>().unwrap()]
    );
}

/// require_dnssec travels with every question.
#[test]
fn every_question_carries_require_ad() {
    let mut s = settings();
    s.require_dnssec = true;
    let mut b = Browser::new(s, Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    assert!(ask.require_ad);
    let out = b.answered(&ask, answer(vec![ptr(INST)]), Millis(0));
    assert!(asks(&out).iter().all(|a| a.require_ad));
}

/// Input: an instance whose SRV target is "." (RFC 2782: no service).
/// Output: not found, no address question for ".", the reason in the
/// status.
#[test]
fn an_srv_target_of_root_is_no_service() {
    let mut b = Browser::new(settings(), Millis(0));
    let ask = asks(&b.tick(Millis(0))).remove(0);
    let none = rr(
        INST,
        60,
        Data::Srv {
            port: 0,
            target: ".".into(),
        },
    );
    let out = b.answered(&ask, answer(vec![ptr(INST), none, txt()]), Millis(0));
    assert!(asks(&out).is_empty() && found(&out).is_empty(), "{out:?}");
    let err = b.status()[0].last_error.clone().unwrap().1;
    assert!(err.contains("service not offered"), "{err}");
}
