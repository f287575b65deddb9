//! Sans-IO tests of who may act for an origin and what a registration
//! may claim: ownership, caller-named route ids, quotas, `agent` pins,
//! trust caps, the gateway's report, and what status says of options
//! that do more than they seem to. Helpers are `state_tests`'.

use super::state::State;
use super::state_tests::*;
use crate::config::load_str;
use crate::ipc::message::{
    IpcError, Registration, Renewal, RequestBody, ResponseBody, RoutesQuery,
};
use crate::route::{Attributes, RouteId};
use crate::time::Millis;

fn boot(src: &str, origin: &str) -> crate::owner::Caller {
    crate::owner::Caller {
        source: src.parse().unwrap(),
        proof: crate::owner::Proof::Bootstrap {
            subject: origin.into(),
        },
    }
}

fn by(caller: crate::owner::Caller, reg: Registration) -> Registration {
    Registration {
        caller: Some(caller),
        ..reg
    }
}

fn forbidden_reason(r: Result<impl std::fmt::Debug, IpcError>) -> &'static str {
    match r {
        Err(IpcError::Forbidden { reason, .. }) => reason.as_str(),
        other => panic!("expected forbidden, got {other:?}"),
    }
}

#[test]
fn a_live_origin_belongs_to_its_registrant_until_its_last_route_ends() {
    let mut s = started("");
    let victim = boot("192.0.2.10", "agent://lab/printer");
    let attacker = boot("192.0.2.66", "agent://lab/printer");
    let (id, _) = register(
        &mut s,
        by(
            victim.clone(),
            registration("agent://lab/printer", 9000, Some(10)),
        ),
        0,
    )
    .unwrap();
    // Another host with a token for the same origin: no new route, no
    // renewal (moving the endpoint), no withdrawal, no bootstrap.
    assert_eq!(
        forbidden_reason(register(
            &mut s,
            by(
                attacker.clone(),
                registration("agent://lab/printer", 9666, None)
            ),
            0
        )),
        "origin_owned"
    );
    let steal = Renewal {
        caller: Some(attacker.clone()),
        endpoint: Some("http://192.0.2.66:9666/invoke".into()),
        ..Renewal::of(id.clone())
    };
    assert_eq!(
        forbidden_reason(s.handle(RequestBody::Renew(steal), Millis(1_000)).reply),
        "origin_owned"
    );
    let gone = RequestBody::Unregister {
        route_id: id.clone(),
        caller: Some(attacker.clone()),
    };
    assert_eq!(
        forbidden_reason(s.handle(gone, Millis(1_000)).reply),
        "origin_owned"
    );
    assert_eq!(
        forbidden_reason(s.check_origin("agent://lab/printer", &attacker).map(|()| 0)),
        "origin_owned"
    );
    assert_eq!(
        s.table()
            .get(&id)
            .map(|r| r.endpoint.to_string())
            .as_deref(),
        Some("http://192.0.2.20:9000/invoke"),
        "still the victim's endpoint"
    );
    // The owner renews with a fresh token from its address.
    let renew = Renewal {
        caller: Some(boot("192.0.2.10", "agent://lab/printer")),
        ..Renewal::of(id.clone())
    };
    assert!(s
        .handle(RequestBody::Renew(renew), Millis(2_000))
        .reply
        .is_ok());
    // After the last lease ends the origin is free for anyone.
    assert_eq!(s.expire(Millis(13_000)).len(), 1);
    assert_eq!(s.check_origin("agent://lab/printer", &attacker), Ok(()));
}

#[test]
fn a_caller_named_route_id_cannot_take_or_block_another_origins_id() {
    let mut s = started("");
    let victim = boot("192.0.2.10", "agent://lab/printer");
    let attacker = boot("192.0.2.66", "agent://lab/evil");
    // The attacker learns (or computes) the id the victim will get and
    // claims it first.
    let mut probe = started("");
    let (victim_id, _) = register(
        &mut probe,
        by(
            victim.clone(),
            registration("agent://lab/printer", 9000, None),
        ),
        0,
    )
    .unwrap();
    let claim = Registration {
        route_id: Some(victim_id.clone()),
        ..by(attacker, registration("agent://lab/evil", 9666, None))
    };
    let (claimed, _) = register(&mut s, claim, 0).unwrap();
    assert_ne!(claimed, victim_id, "namespaced into the attacker's scope");
    let (got, _) = register(
        &mut s,
        by(
            victim.clone(),
            registration("agent://lab/printer", 9000, None),
        ),
        0,
    )
    .unwrap();
    assert_eq!(got, victim_id);
    // Re-registering with the reply's id is an idempotent upsert.
    let again = Registration {
        route_id: Some(got.clone()),
        ..by(victim, registration("agent://lab/printer", 9000, None))
    };
    assert_eq!(register(&mut s, again, 0).unwrap().0, got);
}

#[test]
fn quotas_refuse_new_routes_but_never_renewals() {
    let mut s = State::start(
        load_str(
            &BASE.replace(
                "max_routes '100'",
                "max_routes '100'\n\toption max_routes_per_origin '2'\n\toption max_routes_per_source '3'",
            ),
            "test.conf",
        ),
        "test.conf",
        "agentd test",
        Millis(1_000),
    );
    let host = "192.0.2.10";
    let reg = |origin: &str, port| by(boot(host, origin), registration(origin, port, None));
    let (first, _) = register(&mut s, reg("agent://lab/a", 9001), 0).unwrap();
    register(&mut s, reg("agent://lab/a", 9002), 0).unwrap();
    match register(&mut s, reg("agent://lab/a", 9003), 0) {
        Err(IpcError::QuotaExceeded { quota, limit, .. }) => {
            assert_eq!((quota.option(), limit), ("agentd.max_routes_per_origin", 2))
        }
        other => panic!("{other:?}"),
    }
    // Updating a route already held is not a new route.
    register(&mut s, reg("agent://lab/a", 9002), 0).unwrap();
    register(&mut s, reg("agent://lab/b", 9004), 0).unwrap();
    let e = register(&mut s, reg("agent://lab/c", 9005), 0).unwrap_err();
    assert!(
        e.to_string().contains("agentd.max_routes_per_source"),
        "{e}"
    );
    let renew = Renewal {
        caller: Some(boot(host, "agent://lab/a")),
        ..Renewal::of(first)
    };
    assert!(s
        .handle(RequestBody::Renew(renew), Millis(1_000))
        .reply
        .is_ok());
    // Another host is not bound by this one's quota.
    register(
        &mut s,
        by(
            boot("192.0.2.11", "agent://lab/c"),
            registration("agent://lab/c", 9006, None),
        ),
        0,
    )
    .unwrap();
}

#[test]
fn agent_sections_pin_an_origin_to_sources_and_keys() {
    let mut s = started(
        "
config agent 'pin_printer'
\toption origin 'agent://lab/printer'
\tlist source '192.0.2.0/24'
",
    );
    let e = register(
        &mut s,
        by(
            boot("198.51.100.7", "agent://lab/printer"),
            registration("agent://lab/printer", 9000, None),
        ),
        0,
    );
    assert_eq!(forbidden_reason(e), "origin_pinned_source");
    register(
        &mut s,
        by(
            boot("192.0.2.7", "agent://lab/printer"),
            registration("agent://lab/printer", 9000, None),
        ),
        0,
    )
    .unwrap();
}

#[test]
fn a_lan_registrations_trust_is_a_claim_capped_by_its_tenant() {
    let mut s = started(
        "
config tenant 'ops'
	option max_trust '90'
",
    );
    let trust_of = |s: &mut State, id: &RouteId| match s
        .handle(RequestBody::Routes(RoutesQuery::default()), Millis(1))
        .reply
    {
        Ok(ResponseBody::Routes(p)) => p
            .routes
            .iter()
            .find(|r| r.route_id == *id)
            .map(|r| r.attrs.trust)
            .expect("route held"),
        other => panic!("routes answered {other:?}"),
    };
    // Tenant `lab` has no section: the schema default cap (50).
    let lab = by(
        boot("192.0.2.10", "agent://lab/a"),
        Registration {
            attrs: Attributes {
                trust: 100,
                ..registration("agent://lab/a", 1, None).attrs
            },
            ..registration("agent://lab/a", 1, None)
        },
    );
    let (id, _) = register(&mut s, lab, 0).unwrap();
    assert_eq!(trust_of(&mut s, &id), 50);
    let mut ops = by(
        boot("192.0.2.11", "agent://ops/b"),
        registration("agent://ops/b", 2, None),
    );
    ops.tenant = "ops".into();
    ops.attrs.trust = 100;
    let (id, _) = register(&mut s, ops, 0).unwrap();
    assert_eq!(trust_of(&mut s, &id), 90);
    // An administrator's registration is the operator's trust.
    let mut admin = registration("agent://lab/c", 3, None);
    admin.attrs.trust = 100;
    let (id, _) = register(&mut s, admin, 0).unwrap();
    assert_eq!(trust_of(&mut s, &id), 100);
}

#[test]
fn the_gateway_report_is_kept_and_shown_in_stats_with_its_age() {
    use crate::ipc::message::GatewayStats;
    let mut s = started("");
    let stats = |s: &mut State, now: u64| match s.handle(RequestBody::Stats, Millis(now)).reply {
        Ok(ResponseBody::Stats(v)) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(stats(&mut s, 2_000).gateway, None);
    let report = GatewayStats {
        buffer_used: 100,
        buffer_limit: 16 << 20,
        refused_budget: 3,
        ..GatewayStats::default()
    };
    let r = s.handle(RequestBody::GatewayStats(report), Millis(3_000));
    assert_eq!(r.reply, Ok(ResponseBody::Noted));
    let g = stats(&mut s, 4_500).gateway.unwrap();
    assert_eq!((g.stats, g.age_ms), (report, 1_500));
}

#[test]
fn an_agent_pin_with_a_source_may_allow_loopback_endpoints_for_its_origin() {
    let pinned = "
config agent 'pin_local'
\toption origin 'agent://lab/local'
\tlist source '192.0.2.7/32'
\toption allow_loopback '1'

config agent 'pin_open'
\toption origin 'agent://lab/open'
\toption allow_loopback '1'
";
    let mut s = started(pinned);
    let local = |origin: &str| Registration {
        endpoint: "http://127.0.0.1:9000/invoke".into(),
        ..by(boot("192.0.2.7", origin), registration(origin, 9000, None))
    };
    let (id, _) = register(&mut s, local("agent://lab/local"), 0).unwrap();
    assert!(s.table().get(&id).is_some_and(|r| r.allow_loopback));
    // Without a source or key pin the leave would be anyone's: ignored.
    assert!(matches!(
        register(&mut s, local("agent://lab/open"), 0),
        Err(IpcError::EndpointRefused { .. })
    ));
    // Other origins keep the guard.
    assert!(matches!(
        register(&mut s, local("agent://lab/other"), 0),
        Err(IpcError::EndpointRefused { .. })
    ));
}

#[test]
fn status_says_that_bootstrap_networks_replaces_the_defaults() {
    let mut s = started("");
    assert!(
        status(&mut s).warnings.is_empty(),
        "defaults: nothing to say"
    );
    let mut s = started("\nconfig gateway 'gateway'\n\tlist bootstrap_networks '192.0.2.0/24'\n");
    let warnings = status(&mut s).warnings;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "gateway.bootstrap_networks replaces the default networks: only 192.0.2.0/24 may take bootstrap tokens"
        ) && warnings[0].contains("10.0.0.0/8"),
        "{warnings:?}"
    );
}
