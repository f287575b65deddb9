//! agent-gw's side of FIB export: a local copy of agentd's routes, peer
//! states, policy and links, kept current from the event stream.
//!
//! The replica owns its own [`RouteTable`], so selection in the gateway
//! runs on exactly the code agentd uses. A snapshot is staged in a fresh
//! table and swapped in only when complete: until then, and whenever the
//! stream breaks, the gateway keeps serving its last complete state, and
//! leases in it still end on time because the gateway calls
//! [`FibReplica::expire`] with the monotonic clock.
//!
//! Anything that does not line up — a delta whose base is not our
//! generation, a chunk outside a snapshot — is a typed error; the caller
//! drops the connection, reconnects and subscribes again for a fresh
//! snapshot.
//!
//! Links (the established peer sessions, see [`crate::fib::PeerLink`])
//! are kept sorted by router_id, at most one per router and at most
//! [`MAX_LINKS`] in all; [`FibReplica::links_generation`] grows whenever
//! the set changes, so the gateway's peer-connection driver can tell
//! whether it has anything to do.

use std::collections::BTreeMap;
use std::fmt;

use crate::fib::agent_addrs::{AgentAddrs, TooManyAgentAddrs};
use crate::fib::{FibChange, FibEvent, PeerLink, MAX_LINKS};
use crate::policy::Policy;
use crate::route::{Route, RouteId};
use crate::table::{RouteTable, TableError};
use crate::time::Millis;

/// Why the replica refused an event. All of them mean "resubscribe".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaError {
    /// A delta that does not apply on top of what we hold.
    Gap { have: Option<u64>, base: u64 },
    /// An event that makes no sense in the current stream state.
    OutOfOrder {
        event: &'static str,
        expected: &'static str,
    },
    /// `SnapshotEnd` named another generation than `SnapshotBegin`.
    SnapshotMismatch { begin: u64, end: u64 },
    /// A snapshot or delta would leave the replica with more than
    /// [`MAX_LINKS`] links; nothing of it was applied.
    TooManyLinks { links: usize, max: usize },
    /// Likewise for agent addresses ([`crate::fib::MAX_AGENT_ADDRS`]).
    TooManyAgentAddrs(TooManyAgentAddrs),
}

impl fmt::Display for ReplicaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplicaError::Gap {
                have: Some(g),
                base,
            } => {
                write!(
                    f,
                    "FIB delta based on generation {base} but the replica holds {g}"
                )
            }
            ReplicaError::Gap { have: None, base } => {
                write!(
                    f,
                    "FIB delta based on generation {base} before any snapshot"
                )
            }
            ReplicaError::OutOfOrder { event, expected } => {
                write!(f, "FIB stream sent {event} where {expected} was expected")
            }
            ReplicaError::SnapshotMismatch { begin, end } => {
                write!(
                    f,
                    "FIB snapshot began at generation {begin} but ended at {end}"
                )
            }
            ReplicaError::TooManyLinks { links, max } => {
                write!(
                    f,
                    "FIB stream would hold {links} peer links, more than the bound of {max}"
                )
            }
            ReplicaError::TooManyAgentAddrs(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReplicaError {}

/// What one event did, for logs and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Part of a snapshot was staged; the served state is unchanged.
    Staged,
    /// A complete snapshot replaced the served state.
    Snapshot { generation: u64, routes: usize },
    /// A delta was applied to the served state.
    Delta { generation: u64, changes: usize },
}

/// Counters for the gateway's stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    pub snapshots: u64,
    pub deltas: u64,
    pub resyncs: u64,
    /// Routes the local table refused (full, or not a valid route).
    pub rejected_routes: u64,
    /// Policies that failed validation here and were replaced by a deny-all.
    pub invalid_policies: u64,
    /// Links that were not well-formed ([`PeerLink::check`]) and were left out.
    pub rejected_links: u64,
}

#[derive(Debug)]
struct Staging {
    generation: u64,
    table: RouteTable,
}

/// The gateway's FIB.
#[derive(Debug)]
pub struct FibReplica {
    table: RouteTable,
    policy: Policy,
    /// Generation of the served state; `None` before the first snapshot.
    generation: Option<u64>,
    /// Whether deltas may be applied (a snapshot completed on the current
    /// subscription and nothing was missed since).
    in_sync: bool,
    staging: Option<Staging>,
    max_routes: usize,
    stats: ReplicaStats,
    /// The established peer sessions, by router_id.
    links: BTreeMap<Box<str>, PeerLink>,
    /// Grows by one whenever `links` changes.
    links_generation: u64,
    agent_addrs: AgentAddrs,
}

impl FibReplica {
    /// An empty replica. `max_routes` bounds its table like agentd's.
    /// Until the first snapshot the policy denies everything: the gateway
    /// must not route on a FIB it has not seen.
    pub fn new(max_routes: usize) -> FibReplica {
        FibReplica {
            table: RouteTable::new(max_routes),
            policy: Policy::invalid("no FIB received from agentd yet"),
            generation: None,
            in_sync: false,
            staging: None,
            max_routes,
            stats: ReplicaStats::default(),
            links: BTreeMap::new(),
            links_generation: 0,
            agent_addrs: AgentAddrs::default(),
        }
    }

    /// The agent addresses agentd bound.
    pub fn agent_addrs(&self) -> &AgentAddrs {
        &self.agent_addrs
    }

    /// The established peer sessions, sorted by router_id.
    pub fn links(&self) -> impl Iterator<Item = &PeerLink> {
        self.links.values()
    }

    /// The link of `router_id`, if its session is established.
    pub fn link(&self, router_id: &str) -> Option<&PeerLink> {
        self.links.get(router_id)
    }

    /// Grows whenever the link set changes (a `Link`/`Unlink` that changed
    /// something, or a snapshot with another set); starts at 0.
    pub fn links_generation(&self) -> u64 {
        self.links_generation
    }

    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Generation of the served state; `None` before the first snapshot.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// Whether the replica follows a live subscription.
    pub fn in_sync(&self) -> bool {
        self.in_sync
    }

    pub fn stats(&self) -> ReplicaStats {
        self.stats
    }

    /// The subscription ended (connection lost or an error was returned):
    /// forget any half-received snapshot and refuse deltas until the next
    /// one. The served state stays.
    pub fn disconnected(&mut self) {
        if self.in_sync || self.staging.is_some() {
            self.stats.resyncs += 1;
        }
        self.in_sync = false;
        self.staging = None;
    }

    /// Removes routes whose lease ended at or before `now`.
    pub fn expire(&mut self, now: Millis) -> Vec<Route> {
        self.table.expire(now)
    }

    /// When [`expire`](Self::expire) should run next.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.table.next_deadline()
    }

    /// Applies one event. On error the replica is out of sync (as after
    /// [`disconnected`](Self::disconnected)) and still serves its last
    /// complete state; the caller resubscribes.
    pub fn apply(&mut self, event: FibEvent, now: Millis) -> Result<Applied, ReplicaError> {
        let result = self.apply_inner(event, now);
        if result.is_err() {
            self.disconnected();
        }
        result
    }

    fn apply_inner(&mut self, event: FibEvent, now: Millis) -> Result<Applied, ReplicaError> {
        match event {
            FibEvent::SnapshotBegin { generation } => {
                self.in_sync = false;
                self.staging = Some(Staging {
                    generation,
                    table: RouteTable::new(self.max_routes),
                });
                Ok(Applied::Staged)
            }
            FibEvent::SnapshotChunk(routes) => {
                let Some(staging) = self.staging.as_mut() else {
                    return Err(ReplicaError::OutOfOrder {
                        event: "a snapshot chunk",
                        expected: "SnapshotBegin",
                    });
                };
                for route in routes {
                    upsert(&mut staging.table, route, &mut self.stats);
                }
                Ok(Applied::Staged)
            }
            FibEvent::SnapshotEnd {
                generation,
                policy,
                peers_down,
                links,
                agent_addrs,
            } => {
                let Some(mut staging) = self.staging.take() else {
                    return Err(ReplicaError::OutOfOrder {
                        event: "SnapshotEnd",
                        expected: "SnapshotBegin",
                    });
                };
                if staging.generation != generation {
                    return Err(ReplicaError::SnapshotMismatch {
                        begin: staging.generation,
                        end: generation,
                    });
                }
                if links.len() > MAX_LINKS {
                    return Err(ReplicaError::TooManyLinks {
                        links: links.len(),
                        max: MAX_LINKS,
                    });
                }
                self.agent_addrs
                    .replace(agent_addrs)
                    .map_err(ReplicaError::TooManyAgentAddrs)?;
                let mut fresh = BTreeMap::new();
                for link in links {
                    if link.check().is_ok() {
                        fresh.insert(link.router_id.clone(), link);
                    } else {
                        self.stats.rejected_links += 1;
                    }
                }
                if fresh != self.links {
                    self.links = fresh;
                    self.links_generation += 1;
                }
                for peer in &peers_down {
                    staging.table.set_peer_up(peer, false);
                }
                staging.table.expire(now);
                self.table = staging.table;
                self.policy = self.checked(*policy);
                self.generation = Some(generation);
                self.in_sync = true;
                self.stats.snapshots += 1;
                Ok(Applied::Snapshot {
                    generation,
                    routes: self.table.len(),
                })
            }
            FibEvent::Delta {
                base,
                generation,
                changes,
            } => {
                if self.staging.is_some() {
                    return Err(ReplicaError::OutOfOrder {
                        event: "a delta",
                        expected: "the rest of a snapshot",
                    });
                }
                if !self.in_sync || self.generation != Some(base) {
                    return Err(ReplicaError::Gap {
                        have: self.generation.filter(|_| self.in_sync),
                        base,
                    });
                }
                self.check_link_count(&changes)?;
                self.agent_addrs
                    .check_count(&changes)
                    .map_err(ReplicaError::TooManyAgentAddrs)?;
                let n = changes.len();
                for change in changes {
                    match change {
                        FibChange::Upsert(route) => {
                            upsert(&mut self.table, *route, &mut self.stats)
                        }
                        FibChange::Remove(id) => {
                            self.table.remove(&id);
                        }
                        FibChange::PeerUp { router_id, up } => {
                            self.table.set_peer_up(&router_id, up);
                        }
                        FibChange::Policy(p) => self.policy = self.checked(*p),
                        FibChange::Link(link) => self.set_link(link),
                        FibChange::Unlink(router_id) => {
                            if self.links.remove(&router_id).is_some() {
                                self.links_generation += 1;
                            }
                        }
                        FibChange::Bind(a) => self.agent_addrs.bind(a),
                        FibChange::Unbind(a) => self.agent_addrs.unbind(&a),
                    }
                }
                // A route may arrive with a deadline already behind us.
                self.table.expire(now);
                self.generation = Some(generation);
                self.stats.deltas += 1;
                Ok(Applied::Delta {
                    generation,
                    changes: n,
                })
            }
        }
    }

    /// Adds or replaces the link of its router (well-formed ones only).
    fn set_link(&mut self, link: PeerLink) {
        if link.check().is_err() {
            self.stats.rejected_links += 1;
            return;
        }
        if self.links.get(&link.router_id) != Some(&link) {
            self.links.insert(link.router_id.clone(), link);
            self.links_generation += 1;
        }
    }

    /// Refuses `changes` as a whole if applying them in order would hold
    /// more than [`MAX_LINKS`] links at any point (checked before anything
    /// is applied, so a refused delta changes nothing).
    fn check_link_count(&self, changes: &[FibChange]) -> Result<(), ReplicaError> {
        let mut count = self.links.len();
        // Presence after the changes seen so far, for routers they touched.
        let mut touched: BTreeMap<&str, bool> = BTreeMap::new();
        for change in changes {
            let (id, present_after) = match change {
                FibChange::Link(l) => (&*l.router_id, true),
                FibChange::Unlink(id) => (&**id, false),
                _ => continue,
            };
            let present = touched
                .get(id)
                .copied()
                .unwrap_or_else(|| self.links.contains_key(id));
            match (present, present_after) {
                (false, true) => count += 1,
                (true, false) => count -= 1,
                _ => {}
            }
            touched.insert(id, present_after);
            if count > MAX_LINKS {
                return Err(ReplicaError::TooManyLinks {
                    links: count,
                    max: MAX_LINKS,
                });
            }
        }
        Ok(())
    }

    /// A policy from the wire is re-validated here: a bad weight must make
    /// the gateway deny, never divide by zero.
    fn checked(&mut self, p: Policy) -> Policy {
        match Policy::new(p.rules().to_vec(), p.default_action, p.default_weights) {
            Ok(mut valid) => {
                valid.invalid = p.invalid;
                valid
            }
            Err(e) => {
                self.stats.invalid_policies += 1;
                Policy::invalid(&format!("policy from agentd is invalid: {e}"))
            }
        }
    }
}

/// Upserts as agentd decided: a route id that changed owner in agentd
/// replaces the old entry here instead of being refused as a conflict.
fn upsert(table: &mut RouteTable, route: Route, stats: &mut ReplicaStats) {
    let id: RouteId = route.id.clone();
    match table.upsert(route.clone()) {
        Ok(_) => {}
        Err(TableError::Conflict { .. }) => {
            table.remove(&id);
            if table.upsert(route).is_err() {
                stats.rejected_routes += 1;
            }
        }
        Err(_) => stats.rejected_routes += 1,
    }
}

#[cfg(test)]
mod link_tests;

#[cfg(test)]
mod tests;
