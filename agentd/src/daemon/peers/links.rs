//! What the driver tells the data plane about its sessions: a link (the
//! key the handshake verified, the peer section's `address` and
//! `data_port`) for every established session, removed when the session
//! closes for any reason. agent-gw connects to, and accepts from, exactly
//! these routers with exactly these keys (DESIGN §8; docs/mesh.md).
//!
//! A link belongs to the connection its session was established on: the
//! end of another connection to the same router (a collision loser, a
//! refused dial) leaves it alone.

use arpx::instance::ConnId;

use super::settings::RelayRole;
use super::{debug, Peers};
use crate::daemon::state::{data_plane_authority, Changes, State};
use crate::fib::{LinkRelay, PeerLink};

impl Peers {
    /// The session with `peer` reached Established on `conn`.
    pub(super) fn link_up(&mut self, peer: &str, conn: ConnId, state: &mut State) -> Changes {
        let Ok(m) = &self.mesh else {
            return Changes::new();
        };
        let Some(key) = m.conns.get(&conn).map(|c| c.key) else {
            return Changes::new();
        };
        self.linked.insert(peer.to_string(), (conn, key));
        self.publish_link(peer, key, state)
    }

    /// The session on `conn` ended: unlink its router if `conn` is the
    /// one its link came from.
    pub(super) fn link_down(&mut self, peer: &str, conn: ConnId, state: &mut State) -> Changes {
        if self.linked.get(peer).is_none_or(|(c, _)| *c != conn) {
            return Changes::new();
        }
        self.linked.remove(peer);
        state.unlink(peer)
    }

    /// Unlinks `peer` whatever its connection (the peer is forgotten).
    pub(super) fn unlink(&mut self, peer: &str, state: &mut State) -> Changes {
        self.linked.remove(peer);
        state.unlink(peer)
    }

    /// Unlinks every router (the mesh stops or restarts).
    pub(super) fn unlink_all(&mut self, state: &mut State) -> Changes {
        let peers: Vec<String> = self.linked.keys().cloned().collect();
        peers.iter().flat_map(|p| self.unlink(p, state)).collect()
    }

    /// Publishes the links again from the running peer settings (after a
    /// reload): a changed data address reaches the data plane even if its
    /// session were not reopened. Unchanged links publish nothing.
    pub(super) fn refresh_links(&mut self, state: &mut State) -> Changes {
        let held: Vec<(String, [u8; 32])> = self
            .linked
            .iter()
            .map(|(p, (_, k))| (p.clone(), *k))
            .collect();
        held.iter()
            .flat_map(|(peer, key)| self.publish_link(peer, *key, state))
            .collect()
    }

    fn publish_link(&mut self, peer: &str, key: [u8; 32], state: &mut State) -> Changes {
        let Some(p) = self.settings.peer(peer) else {
            return Changes::new();
        };
        let data = match data_plane_authority(&p.address, p.data_port) {
            Ok(d) => d,
            Err(e) => {
                self.counters.links_invalid += 1;
                debug::link_invalid(peer, &e.to_string());
                return Changes::new();
            }
        };
        state.set_link(PeerLink {
            router_id: peer.into(),
            key,
            data: data.into(),
            signed: p.key_fingerprint.is_some() || p.sign_calls,
            relay: match p.relay {
                RelayRole::Client => LinkRelay::Client,
                RelayRole::Server => LinkRelay::Server,
                RelayRole::None | RelayRole::Standby => LinkRelay::Direct,
            },
        })
    }
}
