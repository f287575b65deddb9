//! Verifier behaviour with tokens minted by the same library's signing
//! side: each test changes one thing about an otherwise valid token.

use super::bootstrap::{BootstrapError, BootstrapRequest};
use super::jwt::{mint, Audience};
use super::*;

const NOW: UnixSeconds = UnixSeconds(1_800_000_000);
const LAN: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 10));
const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 11));

fn tenant_key() -> SigningKey {
    SigningKey::from_bytes(&[0x11; 32])
}

fn other_key() -> SigningKey {
    SigningKey::from_bytes(&[0x22; 32])
}

fn auth_with(mode: AuthMode) -> Authenticator {
    let mut cfg = AuthConfig::new("router-a", "lab.example");
    cfg.mode = mode;
    cfg.clock_skew_s = 30;
    cfg.max_lifetime_s = 3600;
    // The test LAN is a documentation range, outside the default.
    cfg.bootstrap_networks
        .push(net::IpNet::parse("192.0.2.0/24").unwrap());
    // The tests bootstrap tenant `lab`; `default` alone is the default.
    cfg.bootstrap_tenants.push("lab".into());
    let keys = [
        ("lab".to_string(), tenant_key().verifying_key()),
        ("ops".to_string(), other_key().verifying_key()),
    ];
    Authenticator::new(cfg, SigningKey::from_bytes(&[0x33; 32]), keys).unwrap()
}

fn auth() -> Authenticator {
    auth_with(AuthMode::Jwt)
}

fn claims() -> Claims {
    Claims {
        iss: Some("lab-idp".into()),
        sub: Some("agent://lab/caller".into()),
        tenant: Some("lab".into()),
        scope: Some("agent.invoke agent.route".into()),
        aud: Some(Audience::One("agentd:router-a".into())),
        iat: Some(NOW.0 - 10),
        exp: Some(NOW.0 + 600),
        nbf: None,
        jti: Some("t-1".into()),
        src: None,
    }
}

fn headers(token: &str) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    h
}

fn check(token: &str, scope: Scope) -> Result<Caller, AuthError> {
    auth().authenticate(&headers(token), LAN, NOW, scope)
}

#[test]
fn valid_tenant_token_yields_verified_caller() {
    let t = mint(&tenant_key(), None, &claims());
    let c = check(&t, Scope::Invoke).unwrap();
    let v = c.verified().unwrap();
    assert_eq!(v.tenant, "lab");
    assert_eq!(v.subject, "agent://lab/caller");
    assert!(v.scopes.contains(Scope::Route) && !v.scopes.contains(Scope::Register));
    assert_eq!(v.token_id.as_deref(), Some("t-1"));
}

#[test]
fn kid_selects_the_key() {
    let kid = key_id(&tenant_key().verifying_key());
    let t = mint(&tenant_key(), Some(&kid), &claims());
    assert!(check(&t, Scope::Invoke).is_ok());
    let t = mint(&tenant_key(), Some("no-such-kid"), &claims());
    assert_eq!(check(&t, Scope::Invoke).unwrap_err(), AuthError::UnknownKey);
}

#[test]
fn expired_token_is_refused_past_the_skew() {
    let mut c = claims();
    c.iat = Some(NOW.0 - 700);
    c.exp = Some(NOW.0 - 31);
    let t = mint(&tenant_key(), None, &c);
    assert_eq!(
        check(&t, Scope::Invoke).unwrap_err(),
        AuthError::Expired {
            exp: NOW.0 - 31,
            now: NOW.0
        }
    );
    assert!(!check(&t, Scope::Invoke).unwrap_err().is_forbidden());
    // Within the skew it still passes.
    c.exp = Some(NOW.0 - 29);
    assert!(check(&mint(&tenant_key(), None, &c), Scope::Invoke).is_ok());
}

#[test]
fn not_yet_valid_beyond_skew_is_refused() {
    let mut c = claims();
    c.iat = Some(NOW.0 + 31);
    c.exp = Some(NOW.0 + 600);
    let t = mint(&tenant_key(), None, &c);
    assert_eq!(
        check(&t, Scope::Invoke).unwrap_err(),
        AuthError::NotYetValid {
            iat: NOW.0 + 31,
            now: NOW.0
        }
    );
    c.iat = Some(NOW.0 + 29);
    assert!(check(&mint(&tenant_key(), None, &c), Scope::Invoke).is_ok());
    c.nbf = Some(NOW.0 + 100);
    assert!(matches!(
        check(&mint(&tenant_key(), None, &c), Scope::Invoke),
        Err(AuthError::NotYetValid { .. })
    ));
}

#[test]
fn forged_signature_is_refused() {
    let t = mint(&tenant_key(), None, &claims());
    // Re-sign the same header+claims with a tampered claim: swap the payload
    // of a token for another one while keeping the original signature.
    let mut c = claims();
    c.tenant = Some("lab".into());
    c.sub = Some("agent://lab/admin".into());
    let other = mint(&tenant_key(), None, &c);
    let (sig, _) = t.rsplit_once('.').map(|(_, s)| (s, ())).unwrap();
    let forged = format!("{}.{}", other.rsplit_once('.').unwrap().0, sig);
    assert_eq!(
        check(&forged, Scope::Invoke).unwrap_err(),
        AuthError::BadSignature
    );
}

#[test]
fn token_signed_by_another_tenants_key_is_refused() {
    // ops' key signing a token that claims tenant lab: lab's keys don't verify it.
    let t = mint(&other_key(), None, &claims());
    assert_eq!(
        check(&t, Scope::Invoke).unwrap_err(),
        AuthError::BadSignature
    );
    // Same, naming ops' key by kid: the key verifies but belongs to ops.
    let kid = key_id(&other_key().verifying_key());
    let t = mint(&other_key(), Some(&kid), &claims());
    assert_eq!(
        check(&t, Scope::Invoke).unwrap_err(),
        AuthError::TenantMismatch
    );
    // An unconfigured key for an unconfigured tenant.
    let mut c = claims();
    c.tenant = Some("nobody".into());
    c.sub = Some("agent://nobody/x".into());
    let t = mint(&SigningKey::from_bytes(&[0x44; 32]), None, &c);
    assert_eq!(check(&t, Scope::Invoke).unwrap_err(), AuthError::UnknownKey);
}

#[test]
fn alg_none_and_hs256_are_refused() {
    let body = b64::encode_url(serde_json::to_string(&claims()).unwrap().as_bytes());
    let none = format!(
        "{}.{}.",
        b64::encode_url(br#"{"alg":"none","typ":"JWT"}"#),
        body
    );
    assert_eq!(
        check(&none, Scope::Invoke).unwrap_err(),
        AuthError::BadAlgorithm(Alg::None)
    );
    let hs = format!(
        "{}.{}.{}",
        b64::encode_url(br#"{"alg":"HS256","typ":"JWT"}"#),
        body,
        b64::encode_url(&[9; 32])
    );
    assert_eq!(
        check(&hs, Scope::Invoke).unwrap_err(),
        AuthError::BadAlgorithm(Alg::Hmac)
    );
}

#[test]
fn lifetime_beyond_the_bound_is_refused() {
    let mut c = claims();
    c.iat = Some(NOW.0 - 10);
    c.exp = Some(NOW.0 - 10 + 3601);
    let t = mint(&tenant_key(), None, &c);
    assert_eq!(
        check(&t, Scope::Invoke).unwrap_err(),
        AuthError::LifetimeTooLong {
            lifetime: 3601,
            max: 3600
        }
    );
}

#[test]
fn missing_scope_is_403_not_401() {
    let t = mint(&tenant_key(), None, &claims());
    let e = check(&t, Scope::Register).unwrap_err();
    assert_eq!(e, AuthError::MissingScope(Scope::Register));
    assert_eq!((e.is_forbidden(), e.reason()), (true, "insufficient_scope"));
}

#[test]
fn wrong_audience_and_missing_claims_are_refused() {
    let mut c = claims();
    c.aud = Some(Audience::Many(vec!["other".into()]));
    assert_eq!(
        check(&mint(&tenant_key(), None, &c), Scope::Invoke).unwrap_err(),
        AuthError::WrongAudience
    );
    c.aud = Some(Audience::Many(vec![
        "other".into(),
        "agentd:router-a".into(),
    ]));
    assert!(check(&mint(&tenant_key(), None, &c), Scope::Invoke).is_ok());
    c.exp = None;
    assert_eq!(
        check(&mint(&tenant_key(), None, &c), Scope::Invoke).unwrap_err(),
        AuthError::Malformed(Malformed::MissingClaim("exp"))
    );
}

#[test]
fn subject_outside_the_tenant_is_refused_and_bare_names_are_scoped() {
    let mut c = claims();
    c.sub = Some("agent://ops/caller".into());
    assert_eq!(
        check(&mint(&tenant_key(), None, &c), Scope::Invoke).unwrap_err(),
        AuthError::TenantMismatch
    );
    c.sub = Some("caller".into());
    let ok = check(&mint(&tenant_key(), None, &c), Scope::Invoke).unwrap();
    assert_eq!(ok.verified().unwrap().subject, "agent://lab/caller");
}

#[test]
fn body_tenant_and_source_are_overwritten_by_verified_claims() {
    let t = mint(&tenant_key(), None, &claims());
    let c = check(&t, Scope::Invoke).unwrap();
    let id = c.identity("ops", "agent://ops/impostor");
    assert_eq!(
        id,
        Identity {
            tenant: "lab",
            subject: "agent://lab/caller"
        }
    );
}

#[test]
fn lab_mode_accepts_the_body_identity_without_a_token() {
    let a = auth_with(AuthMode::None);
    let c = a
        .authenticate(&http::HeaderMap::new(), LAN, NOW, Scope::Register)
        .unwrap();
    assert_eq!(c, Caller::Unauthenticated);
    assert_eq!(
        c.identity("lab", "agent://lab/x"),
        Identity {
            tenant: "lab",
            subject: "agent://lab/x"
        }
    );
    assert_eq!(a.metadata(LAN)["authentication"]["required"], false);
    assert!(a.metadata(LAN).get("bootstrap").is_none());
}

#[test]
fn missing_or_non_bearer_authorization_is_401() {
    let a = auth();
    assert_eq!(
        a.authenticate(&http::HeaderMap::new(), LAN, NOW, Scope::Invoke)
            .unwrap_err(),
        AuthError::MissingToken
    );
    let mut h = http::HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        "Basic dXNlcjpwYXNz".parse().unwrap(),
    );
    assert_eq!(
        a.authenticate(&h, LAN, NOW, Scope::Invoke).unwrap_err(),
        AuthError::MissingToken
    );
    assert!(matches!(
        a.authenticate(&headers("abc"), LAN, NOW, Scope::Invoke),
        Err(AuthError::Malformed(_))
    ));
}

fn bootstrap_token(a: &Authenticator, peer: IpAddr) -> String {
    let req = BootstrapRequest::decode(
        br#"{"tenant":"lab","origin":"agent://lab/printer","scopes":["agent.register","agent.invoke"]}"#,
    )
    .unwrap();
    let issued = a.bootstrap(req, peer, NOW).unwrap();
    assert!(issued.expires_in <= 300);
    let doc = issued.to_json();
    assert_eq!(doc["identity"]["origin"], "agent://lab/printer");
    assert_eq!(doc["scope"], "agent.register agent.invoke");
    issued.token
}

#[test]
fn bootstrap_token_is_bound_to_the_source_address() {
    let a = auth();
    let t = bootstrap_token(&a, LAN);
    let ok = a
        .authenticate(&headers(&t), LAN, NOW, Scope::Register)
        .unwrap();
    let v = ok.verified().unwrap();
    assert_eq!(
        (v.tenant.as_str(), v.subject.as_str()),
        ("lab", "agent://lab/printer")
    );
    assert_eq!(
        a.authenticate(&headers(&t), OTHER, NOW, Scope::Register)
            .unwrap_err(),
        AuthError::WrongSource
    );
    // IPv4-mapped IPv6 peer (dual-stack listener) is the same host.
    let mapped: IpAddr = "::ffff:192.0.2.10".parse().unwrap();
    assert!(a
        .authenticate(&headers(&t), mapped, NOW, Scope::Register)
        .is_ok());
    // Lifetime ≤ 300 s: after that it is expired.
    let later = UnixSeconds(NOW.0 + 301 + 30);
    assert!(matches!(
        a.authenticate(&headers(&t), LAN, later, Scope::Register),
        Err(AuthError::Expired { .. })
    ));
}

#[test]
fn bootstrap_requests_are_validated() {
    let d = |b: &str| BootstrapRequest::decode(b.as_bytes()).map(|_| ());
    assert_eq!(
        d(r#"{"tenant":"lab","origin":"agent://ops/x"}"#),
        Err(BootstrapError::BadOrigin)
    );
    assert_eq!(
        d(r#"{"tenant":"lab","origin":"agent://lab2/x"}"#),
        Err(BootstrapError::BadOrigin)
    );
    assert_eq!(
        d(r#"{"tenant":"l b","origin":"agent://l b/x"}"#),
        Err(BootstrapError::BadTenant)
    );
    assert_eq!(
        d(r#"{"tenant":"lab","origin":"agent://lab/x","scopes":["root"]}"#),
        Err(BootstrapError::UnknownScope)
    );
    assert_eq!(
        d(r#"{"tenant":"lab","tenant":"ops","origin":"agent://lab/x"}"#),
        Err(BootstrapError::Json)
    );
    assert_eq!(d(r#"{"tenant":"lab","origin":"agent://lab/x"}"#), Ok(()));
    let off = {
        let mut cfg = AuthConfig::new("r", "");
        cfg.bootstrap = false;
        Authenticator::new(cfg, SigningKey::from_bytes(&[1; 32]), []).unwrap()
    };
    let req = BootstrapRequest::decode(br#"{"tenant":"lab","origin":"agent://lab/x"}"#).unwrap();
    assert_eq!(
        off.bootstrap(req, LAN, NOW).unwrap_err(),
        BootstrapError::Disabled
    );
}

#[test]
fn bootstrap_is_refused_outside_the_trusted_networks() {
    let a = auth();
    let outside: IpAddr = "203.0.113.7".parse().unwrap();
    let req = BootstrapRequest::decode(br#"{"tenant":"lab","origin":"agent://lab/x"}"#).unwrap();
    let e = a.bootstrap(req, outside, NOW).unwrap_err();
    assert_eq!(e, BootstrapError::UntrustedSource(outside));
    assert_eq!(e.reason(), Some("bootstrap_untrusted_source"));
    assert!(e.to_string().contains("203.0.113.7"));
    assert_eq!(a.bootstrap_allowed(LAN), Ok(()));
    let mapped: IpAddr = "::ffff:192.0.2.10".parse().unwrap();
    assert_eq!(a.bootstrap_allowed(mapped), Ok(()));
}

#[test]
fn metadata_advertises_bootstrap_in_the_nexus_schema() {
    let m = auth().metadata(LAN);
    assert_eq!(m["schema_version"], 2);
    assert_eq!(m["authentication"]["type"], "oauth2");
    assert!(m["authentication"]["issuer"]
        .as_str()
        .unwrap()
        .starts_with("https://"));
    assert_eq!(m["bootstrap"]["type"], "trusted-lan");
    assert_eq!(m["bootstrap"]["endpoint"], "/agent/v1/bootstrap");
    assert_eq!(m["bootstrap"]["token_ttl_seconds"], 300);
    assert_eq!(
        m["bootstrap"]["tenants"],
        serde_json::json!(["default", "lab"])
    );
    assert_eq!(m["bootstrap_access"]["allowed"], true);
    assert_eq!(m["bootstrap_access"]["source"], "192.0.2.10");
    assert_eq!(m["required_scopes"]["register"][0], "agent.register");
    // A source that may not bootstrap is not offered it (the SDK would
    // try), but is told why in `bootstrap_access`.
    let outside: IpAddr = "203.0.113.7".parse().unwrap();
    let m = auth().metadata(outside);
    assert!(m.get("bootstrap").is_none(), "{m}");
    assert_eq!(m["bootstrap_access"]["allowed"], false);
    assert_eq!(
        m["bootstrap_access"]["reason"],
        "bootstrap_untrusted_source"
    );
    assert_eq!(m["bootstrap_access"]["tenants"], serde_json::json!([]));
    assert_eq!(m["authentication"]["type"], "oauth2");
}

#[test]
fn bootstrap_issues_tokens_only_for_listed_tenants() {
    let only_default = {
        let mut cfg = AuthConfig::new("r", "");
        cfg.bootstrap_networks
            .push(net::IpNet::parse("192.0.2.0/24").unwrap());
        Authenticator::new(cfg, SigningKey::from_bytes(&[1; 32]), []).unwrap()
    };
    let lab = BootstrapRequest::decode(br#"{"tenant":"lab","origin":"agent://lab/x"}"#).unwrap();
    let e = only_default.bootstrap(lab, LAN, NOW).unwrap_err();
    assert_eq!(e, BootstrapError::TenantNotBootstrappable("lab".into()));
    assert_eq!(e.reason(), Some("tenant_not_bootstrappable"));
    assert!(e.to_string().contains("\"lab\""), "{e}");
    assert!(e.to_string().contains("gateway.bootstrap_tenant"), "{e}");
    let default =
        BootstrapRequest::decode(br#"{"tenant":"default","origin":"agent://default/x"}"#).unwrap();
    assert!(only_default.bootstrap(default, LAN, NOW).is_ok());
    // Listing the tenant (what the operator does) lets the same request in.
    let lab = BootstrapRequest::decode(br#"{"tenant":"lab","origin":"agent://lab/x"}"#).unwrap();
    assert!(auth().bootstrap(lab, LAN, NOW).is_ok());
}

#[test]
fn config_with_too_many_keys_for_a_tenant_is_refused() {
    let keys = (0..=MAX_KEYS_PER_TENANT as u8).map(|i| {
        (
            "lab".to_string(),
            SigningKey::from_bytes(&[i; 32]).verifying_key(),
        )
    });
    let e = Authenticator::new(
        AuthConfig::new("r", ""),
        SigningKey::from_bytes(&[0xee; 32]),
        keys,
    )
    .unwrap_err();
    assert_eq!(
        e,
        ConfigError::TooManyKeys {
            tenant: "lab".into(),
            max: MAX_KEYS_PER_TENANT
        }
    );
}

#[test]
fn cached_tokens_still_expire_and_stay_bound_to_their_source() {
    let a = auth();
    let mut c = claims();
    c.src = Some(LAN.to_string());
    let t = mint(&tenant_key(), None, &c);
    assert!(a.verify(t.as_bytes(), LAN, NOW).is_ok());
    assert!(a.verify(t.as_bytes(), LAN, NOW).is_ok());
    assert_eq!(
        a.verify(t.as_bytes(), OTHER, NOW).unwrap_err(),
        AuthError::WrongSource
    );
    let late = UnixSeconds(NOW.0 + 600 + 30);
    assert!(matches!(
        a.verify(t.as_bytes(), LAN, late),
        Err(AuthError::Expired { .. })
    ));
    // A forged variant is a different cache key and fails on its own.
    let swap = if t.ends_with('A') { "B" } else { "A" };
    let forged = format!("{}{swap}", &t[..t.len() - 1]);
    assert!(a.verify(forged.as_bytes(), LAN, NOW).is_err());
}
