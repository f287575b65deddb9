//! What a neighbour sends with a call: the identity headers of a link of
//! our domain and its hop limit (decoded, bounded, and stable through
//! encode/decode) and a
//! task operation's query. Never a panic; what decodes encodes back to
//! the same identity.
#![no_main]

use agent_gw::api::task_request::TaskRequest;
use agent_gw::peer::identity;
use agent_gw::router::TaskOp;
use http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut h = HeaderMap::new();
    for (name, part) in identity::ALL.iter().zip(data.split(|b| *b == b'\n')) {
        if let Ok(v) = HeaderValue::from_bytes(part) {
            h.append(name.clone(), v);
        }
    }
    if let Ok(who) = identity::decode(&h) {
        let mut again = HeaderMap::new();
        identity::encode(&who, &mut again);
        assert_eq!(identity::decode(&again).ok(), Some(who));
    }
    if let Ok(Some(n)) = identity::hop_limit(&h) {
        assert!(n >= 1, "a hop limit of 0 decoded");
    }
    let query = String::from_utf8_lossy(data);
    let _ = TaskRequest::of_request("t1", TaskOp::Events, Some(&query), &h);
});
