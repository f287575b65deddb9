//! Arbitrary bytes as agentd's lease file (state_dir/leases), read back at
//! startup: bounded, typed errors, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = agentd::daemon::persist::decode(data, "");
});
