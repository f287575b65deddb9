//! Export: local routes to every peer, reflection, split horizon, tenants,
//! deltas only.

use super::*;

fn reflector(n: u8, peers: &[u8]) -> Rig {
    let mut cfg = config(n);
    cfg.reflector = true;
    Rig::with(cfg, peers)
}

#[test]
fn without_reflection_peer_routes_are_not_exported() {
    let mut rig = Rig::new(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    let out = rig.establish(7, 1, vec![a("r1")]);
    assert!(sent(&out, 8).is_empty(), "no transit: {out:?}");
}

#[test]
fn a_reflector_sends_the_best_path_with_itself_appended_but_not_back() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    let out = rig.establish(7, 1, vec![a("r1")]);
    let to_c = routes_of(&sent(&out, 8));
    assert_eq!(to_c.len(), 1);
    assert_eq!(
        to_c[0].path,
        vec!["router-a".to_string(), "router-b".into()]
    );
    assert_eq!(crate::sign::verify(&to_c[0]), Ok(()));
    let to_a: Vec<_> = sent(&out, 7)
        .into_iter()
        .filter(|m| matches!(m, Message::Update(_)))
        .collect();
    assert!(to_a.is_empty(), "split horizon: {to_a:?}");
}

#[test]
fn a_reflected_route_carries_the_origin_certificate_held_once_for_all_its_paths() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    let with_cert = |id: &str, cert: &[u8]| RouteAd {
        origin_cert: cert.to_vec(),
        ..a(id)
    };
    let out = rig.establish(
        7,
        1,
        vec![with_cert("r1", b"cert-a"), with_cert("r2", b"cert-a")],
    );
    // Passed on as it came: the receiver may be of the origin's domain.
    let to_c = routes_of(&sent(&out, 8));
    assert_eq!(to_c.len(), 2);
    assert!(
        to_c.iter().all(|ad| ad.origin_cert == b"cert-a"),
        "{to_c:?}"
    );
    assert_eq!(rig.inst.certs.len(), 1, "one copy for router-a's paths");
    // A renewed certificate on one route is what that route carries on.
    let mut renewed = with_cert("r2", b"cert-a2");
    renewed.serial = 2;
    crate::sign::sign(&mut renewed, &crate::testing::key(1));
    let out = rig.frame(
        7,
        Message::Update(Update {
            seq: 2,
            routes: vec![renewed],
        }),
    );
    let to_c = routes_of(&sent(&out, 8));
    assert_eq!(to_c.len(), 1);
    assert_eq!(to_c[0].origin_cert, b"cert-a2");
    // Both gone: no copy left.
    rig.feed(Input::ConfigurePeers(vec![peer(3)]));
    assert_eq!(rig.inst.certs.len(), 0);
}

#[test]
fn a_reflector_passes_on_no_more_trust_and_proof_than_it_granted() {
    let mut rig = reflector(2, &[1, 3]);
    rig.feed(Input::ConfigurePeers(vec![
        PeerConfig {
            max_trust: 20,
            max_proof: crate::message::OriginProof::Static,
            ..peer(1)
        },
        peer(3),
    ]));
    rig.establish(8, 3, vec![]);
    let mut claim = a("r1");
    claim.attrs.trust = 100;
    crate::sign::sign(&mut claim, &crate::testing::key(1));
    let out = rig.establish(7, 1, vec![claim]);
    let to_c = routes_of(&sent(&out, 8));
    assert_eq!(to_c.len(), 1);
    assert_eq!(to_c[0].attrs.trust, 100, "the signed claim is unchanged");
    assert_eq!(to_c[0].proof, crate::message::OriginProof::Jwt);
    assert_eq!(to_c[0].trust_limit, 20);
    assert_eq!(to_c[0].proof_limit, crate::message::OriginProof::Static);
    assert_eq!(crate::sign::verify(&to_c[0]), Ok(()));
}

#[test]
fn reflected_routes_wait_for_the_end_of_the_snapshot() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    rig.connect(7, 1, true);
    rig.frame(7, open(1));
    rig.frame(7, Message::SnapshotBegin { version: 1 });
    let out = rig.frame(
        7,
        Message::Update(Update {
            seq: 1,
            routes: vec![a("r1")],
        }),
    );
    assert!(sent(&out, 8).is_empty());
    let out = rig.frame(7, Message::SnapshotEnd { version: 1 });
    assert_eq!(routes_of(&sent(&out, 8)).len(), 1);
}

#[test]
fn never_to_a_router_already_in_the_path() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    let via_c = signed("r1", &["router-c", "router-a"], 3);
    let out = rig.establish(7, 1, vec![via_c]);
    assert!(routes_of(&sent(&out, 8)).is_empty());
}

#[test]
fn session_loss_at_a_reflector_withdraws_reflected_routes_at_once() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "eof".into(),
    });
    assert!(matches!(&sent(&out, 8)[..], [Message::Withdraw(w)] if w.route_ids == ["r1"]));
}

#[test]
fn the_shorter_path_wins_and_failover_switches_to_the_other() {
    let mut rig = reflector(2, &[1, 3, 4]);
    rig.establish(9, 4, vec![]);
    rig.establish(8, 3, vec![signed("r1", &["router-a", "router-c"], 1)]);
    let out = rig.establish(7, 1, vec![a("r1")]);
    let to_d = routes_of(&sent(&out, 9));
    assert_eq!(
        to_d.last().unwrap().path,
        vec!["router-a".to_string(), "router-b".into()]
    );
    let out = rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "eof".into(),
    });
    let to_d = routes_of(&sent(&out, 9));
    assert_eq!(
        to_d[0].path,
        vec!["router-a".to_string(), "router-c".into(), "router-b".into()]
    );
    assert!(path_downs(&out).is_empty(), "multipath: both paths kept");
}

#[test]
fn export_tenants_filter_and_a_change_sends_only_deltas() {
    let mut rig = Rig::new(2, &[1]);
    let mut other = local("other-1");
    other.tenant = "other".into();
    rig.feed(Input::UpsertLocal(local("echo-1")));
    rig.feed(Input::UpsertLocal(other));
    rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        export_tenants: vec!["lab".into()],
        ..peer(1)
    }]));
    let out = rig.establish(7, 1, vec![]);
    let ids: Vec<_> = routes_of(&sent(&out, 7))
        .into_iter()
        .map(|r| r.route_id)
        .collect();
    assert_eq!(ids, ["echo-1"]);
    let out = rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        export_tenants: vec!["other".into()],
        ..peer(1)
    }]));
    let msgs = sent(&out, 7);
    assert_eq!(routes_of(&msgs).len(), 1);
    assert_eq!(routes_of(&msgs)[0].route_id, "other-1");
    assert!(msgs
        .iter()
        .any(|m| matches!(m, Message::Withdraw(w) if w.route_ids == ["echo-1"])));
}

#[test]
fn serials_grow_with_changes_and_start_higher_after_a_restart() {
    let mut rig = Rig::new(2, &[1]);
    rig.feed(Input::UpsertLocal(local("echo-1")));
    let mut changed = local("echo-1");
    changed.attrs.trust = 70;
    rig.now = 5;
    rig.feed(Input::UpsertLocal(changed.clone()));
    let out = rig.establish(7, 1, vec![]);
    let first = routes_of(&sent(&out, 7))[0].serial;

    // Restart one second later: a later boot epoch.
    let mut cfg = config(2);
    cfg.boot_epoch += 1000;
    let mut rig = Rig::with(cfg, &[1]);
    rig.feed(Input::UpsertLocal(local("echo-1")));
    let out = rig.establish(7, 1, vec![]);
    let second = routes_of(&sent(&out, 7))[0].serial;
    assert!(second > first, "{second} > {first}");
}

#[test]
fn a_relay_passes_its_clients_paths_to_every_peer_and_only_theirs() {
    // Router B (2) is no reflector. Router A (1) is its relay client;
    // router C (3) an ordinary peer.
    let mut rig = Rig::new(2, &[1, 3]);
    rig.feed(Input::ConfigurePeers(vec![
        PeerConfig {
            relay_client: true,
            ..peer(1)
        },
        peer(3),
    ]));
    rig.establish(8, 3, vec![signed("r-c", &["router-c"], 3)]);
    let out = rig.establish(7, 1, vec![a("r1")]);
    let to_c = routes_of(&sent(&out, 8));
    assert_eq!(to_c.len(), 1, "the client's path goes on: {to_c:?}");
    assert_eq!(
        to_c[0].path,
        vec!["router-a".to_string(), "router-b".into()]
    );
    // What C gave us goes nowhere: C is no relay client and B no
    // reflector (the client is not a reflector client here).
    let to_a = routes_of(&sent(&out, 7));
    assert!(to_a.is_empty(), "no transit from C: {to_a:?}");
}

#[test]
fn a_peer_that_may_not_be_exported_to_gets_nothing_until_it_may() {
    let mut rig = Rig::new(2, &[1]);
    rig.feed(Input::UpsertLocal(local("echo-1")));
    rig.feed(Input::ConfigurePeers(vec![PeerConfig {
        export: false,
        ..peer(1)
    }]));
    let out = rig.establish(7, 1, vec![]);
    assert!(routes_of(&sent(&out, 7)).is_empty(), "a standby relay");
    let out = rig.feed(Input::ConfigurePeers(vec![peer(1)]));
    let ids: Vec<_> = routes_of(&sent(&out, 7))
        .into_iter()
        .map(|r| r.route_id)
        .collect();
    assert_eq!(ids, ["echo-1"], "the relay in use gets our routes");
}

#[test]
fn a_reflected_path_resent_unchanged_or_renewed_sends_nothing_and_a_new_serial_goes_on() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![]);
    rig.establish(7, 1, vec![a("r1")]);
    let update = |rig: &mut Rig, seq, ad: RouteAd| {
        let msg = Message::Update(Update {
            seq,
            routes: vec![ad],
        });
        routes_of(&sent(&rig.frame(7, msg), 8))
    };
    assert!(update(&mut rig, 2, a("r1")).is_empty(), "the same again");
    let mut renewed = a("r1");
    renewed.lease_ms = 90_000;
    assert!(update(&mut rig, 3, renewed).is_empty(), "a lease renewal");
    let mut changed = crate::testing::ad("r1", &["router-a"]);
    changed.serial = 2;
    changed.attrs.latency_ms = 9;
    crate::sign::sign(&mut changed, &crate::testing::key(1));
    let to_c = update(&mut rig, 4, changed);
    assert_eq!(to_c.len(), 1);
    assert_eq!((to_c[0].serial, to_c[0].attrs.latency_ms), (2, 9));
    assert_eq!(
        to_c[0].lease_ms, 30_000,
        "the carried lease goes on as it came"
    );
}

#[test]
fn every_peers_path_to_a_route_shares_one_copy_of_its_id_and_origin() {
    let mut rig = reflector(2, &[1, 3]);
    rig.establish(8, 3, vec![signed("r1", &["router-a", "router-c"], 1)]);
    rig.establish(7, 1, vec![a("r1")]);
    let (id, holders) = rig.inst.routes.get_key_value("r1").unwrap();
    assert_eq!(holders.peers.len(), 2);
    for peer in ["router-a", "router-c"] {
        let (key, path) = rig.inst.peers[peer].paths.get_key_value("r1").unwrap();
        assert!(std::sync::Arc::ptr_eq(id, key), "{peer}");
        assert!(
            std::sync::Arc::ptr_eq(&holders.origin, &path.origin),
            "{peer}"
        );
    }
    // The last path gone, so is the route's entry.
    for conn in [7, 8] {
        rig.feed(Input::Disconnected {
            conn: ConnId(conn),
            error: "eof".into(),
        });
    }
    rig.feed(Input::ConfigurePeers(vec![]));
    assert!(rig.inst.routes.is_empty());
}

/// Router-b with `n` local routes `l-0000`…, and router-a's session on
/// connection 7 open; returns what b sent so far.
fn snapshotting(n: usize) -> (Rig, Vec<Output>) {
    let mut rig = Rig::new(2, &[1]);
    for i in 0..n {
        rig.feed(Input::UpsertLocal(local(&format!("l-{i:04}"))));
    }
    let out = rig.establish(7, 1, vec![]);
    (rig, out)
}

fn notices(out: &[Output]) -> usize {
    out.iter()
        .filter(|o| matches!(o, Output::NotifyWritten { conn: ConnId(7) }))
        .count()
}

fn ends(out: &[Output]) -> usize {
    sent(out, 7)
        .iter()
        .filter(|m| matches!(m, Message::SnapshotEnd { .. }))
        .count()
}

fn written(rig: &mut Rig, conn: u64) -> Vec<Output> {
    rig.feed(Input::Written { conn: ConnId(conn) })
}

#[test]
fn a_large_snapshot_goes_a_chunk_at_a_time_as_the_transport_writes_it() {
    let (mut rig, out) = snapshotting(1000);
    // Two chunks before anything is written, each followed by a notice.
    let mut got: Vec<String> = routes_of(&sent(&out, 7))
        .into_iter()
        .map(|ad| ad.route_id)
        .collect();
    assert_eq!(got.len(), 512);
    assert_eq!((notices(&out), ends(&out)), (2, 0));
    // Nothing moves for a connection that is not the session's.
    assert!(written(&mut rig, 99).is_empty());
    let mut rounds = 0;
    loop {
        let out = written(&mut rig, 7);
        got.extend(routes_of(&sent(&out, 7)).into_iter().map(|ad| ad.route_id));
        rounds += 1;
        if ends(&out) == 1 {
            assert_eq!(notices(&out), 0, "the last chunk ends it");
            break;
        }
        assert_eq!(notices(&out), 1, "one chunk for each written");
        assert!(rounds < 10);
    }
    let want: Vec<String> = (0..1000).map(|i| format!("l-{i:04}")).collect();
    assert_eq!(got, want, "every route once, in order");
    assert_eq!(rig.inst.exported_to("router-a").count(), 1000);
    // Late notices of a finished snapshot do nothing.
    assert!(written(&mut rig, 7).is_empty());
}

#[test]
fn changes_during_our_snapshot_wait_for_its_end_and_no_withdraw_goes_inside_it() {
    let (mut rig, _) = snapshotting(600);
    // l-0000 went in the first chunk, l-0599 has not gone yet.
    rig.feed(Input::WithdrawLocal("l-0000".into()));
    let mut changed = local("l-0599");
    changed.version = 2;
    let mut out = rig.feed(Input::UpsertLocal(changed));
    out.extend(rig.feed(Input::UpsertLocal(local("new-1"))));
    assert!(sent(&out, 7).is_empty(), "{out:?}");
    let out = written(&mut rig, 7);
    let msgs = sent(&out, 7);
    let end = msgs
        .iter()
        .position(|m| matches!(m, Message::SnapshotEnd { .. }))
        .expect("the snapshot ends");
    let (inside, after) = msgs.split_at(end);
    let last_chunk = routes_of(inside);
    assert_eq!(last_chunk.len(), 88);
    let l599 = last_chunk
        .iter()
        .find(|ad| ad.route_id == "l-0599")
        .unwrap();
    assert_eq!(l599.version, 2, "sent as it is when its chunk goes");
    assert!(!inside.iter().any(|m| matches!(m, Message::Withdraw(_))));
    assert!(
        after
            .iter()
            .any(|m| matches!(m, Message::Withdraw(w) if w.route_ids == ["l-0000"])),
        "{after:?}"
    );
    let new: Vec<_> = routes_of(after).into_iter().map(|ad| ad.route_id).collect();
    assert_eq!(new, ["new-1"]);
}

#[test]
fn a_session_lost_mid_snapshot_takes_it_along_and_the_next_starts_over() {
    let (mut rig, _) = snapshotting(600);
    rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "eof".into(),
    });
    assert!(written(&mut rig, 7).is_empty());
    let out = rig.establish(8, 1, vec![]);
    let first: Vec<_> = routes_of(&sent(&out, 8))
        .into_iter()
        .map(|ad| ad.route_id)
        .collect();
    assert_eq!(first.len(), 512);
    assert_eq!(first[0], "l-0000");
    assert!(
        written(&mut rig, 7).is_empty(),
        "the old connection's notice"
    );
    let out = written(&mut rig, 8);
    assert_eq!(routes_of(&sent(&out, 8)).len(), 88);
}

#[test]
fn what_each_peer_was_sent_shares_one_copy_of_each_route_id() {
    let mut rig = reflector(2, &[1, 3, 4]);
    rig.feed(Input::UpsertLocal(local("ours")));
    rig.establish(8, 3, vec![]);
    rig.establish(9, 4, vec![]);
    rig.establish(7, 1, vec![a("learned")]);
    let key = |peer: &str, id: &str| {
        let (key, _) = rig.inst.peers[peer].sent.get_key_value(id).unwrap();
        key.clone()
    };
    // Our route went to all three, the learned one to c and d.
    let ours = key("router-a", "ours");
    for peer in ["router-c", "router-d"] {
        assert!(std::sync::Arc::ptr_eq(&ours, &key(peer, "ours")), "{peer}");
    }
    let (held, _) = rig.inst.routes.get_key_value("learned").unwrap();
    for peer in ["router-c", "router-d"] {
        assert!(
            std::sync::Arc::ptr_eq(held, &key(peer, "learned")),
            "{peer}"
        );
    }
}

#[test]
fn an_export_that_outgrows_the_frame_bound_is_withdrawn_not_left_stale() {
    let mut cfg = config(2);
    cfg.max_frame = 1024;
    let mut rig = Rig::with(cfg, &[1]);
    rig.feed(Input::UpsertLocal(local("r1")));
    let out = rig.establish(7, 1, vec![]);
    assert_eq!(routes_of(&sent(&out, 7)).len(), 1);
    // 40 tenants of 30 bytes: no longer fits one frame.
    let mut big = local("r1");
    big.allowed_tenants = (0..40)
        .map(|i| format!("tenant-{i:02}-{}", "x".repeat(20)))
        .collect();
    let out = rig.feed(Input::UpsertLocal(big));
    let msgs = sent(&out, 7);
    assert!(routes_of(&msgs).is_empty(), "{msgs:?}");
    assert!(
        msgs.iter()
            .any(|m| matches!(m, Message::Withdraw(w) if w.route_ids == ["r1"])),
        "{msgs:?}"
    );
    assert_eq!(rig.inst.counters().export_refused, 1);
    assert_eq!(rig.inst.exported_to("router-a").count(), 0);
    // Small again: it goes out again.
    let out = rig.feed(Input::UpsertLocal(local("r1")));
    assert_eq!(routes_of(&sent(&out, 7)).len(), 1);
}
