//! Mesh-wide ownership of origins, sans-IO (DESIGN §3 "Origins are owned
//! mesh-wide"): claims of an origin another router holds are refused
//! unless proven by a tenant-signed token, static routes likewise, and
//! races between origin routers are decided by one rule that every router
//! applies to the same facts (origin router, proof).

use super::state::{PeerPath, State};
use crate::config::load_str;
use crate::fib::FibChange;
use crate::ipc::message::{
    IpcError, LookupQuery, LookupView, Registration, Renewal, RequestBody, ResponseBody,
    RoutesQuery,
};
use crate::owner::{Caller, Proof, ORIGIN_OWNED_ELSEWHERE};
use crate::route::{Access, Attributes, Effect, OriginProof, RouteId};
use crate::time::Millis;

const ECHO: &str = "agent://lab/echo";

fn conf(router_id: &str, extra: &str) -> String {
    format!(
        "
config agentd 'main'
\toption router_id '{router_id}'
\toption min_lease '5'
\toption default_lease '30'
\toption max_lease '3600'
\toption max_routes '100'
{extra}"
    )
}

fn state(router_id: &str) -> State {
    let rt = load_str(&conf(router_id, ""), "test.conf");
    assert!(rt.is_ok(), "{:?}", rt.err());
    State::start(rt, "test.conf", "agentd test", Millis(0))
}

/// A path of `ECHO`'s `demo.echo` (route `route_id`) claimed by the origin
/// router `path[0]` with `proof`, advertised by `path`'s last router.
fn path(route_id: &str, path: &[&str], proof: OriginProof) -> PeerPath {
    PeerPath {
        route_id: RouteId::new(route_id).unwrap(),
        capability: "demo.echo".into(),
        version: 1,
        origin_agent: ECHO.into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes {
            latency_ms: 1,
            cost_micros: 0,
            load_permille: 0,
            trust: 50,
        },
        access: Access::default(),
        effect: Some(Effect::Read),
        idempotent: true,
        path: path.iter().map(|&p| p.into()).collect(),
        next_hop: (*path.last().unwrap()).into(),
        next_hop_address: "198.51.100.2".into(),
        next_hop_data_port: 7447,
        healthy: true,
        proof,
        source: crate::route::RouteSource::Peer,
    }
}

fn learn(s: &mut State, p: PeerPath) -> Vec<FibChange> {
    s.upsert_peer_path(p.into_route().unwrap()).unwrap()
}

fn registration(caller: Option<Caller>, port: u16) -> Registration {
    Registration {
        route_id: None,
        capability: "demo.echo".into(),
        version: 1,
        origin: ECHO.into(),
        endpoint: format!("http://192.0.2.20:{port}/invoke").into(),
        tenant: "lab".into(),
        region: "local".into(),
        attrs: Attributes::default(),
        access: Access::default(),
        contract: None,
        lease_seconds: Some(10),
        caller,
        owner: None,
        public_ipv6: false,
    }
}

fn boot(src: &str) -> Caller {
    Caller {
        source: src.parse().unwrap(),
        proof: Proof::Bootstrap {
            subject: ECHO.into(),
        },
    }
}

fn jwt() -> Caller {
    Caller {
        source: "192.0.2.30".parse().unwrap(),
        proof: Proof::Token {
            subject: ECHO.into(),
            key: [7; 32],
        },
    }
}

fn register(s: &mut State, reg: Registration, now: u64) -> Result<RouteId, IpcError> {
    match s.handle(RequestBody::Register(reg), Millis(now)).reply {
        Ok(ResponseBody::Lease(g)) => Ok(g.route_id),
        Ok(other) => panic!("register answered {other:?}"),
        Err(e) => Err(e),
    }
}

/// The router a refusal names, after checking it is the typed 403.
fn held_by(r: Result<impl std::fmt::Debug, IpcError>) -> String {
    match r {
        Err(e @ IpcError::OwnedElsewhere { .. }) => {
            assert_eq!((e.code(), e.http_status()), ("forbidden", 403));
            let IpcError::OwnedElsewhere { router, .. } = &e else {
                unreachable!()
            };
            assert!(e.to_string().contains(&**router), "{e}");
            router.to_string()
        }
        other => panic!("expected {ORIGIN_OWNED_ELSEWHERE}, got {other:?}"),
    }
}

fn disputed(s: &State, id: &str) -> bool {
    s.table()
        .get(&RouteId::parse_table_id(id).unwrap())
        .unwrap_or_else(|| panic!("{id} in the table"))
        .disputed
}

fn explain(s: &mut State, target: Option<&str>) -> LookupView {
    let query = LookupQuery {
        capability: "demo.echo".into(),
        version: 1,
        tenant: "lab".into(),
        source_agent: None,
        target_agent: target.map(Into::into),
    };
    match s
        .handle(
            RequestBody::Lookup {
                query,
                explain: true,
            },
            Millis(1_000),
        )
        .reply
    {
        Ok(ResponseBody::Lookup(v)) => v,
        other => panic!("lookup answered {other:?}"),
    }
}

#[test]
fn an_origin_held_by_another_router_is_refused_to_every_unproven_claim() {
    let mut c = state("router-c");
    learn(
        &mut c,
        path("r-a", &["router-a", "router-b"], OriginProof::Bootstrap),
    );
    // Trusted-LAN bootstrap, auth `none`, an administrator over IPC.
    for caller in [
        Some(boot("192.0.2.66")),
        Some(Caller::address("192.0.2.66".parse().unwrap())),
        None,
    ] {
        assert_eq!(
            held_by(register(&mut c, registration(caller.clone(), 9000), 0)),
            "router-a",
            "{caller:?}"
        );
    }
    assert_eq!(c.table().len(), 1, "nothing was added");
    // Only a tenant-signed token for the origin adds a replica here.
    let replica = register(&mut c, registration(Some(jwt()), 9001), 0).unwrap();
    let r = c.table().get(&replica).unwrap();
    assert_eq!((r.proof, r.disputed), (OriginProof::Jwt, false));
}

#[test]
fn routes_and_explain_show_each_routes_proof() {
    let mut c = state("router-c");
    learn(
        &mut c,
        path("r-a", &["router-a", "router-b"], OriginProof::Bootstrap),
    );
    let v = explain(&mut c, Some(ECHO));
    assert_eq!(v.candidates.len(), 1);
    assert_eq!(v.candidates[0].proof, OriginProof::Bootstrap);
    let rows = match c
        .handle(RequestBody::Routes(RoutesQuery::default()), Millis(1_000))
        .reply
    {
        Ok(ResponseBody::Routes(p)) => p.routes,
        other => panic!("{other:?}"),
    };
    assert_eq!(rows[0].proof, OriginProof::Bootstrap);
    assert!(!rows[0].disputed && rows[0].eligible());
}

#[test]
fn a_static_route_naming_an_origin_held_elsewhere_is_refused_at_reload() {
    let mut c = state("router-c");
    learn(
        &mut c,
        path("r-a", &["router-a", "router-b"], OriginProof::Bootstrap),
    );
    let stolen = "
config route 'stolen'
\toption capability 'demo.echo'
\toption version '1'
\toption origin 'agent://lab/echo'
\toption endpoint 'http://192.0.2.99:8080/invoke'
\toption trust '100'
";
    let err = c
        .reload(load_str(&conf("router-c", stolen), "test.conf"))
        .unwrap_err();
    let msg = err.to_string();
    for part in ["stolen", ORIGIN_OWNED_ELSEWHERE, "router-a", ECHO] {
        assert!(msg.contains(part), "{part} in {msg}");
    }
    assert!(c
        .config_error()
        .is_some_and(|e| e.contains(ORIGIN_OWNED_ELSEWHERE)));
    assert!(c
        .table()
        .get(&RouteId::new("static:stolen").unwrap())
        .is_none());
    // Once router-a's route is withdrawn the same file applies.
    c.remove_peer_path(&RouteId::parse_table_id("r-a@router-b").unwrap());
    assert!(c
        .reload(load_str(&conf("router-c", stolen), "test.conf"))
        .is_ok());
}

#[test]
fn an_agent_that_moved_registers_once_the_old_routers_routes_are_withdrawn() {
    let mut c = state("router-c");
    learn(
        &mut c,
        path("r-a", &["router-a", "router-b"], OriginProof::Bootstrap),
    );
    assert_eq!(
        held_by(register(
            &mut c,
            registration(Some(boot("192.0.2.10")), 9000),
            0
        )),
        "router-a"
    );
    // The lease at router-a ended (or the agent unregistered): withdrawn.
    c.remove_peer_path(&RouteId::parse_table_id("r-a@router-b").unwrap());
    assert!(register(&mut c, registration(Some(boot("192.0.2.10")), 9000), 0).is_ok());
    // A session loss that takes every path of the peer frees it too.
    let mut c2 = state("router-c");
    learn(
        &mut c2,
        path("r-a", &["router-a", "router-b"], OriginProof::Bootstrap),
    );
    c2.remove_paths_via("router-b");
    assert!(register(&mut c2, registration(Some(boot("192.0.2.10")), 9000), 0).is_ok());
}

/// Claims of ECHO registered at router-a and router-c before either knew
/// of the other, seen from each of them and from router-b in between: the
/// smallest origin router id wins everywhere when nothing is proven.
#[test]
fn an_unproven_race_goes_to_the_smallest_origin_router_everywhere() {
    // At router-c (the loser): its own route is marked, the FIB learns it.
    let mut c = state("router-c");
    let ours = register(&mut c, registration(Some(boot("192.0.2.10")), 9000), 0).unwrap();
    let changes = learn(
        &mut c,
        path("r-a", &["router-a", "router-b"], OriginProof::Bootstrap),
    );
    assert!(disputed(&c, ours.as_str()));
    assert!(!disputed(&c, "r-a@router-b"));
    assert!(
        changes
            .iter()
            .any(|ch| matches!(ch, FibChange::Upsert(r) if r.id == ours && r.disputed)),
        "{changes:?}"
    );
    let v = explain(&mut c, Some(ECHO));
    assert_eq!(v.candidates[0].route_id.as_str(), "r-a@router-b");
    assert_eq!(v.rejections.get("origin_disputed"), Some(&1));
    // agentctl routes shows the loser as such (human and JSON).
    let rows = match c
        .handle(RequestBody::Routes(RoutesQuery::default()), Millis(1_000))
        .reply
    {
        Ok(ResponseBody::Routes(p)) => p.routes,
        other => panic!("{other:?}"),
    };
    let text = crate::cli::render::routes_text(&rows);
    let row = text
        .lines()
        .find(|l| l.starts_with(ours.as_str()))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(" bootstrap/disputed "), "{text}");
    let json = crate::cli::render::routes_json(&rows);
    let mine = json["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path_id"] == ours.as_str())
        .unwrap();
    assert_eq!(
        (&mine["proof"], &mine["disputed"], &mine["eligible"]),
        (
            &serde_json::json!("bootstrap"),
            &serde_json::json!(true),
            &serde_json::json!(false)
        )
    );
    // Its agent learns it at the next renewal, naming the winner.
    let renew = Renewal {
        caller: Some(boot("192.0.2.10")),
        ..Renewal::of(ours.clone())
    };
    assert_eq!(
        held_by(c.handle(RequestBody::Renew(renew), Millis(1_000)).reply),
        "router-a"
    );
    // ... and so does a re-registration of the same route.
    assert_eq!(
        held_by(register(
            &mut c,
            registration(Some(boot("192.0.2.10")), 9000),
            1_000
        )),
        "router-a"
    );

    // At router-a (the winner): the other claim is the one marked.
    let mut a = state("router-a");
    let mine = register(&mut a, registration(Some(boot("192.0.2.20")), 9000), 0).unwrap();
    learn(
        &mut a,
        path("r-c", &["router-c", "router-b"], OriginProof::Bootstrap),
    );
    assert!(!disputed(&a, mine.as_str()));
    assert!(disputed(&a, "r-c@router-b"));
    let renew = Renewal {
        caller: Some(boot("192.0.2.20")),
        ..Renewal::of(mine)
    };
    assert!(a
        .handle(RequestBody::Renew(renew), Millis(1_000))
        .reply
        .is_ok());

    // At router-b, which hears both: the same verdict.
    let mut b = state("router-b");
    learn(&mut b, path("r-c", &["router-c"], OriginProof::Bootstrap));
    learn(&mut b, path("r-a", &["router-a"], OriginProof::Bootstrap));
    assert!(disputed(&b, "r-c@router-c"));
    assert!(!disputed(&b, "r-a@router-a"));

    // The loser's route ends: router-b's verdict clears, nothing is left
    // marked.
    let changes = b.remove_peer_path(&RouteId::parse_table_id("r-c@router-c").unwrap());
    assert_eq!(changes.len(), 1);
    assert!(!disputed(&b, "r-a@router-a"));
}

#[test]
fn a_proven_claim_beats_every_unproven_one_and_proven_replicas_coexist() {
    // router-z's claim is signed by the tenant: it wins although router-c
    // sorts first, and target_agent never picks the unproven one.
    let mut c = state("router-c");
    let ours = register(&mut c, registration(Some(boot("192.0.2.10")), 9000), 0).unwrap();
    learn(
        &mut c,
        path("r-z", &["router-z", "router-b"], OriginProof::Jwt),
    );
    assert!(disputed(&c, ours.as_str()));
    assert!(!disputed(&c, "r-z@router-b"));
    let v = explain(&mut c, Some(ECHO));
    assert_eq!(v.candidates.len(), 1);
    assert_eq!(v.candidates[0].proof, OriginProof::Jwt);

    // Proven claims on two routers: replicas, both eligible; an unproven
    // third one loses.
    let mut b = state("router-b");
    learn(&mut b, path("r-z", &["router-z"], OriginProof::Jwt));
    learn(&mut b, path("r-y", &["router-y"], OriginProof::Jwt));
    learn(&mut b, path("r-a", &["router-a"], OriginProof::Static));
    assert!(!disputed(&b, "r-z@router-z"));
    assert!(!disputed(&b, "r-y@router-y"));
    assert!(disputed(&b, "r-a@router-a"));
    assert_eq!(explain(&mut b, Some(ECHO)).candidates.len(), 2);
    // A proven local claim is a replica too, whoever holds the origin.
    assert!(register(&mut b, registration(Some(jwt()), 9002), 0).is_ok());
}

#[test]
fn a_rule_can_require_a_proof_level() {
    let strict = "
config rule 'strict'
\toption min_proof 'jwt'
";
    let rt = load_str(&conf("router-b", strict), "test.conf");
    assert!(rt.is_ok(), "{:?}", rt.err());
    let mut b = State::start(rt, "test.conf", "agentd test", Millis(0));
    learn(&mut b, path("r-a", &["router-a"], OriginProof::Static));
    let v = explain(&mut b, None);
    assert!(v.candidates.is_empty());
    assert_eq!(v.refusal.as_deref(), Some("min_proof"));
    assert_eq!(v.rejections.get("min_proof"), Some(&1));
    // The same claim proven by a token passes.
    learn(&mut b, path("r-a", &["router-a"], OriginProof::Jwt));
    assert_eq!(explain(&mut b, None).candidates.len(), 1);
}
