//! The replica's peer links: carried by snapshots and deltas, one per
//! router, a generation that moves only on change, and the bound.

use super::*;
use crate::fib::export::{FibExporter, FibSink};
use crate::fib::MAX_LINK_DATA_LEN;

fn link(id: &str, key: u8, data: &str) -> PeerLink {
    PeerLink {
        router_id: id.into(),
        key: [key; 32],
        data: data.into(),
        signed: true,
        relay: Default::default(),
    }
}

fn snapshot(generation: u64, links: Vec<PeerLink>) -> Vec<FibEvent> {
    vec![
        FibEvent::SnapshotBegin { generation },
        FibEvent::SnapshotEnd {
            generation,
            policy: Box::default(),
            peers_down: vec![],
            links,
            agent_addrs: vec![],
        },
    ]
}

fn feed(r: &mut FibReplica, events: Vec<FibEvent>) -> Result<(), ReplicaError> {
    for ev in events {
        r.apply(ev, Millis(0))?;
    }
    Ok(())
}

fn delta(base: u64, generation: u64, changes: Vec<FibChange>) -> FibEvent {
    FibEvent::Delta {
        base,
        generation,
        changes,
    }
}

fn ids(r: &FibReplica) -> Vec<&str> {
    r.links().map(|l| &*l.router_id).collect()
}

#[test]
fn a_snapshot_carries_the_links_sorted_and_bumps_the_generation_only_when_they_differ() {
    let mut r = FibReplica::new(10);
    assert_eq!((r.links().count(), r.links_generation()), (0, 0));
    let set = vec![
        link("router-c", 3, "192.0.2.3:7447"),
        link("router-a", 1, "[2001:db8::1]:7447"),
        link("router-b", 2, "192.0.2.2:7447"),
    ];
    feed(&mut r, snapshot(4, set.clone())).unwrap();
    assert_eq!(ids(&r), ["router-a", "router-b", "router-c"]);
    assert_eq!(r.link("router-a"), Some(&set[1]));
    assert_eq!(r.link("router-z"), None);
    assert_eq!(r.links_generation(), 1);
    // A resubscription with the same set (any order) changes nothing.
    r.disconnected();
    let mut reordered = set.clone();
    reordered.reverse();
    feed(&mut r, snapshot(9, reordered)).unwrap();
    assert_eq!(r.links_generation(), 1);
    // One with another set does.
    feed(&mut r, snapshot(10, set[..1].to_vec())).unwrap();
    assert_eq!(ids(&r), ["router-c"]);
    assert_eq!(r.links_generation(), 2);
    // An empty snapshot clears them.
    feed(&mut r, snapshot(11, vec![])).unwrap();
    assert_eq!(r.links().count(), 0);
    assert_eq!(r.links_generation(), 3);
}

#[test]
fn link_and_unlink_deltas_replace_per_router_and_count_only_changes() {
    let mut r = FibReplica::new(10);
    feed(&mut r, snapshot(1, vec![])).unwrap();
    let b = link("router-b", 2, "192.0.2.2:7447");
    r.apply(delta(1, 1, vec![FibChange::Link(b.clone())]), Millis(0))
        .unwrap();
    assert_eq!(r.link("router-b"), Some(&b));
    assert_eq!(r.links_generation(), 1);
    // The same link again: nothing changed.
    r.apply(delta(1, 1, vec![FibChange::Link(b.clone())]), Millis(0))
        .unwrap();
    assert_eq!(r.links_generation(), 1);
    // A new key (the peer's session came back with another identity) or
    // a new data address replaces the link; still one per router.
    let rekeyed = link("router-b", 7, "192.0.2.2:7447");
    let moved = link("router-b", 7, "192.0.2.2:9447");
    r.apply(
        delta(1, 2, vec![FibChange::Link(rekeyed.clone())]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.link("router-b"), Some(&rekeyed));
    r.apply(delta(2, 2, vec![FibChange::Link(moved.clone())]), Millis(0))
        .unwrap();
    assert_eq!(ids(&r), ["router-b"]);
    assert_eq!(r.link("router-b"), Some(&moved));
    assert_eq!(r.links_generation(), 3);
    // Unlink of a router without a link changes nothing; of one with, it goes.
    r.apply(
        delta(2, 3, vec![FibChange::Unlink("router-x".into())]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.links_generation(), 3);
    r.apply(
        delta(3, 4, vec![FibChange::Unlink("router-b".into())]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.link("router-b"), None);
    assert_eq!(r.links_generation(), 4);
    // Route changes alone never move it.
    r.apply(
        delta(4, 5, vec![FibChange::Remove(RouteId::new("x").unwrap())]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.links_generation(), 4);
}

#[test]
fn links_stay_while_agentd_is_away_like_the_rest_of_the_served_state() {
    let mut r = FibReplica::new(10);
    feed(
        &mut r,
        snapshot(1, vec![link("router-b", 2, "192.0.2.2:7447")]),
    )
    .unwrap();
    r.disconnected();
    assert_eq!(ids(&r), ["router-b"]);
    // A half-received snapshot does not touch them either.
    r.apply(FibEvent::SnapshotBegin { generation: 5 }, Millis(0))
        .unwrap();
    r.disconnected();
    assert_eq!(ids(&r), ["router-b"]);
    assert_eq!(r.links_generation(), 1);
}

#[test]
fn malformed_links_are_left_out_and_counted() {
    let mut r = FibReplica::new(10);
    let long = "h".repeat(MAX_LINK_DATA_LEN + 1);
    feed(
        &mut r,
        snapshot(
            1,
            vec![
                link("router-b", 2, "192.0.2.2:7447"),
                link("bad id!", 3, "192.0.2.3:7447"),
                link("router-c", 4, ""),
                link("router-d", 5, &long),
                link("router-e", 6, "192.0.2.6 :7447"),
            ],
        ),
    )
    .unwrap();
    assert_eq!(ids(&r), ["router-b"]);
    assert_eq!(r.stats().rejected_links, 4);
    r.apply(
        delta(1, 1, vec![FibChange::Link(link("-x", 1, "192.0.2.9:1"))]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(ids(&r), ["router-b"]);
    assert_eq!(r.stats().rejected_links, 5);
}

fn many(n: usize) -> Vec<PeerLink> {
    (0..n)
        .map(|i| link(&format!("r{i:05}"), 1, "192.0.2.1:7447"))
        .collect()
}

#[test]
fn a_snapshot_with_more_links_than_the_bound_is_refused_and_changes_nothing() {
    let mut r = FibReplica::new(10);
    feed(
        &mut r,
        snapshot(1, vec![link("router-b", 2, "192.0.2.2:7447")]),
    )
    .unwrap();
    let err = feed(&mut r, snapshot(2, many(MAX_LINKS + 1))).unwrap_err();
    assert_eq!(
        err,
        ReplicaError::TooManyLinks {
            links: MAX_LINKS + 1,
            max: MAX_LINKS
        }
    );
    assert!(
        err.to_string().contains("more than the bound of 4096"),
        "{err}"
    );
    assert!(!r.in_sync());
    assert_eq!(r.generation(), Some(1));
    assert_eq!(ids(&r), ["router-b"]);
    assert_eq!(r.links_generation(), 1);
    // Exactly the bound is fine.
    feed(&mut r, snapshot(3, many(MAX_LINKS))).unwrap();
    assert_eq!(r.links().count(), MAX_LINKS);
}

#[test]
fn a_delta_that_would_exceed_the_bound_is_refused_before_anything_applies() {
    let mut r = FibReplica::new(10);
    feed(&mut r, snapshot(1, many(MAX_LINKS))).unwrap();
    let before = r.links_generation();
    // Replacing a held router and swapping one out for a new one stay
    // within the bound.
    r.apply(
        delta(
            1,
            2,
            vec![
                FibChange::Link(link("r00000", 9, "192.0.2.9:7447")),
                FibChange::Unlink("r00001".into()),
                FibChange::Link(link("router-new", 1, "192.0.2.1:7447")),
            ],
        ),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.links().count(), MAX_LINKS);
    assert_eq!(r.links_generation(), before + 3);
    // One more new router is refused, and the unlink before it in the same
    // delta is not applied either.
    let err = r
        .apply(
            delta(
                2,
                3,
                vec![
                    FibChange::Unlink("r00002".into()),
                    FibChange::Link(link("router-x", 1, "192.0.2.1:7447")),
                    FibChange::Link(link("router-y", 1, "192.0.2.1:7447")),
                ],
            ),
            Millis(0),
        )
        .unwrap_err();
    assert_eq!(
        err,
        ReplicaError::TooManyLinks {
            links: MAX_LINKS + 1,
            max: MAX_LINKS
        }
    );
    assert!(r.link("r00002").is_some());
    assert!(r.link("router-x").is_none());
    assert_eq!(r.links_generation(), before + 3);
    assert_eq!(r.generation(), Some(2));
}

/// Far more links than one chunk holds, with long addresses, in
/// descending router-id order (the exporter sorts them).
fn many_long_links() -> Vec<PeerLink> {
    let host = "h".repeat(200);
    (0..2000)
        .rev()
        .map(|i| {
            link(
                &format!("router-{i:04}"),
                (i % 251) as u8,
                &format!("{host}:7447"),
            )
        })
        .collect()
}

/// Events queued by the exporter.
#[derive(Debug, Default)]
struct Queue(Vec<FibEvent>);

impl FibSink for Queue {
    fn offer(&mut self, event: FibEvent) -> bool {
        self.0.push(event);
        true
    }
}

/// The largest policy the configuration accepts still fits in the
/// snapshot's last frame beside a full chunk of links and every peer the
/// configuration and discovery allow, down: the bounds on the policy and
/// on the peer count are what keep `SnapshotEnd` sendable.
#[test]
fn the_largest_accepted_policy_and_a_links_chunk_fit_in_one_frame() {
    use crate::policy::{Action, Pattern, Rule, MAX_POLICY_BYTES};
    use crate::score::Weights;
    let rules = |n: usize| -> Vec<Rule> {
        (0..n)
            .map(|i| Rule {
                capability: Pattern::Exact(format!("{i:0>100}").into()),
                ..Rule::new(&format!("r{i:05}"), 1, Action::Allow)
            })
            .collect()
    };
    let accepted = |n: usize| Policy::new(rules(n), Action::Allow, Weights::default()).ok();
    // The most rules accepted: bisect between one that fits and one that does not.
    let (mut lo, mut hi) = (1, 10_000);
    assert!(accepted(lo).is_some() && accepted(hi).is_none());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if accepted(mid).is_some() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let policy = accepted(lo).unwrap();
    let size = postcard::experimental::serialized_size(&policy).unwrap();
    assert!(size > MAX_POLICY_BYTES - 200, "{size}");
    let set = many_long_links();
    // Every peer the configuration allows, and every router discovery may
    // admit, down, with the longest router ids.
    let mut rib = RouteTable::new(10);
    let down = crate::daemon::peers::settings::MAX_PEERS + crate::discovery::table::MAX_CANDIDATES;
    for i in 0..down {
        assert!(rib.set_peer_up(&format!("{i:0>63}"), false));
    }
    assert_eq!(rib.peers_down().count(), down);
    let mut ex: FibExporter<Queue> = FibExporter::new();
    let sub = ex
        .subscribe(Queue::default(), &rib, &policy, &set, &[])
        .unwrap();
    let events = ex.unsubscribe(sub).unwrap().0;
    let end = events
        .iter()
        .find(|e| matches!(e, FibEvent::SnapshotEnd { .. }))
        .unwrap();
    let FibEvent::SnapshotEnd { links, .. } = end else {
        unreachable!()
    };
    assert!(!links.is_empty());
    for ev in &events {
        // Encoded as the IPC server sends it.
        let msg = crate::ipc::message::ServerMsg::Fib(ev.clone());
        crate::ipc::frame::encode(&msg).expect("every event of the snapshot is one frame");
    }
}

#[test]
fn the_exporter_sends_every_link_within_frame_bounds_and_the_replica_mirrors_them() {
    let set = many_long_links();
    let rib = RouteTable::new(10);
    let mut ex: FibExporter<Queue> = FibExporter::new();
    let sub = ex
        .subscribe(Queue::default(), &rib, &Policy::default(), &set, &[])
        .unwrap();
    let events = ex.unsubscribe(sub).unwrap().0;
    assert!(events.len() > 2, "the links continue in deltas");
    for ev in &events {
        let size = postcard::experimental::serialized_size(ev).unwrap();
        assert!(size <= crate::ipc::frame::MAX_FRAME_LEN, "{size} bytes");
    }
    let FibEvent::SnapshotEnd { links, .. } = &events[1] else {
        panic!("{:?}", events[1])
    };
    assert!(!links.is_empty());
    assert!(links.windows(2).all(|w| w[0].router_id < w[1].router_id));
    let mut r = FibReplica::new(10);
    feed(&mut r, events).unwrap();
    let mut want = set.clone();
    want.sort_by(|a, b| a.router_id.cmp(&b.router_id));
    assert_eq!(r.links().cloned().collect::<Vec<_>>(), want);
    // A later delta still lines up with the snapshot's generation.
    r.apply(
        delta(0, 0, vec![FibChange::Unlink("router-0000".into())]),
        Millis(0),
    )
    .unwrap();
    assert_eq!(r.links().count(), 1999);
}
