//! Arbitrary `Host` values through the gateway's check (RFC 9112 §3.2):
//! never a panic, and the quick path for plain `name[:port]` values
//! answers exactly as the full URI-grammar check does.
#![no_main]

use agent_gw::http_head::{full_host_check, host_value_ok};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    assert_eq!(
        host_value_ok(data),
        data.is_empty() || full_host_check(data),
        "{:?}",
        String::from_utf8_lossy(data)
    );
});
