//! Arbitrary bytes as a packet heard on port 5353: the bounded decoder
//! returns a message or a typed error, never panics; a message it
//! accepts must survive our own encoder, since a responder re-sends
//! records it read (known answers, §7.1) and a querier compares them.
#![no_main]

use agentd::discovery::mdns::packet::{Packet, PacketError, MAX_MESSAGE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(first) = Packet::decode(data) else {
        return;
    };
    let bytes = first.encode();
    match Packet::decode(&bytes) {
        Ok(second) => assert_eq!(second, first, "re-encoded message reads differently"),
        // Our compression only points at names we wrote; the sender's
        // may point into data we keep raw, so a message near the limit
        // can grow past it. Only that refusal is allowed.
        Err(PacketError::TooLarge(n)) => assert!(n > MAX_MESSAGE),
        Err(e) => panic!("re-encoded message refused: {e}"),
    }
});
