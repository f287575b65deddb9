//! Table behaviour with time fed as input: upsert/conflict rules, leases
//! expiring exactly at their deadline, timer hygiene, peer state and the
//! generation counter.

use super::*;
use crate::route::{Access, Attributes, Text};

/// A local route `id` of `agent://<tenant>/<agent>` for `cap` v`version`.
pub(crate) fn route(id: &str, cap: &str, version: u32) -> Route {
    Route {
        id: RouteId::new(id).unwrap(),
        capability: cap.into(),
        version,
        origin: "agent://lab/a".into(),
        endpoint: format!("http://192.0.2.10:8080/{id}").into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms: 5,
            cost_micros: 0,
            load_permille: 0,
            trust: 90,
        },
        access: Access::default().into(),
        contract: None,
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(Millis(30_000)),
        healthy: true,
        allow_loopback: false,
        owner: None,
        proof: Default::default(),
        disputed: false,
    }
}

/// Checks every structural invariant of the table: the hot records mirror
/// their routes, both indexes hold exactly the live slots, groups are
/// sorted by version, each leased route has a live timer and the heap top
/// is valid. Randomized tests call it after every batch of mutations.
pub(crate) fn check_invariants(t: &RouteTable) {
    let live: Vec<u32> = (0..t.slab.len() as u32)
        .filter(|&s| t.slab[s as usize].route.is_some())
        .collect();
    assert_eq!(live.len(), t.len(), "len");
    for &s in &live {
        let r = t.slab[s as usize].route.as_ref().unwrap();
        let h = t.hot[s as usize];
        let mut want = Hot::new(
            r,
            t.symbol(&r.tenant),
            r.next_hop
                .as_deref()
                .map_or(interner::NONE, |p| t.symbol(p)),
            t.peer_up_for(r),
        );
        want.hop_pos = h.hop_pos;
        assert_eq!(h, want, "hot record of {}", r.id);
        assert_eq!(t.find_slot(r.id.as_str()), Some(s), "by_id for {}", r.id);
        assert!(
            t.run(&r.capability, r.version).slots.contains(&s),
            "by_cap for {}",
            r.id
        );
        if let Lease::Until(d) = r.lease {
            let gen = t.slab[s as usize].gen;
            assert!(
                t.timers
                    .iter()
                    .any(|x| x.slot == s && x.gen == gen && x.deadline == d),
                "timer for {}",
                r.id
            );
        }
    }
    let mut indexed: Vec<u32> = t.by_cap.all_groups().flatten().copied().collect();
    for g in t.by_cap.all_groups() {
        assert!(
            g.windows(2)
                .all(|w| t.hot[w[0] as usize].version <= t.hot[w[1] as usize].version),
            "group order"
        );
        let name = &t.slab[g[0] as usize].route.as_ref().unwrap().capability;
        assert!(g.iter().all(|&s| t.slab[s as usize]
            .route
            .as_ref()
            .is_some_and(|r| r.capability == *name)));
    }
    indexed.sort_unstable();
    assert_eq!(
        indexed, live,
        "capability index holds exactly the live slots"
    );
    assert_eq!(t.by_id.len(), live.len(), "route_id index size");
    check_hop_index(t, &live);
    let mut with_schema: Vec<&str> = t
        .iter()
        .filter(|r| {
            r.contract
                .as_ref()
                .is_some_and(|c| c.input_schema.is_some())
        })
        .map(|r| &*r.capability)
        .collect();
    with_schema.sort_unstable();
    with_schema.dedup();
    assert_eq!(
        t.schema_capabilities().collect::<Vec<_>>(),
        with_schema,
        "schema index holds exactly the capabilities with schema routes"
    );
    if let Some(top) = t.timers.peek() {
        assert!(timer_valid(&t.slab, &top), "heap top is live");
    }
}

/// The per-peer index equals a scan of the slab: every next hop's list
/// holds exactly the live slots with that next hop, each at the position
/// its hot record says, and `paths_via` agrees with filtering `iter`.
fn check_hop_index(t: &RouteTable, live: &[u32]) {
    let mut hops: Vec<&str> = t.iter().filter_map(|r| r.next_hop.as_deref()).collect();
    hops.sort_unstable();
    hops.dedup();
    let mut indexed: Vec<&str> = t.next_hops().collect();
    indexed.sort_unstable();
    assert_eq!(indexed, hops, "next hops of the index = of the slab");
    for hop in hops {
        let sym = t.symbol(hop);
        let mut scan: Vec<u32> = live
            .iter()
            .copied()
            .filter(|&s| {
                t.slab[s as usize]
                    .route
                    .as_ref()
                    .unwrap()
                    .next_hop
                    .as_deref()
                    == Some(hop)
            })
            .collect();
        let list = t.by_hop.slots(sym);
        for (pos, &s) in list.iter().enumerate() {
            assert_eq!(
                t.hot[s as usize].hop_pos as usize, pos,
                "hop_pos of slot {s}"
            );
        }
        let mut got = list.to_vec();
        got.sort_unstable();
        scan.sort_unstable();
        assert_eq!(got, scan, "paths via {hop}");
        let mut via: Vec<&str> = t.paths_via(hop).map(|r| r.id.as_str()).collect();
        let mut want: Vec<&str> = t
            .iter()
            .filter(|r| r.next_hop.as_deref() == Some(hop))
            .map(|r| r.id.as_str())
            .collect();
        via.sort_unstable();
        want.sort_unstable();
        assert_eq!(via, want, "paths_via({hop})");
        assert_eq!(t.count_via(hop), want.len());
    }
}

/// A path to `base` learned from `hop` (id `base@hop`).
pub(crate) fn path(base: &str, hop: &str, cap: &str) -> Route {
    let mut r = route(base, cap, 1);
    r.id = RouteId::via(&r.id, hop).unwrap();
    r.source = RouteSource::Peer;
    r.origin = "agent://lab/remote".into();
    r.endpoint = format!("https://{hop}.example:7447").into();
    r.path = vec!["router-a".into(), hop.into()].into();
    r.next_hop = Some(hop.into());
    r.lease = Lease::Permanent;
    r
}

fn id(s: &str) -> RouteId {
    RouteId::new(s).unwrap()
}

#[test]
fn upsert_creates_then_updates_the_same_origin() {
    let mut t = RouteTable::new(10);
    assert_eq!(
        t.upsert(route("r1", "demo.echo", 1)),
        Ok(UpsertOutcome::Created)
    );
    let mut moved = route("r1", "demo.echo", 1);
    moved.endpoint = "http://192.0.2.11:9000/".into();
    assert_eq!(t.upsert(moved.clone()), Ok(UpsertOutcome::Updated));
    assert_eq!(t.upsert(moved), Ok(UpsertOutcome::Unchanged));
    assert_eq!(t.len(), 1);
    assert_eq!(
        &*t.get(&id("r1")).unwrap().endpoint,
        "http://192.0.2.11:9000/"
    );
}

/// Routes of one capability, tenant or next hop hold one string for it
/// between them, whichever route arrived first and whichever leaves; an
/// update keeps the shared strings.
#[test]
fn routes_of_one_name_share_its_string() {
    let mut t = RouteTable::new(10);
    let mut peer = route("p1", "demo.echo", 2);
    peer.source = RouteSource::Peer;
    peer.next_hop = Some("router-b".into());
    let mut peer2 = route("p2", "demo.echo", 2);
    peer2.source = RouteSource::Peer;
    peer2.next_hop = Some("router-b".into());
    for r in [
        route("r1", "demo.echo", 1),
        route("r2", "demo.echo", 1),
        peer,
        peer2,
    ] {
        t.upsert(r).unwrap();
    }
    fn shared(t: &RouteTable, a: &str, b: &str, field: fn(&Route) -> Option<&Text>) -> bool {
        let (a, b) = (t.get(&id(a)).unwrap(), t.get(&id(b)).unwrap());
        Text::ptr_eq(field(a).unwrap(), field(b).unwrap())
    }
    assert!(shared(&t, "r1", "r2", |r| Some(&r.capability)));
    assert!(
        shared(&t, "r1", "p2", |r| Some(&r.capability)),
        "across versions"
    );
    assert!(shared(&t, "r1", "p1", |r| Some(&r.tenant)));
    fn hop(r: &Route) -> Option<&Text> {
        r.next_hop.as_ref()
    }
    assert!(shared(&t, "p1", "p2", hop));
    // The first route leaves; the others still share, and a newcomer
    // gets their string.
    t.remove(&id("r1"));
    let mut moved = route("r2", "demo.echo", 1);
    moved.endpoint = "http://192.0.2.11:9000/".into();
    assert_eq!(t.upsert(moved), Ok(UpsertOutcome::Updated));
    t.upsert(route("r3", "demo.echo", 1)).unwrap();
    assert!(shared(&t, "r2", "r3", |r| Some(&r.capability)));
    assert!(shared(&t, "r2", "p1", |r| Some(&r.capability)));
    assert!(shared(&t, "r3", "p2", |r| Some(&r.tenant)));
    check_invariants(&t);
}

#[test]
fn another_origins_route_id_is_a_conflict_and_changes_nothing() {
    let mut t = RouteTable::new(10);
    t.upsert(route("r1", "demo.echo", 1)).unwrap();
    let gen = t.generation();
    let mut thief = route("r1", "demo.echo", 1);
    thief.origin = "agent://lab/mallory".into();
    assert_eq!(
        t.upsert(thief),
        Err(TableError::Conflict {
            route_id: id("r1"),
            existing_tenant: "lab".into(),
            existing_origin: "agent://lab/a".into()
        })
    );
    let mut other_tenant = route("r1", "demo.echo", 1);
    other_tenant.tenant = "ops".into();
    assert!(matches!(
        t.upsert(other_tenant),
        Err(TableError::Conflict { .. })
    ));
    assert_eq!(&*t.get(&id("r1")).unwrap().origin, "agent://lab/a");
    assert_eq!(t.generation(), gen);
}

#[test]
fn one_origin_may_hold_several_routes() {
    let mut t = RouteTable::new(10);
    for i in 0..3 {
        t.upsert(route(&format!("r{i}"), "demo.echo", 1)).unwrap();
    }
    assert_eq!(t.len(), 3);
    assert_eq!(t.candidates("demo.echo", 1).count(), 3);
}

#[test]
fn full_table_refuses_new_ids_but_accepts_updates() {
    let mut t = RouteTable::new(2);
    t.upsert(route("r1", "c", 1)).unwrap();
    t.upsert(route("r2", "c", 1)).unwrap();
    assert_eq!(
        t.upsert(route("r3", "c", 1)),
        Err(TableError::Full { max_routes: 2 })
    );
    let mut r1 = route("r1", "c", 1);
    r1.attrs.load_permille = 500;
    assert_eq!(t.upsert(r1), Ok(UpsertOutcome::Updated));
    t.remove(&id("r2")).unwrap();
    assert_eq!(t.upsert(route("r3", "c", 1)), Ok(UpsertOutcome::Created));
}

#[test]
fn version_zero_and_leased_static_routes_are_refused() {
    let mut t = RouteTable::new(10);
    assert_eq!(
        t.upsert(route("r1", "c", 0)),
        Err(TableError::VersionZero(id("r1")))
    );
    let mut s = route("s1", "c", 1);
    s.source = RouteSource::Static;
    assert_eq!(t.upsert(s.clone()), Err(TableError::LeasedStatic(id("s1"))));
    s.lease = Lease::Permanent;
    t.upsert(s).unwrap();
    assert_eq!(
        t.renew(&id("s1"), Lease::Until(Millis(5))),
        Err(TableError::LeasedStatic(id("s1")))
    );
    assert!(!t.is_empty() && t.next_deadline().is_none());
}

#[test]
fn lease_expires_exactly_at_its_deadline() {
    let mut t = RouteTable::new(10);
    t.upsert(route("r1", "c", 1)).unwrap();
    assert_eq!(t.next_deadline(), Some(Millis(30_000)));
    assert!(t.expire(Millis(29_999)).is_empty());
    assert_eq!(t.len(), 1);
    let gone = t.expire(Millis(30_000));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].id, id("r1"));
    assert!(t.is_empty());
    assert_eq!(t.next_deadline(), None);
    assert!(t.get(&id("r1")).is_none());
    assert_eq!(t.candidates("c", 1).count(), 0);
}

#[test]
fn static_routes_never_expire() {
    let mut t = RouteTable::new(10);
    let mut s = route("s1", "office.print", 1);
    s.source = RouteSource::Static;
    s.lease = Lease::Permanent;
    t.upsert(s).unwrap();
    assert!(t.expire(Millis(u64::MAX)).is_empty());
    assert_eq!(t.len(), 1);
}

#[test]
fn renewal_moves_the_deadline_and_the_old_timer_is_ignored() {
    let mut t = RouteTable::new(10);
    t.upsert(route("r1", "c", 1)).unwrap();
    t.renew(&id("r1"), Lease::Until(Millis(60_000))).unwrap();
    assert_eq!(t.next_deadline(), Some(Millis(60_000)));
    assert!(t.expire(Millis(30_000)).is_empty());
    assert!(t.expire(Millis(59_999)).is_empty());
    assert_eq!(t.expire(Millis(60_000)).len(), 1);
}

#[test]
fn renewing_an_unknown_route_is_not_found() {
    let mut t = RouteTable::new(10);
    assert_eq!(
        t.renew(&id("nope"), Lease::Until(Millis(1))),
        Err(TableError::NotFound(id("nope")))
    );
    assert_eq!(
        t.set_health(&id("nope"), false),
        Err(TableError::NotFound(id("nope")))
    );
}

#[test]
fn an_old_timer_never_expires_the_next_occupant_of_a_slot() {
    let mut t = RouteTable::new(10);
    t.upsert(route("r1", "c", 1)).unwrap();
    let first = t.slot_of(&id("r1")).unwrap();
    t.remove(&id("r1")).unwrap();
    let mut r2 = route("r2", "c", 1);
    r2.lease = Lease::Until(Millis(90_000));
    t.upsert(r2).unwrap();
    let second = t.slot_of(&id("r2")).unwrap();
    assert_eq!(first.index(), second.index());
    assert!(t.get_slot(first).is_none());
    assert!(t.expire(Millis(30_000)).is_empty());
    assert_eq!(t.next_deadline(), Some(Millis(90_000)));
}

#[test]
fn renewals_do_not_grow_the_timer_heap_without_bound() {
    let mut t = RouteTable::new(10);
    t.upsert(route("r1", "c", 1)).unwrap();
    for i in 0..10_000u64 {
        t.renew(&id("r1"), Lease::Until(Millis(30_000 + i)))
            .unwrap();
        assert!(t.timers.len() <= 2 * t.len() + 65);
    }
    assert_eq!(t.next_deadline(), Some(Millis(39_999)));
}

#[test]
fn expiry_returns_all_due_routes_in_deadline_order() {
    let mut t = RouteTable::new(10);
    for (i, d) in [(0, 300), (1, 100), (2, 200), (3, 400)] {
        let mut r = route(&format!("r{i}"), "c", 1);
        r.lease = Lease::Until(Millis(d));
        t.upsert(r).unwrap();
    }
    let gone: Vec<String> = t
        .expire(Millis(300))
        .iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(gone, ["r1", "r2", "r0"]);
    assert_eq!(t.next_deadline(), Some(Millis(400)));
}

#[test]
fn generation_moves_on_every_change_and_only_then() {
    let mut t = RouteTable::new(10);
    let mut g = t.generation();
    let mut step = |t: &RouteTable, changed: bool| {
        let now = t.generation();
        assert_eq!(now > g, changed, "generation {g} -> {now}");
        g = now;
    };
    t.upsert(route("r1", "c", 1)).unwrap();
    step(&t, true);
    t.upsert(route("r1", "c", 1)).unwrap();
    step(&t, false);
    t.renew(&id("r1"), Lease::Until(Millis(40_000))).unwrap();
    step(&t, true);
    t.set_health(&id("r1"), false).unwrap();
    step(&t, true);
    t.set_health(&id("r1"), false).unwrap();
    step(&t, false);
    t.set_peer_up("router-b", false);
    step(&t, true);
    t.set_peer_up("router-b", false);
    step(&t, false);
    t.remove(&id("r1")).unwrap();
    step(&t, true);
    t.upsert(route("r2", "c", 1)).unwrap();
    step(&t, true);
    t.expire(Millis(30_000));
    step(&t, true);
}

#[test]
fn changing_capability_or_version_moves_the_route_in_the_index() {
    let mut t = RouteTable::new(10);
    t.upsert(route("r1", "a", 1)).unwrap();
    t.upsert(route("r2", "a", 1)).unwrap();
    t.upsert(route("r1", "a", 2)).unwrap();
    assert_eq!(
        t.candidates("a", 1)
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>(),
        ["r2"]
    );
    assert_eq!(
        t.candidates("a", 2)
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>(),
        ["r1"]
    );
    t.upsert(route("r1", "b", 2)).unwrap();
    assert_eq!(t.candidates("a", 2).count(), 0);
    assert_eq!(t.candidates("b", 2).count(), 1);
    assert_eq!(t.capability_names(), 2);
    t.remove(&id("r2"));
    assert_eq!(t.capability_names(), 1);
}

#[test]
fn versions_of_one_name_are_told_apart() {
    let mut t = RouteTable::new(10);
    for (i, v) in [3, 1, 2, 1, 3, 3].into_iter().enumerate() {
        t.upsert(route(&format!("r{i}"), "x", v)).unwrap();
    }
    let run = t.run("x", 3);
    assert_eq!((run.slots.len(), run.other_versions), (3, 3));
    assert_eq!(t.run("x", 1).slots.len(), 2);
    assert_eq!(t.run("x", 4).slots.len(), 0);
    assert_eq!(t.run("x", 4).other_versions, 6);
    assert_eq!(t.run("y", 1).other_versions, 0);
}

#[test]
fn peer_down_marks_its_routes_and_later_arrivals() {
    let mut t = RouteTable::new(10);
    let mut via_b = route("p1", "c", 1);
    via_b.source = RouteSource::Peer;
    via_b.next_hop = Some("router-b".into());
    t.upsert(via_b.clone()).unwrap();
    t.upsert(route("l1", "c", 1)).unwrap();
    let p1 = t.slot_of(&id("p1")).unwrap();
    let l1 = t.slot_of(&id("l1")).unwrap();
    t.set_peer_up("router-b", false);
    assert!(!t.is_peer_up(p1));
    assert!(t.is_peer_up(l1));
    via_b.id = id("p2");
    t.upsert(via_b).unwrap();
    assert!(!t.is_peer_up(t.slot_of(&id("p2")).unwrap()));
    assert_eq!(t.peers_down().collect::<Vec<_>>(), ["router-b"]);
    t.set_peer_up("router-b", true);
    assert!(t.is_peer_up(p1));
    assert_eq!(t.peers_down().count(), 0);
}

#[test]
fn memory_counts_index_and_timers_separately() {
    let mut t = RouteTable::new(1000);
    let empty = t.memory();
    assert_eq!((empty.index_bytes, empty.timer_bytes), (0, 0));
    for i in 0..100 {
        t.upsert(route(&format!("r{i}"), &format!("cap{}", i / 10), 1))
            .unwrap();
    }
    let m = t.memory();
    assert_eq!(m.routes, 100);
    // 100 slot numbers in groups plus two hash tables: more than the bare
    // 400 bytes of slots, far less than the routes themselves.
    assert!(m.index_bytes > 400 && m.index_bytes < 100 * 32, "{m:?}");
    assert!(m.timer_bytes >= 100 * 16, "{m:?}");
    for i in 0..100 {
        t.remove(&id(&format!("r{i}"))).unwrap();
    }
    assert_eq!(t.capability_names(), 0);
}

/// The issue's size goal: at most 16 index bytes per route with 10
/// candidates per capability (names shaped like the select bench's).
#[test]
fn index_stays_within_16_bytes_per_route_at_10_candidates() {
    for routes in [1_000usize, 10_000, 50_000] {
        let caps = routes / 10;
        let mut t = RouteTable::new(routes);
        for i in 0..routes {
            t.upsert(route(
                &format!("rt-{i:06}"),
                &format!("svc{}.op", i % caps),
                1,
            ))
            .unwrap();
        }
        let per_route = t.memory().index_bytes as f64 / routes as f64;
        assert!(per_route <= 16.0, "{routes} routes: {per_route:.2} B/route");
    }
}

/// The same goal with the select bench's mix: a quarter of the routes are
/// peer paths over 8 next hops, so the per-peer index is in the figure.
#[test]
fn index_stays_within_16_bytes_per_route_with_a_quarter_peer_paths() {
    for routes in [1_000usize, 10_000, 50_000] {
        let caps = routes / 10;
        let mut t = RouteTable::new(routes);
        for i in 0..routes {
            let cap = format!("svc{}.op", i % caps);
            let r = if i % 4 == 0 {
                path(&format!("rt-{i:06}"), &format!("router-{}", i % 8), &cap)
            } else {
                route(&format!("rt-{i:06}"), &cap, 1)
            };
            t.upsert(r).unwrap();
        }
        let per_route = t.memory().index_bytes as f64 / routes as f64;
        assert!(per_route <= 16.0, "{routes} routes: {per_route:.2} B/route");
    }
}

#[test]
fn random_churn_keeps_every_invariant() {
    // splitmix64, so the sequence is fixed and failures reproduce.
    let mut state = 99u64;
    let mut next = move |n: u64| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    };
    let mut t = RouteTable::new(40);
    let mut now = 0u64;
    for step in 0..4_000 {
        let mut rid = format!("r{}", next(60));
        if next(3) == 0 {
            rid = format!("{rid}@router-{}", next(3));
        }
        match next(8) {
            0..=2 => {
                let mut r = route("x", &format!("c{}", next(4)), 1 + next(3) as u32);
                r.id = RouteId::parse_table_id(&rid).unwrap();
                r.lease = Lease::Until(Millis(now + 1 + next(500)));
                r.next_hop = r.id.next_hop().map(Into::into);
                if r.next_hop.is_none() && next(4) == 0 {
                    // A next hop without a path id (a relay route, say).
                    r.next_hop = Some(format!("router-{}", next(3)).into());
                }
                if next(5) == 0 {
                    r.tenant = "ops".into();
                }
                let _ = t.upsert(r);
            }
            3 => {
                t.remove(&RouteId::parse_table_id(&rid).unwrap());
            }
            4 => {
                let rid = RouteId::parse_table_id(&rid).unwrap();
                let _ = t.renew(&rid, Lease::Until(Millis(now + next(500))));
            }
            6 if next(4) == 0 => {
                let hop = format!("router-{}", next(3));
                let before = t.count_via(&hop);
                let len = t.len();
                let gone = t.remove_paths_via(&hop);
                assert_eq!(gone.len(), before);
                assert!(gone.iter().all(|r| r.next_hop.as_deref() == Some(&*hop)));
                assert_eq!(t.len(), len - before);
            }
            5 => {
                now += next(50);
                for r in t.expire(Millis(now)) {
                    assert!(!r.lease.live_at(Millis(now)), "expired early: {r:?}");
                }
                assert!(
                    t.iter().all(|r| r.lease.live_at(Millis(now))),
                    "live route left behind at step {step}"
                );
            }
            _ => {
                t.set_peer_up(&format!("router-{}", next(3)), next(2) == 0);
            }
        }
        check_invariants(&t);
        assert!(t.timers.len() <= 2 * t.len() + 65);
    }
}

#[test]
fn peer_paths_are_entries_of_their_own_indexed_by_next_hop() {
    let mut t = RouteTable::new(100);
    t.upsert(route("svc", "c", 1)).unwrap();
    t.upsert(path("svc", "router-b", "c")).unwrap();
    t.upsert(path("svc", "router-c", "c")).unwrap();
    t.upsert(path("other", "router-b", "c")).unwrap();
    assert_eq!(t.len(), 4, "one local route and three paths");
    assert_eq!(t.candidates("c", 1).count(), 4);
    let mut via_b: Vec<&str> = t.paths_via("router-b").map(|r| r.id.as_str()).collect();
    via_b.sort_unstable();
    assert_eq!(via_b, ["other@router-b", "svc@router-b"]);
    assert_eq!(t.count_via("router-x"), 0);
    assert_eq!(t.paths_via("router-x").count(), 0);
    check_invariants(&t);
    // Down: only router-b's paths flip; a repeat changes nothing.
    let g = t.generation();
    assert!(t.set_peer_up("router-b", false));
    assert!(!t.set_peer_up("router-b", false));
    assert_eq!(t.generation(), g + 1);
    let up = |t: &RouteTable, s: &str| {
        t.is_peer_up(t.slot_of(&RouteId::parse_table_id(s).unwrap()).unwrap())
    };
    assert!(!up(&t, "svc@router-b") && !up(&t, "other@router-b"));
    assert!(up(&t, "svc@router-c") && up(&t, "svc"));
    check_invariants(&t);
    // Removing a peer's paths leaves the others and the local route.
    let mut gone: Vec<String> = t
        .remove_paths_via("router-b")
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    gone.sort_unstable();
    assert_eq!(gone, ["other@router-b", "svc@router-b"]);
    assert!(t.remove_paths_via("router-b").is_empty());
    assert_eq!(t.len(), 2);
    assert_eq!(t.next_hops().collect::<Vec<_>>(), ["router-c"]);
    check_invariants(&t);
    // Changing a route's next hop moves it between lists.
    let mut moved = path("svc", "router-c", "c");
    moved.next_hop = Some("router-d".into());
    t.upsert(moved).unwrap();
    assert_eq!(t.count_via("router-c"), 0);
    assert_eq!(t.count_via("router-d"), 1);
    check_invariants(&t);
}

/// A peer with no paths costs nothing; each path costs one slot number
/// in its peer's list (its position rides in the hot record's padding).
#[test]
fn the_per_peer_index_costs_a_slot_number_per_path() {
    let mut t = RouteTable::new(20_000);
    for i in 0..10_000 {
        t.upsert(route(&format!("l{i}"), &format!("svc{}", i % 1000), 1))
            .unwrap();
    }
    let local = t.memory().index_bytes;
    for i in 0..10_000 {
        t.upsert(path(
            &format!("p{i}"),
            "router-b",
            &format!("svc{}", i % 1000),
        ))
        .unwrap();
    }
    let both = t.memory().index_bytes;
    let hop_list = t.by_hop.allocated_bytes();
    assert!(
        hop_list <= 10_000 * 4 * 2 + 1024,
        "10k paths of one peer: {hop_list} bytes"
    );
    assert!(both > local + hop_list, "the figure includes the list");
    assert_eq!(std::mem::size_of::<Hot>(), 64, "hop_pos fits the line");
}

#[test]
fn storage_is_given_back_after_a_transient_flood_of_paths() {
    let mut t = RouteTable::new(100_000);
    t.upsert(route("local", "c", 1)).unwrap();
    let base = t.memory();
    for i in 0..10_000 {
        t.upsert(path(&format!("p{i}"), "router-b", "c")).unwrap();
    }
    let local = t.slot_of(&id("local")).unwrap();
    let flood = t
        .slot_of(&RouteId::parse_table_id("p9999@router-b").unwrap())
        .unwrap();
    let peak = t.memory();
    assert!(peak.slab_bytes > 100 * base.slab_bytes.max(1));
    // The session ends: every path goes, and with them the storage.
    assert_eq!(t.remove_paths_via("router-b").len(), 10_000);
    let after = t.memory();
    assert!(
        after.slab_bytes * 100 < peak.slab_bytes,
        "{after:?} vs {peak:?}"
    );
    assert!(
        after.hot_bytes * 100 < peak.hot_bytes,
        "{after:?} vs {peak:?}"
    );
    assert!(
        after.index_bytes * 20 < peak.index_bytes,
        "{after:?} vs {peak:?}"
    );
    check_invariants(&t);
    // Handles stay valid; a handle to a given-back cell never resolves,
    // also not once a new route takes its index.
    assert_eq!(t.get_slot(local).map(|r| r.id.as_str()), Some("local"));
    for i in 0..10_000 {
        t.upsert(path(&format!("q{i}"), "router-c", "c")).unwrap();
    }
    let reused = t
        .slot_of(&RouteId::parse_table_id("q9999@router-c").unwrap())
        .unwrap();
    assert_eq!(reused.index(), flood.index());
    assert!(t.get_slot(flood).is_none());
    assert!(t.get_slot(reused).is_some());
    check_invariants(&t);
}

#[test]
fn a_table_churning_around_one_size_is_not_compacted_again_and_again() {
    let mut t = RouteTable::new(100_000);
    for i in 0..4_000 {
        t.upsert(route(&format!("r{i}"), "c", 1)).unwrap();
    }
    // Down to a quarter: compacted once (the slab keeps the cells up to
    // the last route held: slots never move).
    for i in 1_000..4_000 {
        t.remove(&id(&format!("r{i}"))).unwrap();
    }
    let compacted = t.memory();
    assert!(compacted.slab_bytes < 2_000 * std::mem::size_of::<Slot>());
    // Churn below that: no new compaction until the table halves again
    // (the remaining cells are reused, nothing shrinks or grows).
    for round in 0..50 {
        let name = format!("x{round}");
        t.upsert(route(&name, "c", 1)).unwrap();
        t.remove(&id(&name)).unwrap();
        assert!(!t.compact_if_sparse(), "round {round}");
    }
    // (The free list may have grown by a few bytes.)
    assert!(t.memory().slab_bytes <= compacted.slab_bytes + 64);
    check_invariants(&t);
}

fn with_schema(mut r: Route) -> Route {
    r.contract = Some(Box::new(crate::route::Contract {
        effect: crate::route::Effect::Read,
        idempotent: true,
        input_schema: Some(r#"{"type":"object"}"#.into()),
        description: None,
    }));
    r
}

/// Input: schema-bearing routes added, updated (schema dropped, capability
/// renamed), removed and expired among many routes without a schema.
/// Output: `schema_capabilities` names exactly the capabilities that have
/// a schema route left, and `routes_of` yields only that capability's
/// routes (all versions) — what the gateway's catalog reads instead of
/// walking the table.
#[test]
fn the_schema_index_follows_every_change() {
    let mut t = RouteTable::new(10_000);
    for i in 0..1000 {
        t.upsert(route(&format!("plain{i}"), &format!("cap.{i}"), 1))
            .unwrap();
    }
    assert_eq!(t.schema_capabilities().count(), 0);
    t.upsert(with_schema(route("s1", "tool.a", 1))).unwrap();
    t.upsert(with_schema(route("s2", "tool.a", 2))).unwrap();
    let mut short = with_schema(route("s3", "tool.b", 1));
    short.lease = Lease::Until(Millis(100));
    t.upsert(short).unwrap();
    assert_eq!(
        t.schema_capabilities().collect::<Vec<_>>(),
        ["tool.a", "tool.b"]
    );
    let ids: Vec<&str> = t.routes_of("tool.a").map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&"s1") && ids.contains(&"s2"));
    // An update that drops the schema counts the route out.
    t.upsert(route("s1", "tool.a", 1)).unwrap();
    assert_eq!(
        t.schema_capabilities().collect::<Vec<_>>(),
        ["tool.a", "tool.b"]
    );
    t.upsert(route("s2", "tool.a", 2)).unwrap();
    assert_eq!(t.schema_capabilities().collect::<Vec<_>>(), ["tool.b"]);
    // A rename moves it; expiry and removal count it out.
    t.upsert(with_schema(route("s1", "tool.c", 1))).unwrap();
    t.expire(Millis(100));
    assert_eq!(t.schema_capabilities().collect::<Vec<_>>(), ["tool.c"]);
    check_invariants(&t);
    t.remove(&id("s1"));
    assert_eq!(t.schema_capabilities().count(), 0);
    check_invariants(&t);
}

/// The granted lease length lives in the route's slab cell: kept across
/// updates, gone with the route, never inherited by the next occupant of
/// its cell, and free (the cell's padding held it).
#[test]
fn the_lease_length_lives_and_ends_with_its_route() {
    let mut t = RouteTable::new(10);
    t.upsert(route("a", "cap", 1)).unwrap();
    assert_eq!(t.lease_secs(&id("a")), Some(0));
    assert!(t.set_lease_secs(&id("a"), 300));
    let mut renewed = route("a", "cap", 1);
    renewed.lease = Lease::Until(Millis(60_000));
    assert_eq!(t.upsert(renewed).unwrap(), UpsertOutcome::Updated);
    assert_eq!(t.lease_secs(&id("a")), Some(300));
    assert_eq!(
        t.iter_with_lease_secs()
            .map(|(r, s)| (r.id.as_str(), s))
            .collect::<Vec<_>>(),
        [("a", 300)]
    );
    t.remove(&id("a")).unwrap();
    assert_eq!(t.lease_secs(&id("a")), None);
    assert!(!t.set_lease_secs(&id("a"), 300));
    // The freed cell is taken by the next route, without the length.
    t.upsert(route("b", "cap", 1)).unwrap();
    assert_eq!(t.slab.len(), 1);
    assert_eq!(t.lease_secs(&id("b")), Some(0));
    assert_eq!(
        std::mem::size_of::<Slot>(),
        std::mem::size_of::<Option<Route>>() + 8
    );
}
