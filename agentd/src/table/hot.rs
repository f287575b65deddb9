//! The per-route record selection reads on every candidate.
//!
//! One cache line per route, kept in a vector parallel to the slab, holds
//! every field the filters and the score need in the common case: metrics,
//! lease deadline, hop count, version, interned tenant and next hop, and
//! flags. The full `Route` (strings, access lists, contract) is read only
//! for the rare checks that need text (region, endpoint prefix, target
//! agent, access lists) and for the winner. At 50k routes the difference
//! is one cache miss per candidate instead of four or five.

use super::interner::NONE;
use crate::policy::SourceSet;
use crate::route::{Lease, OriginProof, Route};
use crate::time::Millis;

pub(crate) const HEALTHY: u8 = 1;
pub(crate) const PEER_UP: u8 = 2;
pub(crate) const PERMANENT: u8 = 4;
/// `access.allowed_tenants` is non-empty: other tenants may qualify.
pub(crate) const SHARED: u8 = 8;
/// `access.allowed_sources` is non-empty: the caller must be listed.
pub(crate) const SOURCES: u8 = 16;
/// Another origin router's claim of the origin wins (`Route::disputed`).
pub(crate) const DISPUTED: u8 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Hot {
    pub latency_ms: u64,
    pub cost_micros: u64,
    pub load_permille: u64,
    pub trust: u64,
    /// Meaningless when `PERMANENT` is set.
    pub deadline: u64,
    pub hops: u32,
    pub version: u32,
    pub tenant: u32,
    pub next_hop: u32,
    pub flags: u8,
    /// The route's source as a one-bit `SourceSet`.
    pub source: SourceSet,
    /// How the origin was proven (`Route::proof`), in the line's padding.
    pub proof: OriginProof,
    /// Position of this slot in its next hop's slot list (the per-peer
    /// index); meaningless without a next hop. It lives in the line's
    /// padding, so the per-peer index costs no byte per route beyond its
    /// own slot number. Not read by selection.
    pub hop_pos: u32,
}

impl Hot {
    pub const VACANT: Hot = Hot {
        latency_ms: 0,
        cost_micros: 0,
        load_permille: 0,
        trust: 0,
        deadline: 0,
        hops: 0,
        version: 0,
        tenant: NONE,
        next_hop: NONE,
        flags: 0,
        source: SourceSet::NONE,
        proof: OriginProof::None,
        hop_pos: 0,
    };

    pub fn new(route: &Route, tenant: u32, next_hop: u32, peer_up: bool) -> Hot {
        let mut h = Hot {
            latency_ms: route.attrs.latency_ms,
            cost_micros: route.attrs.cost_micros,
            load_permille: route.attrs.load_permille,
            trust: route.attrs.trust,
            deadline: 0,
            hops: u32::try_from(route.path.len()).unwrap_or(u32::MAX),
            version: route.version,
            tenant,
            next_hop,
            flags: 0,
            source: SourceSet::NONE.with(route.source),
            proof: route.proof,
            hop_pos: 0,
        };
        h.set_lease(route.lease);
        h.set(HEALTHY, route.healthy);
        h.set(PEER_UP, peer_up);
        h.set(SHARED, !route.access.allowed_tenants.is_empty());
        h.set(SOURCES, !route.access.allowed_sources.is_empty());
        h.set(DISPUTED, route.disputed);
        h
    }

    pub fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    #[inline]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub fn set_lease(&mut self, lease: Lease) {
        match lease {
            Lease::Permanent => self.set(PERMANENT, true),
            Lease::Until(Millis(d)) => {
                self.set(PERMANENT, false);
                self.deadline = d;
            }
        }
    }

    /// Same rule as `Lease::live_at`: live strictly before the deadline.
    #[inline]
    pub fn live_at(&self, now: Millis) -> bool {
        self.has(PERMANENT) || now.0 < self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cache_line_per_route() {
        assert_eq!(std::mem::size_of::<Hot>(), 64);
    }
}
