//! Peer paths in the gateway's FIB before the peer data plane exists
//! (issue 8): a selected peer path is refused before dispatch as never
//! delivered, so the call moves on to a local replica; with nothing else
//! the caller gets `not_delivered`, and nothing is ever sent to the peer's
//! address (no HTTP/1.1 call, no connection).

mod common;

use common::*;

use agentd::fib::{FibChange, FibEvent};
use agentd::route::{Lease, Route, RouteId, RouteSource};
use agentd::time::Millis;

/// The path to `base` learned from `hop`, whose data plane is `addr`
/// (an https URL, as agentd exports it). Latency 0: better ranked than
/// the local replica below despite its hop.
fn peer_path(base: &str, hop: &str, data_plane: std::net::SocketAddr) -> Route {
    let mut r = route(base, "demo.echo", "unused", 0, true);
    r.id = RouteId::via(&r.id, hop).unwrap();
    r.source = RouteSource::Peer;
    r.origin = "agent://lab/remote".into();
    r.endpoint = format!("https://{data_plane}").into();
    r.path = vec!["router-a".into(), hop.into()].into();
    r.next_hop = Some(hop.into());
    r.lease = Lease::Permanent;
    r.allow_loopback = false;
    r
}

#[test]
fn a_selected_peer_path_moves_the_call_to_the_local_replica() {
    run(async {
        let local = backend("local", Mode::Echo).await;
        // The peer's "data plane": a real listener that must see nothing.
        let peer = backend("peer", Mode::Echo).await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                peer_path("svc", "router-b", peer.addr),
                route("r-local", "demo.echo", &local.endpoint(), 50, false),
            ],
        )
        .await;
        // The peer path ranks first...
        let r = post(
            gw,
            "/agent/v1/route",
            &[],
            &envelope("demo.echo", "lab", "{}"),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.json()["route"]["route_id"], "svc@router-b");
        assert_eq!(r.json()["route"]["source"], "peer");
        // ...but the call is served by the local replica.
        let r = invoke(gw, "demo.echo", &[], r#"{"x":1}"#).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.headers["x-agentd-route-id"], "r-local");
        assert_eq!(r.json()["backend"], "local");
        assert_eq!(local.count(), 1);
        assert_eq!(peer.connections.get(), 0, "nothing went to the peer");
    });
}

#[test]
fn only_peer_paths_is_a_typed_not_delivered_with_nothing_sent() {
    run(async {
        let peer = backend("peer", Mode::Echo).await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                peer_path("svc", "router-b", peer.addr),
                peer_path("svc", "router-c", peer.addr),
            ],
        )
        .await;
        let r = invoke(gw, "demo.echo", &[("idempotency-key", "k")], "{}").await;
        assert_eq!(r.status, 502, "{:?}", r.body);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "not_delivered", "{e}");
        assert_eq!(e["outcome"], "not_delivered", "{e}");
        assert_eq!(e["capability"], "demo.echo");
        let msg = e["message"].as_str().unwrap();
        // No link (ARPX session) to either next hop: failed fast, typed.
        assert!(
            msg.contains(
                "no data connection to router router-c: its ARPX session is not established"
            ),
            "{msg}"
        );
        // Both paths were tried in rank order and refused before dispatch.
        assert!(msg.contains("@router-"), "{msg}");
        assert_eq!(peer.connections.get(), 0, "no connection to the peer");
        assert_eq!(peer.count(), 0);
    });
}

#[test]
fn peer_up_flips_only_that_peers_paths_in_the_replica() {
    run(async {
        let local = backend("local", Mode::Echo).await;
        let peer = backend("peer", Mode::Echo).await;
        let (_gw, state) = gateway_with(
            lab_config(),
            vec![
                peer_path("svc", "router-b", peer.addr),
                peer_path("svc", "router-c", peer.addr),
                route("r-local", "demo.echo", &local.endpoint(), 50, false),
            ],
        )
        .await;
        let ids = |state: &agent_gw::core::Core| -> Vec<String> {
            let q = agentd::select::Query {
                capability: "demo.echo",
                version: 1,
                tenant: "lab",
                source: None,
                target_agent: None,
            };
            let fib = state.fib.borrow();
            let ranked = fib.decide(&q, Millis::now()).unwrap();
            let mut v: Vec<String> = ranked
                .iter()
                .map(|r| r.candidate.route_id.to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(ids(&state), ["r-local", "svc@router-b", "svc@router-c"]);
        let down = FibEvent::Delta {
            base: 1,
            generation: 2,
            changes: vec![FibChange::PeerUp {
                router_id: "router-b".into(),
                up: false,
            }],
        };
        state.fib.borrow_mut().apply(down, Millis::now()).unwrap();
        assert_eq!(ids(&state), ["r-local", "svc@router-c"]);
        let table = state.fib.borrow();
        let table = table.replica().table();
        assert_eq!(table.count_via("router-b"), 1, "kept, only ineligible");
        assert_eq!(table.paths_via("router-c").count(), 1);
    });
}
