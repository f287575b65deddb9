//! Handshake slots of the TLS listeners (public and peer).
//!
//! A TLS handshake costs the gateway a connection, memory and CPU before
//! it knows who is at the other end, so each listener bounds those in
//! progress: in total, and per source (as [`crate::sources`] counts
//! one), so that a host at its share leaves the other slots to others.
//!
//! The slot is taken in the accept loop, before the connection's task is
//! spawned, and moves into that task: a burst the loop accepts in one
//! turn is counted whole before any task runs. It is given back when the
//! handshake ends (finished, failed or timed out), not when the
//! connection does; the connection caps hold it from then on.

use std::fmt;
use std::net::IpAddr;

use crate::sources::{ConnCaps, ConnLimits, ConnRefusal, ConnSlot, SourceKey};

/// The handshakes in progress on one listener.
#[derive(Clone, Debug)]
pub struct Handshakes {
    listener: &'static str,
    /// The same counting as connections, with the handshake caps.
    slots: ConnLimits,
}

/// One handshake in progress; its slot is given back on drop.
pub type HandshakeSlot = ConnSlot;

/// Why a connection was closed at accept, before its handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeRefusal {
    /// `max` handshakes are in progress on `listener`.
    Full { listener: &'static str, max: usize },
    /// `source` already has its share of them.
    SourceFull {
        listener: &'static str,
        source: SourceKey,
        max: usize,
    },
}

impl fmt::Display for HandshakeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeRefusal::Full { listener, max } => {
                write!(f, "all {max} TLS handshakes of the {listener} in progress")
            }
            HandshakeRefusal::SourceFull {
                listener,
                source,
                max,
            } => write!(
                f,
                "source {source} already has {max} TLS handshakes in progress on the {listener}"
            ),
        }
    }
}

impl Handshakes {
    /// At most `max` handshakes at once on `listener` (named in refusals),
    /// `max_per_source` of them from one source.
    pub fn new(listener: &'static str, max: usize, max_per_source: usize) -> Handshakes {
        Handshakes {
            listener,
            slots: ConnLimits::new(ConnCaps {
                max_connections: max,
                max_conns_per_source: max_per_source,
            }),
        }
    }

    /// A slot for a handshake with `ip`, or which cap refuses it. A
    /// refusal allocates nothing.
    pub fn take(&self, ip: IpAddr) -> Result<HandshakeSlot, HandshakeRefusal> {
        let listener = self.listener;
        self.slots.admit(ip).map_err(|r| match r {
            ConnRefusal::Full { max } => HandshakeRefusal::Full { listener, max },
            ConnRefusal::SourceFull { source, max } => HandshakeRefusal::SourceFull {
                listener,
                source,
                max,
            },
        })
    }

    /// Handshakes in progress.
    pub fn in_progress(&self) -> usize {
        self.slots.open()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn one_source_holds_its_share_and_others_still_get_slots() {
        let h = Handshakes::new("peer listener", 8, 2);
        let held: Vec<_> = (0..2).map(|_| h.take(ip("192.0.2.1")).unwrap()).collect();
        assert_eq!(
            h.take(ip("192.0.2.1")).unwrap_err(),
            HandshakeRefusal::SourceFull {
                listener: "peer listener",
                source: SourceKey::of(ip("192.0.2.1")),
                max: 2
            }
        );
        let other = h.take(ip("192.0.2.2")).unwrap();
        assert_eq!(h.in_progress(), 3);
        drop(held);
        drop(other);
        assert_eq!(h.in_progress(), 0, "slots come back on drop");
    }

    #[test]
    fn the_total_holds_across_sources_and_refusals_say_which_listener() {
        let h = Handshakes::new("public listener", 2, 2);
        let _a = h.take(ip("192.0.2.1")).unwrap();
        let _b = h.take(ip("2001:db8::1")).unwrap();
        let e = h.take(ip("192.0.2.3")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "all 2 TLS handshakes of the public listener in progress"
        );
    }
}
