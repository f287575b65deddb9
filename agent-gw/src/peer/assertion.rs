//! Forwarding assertions: what a router signs when it hands a call to the
//! next router, and the checks the receiver makes before it believes any of
//! it (DESIGN §3, issue 8 item 2).
//!
//! The sending router signs (source router, target router, the router
//! where the call entered the mesh, caller, tenant, capability, body
//! SHA-256, nonce, expiry) with its identity key. The receiver accepts it
//! only from the TLS-verified peer that signed it, addressed to itself,
//! for the capability and body it actually received, unexpired, and with a
//! nonce it has not seen — tracked in a bounded [`ReplayCache`] that
//! refuses new nonces when full instead of forgetting live ones. A transit
//! router re-signs for the next hop, carrying the origin, caller and
//! tenant unchanged: payload fields never grant anything.
//!
//! Sans-IO: time (`now_ms`, Unix milliseconds — the routers' clocks must
//! agree within `gateway.clock_skew`) and randomness are arguments.
//! Carried in one header as base64url of the postcard encoding.

use std::fmt;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use router_pki::b64::{self, Alphabet};
use serde::{Deserialize, Serialize};

/// The request header that carries the assertion.
pub const HEADER: &str = "x-agentd-assertion";
/// Longest header value accepted (identifiers are bounded at 128 bytes
/// each; a real assertion is well under 1 KiB).
pub const MAX_HEADER_LEN: usize = 2048;
/// Separates these signatures from anything else a router key signs
/// (route advertisements, bootstrap tokens).
const LABEL: &[u8] = b"agentd forwarding assertion v1\0";

/// What the sending router vouches for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The router that signed this (the sender of this hop).
    pub source: String,
    /// The router it is addressed to.
    pub target: String,
    /// The router where the call entered the mesh (= `source` on the
    /// first hop; carried unchanged by transit routers).
    pub origin: String,
    /// The caller's verified source agent.
    pub caller: String,
    pub tenant: String,
    pub capability: String,
    pub body_sha256: [u8; 32],
    pub nonce: [u8; 16],
    /// Unix milliseconds after which the assertion is void.
    pub expires_ms: u64,
}

/// Claims and the source router's Ed25519 signature over them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assertion {
    pub claims: Claims,
    /// The 64-byte signature as two halves (serde derives arrays up to 32).
    signature: ([u8; 32], [u8; 32]),
}

fn signed_bytes(claims: &Claims) -> Vec<u8> {
    let mut out = LABEL.to_vec();
    // Plain strings, integers and byte arrays: serialising cannot fail.
    out.extend(postcard::to_allocvec(claims).unwrap_or_default());
    out
}

impl Assertion {
    /// Signs `claims` with the source router's identity key.
    pub fn sign(claims: Claims, key: &SigningKey) -> Assertion {
        let sig = key.sign(&signed_bytes(&claims)).to_bytes();
        let (a, b) = sig.split_at(32);
        Assertion {
            claims,
            signature: (
                a.try_into().unwrap_or([0; 32]),
                b.try_into().unwrap_or([0; 32]),
            ),
        }
    }

    /// The header value.
    pub fn encode(&self) -> String {
        b64::encode_url(&postcard::to_allocvec(self).unwrap_or_default())
    }

    /// Parses a header value: bounded, typed errors, nothing trusted yet.
    pub fn decode(value: &str) -> Result<Assertion, AssertionError> {
        if value.len() > MAX_HEADER_LEN {
            return Err(AssertionError::Malformed("header too long"));
        }
        let raw = b64::decode(value.as_bytes(), Alphabet::UrlNoPad, MAX_HEADER_LEN)
            .map_err(|_| AssertionError::Malformed("not base64url"))?;
        let (a, rest) = postcard::take_from_bytes::<Assertion>(&raw)
            .map_err(|_| AssertionError::Malformed("not an assertion"))?;
        if !rest.is_empty() {
            return Err(AssertionError::Malformed("trailing bytes"));
        }
        Ok(a)
    }

    fn signature(&self) -> Signature {
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(&self.signature.0);
        sig[32..].copy_from_slice(&self.signature.1);
        Signature::from_bytes(&sig)
    }
}

/// What the receiver knows independently of the assertion.
#[derive(Debug)]
pub struct Expect<'a> {
    /// The TLS-verified router the request came from, and its key.
    pub peer: &'a str,
    pub peer_key: &'a VerifyingKey,
    /// This router.
    pub us: &'a str,
    /// What the request really asks for and carries.
    pub capability: &'a str,
    pub body_sha256: [u8; 32],
    pub now_ms: u64,
    /// `gateway.assertion_ttl`: no assertion may claim to live longer.
    pub ttl_ms: u64,
    /// `gateway.clock_skew`.
    pub skew_ms: u64,
}

/// Why an assertion was refused. Stable codes for the typed refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssertionError {
    /// The request carries no assertion at all.
    Missing,
    Malformed(&'static str),
    /// Signed by another router than the one the request came from.
    WrongSigner {
        claimed: String,
        peer: String,
    },
    /// Addressed to another router.
    WrongTarget {
        target: String,
    },
    BadSignature,
    Expired,
    /// Claims a lifetime beyond `assertion_ttl` (plus skew).
    TooLong,
    /// For another capability or another body than the request's.
    WrongCapability,
    DigestMismatch,
    Replayed,
    /// Older than the sender's replay window: refused rather than taken
    /// on trust.
    OutOfWindow,
    /// The replay cache holds `replay_cache` live nonces: refused rather
    /// than forgetting one that could then be replayed.
    CacheFull,
}

impl AssertionError {
    pub fn code(&self) -> &'static str {
        match self {
            AssertionError::Missing => "assertion_missing",
            AssertionError::Malformed(_) => "assertion_malformed",
            AssertionError::WrongSigner { .. } => "assertion_wrong_signer",
            AssertionError::WrongTarget { .. } => "assertion_wrong_target",
            AssertionError::BadSignature => "assertion_bad_signature",
            AssertionError::Expired => "assertion_expired",
            AssertionError::TooLong => "assertion_lifetime",
            AssertionError::WrongCapability => "assertion_wrong_capability",
            AssertionError::DigestMismatch => "assertion_digest",
            AssertionError::Replayed => "assertion_replayed",
            AssertionError::OutOfWindow => "assertion_out_of_window",
            AssertionError::CacheFull => "assertion_cache_full",
        }
    }
}

impl fmt::Display for AssertionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AssertionError::Missing => f.write_str("a peer request needs a forwarding assertion"),
            AssertionError::Malformed(why) => write!(f, "forwarding assertion malformed: {why}"),
            AssertionError::WrongSigner { claimed, peer } => write!(
                f,
                "forwarding assertion signed as {claimed} arrived from {peer}"
            ),
            AssertionError::WrongTarget { target } => {
                write!(f, "forwarding assertion is addressed to {target}")
            }
            AssertionError::BadSignature => {
                f.write_str("forwarding assertion signature does not verify")
            }
            AssertionError::Expired => f.write_str("forwarding assertion expired"),
            AssertionError::TooLong => {
                f.write_str("forwarding assertion claims a lifetime beyond assertion_ttl")
            }
            AssertionError::WrongCapability => {
                f.write_str("forwarding assertion is for another capability")
            }
            AssertionError::DigestMismatch => {
                f.write_str("request body does not match the forwarding assertion's digest")
            }
            AssertionError::Replayed => f.write_str("forwarding assertion nonce already used"),
            AssertionError::OutOfWindow => f.write_str(
                "forwarding assertion sequence is older than the sender's replay window",
            ),
            AssertionError::CacheFull => {
                f.write_str("replay cache full: forwarding assertion refused")
            }
        }
    }
}

impl std::error::Error for AssertionError {}

/// Checks `a` against what the receiver knows, and records its nonce.
/// The nonce is recorded only once everything else holds, so nothing
/// unauthenticated can fill the cache.
pub fn verify<'a>(
    a: &'a Assertion,
    e: &Expect<'_>,
    cache: &mut ReplayCache,
) -> Result<&'a Claims, AssertionError> {
    let c = &a.claims;
    if c.source != e.peer {
        return Err(AssertionError::WrongSigner {
            claimed: c.source.clone(),
            peer: e.peer.to_string(),
        });
    }
    if c.target != e.us {
        return Err(AssertionError::WrongTarget {
            target: c.target.clone(),
        });
    }
    e.peer_key
        .verify_strict(&signed_bytes(c), &a.signature())
        .map_err(|_| AssertionError::BadSignature)?;
    if c.expires_ms.saturating_add(e.skew_ms) <= e.now_ms {
        return Err(AssertionError::Expired);
    }
    if c.expires_ms > e.now_ms.saturating_add(e.ttl_ms).saturating_add(e.skew_ms) {
        return Err(AssertionError::TooLong);
    }
    if c.capability != e.capability {
        return Err(AssertionError::WrongCapability);
    }
    if c.body_sha256 != e.body_sha256 {
        return Err(AssertionError::DigestMismatch);
    }
    cache.insert(
        &c.source,
        c.nonce,
        c.expires_ms.saturating_add(e.skew_ms),
        e.now_ms,
    )?;
    Ok(c)
}

pub use crate::peer::replay::ReplayCache;

#[cfg(test)]
mod tests;
