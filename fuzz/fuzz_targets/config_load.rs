//! Arbitrary configuration text through uci-schema validation and the
//! daemon's conversion to runtime state (static routes, policy, limits):
//! errors must be typed, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = agentd::config::load_str(text, "fuzz");
    }
});
