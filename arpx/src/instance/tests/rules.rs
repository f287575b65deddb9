//! The route rules: violations close, drops are counted, the session stays.

use super::*;
use crate::bytes::Bytes;

fn update(rig: &mut Rig, conn: u64, seq: u64, routes: Vec<RouteAd>) -> Vec<Output> {
    rig.frame(conn, Message::Update(Update { seq, routes }))
}

#[test]
fn a_forged_signature_closes_with_bad_signature_and_applies_nothing() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    let mut forged = a("r2");
    forged.tenant = "other".into();
    let out = update(&mut rig, 7, 1, vec![a("r1"), forged]);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::BadSignature));
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().rejected_bad_signature, 1);
}

#[test]
fn an_origin_key_other_than_the_direct_peers_certificate_costs_only_that_route() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    // Validly signed, but by router 3's key while claiming origin router-a.
    let out = update(
        &mut rig,
        7,
        1,
        vec![signed("r1", &["router-a"], 3), a("r2")],
    );
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_ups(&out), vec![("router-a".into(), "r2".into())]);
    assert_eq!(rig.inst.counters().rejected_origin_key, 1);
    let status = &rig.inst.peers(0)[0];
    assert_eq!(status.dropped_routes, 1);
    assert!(status
        .last_drop
        .as_deref()
        .is_some_and(|w| w.contains("r1") && w.contains("contradicts")));
    assert!(out.iter().any(|o| matches!(
        o,
        Output::PathsDropped { peer, count: 1, .. } if peer == "router-a"
    )));
}

#[test]
fn a_learned_origin_key_is_kept_and_a_contradicting_claim_costs_only_its_route() {
    let mut cfg = config(2);
    cfg.reflector = true;
    let mut rig = Rig::with(cfg, &[3, 4]);
    // router-a is not a direct peer: its key is learned from router-c.
    rig.establish(7, 3, vec![signed("r1", &["router-a", "router-c"], 1)]);
    let forged = signed("r2", &["router-a", "router-d"], 4);
    let honest = signed("d1", &["router-d"], 4);
    let out = rig.establish(8, 4, vec![forged, honest]);
    assert_eq!(closed_with(&out, 8), None, "router-d keeps its session");
    assert_eq!(path_ups(&out), vec![("router-d".into(), "d1".into())]);
    assert_eq!(rig.inst.counters().rejected_origin_key, 1);
    assert_eq!(
        rig.inst.paths_of("router-c").count(),
        1,
        "router-c unaffected"
    );
}

/// A CA that vouches for router-a's key (test key 1) when the attached
/// certificate is the bytes `cert-a`.
struct TestCa;

impl crate::instance::OriginCa for TestCa {
    fn origin_key(&self, router_id: &str, cert: &[u8]) -> Option<[u8; 32]> {
        (router_id == "router-a" && cert == b"cert-a").then(|| crate::testing::tls_key(1))
    }
}

fn with_ca(ad: RouteAd, cert: &[u8]) -> RouteAd {
    RouteAd {
        origin_cert: cert.to_vec(),
        ..ad
    }
}

#[test]
fn a_certified_origin_key_replaces_a_poisoned_learned_one_and_no_session_is_lost() {
    // Issue 20 item 5: while C held no route of router-a, a rogue
    // neighbour M (router-d) announced one "of router-a" under its own
    // key. The genuine routes arrive through honest B (router-b) with
    // router-a's certificate attached: the certified key wins, M's
    // forged path goes, and both sessions stay.
    let mut cfg = config(3);
    cfg.reflector = true;
    cfg.origin_ca = Some(crate::instance::OriginCaRef(std::sync::Arc::new(TestCa)));
    let mut rig = Rig::with(cfg, &[2, 4]);
    rig.establish(8, 4, vec![signed("fake", &["router-a", "router-d"], 4)]);
    assert_eq!(rig.inst.paths_of("router-d").count(), 1, "learned first");
    let genuine = with_ca(signed("r1", &["router-a", "router-b"], 1), b"cert-a");
    let out = rig.establish(7, 2, vec![genuine]);
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(closed_with(&out, 8), None);
    assert_eq!(path_ups(&out), vec![("router-b".into(), "r1".into())]);
    assert_eq!(path_downs(&out), vec![("router-d".into(), "fake".into())]);
    // M tries again: only its route is refused.
    let again = signed("fake2", &["router-a", "router-d"], 4);
    let out = update(&mut rig, 8, 2, vec![again]);
    assert_eq!(closed_with(&out, 8), None);
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().rejected_origin_key, 2);
    // A certificate the CA does not vouch for is ignored, and counted.
    let bogus = with_ca(signed("fake3", &["router-a", "router-d"], 4), b"cert-x");
    let out = update(&mut rig, 8, 3, vec![bogus]);
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().rejected_origin_cert, 1);
    assert_eq!(rig.inst.paths_of("router-b").count(), 1);
}

#[test]
fn a_path_longer_than_max_path_is_dropped_and_counted_and_the_session_stays() {
    let mut cfg = config(2);
    cfg.max_path = 2;
    let mut rig = Rig::with(cfg, &[1]);
    rig.establish(7, 1, vec![]);
    let long = signed("r1", &["router-c", "router-d", "router-a"], 3);
    let out = update(&mut rig, 7, 1, vec![long, a("r2")]);
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_ups(&out), vec![("router-a".into(), "r2".into())]);
    assert_eq!(rig.inst.counters().rejected_path_too_long, 1);
}

#[test]
fn a_route_id_held_by_another_origin_is_dropped_and_the_first_claim_stays() {
    let mut rig = Rig::new(2, &[1, 3]);
    rig.establish(7, 1, vec![a("shared")]);
    let out = rig.establish(8, 3, vec![signed("shared", &["router-c"], 3)]);
    assert_eq!(closed_with(&out, 8), None);
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().rejected_origin_conflict, 1);
    assert_eq!(rig.inst.paths_of("router-a").count(), 1);
}

#[test]
fn a_local_route_id_wins_over_a_remote_claim() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("echo-1")]);
    let out = rig.feed(Input::UpsertLocal(local("echo-1")));
    assert_eq!(path_downs(&out), vec![("router-a".into(), "echo-1".into())]);
    let mut again = a("echo-1");
    again.serial = 2;
    crate::sign::sign(&mut again, &crate::testing::key(1));
    let out = update(&mut rig, 7, 2, vec![again]);
    assert_eq!(closed_with(&out, 7), None);
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().rejected_origin_conflict, 2);
}

#[test]
fn more_paths_than_max_routes_lose_the_excess_not_the_session() {
    let mut rig = Rig::new(2, &[1, 3]);
    rig.feed(Input::ConfigurePeers(vec![
        PeerConfig {
            max_routes: 2,
            ..peer(1)
        },
        peer(3),
    ]));
    rig.establish(8, 3, vec![signed("c1", &["router-c"], 3)]);
    rig.establish(7, 1, vec![a("r1"), a("r2")]);
    let out = update(&mut rig, 7, 2, vec![a("r3")]);
    assert_eq!(closed_with(&out, 7), None);
    assert!(path_ups(&out).is_empty() && path_downs(&out).is_empty());
    assert_eq!(rig.inst.paths_of("router-a").count(), 2);
    assert_eq!(rig.inst.paths_of("router-c").count(), 1);
    assert_eq!(rig.inst.counters().rejected_route_limit, 1);
    let status = rig.inst.peers(0);
    assert_eq!(status[0].state, PeerState::Established);
    assert_eq!(status[0].dropped_routes, 1);
    assert!(status[0]
        .last_drop
        .as_deref()
        .is_some_and(|w| w.contains("r3") && w.contains("max_routes")));
}

#[test]
fn a_flood_reflected_by_an_honest_neighbour_never_crowds_out_another_origin() {
    // Issue 20 item 4: B reflects 9 routes of rogue router-m and then
    // router-a's; C's limit for B is 10. The flood keeps at most its
    // share, router-a's routes all get in, and B's session stays.
    let mut rig = Rig::new(3, &[2]);
    rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        max_routes: 10,
        ..peer(2)
    }]));
    let flood: Vec<RouteAd> = (0..9)
        .map(|i| signed(&format!("m{i}"), &["router-m", "router-b"], 13))
        .collect();
    rig.establish(7, 2, flood);
    assert_eq!(rig.inst.paths_of("router-b").count(), 9);
    let honest: Vec<RouteAd> = (0..4)
        .map(|i| signed(&format!("a{i}"), &["router-a", "router-b"], 1))
        .collect();
    let out = update(&mut rig, 7, 2, honest);
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_ups(&out).len(), 4, "every honest route is held");
    assert_eq!(path_downs(&out).len(), 3, "the flood gave up three");
    assert_eq!(rig.inst.counters().evicted_fair_share, 3);
    let held: Vec<String> = rig
        .inst
        .paths_of("router-b")
        .map(|ad| ad.origin_router.clone())
        .collect();
    assert_eq!(held.len(), 10);
    assert_eq!(held.iter().filter(|o| *o == "router-a").count(), 4);
    // More of the flood changes nothing.
    let more = vec![signed("m9", &["router-m", "router-b"], 13)];
    let out = update(&mut rig, 7, 3, more);
    assert!(path_ups(&out).is_empty());
}

#[test]
fn one_origin_router_is_held_to_max_routes_per_origin_at_each_neighbour() {
    let mut cfg = config(2);
    cfg.max_routes_per_origin = 2;
    let mut rig = Rig::with(cfg, &[1]);
    rig.establish(7, 1, vec![]);
    let out = update(&mut rig, 7, 1, vec![a("r1"), a("r2"), a("r3")]);
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_ups(&out).len(), 2);
    assert!(rig.inst.peers(0)[0]
        .last_drop
        .as_deref()
        .is_some_and(|w| w.contains("max_routes_per_origin")));
}

#[test]
fn replacing_held_paths_does_not_count_against_the_limit() {
    let mut rig = Rig::new(2, &[]);
    rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        max_routes: 2,
        ..peer(1)
    }]));
    rig.establish(7, 1, vec![a("r1"), a("r2")]);
    let mut newer = a("r1");
    newer.serial = 5;
    crate::sign::sign(&mut newer, &crate::testing::key(1));
    let out = update(&mut rig, 7, 2, vec![newer]);
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_ups(&out).len(), 1);
}

#[test]
fn a_stale_serial_is_ignored() {
    let mut rig = Rig::new(2, &[1]);
    let mut newer = a("r1");
    newer.serial = 5;
    crate::sign::sign(&mut newer, &crate::testing::key(1));
    rig.establish(7, 1, vec![newer]);
    let out = update(&mut rig, 7, 2, vec![a("r1")]);
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().ignored_stale, 1);
    assert_eq!(rig.inst.paths_of("router-a").next().unwrap().serial, 5);
}

#[test]
fn a_path_not_ending_at_the_sender_is_an_invalid_message() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    let out = update(&mut rig, 7, 1, vec![signed("r1", &["router-c"], 3)]);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::InvalidMessage));
}

#[test]
fn an_invalid_origin_key_is_a_bad_signature_not_a_panic() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    let mut bad = a("r1");
    let mut k = [0u8; 32];
    k[0] = 2;
    bad.origin_key = Bytes(k);
    let out = update(&mut rig, 7, 1, vec![bad]);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::BadSignature));
}

#[test]
fn a_repeated_router_in_the_path_is_a_loop() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    let looped = signed("r1", &["router-a", "router-c", "router-a"], 1);
    let out = update(&mut rig, 7, 1, vec![looped]);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::LoopDetected));
}

#[test]
fn a_withdraw_of_an_unknown_route_is_harmless() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.frame(
        7,
        Message::Withdraw(Withdraw {
            seq: 2,
            route_ids: vec!["nope".into(), "r1".into()],
        }),
    );
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r1".into())]);
}

#[test]
fn a_tampered_copy_of_a_held_route_is_still_checked() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let mut tampered = a("r1");
    tampered.allowed_tenants = vec!["everyone".into()];
    let out = update(&mut rig, 7, 2, vec![tampered]);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::BadSignature));
}
