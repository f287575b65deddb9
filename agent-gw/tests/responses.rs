//! What of a handler's answer reaches the caller: header filtering, the
//! response-head bound, redirects as typed errors, and the task status
//! naming its route from the moment of dispatch.

mod common;

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use common::*;

/// A raw handler that answers every request with `answer` (exact bytes)
/// and counts the requests it read.
async fn canned_backend(answer: Vec<u8>) -> (SocketAddr, Rc<Cell<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Rc::new(Cell::new(0));
    let g = got.clone();
    let answer = Rc::new(answer);
    tokio::task::spawn_local(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (g, answer) = (g.clone(), answer.clone());
            tokio::task::spawn_local(async move {
                while read_request(&mut stream).await.is_some() {
                    g.set(g.get() + 1);
                    if stream.write_all(&answer).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, got)
}

/// A gateway whose first candidate for idempotent `kv.get` is `first`
/// and whose second is a live echo backend.
async fn first_then_echo(first: SocketAddr) -> (SocketAddr, Backend) {
    let b = backend("b", Mode::Echo).await;
    let (gw, _state) = gateway_with(
        lab_config(),
        vec![
            route("r-first", "kv.get", &endpoint_of(first), 1, true),
            route("r-second", "kv.get", &b.endpoint(), 50, true),
        ],
    )
    .await;
    (gw, b)
}

#[test]
fn only_the_relayed_handler_headers_reach_the_caller() {
    run(async {
        let body = r#"{"ok":true}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\n\
             content-type: application/json\r\n\
             content-length: {}\r\n\
             connection: keep-alive, x-hop\r\n\
             keep-alive: timeout=5\r\n\
             x-hop: secret\r\n\
             proxy-authenticate: Basic\r\n\
             upgrade: h2c\r\n\
             trailer: x-sum\r\n\
             x-agentd-route-id: r-forged\r\n\
             x-agentd-outcome: rejected\r\n\
             set-cookie: sysauth=attacker; Path=/\r\n\
             www-authenticate: Basic realm=router\r\n\
             alt-svc: h2=\":443\"\r\n\
             x-nexus-task-id: t-77\r\n\
             cache-control: no-store\r\n\
             traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\
             \r\n{body}",
            body.len()
        );
        let (h, _got) = canned_backend(answer.into_bytes()).await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![route("r-a", "demo.echo", &endpoint_of(h), 1, false)],
        )
        .await;
        let r = invoke(gw, "demo.echo", &[], "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body, body.as_bytes());
        let h = &r.headers;
        assert_eq!(h["x-agentd-route-id"], "r-a", "only the gateway sets it");
        assert!(h.get("x-agentd-outcome").is_none());
        for dropped in [
            "x-hop",
            "keep-alive",
            "proxy-authenticate",
            "upgrade",
            "trailer",
            "set-cookie",
            "www-authenticate",
            "alt-svc",
        ] {
            assert!(h.get(dropped).is_none(), "{dropped} was relayed: {h:?}");
        }
        assert_eq!(h["content-type"], "application/json");
        assert_eq!(h["x-nexus-task-id"], "t-77");
        assert_eq!(h["cache-control"], "no-store");
        assert!(h.get("traceparent").is_some());
    });
}

#[test]
fn an_oversized_handler_head_is_an_error_and_never_retried() {
    // 24 KiB of headers: past the 16 KiB response-head bound, within the
    // read buffer (the gateway's own check); 80 KiB: past both (hyper's).
    for kib in [24, 80] {
        oversized_head(kib);
    }
}

fn oversized_head(kib: usize) {
    run(async {
        let mut answer = String::from("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n");
        for i in 0..kib {
            answer.push_str(&format!("x-pad-{i}: {}\r\n", "p".repeat(1000)));
        }
        answer.push_str("content-length: 2\r\n\r\n{}");
        let (h, got) = canned_backend(answer.into_bytes()).await;
        let (gw, b) = first_then_echo(h).await;
        // Idempotent with a key: a retry would be allowed before any
        // response byte, but the handler did answer.
        let r = invoke(gw, "kv.get", &[("idempotency-key", "k1")], "{}").await;
        assert_eq!(r.status, 502, "{kib} KiB: {:?}", r.body);
        let e = &r.json()["error"];
        assert_eq!(e["code"], "upstream_error");
        assert_eq!(e["outcome"], "error");
        assert_eq!(e["route_id"], "r-first");
        assert!(
            e["message"].as_str().unwrap().contains("16384"),
            "message names the bound: {e}"
        );
        assert_eq!(r.headers["x-agentd-outcome"], "error");
        assert_eq!(got.get(), 1);
        assert_eq!(b.count(), 0, "an answered call must not move on");
    });
}

#[test]
fn a_handler_redirect_is_a_typed_error_naming_the_location() {
    run(async {
        let answer =
            b"HTTP/1.1 302 Found\r\nlocation: http://192.0.2.9/ubus\r\ncontent-length: 0\r\n\r\n";
        let (h, got) = canned_backend(answer.to_vec()).await;
        let (gw, b) = first_then_echo(h).await;
        let r = invoke(gw, "kv.get", &[("idempotency-key", "k1")], "{}").await;
        assert_eq!(r.status, 502, "never relayed as a redirect: {:?}", r);
        assert!(r.headers.get("location").is_none());
        let e = &r.json()["error"];
        assert_eq!(e["code"], "handler_redirect");
        assert_eq!(e["outcome"], "error");
        assert_eq!(e["route_id"], "r-first");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("302") && msg.contains("http://192.0.2.9/ubus"),
            "{msg}"
        );
        assert_eq!(got.get(), 1, "never followed");
        assert_eq!(b.count(), 0, "never moved on");

        // An async task fails with the same code.
        let r = invoke(
            gw,
            "kv.get",
            &[("idempotency-key", "k2"), ("prefer", "respond-async")],
            "{}",
        )
        .await;
        let (id, token) = task_handle(&r);
        let status = settle(gw, &id, &token, &[]).await;
        assert_eq!(status["status"], "failed", "{status}");
        assert_eq!(status["error"]["code"], "handler_redirect");
        assert_eq!(status["route_id"], "r-first");
        assert_eq!(got.get(), 2);
    });
}

#[test]
fn a_running_task_names_the_route_it_was_dispatched_to() {
    run(async {
        let held = backend("held", Mode::Hold).await;
        let (gw, _state) = gateway_with(
            lab_config(),
            vec![
                // Refuses connections: never delivered, so the call moves on.
                route(
                    "r-dead",
                    "demo.slow",
                    &endpoint_of(closed_port().await),
                    1,
                    false,
                ),
                route("r-held", "demo.slow", &held.endpoint(), 50, false),
            ],
        )
        .await;
        let r = invoke(gw, "demo.slow", &[("prefer", "respond-async")], "{}").await;
        let (id, token) = task_handle(&r);
        // Bounded wait for the request to reach the handler.
        tokio::time::timeout(std::time::Duration::from_secs(5), held.arrived.notified())
            .await
            .expect("the handler never got the call");
        let doc = task_request(gw, "GET", &id, "", &token).await.json();
        assert_eq!(doc["status"], "running", "{doc}");
        assert_eq!(doc["route_id"], "r-held", "{doc}");
        held.release.notify_one();
        let doc = settle(gw, &id, &token, &[]).await;
        assert_eq!(doc["status"], "completed", "{doc}");
        assert_eq!(doc["route_id"], "r-held");
    });
}
