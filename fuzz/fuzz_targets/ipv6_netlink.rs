//! Arbitrary bytes as the kernel's rtnetlink answer to agentd's
//! per-agent address requests and dumps: bounded, typed errors, never a
//! panic; every address decoded came out of the bytes given.
#![no_main]

use agentd::ipv6::netlink::{decode, Answer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(answers) = decode(data) {
        assert!(answers.len() <= data.len() / 16, "more messages than headers fit");
        for a in answers {
            if let Answer::Addr(e) = a {
                let o = e.addr.octets();
                assert!(data.windows(16).any(|w| w == o));
            }
        }
    }
});
