//! Arbitrary bearer tokens: the bounded base64url/JSON decoder and the
//! verifier must return typed errors, never panic.
#![no_main]

use agent_gw::auth::{jwt, AuthConfig, Authenticator, UnixSeconds};
use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = jwt::decode(data);
    let tenant = SigningKey::from_bytes(&[1; 32]).verifying_key();
    let auth = Authenticator::new(AuthConfig::new("r", ""), SigningKey::from_bytes(&[2; 32]), [("lab".into(), tenant)]);
    if let Ok(a) = auth {
        let _ = a.verify(data, "192.0.2.1".parse().unwrap(), UnixSeconds(1_800_000_000));
    }
});
