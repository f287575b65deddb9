//! Per-request costs that auth and streams add on the gateway's hot path:
//! verifying an EdDSA bearer token (decode + signature + claims), the
//! `authenticate` wrapper the server calls, the stream request digest, and
//! appending to / resuming from a task's event history.
//!
//! Run: `cargo bench -p agent-gw --bench auth_task`.

use std::hint::black_box;
use std::net::IpAddr;

use agent_gw::auth::jwt::{mint, Audience, Claims};
use agent_gw::auth::{AuthConfig, Authenticator, Scope, UnixSeconds};
use agent_gw::task::{object_digest, History};
use divan::Bencher;
use edkey::SigningKey;

const NOW: UnixSeconds = UnixSeconds(1_800_000_000);

fn main() {
    divan::main();
}

fn setup() -> (Authenticator, String) {
    let (auth, mut tokens) = setup_n(1);
    (auth, tokens.remove(0))
}

/// `n` distinct tokens (different `jti`) for the same caller.
fn setup_n(n: usize) -> (Authenticator, Vec<String>) {
    let tenant = SigningKey::from_bytes(&[0x11; 32]);
    let auth = Authenticator::new(
        AuthConfig::new("router-a", "lab.example"),
        SigningKey::from_bytes(&[0x22; 32]),
        [("lab".to_string(), tenant.verifying_key())],
    )
    .unwrap();
    let claims = |i: usize| Claims {
        iss: Some("lab-idp".into()),
        sub: Some("agent://lab/caller".into()),
        tenant: Some("lab".into()),
        scope: Some("agent.invoke agent.route".into()),
        aud: Some(Audience::One("agentd:router-a".into())),
        iat: Some(NOW.0 - 10),
        exp: Some(NOW.0 + 600),
        nbf: None,
        jti: Some(format!("j-{i}")),
        src: None,
    };
    let tokens = (0..n).map(|i| mint(&tenant, None, &claims(i))).collect();
    (auth, tokens)
}

/// The same token again (what an SDK does): served from the token cache.
#[divan::bench]
fn verify_token_cached(b: Bencher) {
    let (auth, token) = setup();
    let peer: IpAddr = "192.0.2.10".parse().unwrap();
    // `bench_local`: the authenticator is single-threaded, like the gateway.
    b.bench_local(|| auth.verify(black_box(token.as_bytes()), peer, NOW).unwrap());
}

/// Tokens never seen before (cycling through 4x the cache size): full
/// decode + Ed25519 verification every time.
#[divan::bench]
fn verify_token_first_use(b: Bencher) {
    let (auth, tokens) = setup_n(4 * agent_gw::auth::cache::CAPACITY);
    let peer: IpAddr = "192.0.2.10".parse().unwrap();
    let mut i = 0;
    b.bench_local(|| {
        i = (i + 1) % tokens.len();
        auth.verify(black_box(tokens[i].as_bytes()), peer, NOW)
            .unwrap()
    });
}

#[divan::bench]
fn authenticate_header(b: Bencher) {
    let (auth, token) = setup();
    let peer: IpAddr = "192.0.2.10".parse().unwrap();
    let mut h = http::HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    b.bench_local(|| {
        auth.authenticate(black_box(&h), peer, NOW, Scope::Invoke)
            .unwrap()
    });
}

#[divan::bench(args = [128, 1024, 8192])]
fn stream_request_digest(b: Bencher, payload: usize) {
    let body = format!(
        r#"{{"version":"1.0","intent":"demo.echo","intent_version":1,"task_id":"t-1","source_agent":"agent://lab/caller","tenant":"lab","hop_limit":8,"constraints":{{}},"payload":{{"text":"{}"}}}}"#,
        "x".repeat(payload)
    );
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&body).unwrap();
    b.bench(|| object_digest(black_box(&doc)));
}

#[divan::bench]
fn history_push_full(b: Bencher) {
    let mut h = History::new(64, 1 << 20);
    let data = "{\"chunk\":\"0123456789abcdef\"}";
    for _ in 0..64 {
        h.push(None, data);
    }
    b.bench_local(|| h.push(None, black_box(data)));
}

#[divan::bench]
fn history_resume_last_8(b: Bencher) {
    let mut h = History::new(64, 1 << 20);
    for _ in 0..64 {
        h.push(Some("progress"), "{\"chunk\":\"0123456789abcdef\"}");
    }
    let cursor = h.last_id() - 8;
    b.bench(|| h.after(black_box(cursor)).unwrap().count());
}
