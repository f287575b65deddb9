//! Every log line of the ARPX driver, in one place (holo's `debug.rs`):
//! the wording operators grep for stays consistent, and the driver code
//! stays free of formatting.

use std::net::SocketAddr;

use arpx::frame::FrameError;
use arpx::instance::ConnId;
use arpx::message::Close;

use super::settings::MeshSettings;
use crate::{log_debug, log_info, log_notice, log_warn};

/// Paths of `peer` refused or given up while its session stays (route
/// limits, contradicted origin keys): `count` since the last such line.
pub fn paths_dropped(peer: &str, count: u64, last: &str) {
    log_warn!("ARPX: dropped {count} path(s) from {peer}, session kept; last: {last}");
}

pub fn mesh_off(reason: &str) {
    log_warn!("ARPX sessions off: {reason}");
}

pub fn mesh_started(s: &MeshSettings, fingerprint: &str) {
    log_notice!(
        "ARPX: router {} identity {} ({}), {} peer(s)",
        s.router_id.as_deref().unwrap_or("?"),
        fingerprint,
        if s.router_cert.is_some() {
            "router certificate"
        } else {
            "self-signed certificate"
        },
        s.peers.len()
    );
}

pub fn listening(addr: SocketAddr) {
    log_info!("ARPX: listening on {addr}");
}

pub fn listen_failed(listen: &str, error: &str) {
    log_warn!("ARPX: cannot listen on {listen}: {error} (no inbound sessions)");
}

pub fn identity_reload_failed(error: &str) {
    log_warn!("ARPX: identity files not reloaded, keeping the running identity: {error}");
}

pub fn tls_rebuild_failed(error: &str) {
    log_warn!("ARPX: cannot rebuild the TLS configs for the new peer set: {error}");
}

pub fn peers_reconfigured(n: usize, reconnected: usize) {
    log_notice!("ARPX: {n} peer(s) configured, {reconnected} removed or reconnected");
}

/// `repeated`: the same failure as last time (logged at debug only: an
/// unreachable peer costs no log line per retry).
pub fn dial_failed(peer: &str, error: &str, repeated: bool) {
    if repeated {
        log_debug!("ARPX: dial to {peer} failed again: {error}");
    } else {
        log_info!("ARPX: dial to {peer} failed: {error}");
    }
}

/// `known`: from a configured peer's address (worth an operator's
/// attention); anything else is a scanner's business (counted in
/// `arpx.inbound_refused`, logged at debug only, so it cannot flood the
/// log).
pub fn inbound_refused(remote: SocketAddr, error: &str, known: bool) {
    if known {
        log_info!("ARPX: inbound connection from {remote} refused: {error}");
    } else {
        log_debug!("ARPX: inbound connection from {remote} refused: {error}");
    }
}

pub fn connected(peer: &str, conn: ConnId, outbound: bool, remote: SocketAddr) {
    log_debug!(
        "ARPX: connection {} {} {peer} ({remote}) verified",
        conn.0,
        if outbound { "to" } else { "from" }
    );
}

pub fn frame_error(conn: ConnId, error: &FrameError) {
    log_info!("ARPX: connection {}: {error}", conn.0);
}

pub fn frame_too_large(conn: ConnId, kind: &str, error: &str) {
    log_warn!("ARPX: connection {}: {kind} not sent: {error}", conn.0);
}

pub fn queue_full(peer: &str, conn: ConnId, error: &str) {
    log_warn!(
        "ARPX: disconnecting {peer} (connection {}): {error}",
        conn.0
    );
}

pub fn path_refused(peer: &str, route_id: &str, error: &str) {
    log_debug!("ARPX: path {route_id} via {peer} not installed: {error}");
}

pub fn link_invalid(peer: &str, error: &str) {
    log_warn!("ARPX: session with {peer} is up but not offered to the data plane: {error}");
}

pub fn session_up(peer: &str, conn: ConnId) {
    log_notice!(
        "ARPX: session with {peer} established (connection {})",
        conn.0
    );
}

pub fn session_down(
    peer: &str,
    conn: ConnId,
    close: Option<&Close>,
    by_us: bool,
    error: Option<&str>,
) {
    let why = match (close, error) {
        (Some(c), _) if c.reason.is_empty() => {
            format!("{} ({})", c.code, if by_us { "by us" } else { "by peer" })
        }
        (Some(c), _) => format!(
            "{} ({}): {}",
            c.code,
            if by_us { "by us" } else { "by peer" },
            c.reason
        ),
        (None, Some(e)) => e.to_string(),
        (None, None) => "ended".to_string(),
    };
    log_notice!(
        "ARPX: session with {peer} (connection {}) down: {why}",
        conn.0
    );
}

/// A router no `peer` section names connected to our relay.
pub fn relay_client_admitted(peer: &str, remote: SocketAddr, clients: usize) {
    log_notice!("relay: client router {peer} connected from {remote} ({clients} client(s))");
}

pub fn relay_client_refused(peer: &str, remote: SocketAddr, why: &str) {
    log_warn!("relay: session from {peer} at {remote} refused: {why}");
}

pub fn relay_client_gone(peer: &str) {
    log_info!("relay: client router {peer} disconnected; its routes are withdrawn");
}

/// Client mode: the relay in use changed.
pub fn relay_in_use(peer: &str, server: &str) {
    log_notice!("relay: using relay {peer} at {server}; our routes go out through it");
}

pub fn relay_lost(server: &str, why: &str) {
    log_warn!("relay: relay at {server} lost: {why}");
}
