//! The scenario builders: scripted peers (test routers signing with
//! `testing::key(n)`) talking to one router under test (router-b unless a
//! scenario says otherwise). The README of each scenario is here too.

use std::collections::HashMap;

use arpx::instance::{ConnId, Input, LocalRoute, PeerConfig, Timer};
use arpx::message::{Close, CloseCode, Message, RouteAd, Update, Withdraw};
use arpx::testing::{key, local, open, peer, router, signed, tls_key};

use super::{Scenario, Step, TestConfig};

#[derive(Default)]
struct Script {
    steps: Vec<Step>,
    current: Vec<(u64, Input)>,
    now: u64,
    seqs: HashMap<u64, u64>,
}

impl Script {
    fn at(&mut self, t: u64) -> &mut Script {
        self.now = t;
        self
    }

    fn input(&mut self, input: Input) -> &mut Script {
        self.current.push((self.now, input));
        self
    }

    /// Ends the current step.
    fn step(&mut self, name: &'static str) -> &mut Script {
        let inputs = std::mem::take(&mut self.current);
        self.steps.push(Step { name, inputs });
        self
    }

    fn configure(&mut self, peers: Vec<PeerConfig>) -> &mut Script {
        self.input(Input::ConfigurePeers(peers))
    }

    fn connect(&mut self, conn: u64, n: u8, outbound: bool) -> &mut Script {
        self.input(Input::Connected {
            conn: ConnId(conn),
            peer: router(n),
            peer_key: tls_key(n),
            outbound,
        })
    }

    fn msg(&mut self, conn: u64, msg: Message) -> &mut Script {
        self.input(Input::Frame {
            conn: ConnId(conn),
            msg,
        })
    }

    fn open(&mut self, conn: u64, n: u8) -> &mut Script {
        self.msg(conn, open(n))
    }

    fn next_seq(&mut self, conn: u64) -> u64 {
        let seq = self.seqs.entry(conn).or_default();
        *seq += 1;
        *seq
    }

    fn update(&mut self, conn: u64, routes: Vec<RouteAd>) -> &mut Script {
        let seq = self.next_seq(conn);
        self.msg(conn, Message::Update(Update { seq, routes }))
    }

    fn withdraw(&mut self, conn: u64, ids: &[&str]) -> &mut Script {
        let seq = self.next_seq(conn);
        let route_ids = ids.iter().map(|s| (*s).to_owned()).collect();
        self.msg(conn, Message::Withdraw(Withdraw { seq, route_ids }))
    }

    /// SnapshotBegin{v}, one Update (when `routes` is not empty), End{v}.
    fn snapshot(&mut self, conn: u64, v: u64, routes: Vec<RouteAd>) -> &mut Script {
        self.msg(conn, Message::SnapshotBegin { version: v });
        if !routes.is_empty() {
            self.update(conn, routes);
        }
        self.msg(conn, Message::SnapshotEnd { version: v })
    }

    /// Connect (outbound), the peer's Open and its snapshot.
    fn establish(&mut self, conn: u64, n: u8, routes: Vec<RouteAd>) -> &mut Script {
        self.connect(conn, n, true)
            .open(conn, n)
            .snapshot(conn, 1, routes)
    }

    fn timer(&mut self, t: Timer) -> &mut Script {
        self.input(Input::Timer(t))
    }

    fn upsert(&mut self, r: LocalRoute) -> &mut Script {
        self.input(Input::UpsertLocal(r))
    }

    fn disconnect(&mut self, conn: u64, error: &str) -> &mut Script {
        self.input(Input::Disconnected {
            conn: ConnId(conn),
            error: error.into(),
        })
    }

    fn done(self, readme: &'static str, config: TestConfig) -> Scenario {
        assert!(self.current.is_empty(), "a step was not ended");
        Scenario {
            readme,
            config,
            steps: self.steps,
        }
    }
}

/// `route_id` originated by test router `n` at `serial`, path `path`.
fn route(route_id: &str, path: &[&str], origin: u8, serial: u64) -> RouteAd {
    let mut ad = signed(route_id, path, origin);
    ad.serial = serial;
    arpx::sign::sign(&mut ad, &key(origin));
    ad
}

fn a(route_id: &str) -> RouteAd {
    route(route_id, &["router-a"], 1, 1)
}

fn reflector() -> TestConfig {
    TestConfig {
        reflector: true,
        ..TestConfig::router(2)
    }
}

pub fn establish() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1)])
        .upsert(local("echo-1"))
        .step("configure");
    s.at(10).connect(1, 1, true).step("connect");
    s.at(20).open(1, 1).step("open");
    s.at(30)
        .msg(1, Message::SnapshotBegin { version: 7 })
        .update(1, vec![a("r1"), a("r2")])
        .msg(1, Message::SnapshotEnd { version: 7 })
        .step("peer-snapshot");
    s.at(1020)
        .timer(Timer::Heartbeat(ConnId(1)))
        .at(1500)
        .msg(1, Message::Heartbeat)
        .at(3020)
        .timer(Timer::Hold(ConnId(1)))
        .step("timers");
    s.done(include_str!("establish/README.md"), TestConfig::router(2))
}

pub fn heartbeat_loss() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1)])
        .establish(1, 1, vec![a("r1")])
        .step("establish");
    s.at(3000)
        .timer(Timer::Hold(ConnId(1)))
        .step("hold-expired");
    s.at(13_000)
        .timer(Timer::Graceful(router(1)))
        .step("graceful-expiry");
    s.done(
        include_str!("heartbeat-loss/README.md"),
        TestConfig::router(2),
    )
}

pub fn reconnect_within_grace() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1)])
        .establish(1, 1, vec![a("r1"), a("r2"), a("r3")])
        .step("establish");
    s.at(1000).disconnect(1, "connection reset").step("loss");
    s.at(2000)
        .connect(2, 1, true)
        .open(2, 1)
        .snapshot(2, 1, vec![a("r1"), route("r2", &["router-a"], 1, 2)])
        .step("reconnect-snapshot");
    s.at(11_000)
        .timer(Timer::Graceful(router(1)))
        .step("late-graceful-timer");
    s.done(
        include_str!("reconnect-within-grace/README.md"),
        TestConfig::router(2),
    )
}

pub fn withdraw_ordering() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .establish(3, 3, vec![])
        .establish(1, 1, vec![])
        .step("establish");
    s.at(100)
        .update(1, vec![a("r1"), a("r2")])
        .withdraw(1, &["r1"])
        .update(1, vec![route("r1", &["router-a"], 1, 2)])
        .withdraw(1, &["r2"])
        .step("churn");
    s.done(include_str!("withdraw-ordering/README.md"), reflector())
}

pub fn sequence_gap() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1)])
        .establish(1, 1, vec![a("r1")])
        .step("establish");
    s.at(100)
        .msg(
            1,
            Message::Update(Update {
                seq: 3,
                routes: vec![a("r2")],
            }),
        )
        .step("gap");
    s.at(200).msg(1, Message::Heartbeat).step("after-close");
    s.done(
        include_str!("sequence-gap/README.md"),
        TestConfig::router(2),
    )
}

pub fn loop_drop() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .establish(3, 3, vec![])
        .establish(1, 1, vec![])
        .step("establish");
    // A route that passed router-c: never reflected back to router-c.
    s.at(100)
        .update(1, vec![route("via-c", &["router-c", "router-a"], 3, 1)])
        .step("not-back-into-the-path");
    // router-a sends a path through us: the whole message is refused.
    s.at(200)
        .update(
            1,
            vec![
                a("r1"),
                route("r9", &["router-a", "router-b", "router-a"], 1, 1),
            ],
        )
        .step("path-contains-us");
    s.done(include_str!("loop-drop/README.md"), reflector())
}

pub fn forged_signature() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .establish(3, 3, vec![route("c1", &["router-c"], 3, 1)])
        .establish(1, 1, vec![a("r1")])
        .step("establish");
    let mut tampered = a("r2");
    tampered.attrs.trust = 100;
    s.at(100)
        .update(1, vec![a("r3"), tampered])
        .step("tampered");
    s.at(200)
        .connect(2, 1, true)
        .open(2, 1)
        .snapshot(2, 1, vec![a("r1")])
        .step("reconnect");
    // Claims origin router-c, signed with router-a's key: router-c's key
    // is known from its certificate.
    s.at(300)
        .update(2, vec![route("c2", &["router-c", "router-a"], 1, 1)])
        .step("wrong-origin-key");
    s.done(
        include_str!("forged-signature/README.md"),
        TestConfig::router(2),
    )
}

pub fn conflicting_owner() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .establish(1, 1, vec![a("shared")])
        .establish(3, 3, vec![])
        .step("establish");
    s.at(100)
        .update(3, vec![route("shared", &["router-c"], 3, 1)])
        .step("second-claim");
    s.at(200).upsert(local("echo-1")).step("local");
    s.at(300)
        .update(3, vec![route("echo-1", &["router-c"], 3, 1)])
        .step("remote-claim-of-local");
    s.at(400)
        .withdraw(1, &["shared"])
        .step("first-claim-withdrawn");
    s.done(
        include_str!("conflicting-owner/README.md"),
        TestConfig::router(2),
    )
}

pub fn split_horizon() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3), peer(4)])
        .establish(3, 3, vec![])
        .establish(4, 4, vec![])
        .establish(1, 1, vec![a("r1")])
        .step("establish");
    s.at(100)
        .update(3, vec![route("r1", &["router-a", "router-c"], 1, 1)])
        .step("second-path");
    s.at(200).disconnect(1, "eof").step("best-path-lost");
    s.done(include_str!("split-horizon/README.md"), reflector())
}

pub fn no_transit() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .upsert(local("echo-1"))
        .establish(3, 3, vec![])
        .establish(1, 1, vec![a("r1")])
        .step("establish");
    s.at(100)
        .configure(vec![
            peer(1),
            PeerConfig {
                reflector_client: true,
                ..peer(3)
            },
        ])
        .step("reflector-client");
    s.done(include_str!("no-transit/README.md"), TestConfig::router(2))
}

pub fn snapshot_during_churn() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .upsert(local("echo-1"))
        .establish(1, 1, vec![])
        .step("establish-a");
    s.at(100)
        .connect(3, 3, true)
        .open(3, 3)
        .msg(3, Message::SnapshotBegin { version: 5 })
        .update(3, vec![route("c1", &["router-c"], 3, 1)])
        .step("c-snapshot-begins");
    s.at(110)
        .upsert(local("echo-2"))
        .input(Input::WithdrawLocal("echo-1".into()))
        .update(1, vec![a("r1")])
        .step("churn-meanwhile");
    s.at(120)
        .update(3, vec![route("c2", &["router-c"], 3, 1)])
        .msg(3, Message::SnapshotEnd { version: 5 })
        .step("c-snapshot-ends");
    s.done(
        include_str!("snapshot-during-churn/README.md"),
        TestConfig::router(2),
    )
}

pub fn per_peer_limit() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![
        PeerConfig {
            max_routes: 3,
            ..peer(1)
        },
        peer(3),
    ])
    .establish(3, 3, vec![route("c1", &["router-c"], 3, 1)])
    .establish(1, 1, vec![a("r1"), a("r2")])
    .step("establish");
    s.at(100).update(1, vec![a("r3")]).step("at-the-limit");
    s.at(200)
        .update(1, vec![a("r4"), a("r5")])
        .step("over-the-limit");
    s.at(300)
        .msg(3, Message::Heartbeat)
        .step("other-peer-unaffected");
    s.done(
        include_str!("per-peer-limit/README.md"),
        TestConfig::router(2),
    )
}

pub fn collision() -> Scenario {
    let mut s = Script::default();
    s.configure(vec![peer(1), peer(3)])
        .upsert(local("echo-1"))
        .step("configure");
    // router-b (us) > router-a: our outbound connection wins.
    s.at(10)
        .connect(1, 1, false)
        .connect(2, 1, true)
        .open(2, 1)
        .snapshot(2, 1, vec![a("r1")])
        .step("both-dial-a");
    // router-a dials again while our outbound session is up: it loses.
    s.at(15).connect(5, 1, false).step("a-dials-again");
    // router-c > router-b: router-c's connection wins, even over an
    // established one; its paths pass over without a flap.
    s.at(20)
        .establish(3, 3, vec![route("c1", &["router-c"], 3, 1)])
        .step("established-with-c");
    s.at(30)
        .connect(4, 3, false)
        .open(4, 3)
        .snapshot(4, 2, vec![route("c1", &["router-c"], 3, 1)])
        .step("c-dials-in");
    s.at(40)
        .msg(
            3,
            Message::Close(Close::new(CloseCode::AdminShutdown, "late frame")),
        )
        .step("late-frame-on-the-loser");
    s.done(include_str!("collision/README.md"), TestConfig::router(2))
}
