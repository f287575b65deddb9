//! An arbitrary input schema and arguments (two JSON texts split at the
//! first NUL byte): the argument check must answer without panicking,
//! whatever the schema nests or names, and its message must be bounded.
#![no_main]

use agent_gw::front::mcp::args;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(i) = data.iter().position(|&b| b == 0) else { return };
    let (Ok(schema), Ok(value)) = (
        serde_json::from_slice::<serde_json::Value>(&data[..i]),
        serde_json::from_slice::<serde_json::Value>(&data[i + 1..]),
    ) else {
        return;
    };
    if let Err(v) = args::check(&schema, &value) {
        // The pointer is bounded by the arguments, the expectation by
        // the check.
        assert!(v.expected.len() <= args::MAX_EXPECTED, "{}", v.expected.len());
        let _ = v.to_string();
    }
});
