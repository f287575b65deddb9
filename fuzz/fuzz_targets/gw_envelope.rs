//! Arbitrary request bodies on the SDK API: the strict JSON decoder, the
//! envelope and the lease-request decoders must return typed errors, never
//! panic.
#![no_main]

use agent_gw::api::{handler_body, json};
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
        // Every accepted envelope is spliced (never the fallback), and the
        // handler body holds only the protocol's members, payload intact.
        let o = handler_body::Overrides {
            tenant: "lab",
            source_agent: "agent://lab/fuzz",
            hop_limit: 7,
        };
        let spliced = handler_body::build(data, o).expect("accepted envelope splices");
        let out = json::parse_object(&spliced).expect("handler body is valid JSON");
        let src = json::parse_object(data).expect("accepted envelope is JSON");
        assert!(out.keys().all(|k| handler_body::HANDLER_MEMBERS.contains(&k.as_str())));
        assert_eq!(out.get("payload"), src.get("payload"));
        assert_eq!(out["hop_limit"], 7);
        env.apply_identity("lab", "agent://lab/fuzz");
        let _ = json::parse_object(&env.to_bytes()).expect("re-encoded envelope is valid JSON");
    }
    let _ = Registration::decode(&bytes);
    let _ = Renewal::decode(&bytes);
    let _ = Unregistration::decode(&bytes);
});
