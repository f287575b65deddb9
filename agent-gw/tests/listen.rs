//! The SDK listener: the default `[::]:7446` is dual-stack, so IPv4 and
//! IPv6 clients both reach it, and an IPv4 client is seen as its IPv4
//! address (not `::ffff:a.b.c.d`) by every per-source rule.

mod common;

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use agent_gw::config::{AuthMode, GatewayConfig};
use common::*;

#[test]
fn the_default_sdk_listener_is_the_ipv6_wildcard() {
    assert_eq!(
        GatewayConfig::default().sdk_listen,
        "[::]:7446".parse::<SocketAddr>().unwrap()
    );
}

#[test]
fn ipv4_and_ipv6_clients_reach_a_wildcard_ipv6_listener() {
    run(async {
        let cfg = GatewayConfig {
            sdk_listen: "[::]:0".parse().unwrap(),
            auth: AuthMode::Jwt,
            ..lab_config()
        };
        let (addr, _state) = start_gateway(cfg).await;
        assert!(addr.is_ipv6(), "{addr}");
        for client in [
            SocketAddr::from(([127, 0, 0, 1], addr.port())),
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port())),
        ] {
            let r = send(client, "GET", "/healthz", &[], b"").await;
            assert_eq!(r.status, 200, "{client}: {:?}", r.body);
        }
        // Bootstrap binds the token to the caller's address: an IPv4
        // caller's token names 127.0.0.2, not ::ffff:127.0.0.2.
        let src: IpAddr = "127.0.0.2".parse().unwrap();
        let v4 = SocketAddr::from(([127, 0, 0, 1], addr.port()));
        let req =
            br#"{"tenant":"default","origin":"agent://default/echo","scopes":["agent.invoke"]}"#;
        let r = send_from(src, v4, "POST", "/agent/v1/bootstrap", &[], req).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let token = r.json()["access_token"].as_str().unwrap().to_string();
        let payload = token.split('.').nth(1).unwrap();
        let claims = b64url_decode(payload);
        let claims: serde_json::Value = serde_json::from_slice(&claims).unwrap();
        assert_eq!(claims["src"], "127.0.0.2", "{claims}");
    });
}

#[test]
fn only_errors_that_mean_no_ipv6_fall_back_to_ipv4() {
    use agent_gw::serve::http::means_no_ipv6;
    let e = |n| std::io::Error::from_raw_os_error(n);
    assert!(means_no_ipv6(&e(libc::EAFNOSUPPORT)));
    assert!(means_no_ipv6(&e(libc::EADDRNOTAVAIL)));
    assert!(!means_no_ipv6(&e(libc::EADDRINUSE)));
    assert!(!means_no_ipv6(&e(libc::EACCES)));
}

/// Unpadded base64url, for reading a token's claims.
fn b64url_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'-' => 62,
            b'_' => 63,
            _ => panic!("not base64url: {c}"),
        }
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes() {
        acc = (acc << 6) | val(c);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}
