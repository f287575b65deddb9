//! Sans-IO tests of the daemon's decisions: every input is a call with an
//! explicit instant, every effect a return value. Nothing sleeps.

use super::state::State;
use crate::config::{load_str, LoadError, Runtime};
use crate::fib::FibChange;
use crate::ipc::message::{
    ConflictReason, IpcError, LookupQuery, LookupView, Registration, Renewal, RequestBody,
    ResponseBody, RoutesQuery, StatusView,
};
use crate::policy::Policy;
use crate::route::{Access, Attributes, RouteId};
use crate::time::Millis;

pub(super) const BASE: &str = "
config agentd 'main'
\toption router_id 'r1'
\toption min_lease '5'
\toption default_lease '30'
\toption max_lease '3600'
\toption max_routes '100'

config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
\toption latency_ms '5'
\toption trust '90'
";

pub(super) fn rt(extra: &str) -> Result<Runtime, LoadError> {
    load_str(&format!("{BASE}{extra}"), "test.conf")
}

pub(super) fn started(extra: &str) -> State {
    let loaded = rt(extra);
    assert!(loaded.is_ok(), "test config invalid: {:?}", loaded.err());
    State::start(loaded, "test.conf", "agentd test", Millis(1_000))
}

pub(super) fn status(s: &mut State) -> StatusView {
    match s.handle(RequestBody::Status, Millis(1_000)).reply {
        Ok(ResponseBody::Status(v)) => *v,
        other => panic!("status answered {other:?}"),
    }
}

pub(super) fn route_ids(s: &mut State) -> Vec<String> {
    match s
        .handle(RequestBody::Routes(RoutesQuery::default()), Millis(1_000))
        .reply
    {
        Ok(ResponseBody::Routes(p)) => p.routes.iter().map(|r| r.route_id.to_string()).collect(),
        other => panic!("routes answered {other:?}"),
    }
}

pub(super) fn lookup(s: &mut State, cap: &str, tenant: &str, now: u64) -> LookupView {
    let query = LookupQuery {
        capability: cap.into(),
        version: 1,
        tenant: tenant.into(),
        source_agent: None,
        target_agent: None,
    };
    match s
        .handle(
            RequestBody::Lookup {
                query,
                explain: true,
            },
            Millis(now),
        )
        .reply
    {
        Ok(ResponseBody::Lookup(v)) => v,
        other => panic!("lookup answered {other:?}"),
    }
}

pub(super) fn registration(origin: &str, port: u16, lease: Option<u32>) -> Registration {
    Registration {
        route_id: None,
        capability: "demo.echo".into(),
        version: 1,
        origin: origin.into(),
        endpoint: format!("http://192.0.2.20:{port}/invoke").into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms: 3,
            cost_micros: 0,
            load_permille: 0,
            trust: 80,
        },
        access: Access::default(),
        contract: None,
        lease_seconds: lease,
        caller: None,
        owner: None,
        public_ipv6: false,
    }
}

pub(super) fn register(
    s: &mut State,
    reg: Registration,
    now: u64,
) -> Result<(RouteId, Millis), IpcError> {
    match s.handle(RequestBody::Register(reg), Millis(now)).reply {
        Ok(ResponseBody::Lease(g)) => Ok((g.route_id, g.expires_at)),
        Ok(other) => panic!("register answered {other:?}"),
        Err(e) => Err(e),
    }
}

// ===== startup =====

#[test]
fn valid_config_at_start_loads_static_routes_and_counts_as_first_generation() {
    let mut s = started("");
    assert_eq!(route_ids(&mut s), ["static:printer"]);
    let st = status(&mut s);
    assert_eq!(st.config_generation, 1);
    assert_eq!(st.config_error, None);
    assert_eq!(st.static_routes, 1);
    assert_eq!(st.router_id.as_ref(), "r1");
}

#[test]
fn invalid_config_at_start_gives_empty_tables_the_reason_and_denies_everything() {
    let loaded = rt("\toption latency_ms 'fast'\n");
    assert!(loaded.is_err());
    let mut s = State::start(loaded, "test.conf", "agentd test", Millis(0));
    assert!(route_ids(&mut s).is_empty());
    let st = status(&mut s);
    let err = st.config_error.expect("status reports why");
    assert!(
        err.contains("test.conf") && err.contains("latency_ms"),
        "{err}"
    );
    assert_eq!(st.config_generation, 0);
    assert!(st.policy_error.is_some());
    let v = lookup(&mut s, "office.print", "lab", 0);
    assert!(v.denied);
    assert_eq!(v.refusal.as_deref(), Some("policy_invalid"));
}

#[test]
fn local_registrations_are_denied_lookups_while_the_start_config_is_invalid() {
    let mut s = State::start(rt("\tbogus\n"), "test.conf", "agentd test", Millis(0));
    // Registering still works (agents keep their leases) ...
    assert!(register(&mut s, registration("agent://lab/echo", 9000, None), 0).is_ok());
    // ... but nothing is routed until the configuration is repaired.
    assert!(lookup(&mut s, "demo.echo", "lab", 0).denied);
    let (_, changes) = s.reload(rt("")).expect("repaired config loads");
    assert!(changes.iter().any(|c| matches!(c, FibChange::Policy(_))));
    let v = lookup(&mut s, "demo.echo", "lab", 0);
    assert!(!v.denied);
    assert_eq!(v.candidates.len(), 1);
}

// ===== reload =====

#[test]
fn invalid_reload_keeps_routes_and_policy_and_status_reports_it() {
    let mut s = started(
        "
config rule 'deny_print'
\toption priority '10'
\toption action 'deny'
\toption capability 'office.*'
",
    );
    let generation = s.generation();
    let err = s.reload(rt("\tbogus_option_line\n")).unwrap_err();
    assert!(
        matches!(&err, IpcError::Invalid { field, .. } if &**field == "config"),
        "{err:?}"
    );
    assert_eq!(route_ids(&mut s), ["static:printer"]);
    assert_eq!(s.generation(), generation, "FIB generation untouched");
    // The old policy (deny office.*) is still in force.
    let v = lookup(&mut s, "office.print", "lab", 1_000);
    assert!(v.denied);
    assert_eq!(v.rule.as_deref(), Some("deny_print"));
    let st = status(&mut s);
    assert_eq!(st.config_generation, 1);
    assert!(st.config_error.is_some_and(|e| e.contains("test.conf")));
}

#[test]
fn valid_reload_swaps_static_routes_and_policy_at_once_and_bumps_generation() {
    let mut s = started("");
    assert!(s.reload(rt("\tbogus\n")).is_err());
    let new = "
config agentd 'main'
\toption router_id 'r1'
\toption default_action 'deny'

config route 'scanner'
\toption capability 'office.scan'
\toption version '1'
\toption origin 'agent://lab/scanner'
\toption endpoint 'http://192.0.2.11:8080/invoke'
";
    let (generation, changes) = s.reload(load_str(new, "test.conf")).expect("valid");
    assert_eq!(generation, s.generation());
    assert!(changes.contains(&FibChange::Remove(RouteId::new("static:printer").unwrap())));
    assert!(changes
        .iter()
        .any(|c| matches!(c, FibChange::Upsert(r) if r.id.as_str() == "static:scanner")));
    assert!(changes
        .iter()
        .any(|c| matches!(c, FibChange::Policy(p) if p.invalid.is_none())));
    assert_eq!(route_ids(&mut s), ["static:scanner"]);
    let st = status(&mut s);
    assert_eq!(st.config_generation, 2);
    assert_eq!(
        st.config_error, None,
        "a valid reload clears the last error"
    );
    // The new default action applies to the new route.
    assert!(lookup(&mut s, "office.scan", "lab", 1_000).denied);
}

#[test]
fn reload_keeps_local_registrations_and_unchanged_static_routes_quiet() {
    let mut s = started("");
    let (id, _) = register(&mut s, registration("agent://lab/echo", 9000, None), 1_000).unwrap();
    let (_, changes) = s.reload(rt("")).unwrap();
    assert!(
        changes.is_empty(),
        "same file, nothing to publish: {changes:?}"
    );
    assert!(route_ids(&mut s).contains(&id.to_string()));
}

#[test]
fn reload_that_cannot_hold_the_registered_routes_is_refused() {
    let mut s = started("");
    register(&mut s, registration("agent://lab/a", 9001, None), 1_000).unwrap();
    register(&mut s, registration("agent://lab/b", 9002, None), 1_000).unwrap();
    let err = s
        .reload(load_str(&BASE.replace("'100'", "'2'"), "test.conf"))
        .unwrap_err();
    assert!(err.to_string().contains("max_routes 2"), "{err}");
    assert_eq!(route_ids(&mut s).len(), 3);
}

#[test]
fn invalid_policy_denies_every_lookup_with_reason_until_repaired() {
    // uci-schema already refuses every rule error it can see, so an
    // invalid policy reaches the state only through conversion; feed one.
    let mut broken = rt("").unwrap();
    broken.policy = Policy::invalid("rule 'x': weights overflow");
    let mut s = started("");
    s.reload(Ok(broken)).unwrap();
    let v = lookup(&mut s, "office.print", "lab", 1_000);
    assert!(v.denied);
    assert_eq!(v.refusal.as_deref(), Some("policy_invalid"));
    assert!(v.candidates.is_empty());
    let st = status(&mut s);
    assert_eq!(
        st.policy_error.as_deref(),
        Some("rule 'x': weights overflow")
    );
    s.reload(rt("")).unwrap();
    assert!(!lookup(&mut s, "office.print", "lab", 1_000).denied);
    assert_eq!(status(&mut s).policy_error, None);
}

// ===== registrations and leases =====

#[test]
fn lease_expires_exactly_at_its_deadline() {
    let mut s = started("");
    let (id, expires) = register(
        &mut s,
        registration("agent://lab/echo", 9000, Some(5)),
        10_000,
    )
    .unwrap();
    assert_eq!(expires, Millis(15_000));
    assert_eq!(s.next_deadline(), Some(Millis(15_000)));
    assert!(s.expire(Millis(14_999)).is_empty());
    assert_eq!(
        lookup(&mut s, "demo.echo", "lab", 14_999).candidates.len(),
        1
    );
    assert_eq!(
        s.expire(Millis(15_000)),
        vec![FibChange::Remove(id.clone())]
    );
    assert_eq!(s.next_deadline(), None);
    assert!(!route_ids(&mut s).contains(&id.to_string()));
}

#[test]
fn renewal_moves_the_deadline_and_keeps_the_granted_length() {
    let mut s = started("");
    let (id, _) = register(&mut s, registration("agent://lab/echo", 9000, Some(10)), 0).unwrap();
    let reply = s
        .handle(RequestBody::Renew(Renewal::of(id.clone())), Millis(8_000))
        .reply;
    let Ok(ResponseBody::Lease(g)) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!((g.lease_seconds, g.expires_at), (10, Millis(18_000)));
    assert!(
        s.expire(Millis(10_000)).is_empty(),
        "old deadline no longer counts"
    );
    assert_eq!(s.next_deadline(), Some(Millis(18_000)));
}

#[test]
fn renewing_an_unknown_route_is_not_found() {
    let mut s = started("");
    let id = RouteId::new("r-gone").unwrap();
    let reply = s
        .handle(RequestBody::Renew(Renewal::of(id.clone())), Millis(0))
        .reply;
    assert_eq!(reply.unwrap_err(), IpcError::NotFound { route_id: id });
}

#[test]
fn lease_outside_the_bounds_is_refused_naming_them() {
    let mut s = started("");
    let err = register(&mut s, registration("agent://lab/echo", 9000, Some(4)), 0).unwrap_err();
    assert_eq!(
        err,
        IpcError::LeaseOutOfRange {
            requested: 4,
            min: 5,
            max: 3600
        }
    );
}

#[test]
fn route_id_of_another_origin_is_a_conflict() {
    let mut s = started("");
    let (id, _) = register(&mut s, registration("agent://lab/echo", 9000, None), 0).unwrap();
    let theft = Registration {
        route_id: Some(id.clone()),
        ..registration("agent://lab/thief", 9000, None)
    };
    assert_eq!(
        register(&mut s, theft, 0).unwrap_err(),
        IpcError::Conflict {
            route_id: id.clone(),
            reason: ConflictReason::OtherOrigin
        }
    );
    let again = Registration {
        route_id: Some(id.clone()),
        ..registration("agent://lab/echo", 9000, None)
    };
    assert_eq!(
        register(&mut s, again, 0).unwrap().0,
        id,
        "same origin: idempotent upsert"
    );
}

#[test]
fn static_route_ids_cannot_be_registered_or_unregistered() {
    let mut s = started("");
    let id = RouteId::new("static:printer").unwrap();
    let reg = Registration {
        route_id: Some(id.clone()),
        ..registration("agent://lab/echo", 9000, None)
    };
    assert_eq!(
        register(&mut s, reg, 0).unwrap_err(),
        IpcError::Conflict {
            route_id: id.clone(),
            reason: ConflictReason::NotLocal
        }
    );
    let reply = s
        .handle(
            RequestBody::Unregister {
                route_id: id.clone(),
                caller: None,
            },
            Millis(0),
        )
        .reply;
    assert!(matches!(
        reply,
        Err(IpcError::Conflict {
            reason: ConflictReason::NotLocal,
            ..
        })
    ));
    let fresh = RouteId::new("static:new").unwrap();
    let reg = Registration {
        route_id: Some(fresh),
        ..registration("agent://lab/echo", 9000, None)
    };
    assert!(matches!(
        register(&mut s, reg, 0),
        Err(IpcError::Invalid { .. })
    ));
}

#[test]
fn same_agent_endpoint_and_capability_get_the_same_derived_id() {
    let mut s = started("");
    let a = register(&mut s, registration("agent://lab/echo", 9000, None), 0)
        .unwrap()
        .0;
    let b = register(&mut s, registration("agent://lab/echo", 9000, None), 0)
        .unwrap()
        .0;
    let c = register(&mut s, registration("agent://lab/echo", 9001, None), 0)
        .unwrap()
        .0;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn unregister_withdraws_the_route_from_the_fib() {
    let mut s = started("");
    let (id, _) = register(&mut s, registration("agent://lab/echo", 9000, None), 0).unwrap();
    let before = s.generation();
    let h = s.handle(
        RequestBody::Unregister {
            route_id: id.clone(),
            caller: None,
        },
        Millis(0),
    );
    // The reply names the generation the removal produced, so a FIB
    // subscriber knows when it has caught up.
    assert_eq!(
        h.reply,
        Ok(ResponseBody::Unregistered {
            route_id: id.clone(),
            generation: before + 1
        })
    );
    assert_eq!(s.generation(), before + 1);
    assert_eq!(h.changes, vec![FibChange::Remove(id)]);
    assert_eq!(s.next_deadline(), None);
}

// ===== health =====

#[test]
fn health_verdicts_exclude_without_removing_and_apply_once() {
    let mut s = started("");
    let id = RouteId::new("static:printer").unwrap();
    let down = s.set_health(std::slice::from_ref(&id), false);
    assert!(matches!(&down[..], [FibChange::Upsert(r)] if !r.healthy));
    // Already down: nothing to publish.
    assert!(s.set_health(std::slice::from_ref(&id), false).is_empty());
    let v = lookup(&mut s, "office.print", "lab", 1_000);
    assert!(v.candidates.is_empty());
    assert_eq!(v.rejections.get("unhealthy"), Some(&1));
    assert!(
        route_ids(&mut s).contains(&id.to_string()),
        "still in the table"
    );
    let gone = RouteId::new("not-in-table").unwrap();
    let up = s.set_health(&[gone, id.clone()], true);
    assert!(matches!(&up[..], [FibChange::Upsert(r)] if r.healthy && r.id == id));
    let targets: Vec<_> = s
        .probe_targets()
        .map(|(id, ep, h)| (id.clone(), ep.to_string(), h))
        .collect();
    assert_eq!(
        targets,
        vec![(id, "http://192.0.2.10:8080/invoke".into(), true)]
    );
}

// ===== restart =====

#[test]
fn saved_leases_come_back_only_if_live_valid_and_local() {
    let mut old = started("");
    let (live, _) = register(&mut old, registration("agent://lab/a", 9001, Some(60)), 0).unwrap();
    let (dying, _) = register(&mut old, registration("agent://lab/b", 9002, Some(5)), 0).unwrap();
    let mut saved = old.local_leases();
    assert_eq!(saved.len(), 2, "static routes are not saved");
    // A tampered entry: a bad endpoint must not slip in through the file.
    let mut forged = saved[0].clone();
    forged.route.id = RouteId::new("r-forged").unwrap();
    forged.route.endpoint = "ftp://x".into();
    saved.push(forged);

    let mut new = started("");
    assert_eq!(
        new.restore(saved, Millis(5_000)),
        1,
        "b expired at 5 s, forged refused"
    );
    let ids = route_ids(&mut new);
    assert!(ids.contains(&live.to_string()));
    assert!(!ids.contains(&dying.to_string()));
    assert!(!ids.contains(&"r-forged".to_string()));
    assert_eq!(
        new.next_deadline(),
        Some(Millis(60_000)),
        "the saved deadline, not a new one"
    );
    // The restored lease renews with its granted length.
    let reply = new
        .handle(RequestBody::Renew(Renewal::of(live)), Millis(30_000))
        .reply;
    assert!(matches!(reply, Ok(ResponseBody::Lease(g)) if g.lease_seconds == 60));
}

#[test]
fn stats_count_routes_by_source_with_every_source_listed() {
    let mut s = started("");
    register(&mut s, registration("agent://lab/a", 9001, Some(60)), 0).unwrap();
    let c = s.stats_at(Millis(1)).counters;
    let by = |src: &str| c.get(format!("routes.{src}").as_str()).copied();
    assert_eq!(
        (by("local"), by("static"), by("peer"), by("relay")),
        (Some(1), Some(1), Some(0), Some(0))
    );
    assert_eq!(c.get("routes"), Some(&2));
}

#[test]
fn restored_leases_are_cut_to_the_current_max_lease() {
    let mut old = started("");
    let (id, _) = register(&mut old, registration("agent://lab/a", 9001, Some(3600)), 0).unwrap();
    let mut saved = old.local_leases();
    // A file claiming a lease of a day (tampered, or max_lease lowered).
    saved[0].route.lease = crate::route::Lease::Until(Millis(86_400_000));
    saved[0].lease_s = 86_400;

    let lowered = load_str(
        &BASE.replace("max_lease '3600'", "max_lease '600'"),
        "test.conf",
    );
    let mut new = State::start(lowered, "test.conf", "agentd test", Millis(1_000));
    assert_eq!(new.restore(saved, Millis(5_000)), 1);
    assert_eq!(
        new.next_deadline(),
        Some(Millis(5_000 + 600_000)),
        "cut to now + max_lease"
    );
    assert_eq!(
        new.stats_at(Millis(6_000))
            .counters
            .get("leases.restore_clamped"),
        Some(&1)
    );
    // The remembered length is within the bounds too.
    let reply = new
        .handle(RequestBody::Renew(Renewal::of(id)), Millis(6_000))
        .reply;
    assert!(
        matches!(&reply, Ok(ResponseBody::Lease(g)) if g.lease_seconds == 600),
        "{reply:?}"
    );
}

#[test]
fn static_routes_beyond_max_routes_at_start_are_skipped_and_listed() {
    let text = format!(
        "{}\nconfig route 'scanner'\n\toption capability 'office.scan'\n\toption version '1'\n\
         \toption origin 'agent://lab/scanner'\n\toption endpoint 'http://192.0.2.11:8080/invoke'\n",
        BASE.replace("'100'", "'1'")
    );
    let (rt, _) = crate::config::load_str_partial(&text, "test.conf");
    assert!(rt.problems.is_empty(), "the file itself is valid");
    let mut s = State::start(Ok(rt), "test.conf", "agentd test", Millis(0));
    assert_eq!(route_ids(&mut s), ["static:printer"]);
    let st = status(&mut s);
    assert_eq!(st.config_problems_total, 1);
    let p = &st.config_problems[0];
    assert_eq!(&*p.action, "section_skipped");
    assert!(p.reason.contains("static:scanner"), "{p:?}");
    assert_eq!(st.policy_error, None);
}

// ===== ownership and quotas =====
