//! Admission limits: per-tenant token buckets and the in-flight cap (in
//! total and per source).
//!
//! Sans-IO: the buckets take `Millis` as input so tests drive time
//! directly. Tenant names on the invoke path may be caller-chosen (auth
//! `none`), so the bucket map is bounded: when it is full, buckets that have
//! refilled completely — indistinguishable from fresh ones — are dropped.
//!
//! A neighbour router names the tenant of each call it forwards, and
//! nothing here knows that tenant unless a `tenant` section configures it.
//! So a configured tenant's calls from neighbours share its one bucket
//! with our own callers (the operator's rate for that tenant holds here,
//! wherever its calls come from), and every other tenant a neighbour
//! names gets a bucket of that neighbour's own, at most
//! [`MAX_TENANTS_PER_PEER`] of them, the rest sharing one: a neighbour
//! cannot grow, fill or evict the buckets of our callers or of another
//! neighbour. The in-flight cap likewise gives each neighbour a share
//! (`gateway.max_inflight_per_peer`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;

use agentd::time::Millis;

use crate::sources::SourceKey;

/// Most tenant buckets held at once.
pub const MAX_BUCKETS: usize = 4096;
/// Most buckets of unconfigured tenants one neighbour router's calls hold;
/// beyond them its other tenants share one bucket.
pub const MAX_TENANTS_PER_PEER: usize = 64;
/// Most neighbour routers with buckets at once (linked routers: far
/// fewer); beyond it the tables whose buckets all refilled are dropped.
pub const MAX_PEER_TABLES: usize = 256;

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
    /// Unconfigured tenants of calls from each neighbour router.
    peers: HashMap<Box<str>, PeerTenants>,
}

/// The buckets of the unconfigured tenants one neighbour's calls name.
#[derive(Debug)]
struct PeerTenants {
    tenants: HashMap<Box<str>, TokenBucket>,
    /// Every tenant beyond [`MAX_TENANTS_PER_PEER`], together.
    others: TokenBucket,
}

impl PeerTenants {
    fn new(rate: Rate, now: Millis) -> PeerTenants {
        PeerTenants {
            tenants: HashMap::new(),
            others: TokenBucket::new(rate, now),
        }
    }

    fn check(&mut self, tenant: &str, rate: Rate, now: Millis) -> Result<(), u64> {
        if let Some(b) = self.tenants.get_mut(tenant) {
            return b.try_take(now);
        }
        if self.tenants.len() >= MAX_TENANTS_PER_PEER {
            self.tenants.retain(|_, b| !b.is_full(now));
            if self.tenants.len() >= MAX_TENANTS_PER_PEER {
                return self.others.try_take(now);
            }
        }
        let mut b = TokenBucket::new(rate, now);
        let r = b.try_take(now);
        self.tenants.insert(tenant.into(), b);
        r
    }

    /// Whether forgetting this table changes nothing (every bucket full).
    fn is_fresh(&self, now: Millis) -> bool {
        self.others.is_full(now) && self.tenants.values().all(|b| b.is_full(now))
    }
}

impl RateLimiter {
    pub fn new(default: Rate, overrides: HashMap<Box<str>, Rate>) -> RateLimiter {
        RateLimiter {
            default,
            overrides,
            buckets: HashMap::new(),
            peers: HashMap::new(),
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

    /// Admits one call `peer` forwards for `tenant` at `now`, or answers
    /// the wait in ms: a configured tenant's own bucket, else one of
    /// `peer`'s (see the module comment).
    pub fn check_from_peer(&mut self, peer: &str, tenant: &str, now: Millis) -> Result<(), u64> {
        if self.overrides.contains_key(tenant) {
            return self.check(tenant, now);
        }
        let rate = self.default;
        if let Some(t) = self.peers.get_mut(peer) {
            return t.check(tenant, rate, now);
        }
        if self.peers.len() >= MAX_PEER_TABLES {
            self.peers.retain(|_, t| !t.is_fresh(now));
            if self.peers.len() >= MAX_PEER_TABLES {
                return Err(1000);
            }
        }
        let mut t = PeerTenants::new(rate, now);
        let r = t.check(tenant, rate, now);
        self.peers.insert(peer.into(), t);
        r
    }

    /// Buckets of our callers' (and configured) tenants.
    pub fn tenants_tracked(&self) -> usize {
        self.buckets.len()
    }

    /// Buckets `peer`'s calls hold for unconfigured tenants (the shared
    /// one of the rest not counted).
    pub fn peer_tenants_tracked(&self, peer: &str) -> usize {
        self.peers.get(peer).map_or(0, |t| t.tenants.len())
    }
}

/// Counts requests in flight, in total and per source; a guard per
/// admitted request. The per-source share keeps one host's slow calls
/// from taking every slot (`gateway.max_inflight_per_source`); a source
/// is counted as in [`crate::sources::SourceKey`]. Calls a neighbour
/// router forwards count against that neighbour instead, with a larger
/// share (`gateway.max_inflight_per_peer`): one neighbour carries the
/// calls of many callers, whose own router applied their per-source
/// caps, but it must not take every slot either.
#[derive(Debug)]
pub struct Inflight {
    max: usize,
    max_per_source: usize,
    max_per_peer: usize,
    counts: Rc<InflightCounts>,
}

#[derive(Debug, Default)]
struct InflightCounts {
    current: Cell<usize>,
    /// Requests that have finished, ever (`core::relief` watches it).
    finished: Cell<u64>,
    /// Sources and neighbours with a request in flight (at most `max`
    /// entries).
    per_holder: RefCell<HashMap<Holder, usize>>,
}

/// Whom a request in flight counts against.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Holder {
    Source(SourceKey),
    /// A neighbour router, by its router id.
    Peer(Rc<str>),
}

/// Why a request was refused a slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InflightFull {
    /// `gateway.max_inflight` requests are in flight.
    Total { max: usize },
    /// The request's source holds `gateway.max_inflight_per_source`.
    Source { source: SourceKey, max: usize },
    /// The neighbour that forwarded it holds `gateway.max_inflight_per_peer`.
    Peer { router_id: Rc<str>, max: usize },
}

impl std::fmt::Display for InflightFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InflightFull::Total { max } => write!(f, "{max} requests already in flight"),
            InflightFull::Source { source, max } => {
                write!(f, "source {source} already has {max} requests in flight")
            }
            InflightFull::Peer { router_id, max } => write!(
                f,
                "neighbour router {router_id} already has {max} forwarded calls in flight here (gateway.max_inflight_per_peer)"
            ),
        }
    }
}

/// Releases its slot on drop, however the request ends.
#[derive(Debug)]
pub struct InflightGuard {
    counts: Rc<InflightCounts>,
    holder: Holder,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        let c = &self.counts;
        c.current.set(c.current.get().saturating_sub(1));
        c.finished.set(c.finished.get().wrapping_add(1));
        let mut per = c.per_holder.borrow_mut();
        if let Some(n) = per.get_mut(&self.holder) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.holder);
            }
        }
    }
}

impl Inflight {
    pub fn new(max: usize, max_per_source: usize, max_per_peer: usize) -> Inflight {
        Inflight {
            max,
            max_per_source,
            max_per_peer,
            counts: Rc::new(InflightCounts::default()),
        }
    }

    /// A slot for a request from `source`, or which cap is full.
    pub fn try_acquire(&self, source: IpAddr) -> Result<InflightGuard, InflightFull> {
        let source = SourceKey::of(source);
        self.acquire(Holder::Source(source), self.max_per_source)
            .map_err(|full| {
                full.unwrap_or(InflightFull::Source {
                    source,
                    max: self.max_per_source,
                })
            })
    }

    /// A slot for a call the neighbour router `router_id` forwards: under
    /// the total cap and that neighbour's share, not a per-source one.
    pub fn try_acquire_peer(&self, router_id: &Rc<str>) -> Result<InflightGuard, InflightFull> {
        self.acquire(Holder::Peer(router_id.clone()), self.max_per_peer)
            .map_err(|full| {
                full.unwrap_or(InflightFull::Peer {
                    router_id: router_id.clone(),
                    max: self.max_per_peer,
                })
            })
    }

    /// A slot for `holder` under `share`; `Err(None)`: its share is full.
    fn acquire(&self, holder: Holder, share: usize) -> Result<InflightGuard, Option<InflightFull>> {
        let c = &self.counts;
        let mut per = c.per_holder.borrow_mut();
        let held = per.get(&holder).copied().unwrap_or(0);
        if held >= share {
            return Err(None);
        }
        if c.current.get() >= self.max {
            return Err(Some(InflightFull::Total { max: self.max }));
        }
        *per.entry(holder.clone()).or_insert(0) += 1;
        c.current.set(c.current.get() + 1);
        Ok(InflightGuard {
            counts: c.clone(),
            holder,
        })
    }

    /// Requests finished since the start (wraps).
    pub fn finished(&self) -> u64 {
        self.counts.finished.get()
    }

    pub fn current(&self) -> usize {
        self.counts.current.get()
    }

    /// Requests in flight from the source of `ip`.
    pub fn current_from(&self, ip: IpAddr) -> usize {
        self.held_by(&Holder::Source(SourceKey::of(ip)))
    }

    /// Calls in flight that neighbour `router_id` forwarded.
    pub fn current_from_peer(&self, router_id: &str) -> usize {
        self.held_by(&Holder::Peer(router_id.into()))
    }

    fn held_by(&self, holder: &Holder) -> usize {
        self.counts
            .per_holder
            .borrow()
            .get(holder)
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
        let f = Inflight::new(2, 2, 2);
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
        let f = Inflight::new(10, 3, 3);
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
        let f = Inflight::new(2, 2, 2);
        let _a = f.try_acquire("192.0.2.1".parse().unwrap()).unwrap();
        let _b = f.try_acquire("192.0.2.2".parse().unwrap()).unwrap();
        assert_eq!(
            f.try_acquire("192.0.2.3".parse().unwrap()).unwrap_err(),
            InflightFull::Total { max: 2 }
        );
    }

    #[test]
    fn one_neighbour_cannot_take_every_inflight_slot() {
        let f = Inflight::new(8, 2, 5);
        let c: Rc<str> = "router-c".into();
        let d: Rc<str> = "router-d".into();
        let held: Vec<_> = (0..5).map(|_| f.try_acquire_peer(&c).unwrap()).collect();
        assert_eq!(
            f.try_acquire_peer(&c).unwrap_err(),
            InflightFull::Peer {
                router_id: c.clone(),
                max: 5
            }
        );
        assert_eq!(f.current_from_peer("router-c"), 5);
        // Our own callers and another neighbour still get slots.
        let lan = f.try_acquire("192.0.2.1".parse().unwrap()).unwrap();
        let other = f.try_acquire_peer(&d).unwrap();
        assert_eq!(f.current(), 7);
        drop(held);
        assert_eq!(f.current_from_peer("router-c"), 0);
        assert!(f.try_acquire_peer(&c).is_ok());
        drop((lan, other));
    }

    #[test]
    fn a_neighbours_tenants_never_reach_the_shared_buckets() {
        let mut o = HashMap::new();
        o.insert(
            "lab".into(),
            Rate {
                per_second: 0,
                burst: 2,
            },
        );
        let one = Rate {
            per_second: 0,
            burst: 1,
        };
        let mut l = RateLimiter::new(one, o);
        // A neighbour names more tenants than the shared map holds.
        for i in 0..MAX_BUCKETS + 10 {
            let _ = l.check_from_peer("router-c", &format!("made-up-{i}"), Millis(0));
        }
        assert_eq!(l.tenants_tracked(), 0, "the shared map did not grow");
        assert_eq!(l.peer_tenants_tracked("router-c"), MAX_TENANTS_PER_PEER);
        // Our callers' new tenants, and another neighbour's, still get
        // their own buckets.
        assert_eq!(l.check("ours", Millis(0)), Ok(()));
        assert_eq!(
            l.check_from_peer("router-d", "made-up-0", Millis(0)),
            Ok(())
        );
        // Beyond its share, the neighbour's other tenants share one bucket
        // (spent by the first of them above).
        assert!(l
            .check_from_peer("router-c", "yet-another", Millis(0))
            .is_err());
        // A configured tenant is one bucket wherever its calls come from.
        assert_eq!(l.check("lab", Millis(0)), Ok(()));
        assert_eq!(l.check_from_peer("router-c", "lab", Millis(0)), Ok(()));
        assert!(l.check_from_peer("router-d", "lab", Millis(0)).is_err());
        assert_eq!(l.tenants_tracked(), 2);
    }

    #[test]
    fn a_neighbours_refilled_tenant_buckets_make_room_for_new_ones() {
        let r = Rate {
            per_second: 1,
            burst: 1,
        };
        let mut l = RateLimiter::new(r, HashMap::new());
        for i in 0..MAX_TENANTS_PER_PEER {
            l.check_from_peer("router-c", &format!("t{i}"), Millis(0))
                .unwrap();
        }
        assert_eq!(
            l.check_from_peer("router-c", "late", Millis(0)),
            Ok(()),
            "the shared one"
        );
        assert!(l.check_from_peer("router-c", "later", Millis(0)).is_err());
        // A second on, every bucket refilled: the new tenant gets its own.
        assert_eq!(l.check_from_peer("router-c", "later", Millis(1000)), Ok(()));
        assert!(l.peer_tenants_tracked("router-c") <= MAX_TENANTS_PER_PEER);
    }
}
