//! Arbitrary stdin of `agentctl rpcd call METHOD` (what ubus callers
//! send): bounded read, JSON decode and argument typing must return typed
//! errors, never panic.
#![no_main]

use agentd::cli::rpcd;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(args) = rpcd::read_args(data) else { return };
    for method in ["status", "lookup", "reload", "peers", "nosuch"] {
        let _ = rpcd::command_for(method, &args);
    }
});
