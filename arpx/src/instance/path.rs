//! A path learned from a peer, held compactly.
//!
//! The Adj-RIB-In holds one path per route per peer that sent it, so in
//! a mesh it is the largest thing a router keeps: every route of every
//! other router, once for each neighbour that reflects it. Held as a
//! decoded [`RouteAd`] (a dozen heap strings, the path's, the attributes)
//! a path cost ~1.3 KB. It is held instead as the advertisement's own
//! encoding, without what is kept beside it once for many paths (the
//! route id, the map key shared by every peer's path; the origin router,
//! shared by its paths through the key directory; the certificate, shared
//! per origin) or that changes without changing the path (the carried
//! lease). It is decoded when compared or reflected, which is rare next
//! to holding it.

use std::sync::Arc;

use super::io::ConnId;
use crate::message::RouteAd;

#[derive(Clone, Debug)]
pub(super) struct Path {
    /// Postcard of the advertisement as it arrived, with `route_id`,
    /// `origin_router` and `origin_cert` empty and `lease_ms` 0.
    wire: Box<[u8]>,
    /// The origin router (first in the path).
    pub origin: Arc<str>,
    /// The origin router's certificate the advertisement carried, shared
    /// with the origin's other paths (`certs.rs`).
    pub cert: Option<Arc<[u8]>>,
    pub serial: u64,
    /// The path's length in routers (best-path choice).
    pub hops: usize,
    /// The origin lease's remaining time when it was last sent.
    pub lease_ms: u64,
    /// The connection whose messages last confirmed it (the snapshot sweep
    /// and graceful expiry remove paths not confirmed by the current one).
    pub mark: ConnId,
    /// The peer's boot epoch when it was learned: serials are compared
    /// only within one epoch (a restarted peer's snapshot replaces all).
    pub epoch: u64,
}

/// What a path holds of an advertisement: its encoding without the fields
/// held beside it. Two advertisements of one route and origin router
/// with the same wire say the same, their carried leases aside.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Wire(Vec<u8>);

impl Wire {
    /// `ad`'s wire; `ad` is left as it was (the fields held beside the
    /// encoding are taken out for it and put back).
    pub fn of(ad: &mut RouteAd) -> Wire {
        let route_id = std::mem::take(&mut ad.route_id);
        let origin_router = std::mem::take(&mut ad.origin_router);
        let cert = std::mem::take(&mut ad.origin_cert);
        let lease_ms = std::mem::take(&mut ad.lease_ms);
        // Encoding a decoded advertisement does not fail.
        let wire = crate::wire::encode(&*ad);
        ad.route_id = route_id;
        ad.origin_router = origin_router;
        ad.origin_cert = cert;
        ad.lease_ms = lease_ms;
        Wire(wire)
    }
}

impl Path {
    /// Holds `ad`, whose wire is `wire`, with its certificate as `cert`.
    pub fn new(
        ad: &RouteAd,
        wire: Wire,
        origin: Arc<str>,
        cert: Option<Arc<[u8]>>,
        mark: ConnId,
        epoch: u64,
    ) -> Path {
        Path {
            wire: wire.0.into_boxed_slice(),
            origin,
            cert,
            serial: ad.serial,
            hops: ad.path.len(),
            lease_ms: ad.lease_ms,
            mark,
            epoch,
        }
    }

    /// Whether this path holds `wire` (see [`Wire`]).
    pub fn holds(&self, wire: &Wire) -> bool {
        *self.wire == *wire.0
    }

    /// The origin key the advertisement carried.
    pub fn origin_key(&self) -> Option<[u8; 32]> {
        let ad: RouteAd = postcard::from_bytes(&self.wire).ok()?;
        Some(ad.origin_key.0)
    }

    /// The advertisement of `route_id` (this path's key) as it arrived,
    /// but without its certificate (see [`Path::cert`]). `None` only if
    /// what was encoded does not decode, which would be a bug.
    pub fn ad(&self, route_id: &str) -> Option<RouteAd> {
        let mut ad: RouteAd = postcard::from_bytes(&self.wire).ok()?;
        ad.route_id = route_id.to_owned();
        ad.origin_router = self.origin.to_string();
        ad.lease_ms = self.lease_ms;
        Some(ad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::key;

    #[test]
    fn a_held_path_reads_back_as_it_arrived_but_for_its_certificate() {
        let mut ad = crate::testing::ad("r1", &["router-a", "router-c"]);
        ad.allowed_tenants = vec!["ops".into()];
        ad.region = "eu".into();
        ad.lease_ms = 7_000;
        crate::sign::sign(&mut ad, &key(1));
        ad.origin_cert = b"cert".to_vec();
        let arrived = ad.clone();
        let wire = Wire::of(&mut ad);
        assert_eq!(ad, arrived, "the advertisement is left as it was");
        let path = Path::new(&ad, wire, "router-a".into(), None, ConnId(3), 9);
        assert!(path.holds(&Wire::of(&mut ad)));
        ad.origin_cert.clear();
        assert!(
            path.holds(&Wire::of(&mut ad)),
            "the certificate is not in it"
        );
        ad.lease_ms = 1;
        assert!(path.holds(&Wire::of(&mut ad)), "nor the carried lease");
        let arrived = RouteAd {
            origin_cert: Vec::new(),
            ..arrived
        };
        assert_eq!(path.ad("r1"), Some(arrived.clone()));
        assert_eq!((path.serial, path.hops, path.lease_ms), (1, 2, 7_000));
        assert_eq!(crate::sign::verify(&path.ad("r1").unwrap()), Ok(()));
        let mut other = arrived.clone();
        other.path.push("router-d".into());
        assert!(!path.holds(&Wire::of(&mut other)));
        // What is held beside the encoding is not in it a second time.
        let full = postcard::to_allocvec(&arrived).unwrap();
        assert!(path.wire.len() + "r1".len() + "router-a".len() < full.len());
    }
}
