//! Arbitrary request bodies on the SDK API: the strict JSON decoder, the
//! envelope and the lease-request decoders must return typed errors, never
//! panic.
#![no_main]

use agent_gw::api::json;
use agent_gw::api::registration::{Registration, Renewal, Unregistration};
use agent_gw::api::Envelope;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    let full = json::parse_object(data);
    // The validate-and-skip decoder must refuse exactly what the full one
    // refuses, with the same error.
    assert_eq!(json::parse_sketch(data, &[]).err(), full.err());
    if let Ok(mut env) = Envelope::decode(bytes.clone()) {
        env.apply_identity("lab", "agent://lab/fuzz");
        let _ = json::parse_object(&env.to_bytes()).expect("re-encoded envelope is valid JSON");
    }
    let _ = Registration::decode(&bytes);
    let _ = Renewal::decode(&bytes);
    let _ = Unregistration::decode(&bytes);
});
