//! Arbitrary forwarding-assertion header values: decoding is bounded and
//! typed, never a panic; whatever decodes re-encodes to itself, and its
//! batch proof walks to a root (or to none) without panicking.
#![no_main]

use agent_gw::peer::assertion::Assertion;
use agent_gw::peer::merkle;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(a) = Assertion::decode(value) {
        assert_eq!(Assertion::decode(&a.encode()).as_ref(), Ok(&a));
        assert!(a.proof.path.len() <= merkle::MAX_DEPTH);
        let _ = merkle::root_of(a.claims.leaf(), a.proof.index, a.proof.size, &a.proof.path);
    }
});
