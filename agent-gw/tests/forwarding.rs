//! Invocation through a real gateway to real handler endpoints: headers
//! the handler receives, typed refusals, keep-alive reuse, retry rules
//! (DESIGN §7) and deadlines.

mod common;

use common::*;

#[test]
fn invoke_reaches_the_handler_with_route_and_deadline_headers() {
    run(async {
        let (b, gw, _state) = echo_gateway(lab_config()).await;
        let env = envelope("demo.echo", "lab", r#"{"text":"hi"}"#);
        let r = post(
            gw,
            "/agent/v1/invoke",
            &[("x-agentd-timeout-ms", "5000"), ("idempotency-key", "k1")],
            &env,
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.headers["x-agentd-route-id"], "r-a");
        // A whole JSON answer keeps fixed-length framing.
        assert_eq!(
            r.headers["content-length"],
            r.body.len().to_string().as_str()
        );
        // The handler's JSON comes back unchanged; the envelope went through
        // byte for byte (auth off) except for the hop this forward took.
        assert_eq!(r.json()["backend"], "a");
        let seen = b.seen.borrow()[0].clone();
        let forwarded = env.replace(r#""hop_limit":8"#, r#""hop_limit":7"#);
        assert_eq!(seen.body, forwarded.as_bytes());
        assert_eq!(seen.headers["x-agentd-route-id"], "r-a");
        assert_eq!(seen.headers["x-nexus-route-id"], "r-a");
        assert_eq!(seen.headers["idempotency-key"], "k1");
        assert_eq!(
            seen.headers["content-length"],
            forwarded.len().to_string().as_str()
        );
        assert!(seen.headers.get("transfer-encoding").is_none());
        let left: u64 = seen.headers["x-agentd-deadline-ms"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(left > 0 && left <= 5000, "deadline header {left}");
    });
}

#[test]
fn nothing_eligible_is_an_immediate_typed_refusal_naming_the_capability() {
    run(async {
        let b = backend("a", Mode::Echo).await;
        let (gw, state) = start_gateway(lab_config()).await;
        let mut expired = route("r-old", "demo.old", &b.endpoint(), 1, false);
        expired.lease = agentd::route::Lease::Until(agentd::time::Millis(1));
        load_fib(
            &state,
            1,
            vec![route("r-a", "demo.echo", &b.endpoint(), 1, false), expired],
        );

        let r = invoke(gw, "demo.missing", &[], "{}").await;
        assert_eq!(r.status, 404);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "no_route");
        assert_eq!(e["capability"], "demo.missing");
        assert_eq!(e["reason"], "capability_version");
        assert_eq!(e["outcome"], "rejected");

        // A tenant the route is not open to.
        let r = post(
            gw,
            "/agent/v1/invoke",
            &[],
            &envelope("demo.echo", "stranger", "{}"),
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.json()["error"]["reason"].as_str()),
            (404, Some("tenant_access"))
        );
        // A route whose lease already ended never enters the replica.
        let r = invoke(gw, "demo.old", &[], "{}").await;
        assert_eq!(r.json()["error"]["reason"], "capability_version");
        assert_eq!(state.fib.borrow().routes(), 1);
        assert_eq!(b.count(), 0);
    });
}

#[test]
fn before_the_first_fib_invocations_are_refused_as_unavailable() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 503);
        assert_eq!(r.error_code(), "control_plane_unavailable");
    });
}

#[test]
fn keep_alive_pool_reuses_one_connection_for_sequential_calls() {
    run(async {
        let (b, gw, _state) = echo_gateway(lab_config()).await;
        for i in 0..5 {
            let r = invoke(gw, "demo.echo", &[], &i.to_string()).await;
            assert_eq!(r.status, 200);
        }
        assert_eq!(b.count(), 5);
        assert_eq!(
            b.connections.get(),
            1,
            "calls should share one pooled connection"
        );
    });
}

#[test]
fn connection_refused_moves_to_the_next_candidate() {
    run(async {
        let dead = closed_port().await;
        let b = backend("second", Mode::Echo).await;
        let (gw, state) = start_gateway(lab_config()).await;
        // The dead endpoint ranks first (lower latency).
        load_fib(
            &state,
            1,
            vec![
                route("r-dead", "demo.echo", &endpoint_of(dead), 1, false),
                route("r-live", "demo.echo", &b.endpoint(), 50, false),
            ],
        );
        // Not idempotent, no key: moving is still safe, nothing was delivered.
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.headers["x-agentd-route-id"], "r-live");
        assert_eq!(b.count(), 1);
    });
}

#[test]
fn all_candidates_refusing_is_not_delivered() {
    run(async {
        let (d1, d2) = (closed_port().await, closed_port().await);
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                route("r-1", "demo.echo", &endpoint_of(d1), 1, false),
                route("r-2", "demo.echo", &endpoint_of(d2), 2, false),
            ],
        )
        .await;
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 502);
        assert_eq!(r.error_code(), "not_delivered");
        assert_eq!(r.json()["error"]["outcome"], "not_delivered");
        assert_eq!(r.headers["x-agentd-outcome"], "not_delivered");
    });
}

/// A gateway with two candidates for `capability`: first a handler that
/// takes each request and closes without answering (possible delivery),
/// then a live echo backend. Returns the gateway, the first handler's
/// request count and the live backend.
async fn swallow_then_live(
    capability: &str,
    idempotent: bool,
) -> (
    std::net::SocketAddr,
    std::rc::Rc<std::cell::Cell<usize>>,
    Backend,
) {
    let (swallow, got) = swallowing_backend().await;
    let b = backend("second", Mode::Echo).await;
    let (gw, _state) = gateway_with(
        lab_config(),
        vec![
            route(
                "r-swallow",
                capability,
                &endpoint_of(swallow),
                1,
                idempotent,
            ),
            route("r-live", capability, &b.endpoint(), 50, idempotent),
        ],
    )
    .await;
    (gw, got, b)
}

#[test]
fn non_idempotent_call_is_not_retried_after_possible_delivery() {
    run(async {
        let (gw, got, b) = swallow_then_live("demo.write", false).await;
        // Even with a key: the route's contract is not idempotent.
        let r = invoke(gw, "demo.write", &[("idempotency-key", "k")], "{}").await;
        assert_eq!(r.status, 502, "{:?}", r.body);
        assert_eq!(r.error_code(), "upstream_unknown");
        assert_eq!(r.json()["error"]["outcome"], "unknown");
        assert_eq!(got.get(), 1, "the first handler received the request");
        assert_eq!(b.count(), 0, "the request must not be sent twice");
    });
}

#[test]
fn idempotent_call_with_key_moves_on_after_possible_delivery() {
    run(async {
        let (gw, got, b) = swallow_then_live("kv.get", true).await;
        // Idempotent by contract but no key: not moved.
        let r = invoke(gw, "kv.get", &[], "{}").await;
        assert_eq!(r.error_code(), "upstream_unknown");
        assert_eq!(b.count(), 0);
        // With a key: moved to the next candidate of the same snapshot.
        let r = invoke(gw, "kv.get", &[("idempotency-key", "k2")], "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.headers["x-agentd-route-id"], "r-live");
        assert_eq!(got.get(), 2);
        assert_eq!(b.count(), 1);
        // Async work never moves once possibly delivered: the task fails
        // with the typed outcome instead.
        let r = invoke(
            gw,
            "kv.get",
            &[("idempotency-key", "k3"), ("prefer", "respond-async")],
            "{}",
        )
        .await;
        let (id, token) = task_handle(&r);
        let status = settle(gw, &id, &token, &[]).await;
        assert_eq!(status["status"], "failed", "{status}");
        assert_eq!(status["error"]["code"], "upstream_unknown");
        assert_eq!(b.count(), 1);
    });
}

#[test]
fn caller_deadline_bounds_the_whole_call() {
    run(async {
        let b = backend("slow", Mode::Hold).await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![route("r-slow", "demo.slow", &b.endpoint(), 1, false)],
        )
        .await;
        let r = invoke(gw, "demo.slow", &[("x-agentd-timeout-ms", "200")], "{}").await;
        assert_eq!(r.status, 504);
        assert_eq!(r.error_code(), "deadline_exceeded");
        assert_eq!(r.json()["error"]["outcome"], "unknown");
        assert_eq!(b.count(), 1);
        let left: u64 = b.seen.borrow()[0].headers["x-agentd-deadline-ms"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(left <= 200);
        b.release.notify_waiters();
    });
}

#[test]
fn route_lookup_lists_the_ordered_candidates() {
    run(async {
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                route("r-slow", "demo.echo", "http://192.0.2.1:80/x", 90, false),
                route("r-fast", "demo.echo", "http://192.0.2.2:80/x", 5, false),
            ],
        )
        .await;
        let r = post(
            gw,
            "/agent/v1/route",
            &[],
            &envelope("demo.echo", "lab", "{}"),
        )
        .await;
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["route"]["route_id"], "r-fast");
        assert_eq!(v["candidates"][1]["route_id"], "r-slow");
        assert!(v["candidates"][0]["score"].as_u64() < v["candidates"][1]["score"].as_u64());
    });
}

#[test]
fn deadline_also_bounds_a_handler_that_stalls_mid_answer() {
    run(async {
        let stall = stalling_backend().await;
        let (gw, state) = gateway_with(
            lab_config(),
            vec![route(
                "r-stall",
                "demo.stall",
                &endpoint_of(stall),
                1,
                false,
            )],
        )
        .await;
        let env = envelope("demo.stall", "lab", "{}");
        let raw = format!(
            "POST /agent/v1/invoke HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\nx-agentd-timeout-ms: 300\r\ncontent-length: {}\r\n\r\n{env}",
            env.len()
        );
        // The gateway relays the head, then cuts the answer at the deadline
        // and closes: the client never receives the promised 100 bytes.
        let answer = raw_exchange(gw, raw.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        assert!(body.len() < 100, "{answer}");
        assert_eq!(
            state.inflight.current(),
            0,
            "the in-flight slot is released"
        );
    });
}

#[test]
fn leases_expire_at_their_deadline_while_agentd_is_unreachable() {
    run(async {
        let b = backend("a", Mode::Echo).await;
        let (gw, state) = start_gateway(lab_config()).await;
        // The sync loop runs with no agentd to talk to (the socket does
        // not exist): expiry must still happen on the replica's own timer.
        tokio::task::spawn_local(agent_gw::core::fib_follow::run(state.clone()));
        let mut short = route("r-short", "demo.echo", &b.endpoint(), 1, false);
        let deadline = agentd::time::Millis::now().saturating_add_ms(300);
        short.lease = agentd::route::Lease::Until(deadline);
        load_fib(
            &state,
            1,
            vec![
                short,
                route("r-long", "demo.other", &b.endpoint(), 1, false),
            ],
        );
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 200);
        // Bounded wait for the timer-driven sweep after the deadline.
        for _ in 0..300 {
            if state.fib.borrow().routes() == 1 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(
            agentd::time::Millis::now() >= deadline,
            "removed before its deadline"
        );
        assert_eq!(
            state.fib.borrow().routes(),
            1,
            "the expired route was swept"
        );
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.error_code(), "no_route");
        assert!(!state.control.is_up());
    });
}
