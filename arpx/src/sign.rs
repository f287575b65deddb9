//! Origin signatures: the origin router signs a route's stable fields so
//! that no router on the way can change what a route says or claim it for
//! another origin without the forgery showing.
//!
//! The signed bytes are a domain-separation label followed by the postcard
//! encoding of the stable fields in their wire order; `lease_ms` and `path`
//! are not signed because they legitimately change hop by hop.

use std::fmt;

use edkey::{Signature, SigningKey};
use serde::Serialize;

use crate::bytes::Bytes;
use crate::message::{Attrs, ContractRef, OriginProof, RouteAd};

/// Separates ARPX route signatures from anything else the same key signs
/// (bootstrap tokens, forwarding assertions).
const LABEL: &[u8] = b"agentd arpx route v2\0";

#[derive(Serialize)]
struct Stable<'a> {
    route_id: &'a str,
    capability: &'a str,
    version: u32,
    origin_agent: &'a str,
    tenant: &'a str,
    region: &'a str,
    attrs: &'a Attrs,
    allowed_tenants: &'a [String],
    allowed_sources: &'a [String],
    contract: &'a Option<ContractRef>,
    origin_router: &'a str,
    origin_key: &'a Bytes<32>,
    serial: u64,
    proof: OriginProof,
}

/// What the origin signs for `ad`.
pub fn signed_bytes(ad: &RouteAd) -> Vec<u8> {
    let stable = Stable {
        route_id: &ad.route_id,
        capability: &ad.capability,
        version: ad.version,
        origin_agent: &ad.origin_agent,
        tenant: &ad.tenant,
        region: &ad.region,
        attrs: &ad.attrs,
        allowed_tenants: &ad.allowed_tenants,
        allowed_sources: &ad.allowed_sources,
        contract: &ad.contract,
        origin_router: &ad.origin_router,
        origin_key: &ad.origin_key,
        serial: ad.serial,
        proof: ad.proof,
    };
    crate::wire::encode_after(LABEL, &stable)
}

/// Sets `origin_key` and `signature` of our own advertisement.
pub fn sign(ad: &mut RouteAd, key: &SigningKey) {
    ad.origin_key = Bytes(key.verifying_key().to_bytes());
    ad.signature = Bytes(key.sign(&signed_bytes(ad)).to_bytes());
}

/// Why an origin signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// `origin_key` is not a valid Ed25519 public key.
    BadKey,
    /// The signature does not verify under `origin_key`.
    Mismatch,
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignatureError::BadKey => f.write_str("origin key is not a valid Ed25519 key"),
            SignatureError::Mismatch => f.write_str("origin signature does not verify"),
        }
    }
}

impl std::error::Error for SignatureError {}

/// Checks `ad`'s signature against the key it carries. Whether that key
/// really is the origin router's is the caller's question (the instance
/// keeps the known key of every router).
///
/// One call to edkey: the key's decoding is checked only when the
/// signature fails, not once more for every advertisement.
pub fn verify(ad: &RouteAd) -> Result<(), SignatureError> {
    let sig = Signature::from_bytes(&ad.signature.0);
    edkey::verify_strict(&ad.origin_key.0, &signed_bytes(ad), &sig).map_err(|e| match e {
        edkey::Error::KeyNotOnCurve => SignatureError::BadKey,
        edkey::Error::BadSignature => SignatureError::Mismatch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ad, key};

    #[test]
    fn a_signed_route_verifies_and_any_stable_change_breaks_it() {
        let k = key(1);
        let mut a = ad("r1", &["router-a"]);
        sign(&mut a, &k);
        assert_eq!(verify(&a), Ok(()));

        let mut moved = a.clone();
        moved.path.push("router-b".into());
        moved.lease_ms = 5;
        assert_eq!(verify(&moved), Ok(()), "path and lease are not signed");

        let mut tampered = a.clone();
        tampered.tenant = "other".into();
        assert_eq!(verify(&tampered), Err(SignatureError::Mismatch));
        let mut tampered = a.clone();
        tampered.attrs.trust = 100;
        assert_eq!(verify(&tampered), Err(SignatureError::Mismatch));
        let mut tampered = a.clone();
        tampered.serial += 1;
        assert_eq!(verify(&tampered), Err(SignatureError::Mismatch));

        let mut rekeyed = a.clone();
        rekeyed.origin_key = Bytes(key(2).verifying_key().to_bytes());
        assert_eq!(verify(&rekeyed), Err(SignatureError::Mismatch));
    }

    #[test]
    fn an_invalid_key_is_its_own_error() {
        let mut a = ad("r1", &["router-a"]);
        sign(&mut a, &key(1));
        // y = 2 is not on the curve (no x satisfies the equation).
        let mut bad = [0u8; 32];
        bad[0] = 2;
        a.origin_key = Bytes(bad);
        assert_eq!(verify(&a), Err(SignatureError::BadKey));
    }
}
