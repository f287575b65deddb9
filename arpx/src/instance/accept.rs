//! Applying a peer's advertisements under the route rules.
//!
//! An Update is checked whole for violations before any of it is
//! applied; a violation closes the session (nothing of the message
//! applied): a path not ending at the sender, a path containing us or
//! repeating a router, an origin signature that does not verify.
//!
//! Everything else costs only the route that breaks it (dropped and
//! counted, the session stays): a path longer than `max_path`, a route_id
//! another origin router holds (first claim stays; local routes always
//! win), a stale serial (ignored), an origin key contradicting the known
//! key of its origin router (`keys`), and a path beyond the neighbour's
//! or the origin router's limit (`shares`: a full neighbour budget takes
//! from the largest origin, never from a small one). Closing a session
//! over these would let one router's flood or forgery, reflected by an
//! honest neighbour, cut us off from that neighbour (issue 20 items 4, 5).

use std::sync::Arc;

use super::io::{ConnId, Output};
use super::keys::KeyCheck;
use super::path::{Path, Wire};
use super::shares::Admit;
use super::{Holders, Instance};
use crate::message::{Close, CloseCode, RouteAd};
use crate::sign;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Install,
    /// Same advertisement as held: only the confirmation mark moves.
    Unchanged,
    TooLong,
    Conflict,
    /// The origin key contradicts the one known for its origin router.
    KeyConflict,
    Stale,
}

impl Instance {
    /// The wire-independent violations of one Update (nothing applied);
    /// `wires[i]` is `routes[i]`'s [`Wire`].
    fn check_violations(
        &mut self,
        peer: &str,
        routes: &[RouteAd],
        wires: &[Wire],
    ) -> Result<(), Close> {
        let us = self.cfg.router_id.as_str();
        for (ad, wire) in routes.iter().zip(wires) {
            let id = &ad.route_id;
            if ad.sender() != peer {
                return Err(Close::new(
                    CloseCode::InvalidMessage,
                    format!(
                        "route {id}: path ends at {}, not at the sending router {peer}",
                        ad.sender()
                    ),
                ));
            }
            if ad.path.iter().any(|hop| hop == us) {
                self.counters.rejected_loop += 1;
                return Err(Close::new(
                    CloseCode::LoopDetected,
                    format!(
                        "route {id}: path {} contains this router",
                        ad.path.join(",")
                    ),
                ));
            }
            if let Some(hop) = repeated_hop(&ad.path) {
                self.counters.rejected_loop += 1;
                return Err(Close::new(
                    CloseCode::LoopDetected,
                    format!("route {id}: path repeats router {hop}"),
                ));
            }
            if !self.verified_before(ad, wire) {
                if let Err(e) = sign::verify(ad) {
                    self.counters.rejected_bad_signature += 1;
                    return Err(Close::new(
                        CloseCode::BadSignature,
                        format!("route {} of origin {}: {e}", ad.route_id, ad.origin_router),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether a held path (from any peer) carries exactly this signed
    /// content and signature: then it was verified when it arrived, and a
    /// reconnect snapshot or a second path costs no signature check.
    fn verified_before(&self, ad: &RouteAd, wire: &Wire) -> bool {
        let id = ad.route_id.as_str();
        let Some(h) = self.routes.get(id) else {
            return false;
        };
        h.peers.iter().any(|p| {
            self.peers
                .get(&**p)
                .and_then(|p| p.paths.get(id))
                .filter(|held| held.serial == ad.serial && *held.origin == *ad.origin_router)
                .is_some_and(|held| {
                    // The same wire is the common case (a reconnect's
                    // snapshot); another path to it needs a closer look.
                    held.holds(wire) || held.ad(id).is_some_and(|held| same_signed(&held, ad))
                })
        })
    }

    fn verdict(&self, peer: &str, ad: &RouteAd, wire: &Wire) -> Verdict {
        let id = ad.route_id.as_str();
        if self.locals.contains(id) {
            return Verdict::Conflict;
        }
        if ad.path.len() > self.cfg.max_path {
            return Verdict::TooLong;
        }
        if let KeyCheck::Contradicts(_) = self.keys.check(&ad.origin_router, &ad.origin_key.0) {
            return Verdict::KeyConflict;
        }
        if let Some(h) = self.routes.get(id) {
            let others = h.peers.iter().any(|p| **p != *peer);
            if others && *h.origin != *ad.origin_router {
                return Verdict::Conflict;
            }
        }
        let Some(p) = self.peers.get(peer) else {
            return Verdict::Conflict;
        };
        if let Some(held) = p.paths.get(id) {
            let epoch = p.boot_epoch.unwrap_or(0);
            if held.epoch == epoch && *held.origin == *ad.origin_router && held.serial > ad.serial {
                return Verdict::Stale;
            }
            // The same advertisement, its carried lease aside (a renewal
            // must cost nothing): the wire holds every field but the route
            // id and the origin router, compared here.
            if *held.origin == *ad.origin_router && held.holds(wire) {
                return Verdict::Unchanged;
            }
        }
        Verdict::Install
    }

    /// One Update from `peer` on `conn`: all of it or (with the Close the
    /// session ends with) none of it.
    pub(super) fn accept_routes(
        &mut self,
        peer: &str,
        conn: ConnId,
        mut routes: Vec<RouteAd>,
        out: &mut Vec<Output>,
    ) -> Result<(), Close> {
        self.counters.updates_in += 1;
        self.counters.routes_in += routes.len() as u64;
        // Each route's wire, once: the checks and the verdicts compare it.
        let wires: Vec<Wire> = routes.iter_mut().map(Wire::of).collect();
        self.check_violations(peer, &routes, &wires)?;
        let Some(p) = self.peers.get(peer) else {
            return Ok(());
        };
        let epoch = p.boot_epoch.unwrap_or(0);
        let dropped_before = p.dropped;
        for (ad, wire) in routes.into_iter().zip(wires) {
            self.learn_certificate(&ad, out);
            match self.verdict(peer, &ad, &wire) {
                Verdict::Install => self.admit_path(peer, ad, wire, conn, epoch, out),
                Verdict::Unchanged => {
                    if let Some(path) = self
                        .peers
                        .get_mut(peer)
                        .and_then(|p| p.paths.get_mut(ad.route_id.as_str()))
                    {
                        path.mark = conn;
                        path.lease_ms = ad.lease_ms;
                    }
                }
                Verdict::TooLong => {
                    self.counters.rejected_path_too_long += 1;
                    self.remove_path(peer, &ad.route_id, out);
                }
                Verdict::Conflict => {
                    self.counters.rejected_origin_conflict += 1;
                    self.remove_path(peer, &ad.route_id, out);
                }
                Verdict::KeyConflict => {
                    self.counters.rejected_origin_key += 1;
                    let why = format!(
                        "route {}: origin key of router {} contradicts its known key",
                        ad.route_id, ad.origin_router
                    );
                    if let Some(p) = self.peers.get_mut(peer) {
                        p.drop_one(why);
                    }
                    self.remove_path(peer, &ad.route_id, out);
                }
                Verdict::Stale => self.counters.ignored_stale += 1,
            }
        }
        if let Some(p) = self.peers.get(peer) {
            if p.dropped > dropped_before {
                out.push(Output::PathsDropped {
                    peer: peer.to_owned(),
                    count: p.dropped - dropped_before,
                    last: p.last_drop.clone().unwrap_or_default(),
                });
            }
        }
        Ok(())
    }

    /// An origin certificate our domain CA issued for the route's origin
    /// router makes its key authoritative; paths that carried another
    /// (second-hand) key for it go.
    fn learn_certificate(&mut self, ad: &RouteAd, out: &mut Vec<Output>) {
        let origin = ad.origin_router.as_str();
        if ad.origin_cert.is_empty() || self.keys.certified_by(origin, &ad.origin_cert) {
            return;
        }
        let Some(ca) = self.cfg.origin_ca.clone() else {
            return;
        };
        if self.keys.refused_cert(origin, &ad.origin_cert) {
            return;
        }
        match ca.0.origin_key(origin, &ad.origin_cert) {
            Some(key) if key == ad.origin_key.0 => {
                if self.keys.set_certified(origin, key, &ad.origin_cert) {
                    self.purge_forged(origin, key, out);
                }
            }
            _ => {
                self.counters.rejected_origin_cert += 1;
                self.keys.refuse_cert(origin, &ad.origin_cert);
            }
        }
    }

    /// Installs a path that passed the rules, within the neighbour's and
    /// the origin router's limits.
    fn admit_path(
        &mut self,
        peer: &str,
        ad: RouteAd,
        wire: Wire,
        conn: ConnId,
        epoch: u64,
        out: &mut Vec<Output>,
    ) {
        let Some(p) = self.peers.get(peer) else {
            return;
        };
        let counted = p
            .paths
            .get(ad.route_id.as_str())
            .is_some_and(|held| *held.origin == *ad.origin_router);
        if !counted {
            let per_origin = self.cfg.max_routes_per_origin;
            match p
                .shares
                .admit(&ad.origin_router, p.cfg.max_routes, per_origin)
            {
                Admit::Yes => {}
                Admit::Evict { origin, route_id } => {
                    self.counters.evicted_fair_share += 1;
                    let why = format!(
                        "route {route_id} of origin {origin} given up for a path of {}: \
                         {} paths from router {peer} (max_routes), shared by origin router",
                        ad.origin_router, p.cfg.max_routes
                    );
                    if let Some(p) = self.peers.get_mut(peer) {
                        p.drop_one(why);
                    }
                    self.remove_path(peer, &route_id, out);
                }
                Admit::No => {
                    self.counters.rejected_route_limit += 1;
                    let why = if p.shares.count(&ad.origin_router) >= per_origin {
                        format!(
                            "route {}: router {} already has {per_origin} paths from router {peer} \
                             (arpx.max_routes_per_origin)",
                            ad.route_id, ad.origin_router
                        )
                    } else {
                        format!(
                            "route {}: {} paths from router {peer} (max_routes), origin {} holds its share",
                            ad.route_id, p.cfg.max_routes, ad.origin_router
                        )
                    };
                    if let Some(p) = self.peers.get_mut(peer) {
                        p.drop_one(why);
                    }
                    // An older copy under another origin must not stay.
                    self.remove_path(peer, &ad.route_id, out);
                    return;
                }
            }
        }
        self.insert_path(peer, ad, wire, conn, epoch, out);
    }

    pub(super) fn accept_withdraws(&mut self, peer: &str, ids: Vec<String>, out: &mut Vec<Output>) {
        self.counters.withdraws_in += 1;
        self.counters.withdrawn_in += ids.len() as u64;
        for id in ids {
            self.remove_path(peer, &id, out);
        }
    }

    fn insert_path(
        &mut self,
        peer: &str,
        mut ad: RouteAd,
        wire: Wire,
        mark: ConnId,
        epoch: u64,
        out: &mut Vec<Output>,
    ) {
        let Some(name) = self.peers.get(peer).map(|p| p.name.clone()) else {
            return;
        };
        // Held without its certificate: one shared copy per origin.
        let cert = self
            .certs
            .share(&ad.origin_router, std::mem::take(&mut ad.origin_cert));
        let origin = self.keys.hold(&ad.origin_router, ad.origin_key.0);
        // One copy of the route id for every peer's path to it.
        let id: Arc<str> = match self.routes.get_key_value(ad.route_id.as_str()) {
            Some((id, _)) => id.clone(),
            None => ad.route_id.as_str().into(),
        };
        let path = Path::new(&ad, wire, origin.clone(), cert, mark, epoch);
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        if let Some(old) = p.paths.insert(id.clone(), path) {
            p.shares.remove(&old.origin, &id);
            self.keys.release(&old.origin);
            let Path { origin, cert, .. } = old;
            drop(cert);
            self.certs.release(&origin);
        }
        p.shares.add(&origin, id.clone());
        let h = self.routes.entry(id).or_insert_with(|| Holders {
            origin: origin.clone(),
            peers: Vec::new(),
        });
        if !h.peers.iter().any(|p| **p == *peer) {
            h.peers.reserve_exact(1);
            h.peers.push(name);
        }
        // The only holder may change the origin (its view changed).
        h.origin = origin;
        self.dirty.insert(ad.route_id.clone());
        out.push(Output::PathUp {
            peer: peer.to_owned(),
            ad: Box::new(ad),
        });
    }

    /// Removes `peer`'s path to `route_id`, if held.
    pub(super) fn remove_path(&mut self, peer: &str, route_id: &str, out: &mut Vec<Output>) {
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        let Some(old) = p.paths.remove(route_id) else {
            return;
        };
        p.shares.remove(&old.origin, route_id);
        self.keys.release(&old.origin);
        let Path { origin, cert, .. } = old;
        drop(cert);
        self.certs.release(&origin);
        if let Some(h) = self.routes.get_mut(route_id) {
            h.peers.retain(|p| **p != *peer);
            if h.peers.is_empty() {
                self.routes.remove(route_id);
            }
        }
        self.dirty.insert(route_id.to_owned());
        out.push(Output::PathDown {
            peer: peer.to_owned(),
            route_id: route_id.to_owned(),
        });
    }

    /// Removes every path of `peer` that `pred` selects.
    pub(super) fn remove_paths_where(
        &mut self,
        peer: &str,
        pred: impl Fn(&Path) -> bool,
        out: &mut Vec<Output>,
    ) {
        let Some(p) = self.peers.get(peer) else {
            return;
        };
        let ids: Vec<Arc<str>> = p
            .paths
            .iter()
            .filter(|(_, path)| pred(path))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.remove_path(peer, &id, out);
        }
    }

    /// An authenticated key (a direct peer's, or a certified one)
    /// replaced a different learned one: paths carrying the old key for
    /// that origin were never its own.
    pub(super) fn purge_forged(&mut self, origin: &str, key: [u8; 32], out: &mut Vec<Output>) {
        let peers: Vec<String> = self.peers.keys().cloned().collect();
        for peer in peers {
            let before = self.peers.get(&peer).map_or(0, |p| p.paths.len());
            self.remove_paths_where(
                &peer,
                |path| *path.origin == *origin && path.origin_key() != Some(key),
                out,
            );
            let after = self.peers.get(&peer).map_or(0, |p| p.paths.len());
            self.counters.rejected_origin_key += (before - after) as u64;
        }
    }
}

/// Same signature over the same stable fields.
fn same_signed(a: &RouteAd, b: &RouteAd) -> bool {
    a.signature == b.signature
        && a.origin_key == b.origin_key
        && a.serial == b.serial
        && a.origin_router == b.origin_router
        && a.route_id == b.route_id
        && a.capability == b.capability
        && a.version == b.version
        && a.origin_agent == b.origin_agent
        && a.tenant == b.tenant
        && a.region == b.region
        && a.attrs == b.attrs
        && a.allowed_tenants == b.allowed_tenants
        && a.allowed_sources == b.allowed_sources
        && a.contract == b.contract
        && a.proof == b.proof
}

fn repeated_hop(path: &[String]) -> Option<&str> {
    path.iter()
        .enumerate()
        .find(|(i, hop)| path[..*i].contains(hop))
        .map(|(_, hop)| hop.as_str())
}
