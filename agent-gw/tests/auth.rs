//! Bearer-token authentication through a real gateway on loopback: 401
//! reasons for missing/expired/forged/wrong-key tokens, 403 for a missing
//! scope, the verified identity overwriting the body, and trusted-LAN
//! bootstrap tokens bound to the address they were issued to.

mod common;

use std::net::IpAddr;

use common::*;
use edkey::SigningKey;

use agent_gw::auth::jwt::{mint, Audience, Claims};
use agent_gw::auth::net::IpNet;
use agent_gw::auth::UnixSeconds;
use agent_gw::config::{AuthMode, GatewayConfig};

fn tenant_key() -> SigningKey {
    SigningKey::from_bytes(&[0x5a; 32])
}

fn jwt_config() -> GatewayConfig {
    GatewayConfig {
        auth: AuthMode::Jwt,
        tenant_keys: vec![("lab".into(), tenant_key().verifying_key())],
        // These tests bootstrap tenant `lab`; `default` alone is the default.
        bootstrap_tenants: vec!["lab".into()],
        ..lab_config()
    }
}

fn token(iat: u64, exp: u64, scope: &str) -> String {
    let claims = Claims {
        iss: Some("lab-idp".into()),
        sub: Some("agent://lab/caller".into()),
        tenant: Some("lab".into()),
        scope: Some(scope.into()),
        aud: Some(Audience::One("agentd:router".into())),
        iat: Some(iat),
        exp: Some(exp),
        nbf: None,
        jti: None,
        src: None,
    };
    mint(&tenant_key(), None, &claims)
}

#[test]
fn bearer_tokens_are_checked_and_their_identity_overwrites_the_body() {
    run(async {
        let (b, gw, _state) = echo_gateway(jwt_config()).await;
        let now = UnixSeconds::now().0;
        // The body claims tenant "other" (the route is open to it too).
        let env = envelope("demo.echo", "other", "{}");
        let r = post(gw, "/agent/v1/invoke", &[], &env).await;
        assert_eq!(
            (r.status.as_u16(), r.error_code()),
            (401, "unauthenticated".into())
        );
        let expired = format!("Bearer {}", token(now - 4000, now - 3600, "agent.invoke"));
        let r = post(gw, "/agent/v1/invoke", &[("authorization", &expired)], &env).await;
        assert_eq!(
            (r.status.as_u16(), r.json()["error"]["reason"].as_str()),
            (401, Some("token_expired"))
        );
        let good = token(now - 10, now + 600, "agent.invoke");
        let forged = format!("Bearer {}x", &good[..good.len() - 1]);
        let r = post(gw, "/agent/v1/invoke", &[("authorization", &forged)], &env).await;
        assert_eq!(r.status, 401);
        let other_key = SigningKey::from_bytes(&[0x77; 32]);
        let claims = Claims {
            tenant: Some("lab".into()),
            sub: Some("agent://lab/caller".into()),
            aud: Some(Audience::One("agentd:router".into())),
            iat: Some(now),
            exp: Some(now + 60),
            scope: Some("agent.invoke".into()),
            iss: None,
            nbf: None,
            jti: None,
            src: None,
        };
        let wrong_key = format!("Bearer {}", mint(&other_key, None, &claims));
        let r = post(
            gw,
            "/agent/v1/invoke",
            &[("authorization", &wrong_key)],
            &env,
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.json()["error"]["reason"].as_str()),
            (401, Some("token_bad_signature"))
        );
        let route_only = format!("Bearer {}", token(now, now + 60, "agent.route"));
        let r = post(
            gw,
            "/agent/v1/invoke",
            &[("authorization", &route_only)],
            &env,
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.error_code()),
            (403, "forbidden".into())
        );
        assert_eq!(b.count(), 0);
        let r = post(
            gw,
            "/agent/v1/invoke",
            &[("authorization", &format!("Bearer {good}"))],
            &env,
        )
        .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        let seen: serde_json::Value = serde_json::from_slice(&b.seen.borrow()[0].body).unwrap();
        assert_eq!(
            (seen["tenant"].as_str(), seen["source_agent"].as_str()),
            (Some("lab"), Some("agent://lab/caller"))
        );
        // Task endpoints need a token too.
        let t = send(
            gw,
            "GET",
            &format!("/agent/v1/tasks/{}", "ab".repeat(16)),
            &[],
            b"",
        )
        .await;
        assert_eq!(t.status, 401);
    });
}

#[test]
fn bootstrap_tokens_work_only_from_the_address_they_were_issued_to() {
    run(async {
        let (b, gw, _state) = echo_gateway(jwt_config()).await;
        let meta = send(gw, "GET", "/agent/v1/authentication", &[], b"")
            .await
            .json();
        assert_eq!(meta["bootstrap"]["endpoint"], "/agent/v1/bootstrap");
        assert_eq!(meta["authentication"]["audience"], "agentd:router");
        let lan: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let req = br#"{"tenant":"lab","origin":"agent://lab/echo","scopes":["agent.invoke"]}"#;
        let issued = send_from(lan, gw, "POST", "/agent/v1/bootstrap", &[], req).await;
        assert_eq!(issued.status, 200, "{:?}", issued.body);
        let doc = issued.json();
        assert!(doc["expires_in"].as_u64().unwrap() <= 300);
        let bearer = format!("Bearer {}", doc["access_token"].as_str().unwrap());
        let env = envelope("demo.echo", "lab", "{}");
        let ok = send_from(
            lan,
            gw,
            "POST",
            "/agent/v1/invoke",
            &[("authorization", &bearer)],
            env.as_bytes(),
        )
        .await;
        assert_eq!(ok.status, 200, "{:?}", ok.body);
        let seen: serde_json::Value = serde_json::from_slice(&b.seen.borrow()[0].body).unwrap();
        assert_eq!(seen["source_agent"], "agent://lab/echo");
        let stolen = send_from(
            other,
            gw,
            "POST",
            "/agent/v1/invoke",
            &[("authorization", &bearer)],
            env.as_bytes(),
        )
        .await;
        assert_eq!(
            (
                stolen.status.as_u16(),
                stolen.json()["error"]["reason"].as_str()
            ),
            (401, Some("token_source_mismatch"))
        );
        let bad = send_from(
            lan,
            gw,
            "POST",
            "/agent/v1/bootstrap",
            &[],
            br#"{"tenant":"lab","origin":"agent://ops/x"}"#,
        )
        .await;
        assert_eq!(
            (bad.status.as_u16(), bad.error_code()),
            (400, "invalid_field".into())
        );
        let dup = br#"{"tenant":"lab","tenant":"ops","origin":"agent://lab/x"}"#;
        let bad = send_from(lan, gw, "POST", "/agent/v1/bootstrap", &[], dup).await;
        assert_eq!(
            (bad.status.as_u16(), bad.error_code()),
            (400, "duplicate_key".into())
        );
    });
}

#[test]
fn bootstrap_is_refused_outside_the_trusted_networks() {
    run(async {
        let cfg = GatewayConfig {
            bootstrap_networks: vec![IpNet::parse("127.0.0.1/32").unwrap()],
            ..jwt_config()
        };
        let (gw, _state) = start_gateway(cfg).await;
        let inside: IpAddr = "127.0.0.1".parse().unwrap();
        let outside: IpAddr = "127.0.0.2".parse().unwrap();
        let req = br#"{"tenant":"lab","origin":"agent://lab/echo"}"#;
        let ok = send_from(inside, gw, "POST", "/agent/v1/bootstrap", &[], req).await;
        assert_eq!(ok.status, 200, "{:?}", ok.body);
        assert!(ok.json()["access_token"].is_string());
        let refused = send_from(outside, gw, "POST", "/agent/v1/bootstrap", &[], req).await;
        let e = refused.json();
        assert_eq!(
            (
                refused.status.as_u16(),
                e["error"]["code"].as_str(),
                e["error"]["reason"].as_str()
            ),
            (403, Some("forbidden"), Some("bootstrap_untrusted_source"))
        );
        assert!(e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("127.0.0.2"));
        // Refused before the body is looked at: a malformed body from
        // outside is still only `forbidden`.
        let junk = send_from(outside, gw, "POST", "/agent/v1/bootstrap", &[], b"{").await;
        assert_eq!(
            (junk.status.as_u16(), junk.error_code()),
            (403, "forbidden".into())
        );
        // The inside source keeps working after the refusals.
        let again = send_from(inside, gw, "POST", "/agent/v1/bootstrap", &[], req).await;
        assert_eq!(again.status, 200, "{:?}", again.body);
    });
}

#[test]
fn default_trusted_networks_include_loopback() {
    run(async {
        let (gw, _state) = start_gateway(jwt_config()).await;
        let req = br#"{"tenant":"lab","origin":"agent://lab/echo"}"#;
        for src in ["127.0.0.1", "127.0.0.2"] {
            let r = send_from(
                src.parse().unwrap(),
                gw,
                "POST",
                "/agent/v1/bootstrap",
                &[],
                req,
            )
            .await;
            assert_eq!(r.status, 200, "from {src}: {:?}", r.body);
        }
    });
}

#[test]
fn bootstrap_refuses_tenants_not_listed_over_http() {
    run(async {
        let cfg = GatewayConfig {
            bootstrap_tenants: vec!["default".into()],
            ..jwt_config()
        };
        let (gw, _state) = start_gateway(cfg).await;
        let lan: IpAddr = "127.0.0.1".parse().unwrap();
        let lab = br#"{"tenant":"lab","origin":"agent://lab/echo"}"#;
        let r = send_from(lan, gw, "POST", "/agent/v1/bootstrap", &[], lab).await;
        let e = r.json();
        assert_eq!(
            (
                r.status.as_u16(),
                e["error"]["code"].as_str(),
                e["error"]["reason"].as_str()
            ),
            (403, Some("forbidden"), Some("tenant_not_bootstrappable"))
        );
        assert!(e["error"]["message"].as_str().unwrap().contains("\"lab\""));
        let ok = br#"{"tenant":"default","origin":"agent://default/echo"}"#;
        let r = send_from(lan, gw, "POST", "/agent/v1/bootstrap", &[], ok).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        // Discovery says so before anyone asks.
        let meta = send_from(lan, gw, "GET", "/agent/v1/authentication", &[], b"").await;
        let m = meta.json();
        assert_eq!(m["bootstrap"]["tenants"], serde_json::json!(["default"]));
        assert_eq!(m["bootstrap_access"]["allowed"], true);
    });
}
