//! Builders for tests (unit and conformance): deterministic keys and
//! advertisements.

use edkey::SigningKey;

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
        proof: crate::message::OriginProof::Jwt,
        trust_limit: crate::message::MAX_TRUST,
        proof_limit: crate::message::OriginProof::Jwt,
        origin_cert: Vec::new(),
    }
}

/// The test router number `n` is named `router-<letter>`: 1 → router-a.
pub fn router(n: u8) -> String {
    format!("router-{}", char::from(b'a' + n - 1))
}

/// `ad(route_id, path)` signed by the origin (`path[0]`, test router
/// number `origin`).
pub fn signed(route_id: &str, path: &[&str], origin: u8) -> RouteAd {
    let mut a = ad(route_id, path);
    crate::sign::sign(&mut a, &key(origin));
    a
}

/// The defaults of `config arpx` for test router number `n`.
pub fn config(n: u8) -> crate::instance::InstanceConfig {
    crate::instance::InstanceConfig {
        router_id: router(n),
        domain: "lab.example".into(),
        boot_epoch: 1000 + u64::from(n),
        key: key(n),
        heartbeat_ms: 1000,
        miss_limit: 3,
        graceful_ms: 10_000,
        reflector: false,
        max_path: 8,
        max_frame: crate::frame::DEFAULT_MAX_FRAME,
        max_routes_per_origin: 2_500,
        origin_ca: None,
        cert: Vec::new(),
    }
}

/// A `peer` section with the defaults.
pub fn peer(n: u8) -> crate::instance::PeerConfig {
    crate::instance::PeerConfig {
        router_id: router(n),
        max_routes: 10_000,
        export_tenants: Vec::new(),
        reflector_client: false,
        max_trust: crate::message::MAX_TRUST,
        max_proof: crate::message::OriginProof::Jwt,
        export: true,
        relay_client: false,
    }
}

/// The Open test router number `n` sends.
pub fn open(n: u8) -> crate::message::Message {
    crate::message::Message::Open(crate::message::Open {
        version: crate::message::PROTOCOL_VERSION,
        router_id: router(n),
        domain: "lab.example".into(),
        boot_epoch: 1000 + u64::from(n),
        heartbeat_ms: 1000,
        reflector_client: false,
    })
}

/// A local route of tenant `lab` for `demo.echo` v1.
pub fn local(route_id: &str) -> crate::instance::LocalRoute {
    crate::instance::LocalRoute {
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
        lease_ms: 30_000,
        proof: crate::message::OriginProof::Jwt,
    }
}

/// The verified TLS key of test router number `n`.
pub fn tls_key(n: u8) -> [u8; 32] {
    key(n).verifying_key().to_bytes()
}

/// Connects test router number `n` to `inst` on `conn` (outbound), plays
/// its Open and begins its snapshot (version 1), which `end` also ends.
/// Outputs go to `out`; the clock stays at 0.
pub fn open_session(
    inst: &mut crate::instance::Instance,
    conn: u64,
    n: u8,
    end: bool,
    out: &mut Vec<crate::instance::Output>,
) {
    use crate::instance::{ConnId, Input};
    use crate::message::Message;
    let conn = ConnId(conn);
    let connected = Input::Connected {
        conn,
        peer: router(n),
        peer_key: tls_key(n),
        outbound: true,
    };
    inst.handle(0, connected, out);
    let mut opening = vec![open(n), Message::SnapshotBegin { version: 1 }];
    if end {
        opening.push(Message::SnapshotEnd { version: 1 });
    }
    for msg in opening {
        inst.handle(0, Input::Frame { conn, msg }, out);
    }
}

/// Router-b as the benchmarks take it: peers router-a (connected, its
/// snapshot begun on connection 1) and, when `reflect`, router-c (on
/// connection 3, its snapshot done), to which b then reflects. `max`
/// paths are allowed per neighbour and per origin router.
pub fn receiver(reflect: bool, max: usize) -> crate::instance::Instance {
    use crate::instance::{Input, Instance};
    let mut cfg = config(2);
    cfg.reflector = reflect;
    cfg.max_routes_per_origin = max;
    let mut inst = Instance::new(cfg);
    let mut out = Vec::new();
    let peers = [peer(1), peer(3)].map(|p| crate::instance::PeerConfig {
        max_routes: max,
        ..p
    });
    inst.handle(0, Input::ConfigurePeers(peers.to_vec()), &mut out);
    if reflect {
        open_session(&mut inst, 3, 3, true, &mut out);
    }
    open_session(&mut inst, 1, 1, false, &mut out);
    inst
}
