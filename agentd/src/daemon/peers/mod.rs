//! agentd's ARPX driver: the mesh sessions with other routers.
//!
//! The daemon's single event loop owns one [`Peers`]. It holds the
//! sans-IO mesh instance (`arpx::instance`), feeds it inputs (frames
//! from connection tasks, timer expiries, local route changes, the peer
//! set) and maps its outputs onto sockets, timers and the RIB.
//!
//! * [`settings`] — what the driver runs on, from the configuration.
//! * [`backoff`] — when to dial a peer again (sans-IO).
//! * [`timers`] — deadlines by key; the earliest is the loop's one sleep.
//! * [`debug`] — log text.

pub mod backoff;
pub mod debug;
pub mod settings;
pub mod timers;

use std::collections::BTreeMap;

use crate::ipc::message::{PeerView, PeersView};
use crate::time::Millis;
use backoff::{Backoff, BackoffConfig};
use settings::MeshSettings;

/// Driver state of one configured peer (the session itself is the
/// instance's).
#[derive(Debug)]
struct PeerRow {
    address: String,
    port: u16,
    backoff: Backoff,
    last_error: Option<String>,
}

/// The ARPX driver.
#[derive(Debug)]
pub struct Peers {
    settings: MeshSettings,
    /// Why no session runs.
    off_reason: Option<String>,
    rows: BTreeMap<String, PeerRow>,
}

impl Peers {
    pub fn new(settings: MeshSettings) -> Peers {
        let off_reason = Some(match &settings.router_id {
            None => "agentd.router_id is not set (a mesh needs a stable router identity)".into(),
            Some(_) => "this agentd build has no ARPX session support yet".to_string(),
        });
        if let Some(r) = &off_reason {
            debug::mesh_off(r);
        }
        debug::peers_configured(settings.peers.len());
        let rows = settings
            .peers
            .iter()
            .map(|p| {
                (
                    p.router_id.clone(),
                    PeerRow {
                        address: p.address.clone(),
                        port: p.port,
                        backoff: Backoff::new(BackoffConfig::DEFAULT),
                        last_error: None,
                    },
                )
            })
            .collect();
        Peers {
            settings,
            off_reason,
            rows,
        }
    }

    /// A reload: the new peer set.
    pub fn reconfigure(&mut self, settings: MeshSettings) {
        if settings != self.settings {
            *self = Peers::new(settings);
        }
    }

    /// `agentctl peers`.
    pub fn view(&self, _now: Millis) -> PeersView {
        PeersView {
            router_id: self.settings.router_id.as_deref().map(Into::into),
            off_reason: self.off_reason.as_deref().map(Into::into),
            fingerprint: None,
            listen: self.settings.listen.as_deref().map(Into::into),
            listen_error: None,
            peers: self
                .rows
                .iter()
                .map(|(id, r)| PeerView {
                    router_id: id.as_str().into(),
                    address: r.address.as_str().into(),
                    port: r.port,
                    state: "idle".into(),
                    last_error: r.last_error.as_deref().map(Into::into),
                    dial_failures: r.backoff.failures(),
                    ..PeerView::default()
                })
                .collect(),
        }
    }

    /// ARPX counters for `agentctl stats` (`arpx.*`).
    pub fn counters(&self) -> Vec<(String, u64)> {
        vec![
            ("arpx.peers".into(), self.rows.len() as u64),
            ("arpx.sessions_up".into(), 0),
        ]
    }
}
