//! The gateway's own defences (issue 6 items 1, 2): the endpoint of every
//! FIB route is re-checked right before a new connection (a host name is
//! resolved then, and the checked address is the one connected to), and
//! forwarding loops end quickly and typed with every in-flight slot
//! released — by the via marker when a call comes back to the gateway
//! that forwarded it, and by `hop_limit` when something strips the
//! marker on the way.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::rc::Rc;

use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use agent_gw::core::Core;
use common::*;

/// A route that came from agentd without loopback leave.
fn strict(mut r: agentd::route::Route) -> agentd::route::Route {
    r.allow_loopback = false;
    r
}

/// Polls (bounded: 200 × 5 ms) until no request is in flight.
async fn inflight_drains(state: &Core) {
    for _ in 0..200 {
        if state.inflight.current() == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("{} requests still in flight", state.inflight.current());
}

#[test]
fn a_route_endpoint_is_rechecked_at_connect_time_by_name_and_by_address() {
    run(async {
        let b = backend("a", Mode::Echo).await;
        let port = b.addr.port();
        let by_name = format!("http://localhost:{port}/invoke");
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                strict(route("r-name", "ssrf.name", &by_name, 1, false)),
                strict(route("r-addr", "ssrf.addr", &b.endpoint(), 1, false)),
                strict(route(
                    "r-hex",
                    "ssrf.hex",
                    &format!("http://0x7f.1:{port}/invoke"),
                    1,
                    false,
                )),
                // The same name with the operator's leave: resolved,
                // checked, and connected to the address checked.
                route("r-lab", "ssrf.lab", &by_name, 1, false),
            ],
        )
        .await;
        for cap in ["ssrf.name", "ssrf.addr", "ssrf.hex"] {
            let r = invoke(gw, cap, &[], "{}").await;
            assert_eq!(r.status, 400, "{cap}: {:?}", r.body);
            let e = &r.json()["error"];
            assert_eq!(e["code"], "endpoint_refused", "{cap}");
            assert_eq!(e["reason"], "endpoint_loopback", "{cap}");
            assert_eq!(e["outcome"], "rejected", "{cap}");
            assert_eq!(r.headers["x-agentd-outcome"], "rejected");
        }
        assert_eq!(b.count(), 0, "nothing reached the loopback handler");
        let r = invoke(gw, "ssrf.lab", &[], r#"{"n":1}"#).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(b.count(), 1);
    });
}

#[test]
fn a_refused_candidate_is_skipped_for_the_next_one() {
    run(async {
        let b = backend("lan", Mode::Echo).await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                // Ranked first (lower latency), but refused at connect.
                strict(route(
                    "r-1",
                    "ssrf.two",
                    "http://[::ffff:127.0.0.1]:9/x",
                    0,
                    false,
                )),
                route("r-2", "ssrf.two", &b.endpoint(), 50, false),
            ],
        )
        .await;
        let r = invoke(gw, "ssrf.two", &[], "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.json()["backend"], "lan");
    });
}

#[test]
fn a_call_that_comes_back_to_its_own_gateway_is_refused_and_frees_its_slots() {
    run(async {
        let (b, gw, state) = echo_gateway(lab_config()).await;
        // The check at registration is bypassed: this test gateway's
        // ephemeral port is not among the configured listener ports.
        let mut routes = vec![route("r-a", "demo.echo", &b.endpoint(), 1, false)];
        routes.push(route(
            "r-loop",
            "ssrf.loop",
            &endpoint_of_invoke(gw),
            1,
            false,
        ));
        load_fib(&state, 2, routes);
        let r = invoke(gw, "ssrf.loop", &[], "{}").await;
        assert_eq!(r.status, 508, "{:?}", r.body);
        assert_eq!(r.error_code(), "forwarding_loop");
        inflight_drains(&state).await;
        let ok = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(ok.status, 200, "{:?}", ok.body);
        inflight_drains(&state).await;
    });
}

#[test]
fn a_loop_between_two_gateways_ends_at_the_first_one_again() {
    run(async {
        let (a, sa) = start_gateway(lab_config()).await;
        let (b, sb) = start_gateway(lab_config()).await;
        load_fib(
            &sa,
            1,
            vec![route("r-ab", "ssrf.ping", &endpoint_of_invoke(b), 1, false)],
        );
        load_fib(
            &sb,
            1,
            vec![route("r-ba", "ssrf.ping", &endpoint_of_invoke(a), 1, false)],
        );
        let r = invoke(a, "ssrf.ping", &[], "{}").await;
        assert_eq!(r.status, 508, "{:?}", r.body);
        assert_eq!(r.error_code(), "forwarding_loop");
        inflight_drains(&sa).await;
        inflight_drains(&sb).await;
    });
}

/// A handler that calls the gateway again with the body it got and none
/// of the headers (so no via marker): only `hop_limit` can stop it.
async fn laundering_proxy(gw: SocketAddr, hops: Rc<std::cell::RefCell<Vec<u64>>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::task::spawn_local(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let hops = hops.clone();
            tokio::task::spawn_local(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let hops = hops.clone();
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                        hops.borrow_mut().push(v["hop_limit"].as_u64().unwrap());
                        let r = post(
                            gw,
                            "/agent/v1/invoke",
                            &[],
                            std::str::from_utf8(&body).unwrap(),
                        )
                        .await;
                        let mut resp = Response::new(Full::new(r.body));
                        *resp.status_mut() = r.status;
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

#[test]
fn hop_limit_ends_a_loop_the_via_marker_cannot_see() {
    run(async {
        let (b, gw, state) = echo_gateway(lab_config()).await;
        let hops = Rc::new(std::cell::RefCell::new(Vec::new()));
        let proxy = laundering_proxy(gw, hops.clone()).await;
        load_fib(
            &state,
            2,
            vec![
                route("r-a", "demo.echo", &b.endpoint(), 1, false),
                route("r-p", "ssrf.proxy", &endpoint_of(proxy), 1, false),
            ],
        );
        let r = invoke(gw, "ssrf.proxy", &[], "{}").await;
        assert_eq!(r.status, 508, "{:?}", r.body);
        assert_eq!(r.error_code(), "hop_limit_exceeded");
        // The envelope came with hop_limit 8: each pass took one, the
        // eighth arrival (hop_limit 1) was refused before dispatch.
        assert_eq!(*hops.borrow(), vec![7, 6, 5, 4, 3, 2, 1]);
        inflight_drains(&state).await;
        let ok = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(ok.status, 200, "{:?}", ok.body);
    });
}

#[test]
fn hop_limit_one_is_refused_before_dispatch_and_the_cap_applies() {
    run(async {
        let cfg = agent_gw::config::GatewayConfig {
            hop_limit: 3,
            ..lab_config()
        };
        let (b, gw, _state) = echo_gateway(cfg).await;
        let one =
            envelope("demo.echo", "lab", "{}").replace(r#""hop_limit":8"#, r#""hop_limit":1"#);
        let r = post(gw, "/agent/v1/invoke", &[], &one).await;
        assert_eq!(r.status, 508, "{:?}", r.body);
        assert_eq!(r.error_code(), "hop_limit_exceeded");
        assert_eq!(r.json()["error"]["outcome"], "rejected");
        assert_eq!(b.count(), 0);
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let seen: serde_json::Value = serde_json::from_slice(&b.seen.borrow()[0].body).unwrap();
        assert_eq!(seen["hop_limit"], 3, "8 - 1, capped at gateway.hop_limit 3");
        let via = b.seen.borrow()[0].headers["x-agentd-via"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(via.contains(";nonce="), "{via}");
    });
}

#[test]
fn extra_envelope_members_never_reach_the_handler() {
    run(async {
        let (b, gw, _state) = echo_gateway(lab_config()).await;
        let env = envelope(
            "demo.echo",
            "lab",
            r#"{"big":123456789012345678901234567890}"#,
        )
        .replacen('{', r#"{"route_id":"r-other","admin":{"x":1},"#, 1);
        let r = post(gw, "/agent/v1/invoke", &[], &env).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let seen = String::from_utf8(b.seen.borrow()[0].body.to_vec()).unwrap();
        assert!(
            !seen.contains("admin") && !seen.contains("r-other"),
            "{seen}"
        );
        assert!(
            seen.contains(r#""payload":{"big":123456789012345678901234567890}"#),
            "{seen}"
        );
    });
}

/// The gateway's own invoke URL at `gw`.
fn endpoint_of_invoke(gw: SocketAddr) -> String {
    format!("http://{gw}/agent/v1/invoke")
}
