//! Arbitrary bytes on an SDK HTTP connection (handler endpoint requests,
//! router responses): head reading/parsing and chunked bodies must end in
//! typed errors within their bounds, never panic.
#![no_main]

use std::io::{BufReader, Read};

use _native::http::body::{read_to_vec, BodyReader};
use _native::http::head::{parse_request_head, parse_response_head, read_head, Framing};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_request_head(data);
    let _ = parse_response_head(data, false);
    let mut r = BufReader::new(data);
    if let Ok(head) = read_head(&mut r) {
        let framing = parse_request_head(&head).map_or(Framing::Chunked, |h| h.framing);
        let _ = read_to_vec(&mut BodyReader::new(&mut r, framing), 1 << 16);
    }
    let mut chunked = BodyReader::new(BufReader::new(data), Framing::Chunked);
    let mut sink = Vec::new();
    let _ = chunked.read_to_end(&mut sink);
});
