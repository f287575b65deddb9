//! Arbitrary bytes on an ARPX session: framing, postcard decoding and the
//! wire checks must return typed errors, never panic or over-allocate, and
//! whatever decodes must re-encode to the same body.
#![no_main]

use arpx::frame::{decode_body, encode_body, FrameReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut r = FrameReader::new(4096);
    r.feed(&data[..cut]);
    while let Some(Ok(_)) = r.next_message() {}
    r.feed(&data[cut..]);
    while let Some(Ok(_)) = r.next_message() {}
    assert!(r.buffered() <= data.len());
    if let Ok(msg) = decode_body(data) {
        assert_eq!(decode_body(&encode_body(&msg)).as_ref(), Ok(&msg));
    }
});
