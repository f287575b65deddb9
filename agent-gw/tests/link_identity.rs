//! Calls between routers of one domain (DESIGN §3): the link
//! authenticates each call and the sending router states whom it acts
//! for in headers — honoured on the peer listener from a link of our
//! domain only, never from a signed link without its assertion, and
//! stripped on every other listener.

mod common;

use bytes::Bytes;
use edkey::SigningKey;
use http_body_util::{BodyExt, Full};

use agent_gw::front::neighbour as inbound;
use agent_gw::peer::LocalExec;
use common::{echo_gateway, envelope, lab_config, run};

/// Sends `headers` and an invoke of `demo.echo` pinned to `r-a` to the
/// peer inbound path of a link that is `signed` or not; the status and
/// JSON answer.
async fn neighbour_call(
    signed: bool,
    headers: &[(&str, &str)],
) -> (u16, serde_json::Value, common::Backend) {
    let (backend, _gw, state) = echo_gateway(lab_config()).await;
    let plane = common::peer_plane(
        state,
        inbound::Peer {
            router_id: "router-c".into(),
            key: SigningKey::from_bytes(&[9; 32]).verifying_key(),
            addr: "127.0.0.1:7447".parse().unwrap(),
            signed,
        },
    )
    .await;
    let tcp = tokio::net::TcpStream::connect(plane).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http2::Builder::new(LocalExec)
        .handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::task::spawn_local(conn);
    // The body claims tenant `other`: only what vouches for the call counts.
    let mut req = http::Request::post("http://router/agent/v1/invoke")
        .header("x-agentd-route-id", "r-a")
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(envelope("demo.echo", "other", "{}"))))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let doc = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (status, doc, backend)
}

const STATED: [(&str, &str); 4] = [
    ("x-agentd-ingress", "router-c"),
    ("x-agentd-caller", "agent://lab/remote%20caller"),
    ("x-agentd-tenant", "lab"),
    ("x-agentd-capability", "demo.echo"),
];

#[test]
fn a_link_of_our_domain_vouches_for_the_identity_its_router_states() {
    run(async {
        let (status, doc, backend) = neighbour_call(false, &STATED).await;
        assert_eq!(status, 200, "{doc}");
        let seen = backend.seen.borrow();
        let handed: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
        assert_eq!(handed["tenant"], "lab", "the stated tenant, not the body's");
        assert_eq!(handed["source_agent"], "agent://lab/remote caller");
        for h in ["x-agentd-ingress", "x-agentd-caller", "x-agentd-tenant"] {
            assert!(
                seen[0].headers.get(h).is_none(),
                "{h} never reaches a handler"
            );
        }
    });
}

#[test]
fn without_its_identity_headers_a_call_of_our_domain_is_refused_before_dispatch() {
    run(async {
        let (status, doc, backend) = neighbour_call(false, &STATED[..3]).await;
        assert_eq!(status, 403, "{doc}");
        assert_eq!(doc["error"]["code"], "identity_refused", "{doc}");
        assert!(backend.seen.borrow().is_empty());
        let lying = [
            STATED[0],
            STATED[1],
            STATED[2],
            ("x-agentd-capability", "demo.other"),
        ];
        let (status, doc, _) = neighbour_call(false, &lying).await;
        assert_eq!(status, 403, "a capability other than the call's: {doc}");
    });
}

#[test]
fn a_signed_link_never_takes_identity_headers_for_an_assertion() {
    run(async {
        let (status, doc, backend) = neighbour_call(true, &STATED).await;
        assert_eq!(status, 403, "{doc}");
        assert_eq!(doc["error"]["code"], "assertion_refused", "{doc}");
        assert!(backend.seen.borrow().is_empty());
    });
}

#[test]
fn a_lan_caller_that_sends_identity_headers_gets_nothing_from_them() {
    run(async {
        let (backend, gw, _state) = echo_gateway(lab_config()).await;
        let headers = [
            ("x-agentd-ingress", "router-z"),
            ("x-agentd-caller", "agent://other/impostor"),
            ("x-agentd-tenant", "other"),
            ("x-agentd-capability", "demo.echo"),
        ];
        let r = common::invoke(gw, "demo.echo", &headers, "{}").await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let seen = backend.seen.borrow();
        let handed: serde_json::Value = serde_json::from_slice(&seen[0].body).unwrap();
        assert_eq!(handed["tenant"], "lab", "the caller's own envelope");
        assert_eq!(handed["source_agent"], "agent://lab/caller");
        for (h, _) in headers {
            assert!(seen[0].headers.get(h).is_none(), "{h} is stripped");
        }
    });
}

#[test]
fn a_call_that_brings_an_assertion_is_held_to_it_even_over_a_link_of_our_domain() {
    run(async {
        // A garbled assertion next to valid identity headers: refused,
        // never served on the headers' word.
        let mut headers = STATED.to_vec();
        headers.push(("x-agentd-assertion", "AAAA"));
        let (status, doc, backend) = neighbour_call(false, &headers).await;
        assert_eq!(status, 403, "{doc}");
        assert_eq!(doc["error"]["code"], "assertion_refused", "{doc}");
        assert!(backend.seen.borrow().is_empty());
    });
}
