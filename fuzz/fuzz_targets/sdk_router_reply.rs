//! Arbitrary router reply bodies: lease, error, auth-metadata and token
//! decoders of the SDK must return typed errors, never panic.
#![no_main]

use _native::wire::{bootstrap_offer, ErrorBody, LeaseReply, TokenGrant};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = LeaseReply::decode(data);
    let _ = ErrorBody::decode(data);
    let _ = bootstrap_offer(data);
    let _ = TokenGrant::decode(data);
});
