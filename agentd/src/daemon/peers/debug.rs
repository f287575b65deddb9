//! Every log line of the ARPX driver, in one place (holo's `debug.rs`):
//! the wording operators grep for stays consistent, and the driver code
//! stays free of formatting.

use crate::{log_info, log_warn};

pub fn mesh_off(reason: &str) {
    log_warn!("ARPX sessions off: {reason}");
}

pub fn peers_configured(n: usize) {
    log_info!("ARPX: {n} peer(s) configured");
}
