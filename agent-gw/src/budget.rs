//! The gateway's one memory budget (`gateway.buffer_budget`): every byte
//! the gateway holds on behalf of a caller beyond a request's own lifetime
//! — async task results, stream histories, request bodies kept to resend —
//! is a [`Reservation`] against it.
//!
//! ```text
//!   admission (async / stream)    reserve(): total, tenant and source
//!        |                        shares must all have room → else Refusal
//!        v                        (typed; retry_at from the held entries)
//!   Reservation ── resize() grows (checked) / shrinks (always)
//!        |         set_free_at(): when its holder will let go by itself
//!        v
//!   drop ────────── released (RAII: nothing can leak a charge)
//! ```
//!
//! Accepted work is never evicted: a refusal only ever stops *new* work or
//! the *growth* of a stream history (which then drops its own oldest
//! events). Sync request bodies are charged with [`Budget::reserve_forced`]
//! (they are bounded by the in-flight cap and never refused here), so they
//! count towards what new async/stream work sees.
//!
//! Sans-IO: time is an argument ([`Millis`]); the ledger is plain data
//! behind an `Rc<RefCell<_>>` (the gateway is single-threaded).

use std::cell::RefCell;
use std::collections::{hash_map, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::rc::Rc;

use agentd::time::Millis;

use crate::sources::SourceKey;

/// Limits of the budget (from the `gateway` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetConfig {
    /// `buffer_budget`: bytes held at most, all holders together.
    pub limit: usize,
    /// `tenant_share_percent`: most of `limit` one tenant may hold.
    pub tenant_share_percent: u64,
    /// `source_share_percent`: most of `limit` one client address may hold.
    pub source_share_percent: u64,
}

impl BudgetConfig {
    /// `percent` of `total`, at least 1 (a share never locks everyone out).
    pub fn share(total: usize, percent: u64) -> usize {
        let v = (total as u128 * u128::from(percent.min(100))) / 100;
        usize::try_from(v).unwrap_or(usize::MAX).max(1)
    }

    pub fn tenant_limit(&self) -> usize {
        BudgetConfig::share(self.limit, self.tenant_share_percent)
    }

    pub fn source_limit(&self) -> usize {
        BudgetConfig::share(self.limit, self.source_share_percent)
    }
}

/// Who holds a reservation: the verified (or lab-mode) tenant and the
/// client address the request came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    pub tenant: Rc<str>,
    pub source: IpAddr,
}

impl Holder {
    pub fn new(tenant: &str, source: IpAddr) -> Holder {
        Holder {
            tenant: tenant.into(),
            source,
        }
    }
}

/// Which bound refused: the whole budget or one holder's share of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Total,
    Tenant,
    Source,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Total => "total",
            Scope::Tenant => "tenant",
            Scope::Source => "source",
        }
    }
}

/// Why bytes could not be reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub scope: Scope,
    /// Bytes asked for.
    pub need: usize,
    /// Bytes the scope held at the time.
    pub used: usize,
    pub limit: usize,
    /// When enough of the scope's bytes will have been released by their
    /// holders for `need` to fit; `None` when the scope's bytes have no
    /// known release time (running streams with followers).
    pub retry_at: Option<Millis>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whose = match self.scope {
            Scope::Total => "the gateway buffer budget",
            Scope::Tenant => "the tenant's share of the gateway buffer budget",
            Scope::Source => "this client address's share of the gateway buffer budget",
        };
        write!(
            f,
            "{whose} is exhausted ({} of {} bytes held, {} more needed)",
            self.used, self.limit, self.need
        )
    }
}

/// Counters for `agentctl stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetStats {
    pub refused_total: u64,
    pub refused_tenant: u64,
    pub refused_source: u64,
    /// Most bytes ever held at once.
    pub peak: usize,
}

#[derive(Debug)]
struct Entry {
    holder: Holder,
    bytes: usize,
    free_at: Option<Millis>,
}

/// The accounting itself: totals per scope and one entry per reservation.
#[derive(Debug)]
pub struct Ledger {
    cfg: BudgetConfig,
    used: usize,
    tenants: HashMap<Rc<str>, usize>,
    /// Bytes per source, counted as [`SourceKey`] (an IPv6 /64 is one
    /// source).
    sources: HashMap<SourceKey, usize>,
    /// By reservation id: our own counter, so no caller can choose the
    /// keys and foldhash serves (SipHash stays on the tenant and source
    /// maps, whose keys callers choose).
    entries: hashbrown::HashMap<u64, Entry>,
    next: u64,
    stats: BudgetStats,
}

impl Ledger {
    pub fn new(cfg: BudgetConfig) -> Ledger {
        Ledger {
            cfg,
            used: 0,
            tenants: HashMap::new(),
            sources: HashMap::new(),
            entries: hashbrown::HashMap::new(),
            next: 1,
            stats: BudgetStats::default(),
        }
    }

    pub fn config(&self) -> BudgetConfig {
        self.cfg
    }

    pub fn used(&self) -> usize {
        self.used
    }

    pub fn tenant_used(&self, tenant: &str) -> usize {
        self.tenants.get(tenant).copied().unwrap_or(0)
    }

    pub fn source_used(&self, source: IpAddr) -> usize {
        self.sources
            .get(&SourceKey::of(source))
            .copied()
            .unwrap_or(0)
    }

    pub fn stats(&self) -> BudgetStats {
        self.stats
    }

    /// Live reservations.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first scope `extra` more bytes of `holder` would overflow.
    fn overflow(&self, holder: &Holder, extra: usize) -> Option<(Scope, usize, usize)> {
        let checks = [
            (Scope::Total, self.used, self.cfg.limit),
            (
                Scope::Tenant,
                self.tenant_used(&holder.tenant),
                self.cfg.tenant_limit(),
            ),
            (
                Scope::Source,
                self.source_used(holder.source),
                self.cfg.source_limit(),
            ),
        ];
        checks
            .into_iter()
            .find(|(_, used, limit)| used.saturating_add(extra) > *limit)
    }

    fn refusal(
        &mut self,
        holder: &Holder,
        scope: Scope,
        used: usize,
        limit: usize,
        need: usize,
    ) -> Refusal {
        match scope {
            Scope::Total => self.stats.refused_total += 1,
            Scope::Tenant => self.stats.refused_tenant += 1,
            Scope::Source => self.stats.refused_source += 1,
        }
        let deficit = used.saturating_add(need).saturating_sub(limit);
        Refusal {
            scope,
            need,
            used,
            limit,
            retry_at: self.frees_enough_at(scope, holder, deficit),
        }
    }

    /// The earliest time by which entries of `scope` (as seen by `holder`)
    /// with a known release time add up to `deficit` bytes.
    fn frees_enough_at(&self, scope: Scope, holder: &Holder, deficit: usize) -> Option<Millis> {
        let mut due: Vec<(Millis, usize)> = self
            .entries
            .values()
            .filter(|e| match scope {
                Scope::Total => true,
                Scope::Tenant => e.holder.tenant == holder.tenant,
                Scope::Source => e.holder.source == holder.source,
            })
            .filter_map(|e| e.free_at.map(|at| (at, e.bytes)))
            .collect();
        due.sort_unstable();
        let mut freed = 0usize;
        for (at, bytes) in due {
            freed = freed.saturating_add(bytes);
            if freed >= deficit {
                return Some(at);
            }
        }
        None
    }

    fn charge(&mut self, holder: &Holder, bytes: usize) {
        self.used = self.used.saturating_add(bytes);
        self.stats.peak = self.stats.peak.max(self.used);
        *self.tenants.entry(holder.tenant.clone()).or_default() += bytes;
        *self
            .sources
            .entry(SourceKey::of(holder.source))
            .or_default() += bytes;
    }

    fn credit(&mut self, holder: &Holder, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
        // One lookup each (this runs for every sync call's body).
        if let hash_map::Entry::Occupied(mut n) = self.tenants.entry(holder.tenant.clone()) {
            *n.get_mut() = n.get().saturating_sub(bytes);
            if *n.get() == 0 {
                n.remove();
            }
        }
        if let hash_map::Entry::Occupied(mut n) = self.sources.entry(SourceKey::of(holder.source)) {
            *n.get_mut() = n.get().saturating_sub(bytes);
            if *n.get() == 0 {
                n.remove();
            }
        }
    }

    fn insert(&mut self, holder: Holder, bytes: usize, free_at: Option<Millis>) -> u64 {
        self.charge(&holder, bytes);
        let id = self.next;
        self.next += 1;
        self.entries.insert(
            id,
            Entry {
                holder,
                bytes,
                free_at,
            },
        );
        id
    }

    /// Reserves `bytes` for `holder` if every scope has room.
    pub fn reserve(
        &mut self,
        holder: Holder,
        bytes: usize,
        free_at: Option<Millis>,
    ) -> Result<u64, Refusal> {
        if let Some((scope, used, limit)) = self.overflow(&holder, bytes) {
            return Err(self.refusal(&holder, scope, used, limit, bytes));
        }
        Ok(self.insert(holder, bytes, free_at))
    }

    /// Reserves `bytes` whatever the limits (work that is never refused
    /// here, like a sync call's body); it still counts for everyone else.
    pub fn reserve_forced(&mut self, holder: Holder, bytes: usize, free_at: Option<Millis>) -> u64 {
        self.insert(holder, bytes, free_at)
    }

    /// Whether entry `id` could grow to `bytes` now.
    pub fn can_resize(&self, id: u64, bytes: usize) -> bool {
        let Some(e) = self.entries.get(&id) else {
            return false;
        };
        bytes <= e.bytes || self.overflow(&e.holder, bytes - e.bytes).is_none()
    }

    /// Grows (if every scope has room) or shrinks (always) entry `id`.
    pub fn resize(&mut self, id: u64, bytes: usize) -> Result<(), Refusal> {
        let Some(e) = self.entries.get(&id) else {
            return Ok(());
        };
        let (holder, old) = (e.holder.clone(), e.bytes);
        if bytes > old {
            if let Some((scope, used, limit)) = self.overflow(&holder, bytes - old) {
                return Err(self.refusal(&holder, scope, used, limit, bytes - old));
            }
            self.charge(&holder, bytes - old);
        } else {
            self.credit(&holder, old - bytes);
        }
        if let Some(e) = self.entries.get_mut(&id) {
            e.bytes = bytes;
        }
        Ok(())
    }

    /// Sets entry `id` to `bytes` whatever the limits: bytes the holder
    /// already holds and must keep (a stream's newest frame, which is
    /// its answer); they still count for everyone else.
    pub fn resize_forced(&mut self, id: u64, bytes: usize) {
        let Some(e) = self.entries.get(&id) else {
            return;
        };
        let (holder, old) = (e.holder.clone(), e.bytes);
        if bytes > old {
            self.charge(&holder, bytes - old);
        } else {
            self.credit(&holder, old - bytes);
        }
        if let Some(e) = self.entries.get_mut(&id) {
            e.bytes = bytes;
        }
    }

    pub fn set_free_at(&mut self, id: u64, at: Option<Millis>) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.free_at = at;
        }
    }

    pub fn release(&mut self, id: u64) {
        if let Some(e) = self.entries.remove(&id) {
            self.credit(&e.holder, e.bytes);
        }
    }
}

/// The shared ledger.
#[derive(Clone, Debug)]
pub struct Budget(Rc<RefCell<Ledger>>);

impl Budget {
    pub fn new(cfg: BudgetConfig) -> Budget {
        Budget(Rc::new(RefCell::new(Ledger::new(cfg))))
    }

    pub fn ledger(&self) -> std::cell::Ref<'_, Ledger> {
        self.0.borrow()
    }

    pub fn reserve(
        &self,
        holder: Holder,
        bytes: usize,
        free_at: Option<Millis>,
    ) -> Result<Reservation, Refusal> {
        let id = self.0.borrow_mut().reserve(holder, bytes, free_at)?;
        Ok(Reservation {
            budget: self.clone(),
            id,
            bytes,
        })
    }

    pub fn reserve_forced(
        &self,
        holder: Holder,
        bytes: usize,
        free_at: Option<Millis>,
    ) -> Reservation {
        let id = self.0.borrow_mut().reserve_forced(holder, bytes, free_at);
        Reservation {
            budget: self.clone(),
            id,
            bytes,
        }
    }
}

/// Bytes held against the budget until dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Budget,
    id: u64,
    bytes: usize,
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether [`resize`](Reservation::resize) to `bytes` would succeed now.
    pub fn can_resize(&self, bytes: usize) -> bool {
        self.budget.0.borrow().can_resize(self.id, bytes)
    }

    pub fn resize(&mut self, bytes: usize) -> Result<(), Refusal> {
        self.budget.0.borrow_mut().resize(self.id, bytes)?;
        self.bytes = bytes;
        Ok(())
    }

    /// See [`Ledger::resize_forced`].
    pub fn resize_forced(&mut self, bytes: usize) {
        self.budget.0.borrow_mut().resize_forced(self.id, bytes);
        self.bytes = bytes;
    }

    /// When the holder will release these bytes by itself (an expiry, a
    /// deadline); `None` when unknown.
    pub fn set_free_at(&self, at: Option<Millis>) {
        self.budget.0.borrow_mut().set_free_at(self.id, at);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.0.borrow_mut().release(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(limit: usize, tenant: u64, source: u64) -> BudgetConfig {
        BudgetConfig {
            limit,
            tenant_share_percent: tenant,
            source_share_percent: source,
        }
    }

    fn holder(tenant: &str, last: u8) -> Holder {
        Holder::new(tenant, IpAddr::from([192, 0, 2, last]))
    }

    #[test]
    fn reservations_are_released_on_drop_and_resized_both_ways() {
        let b = Budget::new(cfg(1000, 100, 100));
        let mut r = b.reserve(holder("a", 1), 400, None).unwrap();
        assert_eq!(b.ledger().used(), 400);
        r.resize(900).unwrap();
        assert_eq!(b.ledger().used(), 900);
        assert!(!r.can_resize(1001));
        let e = r.resize(1001).unwrap_err();
        assert_eq!((e.scope, e.need, e.used), (Scope::Total, 101, 900));
        assert_eq!(r.bytes(), 900, "a refused growth keeps what it held");
        r.resize(10).unwrap();
        assert_eq!(b.ledger().used(), 10);
        drop(r);
        assert_eq!(b.ledger().used(), 0);
        assert!(b.ledger().is_empty());
        assert_eq!(b.ledger().tenant_used("a"), 0);
        assert_eq!(b.ledger().stats().peak, 900);
    }

    #[test]
    fn tenant_and_source_shares_refuse_before_the_total() {
        let b = Budget::new(cfg(1000, 50, 25));
        // One source: 250 bytes at most.
        let _a = b.reserve(holder("a", 1), 250, None).unwrap();
        let e = b.reserve(holder("a", 1), 1, None).unwrap_err();
        assert_eq!(e.scope, Scope::Source);
        // Same tenant from another address: the tenant's 500 bind.
        let _b = b.reserve(holder("a", 2), 250, None).unwrap();
        let e = b.reserve(holder("a", 3), 1, None).unwrap_err();
        assert_eq!((e.scope, e.used, e.limit), (Scope::Tenant, 500, 500));
        // Another tenant and address still fits.
        let _c = b.reserve(holder("b", 4), 250, None).unwrap();
        assert_eq!(b.ledger().stats().refused_source, 1);
        assert_eq!(b.ledger().stats().refused_tenant, 1);
    }

    #[test]
    fn addresses_of_one_ipv6_64_share_one_source_ledger() {
        let b = Budget::new(cfg(1000, 100, 25));
        let in_64 = |n: u16| Holder::new("a", IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, n]));
        let _a = b.reserve(in_64(1), 200, None).unwrap();
        let e = b.reserve(in_64(2), 100, None).unwrap_err();
        assert_eq!((e.scope, e.used), (Scope::Source, 200));
        assert_eq!(
            b.ledger()
                .source_used(IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, 7])),
            200
        );
        let other = Holder::new("a", IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1]));
        assert!(b.reserve(other, 200, None).is_ok());
    }

    #[test]
    fn forced_reservations_count_but_are_never_refused() {
        let b = Budget::new(cfg(100, 100, 100));
        let f = b.reserve_forced(holder("a", 1), 150, None);
        assert_eq!(b.ledger().used(), 150);
        let e = b.reserve(holder("b", 2), 1, None).unwrap_err();
        assert_eq!(e.scope, Scope::Total);
        drop(f);
        assert!(b.reserve(holder("b", 2), 100, None).is_ok());
    }

    #[test]
    fn retry_at_is_when_enough_bytes_free_by_themselves() {
        let b = Budget::new(cfg(1000, 100, 100));
        let _never = b.reserve(holder("a", 1), 500, None).unwrap();
        let _late = b.reserve(holder("a", 1), 300, Some(Millis(9_000))).unwrap();
        let _soon = b.reserve(holder("a", 1), 100, Some(Millis(2_000))).unwrap();
        // 900 held; 150 more needs 50 freed: the soonest entry suffices.
        let e = b.reserve(holder("b", 2), 150, None).unwrap_err();
        assert_eq!(e.retry_at, Some(Millis(2_000)));
        // 350 more needs 250 freed: only with the later one too.
        let e = b.reserve(holder("b", 2), 350, None).unwrap_err();
        assert_eq!(e.retry_at, Some(Millis(9_000)));
        // 600 more needs 500 freed, but only 400 ever free by themselves.
        let e = b.reserve(holder("b", 2), 600, None).unwrap_err();
        assert_eq!(e.retry_at, None);
    }

    #[test]
    fn retry_at_of_a_share_looks_only_at_that_holder() {
        let b = Budget::new(cfg(1000, 100, 20));
        let _other = b.reserve(holder("a", 1), 100, Some(Millis(1_000))).unwrap();
        let mine = b.reserve(holder("a", 2), 200, None).unwrap();
        let e = b.reserve(holder("a", 2), 10, None).unwrap_err();
        assert_eq!(e.scope, Scope::Source);
        assert_eq!(
            e.retry_at, None,
            "another address's expiry frees nothing of mine"
        );
        mine.set_free_at(Some(Millis(5_000)));
        let e = b.reserve(holder("a", 2), 10, None).unwrap_err();
        assert_eq!(e.retry_at, Some(Millis(5_000)));
    }

    #[test]
    fn shares_are_at_least_one_byte() {
        assert_eq!(BudgetConfig::share(10, 0), 1);
        assert_eq!(BudgetConfig::share(1000, 25), 250);
        assert_eq!(BudgetConfig::share(1000, 250), 1000);
    }
}
