//! Arbitrary bytes answering a health probe's `GET /healthz`: the status
//! line parser must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = agentd::daemon::probe::parse_status(data);
});
