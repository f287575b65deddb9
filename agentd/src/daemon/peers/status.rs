//! What the driver shows: `agentctl peers` (the instance's session
//! state joined with the driver's dial state and handshake errors) and
//! the `arpx.*` counters of `agentctl stats`.

use std::collections::HashMap;

use arpx::instance as mesh;

use super::{DialState, Key, Peers};
use crate::ipc::message::{CloseView, PeerView, PeersView};
use crate::time::Millis;

/// Longest error text in a peer's row: the whole view of a few hundred
/// peers stays within one IPC frame.
const MAX_ERROR_TEXT: usize = 320;

/// `text` cut to at most `max` bytes at a char boundary (with `…`).
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The states a configured peer's row can show, in session order.
pub const SESSION_STATES: [&str; 5] =
    ["idle", "connecting", "open_sent", "snapshot", "established"];

/// A configured peer's state as `agentctl peers` shows it: the session's,
/// or `connecting` while a dial is out and no session is past idle.
fn shown_state(session: Option<mesh::PeerState>, dial: Option<&super::Dialer>) -> &'static str {
    let dialing = dial.is_some_and(|d| matches!(d.state, DialState::Dialing));
    match session {
        Some(mesh::PeerState::Idle) | None if dialing => "connecting",
        Some(st) => st.as_str(),
        None => "idle",
    }
}

impl Peers {
    /// `agentctl peers`.
    pub fn view(&self, now: Millis) -> PeersView {
        let (status, fingerprint, listen_error) = match &self.mesh {
            Ok(m) => (
                m.instance
                    .peers(now.0)
                    .into_iter()
                    .map(|s| (s.router_id.clone(), s))
                    .collect::<HashMap<_, _>>(),
                Some(m.fingerprint.as_str().into()),
                m.listen_error.as_deref().map(Into::into),
            ),
            Err(_) => (HashMap::new(), None, None),
        };
        let peers = self
            .settings
            .peers
            .iter()
            .map(|p| {
                let s = status.get(&p.router_id);
                let d = self.dialers.get(&p.router_id);
                let state = shown_state(s.map(|s| s.state), d);
                let established = s.is_some_and(|s| s.state == mesh::PeerState::Established);
                PeerView {
                    router_id: p.router_id.as_str().into(),
                    address: p.address.as_str().into(),
                    port: p.port,
                    state: state.into(),
                    state_ms: s.map_or(0, |s| now.0.saturating_sub(s.since_ms)),
                    established,
                    routes_in: s.map_or(0, |s| s.routes_in as u64),
                    routes_out: s.map_or(0, |s| s.routes_out as u64),
                    last_error: d
                        .and_then(|d| d.last_error.as_deref())
                        .or_else(|| s.and_then(|s| s.last_error.as_deref()))
                        .map(|e| cut(e, MAX_ERROR_TEXT).into()),
                    last_close: s
                        .and_then(|s| s.last_close.as_ref())
                        .map(|(c, by_us)| CloseView {
                            code: c.code.as_str().into(),
                            reason: c.reason.as_str().into(),
                            by_us: *by_us,
                        }),
                    next_dial_ms: self
                        .timers
                        .deadline(&Key::Dial(p.router_id.clone()))
                        .map(|at| at.saturating_sub(now.0)),
                    dial_failures: d.map_or(0, |d| d.backoff.failures()),
                    dropped_routes: s.map_or(0, |s| s.dropped_routes),
                    last_drop: s
                        .and_then(|s| s.last_drop.as_deref())
                        .map(|e| cut(e, MAX_ERROR_TEXT).into()),
                }
            })
            .collect();
        PeersView {
            router_id: self.settings.router_id.as_deref().map(Into::into),
            off_reason: self.mesh.as_ref().err().map(|e| e.as_str().into()),
            fingerprint,
            listen: match &self.mesh {
                Ok(m) => m
                    .listener
                    .and_then(|(_, a)| a)
                    .map(|a| a.to_string().into())
                    .or_else(|| self.settings.listen.as_deref().map(Into::into)),
                Err(_) => self.settings.listen.as_deref().map(Into::into),
            },
            listen_error,
            peers,
            relay: self.relay_view(now).map(Box::new),
        }
    }

    /// ARPX counters for `agentctl stats` (`arpx.*`).
    pub fn counters(&self) -> Vec<(String, u64)> {
        let d = &self.counters;
        let mut v: Vec<(String, u64)> = vec![
            ("arpx.peers".into(), self.settings.peers.len() as u64),
            ("arpx.peers_eligible".into(), self.eligible.len() as u64),
            ("arpx.dials".into(), d.dials),
            ("arpx.dial_failures".into(), d.dial_failures),
            ("arpx.inbound_refused".into(), d.inbound_refused),
            ("arpx.send_queue_overflows".into(), d.queue_overflows),
            ("arpx.frames_too_large".into(), d.frames_too_large),
            ("arpx.paths_refused_by_rib".into(), d.paths_refused),
            ("arpx.links".into(), self.linked.len() as u64),
            ("arpx.links_invalid".into(), d.links_invalid),
        ];
        // Configured peers by the state `agentctl peers` shows (all
        // states, zeros too: the metric series stay put).
        let sessions: HashMap<_, _> = match &self.mesh {
            Ok(m) => m
                .instance
                .peers(0)
                .into_iter()
                .map(|s| (s.router_id.clone(), s.state))
                .collect(),
            Err(_) => HashMap::new(),
        };
        let mut by_state = [0u64; SESSION_STATES.len()];
        for p in &self.settings.peers {
            let st = shown_state(
                sessions.get(&p.router_id).copied(),
                self.dialers.get(&p.router_id),
            );
            if let Some(i) = SESSION_STATES.iter().position(|s| *s == st) {
                by_state[i] += 1;
            }
        }
        for (st, n) in SESSION_STATES.iter().zip(by_state) {
            v.push((format!("arpx.sessions.{st}"), n));
        }
        if let Ok(m) = &self.mesh {
            let up = m
                .instance
                .peers(0)
                .iter()
                .filter(|s| s.state == mesh::PeerState::Established)
                .count();
            let c = m.instance.counters();
            v.extend([
                ("arpx.sessions_up".into(), up as u64),
                ("arpx.sessions_established".into(), c.sessions_established),
                ("arpx.updates_in".into(), c.updates_in),
                ("arpx.updates_out".into(), c.updates_out),
                ("arpx.routes_in".into(), c.routes_in),
                ("arpx.routes_out".into(), c.routes_out),
                ("arpx.withdraws_in".into(), c.withdraws_in),
                ("arpx.withdraws_out".into(), c.withdraws_out),
                ("arpx.withdrawn_in".into(), c.withdrawn_in),
                ("arpx.withdrawn_out".into(), c.withdrawn_out),
                ("arpx.rejected.loop".into(), c.rejected_loop),
                (
                    "arpx.rejected.path_too_long".into(),
                    c.rejected_path_too_long,
                ),
                (
                    "arpx.rejected.bad_signature".into(),
                    c.rejected_bad_signature,
                ),
                (
                    "arpx.rejected.origin_conflict".into(),
                    c.rejected_origin_conflict,
                ),
                ("arpx.rejected.route_limit".into(), c.rejected_route_limit),
                ("arpx.rejected.origin_key".into(), c.rejected_origin_key),
                ("arpx.rejected.origin_cert".into(), c.rejected_origin_cert),
                ("arpx.evicted_fair_share".into(), c.evicted_fair_share),
                ("arpx.ignored_stale".into(), c.ignored_stale),
                ("arpx.export_refused".into(), c.export_refused),
            ]);
            for (code, n) in &c.closes_sent {
                v.push((format!("arpx.closes_sent.{code}"), *n));
            }
            for (code, n) in &c.closes_received {
                v.push((format!("arpx.closes_received.{code}"), *n));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_error_texts_are_cut_at_a_char_boundary() {
        assert_eq!(super::cut("short", 10), "short");
        assert_eq!(super::cut("ééé", 3), "é…");
        assert_eq!(
            super::cut(&"x".repeat(400), 320).len(),
            320 + '…'.len_utf8()
        );
    }
}
