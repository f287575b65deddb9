//! What a neighbour router's calls may hold of a gateway's shared rate
//! limiter: the tenant of each forwarded call is the neighbour's to name,
//! and a neighbour naming more tenants than the limiter holds must leave
//! our own callers' tenants their buckets.
//!
//! The calls go through the real peer inbound path (assertion checks,
//! tenant rate, pinning); the h2 connection is plain TCP with the
//! neighbour's identity given, as the peer listener would have verified
//! it with TLS.

mod common;

use bytes::Bytes;
use edkey::Sha256;
use edkey::SigningKey;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use agent_gw::front::neighbour as inbound;
use agent_gw::limits::{Rate, MAX_BUCKETS};
use agent_gw::peer::assertion::{Assertion, Claims};
use agent_gw::peer::outbound::unix_ms;
use agent_gw::peer::{LocalExec, ASSERTION_HEADER};
use common::*;

/// One forwarded call from router-c for `tenant`, pinned to `route`;
/// the answer's status.
async fn forwarded(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    key: &SigningKey,
    seq: u64,
    tenant: &str,
    route: &str,
) -> u16 {
    let body = envelope("demo.echo", tenant, "{}");
    let claims = Claims {
        source: "router-c".into(),
        target: "router".into(),
        origin: "router-c".into(),
        caller: format!("agent://{tenant}/caller"),
        tenant: tenant.into(),
        capability: "demo.echo".into(),
        body_sha256: Sha256::digest(body.as_bytes()),
        nonce: agent_gw::peer::replay::nonce(7, seq),
        expires_ms: unix_ms() + 20_000,
    };
    let req = Request::post("http://router/agent/v1/invoke")
        .header(ASSERTION_HEADER, Assertion::sign(claims, key).encode())
        .header("x-agentd-route-id", route)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    status
}

#[test]
fn a_neighbours_made_up_tenants_leave_our_callers_their_rate_buckets() {
    run(async {
        // Buckets that never refill: a bucket once used stays in the map,
        // so a neighbour could fill it for good.
        let cfg = agent_gw::config::GatewayConfig {
            rate: Rate {
                per_second: 0,
                burst: 1,
            },
            ..lab_config()
        };
        let (_backend, gw, state) = echo_gateway(cfg).await;
        let key = SigningKey::from_bytes(&[5; 32]);
        let plane = peer_plane(
            state.clone(),
            inbound::Peer {
                router_id: "router-c".into(),
                key: key.verifying_key(),
                addr: "127.0.0.1:7447".parse().unwrap(),
                signed: true,
            },
        )
        .await;
        let tcp = TcpStream::connect(plane).await.unwrap();
        // Without it each call waits for a delayed ACK.
        tcp.set_nodelay(true).unwrap();
        let (mut sender, conn) = hyper::client::conn::http2::Builder::new(LocalExec)
            .handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::task::spawn_local(conn);
        // More tenants than the limiter holds, each pinned to a route that
        // is not here: every call is refused after its rate check.
        for i in 0..MAX_BUCKETS as u64 + 8 {
            let status = forwarded(&mut sender, &key, i + 1, &format!("made-up-{i}"), "gone").await;
            assert!(matches!(status, 404 | 429), "call {i}: {status}");
        }
        assert_eq!(
            state.limiter.borrow().tenants_tracked(),
            0,
            "a neighbour's tenants took buckets of the shared map"
        );
        // A tenant of our own that has not called yet gets its bucket.
        let r = post(
            gw,
            "/agent/v1/invoke",
            &[],
            &envelope("demo.echo", "other", r#"{"n":1}"#),
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    });
}
