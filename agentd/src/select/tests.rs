//! Selection behaviour with time as an input: policy decisions (deny is
//! final), every rejection reason in order, ranking and tie-breaks, the
//! saturation boundary, and a randomized comparison of the indexed lookup
//! against the full-scan reference.

use super::*;
use crate::policy::{Action, Pattern, Rule};
use crate::route::{Lease, OriginProof, RouteId, RouteSource};
use crate::score::Weights;
use crate::table::tests::route;

const NOW: Millis = Millis(1_000);

fn table(routes: impl IntoIterator<Item = Route>) -> RouteTable {
    let mut t = RouteTable::new(10_000);
    for r in routes {
        t.upsert(r).unwrap();
    }
    t
}

fn q(cap: &str) -> Query<'_> {
    Query::new(cap, 1, "lab")
}

fn allow_all() -> Policy {
    Policy::default()
}

fn policy(rules: Vec<Rule>) -> Policy {
    Policy::new(rules, Action::Allow, Weights::default()).unwrap()
}

fn winner(res: Result<Selected<'_>, Refusal<'_>>) -> (String, u64) {
    let s = res.expect("a route");
    (s.route.id.to_string(), s.score)
}

#[test]
fn lowest_score_wins() {
    let mut slow = route("a-slow", "demo.echo", 1);
    slow.attrs.latency_ms = 50;
    let fast = route("b-fast", "demo.echo", 1);
    let t = table([slow, fast]);
    // 5 ms * 1000 + (100 - 90) * 5000 = 55_000.
    assert_eq!(
        winner(select(&t, &allow_all(), &q("demo.echo"), NOW)),
        ("b-fast".into(), 55_000)
    );
}

#[test]
fn equal_scores_break_ties_by_route_id_whatever_the_insertion_order() {
    let ids = ["r-2", "r-10", "r-1", "r-3"];
    let t1 = table(ids.iter().map(|i| route(i, "c", 1)));
    let t2 = table(ids.iter().rev().map(|i| route(i, "c", 1)));
    for t in [&t1, &t2] {
        assert_eq!(winner(select(t, &allow_all(), &q("c"), NOW)).0, "r-1");
        let order: Vec<String> = select_ordered(t, &allow_all(), &q("c"), NOW)
            .unwrap()
            .iter()
            .map(|s| s.route.id.to_string())
            .collect();
        assert_eq!(order, ["r-1", "r-10", "r-2", "r-3"]);
    }
}

#[test]
fn saturated_scores_still_rank_and_tie_by_route_id() {
    let fits = u64::MAX / 1000;
    let mut edge = route("z-edge", "c", 1);
    edge.attrs = crate::route::Attributes {
        latency_ms: fits,
        cost_micros: 0,
        load_permille: 0,
        trust: 100,
    };
    let mut over_b = route("b-over", "c", 1);
    over_b.attrs = crate::route::Attributes {
        latency_ms: fits + 1,
        ..edge.attrs
    };
    let mut over_a = route("a-over", "c", 1);
    over_a.attrs = crate::route::Attributes {
        latency_ms: u64::MAX,
        ..edge.attrs
    };
    let t = table([over_b, edge, over_a]);
    let p = allow_all();
    let ranked = select_ordered(&t, &p, &q("c"), NOW).unwrap();
    let got: Vec<(String, u64)> = ranked
        .iter()
        .map(|s| (s.route.id.to_string(), s.score))
        .collect();
    assert_eq!(
        got,
        [
            ("z-edge".into(), fits * 1000),
            ("a-over".into(), u64::MAX),
            ("b-over".into(), u64::MAX)
        ]
    );
}

#[test]
fn a_selected_deny_is_final_even_when_a_lower_rule_would_allow() {
    let t = table([route("r1", "admin.reboot", 1)]);
    let deny = Rule {
        capability: Pattern::parse("admin.*").unwrap(),
        ..Rule::new("10-deny", 100, Action::Deny)
    };
    let allow = Rule::new("20-allow", 50, Action::Allow);
    let p = policy(vec![allow, deny]);
    match select(&t, &p, &q("admin.reboot"), NOW) {
        Err(Refusal::Denied(Denial::Rule(r))) => assert_eq!(&*r.id, "10-deny"),
        other => panic!("expected deny, got {other:?}"),
    }
    assert!(matches!(
        select_ordered(&t, &p, &q("admin.reboot"), NOW),
        Err(Refusal::Denied(_))
    ));
    let e = explain(&t, &p, &q("admin.reboot"), NOW);
    assert_eq!(e.matched_rule.map(|r| &*r.id), Some("10-deny"));
    assert!(e.ranked.is_empty());
    assert_eq!(e.rejections.total(), 0);
}

#[test]
fn a_deny_with_equal_priority_wins_only_with_the_smaller_id() {
    let t = table([route("r1", "c", 1)]);
    let p = policy(vec![
        Rule::new("a-deny", 5, Action::Deny),
        Rule::new("b-allow", 5, Action::Allow),
    ]);
    assert!(matches!(
        select(&t, &p, &q("c"), NOW),
        Err(Refusal::Denied(Denial::Rule(_)))
    ));
    let p = policy(vec![
        Rule::new("b-deny", 5, Action::Deny),
        Rule::new("a-allow", 5, Action::Allow),
    ]);
    assert!(select(&t, &p, &q("c"), NOW).is_ok());
}

#[test]
fn default_deny_and_invalid_policy_refuse_everything() {
    let t = table([route("r1", "c", 1)]);
    let p = Policy::new(vec![], Action::Deny, Weights::default()).unwrap();
    assert_eq!(
        select(&t, &p, &q("c"), NOW),
        Err(Refusal::Denied(Denial::DefaultAction))
    );
    let p = Policy::invalid("rule 'x': bad priority");
    assert_eq!(
        select(&t, &p, &q("c"), NOW),
        Err(Refusal::Denied(Denial::PolicyInvalid(
            "rule 'x': bad priority"
        )))
    );
}

#[test]
fn the_same_formula_applies_with_or_without_a_matched_rule() {
    let mut far = route("far", "c", 1);
    far.attrs = crate::route::Attributes {
        latency_ms: 40,
        cost_micros: 2500,
        load_permille: 300,
        trust: 70,
    };
    far.path = vec!["router-c".into(), "router-b".into()].into();
    let t = table([far]);
    let bare = winner(select(&t, &allow_all(), &q("c"), NOW));
    let ruled = winner(select(
        &t,
        &policy(vec![Rule::new("any", 1, Action::Allow)]),
        &q("c"),
        NOW,
    ));
    assert_eq!(bare, ("far".into(), 240_025));
    assert_eq!(ruled, bare);
}

#[test]
fn rule_weights_and_preferred_peer_penalty_change_the_ranking() {
    let local = route("local", "c", 1);
    let mut via_b = route("via-b", "c", 1);
    via_b.source = RouteSource::Peer;
    via_b.next_hop = Some("router-b".into());
    via_b.path = vec!["router-b".into()].into();
    let t = table([local, via_b]);
    assert_eq!(winner(select(&t, &allow_all(), &q("c"), NOW)).0, "local");
    let mut prefer_b = Rule::new("prefer-b", 1, Action::Allow);
    prefer_b.preferred_peer = Some("router-b".into());
    prefer_b.nonpreferred_penalty = 50_000;
    // local: 55_000 + 50_000; via-b: 55_000 + 10_000 (one hop).
    assert_eq!(
        winner(select(&t, &policy(vec![prefer_b]), &q("c"), NOW)),
        ("via-b".into(), 65_000)
    );
}

#[test]
fn lease_stops_eligibility_at_the_deadline_without_calling_expire() {
    let t = table([route("r1", "c", 1)]);
    assert!(select(&t, &allow_all(), &q("c"), Millis(29_999)).is_ok());
    assert_eq!(
        select(&t, &allow_all(), &q("c"), Millis(30_000)),
        Err(Refusal::NoRoute(Reject::LeaseExpired))
    );
}

/// A route, a policy and a query such that the route fails exactly
/// `reason` (and passes every earlier filter).
fn failing(reason: Reject) -> (Route, Policy, Query<'static>) {
    let mut r = route("r1", "c", 1);
    r.source = RouteSource::Peer;
    r.next_hop = Some("router-b".into());
    r.path = vec!["router-b".into()].into();
    let mut query = q("c");
    let mut rule = Rule::new("rule", 1, Action::Allow);
    let c = &mut rule.constraints;
    match reason {
        Reject::CapabilityVersion => r.version = 2,
        Reject::TargetAgent => query.target_agent = Some("agent://lab/other"),
        Reject::TenantAccess => r.tenant = "ops".into(),
        Reject::LeaseExpired => r.lease = Lease::Until(NOW),
        Reject::Unhealthy => r.healthy = false,
        Reject::PeerDown => {} // set on the table by the caller
        Reject::OriginDisputed => r.disputed = true,
        Reject::Region => c.region = Some("eu".into()),
        Reject::MaxLatency => c.max_latency_ms = Some(4),
        Reject::MaxCost => {
            r.attrs.cost_micros = 10;
            c.max_cost = Some(9);
        }
        Reject::MaxLoad => {
            r.attrs.load_permille = 10;
            c.max_load = Some(9);
        }
        Reject::MinTrust => c.min_trust = Some(91),
        Reject::MinProof => {
            r.proof = OriginProof::Bootstrap;
            c.min_proof = Some(OriginProof::Static);
        }
        Reject::MaxHops => c.max_hops = Some(0),
        Reject::SourceNotPermitted => {
            c.sources = [RouteSource::Local, RouteSource::Static]
                .into_iter()
                .collect()
        }
        Reject::RequiredPeer => c.required_peer = Some("router-c".into()),
        Reject::DeniedPeer => c.denied_peer = Some("router-b".into()),
        Reject::EndpointPrefix => c.endpoint_prefix = Some("https://".into()),
    }
    (r, policy(vec![rule]), query)
}

#[test]
fn every_rejection_reason_is_reported_and_counted() {
    for reason in Reject::ALL {
        let (r, p, query) = failing(reason);
        let mut t = table([r]);
        if reason == Reject::PeerDown {
            t.set_peer_up("router-b", false);
        }
        assert_eq!(
            select(&t, &p, &query, NOW),
            Err(Refusal::NoRoute(reason)),
            "{reason}"
        );
        assert_eq!(
            scan::select(&t, &p, &query, NOW),
            Err(Refusal::NoRoute(reason)),
            "{reason}"
        );
        let e = explain(&t, &p, &query, NOW);
        assert_eq!(e.outcome, Err(Refusal::NoRoute(reason)));
        assert_eq!(e.rejections.get(reason), 1, "{reason}");
        assert_eq!(e.rejections.total(), 1, "{reason}");
        // The unmodified route passes every filter.
        let (ok, p, _) = failing(Reject::PeerDown);
        assert!(select(&table([ok]), &p, &q("c"), NOW).is_ok());
    }
}

#[test]
fn unknown_capability_is_a_capability_version_miss_with_nothing_counted() {
    let t = table([route("r1", "c", 1)]);
    let p = allow_all();
    let e = explain(&t, &p, &q("nope"), NOW);
    assert_eq!(e.outcome, Err(Refusal::NoRoute(Reject::CapabilityVersion)));
    assert_eq!(e.rejections.total(), 0);
}

#[test]
fn tenant_access_lists_admit_other_tenants_and_restrict_sources() {
    let mut shared = route("shared", "c", 1);
    shared.tenant = "ops".into();
    shared.access.allowed_tenants = vec!["lab".into()];
    let mut open = route("open", "c", 1);
    open.tenant = "ops".into();
    open.access.allowed_tenants = vec!["*".into()];
    let mut picky = route("picky", "c", 1);
    picky.access.allowed_sources = vec!["agent://lab/caller".into()];
    let t = table([shared, open, picky]);
    let ids = |query: &Query<'_>| -> Vec<String> {
        select_ordered(&t, &allow_all(), query, NOW)
            .unwrap()
            .iter()
            .map(|s| s.route.id.to_string())
            .collect()
    };
    assert_eq!(ids(&q("c")), ["open", "shared"]);
    let with_source = Query {
        source: Some("agent://lab/caller"),
        ..q("c")
    };
    assert_eq!(ids(&with_source), ["open", "picky", "shared"]);
    let stranger = Query::new("c", 1, "guest");
    assert_eq!(ids(&stranger), ["open"]);
}

#[test]
fn no_route_names_the_furthest_filter_reached_and_explain_counts_each() {
    let mut expired = route("a", "c", 1);
    expired.lease = Lease::Until(NOW);
    let mut sick = route("b", "c", 1);
    sick.healthy = false;
    let mut foreign = route("d", "c", 1);
    foreign.tenant = "ops".into();
    let t = table([expired, sick, foreign, route("v2", "c", 2)]);
    let p = allow_all();
    let e = explain(&t, &p, &q("c"), NOW);
    assert_eq!(e.outcome, Err(Refusal::NoRoute(Reject::Unhealthy)));
    let counts: Vec<(Reject, u32)> = e.rejections.iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(
        counts,
        [
            (Reject::CapabilityVersion, 1),
            (Reject::TenantAccess, 1),
            (Reject::LeaseExpired, 1),
            (Reject::Unhealthy, 1)
        ]
    );
}

#[test]
fn explain_ranks_every_eligible_route_and_names_the_rule() {
    let mut slow = route("slow", "c", 1);
    slow.attrs.latency_ms = 500;
    let t = table([slow, route("fast", "c", 1)]);
    let p = policy(vec![Rule::new("lab-rule", 3, Action::Allow)]);
    let e = explain(&t, &p, &q("c"), NOW);
    assert_eq!(e.matched_rule.map(|r| &*r.id), Some("lab-rule"));
    let ranked: Vec<(String, u64)> = e
        .ranked
        .iter()
        .map(|s| (s.route.id.to_string(), s.score))
        .collect();
    assert_eq!(ranked, [("fast".into(), 55_000), ("slow".into(), 550_000)]);
    assert_eq!(
        e.outcome.map(|s| s.route.id.to_string()),
        Ok("fast".to_string())
    );
}

// ===== randomized index-vs-scan comparison =====

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len() as u64) as usize]
}

fn random_route(rng: &mut Rng, i: usize) -> Route {
    let mut r = route(
        &format!("r{:03}", rng.below(400)),
        &format!("cap{}", rng.below(6)),
        1 + rng.below(2) as u32,
    );
    r.tenant = pick(rng, &["lab", "ops"]).into();
    r.origin = format!("agent://{}/a{}", r.tenant, i % 3).into();
    r.region = pick(rng, &["local", "eu"]).into();
    if rng.below(4) == 0 {
        r.endpoint = format!("https://192.0.2.{}/x", rng.below(9)).into();
    }
    r.attrs.latency_ms = rng.below(4) * 10;
    r.attrs.cost_micros = rng.below(3) * 1000;
    r.attrs.trust = 80 + rng.below(30);
    r.attrs.load_permille = if rng.below(10) == 0 {
        u64::MAX
    } else {
        rng.below(3) * 100
    };
    r.lease = if rng.below(10) == 0 {
        Lease::Permanent
    } else {
        Lease::Until(Millis(rng.below(2_000)))
    };
    if r.lease == Lease::Permanent {
        r.source = RouteSource::Static;
    }
    r.healthy = rng.below(8) != 0;
    if rng.below(3) == 0 {
        r.source = pick_source(rng);
        r.next_hop = Some(pick(rng, &["router-b", "router-c", "router-d"]).into());
        r.path = (0..1 + rng.below(3))
            .map(|_| r.next_hop.as_deref().unwrap().into())
            .collect();
        r.lease = Lease::Until(Millis(rng.below(2_000)));
    }
    match rng.below(8) {
        0 => r.access.allowed_tenants = vec!["*".into()],
        1 => r.access.allowed_tenants = vec!["guest".into(), "ops".into()],
        2 => r.access.allowed_sources = vec!["agent://lab/c1".into()],
        3 => r.access.allowed_sources = vec!["*".into()],
        _ => {}
    }
    r.proof = OriginProof::ALL[rng.below(4) as usize];
    r.disputed = rng.below(10) == 0;
    r
}

fn pick_source(rng: &mut Rng) -> RouteSource {
    [RouteSource::Peer, RouteSource::Relay][rng.below(2) as usize]
}

/// An allow rule with each constraint present at random.
fn random_rule(rng: &mut Rng, id: &str, priority: i64) -> Rule {
    let mut r = Rule::new(id, priority, Action::Allow);
    r.tenant = Pattern::parse(pick(rng, &["*", "lab", "ops"])).unwrap();
    r.capability = Pattern::parse(pick(rng, &["*", "cap1", "cap2", "cap3"])).unwrap();
    r.source = Pattern::parse(pick(rng, &["*", "*", "agent://lab/c1"])).unwrap();
    let maybe = |rng: &mut Rng| rng.below(3) == 0;
    let c = &mut r.constraints;
    if maybe(rng) {
        c.region = Some(pick(rng, &["local", "eu", "nowhere"]).into());
    }
    if maybe(rng) {
        c.max_latency_ms = Some(rng.below(4) * 10);
    }
    if maybe(rng) {
        c.max_cost = Some(rng.below(3) * 1000);
    }
    if maybe(rng) {
        c.max_load = Some(rng.below(3) * 100);
    }
    if maybe(rng) {
        c.min_trust = Some(85 + rng.below(20));
    }
    if maybe(rng) {
        c.min_proof = Some(OriginProof::ALL[rng.below(4) as usize]);
    }
    if maybe(rng) {
        c.max_hops = Some(rng.below(3));
    }
    if maybe(rng) {
        c.sources = [RouteSource::Local, pick_source(rng)].into_iter().collect();
    }
    if maybe(rng) {
        c.required_peer = Some(pick(rng, &["router-b", "router-c", "router-x"]).into());
    }
    if maybe(rng) {
        c.denied_peer = Some(pick(rng, &["router-b", "router-c", "router-x"]).into());
    }
    if maybe(rng) {
        c.endpoint_prefix = Some(pick(rng, &["http://", "https://"]).into());
    }
    if maybe(rng) {
        r.preferred_peer = Some(pick(rng, &["router-b", "router-c", "router-x"]).into());
        r.nonpreferred_penalty = rng.below(3) * 7_000;
    }
    if maybe(rng) {
        r.weights.w_latency = u64::MAX / 2;
    }
    r
}

#[test]
fn indexed_selection_equals_the_full_scan_on_random_tables() {
    let mut rng = Rng(7);
    // (routes, no route, denied): the comparison must see all three.
    let mut seen = [0u32; 3];
    let mut reasons = RejectionCounts::default();
    for round in 0..60 {
        let mut rules: Vec<Rule> = (0..1 + rng.below(4))
            .map(|k| {
                let priority = rng.below(5) as i64;
                random_rule(&mut rng, &format!("rule{k}"), priority)
            })
            .collect();
        rules.push(Rule {
            capability: Pattern::parse("cap5").unwrap(),
            ..Rule::new("deny5", 9, Action::Deny)
        });
        let p = policy(rules);
        let mut t = RouteTable::new(10_000);
        for i in 0..(round * 8) {
            // Conflicts (same id, other origin) are expected and skipped.
            let _ = t.upsert(random_route(&mut rng, i));
        }
        for _ in 0..rng.below(30) {
            let _ = t.remove(&RouteId::new(&format!("r{:03}", rng.below(400))).unwrap());
        }
        for _ in 0..rng.below(20) {
            let victim = RouteId::new(&format!("r{:03}", rng.below(400))).unwrap();
            let _ = t.renew(&victim, Lease::Until(Millis(rng.below(2_000))));
            let _ = t.set_health(&victim, rng.below(2) == 0);
        }
        t.expire(Millis(rng.below(500)));
        t.set_peer_up("router-b", rng.below(2) == 0);
        t.set_peer_up("router-d", rng.below(2) == 0);
        crate::table::tests::check_invariants(&t);
        for _ in 0..80 {
            let cap = format!("cap{}", rng.below(7));
            let tenant = pick(&mut rng, &["lab", "ops", "guest"]);
            let mut query = Query::new(&cap, 1 + rng.below(3) as u32, tenant);
            query.source =
                [None, Some("agent://lab/c1"), Some("agent://lab/c2")][rng.below(3) as usize];
            if rng.below(5) == 0 {
                query.target_agent = Some(pick(&mut rng, &["agent://lab/a1", "agent://ops/a2"]));
            }
            let now = Millis(rng.below(2_100));
            let fast = select(&t, &p, &query, now);
            seen[match fast {
                Ok(_) => 0,
                Err(Refusal::NoRoute(_)) => 1,
                Err(Refusal::Denied(_)) => 2,
            }] += 1;
            assert_eq!(
                fast,
                scan::select(&t, &p, &query, now),
                "round {round} {query:?}"
            );
            match (select_ordered(&t, &p, &query, now), fast) {
                (Ok(list), Ok(best)) => {
                    assert_eq!(list[0], best);
                    assert!(list.windows(2).all(|w| w[0].ranks_before(&w[1])));
                }
                (Err(a), Err(b)) => assert_eq!(a, b),
                (a, b) => panic!("ordered {a:?} vs select {b:?}"),
            }
            let e = explain(&t, &p, &query, now);
            assert_eq!(e.outcome, fast);
            if !matches!(fast, Err(Refusal::Denied(_))) {
                let same_name = t
                    .iter()
                    .filter(|r| *r.capability == *query.capability)
                    .count() as u64;
                assert_eq!(e.rejections.total() + e.ranked.len() as u64, same_name);
            }
            for (r, n) in e.rejections.iter() {
                reasons.add(r, n);
            }
        }
    }
    assert!(seen.iter().all(|&n| n > 100), "{seen:?}");
    let missing: Vec<Reject> = reasons
        .iter()
        .filter(|(_, n)| *n == 0)
        .map(|(r, _)| r)
        .collect();
    assert!(missing.is_empty(), "reasons never exercised: {missing:?}");
}
