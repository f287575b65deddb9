//! The router's own addresses, as endpoint checks see them.
//!
//! Every registration, renewal with a new endpoint and restored lease is
//! checked against the router's addresses (an endpoint may not point at
//! the router itself). Reading them is a netlink dump (`getifaddrs`):
//! three kernel round trips and ~9 KB of buffers. Read per check, a burst
//! of 1 000 registrations made 1 000 dumps, and the freed buffers were
//! where each route's long-lived records then landed, scattered over
//! the heap. A reading now serves every check within [`MAX_AGE_MS`] of
//! the state's clock. An address the router gained within that second
//! is not yet "own" here; the gateway checks every connect against a
//! fresh reading (`agent_gw::forward::target`), so such an endpoint is
//! still refused when it is called.

use std::sync::Arc;

use crate::endpoint::LocalAddrs;
use crate::time::Millis;

/// How long one reading serves.
pub const MAX_AGE_MS: u64 = 1_000;

/// The source of readings and the last one, with when it was taken.
#[derive(Debug)]
pub(super) struct OwnAddrs {
    read: fn() -> LocalAddrs,
    last: Option<(Millis, Arc<LocalAddrs>)>,
}

impl OwnAddrs {
    pub(super) fn new(read: fn() -> LocalAddrs) -> OwnAddrs {
        OwnAddrs { read, last: None }
    }

    /// The addresses as of `now`: the last reading while it is younger
    /// than [`MAX_AGE_MS`], else a new one. A clock that went back (a
    /// reading "from the future") reads again.
    pub(super) fn at(&mut self, now: Millis) -> Arc<LocalAddrs> {
        if let Some((at, addrs)) = &self.last {
            if now.0 >= at.0 && now.0 - at.0 < MAX_AGE_MS {
                return addrs.clone();
            }
        }
        let addrs = Arc::new((self.read)());
        self.last = Some((now, addrs.clone()));
        addrs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Readings taken; each reading's one address is 192.0.2.<count>.
    static READS: AtomicU64 = AtomicU64::new(0);

    fn counted() -> LocalAddrs {
        let n = READS.fetch_add(1, Ordering::SeqCst) + 1;
        LocalAddrs {
            addrs: vec![IpAddr::V4(Ipv4Addr::new(192, 0, 2, n as u8))],
            ..LocalAddrs::default()
        }
    }

    fn read_no(a: &LocalAddrs) -> u8 {
        match a.addrs[..] {
            [IpAddr::V4(v4)] => v4.octets()[3],
            _ => panic!("{a:?}"),
        }
    }

    #[test]
    fn one_reading_serves_a_second_of_checks_then_a_new_one_is_taken() {
        let mut own = OwnAddrs::new(counted);
        let first = read_no(&own.at(Millis(10_000)));
        for t in [10_000, 10_001, 10_500, 10_999] {
            assert_eq!(read_no(&own.at(Millis(t))), first, "at {t}");
        }
        let second = read_no(&own.at(Millis(11_000)));
        assert_ne!(second, first);
        assert_eq!(read_no(&own.at(Millis(11_999))), second);
        // The clock went back: not served from a reading "ahead" of it.
        let third = read_no(&own.at(Millis(5_000)));
        assert_ne!(third, second);
        assert_eq!(read_no(&own.at(Millis(5_001))), third);
    }
}
