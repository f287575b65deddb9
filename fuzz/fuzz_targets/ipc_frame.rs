//! Arbitrary bytes on the agentd IPC socket: the frame decoder and every
//! message decoder must return typed errors, never panic or over-allocate;
//! FIB events that decode (routes, peer states, policy, links) go into a
//! gateway replica, which must refuse what breaks its rules (sequence,
//! the link bound) with typed errors too.
#![no_main]

use agentd::fib::replica::FibReplica;
use agentd::ipc::frame::FrameDecoder;
use agentd::ipc::message::{Hello, Request, ServerMsg};
use agentd::time::Millis;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Split the input in two pushes so partial headers are exercised too.
    let cut = data.first().map_or(0, |b| *b as usize % (data.len() + 1));
    let mut d = FrameDecoder::new();
    d.push(&data[..cut]);
    d.push(&data[cut..]);
    let mut replica = FibReplica::new(64);
    while let Ok(Some(payload)) = d.next_frame() {
        let _ = agentd::ipc::frame::decode_payload::<Hello>(payload);
        let _ = agentd::ipc::frame::decode_payload::<Request>(payload);
        if let Ok(ServerMsg::Fib(ev)) = agentd::ipc::frame::decode_payload::<ServerMsg>(payload) {
            let _ = replica.apply(ev, Millis(0));
            assert!(replica.links().count() <= agentd::fib::MAX_LINKS);
        }
    }
    let _ = d.finish();
});
