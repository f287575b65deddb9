//! The routers the relay roles bring into the driver (DESIGN §7 "Relay
//! (NAT)"); no `peer` section names them.
//!
//! * **Server** (`relay.mode 'server'`): a router behind NAT connects to
//!   our ARPX listener and proves itself by the relay's trust rule (our
//!   domain CA, or a key in `client_key_fingerprint`). It becomes a peer
//!   for as long as it stays connected ([`RelayRole::Client`]): never
//!   dialled, its paths get source `relay` and go on to every peer, and
//!   it is told everything we know (a reflector client). At most
//!   `max_clients` at once; more are refused at their handshake.
//! * **Client** (`relay.mode 'client'`): we dial the relays of
//!   `relay.server` by address, as [`Failover`] says. Each relay that
//!   answers is a peer while connected: the one in use
//!   ([`RelayRole::Server`]) carries our routes; a more preferred one
//!   proving itself ([`RelayRole::Standby`]) carries none yet.
//!
//! A relay role's peer leaves when its last connection ends. That is
//! noticed deep inside the driver's output handling, so it is only noted
//! there ([`RelayState::session_gone`]) and settled after each event
//! ([`Peers::relay_settle`]).

use super::*;
use crate::daemon::relay::failover::{Failover, FailoverConfig, Step};

/// The relay roles' part of the driver.
#[derive(Debug, Default)]
pub(super) struct RelayState {
    /// The routers the relay roles brought, by router id.
    pub peers: BTreeMap<String, PeerSettings>,
    /// Client mode: which relay to use.
    pub failover: Option<Failover>,
    /// Client mode, per relay of `relay.server`: the router its
    /// certificate proved while it is connected.
    pub proved: Vec<Option<String>>,
    /// Relay-role routers whose last connection ended.
    gone: Vec<String>,
    /// Client routers refused (over `max_clients`, or not a relay).
    pub refused: u64,
}

impl RelayState {
    /// `peer`'s last connection ended (from [`Peers::drop_conn`]).
    pub fn session_gone(&mut self, peer: &str) {
        if self.peers.contains_key(peer) && !self.gone.iter().any(|g| g == peer) {
            self.gone.push(peer.to_string());
        }
    }

    fn relay_index(&self, peer: &str) -> Option<usize> {
        self.proved.iter().position(|p| p.as_deref() == Some(peer))
    }

    pub fn clients(&self) -> usize {
        self.peers
            .values()
            .filter(|p| p.relay == RelayRole::Client)
            .count()
    }
}

/// A relay-role router as a peer section would give it (every other
/// option at its schema default), through the same parser as the file.
/// `pin`: the key it was trusted by, when a listed key (not our domain
/// CA) admitted it — as for a configured peer, that makes it a router
/// outside our domain, whose calls carry signed assertions; a router our
/// domain CA certified is held to that rule again, and its calls are
/// authenticated by the link (DESIGN §3).
fn relay_peer(
    router_id: &str,
    address: &str,
    port: u16,
    data_port: Option<u16>,
    pin: Option<&[u8; 32]>,
    role: RelayRole,
) -> Option<PeerSettings> {
    use uci_schema::uci::{Package, Section};
    let mut s = Section::new("peer", None);
    s.set("router_id", router_id);
    s.set("address", address);
    s.set("port", port.to_string());
    if let Some(d) = data_port {
        s.set("data_port", d.to_string());
    }
    if let Some(key) = pin {
        s.set(
            "key_fingerprint",
            router_pki::Fingerprint::of_raw(key).to_string(),
        );
    }
    if role == RelayRole::Client {
        // It has no other way to learn the mesh.
        s.set("reflector_client", "1");
    }
    let pkg = Package {
        name: None,
        sections: vec![s],
    };
    let c = uci_schema::Config::from_package(&pkg, "<relay>").ok()?;
    let mut p = MeshSettings::of_config(&c).peers.into_iter().next()?;
    p.relay = role;
    Some(p)
}

/// The settings `given` plus the relay roles' routers (a router that a
/// `peer` section names is that section's, never a relay role's).
pub(super) fn with_relay_peers(
    given: &MeshSettings,
    peers: &BTreeMap<String, PeerSettings>,
) -> MeshSettings {
    let mut s = given.clone();
    for p in peers.values() {
        if given.peer(&p.router_id).is_none() {
            s.peers.push(p.clone());
        }
    }
    s
}

impl Peers {
    /// Client mode: a fresh relay choice (the mesh starts).
    pub(super) fn relay_start(&mut self, now: Millis) {
        self.relay = RelayState::default();
        let r = &self.settings.relay;
        if !r.is_client() || r.servers.is_empty() {
            return;
        }
        let cfg = FailoverConfig {
            backoff: BackoffConfig {
                initial_ms: r.reconnect_min_ms,
                max_ms: r.reconnect_max_ms,
                stable_ms: BackoffConfig::DEFAULT.stable_ms,
            },
            prefer_hold_ms: r.prefer_hold_ms,
        };
        let seed = wall_ms() ^ u64::from(std::process::id());
        self.relay.failover = Some(Failover::new(r.servers.len(), cfg, seed));
        self.relay.proved = vec![None; r.servers.len()];
        self.timers.set(Key::Relay, now.0);
    }

    /// What the relay roles make of a verified handshake with a router no
    /// `peer` section names: `None` refuses it (the stream is dropped);
    /// otherwise the router is a peer now (the changes of that).
    pub(super) fn relay_handshaken(
        &mut self,
        h: &tasks::Handshake,
        now: Millis,
        state: &mut State,
    ) -> Option<Changes> {
        let r = &self.settings.relay;
        let (role, address, port, data_port) = match h.relay {
            Some(i) => {
                let (host, port) = r.servers.get(i)?.clone();
                if self.given.peer(&h.peer).is_some() {
                    let why = format!(
                        "relay {host}:{port} is router {}, which a peer section names",
                        h.peer
                    );
                    self.relay_dial_failed(i, why, now);
                    return None;
                }
                self.relay.proved[i] = Some(h.peer.clone());
                (RelayRole::Standby, host, port, Some(r.data_port))
            }
            None if h.outbound => return None,
            None => {
                let why = if !r.is_server() {
                    Some("not a configured peer (and this router is no relay)".to_string())
                } else if self.relay.clients() >= r.max_clients {
                    Some(format!(
                        "this relay serves {} client routers, relay.max_clients",
                        r.max_clients
                    ))
                } else {
                    None
                };
                if let Some(why) = why {
                    self.relay.refused += 1;
                    self.counters.inbound_refused += 1;
                    debug::relay_client_refused(&h.peer, h.remote, &why);
                    return None;
                }
                // Never dialled: the address only names it in status, and
                // its data plane is the tunnel it opens to us.
                let ip = h.remote.ip().to_canonical().to_string();
                (RelayRole::Client, ip, h.remote.port(), None)
            }
        };
        let pin = h.pinned.then_some(&h.key);
        let p = relay_peer(&h.peer, &address, port, data_port, pin, role)?;
        self.relay.peers.insert(h.peer.clone(), p);
        if role == RelayRole::Client {
            debug::relay_client_admitted(&h.peer, h.remote, self.relay.clients());
        }
        Some(self.relay_apply(now, state))
    }

    /// Client mode: relay `i`'s session is up.
    pub(super) fn relay_up(&mut self, i: usize, now: Millis, state: &mut State) -> Changes {
        let Some(f) = self.relay.failover.as_mut() else {
            return Changes::new();
        };
        let steps = f.up(i, now.0);
        self.relay_steps(steps);
        self.relay_arm();
        self.relay_apply(now, state)
    }

    /// Client mode: the dial of relay `i` failed.
    pub(super) fn relay_dial_failed(&mut self, i: usize, why: String, now: Millis) {
        let server = self.relay_server(i);
        debug::relay_lost(&server, &why);
        if let Some(f) = self.relay.failover.as_mut() {
            f.lost(i, now.0, &why);
        }
        if let Some(p) = self.relay.proved.get_mut(i) {
            *p = None;
        }
        self.timers.set(Key::Relay, now.0);
    }

    /// Client mode: the relay choice's timer.
    pub(super) fn relay_poll(&mut self, now: Millis, state: &mut State) -> Changes {
        let Some(f) = self.relay.failover.as_mut() else {
            return Changes::new();
        };
        let steps = f.poll(now.0);
        self.relay_steps(steps);
        self.relay_arm();
        self.relay_apply(now, state)
    }

    fn relay_arm(&mut self) {
        match self
            .relay
            .failover
            .as_ref()
            .and_then(Failover::next_deadline)
        {
            Some(at) => self.timers.set(Key::Relay, at),
            None => self.timers.cancel(&Key::Relay),
        }
    }

    fn relay_server(&self, i: usize) -> String {
        self.settings
            .relay
            .servers
            .get(i)
            .map_or_else(|| format!("#{i}"), |(h, p)| format!("{h}:{p}"))
    }

    /// Carries out the relay choice's steps on the relay roles' routers
    /// and the dials; the caller applies the peer set.
    fn relay_steps(&mut self, steps: Vec<Step>) {
        for step in steps {
            match step {
                Step::Dial(i) => {
                    let Ok(m) = &self.mesh else { continue };
                    let Some((host, port)) = self.settings.relay.servers.get(i).cloned() else {
                        continue;
                    };
                    self.counters.dials += 1;
                    self.io.push(PeerIo::Dial {
                        peer: format!("relay {host}:{port}"),
                        relay: Some(i),
                        address: host,
                        port,
                        tls: m.tls.clone(),
                    });
                }
                Step::Use(i) => {
                    let Some(id) = self.relay.proved.get(i).cloned().flatten() else {
                        continue;
                    };
                    for (peer, p) in self.relay.peers.iter_mut() {
                        if p.relay == RelayRole::Server || p.relay == RelayRole::Standby {
                            p.relay = if *peer == id {
                                RelayRole::Server
                            } else {
                                RelayRole::Standby
                            };
                        }
                    }
                    debug::relay_in_use(&id, &self.relay_server(i));
                }
                Step::Close(i) => {
                    let Some(id) = self.relay.proved.get_mut(i).and_then(Option::take) else {
                        continue;
                    };
                    self.relay.peers.remove(&id);
                    // Removing the peer closes its session (peer_removed)
                    // when the set is applied.
                }
            }
        }
    }

    /// Settles what the last event did to the relay roles' routers: those
    /// whose last connection ended leave (a relay we used is lost to the
    /// relay choice), and the peer set is applied.
    pub(super) fn relay_settle(&mut self, now: Millis, state: &mut State) -> Changes {
        if self.relay.gone.is_empty() {
            return Changes::new();
        }
        let gone = std::mem::take(&mut self.relay.gone);
        for peer in gone {
            let connected = self
                .mesh
                .as_ref()
                .is_ok_and(|m| m.conns.values().any(|c| c.peer == peer));
            if connected {
                continue;
            }
            let Some(p) = self.relay.peers.remove(&peer) else {
                continue;
            };
            if p.relay == RelayRole::Client {
                debug::relay_client_gone(&peer);
                continue;
            }
            if let Some(i) = self.relay.relay_index(&peer) {
                let why = self
                    .dialers
                    .get(&peer)
                    .and_then(|d| d.last_error.clone())
                    .unwrap_or_else(|| "its session ended".to_string());
                debug::relay_lost(&self.relay_server(i), &why);
                if let Some(f) = self.relay.failover.as_mut() {
                    f.lost(i, now.0, &why);
                }
                self.relay.proved[i] = None;
                self.timers.set(Key::Relay, now.0);
            }
        }
        self.relay_apply(now, state)
    }

    /// Applies the given settings plus the relay roles' routers, if that
    /// changes the peer set.
    fn relay_apply(&mut self, now: Millis, state: &mut State) -> Changes {
        let new = with_relay_peers(&self.given, &self.relay.peers);
        if new == self.settings {
            return Changes::new();
        }
        state.set_relayed(self.relay.peers.keys().map(|k| k.as_str().into()));
        self.apply_peers(new, now, state)
    }
}

impl Peers {
    /// The relay role for `agentctl status` and `peers`; `None` when off.
    pub fn relay_view(&self, now: Millis) -> Option<crate::ipc::message::RelayView> {
        use crate::daemon::relay::failover::State as Fs;
        use crate::ipc::message::{RelayServerView, RelayView};
        let r = &self.settings.relay;
        let mode = if r.is_server() {
            "server"
        } else if r.is_client() {
            "client"
        } else {
            return None;
        };
        let servers = r
            .servers
            .iter()
            .enumerate()
            .map(|(i, (host, port))| {
                let v = self.relay.failover.as_ref().and_then(|f| f.view(i));
                let (state, since) = match v.as_ref().map(|v| v.state) {
                    Some(Fs::Current(at)) => ("in_use", Some(now.0.saturating_sub(at))),
                    Some(Fs::Standby(at)) => ("standby", Some(now.0.saturating_sub(at))),
                    Some(Fs::Dialing) => ("dialing", None),
                    Some(Fs::Idle) | None => ("idle", None),
                };
                let server = if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                };
                RelayServerView {
                    server: server.into(),
                    router_id: self.relay.proved.get(i).cloned().flatten().map(Into::into),
                    state: state.into(),
                    since_ms: since,
                    retry_in_ms: v
                        .as_ref()
                        .and_then(|v| v.retry_at)
                        .map(|at| at.saturating_sub(now.0)),
                    failures: v.as_ref().map_or(0, |v| u64::from(v.failures)),
                    last_error: v.and_then(|v| v.last_error).map(Into::into),
                }
            })
            .collect();
        Some(RelayView {
            mode: mode.into(),
            servers,
            clients: self
                .relay
                .peers
                .values()
                .filter(|p| p.relay == RelayRole::Client)
                .map(|p| p.router_id.as_str().into())
                .collect(),
            max_clients: r.max_clients as u64,
            refused: self.relay.refused,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given() -> MeshSettings {
        let text = "config agentd 'main'\n\toption router_id 'router-a'\nconfig peer 'b'\n\toption router_id 'router-b'\n\toption address '192.0.2.2'\n";
        MeshSettings::of_config(&uci_schema::Config::from_str_partial(text, "t").config)
    }

    #[test]
    fn a_relay_role_router_is_a_peer_pinned_to_the_key_that_admitted_it_and_never_shadows_a_section(
    ) {
        let key = [7u8; 32];
        let client = relay_peer(
            "router-x",
            "198.51.100.9",
            40000,
            None,
            Some(&key),
            RelayRole::Client,
        )
        .expect("a valid peer");
        assert_eq!(client.relay, RelayRole::Client);
        assert!(
            client.reflector_client,
            "a client learns the mesh through us"
        );
        assert_eq!(
            client.key_fingerprint.as_deref(),
            Some(router_pki::Fingerprint::of_raw(&key).to_string().as_str())
        );
        assert_eq!(client.data_port, 7447, "the schema default");
        let relay = relay_peer(
            "router-r",
            "relay.example",
            7444,
            Some(17447),
            None,
            RelayRole::Standby,
        )
        .expect("a valid peer");
        assert!(!relay.reflector_client);
        assert_eq!(
            relay.key_fingerprint, None,
            "certified by our domain CA: held to its rule, calls unsigned"
        );
        assert_eq!((relay.port, relay.data_port), (7444, 17447));
        // A router id no peer section could hold is no peer at all.
        assert!(relay_peer(
            "bad id",
            "192.0.2.9",
            1,
            None,
            Some(&key),
            RelayRole::Client
        )
        .is_none());

        let mut brought = BTreeMap::new();
        brought.insert("router-x".to_string(), client);
        // A relay role claiming a configured router's name is ignored:
        // the section's rule decides about router-b.
        let mut shadow = relay.clone();
        shadow.router_id = "router-b".into();
        brought.insert("router-b".to_string(), shadow);
        let s = with_relay_peers(&given(), &brought);
        let ids: Vec<_> = s
            .peers
            .iter()
            .map(|p| (p.router_id.as_str(), p.relay))
            .collect();
        assert_eq!(
            ids,
            [
                ("router-b", RelayRole::None),
                ("router-x", RelayRole::Client)
            ]
        );
    }

    #[test]
    fn relay_settings_come_from_the_schema() {
        let text = "config relay 'relay'\n\toption mode 'client'\n\tlist server 'relay.example:7444'\n\tlist server '[2001:db8::1]:7444'\n\toption reconnect_min_ms '500'\n\toption prefer_hold_s '3'\n";
        let c = uci_schema::Config::from_str_partial(text, "t").config;
        let r = MeshSettings::of_config(&c).relay;
        assert!(r.is_client() && !r.is_server());
        assert_eq!(
            r.servers,
            [
                ("relay.example".to_string(), 7444),
                ("2001:db8::1".to_string(), 7444)
            ]
        );
        assert_eq!((r.data_port, r.max_clients), (7447, 64));
        assert_eq!((r.reconnect_min_ms, r.reconnect_max_ms), (500, 30000));
        assert_eq!(r.prefer_hold_ms, 3000);
        assert!(!MeshSettings::default().relay.is_client());
        assert!(!MeshSettings::default().wants_listener());
    }
}
