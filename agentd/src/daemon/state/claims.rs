//! Mesh-wide ownership of origins (DESIGN §3 "Origins are owned
//! mesh-wide"): which origin routers claim each origin, with which proof,
//! and the race rule that decides between them.
//!
//! Every route in the table is a claim of its origin by its origin router
//! (`path[0]` of a peer path; this router for local and static routes).
//! [`Claims`] indexes them by origin and by table id, updated from the
//! FIB changes each state transition produces (`State::settle`), so an
//! ownership question costs a hash lookup plus the claims of that one
//! origin, never a table scan.
//!
//! The race rule, the same on every router because it reads only what the
//! advertisements carry (origin router and proof): when claims of one
//! origin from several origin routers coexist (registered before either
//! learned of the other), then
//! - if any claim is proven (`jwt`), every proven claim wins (replicas)
//!   and every unproven one loses;
//! - otherwise every claim of the lexicographically smallest origin router
//!   id wins.
//!
//! Losing routes stay in the table, marked `disputed` (ineligible,
//! `origin_disputed`), until their origin router withdraws them — at the
//! losing router itself their renewals are refused, so they end with
//! their lease.

mod small;

use std::collections::{BTreeMap, HashMap};

use self::small::{Ids, SmallMap};
use super::Changes;
use crate::config::{Runtime, STATIC_ID_PREFIX};
use crate::fib::FibChange;
use crate::ipc::message::IpcError;
use crate::owner::Owner;
use crate::route::{OriginProof, Route, RouteId, RouteSource, Text};

/// The key of this router's own claims (router ids are never empty).
const OURS: &str = "";

/// The claims of one origin router: table id → proof, and how many of
/// them are proven (so the race rule costs the routers, not the routes).
/// Inline while there is one (the common case: a tree per origin cost
/// most of a local route's memory).
#[derive(Debug, Default)]
struct RouterClaims {
    ids: SmallMap<RouteId, OriginProof>,
    proven: usize,
}

impl RouterClaims {
    fn set(&mut self, id: RouteId, proof: OriginProof) {
        if let Some(old) = self.ids.insert(id, proof) {
            self.proven -= usize::from(old.is_proven());
        }
        self.proven += usize::from(proof.is_proven());
    }

    fn unset(&mut self, id: &RouteId) {
        if let Some(old) = self.ids.remove(id) {
            self.proven -= usize::from(old.is_proven());
        }
    }
}

/// The claims of one origin: origin router (`""`: us) → its claims;
/// inline while one router claims it (no race to decide).
type Routers = SmallMap<Box<str>, RouterClaims>;

/// One origin's claims and the decision its marks were last set by: a
/// change that leaves the decision as it was re-marks only the claims it
/// touched (one neighbour's thousands of routes of one origin must not
/// cost thousands of re-marks each).
///
/// The entry is also the origin's record of its local routes (what
/// `origins::Ledger` does not keep: their ids and owner), so an origin
/// costs one hash entry and one copy of its string for both; it lives
/// while either has something.
#[derive(Debug, Default)]
struct OriginClaims {
    routers: Routers,
    decided: Option<Decision>,
    /// Ids of our local routes of the origin, in registration order.
    local: Ids,
    /// The identity those are bound to (`None` while there are none).
    owner: Option<Owner>,
}

/// Claims of origins by origin and by table id. The origin string is the
/// routes' own (`route::Text`, shared): the key in `by_origin` and every
/// `by_id` entry of its claims hold no copy of it (a copy per route was
/// ~30 B of each local route's memory, and one per origin ~45 more).
/// `by_id` holds only the origin: the origin router is found among the
/// origin's few claimants, not kept per route (a router id string per
/// peer route, and 16 B per entry for every route).
/// An origin's entry is boxed: it is ~130 B, and a hash table is between
/// half and seven eighths full, so inline entries cost up to twice their
/// size in empty buckets (~100 B per local route at 1k–2k routes) where
/// a pointer costs 8.
#[derive(Debug, Default)]
pub(super) struct Claims {
    by_origin: HashMap<Text, Box<OriginClaims>>,
    /// Table id → origin, to find a removed claim.
    by_id: HashMap<RouteId, Text>,
}

/// Who holds an origin under the race rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Decision {
    /// Claims from at most one origin router: nothing to decide.
    Undisputed,
    /// Some claim is proven: proven claims win, unproven ones lose.
    ProvenOnly,
    /// No claim is proven: the claims of this router win (its key: `""`
    /// is us).
    Router(Box<str>),
}

/// The origin router key of a route: `""` for our own.
fn router_key(route: &Route) -> Option<&str> {
    match route.source {
        RouteSource::Local | RouteSource::Static => Some(OURS),
        // A relay route is a peer path too (from our relay client).
        RouteSource::Peer | RouteSource::Relay => route.path.first().map(|r| &**r),
    }
}

/// The router id of origin router key `k`: ours is `own`.
fn display(k: &str, own: &str) -> Box<str> {
    if k == OURS {
        own.into()
    } else {
        k.into()
    }
}

impl Claims {
    /// Records (or updates) `route`'s claim. Returns whether anything
    /// changed (a new claim, or another proof).
    pub fn add(&mut self, route: &Route) -> bool {
        let Some(router) = router_key(route) else {
            return false;
        };
        if let Some(origin) = self.by_id.get(&route.id) {
            let old = self.router_of(origin, &route.id);
            if **origin == *route.origin && old == Some(router) {
                let Some(claims) = self
                    .by_origin
                    .get_mut(&**origin)
                    .and_then(|o| o.routers.get_mut(router))
                else {
                    return false;
                };
                return match claims.ids.get(&route.id) {
                    Some(p) if *p == route.proof => false,
                    Some(_) => {
                        claims.set(route.id.clone(), route.proof);
                        true
                    }
                    None => false,
                };
            }
            // The same id with another origin or origin router: replace.
            self.remove(&route.id);
        }
        let origin = self.key(&route.origin);
        if let Some(o) = self.by_origin.get_mut(&origin) {
            o.routers
                .get_or_insert_with(router.into(), RouterClaims::default)
                .set(route.id.clone(), route.proof);
        }
        self.by_id.insert(route.id.clone(), origin);
        true
    }

    /// The key of the origin router whose claims of `origin` hold `id`.
    fn router_of(&self, origin: &str, id: &RouteId) -> Option<&str> {
        let o = self.by_origin.get(origin)?;
        o.routers
            .iter()
            .find(|(_, c)| c.ids.get(id).is_some())
            .map(|(k, _)| &**k)
    }

    /// Forgets the claim of table id `id`; returns its origin.
    pub fn remove(&mut self, id: &RouteId) -> Option<Text> {
        let origin = self.by_id.remove(id)?;
        let router: Option<Box<str>> = self.router_of(&origin, id).map(Into::into);
        if let Some(o) = self.by_origin.get_mut(&origin) {
            if let Some(router) = router {
                if let Some(claims) = o.routers.get_mut(&router) {
                    claims.unset(id);
                    if claims.ids.is_empty() {
                        o.routers.remove(&router);
                    }
                }
            }
            if o.routers.is_empty() {
                // Decided again from scratch by its next claim.
                o.decided = None;
                if o.local.is_empty() {
                    self.by_origin.remove(&origin);
                }
            }
        }
        Some(origin)
    }

    /// The key of `origin`'s entry, which is made when missing: the
    /// route's own origin string, shared, not a copy of it.
    fn key(&mut self, origin: &Text) -> Text {
        if let Some((key, _)) = self.by_origin.get_key_value(origin.as_str()) {
            return key.clone();
        }
        self.by_origin.insert(origin.clone(), Box::default());
        origin.clone()
    }

    /// Drops every claim (before a rebuild from the table); the local
    /// routes' records stay.
    pub fn clear(&mut self) {
        self.by_id.clear();
        self.by_origin.retain(|_, o| {
            o.routers = Routers::default();
            o.decided = None;
            !o.local.is_empty()
        });
    }

    /// Every origin with claims.
    pub fn origins(&self) -> impl Iterator<Item = &str> {
        self.by_origin
            .iter()
            .filter(|(_, o)| !o.routers.is_empty())
            .map(|(k, _)| &**k)
    }

    /// Records a new local route of ours (not an update of one held).
    pub fn add_local(&mut self, route: &Route) {
        let key = self.key(&route.origin);
        if let Some(o) = self.by_origin.get_mut(&key) {
            if o.local.is_empty() || o.owner.is_none() {
                o.owner = route.owner;
            }
            o.local.push(route.id.clone());
        }
    }

    /// Forgets a local route; the origin is free again after its last.
    pub fn remove_local(&mut self, route: &Route) {
        let Some(o) = self.by_origin.get_mut(&*route.origin) else {
            return;
        };
        o.local.remove(&route.id);
        if o.local.is_empty() {
            o.owner = None;
            if o.routers.is_empty() {
                self.by_origin.remove(&*route.origin);
            }
        }
    }

    /// The identity `origin`'s live local routes are bound to; `None`
    /// when it has none (or only routes an administrator registered
    /// unowned).
    pub fn owner_of(&self, origin: &str) -> Option<Owner> {
        self.by_origin.get(origin).and_then(|o| o.owner)
    }

    /// Ids of `origin`'s local routes, in registration order.
    pub fn local_of(&self, origin: &str) -> &[RouteId] {
        self.by_origin
            .get(origin)
            .map_or(&[], |o| o.local.as_slice())
    }

    /// Table ids of `origin`'s claims with their origin router key and
    /// proof.
    pub fn of(&self, origin: &str) -> impl Iterator<Item = (&str, &RouteId, OriginProof)> {
        self.by_origin.get(origin).into_iter().flat_map(|o| {
            o.routers
                .iter()
                .flat_map(|(router, c)| c.ids.iter().map(move |(id, p)| (&**router, id, *p)))
        })
    }

    /// The proof of table id `id`'s claim and its origin router key.
    fn claim_of(&self, origin: &str, id: &RouteId) -> Option<(&str, OriginProof)> {
        if **self.by_id.get(id)? != *origin {
            return None;
        }
        self.by_origin
            .get(origin)?
            .routers
            .iter()
            .find_map(|(router, c)| Some((&**router, *c.ids.get(id)?)))
    }

    /// The decision `origin`'s marks were last set by.
    fn decided(&self, origin: &str) -> Option<&Decision> {
        self.by_origin.get(origin)?.decided.as_ref()
    }

    fn set_decided(&mut self, origin: &str, d: Decision) {
        if let Some(o) = self.by_origin.get_mut(origin) {
            if !o.routers.is_empty() {
                o.decided = Some(d);
            }
        }
    }

    /// The race rule for `origin`; `own` is this router's id (how our
    /// claims compare with others').
    pub fn decide(&self, origin: &str, own: &str) -> Decision {
        let Some(routers) = self.by_origin.get(origin).map(|o| &o.routers) else {
            return Decision::Undisputed;
        };
        if routers.len() <= 1 {
            return Decision::Undisputed;
        }
        if routers.values().any(|c| c.proven > 0) {
            return Decision::ProvenOnly;
        }
        let name = |k: &str| display(k, own);
        let winner = routers
            .keys()
            .map(|k| (name(k), k))
            .min()
            .map(|(_, k)| k.clone())
            .unwrap_or_default();
        Decision::Router(winner)
    }

    /// Whether a claim by router key `router` with `proof` loses under
    /// `decision`.
    pub fn loses(decision: &Decision, router: &str, proof: OriginProof) -> bool {
        match decision {
            Decision::Undisputed => false,
            Decision::ProvenOnly => !proof.is_proven(),
            Decision::Router(w) => **w != *router,
        }
    }

    /// The other origin router a new claim of `origin` with `proof` by
    /// this router would stand against, if any: the router that holds
    /// the origin elsewhere. A proven claim never does (it may add a
    /// replica); an unproven one does whenever another router holds a
    /// claim that does not lose under the race rule.
    pub fn held_elsewhere(&self, origin: &str, own: &str, proof: OriginProof) -> Option<Box<str>> {
        if proof.is_proven() {
            return None;
        }
        let routers = &self.by_origin.get(origin)?.routers;
        let decision = self.decide(origin, own);
        let name = |k: &str| display(k, own);
        match &decision {
            Decision::Undisputed => routers.keys().find(|k| !k.is_empty()).map(|k| name(k)),
            Decision::Router(w) if **w == *OURS => None,
            Decision::Router(w) => Some(name(w)),
            Decision::ProvenOnly => routers
                .iter()
                .find(|(k, c)| !k.is_empty() && c.proven > 0)
                .map(|(k, _)| name(k)),
        }
    }

    /// The router whose claim beats ours under `decision`, for the
    /// message that refuses a losing route's renewal.
    pub fn winner_name(&self, origin: &str, own: &str) -> Box<str> {
        let name = |k: &str| display(k, own);
        match self.decide(origin, own) {
            Decision::Router(w) => name(&w),
            _ => self
                .by_origin
                .get(origin)
                .and_then(|o| {
                    o.routers
                        .iter()
                        .find(|(k, c)| !k.is_empty() && c.proven > 0)
                })
                .map_or_else(|| own.into(), |(k, _)| name(k)),
        }
    }
}

impl super::State {
    /// Brings the claims index and the `disputed` marks up to date with
    /// `changes` (what a transition just did to the table), appending the
    /// routes whose mark flipped. Every transition that edits the table
    /// ends here, so the index never needs a table scan.
    pub(super) fn settle(&mut self, changes: &mut Changes) {
        let mut touched: BTreeMap<Box<str>, Vec<RouteId>> = BTreeMap::new();
        for c in changes.iter() {
            match c {
                // Every upsert is checked, not only changed claims: the
                // route written may carry a stale mark.
                FibChange::Upsert(r) => {
                    self.claims.add(r);
                    touched
                        .entry(r.origin.as_str().into())
                        .or_default()
                        .push(r.id.clone());
                }
                FibChange::Remove(id) => {
                    if let Some(origin) = self.claims.remove(id) {
                        touched.entry((*origin).into()).or_default();
                    }
                }
                _ => {}
            }
        }
        for (origin, ids) in touched {
            self.remark(&origin, Some(&ids), changes);
        }
    }

    /// Applies the race rule to all of `origin`'s claims: marks the losers
    /// disputed and clears the mark of the others.
    pub(super) fn redecide(&mut self, origin: &str, changes: &mut Changes) {
        self.remark(origin, None, changes);
    }

    /// The race rule for `origin`. When the decision is the one its marks
    /// were last set by, only the claims in `touched` (added or changed)
    /// can be marked wrong; otherwise (or with `None`) every claim is
    /// checked.
    fn remark(&mut self, origin: &str, touched: Option<&[RouteId]>, changes: &mut Changes) {
        let decision = self.claims.decide(origin, &self.runtime.router_id);
        let same = self.claims.decided(origin) == Some(&decision);
        let marks = |(router, id, proof): (&str, &RouteId, OriginProof)| {
            let lose = Claims::loses(&decision, router, proof);
            let r = self.table.get(id)?;
            (r.disputed != lose).then(|| (id.clone(), lose))
        };
        let flips: Vec<(RouteId, bool)> = match touched {
            Some(ids) if same => ids
                .iter()
                .filter_map(|id| {
                    let (router, proof) = self.claims.claim_of(origin, id)?;
                    marks((router, id, proof))
                })
                .collect(),
            _ => self.claims.of(origin).filter_map(marks).collect(),
        };
        self.claims.set_decided(origin, decision);
        for (id, lose) in flips {
            let Some(mut route) = self.table.get(&id).cloned() else {
                continue;
            };
            route.disputed = lose;
            if self.table.upsert(route.clone()).is_ok() {
                self.count(if lose {
                    "origins.disputed"
                } else {
                    "origins.undisputed"
                });
                changes.push(FibChange::Upsert(Box::new(route)));
            }
        }
    }

    /// Rebuilds the claims index from the table and decides every origin
    /// (startup and restored leases: nobody has seen the table yet, so
    /// the marks need no FIB change of their own).
    pub(super) fn reclaim_all(&mut self) {
        self.claims.clear();
        let routes: Vec<Route> = self.table.iter().cloned().collect();
        for r in &routes {
            self.claims.add(r);
        }
        let origins: Vec<Box<str>> = self.claims.origins().map(Into::into).collect();
        let mut changes = Changes::new();
        for origin in origins {
            self.redecide(&origin, &mut changes);
        }
    }

    /// Refuses a new claim of `origin` proven by `proof` when another
    /// router of the mesh holds the origin (only a tenant-signed token may
    /// add a replica).
    pub(super) fn check_claim(&self, origin: &str, proof: OriginProof) -> Result<(), IpcError> {
        match self
            .claims
            .held_elsewhere(origin, &self.runtime.router_id, proof)
        {
            Some(router) => Err(IpcError::OwnedElsewhere {
                origin: origin.into(),
                router,
            }),
            None => Ok(()),
        }
    }

    /// The refusal of a losing route's registration or renewal, naming
    /// the router whose claim won.
    pub(super) fn owned_elsewhere(&self, origin: &str) -> IpcError {
        IpcError::OwnedElsewhere {
            origin: origin.into(),
            router: self.claims.winner_name(origin, &self.runtime.router_id),
        }
    }

    /// Static routes of `rt` that would newly claim an origin another
    /// router holds are refused (a route already installed is left to
    /// the race rule).
    pub(super) fn static_claims_free(&self, rt: &Runtime) -> Result<(), StaticClaimError> {
        for r in &rt.static_routes {
            if self
                .table
                .get(&r.id)
                .is_some_and(|old| old.origin == r.origin)
            {
                continue;
            }
            if let Some(router) =
                self.claims
                    .held_elsewhere(&r.origin, &rt.router_id, OriginProof::Static)
            {
                return Err(StaticClaimError {
                    section: r
                        .id
                        .as_str()
                        .strip_prefix(STATIC_ID_PREFIX)
                        .unwrap_or(r.id.as_str())
                        .into(),
                    origin: r.origin.as_str().into(),
                    router,
                });
            }
        }
        Ok(())
    }
}

/// A static route naming an origin another router holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StaticClaimError {
    pub section: Box<str>,
    pub origin: Box<str>,
    pub router: Box<str>,
}

impl std::fmt::Display for StaticClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "route section '{}': {} (forbidden): origin {} is held by router {}; a static route may not claim it",
            self.section,
            crate::owner::ORIGIN_OWNED_ELSEWHERE,
            self.origin,
            self.router
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{Lease, RouteId};

    /// A claim of `origin` by origin router `router` (`""`: ours).
    fn claim(id: &str, origin: &str, router: &str, proof: OriginProof) -> Route {
        let (source, path, next_hop) = if router.is_empty() {
            (RouteSource::Local, vec![], None)
        } else {
            (RouteSource::Peer, vec![router.into()], Some(router.into()))
        };
        Route {
            id: RouteId::parse_table_id(id).unwrap(),
            capability: "c".into(),
            version: 1,
            origin: origin.into(),
            endpoint: "http://192.0.2.1/".into(),
            tenant: "lab".into(),
            region: "".into(),
            attrs: Default::default(),
            access: Default::default(),
            contract: None,
            source,
            path: path.into(),
            next_hop,
            lease: Lease::Permanent,
            healthy: true,
            allow_loopback: false,
            owner: None,
            proof,
            disputed: false,
        }
    }

    const O: &str = "agent://lab/x";

    #[test]
    fn the_race_rule_reads_only_origin_routers_and_proofs() {
        let mut c = Claims::default();
        assert_eq!(c.decide(O, "r-m"), Decision::Undisputed);
        c.add(&claim("a@r-z", O, "r-z", OriginProof::Static));
        c.add(&claim("b", O, "", OriginProof::Bootstrap));
        // Unproven: the smallest router id, ours compared by our name.
        assert_eq!(c.decide(O, "r-m"), Decision::Router("".into()));
        assert_eq!(c.decide(O, "s-m"), Decision::Router("r-z".into()));
        assert!(Claims::loses(
            &c.decide(O, "s-m"),
            "",
            OriginProof::Bootstrap
        ));
        // A proven claim anywhere: proven ones win, whoever sorts first.
        c.add(&claim("j@r-y", O, "r-y", OriginProof::Jwt));
        let d = c.decide(O, "a");
        assert_eq!(d, Decision::ProvenOnly);
        assert!(Claims::loses(&d, "", OriginProof::Bootstrap));
        assert!(Claims::loses(&d, "r-z", OriginProof::Static));
        assert!(!Claims::loses(&d, "r-y", OriginProof::Jwt));
        // Another origin is not touched.
        assert_eq!(c.decide("agent://lab/y", "a"), Decision::Undisputed);
    }

    #[test]
    fn the_index_follows_adds_updates_and_removals() {
        let mut c = Claims::default();
        assert!(c.add(&claim("a@r-z", O, "r-z", OriginProof::Static)));
        assert!(
            !c.add(&claim("a@r-z", O, "r-z", OriginProof::Static)),
            "no change"
        );
        assert!(
            c.add(&claim("a@r-z", O, "r-z", OriginProof::Jwt)),
            "new proof"
        );
        assert_eq!(c.of(O).count(), 1);
        // The same table id for another origin moves the claim.
        assert!(c.add(&claim("a@r-z", "agent://lab/y", "r-z", OriginProof::Jwt)));
        assert_eq!(c.of(O).count(), 0);
        assert_eq!(
            c.remove(&RouteId::parse_table_id("a@r-z").unwrap())
                .as_deref(),
            Some("agent://lab/y")
        );
        assert_eq!(c.origins().count(), 0);
        assert_eq!(c.remove(&RouteId::parse_table_id("a@r-z").unwrap()), None);
    }

    #[test]
    fn local_routes_share_the_origins_entry_with_its_claims() {
        let src = "192.0.2.9".parse().unwrap();
        let owner = Some(Owner::Bootstrap(src));
        let mut c = Claims::default();
        let mut r1 = claim("r1", O, "", OriginProof::Bootstrap);
        r1.owner = owner;
        let r2 = claim("r2", O, "", OriginProof::None);
        c.add_local(&r1);
        c.add_local(&r2);
        assert_eq!(c.owner_of(O), owner, "the first route's owner");
        assert_eq!(c.local_of(O), [r1.id.clone(), r2.id.clone()]);
        assert_eq!(c.origins().count(), 0, "records, not claims");
        c.add(&r1);
        assert_eq!(c.of(O).count(), 1);
        // A rebuild drops claims, not the records.
        c.clear();
        assert_eq!(c.of(O).count(), 0);
        assert_eq!(c.local_of(O).len(), 2);
        c.add(&r1);
        c.remove_local(&r1);
        c.remove_local(&r2);
        assert_eq!(c.owner_of(O), None, "free after its last route");
        assert!(c.local_of(O).is_empty());
        assert_eq!(c.of(O).count(), 1, "the claim stays until removed");
        assert_eq!(c.remove(&r1.id).as_deref(), Some(O));
        assert!(c.by_origin.is_empty(), "{:?}", c.by_origin);
    }

    #[test]
    fn a_new_unproven_claim_stands_against_the_router_holding_the_origin() {
        let mut c = Claims::default();
        assert_eq!(c.held_elsewhere(O, "r-m", OriginProof::Static), None);
        c.add(&claim("a@r-z", O, "r-z", OriginProof::Bootstrap));
        for p in [
            OriginProof::None,
            OriginProof::Bootstrap,
            OriginProof::Static,
        ] {
            assert_eq!(c.held_elsewhere(O, "r-m", p).as_deref(), Some("r-z"));
        }
        assert_eq!(c.held_elsewhere(O, "r-m", OriginProof::Jwt), None);
        // Our own claim won the race: more of ours are no new conflict.
        c.add(&claim("b", O, "", OriginProof::Bootstrap));
        assert_eq!(c.held_elsewhere(O, "r-m", OriginProof::Bootstrap), None);
        assert_eq!(
            c.held_elsewhere(O, "s-m", OriginProof::Bootstrap)
                .as_deref(),
            Some("r-z")
        );
        assert_eq!(c.winner_name(O, "s-m").as_ref(), "r-z");
    }
}
