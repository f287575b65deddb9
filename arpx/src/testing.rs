//! Builders for tests (unit and conformance): deterministic keys and
//! advertisements.

use ed25519_dalek::SigningKey;

use crate::bytes::Bytes;
use crate::message::{Attrs, RouteAd};

/// A deterministic key for test router number `n`.
pub fn key(n: u8) -> SigningKey {
    SigningKey::from_bytes(&[n; 32])
}

/// An unsigned advertisement of `route_id` for `demo.echo` v1 with the
/// given path (origin first).
pub fn ad(route_id: &str, path: &[&str]) -> RouteAd {
    RouteAd {
        route_id: route_id.into(),
        capability: "demo.echo".into(),
        version: 1,
        origin_agent: "agent://lab/echo".into(),
        tenant: "lab".into(),
        region: String::new(),
        attrs: Attrs {
            latency_ms: 1,
            cost_micros: 0,
            load_permille: 0,
            trust: 50,
        },
        allowed_tenants: Vec::new(),
        allowed_sources: Vec::new(),
        contract: None,
        origin_router: path.first().copied().unwrap_or("router-a").into(),
        origin_key: Bytes::default(),
        serial: 1,
        signature: Bytes([0; 64]),
        lease_ms: 30_000,
        path: path.iter().map(|s| (*s).into()).collect(),
    }
}
