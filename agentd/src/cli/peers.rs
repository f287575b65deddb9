//! `agentctl peers` (and ubus `peers`): the ARPX sessions as a table for
//! people and stable JSON for scripts, built from the same view so both
//! always agree. Field names are spelled out here (not derived), so an
//! internal rename never changes what ubus clients parse.

use serde_json::{json, Value};

use super::table::Table;
use crate::ipc::message::{
    CloseView, PeerView, PeersView, RelayServerView, RelayView, RELAY_SEES_PAYLOADS,
};

fn close_json(c: &CloseView) -> Value {
    json!({ "code": &*c.code, "reason": &*c.reason, "by_us": c.by_us })
}

fn peer_json(p: &PeerView) -> Value {
    json!({
        "router_id": &*p.router_id,
        "address": &*p.address,
        "port": p.port,
        "state": &*p.state,
        "established": p.established,
        "state_ms": p.state_ms,
        "uptime_s": p.established.then_some(p.state_ms / 1000),
        "routes_in": p.routes_in,
        "routes_out": p.routes_out,
        "last_error": p.last_error.as_deref(),
        "last_close": p.last_close.as_ref().map(close_json),
        "next_dial_ms": p.next_dial_ms,
        "dial_failures": p.dial_failures,
        "dropped_routes": p.dropped_routes,
        "last_drop": p.last_drop.as_deref(),
    })
}

fn relay_server_json(s: &RelayServerView) -> Value {
    json!({
        "server": &*s.server,
        "router_id": s.router_id.as_deref(),
        "state": &*s.state,
        "since_ms": s.since_ms,
        "retry_in_ms": s.retry_in_ms,
        "failures": s.failures,
        "last_error": s.last_error.as_deref(),
    })
}

/// The relay role (`agentctl status`, `peers`, ubus): which relay is in
/// use and since when, each relay's last error, or (a relay) its client
/// routers; and that the relay sees payloads.
pub fn relay_json(r: &RelayView) -> Value {
    json!({
        "mode": &*r.mode,
        "servers": r.servers.iter().map(relay_server_json).collect::<Vec<_>>(),
        "in_use": r.servers.iter().find(|s| &*s.state == "in_use").map(|s| &*s.server),
        "clients": r.clients.iter().map(|c| &**c).collect::<Vec<_>>(),
        "max_clients": r.max_clients,
        "refused": r.refused,
        "payloads": RELAY_SEES_PAYLOADS,
    })
}

/// The relay role as `FIELD VALUE` rows.
pub fn relay_rows(r: &RelayView) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    if &*r.mode == "server" {
        rows.push((
            "relay".to_string(),
            format!(
                "server: {} of {} client router(s){}",
                r.clients.len(),
                r.max_clients,
                if r.clients.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", r.clients.join(", "))
                }
            ),
        ));
        if r.refused > 0 {
            rows.push(("relay_refused".into(), r.refused.to_string()));
        }
    } else {
        let in_use = r.servers.iter().find(|s| &*s.state == "in_use");
        rows.push((
            "relay".to_string(),
            match in_use {
                Some(s) => format!(
                    "client: using {} ({}) for {}",
                    s.server,
                    s.router_id.as_deref().unwrap_or("?"),
                    duration(s.since_ms.unwrap_or(0))
                ),
                None => "client: NO RELAY (this router is unreachable from the mesh)".into(),
            },
        ));
        for s in &r.servers {
            let mut line = format!("{} {}", s.server, s.state);
            if let Some(ms) = s.retry_in_ms {
                line.push_str(&format!(" (retry in {})", duration(ms)));
            }
            if let Some(e) = &s.last_error {
                line.push_str(&format!("; last error: {e}"));
            }
            rows.push(("  relay_server".into(), line));
        }
    }
    rows.push(("relay_payloads".into(), RELAY_SEES_PAYLOADS.into()));
    rows
}

pub fn peers_json(v: &PeersView) -> Value {
    json!({
        "router_id": v.router_id.as_deref(),
        "sessions": if v.off_reason.is_none() { "on" } else { "off" },
        "off_reason": v.off_reason.as_deref(),
        "fingerprint": v.fingerprint.as_deref(),
        "listen": v.listen.as_deref(),
        "listen_error": v.listen_error.as_deref(),
        "peers": v.peers.iter().map(peer_json).collect::<Vec<_>>(),
        "relay": v.relay.as_deref().map(relay_json),
    })
}

/// `1h02m`, `3m07s`, `12s`, `450ms`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn close_text(c: &CloseView) -> String {
    let who = if c.by_us { "by us" } else { "by peer" };
    if c.reason.is_empty() {
        format!("{} ({who})", c.code)
    } else {
        format!("{} ({who}): {}", c.code, c.reason)
    }
}

fn host_port(address: &str, port: u16) -> String {
    if address.contains(':') {
        format!("[{address}]:{port}")
    } else {
        format!("{address}:{port}")
    }
}

pub fn peers_text(v: &PeersView) -> String {
    let mut head = Table::new(&["FIELD", "VALUE"]);
    let dash = |s: Option<&str>| s.unwrap_or("-").to_string();
    head.row(vec!["router_id".into(), dash(v.router_id.as_deref())]);
    head.row(vec![
        "sessions".into(),
        match &v.off_reason {
            None => "on".into(),
            Some(r) => format!("OFF: {r}"),
        },
    ]);
    head.row(vec!["fingerprint".into(), dash(v.fingerprint.as_deref())]);
    head.row(vec![
        "listen".into(),
        match (&v.listen, &v.listen_error) {
            (None, _) => "off (no inbound sessions)".into(),
            (Some(l), None) => l.to_string(),
            (Some(l), Some(e)) => format!("{l} NOT LISTENING: {e}"),
        },
    ]);
    for (k, val) in v.relay.as_deref().into_iter().flat_map(relay_rows) {
        head.row(vec![k, val]);
    }
    let mut out = head.render();
    out.push('\n');
    if v.peers.is_empty() {
        out.push_str("no peers configured\n");
        return out;
    }
    let mut t = Table::new(&[
        "PEER",
        "ADDRESS",
        "STATE",
        "UPTIME",
        "IN",
        "OUT",
        "DROPPED",
        "LAST ERROR",
        "LAST CLOSE",
    ])
    .right(4)
    .right(5)
    .right(6);
    for p in &v.peers {
        let state = match p.next_dial_ms {
            Some(ms) if !p.established => format!("{} (retry in {})", p.state, duration(ms)),
            _ => p.state.to_string(),
        };
        t.row(vec![
            p.router_id.to_string(),
            host_port(&p.address, p.port),
            state,
            if p.established {
                duration(p.state_ms)
            } else {
                "-".into()
            },
            p.routes_in.to_string(),
            p.routes_out.to_string(),
            p.dropped_routes.to_string(),
            dash(p.last_error.as_deref()),
            p.last_close.as_ref().map_or("-".into(), close_text),
        ]);
    }
    out.push_str(&t.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> PeersView {
        PeersView {
            router_id: Some("router-a".into()),
            off_reason: None,
            fingerprint: Some("sha256:ab".into()),
            listen: Some("[::]:7444".into()),
            listen_error: None,
            relay: None,
            peers: vec![
                PeerView {
                    router_id: "router-b".into(),
                    address: "192.0.2.2".into(),
                    port: 7444,
                    state: "established".into(),
                    state_ms: 62_000,
                    established: true,
                    routes_in: 3,
                    routes_out: 1,
                    last_error: None,
                    last_close: Some(CloseView {
                        code: "hold_expired".into(),
                        reason: String::new().into(),
                        by_us: true,
                    }),
                    next_dial_ms: None,
                    dial_failures: 0,
                    dropped_routes: 7,
                    last_drop: Some("route m9: 10000 paths from router router-b".into()),
                },
                PeerView {
                    router_id: "router-c".into(),
                    address: "2001:db8::3".into(),
                    port: 7444,
                    state: "idle".into(),
                    state_ms: 500,
                    established: false,
                    last_error: Some("handshake: key not pinned".into()),
                    next_dial_ms: Some(4_000),
                    dial_failures: 4,
                    ..PeerView::default()
                },
            ],
        }
    }

    #[test]
    fn table_shows_state_uptime_routes_errors_and_closes() {
        let t = peers_text(&view());
        assert!(t.contains("sessions     on"), "{t}");
        let b = t.lines().find(|l| l.starts_with("router-b")).unwrap();
        assert!(b.contains("192.0.2.2:7444"), "{b}");
        assert!(b.contains("established"), "{b}");
        assert!(b.contains("1m02s"), "{b}");
        assert!(b.contains("hold_expired (by us)"), "{b}");
        assert!(b.split_whitespace().any(|w| w == "7"), "dropped: {b}");
        let c = t.lines().find(|l| l.starts_with("router-c")).unwrap();
        assert!(c.contains("[2001:db8::3]:7444"), "{c}");
        assert!(c.contains("idle (retry in 4s)"), "{c}");
        assert!(c.contains("handshake: key not pinned"), "{c}");
    }

    #[test]
    fn json_names_every_field_and_off_is_explicit() {
        let j = peers_json(&view());
        assert_eq!(j["sessions"], "on");
        assert_eq!(j["peers"][0]["uptime_s"], 62);
        assert_eq!(j["peers"][0]["last_close"]["code"], "hold_expired");
        assert_eq!(j["peers"][1]["uptime_s"], Value::Null);
        assert_eq!(j["peers"][1]["last_error"], "handshake: key not pinned");
        assert_eq!(j["peers"][1]["dial_failures"], 4);
        assert_eq!(j["peers"][0]["dropped_routes"], 7);
        assert!(j["peers"][0]["last_drop"]
            .as_str()
            .is_some_and(|w| w.contains("m9")));
        let off = PeersView {
            router_id: None,
            off_reason: Some("agentd.router_id is not set".into()),
            ..PeersView::default()
        };
        let j = peers_json(&off);
        assert_eq!(j["sessions"], "off");
        assert_eq!(j["off_reason"], "agentd.router_id is not set");
        let t = peers_text(&off);
        assert!(t.contains("OFF: agentd.router_id is not set"), "{t}");
        assert!(t.contains("no peers configured"), "{t}");
    }

    #[test]
    fn durations_are_compact() {
        assert_eq!(duration(450), "450ms");
        assert_eq!(duration(12_300), "12s");
        assert_eq!(duration(187_000), "3m07s");
        assert_eq!(duration(3_720_000), "1h02m");
    }
}
