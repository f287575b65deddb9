//! Arbitrary request bodies on the SDK API: the strict JSON decoder, the
//! envelope and the lease-request decoders must return typed errors, never
//! panic; the fast validating scanner must agree with the strict decoder.
#![no_main]

use agent_gw::api::{handler_body, json, scan};
use agent_gw::api::registration::{Registration, Renewal, Unregistration};
use agent_gw::api::Envelope;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    let full = json::parse_object(data);
    // The scanner that validates invocation bodies accepts exactly what
    // serde_json's strict decoder accepts (it answers only yes or no).
    assert_eq!(
        scan::object(data, &|_, _| Some(0)).is_some(),
        full.is_ok(),
        "the scanner and the strict decoder disagree"
    );
    // The validate-and-skip decoder must refuse exactly what the full one
    // refuses, with the same error.
    assert_eq!(json::parse_sketch(data, &[]).err(), full.err());
    // What the scanner's sketch builds is what serde_json's would.
    const KEEP: &[(&str, json::Keep)] = &[
        ("intent", json::Keep::Whole),
        ("hop_limit", json::Keep::Whole),
        ("payload", json::Keep::Members(&[("c", json::Keep::Whole)])),
    ];
    assert_eq!(
        json::parse_sketch(data, KEEP),
        json::sketch_with_serde(data, KEEP)
    );
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
        // Spliced from the scanner's spans, it is the body the scan of
        // the bytes builds.
        let same = handler_body::Overrides {
            hop_limit: env.hop_limit,
            ..o
        };
        assert_eq!(
            &env.to_bytes()[..],
            &handler_body::build(data, same).expect("accepted envelope splices")[..]
        );
        let _ = json::parse_object(&env.to_bytes()).expect("re-encoded envelope is valid JSON");
    }
    let _ = Registration::decode(&bytes);
    let _ = Renewal::decode(&bytes);
    let _ = Unregistration::decode(&bytes);
});
