//! Start, reload and stop of the ARPX driver: the mesh instance on the
//! identity read with the configuration, the listener, the dialers, and
//! what a changed peer set or identity means for the sessions up.

use super::*;

impl Peers {
    /// Creates the instance on the identity read last, offers it our routes and
    /// the peer set, starts the listener and the dialers. Sessions stay
    /// off (with the reason in `agentctl peers`) when there is no
    /// router_id or the identity cannot be loaded.
    pub fn start(&mut self, now: Millis, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        // A new mesh starts with no relay-role routers (their sessions
        // are gone with the old one).
        self.settings = self.given.clone();
        state.set_relayed([]);
        self.dialers = self
            .settings
            .peers
            .iter()
            .map(|p| {
                (
                    p.router_id.clone(),
                    Dialer {
                        settings: p.clone(),
                        backoff: Backoff::new(BackoffConfig::DEFAULT),
                        state: DialState::Waiting,
                        last_error: None,
                    },
                )
            })
            .collect();
        // A peer's paths are ineligible until its snapshot completes.
        for p in &self.settings.peers {
            changes.extend(state.set_peer_up(&p.router_id, false));
        }
        self.eligible.clear();
        self.mesh = self.build_mesh();
        match &self.mesh {
            Err(reason) => {
                debug::mesh_off(reason);
                return changes;
            }
            Ok(m) => debug::mesh_started(&self.settings, &m.fingerprint),
        }
        let peers: Vec<PeerConfig> = self.settings.peers.iter().map(peer_config).collect();
        changes.extend(self.feed(now, mesh::Input::ConfigurePeers(peers), state));
        let exports: Vec<routes::Export> = state
            .exportable_routes()
            .filter_map(|r| routes::export(r, now))
            .collect();
        for e in exports {
            if let routes::Export::Upsert(l) = e {
                changes.extend(self.feed(now, mesh::Input::UpsertLocal(*l), state));
            }
        }
        self.start_listener();
        self.relay_start(now);
        let ids: Vec<String> = self.dialers.keys().cloned().collect();
        for id in ids {
            // Spread the first dials of a router that restarts with many
            // peers over the first backoff step.
            let at = now.0 + self.rng.below_inclusive(BackoffConfig::DEFAULT.initial_ms);
            self.timers.set(Key::Dial(id), at);
        }
        changes
    }

    pub(super) fn build_mesh(&mut self) -> Result<Mesh, String> {
        self.meshes += 1;
        let generation = self.meshes;
        let s = &self.settings;
        let router_id = s.router_id.as_deref().ok_or_else(|| {
            "agentd.router_id is not set (a mesh needs a stable router identity)".to_string()
        })?;
        let identity = self.identity.clone()?;
        if identity.identity.router_id() != router_id {
            // Read for another configuration: only a config read (which
            // reads both) can tell which is meant.
            return Err(format!(
                "identity read for router_id {:?}, configured {router_id:?}: reload",
                identity.identity.router_id()
            ));
        }
        let fingerprint = identity.fingerprint();
        let tls = Arc::new(identity.context(&s.peers, &s.relay, generation)?);
        let (tls_tx, _) = watch::channel(tls.clone());
        let instance = mesh::Instance::new(mesh::InstanceConfig {
            router_id: router_id.to_string(),
            domain: s.domain.clone(),
            boot_epoch: wall_ms(),
            key: identity.identity.signing_key().clone(),
            heartbeat_ms: s.heartbeat_ms,
            miss_limit: s.miss_limit,
            graceful_ms: s.graceful_ms,
            reflector: s.reflector,
            max_path: s.max_path,
            max_frame: s.max_frame,
            max_routes_per_origin: s.max_routes_per_origin,
            origin_ca: identity.origin_ca(),
            cert: identity.attached_cert(),
        });
        Ok(Mesh {
            generation,
            instance,
            identity,
            fingerprint,
            tls,
            tls_tx,
            conns: HashMap::new(),
            listener: None,
            listen_error: None,
        })
    }

    pub(super) fn start_listener(&mut self) {
        let Ok(m) = &mut self.mesh else { return };
        if m.listener.take().is_some() {
            self.io.push(PeerIo::StopListening);
        }
        m.listen_error = None;
        let Some(listen) = &self.settings.listen else {
            return;
        };
        if !self.settings.wants_listener() {
            // Every inbound session must be a configured peer (or, at a
            // relay, a client router): with none, a listening socket
            // could only refuse.
            m.listen_error = Some("not listening: no peer configured".into());
            return;
        }
        let addr: SocketAddr = match listen.parse() {
            Ok(a) => a,
            Err(e) => {
                m.listen_error = Some(format!("{listen}: {e}"));
                return;
            }
        };
        self.listen_serial += 1;
        m.listener = Some((self.listen_serial, None));
        self.io.push(PeerIo::Listen {
            serial: self.listen_serial,
            addr,
            tls: m.tls_tx.subscribe(),
        });
    }

    /// What became of the listener numbered `serial`.
    pub(super) fn listening(&mut self, serial: u64, bound: Result<SocketAddr, String>) {
        let Ok(m) = &mut self.mesh else { return };
        if m.listener.is_none_or(|(s, _)| s != serial) {
            return;
        }
        match bound {
            Ok(local) => {
                debug::listening(local);
                m.listener = Some((serial, Some(local)));
            }
            Err(e) => {
                debug::listen_failed(self.settings.listen.as_deref().unwrap_or(""), &e);
                m.listener = None;
                m.listen_error = Some(e);
            }
        }
    }

    /// A reload. A change of the router's own settings (router_id,
    /// identity, timers, limits) restarts the mesh; otherwise the
    /// instance gets the new peer set: removed peers are closed with
    /// `peer_removed` and their paths go, peers whose address, ports or
    /// pin changed are closed and dialled again, the others are untouched.
    /// `identity`: the identity files as just read with the configuration
    /// (`None`: not a config read, e.g. discovery admitted a peer).
    pub fn reconfigure(
        &mut self,
        new: MeshSettings,
        identity: Option<Result<Identity, String>>,
        now: Millis,
        state: &mut State,
    ) -> Changes {
        // Sessions that are off (no router_id, a bad key or certificate
        // file) are tried again on every reload: the operator may have
        // fixed the file.
        let key_changed = identity.is_some_and(|read| self.reload_identity(read));
        let restart =
            new.instance_key() != self.settings.instance_key() || self.mesh.is_err() || key_changed;
        self.given = new;
        if restart {
            let mut changes = self.stop(now, state);
            changes.extend(self.start(now, state));
            return changes;
        }
        let new = relay::with_relay_peers(&self.given, &self.relay.peers);
        if new == self.settings {
            // A renewed certificate or CA file still applies to new
            // handshakes.
            self.rebuild_tls();
            return Changes::new();
        }
        self.apply_peers(new, now, state)
    }

    /// A new peer set on the running mesh: removed peers are closed with
    /// `peer_removed` and their paths go, peers whose address, ports or
    /// pin changed are closed and dialled again, the others keep their
    /// sessions (a changed export rule or relay role is applied in place).
    pub(super) fn apply_peers(
        &mut self,
        new: MeshSettings,
        now: Millis,
        state: &mut State,
    ) -> Changes {
        let old = std::mem::replace(&mut self.settings, new);
        let mut changes = Changes::new();
        let changed: Vec<String> = old
            .peers
            .iter()
            .filter(|p| {
                self.settings
                    .peer(&p.router_id)
                    .is_none_or(|n| n.transport_key() != p.transport_key())
            })
            .map(|p| p.router_id.clone())
            .collect();
        // First without the removed and changed peers: the instance
        // closes their sessions (peer_removed) and drops their paths.
        let kept: Vec<PeerConfig> = self
            .settings
            .peers
            .iter()
            .filter(|p| !changed.contains(&p.router_id))
            .map(peer_config)
            .collect();
        changes.extend(self.feed(now, mesh::Input::ConfigurePeers(kept), state));
        for id in &changed {
            changes.extend(self.forget_peer(id, state));
        }
        // The trust rule and client configs of the new set.
        self.rebuild_tls();
        let all: Vec<PeerConfig> = self.settings.peers.iter().map(peer_config).collect();
        changes.extend(self.feed(now, mesh::Input::ConfigurePeers(all), state));
        // Dialers: gone ones stop, new and changed ones start.
        let peers = self.settings.peers.clone();
        for p in &peers {
            let fresh = changed.contains(&p.router_id) || !self.dialers.contains_key(&p.router_id);
            if fresh {
                changes.extend(state.set_peer_up(&p.router_id, false));
                self.dialers.insert(
                    p.router_id.clone(),
                    Dialer {
                        settings: p.clone(),
                        backoff: Backoff::new(BackoffConfig::DEFAULT),
                        state: DialState::Waiting,
                        last_error: None,
                    },
                );
                self.timers.set(Key::Dial(p.router_id.clone()), now.0);
            } else if let Some(d) = self.dialers.get_mut(&p.router_id) {
                d.settings = p.clone();
            }
        }
        if old.listen != self.settings.listen
            || old.wants_listener() != self.settings.wants_listener()
        {
            self.start_listener();
        }
        changes.extend(self.refresh_links(state));
        debug::peers_reconfigured(self.settings.peers.len(), changed.len());
        changes
    }

    /// Takes the identity key, certificate and domain CA files as just
    /// read. Returns whether the mesh must restart (the key itself
    /// changed: it signs our routes); a renewed certificate or CA applies
    /// to the running mesh's next handshakes. A file that could not be
    /// read keeps the running identity (and says so); a mesh (re)start
    /// then fails on it.
    pub(super) fn reload_identity(&mut self, read: Result<Identity, String>) -> bool {
        self.identity = read.clone();
        let Ok(m) = &mut self.mesh else {
            return true;
        };
        match read {
            Ok(id) if id.identity.verifying_key() != m.identity.identity.verifying_key() => true,
            Ok(id) => {
                m.identity = id;
                false
            }
            Err(e) => {
                debug::identity_reload_failed(&e);
                false
            }
        }
    }

    /// New TLS configs from the running identity and peer set, for the
    /// listener and the next dials (sessions up stay as they are).
    pub(super) fn rebuild_tls(&mut self) {
        if let Ok(m) = &mut self.mesh {
            match m
                .identity
                .context(&self.settings.peers, &self.settings.relay, m.generation)
            {
                Ok(ctx) => {
                    m.tls = Arc::new(ctx);
                    m.tls_tx.send_replace(m.tls.clone());
                }
                Err(e) => debug::tls_rebuild_failed(&e),
            }
        }
    }

    /// Drops everything of a peer that is gone or reconnects: its dialer,
    /// dial timer and paths.
    pub(super) fn forget_peer(&mut self, id: &str, state: &mut State) -> Changes {
        if let Some(d) = self.dialers.remove(id) {
            if matches!(d.state, DialState::Dialing) {
                self.io.push(PeerIo::StopDial {
                    peer: id.to_string(),
                });
            }
        }
        self.timers.cancel(&Key::Dial(id.to_string()));
        self.eligible.remove(id);
        // Its session ended already (SessionDown unlinked it); this only
        // catches what the instance did not report.
        let mut changes = self.unlink(id, state);
        // The instance removed the paths of a removed peer already (it
        // sent PathDown); this only catches what it did not know of.
        changes.extend(state.remove_paths_via(id));
        changes
    }

    /// Closes every session (admin_shutdown), stops the listener and the
    /// dialers, and removes every peer path.
    pub fn stop(&mut self, now: Millis, state: &mut State) -> Changes {
        let mut changes = Changes::new();
        if self.mesh.is_ok() {
            changes.extend(self.feed(now, mesh::Input::Shutdown, state));
        }
        // Every session is over, whatever the instance reported.
        changes.extend(self.unlink_all(state));
        if let Ok(m) = &mut self.mesh {
            if m.listener.take().is_some() {
                self.io.push(PeerIo::StopListening);
            }
            for (conn, c) in m.conns.drain() {
                self.inbox.forget(conn);
                self.io.push(close_conn(conn, &c.queue));
            }
        }
        let ids: Vec<String> = self.dialers.keys().cloned().collect();
        for id in ids {
            changes.extend(self.forget_peer(&id, state));
        }
        self.timers = timers::Timers::new();
        self.mesh = Err("stopped".into());
        changes
    }
}
