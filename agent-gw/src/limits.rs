//! Admission limits: per-tenant token buckets and the in-flight cap.
//!
//! Sans-IO: the buckets take `Millis` as input so tests drive time
//! directly. Tenant names on the invoke path may be caller-chosen (auth
//! `none`), so the bucket map is bounded: when it is full, buckets that have
//! refilled completely — indistinguishable from fresh ones — are dropped.

use std::cell::Cell;
use std::collections::HashMap;
use std::rc::Rc;

use agentd::time::Millis;

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

/// Counts requests in flight; a guard per admitted request.
#[derive(Debug)]
pub struct Inflight {
    max: usize,
    current: Rc<Cell<usize>>,
}

/// Releases its slot on drop, however the request ends.
#[derive(Debug)]
pub struct InflightGuard {
    current: Rc<Cell<usize>>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.current.set(self.current.get().saturating_sub(1));
    }
}

impl Inflight {
    pub fn new(max: usize) -> Inflight {
        Inflight {
            max,
            current: Rc::new(Cell::new(0)),
        }
    }

    pub fn try_acquire(&self) -> Option<InflightGuard> {
        let n = self.current.get();
        if n >= self.max {
            return None;
        }
        self.current.set(n + 1);
        Some(InflightGuard {
            current: self.current.clone(),
        })
    }

    pub fn current(&self) -> usize {
        self.current.get()
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
        let f = Inflight::new(2);
        let a = f.try_acquire().unwrap();
        let _b = f.try_acquire().unwrap();
        assert!(f.try_acquire().is_none());
        drop(a);
        assert_eq!(f.current(), 1);
        assert!(f.try_acquire().is_some());
    }
}
