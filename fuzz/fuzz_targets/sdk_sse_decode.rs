//! Arbitrary bytes in an SSE stream read by the SDK: the decoder (fed in
//! two pieces) and the resume filter must return typed errors, never panic.
#![no_main]

use _native::resume::ResumeState;
use _native::sse::SseDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut d = SseDecoder::new(4096, 16384);
    let mut items = Vec::new();
    let _ = d.feed(&data[..cut], &mut items).and_then(|_| d.feed(&data[cut..], &mut items));
    let mut state = ResumeState::new(0, 3);
    for item in items {
        let _ = state.on_item(item);
    }
    let _ = state.on_disconnect();
});
