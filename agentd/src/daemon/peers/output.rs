//! The instance's side: inputs go in through [`Peers::feed`], and each
//! of its outputs is carried out here (frames to connection queues,
//! timers, paths and eligibility into the RIB, session ups and downs as
//! links).

use super::*;

impl Peers {
    /// Hands `input` to the instance and carries out what it says, until
    /// nothing follows (an output may cause an input, e.g. a peer whose
    /// send queue is full is disconnected).
    pub(super) fn feed(&mut self, now: Millis, input: mesh::Input, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        let mut pending = VecDeque::from([input]);
        let mut out = Vec::new();
        while let Some(input) = pending.pop_front() {
            let Ok(m) = &mut self.mesh else { break };
            m.instance.handle(now.0, input, &mut out);
            for o in out.drain(..) {
                self.output(o, now, state, &mut changes, &mut pending);
            }
        }
        changes
    }

    /// `conn`'s send queue refused a frame or notice: the peer is not
    /// reading, and the connection goes.
    fn overflowed(
        &mut self,
        conn: ConnId,
        full: tasks::QueueFull,
        now: Millis,
        pending: &mut VecDeque<mesh::Input>,
    ) {
        self.counters.queue_overflows += 1;
        let error = full.to_string();
        if let Some(c) = self.mesh.as_ref().ok().and_then(|m| m.conns.get(&conn)) {
            debug::queue_full(&c.peer, conn, &error);
        }
        if let Some(peer) = self.drop_conn(conn, now, false) {
            if let Some(d) = self.dialers.get_mut(&peer) {
                d.last_error = Some(error.clone());
            }
        }
        pending.push_back(mesh::Input::Disconnected { conn, error });
    }

    pub(super) fn output(
        &mut self,
        o: Output,
        now: Millis,
        state: &mut State,
        changes: &mut Changes,
        pending: &mut VecDeque<mesh::Input>,
    ) {
        match o {
            Output::Send { conn, msg } => {
                let Ok(m) = &self.mesh else { return };
                let Some(c) = m.conns.get(&conn) else { return };
                let bytes = match frame::encode(&msg, self.settings.max_frame) {
                    Ok(b) => b,
                    Err(e) => {
                        self.counters.frames_too_large += 1;
                        debug::frame_too_large(conn, msg.kind(), &e.to_string());
                        return;
                    }
                };
                if let Err(full) = c.queue.send(bytes, MAX_QUEUE_BYTES) {
                    self.overflowed(conn, full, now, pending);
                }
            }
            Output::NotifyWritten { conn } => {
                let Ok(m) = &self.mesh else { return };
                let Some(c) = m.conns.get(&conn) else { return };
                if let Err(full) = c.queue.notify_written() {
                    self.overflowed(conn, full, now, pending);
                }
            }
            Output::Disconnect { conn } => {
                self.drop_conn(conn, now, true);
            }
            Output::SetTimer { timer, at_ms } => self.timers.set(Key::Arpx(timer), at_ms),
            Output::CancelTimer(timer) => self.timers.cancel(&Key::Arpx(timer)),
            Output::PathUp { peer, ad } => {
                let Some(p) = self.settings.peer(&peer) else {
                    return;
                };
                let result: Result<Changes, String> = routes::peer_path(&ad, p)
                    .and_then(|path| path.into_route().map_err(|e| e.to_string()))
                    .and_then(|route| state.upsert_peer_path(route).map_err(|e| e.to_string()));
                match result {
                    Ok(c) => changes.extend(c),
                    Err(e) => {
                        self.counters.paths_refused += 1;
                        debug::path_refused(&peer, &ad.route_id, &e);
                    }
                }
            }
            Output::PathDown { peer, route_id } => {
                if let Ok(id) = RouteId::new(&route_id).and_then(|base| RouteId::via(&base, &peer))
                {
                    changes.extend(state.remove_peer_path(&id));
                }
            }
            Output::PathsDropped { peer, count, last } => {
                let (at, pending) = self.drop_log.entry(peer.clone()).or_insert((0, 0));
                *pending += count;
                if *at == 0 || now.0.saturating_sub(*at) >= DROP_LOG_MS {
                    debug::paths_dropped(&peer, *pending, &last);
                    *at = now.0.max(1);
                    *pending = 0;
                }
            }
            Output::PeerEligible { peer, up } => {
                if up {
                    self.eligible.insert(peer.clone());
                } else {
                    self.eligible.remove(&peer);
                }
                changes.extend(state.set_peer_up(&peer, up));
            }
            Output::SessionUp { peer, conn } => {
                debug::session_up(&peer, conn);
                if let Ok(m) = &mut self.mesh {
                    if let Some(c) = m.conns.get_mut(&conn) {
                        c.up = true;
                    }
                }
                if let Some(d) = self.dialers.get_mut(&peer) {
                    d.backoff.session_up(now.0);
                    d.last_error = None;
                }
                changes.extend(self.link_up(&peer, conn, state));
            }
            Output::SessionDown {
                peer,
                conn,
                close,
                by_us,
                error,
            } => {
                debug::session_down(&peer, conn, close.as_ref(), by_us, error.as_deref());
                // Before the instance's PeerEligible{up: false}, which
                // follows this output: the data plane stops using the
                // peer no later than the RIB does.
                changes.extend(self.link_down(&peer, conn, state));
            }
        }
    }
}
