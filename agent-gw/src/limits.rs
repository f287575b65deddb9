//! Admission limits: per-tenant token buckets and the in-flight cap (in
//! total and per source).
//!
//! Sans-IO: the buckets take `Millis` as input so tests drive time
//! directly. Tenant names on the invoke path may be caller-chosen (auth
//! `none`), so the bucket map is bounded: when it is full, buckets that have
//! refilled completely — indistinguishable from fresh ones — are dropped.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;

use agentd::time::Millis;

use crate::sources::SourceKey;

/// Most tenant buckets held at once.
pub const MAX_BUCKETS: usize = 4096;

/// Rate and burst of one bucket. Zero is a value: rate 0 never refills,
/// burst 0 admits nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u64,
    pub burst: u64,
}

/// A token bucket counted in thousandths of a token, so sub-second refill
/// stays exact with integer arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate: Rate,
    milli_tokens: u64,
    last: Millis,
}

impl TokenBucket {
    pub fn new(rate: Rate, now: Millis) -> TokenBucket {
        TokenBucket {
            rate,
            milli_tokens: rate.burst.saturating_mul(1000),
            last: now,
        }
    }

    fn refill(&mut self, now: Millis) {
        let elapsed = now.saturating_sub(self.last);
        self.last = self.last.max(now);
        // tokens/s × ms = thousandths of a token.
        let add = self.rate.per_second.saturating_mul(elapsed);
        self.milli_tokens = self
            .milli_tokens
            .saturating_add(add)
            .min(self.rate.burst.saturating_mul(1000));
    }

    /// Takes one token, or says how many ms until one is available
    /// (`u64::MAX` when the bucket never refills).
    pub fn try_take(&mut self, now: Millis) -> Result<(), u64> {
        self.refill(now);
        if self.milli_tokens >= 1000 {
            self.milli_tokens -= 1000;
            return Ok(());
        }
        if self.rate.per_second == 0 || self.rate.burst == 0 {
            return Err(u64::MAX);
        }
        let missing = 1000 - self.milli_tokens;
        Err(missing.div_ceil(self.rate.per_second))
    }

    pub fn is_full(&self, now: Millis) -> bool {
        let mut probe = *self;
        probe.refill(now);
        probe.milli_tokens >= self.rate.burst.saturating_mul(1000)
    }
}

/// Per-tenant rate limiting with UCI `tenant` overrides.
#[derive(Debug)]
pub struct RateLimiter {
    default: Rate,
    overrides: HashMap<Box<str>, Rate>,
    buckets: HashMap<Box<str>, TokenBucket>,
}

impl RateLimiter {
    pub fn new(default: Rate, overrides: HashMap<Box<str>, Rate>) -> RateLimiter {
        RateLimiter {
            default,
            overrides,
            buckets: HashMap::new(),
        }
    }

    pub fn rate_for(&self, tenant: &str) -> Rate {
        self.overrides.get(tenant).copied().unwrap_or(self.default)
    }

    /// Admits one request of `tenant` at `now`, or answers the wait in ms.
    pub fn check(&mut self, tenant: &str, now: Millis) -> Result<(), u64> {
        if let Some(b) = self.buckets.get_mut(tenant) {
            return b.try_take(now);
        }
        if self.buckets.len() >= MAX_BUCKETS {
            self.buckets.retain(|_, b| !b.is_full(now));
            if self.buckets.len() >= MAX_BUCKETS {
                // Every bucket is in use: refuse rather than grow or reset
                // someone's bucket (which would lift their limit).
                return Err(1000);
            }
        }
        let mut b = TokenBucket::new(self.rate_for(tenant), now);
        let r = b.try_take(now);
        self.buckets.insert(tenant.into(), b);
        r
    }

    pub fn tenants_tracked(&self) -> usize {
        self.buckets.len()
    }
}

/// Counts requests in flight, in total and per source; a guard per
/// admitted request. The per-source share keeps one host's slow calls
/// from taking every slot (`gateway.max_inflight_per_source`); a source
/// is counted as in [`crate::sources::SourceKey`].
#[derive(Debug)]
pub struct Inflight {
    max: usize,
    max_per_source: usize,
    counts: Rc<InflightCounts>,
}

#[derive(Debug, Default)]
struct InflightCounts {
    current: Cell<usize>,
    /// Sources with a request in flight (at most `max` entries).
    per_source: RefCell<HashMap<SourceKey, usize>>,
}

/// Why a request was refused a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InflightFull {
    /// `gateway.max_inflight` requests are in flight.
    Total { max: usize },
    /// The request's source holds `gateway.max_inflight_per_source`.
    Source { source: SourceKey, max: usize },
}

impl std::fmt::Display for InflightFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InflightFull::Total { max } => write!(f, "{max} requests already in flight"),
            InflightFull::Source { source, max } => {
                write!(f, "source {source} already has {max} requests in flight")
            }
        }
    }
}

/// Releases its slot on drop, however the request ends.
#[derive(Debug)]
pub struct InflightGuard {
    counts: Rc<InflightCounts>,
    /// `None`: a call from a peer router, under the total cap only.
    source: Option<SourceKey>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        let c = &self.counts;
        c.current.set(c.current.get().saturating_sub(1));
        let Some(source) = self.source else {
            return;
        };
        let mut per = c.per_source.borrow_mut();
        if let Some(n) = per.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                per.remove(&source);
            }
        }
    }
}

impl Inflight {
    pub fn new(max: usize, max_per_source: usize) -> Inflight {
        Inflight {
            max,
            max_per_source,
            counts: Rc::new(InflightCounts::default()),
        }
    }

    /// A slot for a request from `source`, or which cap is full.
    pub fn try_acquire(&self, source: IpAddr) -> Result<InflightGuard, InflightFull> {
        let source = SourceKey::of(source);
        let c = &self.counts;
        let mut per = c.per_source.borrow_mut();
        let held = per.get(&source).copied().unwrap_or(0);
        if held >= self.max_per_source {
            return Err(InflightFull::Source {
                source,
                max: self.max_per_source,
            });
        }
        if c.current.get() >= self.max {
            return Err(InflightFull::Total { max: self.max });
        }
        *per.entry(source).or_insert(0) += 1;
        c.current.set(c.current.get() + 1);
        Ok(InflightGuard {
            counts: c.clone(),
            source: Some(source),
        })
    }

    /// A slot for a call a peer router forwards: under the total cap, not
    /// a per-source one (one peer carries the calls of many callers,
    /// whose own router applied their per-source caps).
    pub fn try_acquire_peer(&self) -> Result<InflightGuard, InflightFull> {
        let c = &self.counts;
        if c.current.get() >= self.max {
            return Err(InflightFull::Total { max: self.max });
        }
        c.current.set(c.current.get() + 1);
        Ok(InflightGuard {
            counts: c.clone(),
            source: None,
        })
    }

    pub fn current(&self) -> usize {
        self.counts.current.get()
    }

    /// Requests in flight from the source of `ip`.
    pub fn current_from(&self, ip: IpAddr) -> usize {
        self.counts
            .per_source
            .borrow()
            .get(&SourceKey::of(ip))
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: Rate = Rate {
        per_second: 10,
        burst: 3,
    };

    #[test]
    fn burst_then_refill_at_rate() {
        let mut b = TokenBucket::new(R, Millis(0));
        for _ in 0..3 {
            assert_eq!(b.try_take(Millis(0)), Ok(()));
        }
        assert_eq!(b.try_take(Millis(0)), Err(100));
        assert_eq!(b.try_take(Millis(50)), Err(50));
        assert_eq!(b.try_take(Millis(100)), Ok(()));
        // Refill is capped at the burst.
        for _ in 0..3 {
            assert_eq!(b.try_take(Millis(1_000_000)), Ok(()));
        }
        assert!(b.try_take(Millis(1_000_000)).is_err());
    }

    #[test]
    fn zero_rate_and_zero_burst_are_values() {
        let mut b = TokenBucket::new(
            Rate {
                per_second: 0,
                burst: 1,
            },
            Millis(0),
        );
        assert_eq!(b.try_take(Millis(0)), Ok(()));
        assert_eq!(b.try_take(Millis(10_000)), Err(u64::MAX));
        let mut b = TokenBucket::new(
            Rate {
                per_second: 5,
                burst: 0,
            },
            Millis(0),
        );
        assert_eq!(b.try_take(Millis(10_000)), Err(u64::MAX));
    }

    #[test]
    fn time_going_backwards_does_not_mint_tokens() {
        let mut b = TokenBucket::new(R, Millis(1000));
        for _ in 0..3 {
            b.try_take(Millis(1000)).unwrap();
        }
        assert!(b.try_take(Millis(500)).is_err());
        assert!(b.try_take(Millis(1000)).is_err());
    }

    #[test]
    fn tenants_have_separate_buckets_and_overrides() {
        let mut o = HashMap::new();
        o.insert(
            "vip".into(),
            Rate {
                per_second: 1,
                burst: 5,
            },
        );
        let mut l = RateLimiter::new(
            Rate {
                per_second: 1,
                burst: 1,
            },
            o,
        );
        assert!(l.check("a", Millis(0)).is_ok());
        assert!(l.check("a", Millis(0)).is_err());
        assert!(l.check("b", Millis(0)).is_ok());
        for _ in 0..5 {
            assert!(l.check("vip", Millis(0)).is_ok());
        }
        assert!(l.check("vip", Millis(0)).is_err());
    }

    #[test]
    fn bucket_map_is_bounded_and_drops_only_refilled_buckets() {
        let mut l = RateLimiter::new(
            Rate {
                per_second: 1,
                burst: 1,
            },
            HashMap::new(),
        );
        for i in 0..MAX_BUCKETS {
            l.check(&format!("t{i}"), Millis(0)).unwrap();
        }
        // All buckets empty: a new tenant is refused, nobody is reset.
        assert!(l.check("new", Millis(0)).is_err());
        assert!(l.check("t0", Millis(0)).is_err());
        assert_eq!(l.tenants_tracked(), MAX_BUCKETS);
        // After refill the full buckets may go.
        assert!(l.check("new", Millis(2000)).is_ok());
        assert!(l.tenants_tracked() <= MAX_BUCKETS);
    }

    #[test]
    fn inflight_guard_releases_on_drop() {
        let f = Inflight::new(2, 2);
        let src: IpAddr = "192.0.2.1".parse().unwrap();
        let a = f.try_acquire(src).unwrap();
        let _b = f.try_acquire(src).unwrap();
        assert!(f.try_acquire(src).is_err());
        drop(a);
        assert_eq!(f.current(), 1);
        assert!(f.try_acquire(src).is_ok());
    }

    #[test]
    fn one_source_cannot_take_every_inflight_slot() {
        let f = Inflight::new(10, 3);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let held: Vec<_> = (0..3).map(|_| f.try_acquire(a).unwrap()).collect();
        assert_eq!(
            f.try_acquire(a).unwrap_err(),
            InflightFull::Source {
                source: SourceKey::of(a),
                max: 3
            }
        );
        let others: Vec<_> = (0..7).filter_map(|_| f.try_acquire(b).ok()).collect();
        assert_eq!(others.len(), 3, "b has its own share of 3");
        drop(held);
        assert_eq!(f.current_from(a), 0);
        assert_eq!(f.current(), 3);
    }

    #[test]
    fn the_total_cap_holds_across_sources() {
        let f = Inflight::new(2, 2);
        let _a = f.try_acquire("192.0.2.1".parse().unwrap()).unwrap();
        let _b = f.try_acquire("192.0.2.2".parse().unwrap()).unwrap();
        assert_eq!(
            f.try_acquire("192.0.2.3".parse().unwrap()).unwrap_err(),
            InflightFull::Total { max: 2 }
        );
    }
}
