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
//! The signature is amortised over a batch: the calls a gateway sends to
//! one router in one event-loop turn are the leaves of a hash tree
//! ([`merkle`]), and one Ed25519 signature covers its root. Each call
//! carries its own claims, its inclusion proof and that signature, so it
//! is checked alone, exactly as strictly; the receiver verifies a root
//! once ([`RootCache`]) and each further call of the batch only hashes its
//! proof. A batch of one (every call at concurrency 1) is a tree of one
//! leaf with an empty proof.
//!
//! Sans-IO: time (`now_ms`, Unix milliseconds — the routers' clocks must
//! agree within `gateway.clock_skew`) and randomness are arguments.
//! Carried in one header as base64url of the postcard encoding.

use std::fmt;

use edkey::{Signature, SigningKey, VerifyingKey};
use router_pki::b64::{self, Alphabet};
use serde::{Deserialize, Serialize};

use crate::peer::merkle::{self, Hash, MAX_BATCH, MAX_DEPTH};
pub use crate::peer::roots::RootCache;

/// The request header that carries the assertion.
pub const HEADER: &str = "x-agentd-assertion";
/// Longest header value accepted (identifiers are bounded at 128 bytes
/// each, a proof at 8 hashes; a real assertion is well under 1 KiB).
pub const MAX_HEADER_LEN: usize = 2048;
/// Separates these signatures from anything else a router key signs
/// (route advertisements, bootstrap tokens, the v1 per-call format).
const LABEL: &[u8] = b"agentd forwarding batch v2\0";

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

impl Claims {
    /// This call's leaf in its batch's tree.
    pub fn leaf(&self) -> Hash {
        // Plain strings, integers and byte arrays: serialising cannot fail.
        merkle::leaf(&postcard::to_allocvec(self).unwrap_or_default())
    }
}

/// Where an assertion's claims sit in the batch its signature covers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    pub index: u32,
    /// Leaves in the batch (signed with the root).
    pub size: u32,
    /// Sibling hashes from the leaf upwards (at most [`MAX_DEPTH`]).
    pub path: Vec<Hash>,
}

/// Claims, their inclusion proof and the source router's Ed25519
/// signature over the batch root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assertion {
    pub claims: Claims,
    pub proof: Proof,
    /// The 64-byte signature as two halves (serde derives arrays up to 32).
    signature: ([u8; 32], [u8; 32]),
}

/// What the signature covers: the tree's root, how many leaves it has,
/// and the fields every leaf of a batch shares.
#[derive(Serialize)]
struct RootMessage<'a> {
    source: &'a str,
    target: &'a str,
    expires_ms: u64,
    size: u32,
    root: Hash,
}

fn root_message(c: &Claims, size: u32, root: Hash) -> Vec<u8> {
    let mut out = LABEL.to_vec();
    let m = RootMessage {
        source: &c.source,
        target: &c.target,
        expires_ms: c.expires_ms,
        size,
        root,
    };
    out.extend(postcard::to_allocvec(&m).unwrap_or_default());
    out
}

fn halves(sig: [u8; 64]) -> ([u8; 32], [u8; 32]) {
    let (a, b) = sig.split_at(32);
    (
        a.try_into().unwrap_or([0; 32]),
        b.try_into().unwrap_or([0; 32]),
    )
}

/// Signs a batch: one signature over the root of the tree of `batch`'s
/// claims, each of which gets `source`, `target` and `expires_ms` (what
/// the root message binds). At most [`MAX_BATCH`] claims; more are the
/// caller's bug and are cut off (their senders get no assertion).
pub fn sign_batch(
    key: &SigningKey,
    source: &str,
    target: &str,
    expires_ms: u64,
    mut batch: Vec<Claims>,
) -> Vec<Assertion> {
    batch.truncate(MAX_BATCH);
    if batch.is_empty() {
        return Vec::new();
    }
    for c in &mut batch {
        c.source = source.to_string();
        c.target = target.to_string();
        c.expires_ms = expires_ms;
    }
    let leaves: Vec<Hash> = batch.iter().map(Claims::leaf).collect();
    let (root, proofs) = merkle::build(&leaves);
    let size = batch.len() as u32;
    let signature = halves(key.sign(&root_message(&batch[0], size, root)).to_bytes());
    batch
        .into_iter()
        .zip(proofs)
        .enumerate()
        .map(|(i, (claims, path))| Assertion {
            claims,
            proof: Proof {
                index: i as u32,
                size,
                path,
            },
            signature,
        })
        .collect()
}

impl Assertion {
    /// Signs `claims` alone (a batch of one).
    pub fn sign(claims: Claims, key: &SigningKey) -> Assertion {
        let (source, target, exp) = (
            claims.source.clone(),
            claims.target.clone(),
            claims.expires_ms,
        );
        let mut v = sign_batch(key, &source, &target, exp, vec![claims]);
        v.remove(0)
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
        let p = &a.proof;
        if p.size == 0 || p.size as usize > MAX_BATCH || p.index >= p.size {
            return Err(AssertionError::Malformed("batch position"));
        }
        if p.path.len() > MAX_DEPTH {
            return Err(AssertionError::Malformed("batch proof too long"));
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
    /// What the request really asks for and carries. `None`: a body
    /// passed through unread, whose digest is checked as it streams
    /// (`forward::transit`) against the claim this verification accepts.
    pub capability: &'a str,
    pub body_sha256: Option<[u8; 32]>,
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
    /// The batch proof fits no tree of the size it claims.
    BadProof,
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
            AssertionError::BadProof => "assertion_bad_proof",
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
            AssertionError::BadProof => {
                f.write_str("forwarding assertion's batch proof fits no tree of its size")
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
/// The cheap checks come first; the signature over the batch root is
/// verified unless `roots` holds it already (verified by this key); the
/// nonce is recorded only once everything else holds, so nothing
/// unauthenticated can fill the replay cache.
pub fn verify<'a>(
    a: &'a Assertion,
    e: &Expect<'_>,
    roots: &mut RootCache,
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
    if c.expires_ms.saturating_add(e.skew_ms) <= e.now_ms {
        return Err(AssertionError::Expired);
    }
    if c.expires_ms > e.now_ms.saturating_add(e.ttl_ms).saturating_add(e.skew_ms) {
        return Err(AssertionError::TooLong);
    }
    if c.capability != e.capability {
        return Err(AssertionError::WrongCapability);
    }
    if e.body_sha256.is_some_and(|d| d != c.body_sha256) {
        return Err(AssertionError::DigestMismatch);
    }
    let p = &a.proof;
    // A proof that fits no tree of that size leads to no root at all; one
    // that leads elsewhere leads to a root nobody signed.
    let root =
        merkle::root_of(c.leaf(), p.index, p.size, &p.path).ok_or(AssertionError::BadProof)?;
    let message = root_message(c, p.size, root);
    let k = crate::peer::roots::key_of(e.peer_key.as_bytes(), &message);
    if !roots.contains(&k, e.now_ms) {
        // `verify_strict`: besides a canonical S it refuses a small-order
        // R or key. Plain `verify` accepts, under any key whose secret is
        // known to its holder, signatures with R = identity (or another
        // small-order point) that other RFC 8032 verifiers refuse: what
        // the assertion proves must not depend on whose verifier reads it
        // (a receiving domain keeps it as evidence, DESIGN §3). ring's
        // verify has no such refusal; edkey adds it (a comparison of R's
        // and the key's bytes with the small-order encodings).
        roots.note_check();
        e.peer_key
            .verify_strict(&message, &a.signature())
            .map_err(|_| AssertionError::BadSignature)?;
        // A batch of one has no other call to carry its root.
        if p.size > 1 {
            roots.insert(k, c.expires_ms.saturating_add(e.skew_ms), e.now_ms);
        }
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
