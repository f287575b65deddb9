//! The replica's snapshot, delta and expiry behaviour.
use super::*;
use crate::fib::export::{FibExporter, FibSink};
use crate::policy::{Action, Rule};
use crate::route::{Access, Attributes, Lease, RouteSource};

fn route(id: &str, origin: &str, deadline: u64) -> Route {
    Route {
        id: RouteId::new(id).unwrap(),
        capability: "demo.echo".into(),
        version: 1,
        origin: origin.into(),
        endpoint: "http://192.0.2.10:8080/".into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes::default(),
        access: Access::default().into(),
        contract: None,
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(Millis(deadline)),
        healthy: true,
        allow_loopback: false,
        owner: None,
        proof: Default::default(),
        disputed: false,
    }
}

fn via(mut r: Route, peer: &str) -> Route {
    r.source = RouteSource::Peer;
    r.next_hop = Some(peer.into());
    r.path = vec![peer.into()].into();
    r
}

fn id(s: &str) -> RouteId {
    RouteId::new(s).unwrap()
}

fn snapshot(generation: u64, routes: Vec<Route>) -> Vec<FibEvent> {
    vec![
        FibEvent::SnapshotBegin { generation },
        FibEvent::SnapshotChunk(routes),
        FibEvent::SnapshotEnd {
            generation,
            policy: Box::default(),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        },
    ]
}

fn feed(r: &mut FibReplica, events: Vec<FibEvent>, now: u64) {
    for ev in events {
        r.apply(ev, Millis(now)).unwrap();
    }
}

fn ids(r: &FibReplica) -> Vec<String> {
    let mut v: Vec<_> = r.table().iter().map(|r| r.id.to_string()).collect();
    v.sort();
    v
}

fn delta(base: u64, generation: u64, changes: Vec<FibChange>) -> FibEvent {
    FibEvent::Delta {
        base,
        generation,
        changes,
    }
}

#[test]
fn fresh_replica_denies_until_the_first_snapshot() {
    let r = FibReplica::new(100);
    assert_eq!(r.generation(), None);
    assert!(r.policy().invalid.is_some());
    assert_eq!(r.policy().default_action, Action::Deny);
}

#[test]
fn snapshot_then_deltas_build_the_table() {
    let mut r = FibReplica::new(100);
    feed(
        &mut r,
        snapshot(
            5,
            vec![
                route("a", "agent://lab/a", 9_000),
                route("b", "agent://lab/b", 9_000),
            ],
        ),
        0,
    );
    assert_eq!((r.generation(), r.in_sync()), (Some(5), true));
    assert_eq!(r.policy(), &Policy::default());
    let mut moved = route("a", "agent://lab/a", 9_000);
    moved.endpoint = "http://192.0.2.11:8080/".into();
    let applied = r
        .apply(
            delta(
                5,
                7,
                vec![
                    FibChange::Upsert(Box::new(moved.clone())),
                    FibChange::Remove(id("b")),
                ],
            ),
            Millis(0),
        )
        .unwrap();
    assert_eq!(
        applied,
        Applied::Delta {
            generation: 7,
            changes: 2
        }
    );
    assert_eq!(ids(&r), ["a"]);
    assert_eq!(r.table().get(&id("a")), Some(&moved));
    // A follow-up part of a split delta (base == generation) applies too.
    r.apply(delta(7, 7, vec![FibChange::Remove(id("a"))]), Millis(0))
        .unwrap();
    assert!(r.table().is_empty());
}

#[test]
fn gap_is_refused_and_last_state_served_until_a_fresh_snapshot() {
    let mut r = FibReplica::new(100);
    feed(
        &mut r,
        snapshot(5, vec![route("a", "agent://lab/a", 9_000)]),
        0,
    );
    let err = r
        .apply(delta(6, 7, vec![FibChange::Remove(id("a"))]), Millis(0))
        .unwrap_err();
    assert_eq!(
        err,
        ReplicaError::Gap {
            have: Some(5),
            base: 6
        }
    );
    assert_eq!(
        err.to_string(),
        "FIB delta based on generation 6 but the replica holds 5"
    );
    assert!(!r.in_sync());
    assert_eq!(ids(&r), ["a"], "still serving the last state");
    // Even a delta that would line up is refused until we resync.
    assert_eq!(
        r.apply(delta(5, 6, vec![]), Millis(0)),
        Err(ReplicaError::Gap {
            have: None,
            base: 5
        })
    );
    feed(
        &mut r,
        snapshot(9, vec![route("c", "agent://lab/c", 9_000)]),
        0,
    );
    assert_eq!(
        ids(&r),
        ["c"],
        "routes gone meanwhile disappear with the snapshot"
    );
    assert_eq!((r.generation(), r.in_sync()), (Some(9), true));
    assert_eq!(r.stats().resyncs, 1);
}

#[test]
fn delta_before_any_snapshot_is_a_gap() {
    let mut r = FibReplica::new(100);
    assert_eq!(
        r.apply(delta(0, 1, vec![]), Millis(0)),
        Err(ReplicaError::Gap {
            have: None,
            base: 0
        })
    );
}

#[test]
fn half_received_snapshot_never_replaces_the_served_state() {
    let mut r = FibReplica::new(100);
    feed(
        &mut r,
        snapshot(5, vec![route("a", "agent://lab/a", 9_000)]),
        0,
    );
    r.apply(FibEvent::SnapshotBegin { generation: 8 }, Millis(0))
        .unwrap();
    r.apply(
        FibEvent::SnapshotChunk(vec![route("z", "agent://lab/z", 9_000)]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(ids(&r), ["a"]);
    r.disconnected();
    assert_eq!(ids(&r), ["a"]);
    assert_eq!(r.generation(), Some(5));
    // The stale end of that snapshot is out of order now.
    let end = FibEvent::SnapshotEnd {
        generation: 8,
        policy: Box::default(),
        peers_down: vec![],
        links: vec![],
        agent_addrs: vec![],
    };
    assert!(matches!(
        r.apply(end, Millis(0)),
        Err(ReplicaError::OutOfOrder { .. })
    ));
}

#[test]
fn malformed_sequences_are_typed_errors() {
    let mut r = FibReplica::new(100);
    assert!(matches!(
        r.apply(FibEvent::SnapshotChunk(vec![]), Millis(0)),
        Err(ReplicaError::OutOfOrder { .. })
    ));
    r.apply(FibEvent::SnapshotBegin { generation: 3 }, Millis(0))
        .unwrap();
    let end = FibEvent::SnapshotEnd {
        generation: 4,
        policy: Box::default(),
        peers_down: vec![],
        links: vec![],
        agent_addrs: vec![],
    };
    assert_eq!(
        r.apply(end, Millis(0)),
        Err(ReplicaError::SnapshotMismatch { begin: 3, end: 4 })
    );
    r.apply(FibEvent::SnapshotBegin { generation: 3 }, Millis(0))
        .unwrap();
    assert!(matches!(
        r.apply(delta(3, 4, vec![]), Millis(0)),
        Err(ReplicaError::OutOfOrder { .. })
    ));
    assert_eq!(r.generation(), None);
}

#[test]
fn leases_expire_at_their_deadline_without_agentd() {
    let mut r = FibReplica::new(100);
    feed(
        &mut r,
        snapshot(
            1,
            vec![
                route("a", "agent://lab/a", 5_000),
                route("b", "agent://lab/b", 7_000),
            ],
        ),
        1_000,
    );
    r.disconnected(); // agentd went away; the replica keeps time itself
    assert_eq!(r.next_deadline(), Some(Millis(5_000)));
    assert!(r.expire(Millis(4_999)).is_empty());
    let gone = r.expire(Millis(5_000));
    assert_eq!(
        gone.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(r.next_deadline(), Some(Millis(7_000)));
    assert_eq!(r.expire(Millis(60_000)).len(), 1);
    assert!(r.table().is_empty());
}

#[test]
fn routes_arriving_past_their_deadline_are_dropped_on_arrival() {
    let mut r = FibReplica::new(100);
    feed(
        &mut r,
        snapshot(
            1,
            vec![
                route("old", "agent://lab/o", 500),
                route("new", "agent://lab/n", 9_000),
            ],
        ),
        1_000,
    );
    assert_eq!(ids(&r), ["new"]);
    r.apply(
        delta(
            1,
            2,
            vec![FibChange::Upsert(Box::new(route(
                "late",
                "agent://lab/l",
                900,
            )))],
        ),
        Millis(1_000),
    )
    .unwrap();
    assert_eq!(ids(&r), ["new"]);
}

#[test]
fn peer_states_travel_with_snapshot_and_deltas() {
    let mut r = FibReplica::new(100);
    let events = vec![
        FibEvent::SnapshotBegin { generation: 1 },
        FibEvent::SnapshotChunk(vec![via(route("p", "agent://lab/p", 9_000), "router-b")]),
        FibEvent::SnapshotEnd {
            generation: 1,
            policy: Box::default(),
            peers_down: vec!["router-b".into()],
            links: vec![],
            agent_addrs: vec![],
        },
    ];
    feed(&mut r, events, 0);
    let slot = r.table().slot_of(&id("p")).unwrap();
    assert!(!r.table().is_peer_up(slot));
    r.apply(
        delta(
            1,
            2,
            vec![FibChange::PeerUp {
                router_id: "router-b".into(),
                up: true,
            }],
        ),
        Millis(0),
    )
    .unwrap();
    assert!(r.table().is_peer_up(slot));
}

#[test]
fn policy_from_the_wire_is_revalidated() {
    let mut r = FibReplica::new(100);
    feed(&mut r, snapshot(1, vec![]), 0);
    let good = Policy::new(
        vec![Rule::new("10-deny", 100, Action::Deny)],
        Action::Allow,
        Default::default(),
    )
    .unwrap();
    r.apply(
        delta(1, 2, vec![FibChange::Policy(Box::new(good.clone()))]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.policy(), &good);
    let mut bad = Policy::default();
    bad.default_weights.d_cost = 0;
    r.apply(
        delta(2, 3, vec![FibChange::Policy(Box::new(bad))]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.policy().default_action, Action::Deny);
    assert!(r
        .policy()
        .invalid
        .as_deref()
        .is_some_and(|m| m.contains("d_cost")));
    assert_eq!(r.stats().invalid_policies, 1);
}

#[test]
fn a_route_id_that_changed_owner_replaces_the_old_entry() {
    let mut r = FibReplica::new(100);
    feed(
        &mut r,
        snapshot(1, vec![route("a", "agent://lab/one", 9_000)]),
        0,
    );
    let new_owner = route("a", "agent://lab/two", 9_000);
    r.apply(
        delta(1, 2, vec![FibChange::Upsert(Box::new(new_owner.clone()))]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.table().get(&id("a")), Some(&new_owner));
}

#[test]
fn full_replica_counts_rejected_routes_instead_of_failing() {
    let mut r = FibReplica::new(1);
    feed(
        &mut r,
        snapshot(
            1,
            vec![
                route("a", "agent://lab/a", 9_000),
                route("b", "agent://lab/b", 9_000),
            ],
        ),
        0,
    );
    assert_eq!(r.table().len(), 1);
    assert_eq!(r.stats().rejected_routes, 1);
}

/// Events queued by the exporter, drained into the replica.
#[derive(Debug, Default)]
struct Queue(Vec<FibEvent>);

impl FibSink for Queue {
    fn offer(&mut self, event: FibEvent) -> bool {
        self.0.push(event);
        true
    }
}

#[test]
fn replica_fed_by_the_exporter_mirrors_the_rib() {
    let mut rib = RouteTable::new(1000);
    let policy = Policy::default();
    for i in 0..300 {
        rib.upsert(route(
            &format!("r{i}"),
            &format!("agent://lab/a{i}"),
            50_000 + i,
        ))
        .unwrap();
    }
    let mut ex: FibExporter<Queue> = FibExporter::new();
    let sub = ex
        .subscribe(Queue::default(), &rib, &policy, &[], &[])
        .unwrap();
    // Churn: removals, renewals, health, a peer route and its session.
    let mut changes = Vec::new();
    for i in (0..300).step_by(3) {
        let rid = id(&format!("r{i}"));
        rib.remove(&rid);
        changes.push(FibChange::Remove(rid));
    }
    for i in (1..300).step_by(7).filter(|i| i % 3 != 0) {
        let rid = id(&format!("r{i}"));
        rib.renew(&rid, Lease::Until(Millis(90_000))).unwrap();
        rib.set_health(&rid, i % 2 == 0).unwrap();
        changes.push(FibChange::Upsert(Box::new(rib.get(&rid).unwrap().clone())));
    }
    let p = via(route("peer", "agent://lab/p", 80_000), "router-b");
    rib.upsert(p.clone()).unwrap();
    rib.set_peer_up("router-b", false);
    changes.push(FibChange::Upsert(Box::new(p)));
    changes.push(FibChange::PeerUp {
        router_id: "router-b".into(),
        up: false,
    });
    ex.publish(rib.generation(), changes);

    let events = ex.unsubscribe(sub).unwrap().0;
    let mut r = FibReplica::new(1000);
    feed(&mut r, events, 0);
    assert_eq!(r.generation(), Some(rib.generation()));
    let mut want: Vec<_> = rib.iter().cloned().collect();
    let mut got: Vec<_> = r.table().iter().cloned().collect();
    want.sort_by(|a, b| a.id.cmp(&b.id));
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got, want);
    let slot = r.table().slot_of(&id("peer")).unwrap();
    assert!(!r.table().is_peer_up(slot));
    // Both expire the same routes at the same instant.
    assert_eq!(
        r.expire(Millis(50_100)).len(),
        rib.expire(Millis(50_100)).len()
    );
    assert_eq!(r.table().len(), rib.len());
}
