//! Registration requests at the gateway with auth on: the token decides
//! tenant and origin, an origin other than the token's subject is refused
//! before agentd is asked, and bad registration bodies get typed errors.

mod common;

use agent_gw::auth::jwt::{mint, Audience, Claims};
use agent_gw::auth::UnixSeconds;
use agent_gw::config::{AuthMode, GatewayConfig};
use common::*;
use edkey::SigningKey;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[0x33; 32])
}

fn bearer(sub: &str, scope: &str) -> String {
    let now = UnixSeconds::now().0;
    let claims = Claims {
        iss: Some("lab-idp".into()),
        sub: Some(sub.into()),
        tenant: Some("lab".into()),
        scope: Some(scope.into()),
        aud: Some(Audience::One("agentd:router".into())),
        iat: Some(now),
        exp: Some(now + 120),
        nbf: None,
        jti: None,
        src: None,
    };
    format!("Bearer {}", mint(&key(), None, &claims))
}

fn registration(origin: &str, tenant: &str) -> String {
    format!(
        r#"{{"intent":"demo.echo","origin":"{origin}","endpoint":"http://192.0.2.9:4000/invoke","tenant":"{tenant}","lease_seconds":30}}"#
    )
}

#[test]
fn registered_origin_must_be_the_token_subject() {
    run(async {
        let cfg = GatewayConfig {
            auth: AuthMode::Jwt,
            tenant_keys: vec![("lab".into(), key().verifying_key())],
            ..lab_config()
        };
        let (gw, _state) = start_gateway(cfg).await;
        let me = bearer("agent://lab/alice", "agent.register");

        // Someone else's agent: refused at the gateway.
        let r = post(
            gw,
            "/agent/v1/register",
            &[("authorization", &me)],
            &registration("agent://lab/bob", "lab"),
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.error_code().as_str()),
            (403, "origin_mismatch")
        );

        // Own origin passes the gateway's checks (the body's tenant is
        // overwritten by the token's); with no agentd running the answer is
        // the typed 503, which proves the request got as far as the IPC.
        let r = post(
            gw,
            "/agent/v1/register",
            &[("authorization", &me)],
            &registration("agent://lab/alice", "lab"),
        )
        .await;
        assert_eq!(
            (r.status.as_u16(), r.error_code().as_str()),
            (503, "control_plane_unavailable")
        );

        // No token / wrong scope.
        let r = post(
            gw,
            "/agent/v1/register",
            &[],
            &registration("agent://lab/alice", "lab"),
        )
        .await;
        assert_eq!(r.status, 401);
        let invoke_only = bearer("agent://lab/alice", "agent.invoke");
        let r = post(
            gw,
            "/agent/v1/renew",
            &[("authorization", &invoke_only)],
            r#"{"route_id":"r-1"}"#,
        )
        .await;
        assert_eq!(r.status, 403);
    });
}

#[test]
fn bad_registration_bodies_are_typed() {
    run(async {
        let (gw, _state) = start_gateway(lab_config()).await;
        let cases = [
            (r#"{"intent":"demo.echo""#, "invalid_json"),
            (r#"{"intent":"a","intent":"b"}"#, "duplicate_key"),
            (
                r#"{"origin":"agent://lab/a","endpoint":"http://h:1/","tenant":"lab"}"#,
                "invalid_field",
            ),
            (&registration("lab/a", "lab") as &str, "invalid_field"),
            (
                r#"{"intent":"x","origin":"agent://lab/a","endpoint":"ftp://h:1/","tenant":"lab"}"#,
                "invalid_field",
            ),
            (
                r#"{"intent":"x","origin":"agent://lab/a","endpoint":"http://h:1/","tenant":"lab","lease_seconds":0}"#,
                "invalid_field",
            ),
        ];
        for (body, code) in cases {
            let r = post(gw, "/agent/v1/register", &[], body).await;
            assert_eq!(
                (r.status.as_u16(), r.error_code().as_str()),
                (400, code),
                "{body}"
            );
        }
        let r = post(gw, "/agent/v1/renew", &[], r#"{"route_id":"has space"}"#).await;
        assert_eq!(r.error_code(), "invalid_field");
        let r = post(gw, "/agent/v1/unregister", &[], "{}").await;
        assert_eq!(r.error_code(), "invalid_field");
    });
}
