//! Arbitrary paths and header values: the route table, the deadline budget
//! and the endpoint-URL parser must never panic.
#![no_main]

use agent_gw::forward::deadline::budget_ms;
use agent_gw::forward::target::Target;
use agent_gw::router::resolve;
use http::{HeaderMap, HeaderValue, Method};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for m in [Method::GET, Method::POST, Method::DELETE] {
        let _ = resolve(&m, &text);
    }
    let _ = Target::parse(&text);
    if let Ok(v) = HeaderValue::from_bytes(data) {
        let mut h = HeaderMap::new();
        h.insert("x-agentd-timeout-ms", v.clone());
        h.insert("x-agentd-deadline-ms", v);
        let _ = budget_ms(&h, None, 30_000);
    }
});
