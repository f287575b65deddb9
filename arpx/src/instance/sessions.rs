//! Connections and what their ends mean for a peer's paths.
//!
//! * Transport loss or hold expiry: paths ineligible at once, removed
//!   after `graceful_ms` unless the next session's snapshot confirms them.
//! * A typed close for a protocol violation (either direction), an admin
//!   shutdown or a removed peer: paths removed at once.
//! * A collision: the losing connection goes, the peer's paths and their
//!   eligibility pass to the surviving connection untouched (no flap).

use super::io::{ConnId, Output, PeerConfig, Timer};
use super::peer::Peer;
use super::Instance;
use crate::message::{Close, CloseCode, Message, Open};
use crate::session::{Event, Session};

/// What the end of a session does to the peer's paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loss {
    RemoveNow,
    Graceful,
    /// The connection lost a collision: another one carries on.
    Handover,
}

fn loss_for(code: CloseCode) -> Loss {
    match code {
        CloseCode::HoldExpired => Loss::Graceful,
        CloseCode::Collision => Loss::Handover,
        _ => Loss::RemoveNow,
    }
}

impl Instance {
    /// Sends `close` on a connection that gets no session.
    fn refuse(&mut self, now: u64, conn: ConnId, peer: &str, close: Close, out: &mut Vec<Output>) {
        out.push(Output::Send {
            conn,
            msg: Message::Close(close.clone()),
        });
        out.push(Output::Disconnect { conn });
        *self
            .counters
            .closes_sent
            .entry(close.code.as_str())
            .or_default() += 1;
        if let Some(p) = self.peers.get_mut(peer) {
            p.last_close = Some((close.clone(), true));
            if p.session.is_none() {
                p.idle_since_ms = now;
            }
        }
        out.push(Output::SessionDown {
            peer: peer.to_owned(),
            conn,
            close: Some(close),
            by_us: true,
            error: None,
        });
    }

    /// Whether a new connection beats the peer's existing one: the one
    /// initiated by the higher router_id survives; when the same side
    /// dialled both, it gave up on the old one and the new one survives.
    fn new_conn_wins(&self, peer: &str, old_outbound: bool, new_outbound: bool) -> bool {
        if old_outbound == new_outbound {
            return true;
        }
        let we_are_higher = self.cfg.router_id.as_str() > peer;
        new_outbound == we_are_higher
    }

    fn collision_reason(&self, peer: &str, old_outbound: bool, new_outbound: bool) -> String {
        if old_outbound == new_outbound {
            let by = if new_outbound {
                self.cfg.router_id.as_str()
            } else {
                peer
            };
            return format!("{by} opened a newer connection to replace this one");
        }
        let higher = std::cmp::max(self.cfg.router_id.as_str(), peer);
        format!("collision with router {peer}: the connection initiated by {higher} (the higher router_id) survives")
    }

    pub(super) fn connected(
        &mut self,
        now: u64,
        conn: ConnId,
        peer: String,
        peer_key: [u8; 32],
        outbound: bool,
        out: &mut Vec<Output>,
    ) {
        if self.conns.contains_key(&conn) {
            // A driver bug (ConnIds are never reused): keep the live one.
            return;
        }
        if self.shutting_down {
            let c = Close::new(CloseCode::AdminShutdown, "router is shutting down");
            return self.refuse(now, conn, &peer, c, out);
        }
        if peer == self.cfg.router_id {
            let c = Close::new(
                CloseCode::IdentityMismatch,
                "peer presents this router's own router_id",
            );
            return self.refuse(now, conn, &peer, c, out);
        }
        let Some(p) = self.peers.get(&peer) else {
            let c = Close::new(
                CloseCode::PeerRemoved,
                format!("router {peer} is not a configured peer"),
            );
            return self.refuse(now, conn, &peer, c, out);
        };
        if let Some(old) = &p.session {
            let old_conn = old.conn;
            let reason = self.collision_reason(&peer, old.outbound, outbound);
            if !self.new_conn_wins(&peer, old.outbound, outbound) {
                let c = Close::new(CloseCode::Collision, reason);
                return self.refuse(now, conn, &peer, c, out);
            }
            // The paths and their eligibility pass to the new connection.
            let c = Close::new(CloseCode::Collision, reason);
            self.retire(now, old_conn, c, out);
        }
        if self.keys.set_direct(&peer, peer_key) {
            self.purge_forged(&peer, peer_key, out);
        }
        let reflector_client = false;
        let session = Session::start(
            &self.session_cfg,
            conn,
            peer.clone(),
            outbound,
            reflector_client,
            now,
            out,
        );
        self.conns.insert(conn, peer.clone());
        if let Some(p) = self.peers.get_mut(&peer) {
            p.session = Some(session);
        }
    }

    pub(super) fn frame(&mut self, now: u64, conn: ConnId, msg: Message, out: &mut Vec<Output>) {
        let Some(peer) = self.conns.get(&conn).cloned() else {
            return;
        };
        if let Err(e) = msg.validate() {
            let c = Close::new(CloseCode::InvalidMessage, format!("invalid message: {e}"));
            return self.close_conn(now, conn, c, out);
        }
        let Some(session) = self.peers.get_mut(&peer).and_then(|p| p.session.as_mut()) else {
            return;
        };
        let event = match session.on_message(&self.session_cfg, now, msg, out) {
            Ok(event) => event,
            Err(close) => return self.close_conn(now, conn, close, out),
        };
        let result = match event {
            Event::None => Ok(()),
            Event::Established(open) => {
                self.established(now, &peer, conn, open, out);
                Ok(())
            }
            Event::Routes { routes, .. } => self.accept_routes(&peer, conn, routes, out),
            Event::Withdrawn(ids) => {
                self.accept_withdraws(&peer, ids, out);
                Ok(())
            }
            Event::SnapshotEnd => {
                self.snapshot_end(&peer, conn, out);
                Ok(())
            }
            Event::PeerClosed(close) => {
                self.peer_closed(now, conn, close, out);
                Ok(())
            }
        };
        if let Err(close) = result {
            self.close_conn(now, conn, close, out);
        }
    }

    fn established(
        &mut self,
        now: u64,
        peer: &str,
        conn: ConnId,
        open: Open,
        out: &mut Vec<Output>,
    ) {
        self.counters.sessions_established += 1;
        let mut restarted = false;
        if let Some(p) = self.peers.get_mut(peer) {
            restarted = p.boot_epoch.is_some_and(|e| e != open.boot_epoch);
            p.boot_epoch = Some(open.boot_epoch);
            p.last_error = None;
        }
        // A new boot epoch after a collision handover: the paths handed
        // over are a dead process's, not a live session's. They stay
        // ineligible until the new snapshot replaces them (and what was
        // reflected of them is withdrawn, so a lower serial from the
        // restarted origin is never taken for a stale copy downstream).
        if restarted {
            self.set_ineligible(peer, out);
        }
        out.push(Output::SessionUp {
            peer: peer.to_owned(),
            conn,
        });
        self.send_snapshot(now, peer, out);
    }

    /// The peer's snapshot is complete: what it did not confirm goes, and
    /// its paths become eligible.
    fn snapshot_end(&mut self, peer: &str, conn: ConnId, out: &mut Vec<Output>) {
        self.remove_paths_where(peer, |path| path.mark != conn, out);
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        if p.graceful {
            p.graceful = false;
            out.push(Output::CancelTimer(Timer::Graceful(peer.to_owned())));
        }
        if !p.eligible {
            p.eligible = true;
            out.push(Output::PeerEligible {
                peer: peer.to_owned(),
                up: true,
            });
            self.dirty.extend(p.paths.keys().map(|id| id.to_string()));
        }
    }

    /// We end `conn` with `close`.
    pub(super) fn close_conn(
        &mut self,
        now: u64,
        conn: ConnId,
        close: Close,
        out: &mut Vec<Output>,
    ) {
        let code = close.code;
        if let Some(peer) = self.retire(now, conn, close, out) {
            self.session_lost(now, &peer, loss_for(code), out);
        }
    }

    /// Sends `close` on `conn` and forgets the session, leaving the
    /// peer's paths to the caller. Returns the peer.
    fn retire(
        &mut self,
        now: u64,
        conn: ConnId,
        close: Close,
        out: &mut Vec<Output>,
    ) -> Option<String> {
        let peer = self.conns.remove(&conn)?;
        let p = self.peers.get_mut(&peer)?;
        let session = p.take_session()?;
        p.last_close = Some((close.clone(), true));
        p.idle_since_ms = now;
        // What we sent belongs to the session: the next one starts with a
        // full snapshot.
        p.sent.clear();
        *self
            .counters
            .closes_sent
            .entry(close.code.as_str())
            .or_default() += 1;
        session.close(close.clone(), out);
        out.push(Output::SessionDown {
            peer: peer.clone(),
            conn,
            close: Some(close),
            by_us: true,
            error: None,
        });
        Some(peer)
    }

    /// The peer ended `conn` with `close`.
    fn peer_closed(&mut self, now: u64, conn: ConnId, close: Close, out: &mut Vec<Output>) {
        let Some(peer) = self.conns.remove(&conn) else {
            return;
        };
        let Some(session) = self.peers.get_mut(&peer).and_then(|p| p.take_session()) else {
            return;
        };
        *self
            .counters
            .closes_received
            .entry(close.code.as_str())
            .or_default() += 1;
        out.push(Output::Disconnect { conn });
        session.end(out);
        let code = close.code;
        if let Some(p) = self.peers.get_mut(&peer) {
            p.last_close = Some((close.clone(), false));
            p.idle_since_ms = now;
        }
        out.push(Output::SessionDown {
            peer: peer.clone(),
            conn,
            close: Some(close),
            by_us: false,
            error: None,
        });
        self.session_lost(now, &peer, loss_for(code), out);
    }

    pub(super) fn disconnected(
        &mut self,
        now: u64,
        conn: ConnId,
        error: String,
        out: &mut Vec<Output>,
    ) {
        let Some(peer) = self.conns.remove(&conn) else {
            return;
        };
        let Some(p) = self.peers.get_mut(&peer) else {
            return;
        };
        let Some(session) = p.take_session() else {
            return;
        };
        p.last_error = Some(error.clone());
        p.idle_since_ms = now;
        session.end(out);
        out.push(Output::SessionDown {
            peer: peer.clone(),
            conn,
            close: None,
            by_us: false,
            error: Some(error),
        });
        self.session_lost(now, &peer, Loss::Graceful, out);
    }

    /// The peer's session ended (its `session` is already taken).
    fn session_lost(&mut self, now: u64, peer: &str, loss: Loss, out: &mut Vec<Output>) {
        let graceful_ms = self.cfg.graceful_ms;
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        p.sent.clear();
        let loss = match loss {
            Loss::Graceful if graceful_ms == 0 => Loss::RemoveNow,
            // A handover with no surviving connection: retain as for a loss,
            // but keep eligibility (the peer is alive and redialling).
            other => other,
        };
        match loss {
            Loss::RemoveNow => {
                self.set_ineligible(peer, out);
                self.remove_paths_where(peer, |_| true, out);
                if let Some(p) = self.peers.get_mut(peer) {
                    if p.graceful {
                        p.graceful = false;
                        out.push(Output::CancelTimer(Timer::Graceful(peer.to_owned())));
                    }
                }
            }
            Loss::Graceful | Loss::Handover => {
                if loss == Loss::Graceful {
                    self.set_ineligible(peer, out);
                }
                let Some(p) = self.peers.get_mut(peer) else {
                    return;
                };
                if p.session.is_none() && !p.graceful && !p.paths.is_empty() {
                    p.graceful = true;
                    out.push(Output::SetTimer {
                        timer: Timer::Graceful(peer.to_owned()),
                        at_ms: now.saturating_add(graceful_ms),
                    });
                }
            }
        }
    }

    fn set_ineligible(&mut self, peer: &str, out: &mut Vec<Output>) {
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        if p.eligible {
            p.eligible = false;
            out.push(Output::PeerEligible {
                peer: peer.to_owned(),
                up: false,
            });
            self.dirty.extend(p.paths.keys().map(|id| id.to_string()));
        }
    }

    pub(super) fn timer(&mut self, now: u64, timer: Timer, out: &mut Vec<Output>) {
        match &timer {
            Timer::Heartbeat(conn) | Timer::Hold(conn) | Timer::OpenWait(conn) => {
                let conn = *conn;
                let Some(peer) = self.conns.get(&conn) else {
                    return;
                };
                let Some(s) = self.peers.get_mut(peer).and_then(|p| p.session.as_mut()) else {
                    return;
                };
                if let Err(close) = s.on_timer(now, &timer, out) {
                    self.close_conn(now, conn, close, out);
                }
            }
            Timer::Graceful(peer) => {
                let Some(p) = self.peers.get_mut(peer) else {
                    return;
                };
                if !p.graceful {
                    return;
                }
                p.graceful = false;
                // Paths the current session's snapshot already confirmed
                // stay; the rest are what the grace period was for.
                let current = p.session.as_ref().map(|s| s.conn);
                let synced = p.session.as_ref().is_some_and(|s| s.is_synced());
                let peer = peer.clone();
                if !synced {
                    self.set_ineligible(&peer, out);
                }
                self.remove_paths_where(&peer, |path| Some(path.mark) != current, out);
            }
        }
    }

    pub(super) fn configure_peers(
        &mut self,
        now: u64,
        peers: Vec<PeerConfig>,
        out: &mut Vec<Output>,
    ) {
        let gone: Vec<String> = self
            .peers
            .keys()
            .filter(|id| !peers.iter().any(|p| &p.router_id == *id))
            .cloned()
            .collect();
        for id in gone {
            self.remove_peer(now, &id, out);
        }
        for cfg in peers {
            let id = cfg.router_id.clone();
            if id == self.cfg.router_id {
                continue;
            }
            let Some(p) = self.peers.get_mut(&id) else {
                self.peers.insert(id, Peer::new(cfg, now));
                continue;
            };
            if p.cfg == cfg {
                continue;
            }
            let exports_changed = p.cfg.export_tenants != cfg.export_tenants
                || p.cfg.reflector_client != cfg.reflector_client
                || p.cfg.export != cfg.export;
            p.cfg = cfg;
            self.trim_to_limits(&id, out);
            if exports_changed {
                self.resync_exports(now, &id, out);
            }
        }
    }

    /// Gives up paths of `peer` beyond its (lowered) limits, largest
    /// origin first; the session stays.
    fn trim_to_limits(&mut self, peer: &str, out: &mut Vec<Output>) {
        let per_origin = self.cfg.max_routes_per_origin;
        let mut trimmed = 0u64;
        loop {
            let Some(p) = self.peers.get_mut(peer) else {
                return;
            };
            let Some((origin, route_id)) = p.shares.trim_victim() else {
                break;
            };
            let over_total = p.shares.total() > p.cfg.max_routes;
            if !over_total && p.shares.count(&origin) <= per_origin {
                break;
            }
            p.drop_one(format!(
                "route {route_id} of origin {origin} given up: more than {} paths \
                 (max_routes lowered)",
                p.cfg.max_routes
            ));
            self.counters.rejected_route_limit += 1;
            trimmed += 1;
            self.remove_path(peer, &route_id, out);
        }
        if trimmed > 0 {
            let last = self
                .peers
                .get(peer)
                .and_then(|p| p.last_drop.clone())
                .unwrap_or_default();
            out.push(Output::PathsDropped {
                peer: peer.to_owned(),
                count: trimmed,
                last,
            });
        }
    }

    fn remove_peer(&mut self, now: u64, peer: &str, out: &mut Vec<Output>) {
        if let Some(conn) = self
            .peers
            .get(peer)
            .and_then(|p| p.session.as_ref())
            .map(|s| s.conn)
        {
            let c = Close::new(
                CloseCode::PeerRemoved,
                format!("router {peer} is no longer a configured peer"),
            );
            self.close_conn(now, conn, c, out);
        }
        self.set_ineligible(peer, out);
        self.remove_paths_where(peer, |_| true, out);
        if let Some(p) = self.peers.remove(peer) {
            if p.graceful {
                out.push(Output::CancelTimer(Timer::Graceful(peer.to_owned())));
            }
        }
        self.keys.remove_direct(peer);
    }

    pub(super) fn shutdown(&mut self, now: u64, out: &mut Vec<Output>) {
        self.shutting_down = true;
        let ids: Vec<String> = self.peers.keys().cloned().collect();
        for id in ids {
            if let Some(conn) = self
                .peers
                .get(&id)
                .and_then(|p| p.session.as_ref())
                .map(|s| s.conn)
            {
                let c = Close::new(CloseCode::AdminShutdown, "router is shutting down");
                self.close_conn(now, conn, c, out);
            }
            self.set_ineligible(&id, out);
            self.remove_paths_where(&id, |_| true, out);
            if let Some(p) = self.peers.get_mut(&id) {
                if p.graceful {
                    p.graceful = false;
                    out.push(Output::CancelTimer(Timer::Graceful(id.clone())));
                }
            }
        }
    }
}
