//! What each peer is sent.
//!
//! Our local and static routes go to every peer whose export rules admit
//! the route's tenant. Peer-learned routes go out only when this router is
//! a reflector (or the peer is a reflector client): the best eligible path
//! per route_id (shortest path, then lowest next-hop router id), never to
//! the peer it came from nor to a router already in its path, with our
//! router id appended. Each session starts with a full snapshot, sent in
//! chunks as the transport writes them (so its memory is a few chunks',
//! whatever the table's size); after it, only differences from what the
//! session was sent (Adj-RIB-Out) go out, so an unchanged re-upsert or a
//! lease renewal sends nothing. Differences arising during the snapshot
//! wait for its end.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::io::{ConnId, LocalRoute, Output};
use super::path::Path;
use super::peer::{Outgoing, Peer, Sent};
use super::Instance;
use crate::message::{RouteAd, MAX_PATH_WIRE};

/// Routes per snapshot chunk: ~180 KB of frames with origin
/// certificates, well inside a frame queue, and a few hundred loop
/// turns for the largest tables.
const SNAPSHOT_CHUNK: usize = 256;

/// Chunks of a snapshot sent and not yet written: two, so the transport
/// has the next one while the first is acknowledged.
const SNAPSHOT_WINDOW: usize = 2;

/// Advertisements for one peer with the Adj-RIB-Out record of each, side
/// by side: the advertisements go into the update messages as they are.
struct Updates {
    ads: Vec<RouteAd>,
    sent: Vec<Sent>,
}

impl Updates {
    fn with_capacity(n: usize) -> Updates {
        Updates {
            ads: Vec::with_capacity(n),
            sent: Vec::with_capacity(n),
        }
    }
}

impl Instance {
    /// The best eligible peer-learned path to `route_id`: (peer, path).
    fn best_path(&self, route_id: &str) -> Option<(&str, &Path)> {
        let h = self.routes.get(route_id)?;
        h.peers
            .iter()
            .filter_map(|id| {
                let p = self.peers.get(&**id)?;
                if !p.eligible {
                    return None;
                }
                Some((&**id, p.paths.get(route_id)?))
            })
            .min_by(|(a_id, a), (b_id, b)| (a.hops.cmp(&b.hops)).then(a_id.cmp(b_id)))
    }

    fn reflects_to(&self, peer: &Peer) -> bool {
        self.cfg.reflector || peer.cfg.reflector_client
    }

    /// Whether `peer` may be sent any peer-learned path: every path when
    /// we reflect to it, else those of our relay clients (we are their
    /// only way in).
    fn passes_any_to(&self, peer: &Peer) -> bool {
        self.reflects_to(peer) || self.peers.values().any(|p| p.cfg.relay_client)
    }

    /// What `peer` should hold for `route_id` now.
    fn export_for(&self, now: u64, peer: &Peer, route_id: &str) -> Option<RouteAd> {
        if let Some(local) = self.locals.routes.get(route_id) {
            return local
                .export(now, &self.cfg.router_id, &self.cfg.cert)
                .filter(|ad| peer.exports_tenant(&ad.tenant));
        }
        let (via, held) = self.best_path(route_id)?;
        let ad = held.ad(route_id)?;
        let to = peer.cfg.router_id.as_str();
        let from_relay_client = self.peers.get(via).is_some_and(|p| p.cfg.relay_client);
        if !(self.reflects_to(peer) || from_relay_client)
            || via == to
            || ad.path.iter().any(|hop| hop == to)
            || ad.path.len() >= MAX_PATH_WIRE
            || !peer.exports_tenant(&ad.tenant)
        {
            return None;
        }
        let mut ad = ad;
        ad.origin_cert = held.cert.as_deref().map(<[u8]>::to_vec).unwrap_or_default();
        // Pass on no more trust than we granted the route ourselves.
        let (granted, proof) = self
            .peers
            .get(via)
            .map_or((0, crate::message::OriginProof::None), |p| {
                (p.cfg.max_trust, p.cfg.max_proof)
            });
        ad.trust_limit = ad.trust_limit.min(ad.attrs.trust).min(granted);
        ad.proof_limit = ad.proof_limit.min(ad.proof).min(proof);
        ad.path.push(self.cfg.router_id.clone());
        Some(ad)
    }

    /// `id` as an Adj-RIB-Out key: one copy for every peer it is sent to,
    /// the holders' own for a peer-learned route.
    fn shared_id(&self, id: &str) -> Arc<str> {
        if let Some((shared, _)) = self.routes.get_key_value(id) {
            return shared.clone();
        }
        self.peers
            .values()
            .find_map(|p| p.sent.get_key_value(id).map(|(shared, _)| shared.clone()))
            .unwrap_or_else(|| id.into())
    }

    /// `peer`'s exports of `ids` now, each with its Adj-RIB-Out record,
    /// those that differ from what it holds (`all`: every one).
    fn changed<'a>(
        &self,
        now: u64,
        peer: &Peer,
        ids: impl Iterator<Item = &'a String>,
        all: bool,
    ) -> (Updates, Vec<String>) {
        // Sized for the ids, up to a snapshot chunk's: a route change
        // exports one route to each peer, and a vector grown to its first
        // capacity (four advertisements, 1.7 KiB) and freed again on
        // every change left holes the route's long-lived records were
        // carved from. A re-evaluation of every route (a peer's export
        // rules changed) usually changes few: it grows from a chunk's.
        let mut updates = Updates::with_capacity(ids.size_hint().0.min(SNAPSHOT_CHUNK));
        let mut withdraws = Vec::new();
        for id in ids {
            let held = peer.sent.get(id.as_str());
            match self.export_for(now, peer, id) {
                Some(ad) => {
                    let sent = Sent::of(&ad);
                    if all || held != Some(&sent) {
                        updates.ads.push(ad);
                        updates.sent.push(sent);
                    }
                }
                None if held.is_some() => withdraws.push(id.clone()),
                None => {}
            }
        }
        (updates, withdraws)
    }

    /// Sends `updates` on `peer`'s session, counts them and records what
    /// went in its Adj-RIB-Out. Returns the ids that could not go (over
    /// the frame bound) of which the peer holds an older copy: they must
    /// be withdrawn.
    fn send_recorded(
        &mut self,
        peer: &str,
        updates: Updates,
        out: &mut Vec<Output>,
    ) -> Vec<String> {
        let Updates { ads, sent } = updates;
        if ads.is_empty() {
            return Vec::new();
        }
        let records: Vec<(Arc<str>, Sent)> = ads
            .iter()
            .zip(sent)
            .map(|(ad, sent)| (self.shared_id(&ad.route_id), sent))
            .collect();
        let Some(p) = self.peers.get_mut(peer) else {
            return Vec::new();
        };
        let Some(session) = p.session.as_mut() else {
            return Vec::new();
        };
        let n = ads.len();
        let (msgs, refused) = session.send_updates(&self.session_cfg, ads, out);
        self.counters.updates_out += msgs as u64;
        self.counters.routes_out += (n - refused.len()) as u64;
        self.counters.export_refused += refused.len() as u64;
        let refused: BTreeSet<String> = refused.into_iter().map(|(ad, _)| ad.route_id).collect();
        let mut stale = Vec::new();
        for (id, sent) in records {
            if !refused.contains(&*id) {
                p.sent.insert(id, sent);
            } else if p.sent.remove(&id).is_some() {
                stale.push(id.to_string());
            }
        }
        stale
    }

    /// Our route ids, and with `learned` the peer-learned ones.
    fn exportable_ids(&self, learned: bool) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = self
            .locals
            .routes
            .iter()
            .map(|l| l.id().to_owned())
            .collect();
        if learned {
            ids.extend(self.routes.keys().map(|id| id.to_string()));
        }
        ids
    }

    /// Starts `peer`'s full snapshot (its session's Opens are exchanged):
    /// the first chunks go now, the rest as the transport writes them
    /// ([`Instance::written`]).
    pub(super) fn send_snapshot(&mut self, now: u64, peer: &str, out: &mut Vec<Output>) {
        let Some(p) = self.peers.get(peer) else {
            return;
        };
        let ids = self.exportable_ids(self.passes_any_to(p));
        self.snapshots += 1;
        let version = self.snapshots;
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        let Some(session) = p.open_session() else {
            return;
        };
        let conn = session.conn;
        session.begin_snapshot(version, out);
        p.sent.clear();
        p.outgoing = Some(Outgoing {
            conn,
            version,
            remaining: ids,
            unwritten: 0,
            deferred: BTreeSet::new(),
        });
        self.continue_snapshot(now, peer, out);
    }

    /// The transport wrote what came before a chunk's notice: the next
    /// chunk may go.
    pub(super) fn written(&mut self, now: u64, conn: ConnId, out: &mut Vec<Output>) {
        let Some(peer) = self.conns.get(&conn).cloned() else {
            return;
        };
        let Some(o) = self
            .peers
            .get_mut(&peer)
            .and_then(|p| p.outgoing.as_mut())
            .filter(|o| o.conn == conn)
        else {
            return;
        };
        o.unwritten = o.unwritten.saturating_sub(1);
        self.continue_snapshot(now, &peer, out);
    }

    /// Sends chunks of `peer`'s snapshot while fewer than
    /// [`SNAPSHOT_WINDOW`] are unwritten; the last chunk ends it, and the
    /// deltas held back meanwhile follow.
    fn continue_snapshot(&mut self, now: u64, peer: &str, out: &mut Vec<Output>) {
        loop {
            let Some(o) = self.peers.get_mut(peer).and_then(|p| p.outgoing.as_mut()) else {
                return;
            };
            if o.unwritten >= SNAPSHOT_WINDOW {
                return;
            }
            let chunk: Vec<String> = std::iter::from_fn(|| o.remaining.pop_first())
                .take(SNAPSHOT_CHUNK)
                .collect();
            let (conn, version, done) = (o.conn, o.version, o.remaining.is_empty());
            let Some(p) = self.peers.get(peer) else {
                return;
            };
            // The session's Adj-RIB-Out was emptied at the snapshot's start
            // and holds none of these: nothing refused needs a withdraw.
            let (updates, _) = self.changed(now, p, chunk.iter(), true);
            self.send_recorded(peer, updates, out);
            let Some(p) = self.peers.get_mut(peer) else {
                return;
            };
            if done {
                if let Some(session) = p.session.as_mut() {
                    session.end_snapshot(version, out);
                }
                let deferred = p.outgoing.take().map(|o| o.deferred).unwrap_or_default();
                self.send_deltas(now, peer, deferred.iter(), out);
                return;
            }
            out.push(Output::NotifyWritten { conn });
            if let Some(o) = p.outgoing.as_mut() {
                o.unwritten += 1;
            }
        }
    }

    /// Sends every open session what changed for the dirty route ids.
    pub(super) fn flush(&mut self, now: u64, out: &mut Vec<Output>) {
        if self.dirty.is_empty() {
            return;
        }
        let dirty = std::mem::take(&mut self.dirty);
        let ids: Vec<String> = self.peers.keys().cloned().collect();
        for id in ids {
            self.send_deltas(now, &id, dirty.iter(), out);
        }
    }

    /// Re-evaluates everything `peer` holds or could hold (its export
    /// rules changed).
    pub(super) fn resync_exports(&mut self, now: u64, peer: &str, out: &mut Vec<Output>) {
        let Some(p) = self.peers.get(peer) else {
            return;
        };
        let mut ids = self.exportable_ids(true);
        ids.extend(p.sent.keys().map(|id| id.to_string()));
        self.send_deltas(now, peer, ids.iter(), out);
    }

    fn send_deltas<'a>(
        &mut self,
        now: u64,
        peer: &str,
        ids: impl Iterator<Item = &'a String>,
        out: &mut Vec<Output>,
    ) {
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        if !p.session.as_ref().is_some_and(|s| s.is_open()) {
            return;
        }
        if let Some(o) = p.outgoing.as_mut() {
            // Inside our snapshot: a route not sent yet goes as it is when
            // its chunk does; the others wait for the end.
            let later = ids.filter(|id| !o.remaining.contains(*id)).cloned();
            o.deferred.extend(later);
            return;
        }
        let Some(p) = self.peers.get(peer) else {
            return;
        };
        let (updates, mut withdraws) = self.changed(now, p, ids, false);
        // Not sendable: the peer must not keep an older copy.
        withdraws.extend(self.send_recorded(peer, updates, out));
        if withdraws.is_empty() {
            return;
        }
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        let Some(session) = p.session.as_mut() else {
            return;
        };
        for id in &withdraws {
            p.sent.remove(id.as_str());
        }
        let n = withdraws.len();
        let msgs = session.send_withdraws(&self.session_cfg, withdraws, out);
        self.counters.withdraws_out += msgs as u64;
        self.counters.withdrawn_out += n as u64;
    }

    pub(super) fn upsert_local(&mut self, now: u64, route: LocalRoute, out: &mut Vec<Output>) {
        let id = route.route_id.clone();
        match self.locals.upsert(
            now,
            &self.cfg.router_id,
            &self.cfg.key,
            &self.cfg.cert,
            route,
        ) {
            Ok(false) => return,
            Ok(true) => {}
            Err(_) => {
                self.counters.export_refused += 1;
                self.locals.remove(&id);
            }
        }
        // Local route ids always win over remote claims.
        if let Some(h) = self.routes.get(id.as_str()) {
            let holders: Vec<String> = h.peers.iter().map(|p| p.to_string()).collect();
            for peer in holders {
                self.counters.rejected_origin_conflict += 1;
                self.remove_path(&peer, &id, out);
            }
        }
        self.dirty.insert(id);
    }

    pub(super) fn withdraw_local(&mut self, route_id: &str) {
        if self.locals.remove(route_id) {
            self.dirty.insert(route_id.to_owned());
        }
    }
}
