//! Our own routes: signed once per change of a stable field, with serials
//! that grow with every change and never go backwards across a restart.
//!
//! The serial is a hybrid clock: at least the last serial + 1, and at
//! least the wall-clock estimate (boot epoch + time since start, ms) × 1024.
//! A restart starts above every serial of the previous run unless that run
//! made more than 1024 changes per millisecond on average.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::BTreeSet;

use edkey::SigningKey;

use super::io::LocalRoute;
use crate::bytes::Bytes;
use crate::message::RouteAd;
use crate::sign;

/// One of our routes as signed. Held compactly: the instance keeps every
/// local route of the router (with or without peers), and a decoded
/// [`RouteAd`] with its dozen heap strings cost several times the route's
/// wire size. So the advertisement is kept in the wire's own encoding,
/// without the fields every one of ours shares (origin router, path,
/// certificate: restored from the instance's configuration, which they
/// were taken from), and decoded when exported or compared. The route
/// id, the set's key, is read from the encoding too (it comes first), so
/// it is not held twice.
#[derive(Debug)]
pub(super) struct Local {
    /// Postcard of the signed advertisement with `origin_router`, `path`
    /// and `origin_cert` empty and `lease_ms` 0.
    wire: Box<[u8]>,
    /// Lease end on the instance clock; [`PERMANENT`]: none.
    lease_until: u64,
}

/// The lease end of a permanent (static) route.
const PERMANENT: u64 = u64::MAX;

impl Borrow<str> for Local {
    fn borrow(&self) -> &str {
        self.id()
    }
}

impl PartialEq for Local {
    fn eq(&self, other: &Local) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Local {}

impl PartialOrd for Local {
    fn partial_cmp(&self, other: &Local) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Local {
    fn cmp(&self, other: &Local) -> Ordering {
        self.id().cmp(other.id())
    }
}

impl Local {
    fn new(mut ad: RouteAd, lease_until: u64) -> Local {
        ad.origin_router = String::new();
        ad.path = Vec::new();
        ad.origin_cert = Vec::new();
        Local {
            // Encoding a validated advertisement does not fail.
            wire: crate::wire::encode(&ad).into_boxed_slice(),
            lease_until,
        }
    }

    /// The route id: the encoding's first field (a length as a LEB128
    /// varint, then the UTF-8 bytes). Empty only if what was encoded does
    /// not read back, which would be a bug.
    pub fn id(&self) -> &str {
        let mut len = 0usize;
        for (i, b) in self.wire.iter().enumerate().take(10) {
            len |= usize::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                let id = self.wire.get(i + 1..(i + 1).saturating_add(len));
                return id.and_then(|b| std::str::from_utf8(b).ok()).unwrap_or("");
            }
        }
        ""
    }

    /// The stored advertisement, without the shared fields; `None` only
    /// if what was encoded does not decode, which would be a bug.
    fn stable(&self) -> Option<RouteAd> {
        postcard::from_bytes(&self.wire).ok()
    }

    /// The signed advertisement (path `[us]`, `lease_ms` 0).
    pub fn ad(&self, us: &str, cert: &[u8]) -> Option<RouteAd> {
        let mut ad = self.stable()?;
        ad.origin_router = us.to_owned();
        ad.path = vec![us.to_owned()];
        ad.origin_cert = cert.to_vec();
        Some(ad)
    }

    /// The advertisement as sent at `now` (remaining lease filled in).
    pub fn export(&self, now: u64, us: &str, cert: &[u8]) -> Option<RouteAd> {
        let mut ad = self.ad(us, cert)?;
        ad.lease_ms = match self.lease_until {
            PERMANENT => 0,
            until => until.saturating_sub(now).max(1),
        };
        Some(ad)
    }
}

#[derive(Debug)]
pub(super) struct Locals {
    /// By route id (see [`Local::id`]).
    pub routes: BTreeSet<Local>,
    boot_epoch: u64,
    start: Option<u64>,
    last_serial: u64,
}

/// Whether `r` says what `ad` says in every signed field.
fn same_stable(r: &LocalRoute, ad: &RouteAd) -> bool {
    r.capability == ad.capability
        && r.version == ad.version
        && r.origin_agent == ad.origin_agent
        && r.tenant == ad.tenant
        && r.region == ad.region
        && r.attrs == ad.attrs
        && r.allowed_tenants == ad.allowed_tenants
        && r.allowed_sources == ad.allowed_sources
        && r.contract == ad.contract
        && r.proof == ad.proof
}

impl Locals {
    pub fn new(boot_epoch: u64) -> Locals {
        Locals {
            routes: BTreeSet::new(),
            boot_epoch,
            start: None,
            last_serial: 0,
        }
    }

    fn next_serial(&mut self, now: u64) -> u64 {
        let start = *self.start.get_or_insert(now);
        let wall = self.boot_epoch.saturating_add(now.saturating_sub(start));
        let serial = wall
            .saturating_mul(1024)
            .max(self.last_serial.saturating_add(1));
        self.last_serial = serial;
        serial
    }

    /// Records `r`. Returns `Ok(true)` when the advertisement changed (a
    /// new serial and signature), `Ok(false)` for a renewal, `Err` with
    /// the wire rule it breaks (it is not exported).
    pub fn upsert(
        &mut self,
        now: u64,
        us: &str,
        key: &SigningKey,
        cert: &[u8],
        r: LocalRoute,
    ) -> Result<bool, crate::message::Invalid> {
        // Anchor the serial clock at the first input, whatever it is.
        self.start.get_or_insert(now);
        let lease_until = match r.lease_ms {
            0 => PERMANENT,
            // A lease that would end at the clock's end is one tick short
            // of it: PERMANENT is not a time.
            ms => now.saturating_add(ms).min(PERMANENT - 1),
        };
        if let Some(mut l) = self.routes.take(r.route_id.as_str()) {
            if l.stable().is_some_and(|ad| same_stable(&r, &ad)) {
                l.lease_until = lease_until;
                self.routes.insert(l);
                return Ok(false);
            }
        }
        let mut ad = RouteAd {
            route_id: r.route_id,
            capability: r.capability,
            version: r.version,
            origin_agent: r.origin_agent,
            tenant: r.tenant,
            region: r.region,
            attrs: r.attrs,
            allowed_tenants: r.allowed_tenants,
            allowed_sources: r.allowed_sources,
            contract: r.contract,
            origin_router: us.to_owned(),
            origin_key: Bytes::default(),
            serial: 0,
            signature: Bytes([0; 64]),
            lease_ms: 0,
            path: vec![us.to_owned()],
            proof: r.proof,
            trust_limit: crate::message::MAX_TRUST,
            proof_limit: crate::message::OriginProof::Jwt,
            origin_cert: cert.to_vec(),
        };
        ad.validate()?;
        ad.serial = self.next_serial(now);
        sign::sign(&mut ad, key);
        self.routes.replace(Local::new(ad, lease_until));
        Ok(true)
    }

    pub fn remove(&mut self, route_id: &str) -> bool {
        self.routes.remove(route_id)
    }

    pub fn contains(&self, route_id: &str) -> bool {
        self.routes.contains(route_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{key, local};

    /// Route "r1" as exported at `now` by router-a.
    fn exported(l: &Locals, now: u64, cert: &[u8]) -> RouteAd {
        l.routes
            .get("r1")
            .unwrap()
            .export(now, "router-a", cert)
            .unwrap()
    }

    #[test]
    fn a_local_route_exports_as_signed_with_our_path_cert_and_lease() {
        let mut l = Locals::new(1000);
        let cert = [7u8; 300];
        assert_eq!(
            l.upsert(5, "router-a", &key(1), &cert, local("r1")),
            Ok(true)
        );
        let ad = exported(&l, 10_005, &cert);
        assert_eq!(crate::sign::verify(&ad), Ok(()));
        assert_eq!(ad.route_id, "r1");
        assert_eq!(ad.origin_router, "router-a");
        assert_eq!(ad.path, ["router-a"]);
        assert_eq!(ad.origin_cert, cert);
        assert_eq!(ad.lease_ms, 20_000);
        assert_eq!(ad.attrs, local("r1").attrs);
        // A renewal keeps the signature; a changed field signs anew.
        let mut renewed = local("r1");
        renewed.lease_ms = 60_000;
        assert_eq!(l.upsert(6, "router-a", &key(1), &cert, renewed), Ok(false));
        let again = exported(&l, 6, &cert);
        assert_eq!((again.serial, again.signature), (ad.serial, ad.signature));
        assert_eq!(again.lease_ms, 60_000);
        let mut changed = local("r1");
        changed.version = 2;
        assert_eq!(l.upsert(7, "router-a", &key(1), &cert, changed), Ok(true));
        let signed = exported(&l, 7, &cert);
        assert!(signed.serial > ad.serial);
        assert_eq!(crate::sign::verify(&signed), Ok(()));
    }

    #[test]
    fn the_route_id_is_read_from_the_encoding_at_every_length() {
        // One- and two-byte length prefixes, at and around the boundary.
        for len in [0usize, 1, 127, 128, 200, 16_384] {
            let id = "r".repeat(len);
            let held = Local::new(crate::testing::ad(&id, &["router-a"]), PERMANENT);
            assert_eq!(held.id(), id, "{len}");
        }
        let mut l = Locals::new(1000);
        for id in ["b", "a", "c"] {
            l.upsert(5, "router-a", &key(1), &[7u8; 30], local(id))
                .unwrap();
        }
        let ids: Vec<&str> = l.routes.iter().map(Local::id).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(l.remove("b") && !l.contains("b") && l.contains("c"));
    }
}
