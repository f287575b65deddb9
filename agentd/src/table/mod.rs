//! The route table: agentd's RIB and, replicated, agent-gw's FIB.
//!
//! Routes live in a slab addressed by `u32` slot numbers; every index holds
//! slot numbers only:
//!
//! ```text
//!   by_id   IdIndex (u32)   ── hash(route_id) ──┐
//!   by_cap  name → [slot] sorted by version ────┼──▶  slab[slot] = generation + Route
//!   timers  min-heap (deadline, slot, gen) ─────┤     hot[slot]  = 64-byte selection record
//!   by_hop  next hop → [slot] (peer paths) ─────┘
//! ```
//!
//! A path learned from a peer is an entry of its own (`<route_id>@<hop>`,
//! see [`RouteId::via`]); `by_hop` lets session events (peer up/down, all
//! paths of a peer removed) touch only that peer's entries.
//!
//! `hot` mirrors what selection reads per candidate (see `hot.rs`); every
//! mutation below updates both, and the randomized tests compare selection
//! on `hot` with the plain definition on `Route`.
//!
//! The table is plain data driven by its owner: time is an argument
//! (`expire(now)`), nothing reads a clock, nothing runs in the background.
//! Every change bumps `generation`, which FIB export uses to order deltas.

mod cap_index;
mod hop_index;
mod hot;
mod id_index;
mod interner;
mod schema_index;
mod timer;

use std::fmt;
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;

use crate::route::{Lease, Route, RouteId, RouteSource};
use crate::time::Millis;
use cap_index::CapIndex;
pub(crate) use cap_index::Run;
use hop_index::HopIndex;
pub(crate) use hot::{Hot, DISPUTED, HEALTHY, PEER_UP, SHARED, SOURCES};
use id_index::{IdIndex, SLOT_LIMIT};
use interner::Interner;
use interner::UNKNOWN;
use schema_index::SchemaIndex;
use timer::{Timer, Timers};

/// One slab cell. `gen` changes whenever the cell is freed, so handles and
/// timer entries of a former occupant never match a new one.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) gen: u32,
    /// The lease length granted to the route's registrant (see
    /// [`RouteTable::set_lease_secs`]); 0 for none. It sits in what was
    /// the cell's padding, so it costs nothing where a map beside the
    /// table cost agentd ~30 bytes a route.
    pub(crate) lease_secs: u32,
    pub(crate) route: Option<Route>,
}

/// A handle to a route that stays cheap to resolve and detects reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotId {
    index: u32,
    gen: u32,
}

impl SlotId {
    pub fn index(self) -> u32 {
        self.index
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpsertOutcome {
    Created,
    Updated,
    /// Same route id with identical contents: nothing changed.
    Unchanged,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TableError {
    /// The route id belongs to another (tenant, origin).
    Conflict {
        route_id: RouteId,
        existing_tenant: Box<str>,
        existing_origin: Box<str>,
    },
    /// The table holds `max_routes` routes already.
    Full {
        max_routes: usize,
    },
    NotFound(RouteId),
    /// Interface versions start at 1.
    VersionZero(RouteId),
    /// Static routes never expire, so they must carry `Lease::Permanent`.
    LeasedStatic(RouteId),
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::Conflict { route_id, existing_tenant, existing_origin } => write!(
                f,
                "route_id {route_id} belongs to origin {existing_origin} of tenant {existing_tenant}"
            ),
            TableError::Full { max_routes } => write!(f, "route table is full ({max_routes} routes)"),
            TableError::NotFound(id) => write!(f, "no route with route_id {id}"),
            TableError::VersionZero(id) => write!(f, "route {id}: version must be at least 1"),
            TableError::LeasedStatic(id) => write!(f, "static route {id} must not carry a lease"),
        }
    }
}

impl std::error::Error for TableError {}

/// Allocated bytes, for `agentctl stats` and the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryUse {
    pub routes: usize,
    /// route_id index + capability index (hash tables and slot lists).
    pub index_bytes: usize,
    /// The lease timer heap.
    pub timer_bytes: usize,
    /// The hot selection records (64 bytes per slab cell): route data
    /// duplicated for lookup speed, reported apart from both the index and
    /// the slab so nobody mistakes them for free.
    pub hot_bytes: usize,
    /// The slab cells (inline route structs), the free list and the symbol
    /// interner; the routes' own heap strings are not counted.
    pub slab_bytes: usize,
}

#[derive(Debug)]
pub struct RouteTable {
    slab: Vec<Slot>,
    hot: Vec<Hot>,
    free: Vec<u32>,
    symbols: Interner,
    by_id: IdIndex,
    by_cap: CapIndex,
    by_hop: HopIndex,
    /// Capabilities with input-schema routes (the gateway's catalog).
    by_schema: SchemaIndex,
    timers: Timers,
    /// Peers whose session is down; few, so a list.
    peers_down: Vec<Box<str>>,
    hasher: DefaultHashBuilder,
    max_routes: usize,
    len: usize,
    generation: u64,
    /// Generation a newly pushed slab cell starts at: above every cell
    /// given back by [`RouteTable::compact`], so a handle to a truncated
    /// cell never matches the cell that later takes its index.
    gen_floor: u32,
    /// Routes held when storage was last compacted (`usize::MAX`: grown
    /// since). Compaction is tried again only once the table has halved
    /// again: hysteresis, so a table that churns around one size is never
    /// compacted over and over.
    compacted_at: usize,
}

/// Storage below this many slab cells is never compacted: too little to
/// matter, and small tables churn.
const COMPACT_MIN_SLOTS: usize = 1024;

fn slot_route(slab: &[Slot], slot: u32) -> Option<&Route> {
    slab.get(slot as usize).and_then(|s| s.route.as_ref())
}

fn timer_valid(slab: &[Slot], t: &Timer) -> bool {
    slab.get(t.slot as usize).is_some_and(|s| {
        s.gen == t.gen
            && s.route
                .as_ref()
                .is_some_and(|r| r.lease == Lease::Until(t.deadline))
    })
}

impl RouteTable {
    /// An empty table that refuses to grow beyond `max_routes` (at most
    /// 16 777 215: the route_id index packs slots into 24 bits). Storage
    /// grows on demand; nothing is preallocated for the bound.
    pub fn new(max_routes: usize) -> RouteTable {
        RouteTable {
            slab: Vec::new(),
            hot: Vec::new(),
            free: Vec::new(),
            symbols: Interner::default(),
            by_id: IdIndex::default(),
            by_cap: CapIndex::default(),
            by_hop: HopIndex::default(),
            by_schema: SchemaIndex::default(),
            timers: Timers::default(),
            peers_down: Vec::new(),
            hasher: DefaultHashBuilder::default(),
            max_routes: max_routes.min(SLOT_LIMIT as usize),
            len: 0,
            generation: 0,
            gen_floor: 0,
            compacted_at: usize::MAX,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn max_routes(&self) -> usize {
        self.max_routes
    }

    /// Changes the bound (configuration reload). Routes already held stay
    /// even above a lowered bound; only new routes are refused.
    pub fn set_max_routes(&mut self, max_routes: usize) {
        self.max_routes = max_routes.min(SLOT_LIMIT as usize);
    }

    /// Bumped by every change of routes, leases, health or peer state.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    fn find_slot(&self, id: &str) -> Option<u32> {
        let slab = &self.slab;
        self.by_id.find(self.hasher.hash_one(id), |s| {
            slot_route(slab, s).is_some_and(|r| r.id.as_str() == id)
        })
    }

    pub fn slot_of(&self, id: &RouteId) -> Option<SlotId> {
        self.find_slot(id.as_str()).map(|index| SlotId {
            index,
            gen: self.slab[index as usize].gen,
        })
    }

    pub fn get(&self, id: &RouteId) -> Option<&Route> {
        self.find_slot(id.as_str())
            .and_then(|s| slot_route(&self.slab, s))
    }

    /// The route behind a handle, unless it has been removed since.
    pub fn get_slot(&self, slot: SlotId) -> Option<&Route> {
        self.slab
            .get(slot.index as usize)
            .filter(|s| s.gen == slot.gen)
            .and_then(|s| s.route.as_ref())
    }

    /// False while the session to the route's next-hop peer is down.
    pub fn is_peer_up(&self, slot: SlotId) -> bool {
        self.get_slot(slot).is_some() && self.hot[slot.index as usize].has(PEER_UP)
    }

    fn peer_up_for(&self, route: &Route) -> bool {
        route
            .next_hop
            .as_ref()
            .is_none_or(|hop| !self.peers_down.iter().any(|p| p == hop))
    }

    /// Inserts a route, or replaces the one with the same route id if it
    /// belongs to the same tenant and origin (an idempotent re-register or
    /// an endpoint/attribute/lease change). Another origin's route id is a
    /// conflict and leaves the table untouched.
    pub fn upsert(&mut self, route: Route) -> Result<UpsertOutcome, TableError> {
        if route.version == 0 {
            return Err(TableError::VersionZero(route.id));
        }
        if route.source == RouteSource::Static && route.lease != Lease::Permanent {
            return Err(TableError::LeasedStatic(route.id));
        }
        let peer_up = self.peer_up_for(&route);
        match self.find_slot(route.id.as_str()) {
            Some(slot) => self.update(slot, route, peer_up),
            None => self.create(route, peer_up).map(|_| UpsertOutcome::Created),
        }
    }

    fn update(
        &mut self,
        slot: u32,
        mut route: Route,
        peer_up: bool,
    ) -> Result<UpsertOutcome, TableError> {
        let i = slot as usize;
        let Some(old) = self.slab[i].route.as_ref() else {
            return Err(TableError::NotFound(route.id));
        };
        if old.tenant != route.tenant || old.origin != route.origin {
            return Err(TableError::Conflict {
                route_id: route.id,
                existing_tenant: old.tenant.as_str().into(),
                existing_origin: old.origin.as_str().into(),
            });
        }
        if *old == route && self.hot[i].has(PEER_UP) == peer_up {
            return Ok(UpsertOutcome::Unchanged);
        }
        let moved = old.capability != route.capability || old.version != route.version;
        let lease_changed = old.lease != route.lease;
        if moved {
            self.by_cap
                .remove(&self.hot, &self.hasher, &old.capability, slot);
        }
        let new_lease = route.lease;
        if moved {
            self.share_capability(&mut route);
        } else if let Some(old) = self.slab[i].route.as_ref() {
            route.capability = old.capability.clone();
        }
        let old_hot = self.hot[i];
        let mut hot = self.hot_record(&mut route, peer_up);
        if hot.next_hop == old_hot.next_hop {
            hot.hop_pos = old_hot.hop_pos;
            self.hot[i] = hot;
        } else {
            self.by_hop.remove(&mut self.hot, slot);
            self.hot[i] = hot;
            self.by_hop.insert(&mut self.hot, slot);
        }
        self.symbols.release(&self.hasher, old_hot.tenant);
        self.symbols.release(&self.hasher, old_hot.next_hop);
        if let Some(old) = self.slab[i].route.as_ref() {
            self.by_schema.remove(old);
        }
        self.by_schema.add(&route);
        self.slab[i].route = Some(route);
        if moved {
            if let Some(r) = self.slab[slot as usize].route.as_ref() {
                self.by_cap
                    .insert(&self.hot, &self.hasher, &r.capability, slot);
            }
        }
        if lease_changed {
            self.arm(slot, new_lease);
        }
        self.generation += 1;
        Ok(UpsertOutcome::Updated)
    }

    fn create(&mut self, mut route: Route, peer_up: bool) -> Result<u32, TableError> {
        if self.len >= self.max_routes {
            return Err(TableError::Full {
                max_routes: self.max_routes,
            });
        }
        let hash = self.hasher.hash_one(route.id.as_str());
        let lease = route.lease;
        self.share_capability(&mut route);
        let hot = self.hot_record(&mut route, peer_up);
        let slot = match self.free.pop() {
            Some(s) => {
                let cell = &mut self.slab[s as usize];
                cell.route = Some(route);
                cell.lease_secs = 0;
                self.hot[s as usize] = hot;
                s
            }
            None => {
                self.slab.push(Slot {
                    gen: self.gen_floor,
                    lease_secs: 0,
                    route: Some(route),
                });
                self.compacted_at = usize::MAX;
                self.hot.push(hot);
                (self.slab.len() - 1) as u32
            }
        };
        let (slab, hasher) = (&self.slab, &self.hasher);
        self.by_id.insert(hash, slot, |s| {
            slot_route(slab, s).map_or(0, |r| hasher.hash_one(r.id.as_str()))
        });
        if let Some(r) = self.slab[slot as usize].route.as_ref() {
            self.by_cap
                .insert(&self.hot, &self.hasher, &r.capability, slot);
            self.by_schema.add(r);
        }
        self.by_hop.insert(&mut self.hot, slot);
        self.arm(slot, lease);
        self.len += 1;
        self.generation += 1;
        Ok(slot)
    }

    /// Gives `route` the capability string routes of its name already
    /// hold (the first of its index group's), so a name is held once for
    /// all its routes rather than once per route.
    fn share_capability(&mut self, route: &mut Route) {
        let group = self.by_cap.group(&self.hasher, &route.capability);
        if let Some(held) = group.first().and_then(|&s| slot_route(&self.slab, s)) {
            route.capability = held.capability.clone();
        }
    }

    /// Builds the hot record of a route, taking symbol references that
    /// `free_slot` (or the next update) releases, and gives the route the
    /// symbols' shared strings for its tenant and next hop: one copy of a
    /// name for all its routes, not one per route.
    fn hot_record(&mut self, route: &mut Route, peer_up: bool) -> Hot {
        let tenant = self.symbols.acquire(&self.hasher, &route.tenant);
        let next_hop = self
            .symbols
            .acquire_opt(&self.hasher, route.next_hop.as_ref());
        if let Some(t) = self.symbols.shared(tenant) {
            route.tenant = t.clone();
        }
        if let (Some(hop), Some(t)) = (route.next_hop.as_mut(), self.symbols.shared(next_hop)) {
            *hop = t.clone();
        }
        Hot::new(route, tenant, next_hop, peer_up)
    }

    /// Schedules expiry for a leased route and keeps the timer heap tidy.
    fn arm(&mut self, slot: u32, lease: Lease) {
        if let Lease::Until(deadline) = lease {
            self.timers.push(Timer {
                deadline,
                slot,
                gen: self.slab[slot as usize].gen,
            });
        }
        self.tidy_timers();
    }

    /// Keeps the heap top valid (so `next_deadline` is exact) and compacts
    /// when stale entries dominate. Compaction is O(heap) but only runs
    /// after at least `len + 64` stale entries accumulated, so its cost is
    /// amortised over the renewals that produced them.
    fn tidy_timers(&mut self) {
        while let Some(t) = self.timers.peek() {
            if timer_valid(&self.slab, &t) {
                break;
            }
            self.timers.pop();
        }
        if self.timers.len() > 2 * self.len + 64 {
            let slab = &self.slab;
            self.timers.retain(|t| timer_valid(slab, t));
        }
    }

    /// Replaces a route's lease (renewal). Unknown ids are `NotFound`, which
    /// the SDK API turns into 404 so the agent re-registers.
    pub fn renew(&mut self, id: &RouteId, lease: Lease) -> Result<(), TableError> {
        let slot = self
            .find_slot(id.as_str())
            .ok_or_else(|| TableError::NotFound(id.clone()))?;
        let Some(r) = self.slab[slot as usize].route.as_mut() else {
            return Err(TableError::NotFound(id.clone()));
        };
        if r.source == RouteSource::Static && lease != Lease::Permanent {
            return Err(TableError::LeasedStatic(id.clone()));
        }
        if r.lease != lease {
            r.lease = lease;
            self.hot[slot as usize].set_lease(lease);
            self.arm(slot, lease);
            self.generation += 1;
        }
        Ok(())
    }

    /// Marks a route healthy or not (health checks exclude, never remove).
    pub fn set_health(&mut self, id: &RouteId, healthy: bool) -> Result<(), TableError> {
        let slot = self
            .find_slot(id.as_str())
            .ok_or_else(|| TableError::NotFound(id.clone()))?;
        if let Some(r) = self.slab[slot as usize].route.as_mut() {
            if r.healthy != healthy {
                r.healthy = healthy;
                self.hot[slot as usize].set(HEALTHY, healthy);
                self.generation += 1;
            }
        }
        Ok(())
    }

    /// Records a peer session going up or down. Routes through a down peer
    /// stay in the table but are ineligible ("peer session up" filter) until
    /// the session returns or the owner removes them after `graceful_s`.
    /// Touches only that peer's paths (the per-peer index). Returns whether
    /// anything changed.
    pub fn set_peer_up(&mut self, router_id: &str, up: bool) -> bool {
        let known_down = self.peers_down.iter().position(|p| &**p == router_id);
        let mut changed = match (up, known_down) {
            (true, Some(at)) => {
                self.peers_down.swap_remove(at);
                true
            }
            (false, None) => {
                self.peers_down.push(router_id.into());
                true
            }
            _ => false,
        };
        let sym = self.symbols.lookup(&self.hasher, router_id);
        if sym != UNKNOWN {
            for &slot in self.by_hop.slots(sym) {
                let h = &mut self.hot[slot as usize];
                if h.has(PEER_UP) != up {
                    h.set(PEER_UP, up);
                    changed = true;
                }
            }
        }
        if changed {
            self.generation += 1;
        }
        changed
    }

    /// The paths whose next hop is `router_id` (any order). Costs the
    /// number of those paths, whatever the table size.
    pub fn paths_via<'a>(&'a self, router_id: &str) -> impl Iterator<Item = &'a Route> + 'a {
        let sym = self.symbols.lookup(&self.hasher, router_id);
        let slots = if sym == UNKNOWN {
            &[][..]
        } else {
            self.by_hop.slots(sym)
        };
        slots.iter().filter_map(move |&s| slot_route(&self.slab, s))
    }

    /// How many paths `router_id` is the next hop of.
    pub fn count_via(&self, router_id: &str) -> usize {
        match self.symbols.lookup(&self.hasher, router_id) {
            UNKNOWN => 0,
            sym => self.by_hop.slots(sym).len(),
        }
    }

    /// Removes and returns every path whose next hop is `router_id` (a
    /// closed session, or graceful retention ending). Touches only those.
    pub fn remove_paths_via(&mut self, router_id: &str) -> Vec<Route> {
        let sym = self.symbols.lookup(&self.hasher, router_id);
        if sym == UNKNOWN {
            return Vec::new();
        }
        let slots = self.by_hop.slots(sym).to_vec();
        let gone: Vec<Route> = slots
            .into_iter()
            .filter_map(|s| self.free_slot(s))
            .collect();
        self.tidy_timers();
        self.compact_if_sparse();
        gone
    }

    /// Every router that is the next hop of at least one path.
    pub fn next_hops(&self) -> impl Iterator<Item = &str> {
        self.by_hop
            .hops()
            .filter_map(|sym| self.symbols.text_of(sym))
    }

    /// Routers whose session is currently down.
    pub fn peers_down(&self) -> impl Iterator<Item = &str> {
        self.peers_down.iter().map(|p| &**p)
    }

    pub fn remove(&mut self, id: &RouteId) -> Option<Route> {
        let slot = self.find_slot(id.as_str())?;
        let route = self.free_slot(slot);
        self.tidy_timers();
        self.compact_if_sparse();
        route
    }

    /// Gives storage back once the table holds at most a quarter of its
    /// slab (and has halved since the last try): after a transient flood
    /// of paths, the slab, the selection records and the indexes would
    /// otherwise stay at their peak for the daemon's lifetime. Returns
    /// whether it compacted.
    pub fn compact_if_sparse(&mut self) -> bool {
        if self.slab.len() < COMPACT_MIN_SLOTS
            || self.len.saturating_mul(4) > self.slab.len()
            || self.len.saturating_mul(2) > self.compacted_at
        {
            return false;
        }
        self.compact();
        true
    }

    /// Truncates the free cells at the end of the slab (slots are never
    /// moved: handles stay valid), fits every vector (with headroom) and
    /// rebuilds the route_id index at the size it needs now.
    pub fn compact(&mut self) {
        self.compacted_at = self.len;
        let keep = self
            .slab
            .iter()
            .rposition(|s| s.route.is_some())
            .map_or(0, |i| i + 1);
        if keep < self.slab.len() {
            let top = self.slab[keep..].iter().map(|s| s.gen).max().unwrap_or(0);
            self.gen_floor = self.gen_floor.max(top.wrapping_add(1));
            self.slab.truncate(keep);
            self.hot.truncate(keep);
            self.free.retain(|s| (*s as usize) < keep);
        }
        // Headroom of half again: a table that grows a little after the
        // shrink does not reallocate at once.
        let room = keep + keep / 2;
        self.slab.shrink_to(room);
        self.hot.shrink_to(room);
        self.free.shrink_to(self.free.len() * 2);
        self.by_hop.shrink();
        let (slab, hasher) = (&self.slab, &self.hasher);
        let rehash = |s: u32| slot_route(slab, s).map_or(0, |r| hasher.hash_one(r.id.as_str()));
        let mut by_id = IdIndex::default();
        for slot in self.by_id.slots() {
            by_id.insert(rehash(slot), slot, rehash);
        }
        self.by_id = by_id;
        self.tidy_timers();
    }

    fn free_slot(&mut self, slot: u32) -> Option<Route> {
        let (slab, hasher) = (&self.slab, &self.hasher);
        let id = slot_route(slab, slot)?.id.as_str();
        self.by_id.remove(hasher.hash_one(id), slot, |s| {
            slot_route(slab, s).map_or(0, |r| hasher.hash_one(r.id.as_str()))
        });
        if let Some(r) = self.slab[slot as usize].route.as_ref() {
            self.by_cap
                .remove(&self.hot, &self.hasher, &r.capability, slot);
            self.by_schema.remove(r);
        }
        self.by_hop.remove(&mut self.hot, slot);
        let hot = std::mem::replace(&mut self.hot[slot as usize], Hot::VACANT);
        self.symbols.release(&self.hasher, hot.tenant);
        self.symbols.release(&self.hasher, hot.next_hop);
        let cell = &mut self.slab[slot as usize];
        cell.gen = cell.gen.wrapping_add(1);
        cell.lease_secs = 0;
        let route = cell.route.take();
        self.free.push(slot);
        self.len -= 1;
        self.generation += 1;
        route
    }

    /// Removes and returns every route whose lease ended at or before
    /// `now`. Only due timers are touched; nothing is scanned.
    pub fn expire(&mut self, now: Millis) -> Vec<Route> {
        let mut gone = Vec::new();
        while let Some(t) = self.timers.peek() {
            if t.deadline > now {
                break;
            }
            self.timers.pop();
            if timer_valid(&self.slab, &t) {
                gone.extend(self.free_slot(t.slot));
            }
        }
        self.tidy_timers();
        self.compact_if_sparse();
        gone
    }

    /// The earliest live lease deadline: when the owner should call
    /// `expire` next.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.timers.peek().map(|t| t.deadline)
    }

    /// Routes offering `capability` at `version` (eligible or not).
    pub fn candidates<'a>(
        &'a self,
        capability: &str,
        version: u32,
    ) -> impl Iterator<Item = &'a Route> + 'a {
        let run = CapIndex::run(
            &self.hot,
            self.by_cap.group(&self.hasher, capability),
            version,
        );
        run.slots
            .iter()
            .filter_map(move |&s| slot_route(&self.slab, s))
    }

    pub(crate) fn run(&self, capability: &str, version: u32) -> Run<'_> {
        self.narrow(self.group(capability), version)
    }

    /// Every route of a capability name (any version), with their hot
    /// records already requested from memory: callers do other work (the
    /// policy decision) before `narrow`, while the lines arrive.
    #[inline]
    pub(crate) fn group(&self, capability: &str) -> &[u32] {
        let group = self.by_cap.group(&self.hasher, capability);
        self.prefetch(group);
        group
    }

    #[inline]
    pub(crate) fn narrow<'a>(&self, group: &'a [u32], version: u32) -> Run<'a> {
        CapIndex::run(&self.hot, group, version)
    }

    /// The symbol selection compares for `s`, `UNKNOWN` if no route has it.
    #[inline]
    pub(crate) fn symbol(&self, s: &str) -> u32 {
        self.symbols.lookup(&self.hasher, s)
    }

    /// The hot record of an index-held slot.
    #[inline]
    pub(crate) fn hot(&self, slot: u32) -> &Hot {
        &self.hot[slot as usize]
    }

    /// Warms the cache lines of the hot records selection is about to
    /// read, so their misses overlap instead of queueing one by one (a
    /// lookup's candidates sit at unrelated slab positions).
    #[inline]
    fn prefetch(&self, slots: &[u32]) {
        #[cfg(target_arch = "x86_64")]
        for &s in slots {
            if let Some(h) = self.hot.get(s as usize) {
                // SAFETY: prefetching is a hint with no effect on memory
                // semantics; the pointer comes from a live reference.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        (h as *const Hot).cast::<i8>(),
                    )
                };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slots;
    }

    /// The route in an index-held slot (always occupied).
    #[inline]
    pub(crate) fn route_in(&self, slot: u32) -> Option<&Route> {
        self.slab.get(slot as usize).and_then(|s| s.route.as_ref())
    }

    /// A handle for an index-held slot.
    #[inline]
    pub(crate) fn slot_id(&self, slot: u32) -> SlotId {
        SlotId {
            index: slot,
            gen: self.slab.get(slot as usize).map_or(0, |s| s.gen),
        }
    }

    /// Slab access for selection: the cell behind an index-held slot.
    #[inline]
    pub(crate) fn cell(&self, slot: u32) -> Option<(SlotId, &Route, bool)> {
        let s = self.slab.get(slot as usize)?;
        let peer_up = self.hot[slot as usize].has(PEER_UP);
        s.route.as_ref().map(|r| {
            (
                SlotId {
                    index: slot,
                    gen: s.gen,
                },
                r,
                peer_up,
            )
        })
    }

    /// Every occupied cell, in slab order (full-scan reference, export).
    pub(crate) fn cells(&self) -> impl Iterator<Item = (SlotId, &Route, bool)> {
        self.slab
            .iter()
            .zip(&self.hot)
            .enumerate()
            .filter_map(|(i, (s, h))| {
                let id = SlotId {
                    index: i as u32,
                    gen: s.gen,
                };
                s.route.as_ref().map(|r| (id, r, h.has(PEER_UP)))
            })
    }

    /// Every route of `capability`, whatever its version.
    pub fn routes_of<'a>(&'a self, capability: &str) -> impl Iterator<Item = &'a Route> + 'a {
        self.by_cap
            .group(&self.hasher, capability)
            .iter()
            .filter_map(move |&s| slot_route(&self.slab, s))
    }

    /// The capabilities that have a route whose contract carries an
    /// input schema, sorted (what `gateway.expose_schemas` may list).
    pub fn schema_capabilities(&self) -> impl Iterator<Item = &str> {
        self.by_schema.names()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Route> + Clone {
        self.slab.iter().filter_map(|s| s.route.as_ref())
    }

    /// Records the lease length granted with route `id`'s registration or
    /// renewal: what a renewal that names none extends it by, and what the
    /// lease file keeps. The owner's record (the gateway's replica has
    /// none); it ends with the route. `false` if there is no such route.
    pub fn set_lease_secs(&mut self, id: &RouteId, secs: u32) -> bool {
        match self.find_slot(id.as_str()) {
            Some(slot) => {
                self.slab[slot as usize].lease_secs = secs;
                true
            }
            None => false,
        }
    }

    /// The lease length last recorded for route `id` (0: none recorded);
    /// `None` if there is no such route.
    pub fn lease_secs(&self, id: &RouteId) -> Option<u32> {
        self.find_slot(id.as_str())
            .map(|slot| self.slab[slot as usize].lease_secs)
    }

    /// Every route with its recorded lease length.
    pub fn iter_with_lease_secs(&self) -> impl Iterator<Item = (&Route, u32)> + Clone {
        self.slab
            .iter()
            .filter_map(|s| s.route.as_ref().map(|r| (r, s.lease_secs)))
    }

    pub fn memory(&self) -> MemoryUse {
        MemoryUse {
            routes: self.len,
            index_bytes: self.by_id.allocated_bytes()
                + self.by_cap.allocated_bytes()
                + self.by_hop.allocated_bytes(),
            timer_bytes: self.timers.allocated_bytes(),
            hot_bytes: self.hot.capacity() * std::mem::size_of::<Hot>(),
            slab_bytes: self.slab.capacity() * std::mem::size_of::<Slot>()
                + self.free.capacity() * 4
                + self.symbols.allocated_bytes(),
        }
    }

    /// Distinct capability names in the index.
    pub fn capability_names(&self) -> usize {
        self.by_cap.names()
    }
}

#[cfg(test)]
pub(crate) mod tests;
