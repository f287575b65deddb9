//! The peer-path State API, sans-IO: paths in, FIB changes out.

use super::*;
use crate::config::load_str;
use crate::ipc::message::{
    ConflictReason, IpcError, LookupQuery, LookupView, Registration, RequestBody, ResponseBody,
};
use crate::time::Millis;

const CONF: &str = "
config agentd 'main'
\toption router_id 'r1'
\toption max_routes '10'

config route 'printer'
\toption capability 'office.print'
\toption version '1'
\toption origin 'agent://lab/printer'
\toption endpoint 'http://192.0.2.10:8080/invoke'
";

const NOW: Millis = Millis(1_000);

fn state() -> State {
    let rt = load_str(CONF, "test.conf");
    assert!(rt.is_ok(), "{:?}", rt.err());
    State::start(rt, "test.conf", "agentd test", NOW)
}

/// `svc` of `agent://lab/remote` at router-a, advertised by `hop` over
/// `path`.
fn ad(route_id: &str, path: &[&str]) -> PeerPath {
    let hop = *path.last().unwrap();
    PeerPath {
        route_id: RouteId::new(route_id).unwrap(),
        capability: "demo.echo".into(),
        version: 1,
        origin_agent: "agent://lab/remote".into(),
        tenant: "lab".into(),
        region: "west".into(),
        attrs: Attributes {
            latency_ms: 3,
            cost_micros: 0,
            load_permille: 0,
            trust: 80,
        },
        access: Access::default(),
        effect: Some(Effect::Read),
        idempotent: true,
        path: path.iter().map(|&p| p.into()).collect(),
        next_hop: hop.into(),
        next_hop_address: "198.51.100.2".into(),
        next_hop_data_port: 7447,
        healthy: true,
        proof: OriginProof::Static,
        source: RouteSource::Peer,
    }
}

fn install(s: &mut State, p: PeerPath) -> Result<Changes, PeerPathError> {
    s.upsert_peer_path(p.into_route()?)
}

fn id(s: &str) -> RouteId {
    RouteId::parse_table_id(s).unwrap()
}

fn lookup(s: &mut State, cap: &str) -> LookupView {
    let query = LookupQuery {
        capability: cap.into(),
        version: 1,
        tenant: "lab".into(),
        source_agent: None,
        target_agent: None,
    };
    match s
        .handle(
            RequestBody::Lookup {
                query,
                explain: true,
            },
            NOW,
        )
        .reply
    {
        Ok(ResponseBody::Lookup(v)) => v,
        other => panic!("lookup answered {other:?}"),
    }
}

fn winner(s: &mut State) -> Option<String> {
    lookup(s, "demo.echo")
        .candidates
        .first()
        .map(|w| w.route_id.to_string())
}

#[test]
fn a_path_becomes_an_entry_of_its_own_with_the_next_hops_data_plane() {
    let r = ad("svc", &["router-a", "router-b"]).into_route().unwrap();
    assert_eq!(r.id.as_str(), "svc@router-b");
    assert_eq!(
        (r.id.base(), r.next_hop.as_deref()),
        ("svc", Some("router-b"))
    );
    assert_eq!(r.source, RouteSource::Peer);
    assert_eq!(r.lease, Lease::Permanent);
    assert_eq!(&*r.endpoint, "https://198.51.100.2:7447");
    assert_eq!(r.hops(), 2);
    let c = r.contract.as_ref().unwrap();
    assert_eq!((c.effect, c.idempotent), (Effect::Read, true));
    let mut v6 = ad("svc", &["router-b"]);
    v6.next_hop_address = "2001:db8::2".into();
    assert_eq!(
        &*v6.into_route().unwrap().endpoint,
        "https://[2001:db8::2]:7447"
    );
    let mut named = ad("svc", &["router-b"]);
    named.next_hop_address = "router-b.lab.example".into();
    assert_eq!(
        &*named.into_route().unwrap().endpoint,
        "https://router-b.lab.example:7447"
    );
    let mut no_contract = ad("svc", &["router-b"]);
    no_contract.effect = None;
    assert_eq!(no_contract.into_route().unwrap().contract, None);
}

#[test]
fn malformed_paths_are_refused_naming_the_field() {
    let field = |p: PeerPath| match p.into_route() {
        Err(PeerPathError::Invalid { field, .. }) => field,
        other => panic!("accepted or other error: {other:?}"),
    };
    let mut p = ad("svc", &["router-a", "router-b"]);
    p.path = vec!["router-b".into(), "router-a".into()];
    assert_eq!(field(p), "path", "must end at the next hop");
    let mut p = ad("svc", &["router-b"]);
    p.path.clear();
    assert_eq!(field(p), "path");
    assert_eq!(
        field(ad("svc", &["router-b", "router-c", "router-b"])),
        "path"
    );
    let mut p = ad("svc", &["router-b"]);
    p.path = (0..=MAX_PATH_LEN).map(|i| format!("r{i}").into()).collect();
    p.next_hop = format!("r{MAX_PATH_LEN}").into();
    assert_eq!(field(p), "path", "longer than any max_path");
    assert_eq!(
        field(ad("svc", &["router_b"])),
        "route_id",
        "hop is no label"
    );
    let mut p = ad("svc", &["router-b"]);
    p.tenant = "ops".into();
    assert_eq!(field(p), "origin_agent");
    let mut p = ad("svc", &["router-b"]);
    p.attrs.trust = 101;
    assert_eq!(field(p), "attrs");
    let mut p = ad("svc", &["router-b"]);
    p.version = 0;
    assert_eq!(field(p), "version");
    let mut p = ad("svc", &["router-b"]);
    p.next_hop_address = "198.51.100.2/evil".into();
    assert_eq!(field(p), "next_hop_address");
    let mut p = ad("svc", &["router-b"]);
    p.next_hop_data_port = 0;
    assert_eq!(field(p), "next_hop_address");
    // A route that is not what into_route makes is refused by the RIB.
    let mut s = state();
    let mut r = ad("svc", &["router-b"]).into_route().unwrap();
    r.id = RouteId::new("svc").unwrap();
    assert!(matches!(
        s.upsert_peer_path(r),
        Err(PeerPathError::Invalid {
            field: "route_id",
            ..
        })
    ));
    let mut r = ad("svc", &["router-b"]).into_route().unwrap();
    r.endpoint = "http://192.0.2.10:8080/".into();
    assert!(matches!(
        s.upsert_peer_path(r),
        Err(PeerPathError::Invalid {
            field: "endpoint",
            ..
        })
    ));
    let mut r = ad("svc", &["router-b"]).into_route().unwrap();
    r.lease = Lease::Until(Millis(5_000));
    assert!(matches!(
        s.upsert_peer_path(r),
        Err(PeerPathError::Invalid { field: "lease", .. })
    ));
    assert_eq!(s.table().len(), 1, "only the static route");
}

#[test]
fn paths_are_published_once_and_both_peers_paths_are_candidates() {
    let mut s = state();
    let c = install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    assert!(matches!(&c[..], [FibChange::Upsert(r)] if r.id.as_str() == "svc@router-b"));
    assert_eq!(
        install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap(),
        []
    );
    install(&mut s, ad("svc", &["router-a", "router-c", "router-d"])).unwrap();
    let v = lookup(&mut s, "demo.echo");
    let mut ids: Vec<String> = v
        .candidates
        .iter()
        .map(|c| c.route_id.to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["svc@router-b", "svc@router-d"]);
    // Fewer hops win (the hop count is in the score).
    assert_eq!(winner(&mut s).as_deref(), Some("svc@router-b"));
    let svc = id("svc");
    let mut ours: Vec<&str> = s.paths_of(&svc).map(|r| r.id.as_str()).collect();
    ours.sort();
    assert_eq!(ours, ["svc@router-b", "svc@router-d"]);
}

#[test]
fn a_route_id_of_ours_is_never_shadowed_by_a_path_and_back() {
    let mut s = state();
    // The static route.
    let e = install(&mut s, ad("static:printer", &["router-b"])).unwrap_err();
    assert_eq!(
        e,
        PeerPathError::HeldLocally {
            route_id: id("static:printer"),
            source: RouteSource::Static
        }
    );
    assert_eq!(e.code(), "held_locally");
    // A local registration (administrator, id kept as named).
    let reg = Registration {
        route_id: Some(id("mine")),
        capability: "demo.echo".into(),
        version: 1,
        origin: "agent://lab/here".into(),
        endpoint: "http://192.0.2.20:9000/invoke".into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes::default(),
        access: Access::default(),
        contract: None,
        lease_seconds: None,
        caller: None,
        owner: None,
        public_ipv6: false,
    };
    let h = s.handle(RequestBody::Register(reg.clone()), NOW);
    assert!(h.reply.is_ok(), "{:?}", h.reply);
    assert!(matches!(
        install(&mut s, ad("mine", &["router-b"])),
        Err(PeerPathError::HeldLocally {
            source: RouteSource::Local,
            ..
        })
    ));
    // The other way round: a path holds 'theirs'; registering it is refused.
    install(&mut s, ad("theirs", &["router-b"])).unwrap();
    let h = s.handle(
        RequestBody::Register(Registration {
            route_id: Some(id("theirs")),
            ..reg
        }),
        NOW,
    );
    assert!(
        matches!(
            h.reply,
            Err(IpcError::Conflict {
                reason: ConflictReason::NotLocal,
                ..
            })
        ),
        "{:?}",
        h.reply
    );
    assert!(h.changes.is_empty());
    assert!(s.table().get(&id("theirs")).is_none());
}

#[test]
fn the_first_identity_of_a_route_id_stays() {
    let mut s = state();
    install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    // Another origin router claims it through another peer.
    let e = install(&mut s, ad("svc", &["router-x", "router-c"])).unwrap_err();
    assert!(
        matches!(&e, PeerPathError::HeldByOther { origin_router, .. } if &**origin_router == "router-a"),
        "{e}"
    );
    // Same origin router, another origin agent.
    let mut p = ad("svc", &["router-a", "router-c"]);
    p.origin_agent = "agent://lab/other".into();
    assert_eq!(install(&mut s, p).unwrap_err().code(), "held_by_other");
    // The same peer re-advertising it with another identity.
    let mut p = ad("svc", &["router-a", "router-b"]);
    p.origin_agent = "agent://lab/other".into();
    assert_eq!(install(&mut s, p).unwrap_err().code(), "held_by_other");
    assert_eq!(s.table().len(), 2, "static + the first path");
    assert_eq!(
        &*s.table().get(&id("svc@router-b")).unwrap().origin,
        "agent://lab/remote"
    );
    // Once the first claim is gone, another may hold it.
    s.remove_peer_path(&id("svc@router-b"));
    install(&mut s, ad("svc", &["router-x", "router-c"])).unwrap();
}

#[test]
fn a_path_through_this_router_is_a_loop() {
    let mut s = state();
    let e = install(&mut s, ad("svc", &["router-a", "r1", "router-b"])).unwrap_err();
    assert_eq!(
        e,
        PeerPathError::Loop {
            router_id: "r1".into()
        }
    );
    assert_eq!(s.table().len(), 1);
}

#[test]
fn agentd_max_routes_bounds_peer_paths_too() {
    let mut s = state();
    // max_routes 10, the static route holds one.
    for i in 0..9 {
        install(&mut s, ad(&format!("p{i}"), &["router-b"])).unwrap();
    }
    let e = install(&mut s, ad("p9", &["router-b"])).unwrap_err();
    assert_eq!(e, PeerPathError::Full { max_routes: 10 });
    assert!(e.to_string().contains("agentd.max_routes"), "{e}");
    // Updates of held paths still go through.
    let mut p = ad("p0", &["router-b"]);
    p.attrs.latency_ms = 9;
    assert_eq!(install(&mut s, p).unwrap().len(), 1);
}

#[test]
fn session_state_flips_only_that_peers_paths_and_is_published_once() {
    let mut s = state();
    install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    install(&mut s, ad("svc", &["router-a", "router-c", "router-d"])).unwrap();
    assert_eq!(winner(&mut s).as_deref(), Some("svc@router-b"));
    let c = s.set_peer_up("router-b", false);
    assert_eq!(
        c,
        [FibChange::PeerUp {
            router_id: "router-b".into(),
            up: false
        }]
    );
    assert_eq!(s.set_peer_up("router-b", false), []);
    // The route moves to its next path at once.
    assert_eq!(winner(&mut s).as_deref(), Some("svc@router-d"));
    // A path arriving while its peer is down (a snapshot) stays ineligible.
    // (Another origin: router-b claiming router-a's would lose the race.)
    let mut new = ad("new", &["router-b"]);
    new.origin_agent = "agent://lab/other".into();
    install(&mut s, new).unwrap();
    let eligible = |s: &mut State, rid: &str| {
        lookup(s, "demo.echo")
            .candidates
            .iter()
            .any(|c| c.route_id.as_str() == rid)
    };
    assert!(!eligible(&mut s, "new@router-b"));
    assert_eq!(s.set_peer_up("router-b", true).len(), 1);
    assert!(eligible(&mut s, "new@router-b"));
    assert_eq!(winner(&mut s).as_deref(), Some("new@router-b"));
}

#[test]
fn removing_a_peers_paths_touches_only_those_and_never_our_routes() {
    let mut s = state();
    install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    install(&mut s, ad("two", &["router-b"])).unwrap();
    install(&mut s, ad("svc", &["router-a", "router-c"])).unwrap();
    let mut gone: Vec<String> = s
        .remove_paths_via("router-b")
        .into_iter()
        .map(|c| match c {
            FibChange::Remove(id) => id.to_string(),
            other => panic!("{other:?}"),
        })
        .collect();
    gone.sort();
    assert_eq!(gone, ["svc@router-b", "two@router-b"]);
    assert_eq!(s.remove_paths_via("router-b"), []);
    assert_eq!(
        s.remove_peer_path(&id("svc@router-c")),
        [FibChange::Remove(id("svc@router-c"))]
    );
    assert_eq!(s.remove_peer_path(&id("svc@router-c")), []);
    // Not a peer path: untouched.
    assert_eq!(s.remove_peer_path(&id("static:printer")), []);
    assert_eq!(s.table().len(), 1);
}

#[test]
fn exported_routes_are_ours_only() {
    let mut s = state();
    install(&mut s, ad("svc", &["router-b"])).unwrap();
    let ids: Vec<&str> = s.exportable_routes().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["static:printer"]);
}

/// Events an exporter queued, drained into a replica.
#[derive(Debug, Default)]
struct Queue(Vec<crate::fib::FibEvent>);

impl crate::fib::export::FibSink for Queue {
    fn offer(&mut self, event: crate::fib::FibEvent) -> bool {
        self.0.push(event);
        true
    }
}

#[test]
fn the_changes_carry_paths_to_the_gateways_replica_intact() {
    use crate::fib::export::FibExporter;
    use crate::fib::replica::FibReplica;
    let mut s = state();
    let mut ex: FibExporter<Queue> = FibExporter::new();
    let sub = ex
        .subscribe(Queue::default(), s.table(), s.policy(), &[], &[])
        .unwrap();
    let mut publish = |s: &State, c: Changes| {
        ex.publish(s.generation(), c);
    };
    let c = install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    publish(&s, c);
    let c = install(&mut s, ad("svc", &["router-a", "router-c"])).unwrap();
    publish(&s, c);
    let c = install(&mut s, ad("two", &["router-c"])).unwrap();
    publish(&s, c);
    let c = s.set_peer_up("router-b", false);
    publish(&s, c);
    let c = s.remove_paths_via("router-c");
    publish(&s, c);
    let c = install(&mut s, ad("three", &["router-d"])).unwrap();
    publish(&s, c);
    let events = ex.unsubscribe(sub).unwrap().0;
    let mut r = FibReplica::new(100);
    for e in events {
        r.apply(e, NOW).unwrap();
    }
    assert_eq!(r.generation(), Some(s.generation()));
    let mut want: Vec<Route> = s.table().iter().cloned().collect();
    let mut got: Vec<Route> = r.table().iter().cloned().collect();
    want.sort_by(|a, b| a.id.cmp(&b.id));
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got, want);
    let p = r.table().get(&id("svc@router-b")).unwrap();
    assert_eq!(p.next_hop.as_deref(), Some("router-b"));
    assert_eq!(
        *p.path,
        ["router-a".into(), "router-b".into()] as [Box<str>; 2]
    );
    assert_eq!(&*p.endpoint, "https://198.51.100.2:7447");
    let slot = r.table().slot_of(&id("svc@router-b")).unwrap();
    assert!(!r.table().is_peer_up(slot), "the down mark travelled");
    assert!(r.table().get(&id("svc@router-c")).is_none());
    assert_eq!(r.table().count_via("router-d"), 1);
}

#[test]
fn agentctl_shows_source_next_hop_path_and_hops_of_each_entry() {
    use crate::cli::render;
    use crate::ipc::message::RoutesQuery;
    let mut s = state();
    install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    install(&mut s, ad("svc", &["router-a", "router-c", "router-d"])).unwrap();
    let page = match s
        .handle(RequestBody::Routes(RoutesQuery::default()), NOW)
        .reply
    {
        Ok(ResponseBody::Routes(p)) => p,
        other => panic!("{other:?}"),
    };
    let text = render::routes_text(&page.routes);
    let head = text.lines().next().unwrap();
    assert!(head.contains("SOURCE  VIA       PATH"), "{text}");
    let row = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row {id}: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("svc@router-b")[3..6],
        ["peer", "router-b", "router-a>router-b"]
    );
    assert_eq!(
        row("svc@router-d")[3..6],
        ["peer", "router-d", "router-a>router-c>router-d"]
    );
    assert_eq!(row("static:printer")[3..6], ["static", "-", "-"]);
    assert_eq!(row("svc@router-b").last(), Some(&"session"));
    assert_eq!(row("static:printer").last(), Some(&"static"));
    let j = render::routes_json(&page.routes);
    let by_path = |p: &str| {
        j["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path_id"] == p)
            .unwrap_or_else(|| panic!("{p}: {j}"))
            .clone()
    };
    let b = by_path("svc@router-b");
    assert_eq!(b["route_id"], "svc", "route_id is the route's own id");
    assert_eq!(b["next_hop"], "router-b");
    assert_eq!(b["path"], serde_json::json!(["router-a", "router-b"]));
    assert_eq!(b["hops"], 2);
    assert_eq!(b["source"], "peer");
    assert_eq!(b["expires_in_s"], "permanent");
    assert_eq!(
        (b["proof"].as_str(), b["disputed"].as_bool()),
        (Some("static"), Some(false))
    );
    let st = by_path("static:printer");
    assert_eq!(st["route_id"], "static:printer");
    assert_eq!(st["next_hop"], serde_json::Value::Null);
    assert_eq!(st["hops"], 0);

    let v = lookup(&mut s, "demo.echo");
    // The view travels over IPC: the new fields survive the encoding.
    let bytes = postcard::to_allocvec(&v).unwrap();
    assert_eq!(postcard::from_bytes::<LookupView>(&bytes).unwrap(), v);
    let text = render::lookup_text("demo.echo", 1, &v, true);
    assert!(
        text.starts_with(
            "demo.echo v1: winner svc@router-b (peer via router router-b, path router-a>router-b, 2 hops, score "
        ),
        "{text}"
    );
    assert!(text.contains("RANK  ROUTE"), "{text}");
    assert!(text.contains("HOPS  PATH"), "{text}");
    let ranked: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.contains("@router-"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(ranked[0][..2], ["1", "svc@router-b"]);
    assert_eq!(ranked[0][4..7], ["static", "2", "router-a>router-b"]);
    assert_eq!(ranked[1][..2], ["2", "svc@router-d"]);
    assert_eq!(
        ranked[1][4..7],
        ["static", "3", "router-a>router-c>router-d"]
    );
    let j = render::lookup_json("demo.echo", 1, &v);
    assert_eq!(j["winner"], "svc@router-b");
    assert_eq!(j["candidates"][0]["route_id"], "svc");
    assert_eq!(j["candidates"][0]["path_id"], "svc@router-b");
    assert_eq!(j["candidates"][1]["hops"], 3);
    assert_eq!(
        j["candidates"][1]["path"],
        serde_json::json!(["router-a", "router-c", "router-d"])
    );
    assert_eq!(j["candidates"][1]["next_hop"], "router-d");
    assert_eq!(j["candidates"][1]["proof"], "static");
    // The hop count is in the score: one more hop, wH (10000) more.
    let score = |i: usize| j["candidates"][i]["score"].as_u64().unwrap();
    assert_eq!(score(1) - score(0), 10_000);
}

#[test]
fn a_static_route_added_by_reload_takes_its_id_back_from_peer_paths() {
    let mut s = state();
    install(&mut s, ad("static:scanner", &["router-a", "router-b"])).unwrap();
    install(&mut s, ad("static:scanner", &["router-a", "router-c"])).unwrap();
    install(&mut s, ad("other", &["router-b"])).unwrap();
    let more = format!(
        "{CONF}
config route 'scanner'
\toption capability 'office.scan'
\toption version '1'
\toption origin 'agent://lab/scanner'
\toption endpoint 'http://192.0.2.11:8080/invoke'
"
    );
    let (_, changes) = s.reload(load_str(&more, "test.conf")).unwrap();
    let mut removed: Vec<String> = changes
        .iter()
        .filter_map(|c| match c {
            FibChange::Remove(id) => Some(id.to_string()),
            _ => None,
        })
        .collect();
    removed.sort();
    assert_eq!(
        removed,
        ["static:scanner@router-b", "static:scanner@router-c"]
    );
    assert!(changes
        .iter()
        .any(|c| matches!(c, FibChange::Upsert(r) if r.id.as_str() == "static:scanner")));
    // Removals come before the static route they make room for.
    let upsert_at = changes
        .iter()
        .position(|c| matches!(c, FibChange::Upsert(_)))
        .unwrap();
    assert!(changes[..upsert_at]
        .iter()
        .all(|c| matches!(c, FibChange::Remove(_))));
    assert!(s.table().get(&id("other@router-b")).is_some());
    assert_eq!(
        install(&mut s, ad("static:scanner", &["router-b"]))
            .unwrap_err()
            .code(),
        "held_locally"
    );
}

#[test]
fn a_lost_sessions_kept_paths_show_as_ineligible_in_agentctl() {
    use crate::cli::render;
    use crate::ipc::message::RoutesQuery;
    let mut s = state();
    install(&mut s, ad("svc", &["router-a", "router-b"])).unwrap();
    install(&mut s, ad("svc", &["router-a", "router-c"])).unwrap();
    s.set_peer_up("router-b", false);
    let page = match s
        .handle(RequestBody::Routes(RoutesQuery::default()), NOW)
        .reply
    {
        Ok(ResponseBody::Routes(p)) => p,
        other => panic!("{other:?}"),
    };
    let j = render::routes_json(&page.routes);
    let field = |p: &str, f: &str| {
        j["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path_id"] == p)
            .unwrap_or_else(|| panic!("{p}: {j}"))[f]
            .clone()
    };
    assert_eq!(field("svc@router-b", "session_up"), false);
    assert_eq!(field("svc@router-b", "eligible"), false);
    assert_eq!(field("svc@router-c", "eligible"), true);
    assert_eq!(field("static:printer", "session_up"), true);
    let text = render::routes_text(&page.routes);
    let row = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row {id}: {text}"))
            .to_string()
    };
    assert!(row("svc@router-b").ends_with("session down"), "{text}");
    assert!(row("svc@router-c").ends_with("session"), "{text}");
}
