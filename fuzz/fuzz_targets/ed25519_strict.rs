//! Arbitrary (key, signature, message) bytes: edkey (ring's Ed25519 with
//! our own small-order and key-decoding checks) and ed25519-dalek must
//! agree on whether the key decodes, whether it is weak, and whether
//! `verify_strict` accepts. A disagreement is a hole in strict
//! verification (or a refusal of something valid).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((key, rest)) = data.split_first_chunk::<32>() else {
        return;
    };
    let Some((sig, msg)) = rest.split_first_chunk::<64>() else {
        return;
    };
    let one_go = edkey::verify_strict(key, msg, &edkey::Signature::from_bytes(sig));
    let ours = edkey::VerifyingKey::from_bytes(key);
    let theirs = ed25519_dalek::VerifyingKey::from_bytes(key);
    assert_eq!(ours.is_ok(), theirs.is_ok(), "key decoding");
    let (Ok(ours), Ok(theirs)) = (ours, theirs) else {
        assert_eq!(one_go, Err(edkey::Error::KeyNotOnCurve), "one-call key error");
        return;
    };
    assert_eq!(ours.is_weak(), theirs.is_weak(), "weak key");
    let a = ours.verify_strict(msg, &edkey::Signature::from_bytes(sig)).is_ok();
    let b = theirs.verify_strict(msg, &ed25519_dalek::Signature::from_bytes(sig)).is_ok();
    assert_eq!(a, b, "verify_strict");
    assert_eq!(one_go.is_ok(), a, "one-call verdict");
});
