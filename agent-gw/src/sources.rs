//! Per-source shares of the gateway's client connections, so one host
//! cannot lock everyone else out (issue 6 item 4d).
//!
//! Every open connection counts against its source from accept to close —
//! one that has not sent a complete request head (half-open, slowloris)
//! counts like any other. At accept the gateway asks [`ConnLimits::admit`]
//! before it allocates anything for the connection: a source at
//! `max_conns_per_source`, or a full gateway (`max_connections`), gets the
//! connection closed at once, and other sources are not touched. The
//! in-flight share per source lives with the in-flight cap
//! ([`crate::limits::Inflight`]).
//!
//! A *source* is the client's IPv4 address, or the /64 of its IPv6
//! address: one IPv6 host holds a whole /64 (SLAAC, privacy addresses) and
//! could otherwise multiply its share by changing addresses. IPv4-mapped
//! IPv6 addresses count as IPv4.
//!
//! Refusals are logged through [`CapLog`]: at most one line per kind of
//! cap per [`LOG_EVERY_MS`], with the number of refusals it stands for, so
//! a flood of refused connections does not flood the log.
//!
//! Idle connections need no separate reclaiming when the global cap is
//! near: the server's header read timeout (10 s) runs both for a new
//! connection's first head and between requests on a keep-alive
//! connection, so a connection that is not sending a request gives its
//! slot back within 10 s whoever holds it. With the per-source share at an
//! eighth of the total (128 of 1024 by default), filling the gateway takes
//! eight sources at their share, and even then slots come back within
//! that time. Closing other sources' idle connections early would touch
//! sources that are within their share, which is what the share is meant
//! to prevent; so the gateway does not.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;

use agentd::time::Millis;

/// Whom a connection or call is counted against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKey {
    V4(Ipv4Addr),
    /// The upper 64 bits of the address.
    V6Prefix(u64),
}

impl SourceKey {
    pub fn of(ip: IpAddr) -> SourceKey {
        match ip {
            IpAddr::V4(v4) => SourceKey::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => SourceKey::V4(v4),
                None => SourceKey::V6Prefix((u128::from(v6) >> 64) as u64),
            },
        }
    }
}

impl fmt::Display for SourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceKey::V4(a) => write!(f, "{a}"),
            SourceKey::V6Prefix(p) => write!(f, "{}/64", Ipv6Addr::from(u128::from(*p) << 64)),
        }
    }
}

/// The connection caps (`gateway.max_connections`,
/// `gateway.max_conns_per_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnCaps {
    pub max_connections: usize,
    pub max_conns_per_source: usize,
}

/// Why a connection was closed at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnRefusal {
    /// Every connection slot of the gateway is taken.
    Full { max: usize },
    /// This source already holds its share.
    SourceFull { source: SourceKey, max: usize },
}

impl fmt::Display for ConnRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnRefusal::Full { max } => {
                write!(
                    f,
                    "all {max} client connections in use (gateway.max_connections)"
                )
            }
            ConnRefusal::SourceFull { source, max } => write!(
                f,
                "source {source} already holds {max} connections (gateway.max_conns_per_source)"
            ),
        }
    }
}

#[derive(Debug)]
struct Table {
    caps: ConnCaps,
    open: Cell<usize>,
    /// Sources with at least one open connection; so at most
    /// `max_connections` entries.
    per_source: RefCell<HashMap<SourceKey, usize>>,
}

/// Open client connections, in total and per source.
#[derive(Clone, Debug)]
pub struct ConnLimits(Rc<Table>);

/// One admitted connection; its slot is given back on drop.
#[derive(Debug)]
pub struct ConnSlot {
    table: Rc<Table>,
    source: SourceKey,
}

impl ConnLimits {
    pub fn new(caps: ConnCaps) -> ConnLimits {
        ConnLimits(Rc::new(Table {
            caps,
            open: Cell::new(0),
            per_source: RefCell::new(HashMap::new()),
        }))
    }

    /// Admits a connection from `ip`, or says which cap refuses it. A
    /// refusal allocates nothing.
    pub fn admit(&self, ip: IpAddr) -> Result<ConnSlot, ConnRefusal> {
        let t = &self.0;
        let source = SourceKey::of(ip);
        let mut per = t.per_source.borrow_mut();
        let held = per.get(&source).copied().unwrap_or(0);
        if held >= t.caps.max_conns_per_source {
            return Err(ConnRefusal::SourceFull {
                source,
                max: t.caps.max_conns_per_source,
            });
        }
        if t.open.get() >= t.caps.max_connections {
            return Err(ConnRefusal::Full {
                max: t.caps.max_connections,
            });
        }
        *per.entry(source).or_insert(0) += 1;
        t.open.set(t.open.get() + 1);
        Ok(ConnSlot {
            table: t.clone(),
            source,
        })
    }

    /// Open connections in total.
    pub fn open(&self) -> usize {
        self.0.open.get()
    }

    /// Open connections of the source of `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.0
            .per_source
            .borrow()
            .get(&SourceKey::of(ip))
            .copied()
            .unwrap_or(0)
    }

    /// Sources with an open connection.
    pub fn sources(&self) -> usize {
        self.0.per_source.borrow().len()
    }
}

impl ConnSlot {
    pub fn source(&self) -> SourceKey {
        self.source
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let t = &self.table;
        t.open.set(t.open.get().saturating_sub(1));
        let mut per = t.per_source.borrow_mut();
        if let Some(n) = per.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.source);
            }
        }
    }
}

/// Least time between two log lines about the same kind of cap.
pub const LOG_EVERY_MS: u64 = 10_000;

/// The caps whose refusals are logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cap {
    Connections,
    ConnsPerSource,
    Inflight,
    InflightPerSource,
    InflightPerPeer,
    /// A TLS listener's handshake slots (`handshake`).
    Handshakes,
}

impl Cap {
    const ALL: usize = 6;

    fn index(self) -> usize {
        self as usize
    }
}

/// Rate limit of cap log lines, sans-IO (time is an argument).
#[derive(Debug, Default)]
pub struct CapLog {
    last: [Option<Millis>; Cap::ALL],
    /// Refusals since the last line of each kind.
    unlogged: [u64; Cap::ALL],
}

impl CapLog {
    /// Records one refusal by `cap`; returns the log line to write now, if
    /// one is due (the first refusal, then at most one per
    /// `LOG_EVERY_MS`, counting the refusals it stands for).
    pub fn refused(&mut self, cap: Cap, what: &dyn fmt::Display, now: Millis) -> Option<String> {
        let i = cap.index();
        self.unlogged[i] += 1;
        if self.last[i].is_some_and(|t| now.saturating_sub(t) < LOG_EVERY_MS) {
            return None;
        }
        let n = std::mem::take(&mut self.unlogged[i]);
        self.last[i] = Some(now);
        Some(if n == 1 {
            format!("refused: {what}")
        } else {
            format!("refused: {what} ({n} refusals by this cap since the last line)")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn caps(total: usize, per: usize) -> ConnCaps {
        ConnCaps {
            max_connections: total,
            max_conns_per_source: per,
        }
    }

    #[test]
    fn a_capped_source_is_refused_while_others_get_in() {
        let c = ConnLimits::new(caps(100, 3));
        let held: Vec<_> = (0..3).map(|_| c.admit(ip("192.0.2.1")).unwrap()).collect();
        assert_eq!(
            c.admit(ip("192.0.2.1")).unwrap_err(),
            ConnRefusal::SourceFull {
                source: SourceKey::of(ip("192.0.2.1")),
                max: 3
            }
        );
        let other = c.admit(ip("192.0.2.2")).unwrap();
        assert_eq!((c.open(), c.sources()), (4, 2));
        drop(held);
        assert_eq!(c.open_from(ip("192.0.2.1")), 0);
        assert_eq!(c.sources(), 1, "a source without connections is forgotten");
        assert!(c.admit(ip("192.0.2.1")).is_ok());
        drop(other);
    }

    #[test]
    fn the_global_cap_still_holds() {
        let c = ConnLimits::new(caps(2, 2));
        let _a = c.admit(ip("192.0.2.1")).unwrap();
        let _b = c.admit(ip("192.0.2.2")).unwrap();
        assert_eq!(
            c.admit(ip("192.0.2.3")).unwrap_err(),
            ConnRefusal::Full { max: 2 }
        );
        assert_eq!(c.sources(), 2, "a refusal allocates nothing");
    }

    #[test]
    fn ipv6_sources_are_their_64_and_mapped_ipv4_is_ipv4() {
        assert_eq!(
            SourceKey::of(ip("2001:db8:1:2::5")),
            SourceKey::of(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(
            SourceKey::of(ip("2001:db8:1:2::5")),
            SourceKey::of(ip("2001:db8:1:3::5"))
        );
        assert_eq!(
            SourceKey::of(ip("::ffff:192.0.2.7")),
            SourceKey::of(ip("192.0.2.7"))
        );
        assert_eq!(
            SourceKey::of(ip("2001:db8:1:2::5")).to_string(),
            "2001:db8:1:2::/64"
        );
        let c = ConnLimits::new(caps(10, 1));
        let _a = c.admit(ip("2001:db8:1:2::5")).unwrap();
        assert!(c.admit(ip("2001:db8:1:2::6")).is_err());
    }

    #[test]
    fn cap_log_lines_are_rate_limited_and_count_what_they_stand_for() {
        let mut l = CapLog::default();
        let what = "x";
        assert_eq!(
            l.refused(Cap::ConnsPerSource, &what, Millis(0)).as_deref(),
            Some("refused: x")
        );
        for t in 1..1000 {
            assert_eq!(l.refused(Cap::ConnsPerSource, &what, Millis(t)), None);
        }
        // Another cap has its own budget.
        assert!(l.refused(Cap::Connections, &what, Millis(5)).is_some());
        let line = l
            .refused(Cap::ConnsPerSource, &what, Millis(LOG_EVERY_MS))
            .unwrap();
        assert!(
            line.ends_with("(1000 refusals by this cap since the last line)"),
            "{line}"
        );
    }
}
