//! Arbitrary bearer tokens: the bounded base64url/JSON decoder and the
//! verifier (fresh and cached paths) must return typed errors, never panic.
#![no_main]

use agent_gw::auth::{jwt, AuthConfig, Authenticator, UnixSeconds};
use edkey::SigningKey;
use libfuzzer_sys::fuzz_target;

// One authenticator for the whole run, so the cached path is exercised.
// Per thread: it holds `RefCell`s (the gateway is single-threaded).
thread_local! {
    static AUTH: &'static Authenticator = Box::leak(Box::new({
        let tenant = SigningKey::from_bytes(&[1; 32]).verifying_key();
        Authenticator::new(AuthConfig::new("r", ""), SigningKey::from_bytes(&[2; 32]), [("lab".into(), tenant)])
            .expect("static test config")
    }));
}

fn auth() -> &'static Authenticator {
    AUTH.with(|a| *a)
}

fuzz_target!(|data: &[u8]| {
    let _ = jwt::decode(data);
    let peer = "192.0.2.1".parse().unwrap();
    let first = auth().verify(data, peer, UnixSeconds(1_800_000_000));
    let again = auth().verify(data, peer, UnixSeconds(1_800_000_000));
    assert_eq!(first, again, "cache changed the verdict");
});
