//! Sessions: collisions, closes, reconnects, configuration.

use super::*;

#[test]
fn the_connection_initiated_by_the_higher_router_id_survives_a_collision() {
    // router-b vs router-a: b is higher, so b's outbound connection wins.
    let mut rig = Rig::new(2, &[1]);
    rig.connect(7, 1, false);
    let out = rig.connect(8, 1, true);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::Collision));
    assert_eq!(closed_with(&out, 8), None);
    // And the other way round: a's inbound connection loses to b's outbound.
    let mut rig = Rig::new(2, &[1]);
    rig.connect(8, 1, true);
    let out = rig.connect(7, 1, false);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::Collision));
    assert_eq!(rig.inst.peers(0)[0].state, PeerState::OpenSent);
}

#[test]
fn a_collision_with_an_established_session_does_not_flap_its_paths() {
    // router-b (us) is lower than router-c: c's outbound (our inbound) wins.
    let mut rig = Rig::new(2, &[3]);
    let c1 = signed("r1", &["router-c"], 3);
    rig.establish(7, 3, vec![c1.clone()]);
    let mut out = rig.connect(8, 3, false);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::Collision));
    out.extend(rig.frame(8, open(3)));
    out.extend(rig.frame(8, Message::SnapshotBegin { version: 2 }));
    out.extend(rig.frame(
        8,
        Message::Update(Update {
            seq: 1,
            routes: vec![c1],
        }),
    ));
    out.extend(rig.frame(8, Message::SnapshotEnd { version: 2 }));
    assert!(eligibility(&out).is_empty(), "{out:?}");
    assert!(path_downs(&out).is_empty());
    assert!(path_ups(&out).is_empty());
}

#[test]
fn a_reconnect_within_grace_keeps_confirmed_paths_and_sweeps_the_rest() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1"), a("r2")]);
    rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "eof".into(),
    });
    rig.now = 2000;
    let out = rig.establish(8, 1, vec![a("r1")]);
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r2".into())]);
    assert!(path_ups(&out).is_empty(), "r1 unchanged");
    assert_eq!(eligibility(&out), vec![("router-a".into(), true)]);
    assert!(out.contains(&Output::CancelTimer(Timer::Graceful("router-a".into()))));
}

#[test]
fn hold_expiry_retains_paths_like_a_transport_loss() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    rig.now = 3000;
    let out = rig.feed(Input::Timer(Timer::Hold(ConnId(7))));
    assert_eq!(closed_with(&out, 7), Some(CloseCode::HoldExpired));
    assert!(path_downs(&out).is_empty());
    assert_eq!(eligibility(&out), vec![("router-a".into(), false)]);
}

#[test]
fn a_frame_error_is_answered_with_its_typed_close() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.feed(Input::FrameError {
        conn: ConnId(7),
        error: crate::frame::FrameError::TooLarge {
            len: 1 << 20,
            max: 65536,
        },
    });
    assert_eq!(closed_with(&out, 7), Some(CloseCode::FrameTooLarge));
    assert_eq!(path_downs(&out).len(), 1);
}

#[test]
fn an_unconfigured_router_is_refused() {
    let mut rig = Rig::new(2, &[1]);
    let out = rig.connect(7, 3, false);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::PeerRemoved));
    assert!(out.contains(&Output::Disconnect { conn: ConnId(7) }));
}

#[test]
fn a_removed_peer_is_closed_and_its_paths_go() {
    let mut rig = Rig::new(2, &[1, 3]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.feed(Input::ConfigurePeers(vec![peer(3)]));
    assert_eq!(closed_with(&out, 7), Some(CloseCode::PeerRemoved));
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r1".into())]);
    assert_eq!(rig.inst.peers(0).len(), 1);
}

#[test]
fn shutdown_closes_every_session_with_admin_shutdown() {
    let mut rig = Rig::new(2, &[1, 3]);
    rig.establish(7, 1, vec![a("r1")]);
    rig.establish(8, 3, vec![]);
    let out = rig.feed(Input::Shutdown);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::AdminShutdown));
    assert_eq!(closed_with(&out, 8), Some(CloseCode::AdminShutdown));
    let out = rig.connect(9, 1, false);
    assert_eq!(closed_with(&out, 9), Some(CloseCode::AdminShutdown));
}

#[test]
fn a_new_boot_epoch_snapshot_replaces_everything() {
    let mut rig = Rig::new(2, &[1]);
    let mut newer = a("r1");
    newer.serial = 9;
    crate::sign::sign(&mut newer, &crate::testing::key(1));
    rig.establish(7, 1, vec![newer, a("r2")]);
    rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "eof".into(),
    });
    let mut restarted = open(1);
    if let Message::Open(o) = &mut restarted {
        o.boot_epoch += 1;
    }
    let mut out = rig.connect(8, 1, true);
    out.extend(rig.frame(8, restarted));
    out.extend(rig.frame(8, Message::SnapshotBegin { version: 1 }));
    // A lower serial than held: accepted, the restarted peer's word.
    out.extend(rig.frame(
        8,
        Message::Update(Update {
            seq: 1,
            routes: vec![a("r1")],
        }),
    ));
    out.extend(rig.frame(8, Message::SnapshotEnd { version: 1 }));
    assert_eq!(path_ups(&out), vec![("router-a".into(), "r1".into())]);
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r2".into())]);
    assert_eq!(rig.inst.peers(0)[0].boot_epoch, Some(1002));
}

#[test]
fn a_peers_violation_close_removes_its_paths_at_once() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.frame(7, Message::Close(Close::new(CloseCode::SequenceGap, "x")));
    assert_eq!(path_downs(&out).len(), 1);
    assert_eq!(
        rig.inst.counters().closes_received.get("sequence_gap"),
        Some(&1)
    );
}

#[test]
fn a_collision_close_from_the_peer_keeps_its_paths_for_the_surviving_connection() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.frame(7, Message::Close(Close::new(CloseCode::Collision, "lost")));
    assert!(eligibility(&out).is_empty(), "no flap: {out:?}");
    assert!(path_downs(&out).is_empty());
    assert!(out.contains(&Output::SetTimer {
        timer: Timer::Graceful("router-a".into()),
        at_ms: 10_000
    }));
    let out = rig.establish(8, 1, vec![a("r1")]);
    assert!(eligibility(&out).is_empty());
    assert!(path_ups(&out).is_empty() && path_downs(&out).is_empty());
    assert!(out.contains(&Output::CancelTimer(Timer::Graceful("router-a".into()))));
}

#[test]
fn a_collision_handover_that_never_completes_ends_at_the_grace_deadline() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    rig.frame(7, Message::Close(Close::new(CloseCode::Collision, "lost")));
    rig.now = 10_000;
    let out = rig.feed(Input::Timer(Timer::Graceful("router-a".into())));
    assert_eq!(eligibility(&out), vec![("router-a".into(), false)]);
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r1".into())]);
}

#[test]
fn the_same_side_redialling_replaces_its_old_connection() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.connect(8, 1, true);
    assert_eq!(closed_with(&out, 7), Some(CloseCode::Collision));
    assert_eq!(closed_with(&out, 8), None);
}

#[test]
fn an_open_that_never_comes_ends_the_connection() {
    let mut rig = Rig::new(2, &[1]);
    rig.connect(7, 1, true);
    rig.now = 3000;
    let out = rig.feed(Input::Timer(Timer::OpenWait(ConnId(7))));
    assert_eq!(closed_with(&out, 7), Some(CloseCode::HoldExpired));
    assert_eq!(rig.inst.peers(3000)[0].state, PeerState::Idle);
}

#[test]
fn timers_of_ended_connections_are_ignored() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "eof".into(),
    });
    for t in [
        Timer::Heartbeat(ConnId(7)),
        Timer::Hold(ConnId(7)),
        Timer::OpenWait(ConnId(7)),
    ] {
        assert!(rig.feed(Input::Timer(t)).is_empty());
    }
}

#[test]
fn a_direct_peers_certificate_key_evicts_paths_signed_by_a_different_learned_key() {
    let mut cfg = config(2);
    cfg.reflector = true;
    let mut rig = Rig::with(cfg, &[1, 3]);
    // router-c brings a route "of router-a" signed by key 9: learned first.
    let forged = signed("r1", &["router-a", "router-c"], 9);
    rig.establish(8, 3, vec![forged]);
    let out = rig.connect(7, 1, true);
    assert_eq!(path_downs(&out), vec![("router-c".into(), "r1".into())]);
    assert_eq!(rig.inst.counters().rejected_origin_key, 1);
}

#[test]
fn a_handover_to_a_restarted_peer_makes_the_old_paths_ineligible_until_its_snapshot() {
    let mut cfg = config(2);
    cfg.reflector = true;
    let mut rig = Rig::with(cfg, &[1, 3]);
    rig.establish(8, 3, vec![]);
    let mut old = a("r1");
    old.serial = 9;
    crate::sign::sign(&mut old, &crate::testing::key(1));
    rig.establish(7, 1, vec![old]);
    // router-a rebooted without closing conn 7 and dials again.
    let out = rig.connect(9, 1, true);
    assert!(eligibility(&out).is_empty(), "a handover keeps eligibility");
    let mut restarted = open(1);
    if let Message::Open(o) = &mut restarted {
        o.boot_epoch += 1;
    }
    let out = rig.frame(9, restarted);
    assert_eq!(eligibility(&out), vec![("router-a".into(), false)]);
    assert!(matches!(&sent(&out, 8)[..], [Message::Withdraw(w)] if w.route_ids == ["r1"]));
    let mut out = rig.frame(9, Message::SnapshotBegin { version: 1 });
    out.extend(rig.frame(
        9,
        Message::Update(Update {
            seq: 1,
            routes: vec![a("r1")],
        }),
    ));
    out.extend(rig.frame(9, Message::SnapshotEnd { version: 1 }));
    assert_eq!(path_ups(&out), vec![("router-a".into(), "r1".into())]);
    let to_c = routes_of(&sent(&out, 8));
    assert_eq!(to_c.len(), 1);
    assert_eq!(
        to_c[0].serial, 1,
        "the restarted origin's lower serial goes on"
    );
}

#[test]
fn lowering_max_routes_below_what_a_peer_holds_gives_up_the_excess_only() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1"), a("r2")]);
    let out = rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        max_routes: 1,
        ..peer(1)
    }]));
    assert_eq!(closed_with(&out, 7), None);
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r2".into())]);
    assert_eq!(rig.inst.peers(0)[0].dropped_routes, 1);
}

#[test]
fn an_unchanged_reload_touches_nothing() {
    let mut rig = Rig::new(2, &[1]);
    rig.feed(Input::UpsertLocal(local("echo-1")));
    rig.establish(7, 1, vec![a("r1")]);
    assert!(rig.feed(Input::ConfigurePeers(vec![peer(1)])).is_empty());
}
