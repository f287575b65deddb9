//! Arbitrary upstream SSE bytes, pushed in two pieces: the parser must
//! stay within its bounds and return typed errors, never panic.
#![no_main]

use agent_gw::task::sse::SseParser;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut p = SseParser::new(256, 1024);
    for part in [&data[..cut], &data[cut..]] {
        p.push(part);
        while let Ok(Some(_)) = p.next_item() {}
    }
});
