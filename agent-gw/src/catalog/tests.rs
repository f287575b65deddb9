use super::*;

use agentd::fib::FibEvent;
use agentd::policy::{Action, Pattern, Policy, Rule};
use agentd::route::{Access, Attributes, Contract, Effect, Lease, Route, RouteId, RouteSource};
use agentd::score::Weights;

fn route(id: &str, capability: &str, version: u32, tenant: &str, schema: Option<&str>) -> Route {
    Route {
        id: RouteId::new(id).unwrap(),
        capability: capability.into(),
        version,
        origin: format!("agent://{tenant}/{id}").into(),
        endpoint: "http://192.0.2.10:8000/invoke".into(),
        tenant: tenant.into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms: 1,
            cost_micros: 0,
            load_permille: 0,
            trust: 50,
        },
        access: Access::default().into(),
        contract: schema
            .map(|s| Contract {
                effect: Effect::Read,
                idempotent: false,
                input_schema: Some(s.into()),
                description: Some(format!("{capability} v{version}").into()),
            })
            .map(Box::new),
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(Millis::now().saturating_add_ms(600_000)),
        healthy: true,
        allow_loopback: false,
        owner: None,
        proof: Default::default(),
        disputed: false,
    }
}

fn fib(routes: Vec<Route>, policy: Policy) -> Fib {
    let mut fib = Fib::new(routes.len().max(100));
    let now = Millis::now();
    fib.apply(FibEvent::SnapshotBegin { generation: 1 }, now)
        .unwrap();
    fib.apply(FibEvent::SnapshotChunk(routes), now).unwrap();
    fib.apply(
        FibEvent::SnapshotEnd {
            generation: 1,
            policy: Box::new(policy),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        },
        now,
    )
    .unwrap();
    fib
}

fn mapping(name: &str, capability: &str) -> Entry {
    Entry {
        protocol: Protocol::Mcp,
        name: name.into(),
        title: Some(format!("Title of {name}").into()),
        description: None,
        capability: capability.into(),
        version: 1,
        input_schema: None,
        mapped: true,
    }
}

const LAB: Caller = Caller {
    tenant: "lab",
    source: "agent://lab/mcp-client",
};

fn names(v: &[(Entry, Visibility)]) -> Vec<(&str, Visibility)> {
    v.iter().map(|(e, vis)| (&*e.name, *vis)).collect()
}

#[test]
fn mappings_are_listed_even_without_a_route_but_not_across_tenants() {
    let f = fib(
        vec![
            route("r-echo", "demo.echo", 1, "lab", None),
            route("r-other", "other.secret", 1, "other", None),
        ],
        Policy::default(),
    );
    let c = Catalog::new(
        vec![
            mapping("echo", "demo.echo"),
            mapping("missing", "demo.missing"),
            mapping("secret", "other.secret"),
        ],
        false,
    );
    let now = Millis::now();
    assert_eq!(
        names(&c.visible(&f, Protocol::Mcp, LAB, now)),
        [
            ("echo", Visibility::Usable),
            ("missing", Visibility::NoRoute)
        ]
    );
    assert!(c.visible(&f, Protocol::A2a, LAB, now).is_empty());
    assert_eq!(
        c.find(&f, Protocol::Mcp, LAB, "missing", now)
            .map(|(_, v)| v),
        Some(Visibility::NoRoute)
    );
    // Another tenant's capability is unknown to this caller, and known to
    // its own tenant.
    assert_eq!(c.find(&f, Protocol::Mcp, LAB, "secret", now), None);
    let other = Caller {
        tenant: "other",
        source: "agent://other/mcp-client",
    };
    assert_eq!(
        c.find(&f, Protocol::Mcp, other, "secret", now)
            .map(|(_, v)| v),
        Some(Visibility::Usable)
    );
}

#[test]
fn a_policy_deny_hides_the_entry() {
    let mut deny = Rule::new("no-echo", 10, Action::Deny);
    deny.capability = Pattern::parse("demo.echo").unwrap();
    let policy = Policy::new(vec![deny], Action::Allow, Weights::default()).unwrap();
    let f = fib(vec![route("r-echo", "demo.echo", 1, "lab", None)], policy);
    let c = Catalog::new(vec![mapping("echo", "demo.echo")], false);
    let now = Millis::now();
    assert!(c.visible(&f, Protocol::Mcp, LAB, now).is_empty());
    assert_eq!(c.find(&f, Protocol::Mcp, LAB, "echo", now), None);
}

#[test]
fn exposed_schemas_take_the_highest_usable_version_and_mappings_win() {
    let routes = vec![
        route("r-sum1", "calc.sum", 1, "lab", Some(r#"{"type":"object"}"#)),
        route(
            "r-sum2",
            "calc.sum",
            2,
            "lab",
            Some(r#"{"type":"object","title":"v2"}"#),
        ),
        route("r-plain", "calc.plain", 1, "lab", None),
        route("r-theirs", "calc.theirs", 1, "other", Some("{}")),
        route("r-echo", "demo.echo", 1, "lab", Some("{}")),
    ];
    let f = fib(routes, Policy::default());
    let now = Millis::now();
    let off = Catalog::new(vec![], false);
    assert!(off.visible(&f, Protocol::Mcp, LAB, now).is_empty());
    let mut m = mapping("demo.echo", "demo.echo");
    m.description = Some("mapped".into());
    let on = Catalog::new(vec![m], true);
    let seen = on.visible(&f, Protocol::Mcp, LAB, now);
    assert_eq!(
        names(&seen),
        [
            ("calc.sum", Visibility::Usable),
            ("demo.echo", Visibility::Usable)
        ]
    );
    assert_eq!(seen[0].0.version, 2);
    assert_eq!(
        seen[0].0.input_schema.as_deref(),
        Some(r#"{"type":"object","title":"v2"}"#)
    );
    assert!(!seen[0].0.mapped);
    assert_eq!(seen[1].0.description.as_deref(), Some("mapped"));
    assert_eq!(
        on.find(&f, Protocol::Mcp, LAB, "calc.sum", now)
            .map(|(e, _)| e.version),
        Some(2)
    );
    assert_eq!(on.find(&f, Protocol::Mcp, LAB, "calc.theirs", now), None);
}

#[test]
fn pages_follow_an_opaque_cursor_to_the_end() {
    let maps: Vec<Entry> = (0..7)
        .map(|i| mapping(&format!("t{i}"), "demo.none"))
        .collect();
    let c = Catalog::new(maps, false);
    let f = fib(vec![], Policy::default());
    let now = Millis::now();
    let mut cursor: Option<String> = None;
    let mut all = Vec::new();
    for _ in 0..10 {
        let p = c
            .list(&f, Protocol::Mcp, LAB, cursor.as_deref(), 3, now)
            .unwrap();
        assert!(p.entries.len() <= 3);
        all.extend(p.entries.iter().map(|e| e.name.to_string()));
        cursor = p.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(all, ["t0", "t1", "t2", "t3", "t4", "t5", "t6"]);
    for bad in [
        "",
        "zz",
        "n1.",
        "n1.0",
        "n1.zz",
        "n1.ff",
        &"n1.00".repeat(200),
    ] {
        assert_eq!(
            c.list(&f, Protocol::Mcp, LAB, Some(bad), 3, now),
            Err(BadCursor),
            "{bad}"
        );
    }
}

/// Input: a FIB of 5,000 routes without a schema, plus two versions of
/// one capability with a schema (and one route of it without).
/// Output: finding that tool by name reads only its capability's three
/// routes, and listing reads only the routes of the capabilities that
/// have a schema — never the rest of the table.
#[test]
fn exposed_schemas_read_only_the_routes_of_matching_capabilities() {
    let mut routes: Vec<Route> = (0..5000)
        .map(|i| route(&format!("p{i}"), &format!("plain.c{i}"), 1, "lab", None))
        .collect();
    routes.push(route("r-sum1", "calc.sum", 1, "lab", Some("{}")));
    routes.push(route("r-sum2", "calc.sum", 2, "lab", Some("{}")));
    routes.push(route("r-sum3", "calc.sum", 3, "lab", None));
    let f = fib(routes, Policy::default());
    let now = Millis::now();
    let on = Catalog::new(vec![], true);
    let found = on.find(&f, Protocol::Mcp, LAB, "calc.sum", now);
    assert_eq!(found.map(|(e, _)| e.version), Some(2));
    assert_eq!(on.routes_examined(), 3);
    assert_eq!(on.find(&f, Protocol::Mcp, LAB, "plain.c7", now), None);
    assert_eq!(
        on.routes_examined(),
        4,
        "an unexposed name reads its own routes only"
    );
    let seen = on.visible(&f, Protocol::Mcp, LAB, now);
    assert_eq!(names(&seen), [("calc.sum", Visibility::Usable)]);
    assert_eq!(on.routes_examined(), 7);
}
