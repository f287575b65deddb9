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
fn an_origin_key_other_than_the_direct_peers_certificate_is_a_bad_signature() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    // Validly signed, but by router 3's key while claiming origin router-a.
    let out = update(&mut rig, 7, 1, vec![signed("r1", &["router-a"], 3)]);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::BadSignature));
}

#[test]
fn a_learned_origin_key_is_kept_and_a_contradicting_one_closes_the_second_peer() {
    let mut cfg = config(2);
    cfg.reflector = true;
    let mut rig = Rig::with(cfg, &[3, 4]);
    // router-a is not a direct peer: its key is learned from router-c.
    rig.establish(7, 3, vec![signed("r1", &["router-a", "router-c"], 1)]);
    let forged = signed("r2", &["router-a", "router-d"], 4);
    let out = rig.establish(8, 4, vec![forged]);
    assert_eq!(closed_with(&out, 8), Some(CloseCode::BadSignature));
    assert_eq!(
        rig.inst.paths_of("router-c").count(),
        1,
        "router-c unaffected"
    );
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
fn more_paths_than_max_routes_close_that_session_only() {
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
    assert_eq!(closed_with(&out, 7), Some(CloseCode::RouteLimit));
    assert_eq!(path_downs(&out).len(), 2, "the offender's paths go at once");
    assert_eq!(rig.inst.paths_of("router-c").count(), 1);
    let status = rig.inst.peers(0);
    assert_eq!(status[1].state, PeerState::Established);
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
