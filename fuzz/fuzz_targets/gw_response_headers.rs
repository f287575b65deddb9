//! Arbitrary handler response headers through the gateway's relay filter:
//! never a panic, and nothing the filter promises to drop survives (no
//! hop-by-hop header, no `X-Agentd-*`, nothing the `Connection` header
//! names, no `Set-Cookie`).
#![no_main]

use agent_gw::forward::response::filter_headers;
use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Lines of `name:value`, as a handler would send them.
    let mut h = HeaderMap::new();
    for line in data.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(&line[colon + 1..]),
        ) else {
            continue;
        };
        h.append(name, value);
    }
    let named: Vec<HeaderName> = h
        .get_all("connection")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|s| s.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    filter_headers(&mut h);
    for name in h.keys() {
        let s = name.as_str();
        assert!(!s.starts_with("x-agentd-"), "{s} relayed");
        assert!(!named.contains(name), "{s} named by Connection relayed");
        for hop in [
            "connection",
            "keep-alive",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
            "content-length",
            "set-cookie",
        ] {
            assert_ne!(s, hop, "{s} relayed");
        }
        assert!(!s.starts_with("proxy-"), "{s} relayed");
    }
});
