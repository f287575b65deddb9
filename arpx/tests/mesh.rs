//! Instances wired to each other (sans-IO): every `Send` is delivered to
//! the other end as a `Frame`, every `Disconnect` as `Disconnected`, so
//! our sender and our receiver are checked against each other across
//! chains and diamonds — reflection, withdraw propagation, restarts with
//! a new boot epoch, failover without a gap.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use arpx::instance::{ConnId, Input, Instance, Output, PeerConfig};
use arpx::testing::{config, local, peer, tls_key};

/// One router's view, rebuilt from its outputs as agentd's RIB would.
#[derive(Default)]
struct Rib {
    /// (route_id, via) → path.
    paths: BTreeMap<(String, String), Vec<String>>,
    eligible: BTreeSet<String>,
}

impl Rib {
    /// Route ids with at least one eligible path.
    fn eligible_routes(&self) -> BTreeSet<String> {
        self.paths
            .keys()
            .filter(|(_, via)| self.eligible.contains(via))
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn path(&self, route_id: &str, via: &str) -> Option<&Vec<String>> {
        self.paths.get(&(route_id.to_owned(), via.to_owned()))
    }
}

struct Node {
    inst: Instance,
    rib: Rib,
}

struct Net {
    nodes: BTreeMap<u8, Node>,
    /// conn → (owner node, other end's conn, other node).
    links: BTreeMap<u64, (u8, u64, u8)>,
    next_conn: u64,
    queue: VecDeque<(u8, Input)>,
    now: u64,
}

impl Net {
    fn new() -> Net {
        Net {
            nodes: BTreeMap::new(),
            links: BTreeMap::new(),
            next_conn: 1,
            queue: VecDeque::new(),
            now: 0,
        }
    }

    /// Starts (or restarts, with a later boot epoch) router `n`.
    fn start(&mut self, n: u8, reflector: bool, peers: &[u8], epoch: u64) {
        let mut cfg = config(n);
        cfg.reflector = reflector;
        cfg.boot_epoch = epoch;
        let node = Node {
            inst: Instance::new(cfg),
            rib: Rib::default(),
        };
        self.nodes.insert(n, node);
        let peers: Vec<PeerConfig> = peers.iter().map(|p| peer(*p)).collect();
        self.input(n, Input::ConfigurePeers(peers));
    }

    fn input(&mut self, n: u8, input: Input) {
        self.queue.push_back((n, input));
        self.run();
    }

    /// A TLS session between `a` (dialling) and `b`.
    fn link(&mut self, a: u8, b: u8) -> (u64, u64) {
        let (ca, cb) = (self.next_conn, self.next_conn + 1);
        self.next_conn += 2;
        self.links.insert(ca, (a, cb, b));
        self.links.insert(cb, (b, ca, a));
        self.queue.push_back((
            a,
            Input::Connected {
                conn: ConnId(ca),
                peer: arpx::testing::router(b),
                peer_key: tls_key(b),
                outbound: true,
            },
        ));
        self.queue.push_back((
            b,
            Input::Connected {
                conn: ConnId(cb),
                peer: arpx::testing::router(a),
                peer_key: tls_key(a),
                outbound: false,
            },
        ));
        self.run();
        (ca, cb)
    }

    /// The transport between the two ends of `conn` fails.
    fn cut(&mut self, conn: u64) {
        if let Some((a, other, b)) = self.links.remove(&conn) {
            self.links.remove(&other);
            for (n, c) in [(a, conn), (b, other)] {
                self.queue.push_back((
                    n,
                    Input::Disconnected {
                        conn: ConnId(c),
                        error: "cut".into(),
                    },
                ));
            }
            self.run();
        }
    }

    /// Router `n` dies: its ends see the transport go.
    fn kill(&mut self, n: u8) {
        let conns: Vec<u64> = self
            .links
            .iter()
            .filter(|(_, (owner, _, _))| *owner == n)
            .map(|(c, _)| *c)
            .collect();
        self.nodes.remove(&n);
        for c in conns {
            if let Some((_, other, b)) = self.links.remove(&c) {
                self.links.remove(&other);
                self.queue.push_back((
                    b,
                    Input::Disconnected {
                        conn: ConnId(other),
                        error: "eof".into(),
                    },
                ));
            }
        }
        self.run();
    }

    fn run(&mut self) {
        let mut steps = 0;
        while let Some((n, input)) = self.queue.pop_front() {
            steps += 1;
            assert!(steps < 100_000, "the mesh does not settle");
            let Some(node) = self.nodes.get_mut(&n) else {
                continue;
            };
            let mut out = Vec::new();
            node.inst.handle(self.now, input, &mut out);
            for o in out {
                match o {
                    Output::Send { conn, msg } => {
                        if let Some((_, other, b)) = self.links.get(&conn.0) {
                            self.queue.push_back((
                                *b,
                                Input::Frame {
                                    conn: ConnId(*other),
                                    msg,
                                },
                            ));
                        }
                    }
                    Output::Disconnect { conn } => {
                        if let Some((_, other, b)) = self.links.remove(&conn.0) {
                            self.links.remove(&other);
                            self.queue.push_back((
                                b,
                                Input::Disconnected {
                                    conn: ConnId(other),
                                    error: "closed by peer".into(),
                                },
                            ));
                        }
                    }
                    // Frames queued before it are delivered first: written.
                    Output::NotifyWritten { conn } => {
                        self.queue.push_back((n, Input::Written { conn }));
                    }
                    Output::PathUp { peer, ad } => {
                        node.rib.paths.insert((ad.route_id.clone(), peer), ad.path);
                    }
                    Output::PathDown { peer, route_id } => {
                        node.rib.paths.remove(&(route_id, peer));
                    }
                    Output::PeerEligible { peer, up: true } => {
                        node.rib.eligible.insert(peer);
                    }
                    Output::PeerEligible { peer, up: false } => {
                        node.rib.eligible.remove(&peer);
                    }
                    _ => {}
                }
            }
        }
    }

    fn rib(&self, n: u8) -> &Rib {
        &self.nodes[&n].rib
    }

    fn upsert(&mut self, n: u8, route_id: &str) {
        self.input(n, Input::UpsertLocal(local(route_id)));
    }

    fn withdraw(&mut self, n: u8, route_id: &str) {
        self.input(n, Input::WithdrawLocal(route_id.into()));
    }
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

const A: u8 = 1;
const B: u8 = 2;
const C: u8 = 3;
const D: u8 = 4;

#[test]
fn a_chain_reflects_only_through_a_reflector_and_converges_after_its_restart() {
    let mut net = Net::new();
    net.start(A, false, &[B], 100);
    net.start(B, false, &[A, C], 200);
    net.start(C, false, &[B], 300);
    for i in 0..4 {
        net.upsert(A, &format!("a-{i}"));
    }
    net.link(A, B);
    net.link(B, C);
    assert_eq!(net.rib(B).eligible_routes().len(), 4);
    assert!(net.rib(C).eligible_routes().is_empty(), "no transit");

    // B restarts as a reflector (new boot epoch).
    net.kill(B);
    net.start(B, true, &[A, C], 201);
    net.link(A, B);
    net.link(B, C);
    assert_eq!(
        net.rib(C).eligible_routes(),
        set(&["a-0", "a-1", "a-2", "a-3"])
    );
    assert_eq!(
        net.rib(C).path("a-0", "router-b").unwrap(),
        &vec!["router-a".to_string(), "router-b".into()]
    );

    // Withdraw half at A: gone at C at once.
    net.withdraw(A, "a-0");
    net.withdraw(A, "a-1");
    assert_eq!(net.rib(C).eligible_routes(), set(&["a-2", "a-3"]));

    // B goes down; A replaces its routes meanwhile; B restarts.
    net.kill(B);
    assert!(
        net.rib(C).eligible_routes().is_empty(),
        "ineligible at once"
    );
    net.withdraw(A, "a-2");
    net.upsert(A, "a-9");
    net.start(B, true, &[A, C], 202);
    net.link(B, C);
    net.link(A, B);
    assert_eq!(net.rib(C).eligible_routes(), set(&["a-3", "a-9"]));
    assert_eq!(
        net.rib(C).paths.len(),
        2,
        "the sweep left exactly the new set"
    );
}

#[test]
fn a_diamond_keeps_two_paths_and_fails_over_without_a_gap() {
    let mut net = Net::new();
    net.start(A, false, &[B, C], 100);
    net.start(B, true, &[A, D], 200);
    net.start(C, true, &[A, D], 300);
    net.start(D, false, &[B, C], 400);
    net.upsert(A, "echo");
    net.link(A, B);
    net.link(A, C);
    let (bd, _) = net.link(B, D);
    net.link(C, D);
    let d = net.rib(D);
    assert_eq!(d.path("echo", "router-b").unwrap().len(), 2);
    assert_eq!(d.path("echo", "router-c").unwrap().len(), 2);
    assert!(d.eligible.contains("router-b") && d.eligible.contains("router-c"));

    net.cut(bd);
    let d = net.rib(D);
    assert!(!d.eligible.contains("router-b"));
    assert_eq!(d.eligible_routes(), set(&["echo"]), "still reachable via C");

    net.withdraw(A, "echo");
    for n in [B, C, D] {
        assert!(net.rib(n).eligible_routes().is_empty(), "router {n}");
    }
}

#[test]
fn renewals_cost_no_messages_across_the_mesh() {
    let mut net = Net::new();
    net.start(A, false, &[B], 100);
    net.start(B, true, &[A, C], 200);
    net.start(C, false, &[B], 300);
    for i in 0..10 {
        net.upsert(A, &format!("a-{i}"));
    }
    net.link(A, B);
    net.link(B, C);
    let before = net.nodes[&C].inst.counters().routes_in;
    for round in 1..=5u64 {
        net.now = round * 18_000;
        for i in 0..10 {
            net.upsert(A, &format!("a-{i}"));
        }
    }
    assert_eq!(net.nodes[&B].inst.counters().routes_in, 10);
    assert_eq!(net.nodes[&C].inst.counters().routes_in, before);
}
