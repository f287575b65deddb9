//! Time as an input.
//!
//! Protocol and table logic never reads a clock: callers pass `Millis`
//! taken from `CLOCK_MONOTONIC`. Because that clock is system-wide on Linux,
//! a lease deadline computed by agentd means the same instant inside
//! agent-gw, which lets the gateway expire FIB entries on time even while
//! agentd is down.

use serde::{Deserialize, Serialize};

/// Milliseconds on the system-wide monotonic clock.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Millis(pub u64);

impl Millis {
    pub const ZERO: Millis = Millis(0);

    /// Reads `CLOCK_MONOTONIC`. Only daemon drivers call this; logic takes
    /// the value as an argument. (std's `Instant` is the same clock but
    /// opaque, and two processes must agree on raw deadlines.)
    pub fn now() -> Millis {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec and CLOCK_MONOTONIC is
        // always supported on Linux.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        debug_assert_eq!(rc, 0);
        Millis((ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000)
    }

    pub fn saturating_add_ms(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }

    pub fn saturating_sub(self, other: Millis) -> u64 {
        self.0.saturating_sub(other.0)
    }
}
