//! Arbitrary bytes POSTed to an SDK agent's handler endpoint: the envelope
//! decoder must return a typed error (with a stable code), never panic.
#![no_main]

use _native::envelope::Envelope;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = Envelope::decode(data) {
        let _ = (e.code(), e.to_string());
    }
});
