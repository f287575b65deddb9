//! Arbitrary bytes from a handler, as the first read after a request and
//! as a later one, through the gateway's choice of when to ACK at once
//! (`forward::quickack::Acks`): never a panic; an answer left to the
//! kernel's delayed ACK is an HTTP/1 status line's bytes and no more than
//! one read's worth; every later read before the next request is ACKed.
#![no_main]

use agent_gw::forward::quickack::Acks;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut acks = Acks::default();
    acks.wrote();
    let first = acks.read(data);
    if !first {
        assert!(data.starts_with(b"HTTP/1."), "{data:?}");
    }
    assert!(acks.read(data), "a second read is always acked");
    let mut again = Acks::default();
    again.wrote();
    assert_eq!(again.read(data), first, "the same bytes, the same choice");
});
