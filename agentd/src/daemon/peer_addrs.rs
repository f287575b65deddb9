//! The peer router addresses the daemon knows outside [`State`]: routers
//! admitted from discovery (they are peers of the running mesh, not of
//! the file) and discovery candidates. A LAN registration never points
//! at one of them (`endpoint::scope`); the loop hands them to the state
//! before each request that checks an endpoint.

use std::net::IpAddr;

use super::discovery::Discovery;
use super::peers::Peers;
#[cfg(doc)]
use super::state::State;
use crate::time::Millis;

/// Literal addresses of the mesh's peers (configured and admitted) and of
/// the discovery candidates; host names are left out (no resolver here).
pub fn known(peers: &Peers, discovery: &Discovery, now: Millis) -> Vec<IpAddr> {
    let mesh = peers.settings().peers.iter().map(|p| p.address.clone());
    let candidates = discovery
        .view(now)
        .candidates
        .into_iter()
        .map(|c| c.address.to_string());
    let mut out: Vec<IpAddr> = mesh
        .chain(candidates)
        .filter_map(|a| a.parse().ok())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}
