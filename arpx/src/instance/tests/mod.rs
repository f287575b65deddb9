//! Unit tests of the instance: one router under test (router-b unless
//! named), its peers scripted message by message.

use super::*;
use crate::message::{Close, CloseCode, Message, RouteAd, Update, Withdraw};
use crate::testing::{config, local, open, peer, router, signed, tls_key};

pub(super) struct Rig {
    pub inst: Instance,
    pub now: u64,
}

impl Rig {
    pub fn new(n: u8, peers: &[u8]) -> Rig {
        Rig::with(config(n), peers)
    }

    pub fn with(cfg: InstanceConfig, peers: &[u8]) -> Rig {
        let mut rig = Rig {
            inst: Instance::new(cfg),
            now: 0,
        };
        rig.feed(Input::ConfigurePeers(
            peers.iter().map(|n| peer(*n)).collect(),
        ));
        rig
    }

    pub fn feed(&mut self, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        self.inst.handle(self.now, input, &mut out);
        out
    }

    pub fn connect(&mut self, conn: u64, n: u8, outbound: bool) -> Vec<Output> {
        self.feed(Input::Connected {
            conn: ConnId(conn),
            peer: router(n),
            peer_key: tls_key(n),
            outbound,
        })
    }

    pub fn frame(&mut self, conn: u64, msg: Message) -> Vec<Output> {
        self.feed(Input::Frame {
            conn: ConnId(conn),
            msg,
        })
    }

    /// Connects peer `n` on `conn` and plays its Open and a snapshot of
    /// `routes` (one Update, seq 1). Returns everything output.
    pub fn establish(&mut self, conn: u64, n: u8, routes: Vec<RouteAd>) -> Vec<Output> {
        let mut out = self.connect(conn, n, true);
        out.extend(self.frame(conn, open(n)));
        out.extend(self.frame(conn, Message::SnapshotBegin { version: 1 }));
        if !routes.is_empty() {
            out.extend(self.frame(conn, Message::Update(Update { seq: 1, routes })));
        }
        out.extend(self.frame(conn, Message::SnapshotEnd { version: 1 }));
        out
    }
}

pub(super) fn sent(out: &[Output], conn: u64) -> Vec<Message> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, msg } if *c == ConnId(conn) => Some(msg.clone()),
            _ => None,
        })
        .collect()
}

pub(super) fn closed_with(out: &[Output], conn: u64) -> Option<CloseCode> {
    sent(out, conn).into_iter().find_map(|m| match m {
        Message::Close(c) => Some(c.code),
        _ => None,
    })
}

pub(super) fn path_ups(out: &[Output]) -> Vec<(String, String)> {
    out.iter()
        .filter_map(|o| match o {
            Output::PathUp { peer, ad } => Some((peer.clone(), ad.route_id.clone())),
            _ => None,
        })
        .collect()
}

pub(super) fn path_downs(out: &[Output]) -> Vec<(String, String)> {
    out.iter()
        .filter_map(|o| match o {
            Output::PathDown { peer, route_id } => Some((peer.clone(), route_id.clone())),
            _ => None,
        })
        .collect()
}

pub(super) fn eligibility(out: &[Output]) -> Vec<(String, bool)> {
    out.iter()
        .filter_map(|o| match o {
            Output::PeerEligible { peer, up } => Some((peer.clone(), *up)),
            _ => None,
        })
        .collect()
}

pub(super) fn routes_of(msgs: &[Message]) -> Vec<RouteAd> {
    msgs.iter()
        .filter_map(|m| match m {
            Message::Update(u) => Some(u.routes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

pub(super) fn a(route_id: &str) -> RouteAd {
    signed(route_id, &["router-a"], 1)
}

#[test]
fn connected_sends_open_and_arms_the_open_wait() {
    let mut rig = Rig::new(2, &[1]);
    let out = rig.connect(7, 1, true);
    let Message::Open(o) = &sent(&out, 7)[0] else {
        panic!("{out:?}")
    };
    assert_eq!(o.router_id, "router-b");
    assert_eq!(o.version, crate::message::PROTOCOL_VERSION);
    assert!(out.contains(&Output::SetTimer {
        timer: Timer::OpenWait(ConnId(7)),
        at_ms: 3000
    }));
    assert_eq!(rig.inst.peers(0)[0].state, PeerState::OpenSent);
}

#[test]
fn the_peers_open_establishes_and_our_snapshot_carries_local_routes() {
    let mut rig = Rig::new(2, &[1]);
    rig.feed(Input::UpsertLocal(local("echo-1")));
    rig.connect(7, 1, true);
    let out = rig.frame(7, open(1));
    assert!(out.contains(&Output::SessionUp {
        peer: "router-a".into(),
        conn: ConnId(7)
    }));
    let msgs = sent(&out, 7);
    assert!(matches!(msgs[0], Message::SnapshotBegin { .. }));
    assert!(matches!(msgs.last(), Some(Message::SnapshotEnd { .. })));
    let routes = routes_of(&msgs);
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].path, vec!["router-b".to_string()]);
    assert_eq!(crate::sign::verify(&routes[0]), Ok(()));
    assert_eq!(rig.inst.peers(0)[0].routes_out, 1);
    assert_eq!(rig.inst.peers(0)[0].state, PeerState::Snapshot);
}

#[test]
fn snapshot_paths_become_eligible_only_at_its_end() {
    let mut rig = Rig::new(2, &[1]);
    rig.connect(7, 1, true);
    rig.frame(7, open(1));
    rig.frame(7, Message::SnapshotBegin { version: 4 });
    let out = rig.frame(
        7,
        Message::Update(Update {
            seq: 1,
            routes: vec![a("r1"), a("r2")],
        }),
    );
    assert_eq!(path_ups(&out).len(), 2);
    assert!(eligibility(&out).is_empty());
    let out = rig.frame(7, Message::SnapshotEnd { version: 4 });
    assert_eq!(eligibility(&out), vec![("router-a".into(), true)]);
    assert_eq!(rig.inst.peers(0)[0].state, PeerState::Established);
    assert_eq!(rig.inst.peers(0)[0].routes_in, 2);
}

#[test]
fn transport_loss_makes_paths_ineligible_and_graceful_expiry_removes_them() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    rig.now = 500;
    let out = rig.feed(Input::Disconnected {
        conn: ConnId(7),
        error: "reset".into(),
    });
    assert_eq!(eligibility(&out), vec![("router-a".into(), false)]);
    assert!(path_downs(&out).is_empty(), "retained during grace");
    assert!(out.contains(&Output::SetTimer {
        timer: Timer::Graceful("router-a".into()),
        at_ms: 10_500
    }));
    rig.now = 10_500;
    let out = rig.feed(Input::Timer(Timer::Graceful("router-a".into())));
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r1".into())]);
    assert_eq!(rig.inst.peers(0)[0].last_error.as_deref(), Some("reset"));
}

#[test]
fn a_sequence_gap_closes_and_removes_the_peers_paths_at_once() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.frame(
        7,
        Message::Withdraw(Withdraw {
            seq: 3,
            route_ids: vec!["r1".into()],
        }),
    );
    assert_eq!(closed_with(&out, 7), Some(CloseCode::SequenceGap));
    assert!(out.contains(&Output::Disconnect { conn: ConnId(7) }));
    assert_eq!(path_downs(&out), vec![("router-a".into(), "r1".into())]);
    assert_eq!(eligibility(&out), vec![("router-a".into(), false)]);
}

#[test]
fn a_path_containing_us_closes_with_loop_detected_and_applies_nothing() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![]);
    let looped = signed("r9", &["router-a", "router-b", "router-a"], 1);
    let out = rig.frame(
        7,
        Message::Update(Update {
            seq: 1,
            routes: vec![a("r1"), looped],
        }),
    );
    assert_eq!(closed_with(&out, 7), Some(CloseCode::LoopDetected));
    assert!(path_ups(&out).is_empty());
    assert_eq!(rig.inst.counters().rejected_loop, 1);
}

#[test]
fn a_renewal_of_a_local_route_sends_nothing() {
    let mut rig = Rig::new(2, &[1]);
    rig.feed(Input::UpsertLocal(local("echo-1")));
    rig.establish(7, 1, vec![]);
    rig.now = 18_000;
    let out = rig.feed(Input::UpsertLocal(local("echo-1")));
    assert!(out.is_empty(), "{out:?}");
    let mut changed = local("echo-1");
    changed.attrs.latency_ms = 9;
    let out = rig.feed(Input::UpsertLocal(changed));
    let routes = routes_of(&sent(&out, 7));
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].attrs.latency_ms, 9);
    let out = rig.feed(Input::WithdrawLocal("echo-1".into()));
    assert!(matches!(&sent(&out, 7)[..], [Message::Withdraw(w)] if w.route_ids == ["echo-1"]));
}

#[test]
fn a_close_from_the_peer_is_reported_with_its_reason() {
    let mut rig = Rig::new(2, &[1]);
    rig.establish(7, 1, vec![a("r1")]);
    let out = rig.frame(
        7,
        Message::Close(Close::new(CloseCode::AdminShutdown, "stopping")),
    );
    assert!(out.iter().any(|o| matches!(o,
        Output::SessionDown { by_us: false, close: Some(c), .. } if c.code == CloseCode::AdminShutdown)));
    assert_eq!(path_downs(&out).len(), 1);
    assert_eq!(rig.inst.peers(0)[0].state, PeerState::Idle);
}

mod export;
mod rules;
mod sessions;
