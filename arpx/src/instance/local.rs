//! Our own routes: signed once per change of a stable field, with serials
//! that grow with every change and never go backwards across a restart.
//!
//! The serial is a hybrid clock: at least the last serial + 1, and at
//! least the wall-clock estimate (boot epoch + time since start, ms) × 1024.
//! A restart starts above every serial of the previous run unless that run
//! made more than 1024 changes per millisecond on average.

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;

use super::io::LocalRoute;
use crate::bytes::Bytes;
use crate::message::RouteAd;
use crate::sign;

#[derive(Debug)]
pub(super) struct Local {
    /// Signed, path `[us]`; `lease_ms` is filled in at export.
    pub ad: RouteAd,
    /// Lease end on the instance clock; None: permanent.
    pub lease_until: Option<u64>,
}

impl Local {
    /// The advertisement as sent at `now` (remaining lease filled in).
    pub fn export(&self, now: u64) -> RouteAd {
        let mut ad = self.ad.clone();
        ad.lease_ms = self
            .lease_until
            .map_or(0, |until| until.saturating_sub(now).max(1));
        ad
    }
}

#[derive(Debug)]
pub(super) struct Locals {
    pub routes: BTreeMap<String, Local>,
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
            routes: BTreeMap::new(),
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
        let lease_until = (r.lease_ms > 0).then(|| now.saturating_add(r.lease_ms));
        if let Some(l) = self.routes.get_mut(&r.route_id) {
            if same_stable(&r, &l.ad) {
                l.lease_until = lease_until;
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
        self.routes
            .insert(ad.route_id.clone(), Local { ad, lease_until });
        Ok(true)
    }

    pub fn remove(&mut self, route_id: &str) -> bool {
        self.routes.remove(route_id).is_some()
    }

    pub fn contains(&self, route_id: &str) -> bool {
        self.routes.contains_key(route_id)
    }
}
