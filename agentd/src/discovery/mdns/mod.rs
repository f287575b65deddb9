//! Multicast DNS (RFC 6762) and DNS-SD over it (RFC 6763), as far as
//! router discovery needs it, without I/O: time and randomness are
//! inputs, packets are values.
//!
//! * [`packet`] — messages: the bounded decoder and the encoder.
//! * [`responder`] — our records: probing, announcing, answering,
//!   conflicts and goodbyes, and the claim of a shared host name.
//! * [`querier`] — browsing one service type: the cache, resolution,
//!   refresh, and verification of a record we doubt.
//!
//! The sockets and the task that drives these are
//! `daemon::discovery::mdns`.

pub mod packet;
pub mod querier;
pub mod responder;

/// Random delays (RFC 6762 asks for them in several places, to keep
/// hosts that hear the same packet from answering in lockstep): a
/// xorshift generator, seeded by the driver from the system's random
/// source and by tests with a constant.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    pub fn new(seed: u64) -> Jitter {
        Jitter(seed | 1)
    }

    /// A value in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        lo + x % (hi.saturating_sub(lo) + 1)
    }
}
