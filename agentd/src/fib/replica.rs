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
mod tests {
    use super::*;
    use crate::fib::export::{FibExporter, FibSink};
    use crate::policy::{Action, Rule};
    use crate::route::{Access, Attributes, Lease, RouteSource};

    fn route(id: &str, origin: &str, deadline: u64) -> Route {
        Route {
            id: RouteId::new(id).unwrap(),
            capability: "demo.echo".into(),
            version: 1,
            origin: origin.into(),
            endpoint: "http://192.0.2.10:8080/".into(),
            tenant: "lab".into(),
            region: "local".into(),
            attrs: Attributes::default(),
            access: Access::default(),
            contract: None,
            source: RouteSource::Local,
            path: vec![],
            next_hop: None,
            lease: Lease::Until(Millis(deadline)),
            healthy: true,
            allow_loopback: false,
            owner: None,
            proof: Default::default(),
            disputed: false,
        }
    }

    fn via(mut r: Route, peer: &str) -> Route {
        r.source = RouteSource::Peer;
        r.next_hop = Some(peer.into());
        r.path = vec![peer.into()];
        r
    }

    fn id(s: &str) -> RouteId {
        RouteId::new(s).unwrap()
    }

    fn snapshot(generation: u64, routes: Vec<Route>) -> Vec<FibEvent> {
        vec![
            FibEvent::SnapshotBegin { generation },
            FibEvent::SnapshotChunk(routes),
            FibEvent::SnapshotEnd {
                generation,
                policy: Box::default(),
                peers_down: vec![],
                links: vec![],
                agent_addrs: vec![],
            },
        ]
    }

    fn feed(r: &mut FibReplica, events: Vec<FibEvent>, now: u64) {
        for ev in events {
            r.apply(ev, Millis(now)).unwrap();
        }
    }

    fn ids(r: &FibReplica) -> Vec<String> {
        let mut v: Vec<_> = r.table().iter().map(|r| r.id.to_string()).collect();
        v.sort();
        v
    }

    fn delta(base: u64, generation: u64, changes: Vec<FibChange>) -> FibEvent {
        FibEvent::Delta {
            base,
            generation,
            changes,
        }
    }

    #[test]
    fn fresh_replica_denies_until_the_first_snapshot() {
        let r = FibReplica::new(100);
        assert_eq!(r.generation(), None);
        assert!(r.policy().invalid.is_some());
        assert_eq!(r.policy().default_action, Action::Deny);
    }

    #[test]
    fn snapshot_then_deltas_build_the_table() {
        let mut r = FibReplica::new(100);
        feed(
            &mut r,
            snapshot(
                5,
                vec![
                    route("a", "agent://lab/a", 9_000),
                    route("b", "agent://lab/b", 9_000),
                ],
            ),
            0,
        );
        assert_eq!((r.generation(), r.in_sync()), (Some(5), true));
        assert_eq!(r.policy(), &Policy::default());
        let mut moved = route("a", "agent://lab/a", 9_000);
        moved.endpoint = "http://192.0.2.11:8080/".into();
        let applied = r
            .apply(
                delta(
                    5,
                    7,
                    vec![
                        FibChange::Upsert(Box::new(moved.clone())),
                        FibChange::Remove(id("b")),
                    ],
                ),
                Millis(0),
            )
            .unwrap();
        assert_eq!(
            applied,
            Applied::Delta {
                generation: 7,
                changes: 2
            }
        );
        assert_eq!(ids(&r), ["a"]);
        assert_eq!(r.table().get(&id("a")), Some(&moved));
        // A follow-up part of a split delta (base == generation) applies too.
        r.apply(delta(7, 7, vec![FibChange::Remove(id("a"))]), Millis(0))
            .unwrap();
        assert!(r.table().is_empty());
    }

    #[test]
    fn gap_is_refused_and_last_state_served_until_a_fresh_snapshot() {
        let mut r = FibReplica::new(100);
        feed(
            &mut r,
            snapshot(5, vec![route("a", "agent://lab/a", 9_000)]),
            0,
        );
        let err = r
            .apply(delta(6, 7, vec![FibChange::Remove(id("a"))]), Millis(0))
            .unwrap_err();
        assert_eq!(
            err,
            ReplicaError::Gap {
                have: Some(5),
                base: 6
            }
        );
        assert_eq!(
            err.to_string(),
            "FIB delta based on generation 6 but the replica holds 5"
        );
        assert!(!r.in_sync());
        assert_eq!(ids(&r), ["a"], "still serving the last state");
        // Even a delta that would line up is refused until we resync.
        assert_eq!(
            r.apply(delta(5, 6, vec![]), Millis(0)),
            Err(ReplicaError::Gap {
                have: None,
                base: 5
            })
        );
        feed(
            &mut r,
            snapshot(9, vec![route("c", "agent://lab/c", 9_000)]),
            0,
        );
        assert_eq!(
            ids(&r),
            ["c"],
            "routes gone meanwhile disappear with the snapshot"
        );
        assert_eq!((r.generation(), r.in_sync()), (Some(9), true));
        assert_eq!(r.stats().resyncs, 1);
    }

    #[test]
    fn delta_before_any_snapshot_is_a_gap() {
        let mut r = FibReplica::new(100);
        assert_eq!(
            r.apply(delta(0, 1, vec![]), Millis(0)),
            Err(ReplicaError::Gap {
                have: None,
                base: 0
            })
        );
    }

    #[test]
    fn half_received_snapshot_never_replaces_the_served_state() {
        let mut r = FibReplica::new(100);
        feed(
            &mut r,
            snapshot(5, vec![route("a", "agent://lab/a", 9_000)]),
            0,
        );
        r.apply(FibEvent::SnapshotBegin { generation: 8 }, Millis(0))
            .unwrap();
        r.apply(
            FibEvent::SnapshotChunk(vec![route("z", "agent://lab/z", 9_000)]),
            Millis(0),
        )
        .unwrap();
        assert_eq!(ids(&r), ["a"]);
        r.disconnected();
        assert_eq!(ids(&r), ["a"]);
        assert_eq!(r.generation(), Some(5));
        // The stale end of that snapshot is out of order now.
        let end = FibEvent::SnapshotEnd {
            generation: 8,
            policy: Box::default(),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        };
        assert!(matches!(
            r.apply(end, Millis(0)),
            Err(ReplicaError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn malformed_sequences_are_typed_errors() {
        let mut r = FibReplica::new(100);
        assert!(matches!(
            r.apply(FibEvent::SnapshotChunk(vec![]), Millis(0)),
            Err(ReplicaError::OutOfOrder { .. })
        ));
        r.apply(FibEvent::SnapshotBegin { generation: 3 }, Millis(0))
            .unwrap();
        let end = FibEvent::SnapshotEnd {
            generation: 4,
            policy: Box::default(),
            peers_down: vec![],
            links: vec![],
            agent_addrs: vec![],
        };
        assert_eq!(
            r.apply(end, Millis(0)),
            Err(ReplicaError::SnapshotMismatch { begin: 3, end: 4 })
        );
        r.apply(FibEvent::SnapshotBegin { generation: 3 }, Millis(0))
            .unwrap();
        assert!(matches!(
            r.apply(delta(3, 4, vec![]), Millis(0)),
            Err(ReplicaError::OutOfOrder { .. })
        ));
        assert_eq!(r.generation(), None);
    }

    #[test]
    fn leases_expire_at_their_deadline_without_agentd() {
        let mut r = FibReplica::new(100);
        feed(
            &mut r,
            snapshot(
                1,
                vec![
                    route("a", "agent://lab/a", 5_000),
                    route("b", "agent://lab/b", 7_000),
                ],
            ),
            1_000,
        );
        r.disconnected(); // agentd went away; the replica keeps time itself
        assert_eq!(r.next_deadline(), Some(Millis(5_000)));
        assert!(r.expire(Millis(4_999)).is_empty());
        let gone = r.expire(Millis(5_000));
        assert_eq!(
            gone.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(r.next_deadline(), Some(Millis(7_000)));
        assert_eq!(r.expire(Millis(60_000)).len(), 1);
        assert!(r.table().is_empty());
    }

    #[test]
    fn routes_arriving_past_their_deadline_are_dropped_on_arrival() {
        let mut r = FibReplica::new(100);
        feed(
            &mut r,
            snapshot(
                1,
                vec![
                    route("old", "agent://lab/o", 500),
                    route("new", "agent://lab/n", 9_000),
                ],
            ),
            1_000,
        );
        assert_eq!(ids(&r), ["new"]);
        r.apply(
            delta(
                1,
                2,
                vec![FibChange::Upsert(Box::new(route(
                    "late",
                    "agent://lab/l",
                    900,
                )))],
            ),
            Millis(1_000),
        )
        .unwrap();
        assert_eq!(ids(&r), ["new"]);
    }

    #[test]
    fn peer_states_travel_with_snapshot_and_deltas() {
        let mut r = FibReplica::new(100);
        let events = vec![
            FibEvent::SnapshotBegin { generation: 1 },
            FibEvent::SnapshotChunk(vec![via(route("p", "agent://lab/p", 9_000), "router-b")]),
            FibEvent::SnapshotEnd {
                generation: 1,
                policy: Box::default(),
                peers_down: vec!["router-b".into()],
                links: vec![],
                agent_addrs: vec![],
            },
        ];
        feed(&mut r, events, 0);
        let slot = r.table().slot_of(&id("p")).unwrap();
        assert!(!r.table().is_peer_up(slot));
        r.apply(
            delta(
                1,
                2,
                vec![FibChange::PeerUp {
                    router_id: "router-b".into(),
                    up: true,
                }],
            ),
            Millis(0),
        )
        .unwrap();
        assert!(r.table().is_peer_up(slot));
    }

    #[test]
    fn policy_from_the_wire_is_revalidated() {
        let mut r = FibReplica::new(100);
        feed(&mut r, snapshot(1, vec![]), 0);
        let good = Policy::new(
            vec![Rule::new("10-deny", 100, Action::Deny)],
            Action::Allow,
            Default::default(),
        )
        .unwrap();
        r.apply(
            delta(1, 2, vec![FibChange::Policy(Box::new(good.clone()))]),
            Millis(0),
        )
        .unwrap();
        assert_eq!(r.policy(), &good);
        let mut bad = Policy::default();
        bad.default_weights.d_cost = 0;
        r.apply(
            delta(2, 3, vec![FibChange::Policy(Box::new(bad))]),
            Millis(0),
        )
        .unwrap();
        assert_eq!(r.policy().default_action, Action::Deny);
        assert!(r
            .policy()
            .invalid
            .as_deref()
            .is_some_and(|m| m.contains("d_cost")));
        assert_eq!(r.stats().invalid_policies, 1);
    }

    #[test]
    fn a_route_id_that_changed_owner_replaces_the_old_entry() {
        let mut r = FibReplica::new(100);
        feed(
            &mut r,
            snapshot(1, vec![route("a", "agent://lab/one", 9_000)]),
            0,
        );
        let new_owner = route("a", "agent://lab/two", 9_000);
        r.apply(
            delta(1, 2, vec![FibChange::Upsert(Box::new(new_owner.clone()))]),
            Millis(0),
        )
        .unwrap();
        assert_eq!(r.table().get(&id("a")), Some(&new_owner));
    }

    #[test]
    fn full_replica_counts_rejected_routes_instead_of_failing() {
        let mut r = FibReplica::new(1);
        feed(
            &mut r,
            snapshot(
                1,
                vec![
                    route("a", "agent://lab/a", 9_000),
                    route("b", "agent://lab/b", 9_000),
                ],
            ),
            0,
        );
        assert_eq!(r.table().len(), 1);
        assert_eq!(r.stats().rejected_routes, 1);
    }

    /// Events queued by the exporter, drained into the replica.
    #[derive(Debug, Default)]
    struct Queue(Vec<FibEvent>);

    impl FibSink for Queue {
        fn offer(&mut self, event: FibEvent) -> bool {
            self.0.push(event);
            true
        }
    }

    #[test]
    fn replica_fed_by_the_exporter_mirrors_the_rib() {
        let mut rib = RouteTable::new(1000);
        let policy = Policy::default();
        for i in 0..300 {
            rib.upsert(route(
                &format!("r{i}"),
                &format!("agent://lab/a{i}"),
                50_000 + i,
            ))
            .unwrap();
        }
        let mut ex: FibExporter<Queue> = FibExporter::new();
        let sub = ex
            .subscribe(Queue::default(), &rib, &policy, &[], &[])
            .unwrap();
        // Churn: removals, renewals, health, a peer route and its session.
        let mut changes = Vec::new();
        for i in (0..300).step_by(3) {
            let rid = id(&format!("r{i}"));
            rib.remove(&rid);
            changes.push(FibChange::Remove(rid));
        }
        for i in (1..300).step_by(7).filter(|i| i % 3 != 0) {
            let rid = id(&format!("r{i}"));
            rib.renew(&rid, Lease::Until(Millis(90_000))).unwrap();
            rib.set_health(&rid, i % 2 == 0).unwrap();
            changes.push(FibChange::Upsert(Box::new(rib.get(&rid).unwrap().clone())));
        }
        let p = via(route("peer", "agent://lab/p", 80_000), "router-b");
        rib.upsert(p.clone()).unwrap();
        rib.set_peer_up("router-b", false);
        changes.push(FibChange::Upsert(Box::new(p)));
        changes.push(FibChange::PeerUp {
            router_id: "router-b".into(),
            up: false,
        });
        ex.publish(rib.generation(), changes);

        let events = ex.unsubscribe(sub).unwrap().0;
        let mut r = FibReplica::new(1000);
        feed(&mut r, events, 0);
        assert_eq!(r.generation(), Some(rib.generation()));
        let mut want: Vec<_> = rib.iter().cloned().collect();
        let mut got: Vec<_> = r.table().iter().cloned().collect();
        want.sort_by(|a, b| a.id.cmp(&b.id));
        got.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(got, want);
        let slot = r.table().slot_of(&id("peer")).unwrap();
        assert!(!r.table().is_peer_up(slot));
        // Both expire the same routes at the same instant.
        assert_eq!(
            r.expire(Millis(50_100)).len(),
            rib.expire(Millis(50_100)).len()
        );
        assert_eq!(r.table().len(), rib.len());
    }
}
