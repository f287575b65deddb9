//! Ed25519 keys, signing and strict verification for the agentd suite, on
//! ring's Ed25519: the implementation rustls and webpki already link for
//! TLS, so the router binary carries one Ed25519 instead of two.
//!
//! The types are the part of ed25519-dalek's API the suite used
//! (`SigningKey`, `VerifyingKey`, `Signature`), with its meaning:
//!
//! - `VerifyingKey::from_bytes` refuses bytes that are not a point of the
//!   curve, as dalek does (ring only finds out inside `verify`, where a bad
//!   key and a bad signature are the same error);
//! - `VerifyingKey::verify_strict` refuses what dalek's `verify_strict`
//!   refuses: s not below the group order L, an R or a public key of small
//!   order, and an R whose bytes are not the canonical encoding of the
//!   point the check computes. ring's verify does all but the small-order
//!   refusals, which are a byte comparison of our own ([`small_order`]).
//!
//! [`Sha256`] is ring's SHA-256 behind the part of the `sha2` API the
//! suite used, for the same reason: one implementation in the binary.
//!
//! Signatures are byte for byte dalek's (Ed25519 is deterministic); the
//! tests in `tests/differential.rs` hold all of it to ed25519-dalek.

use std::fmt;
use std::mem::ManuallyDrop;

use ring::signature::{self as rs, KeyPair};

mod field;
mod sha256;

pub use sha256::Sha256;

/// Why a key or a signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The 32 bytes are not the encoding of a point of edwards25519.
    KeyNotOnCurve,
    /// The signature does not verify under the key (wrong message or key,
    /// s not below L, a non-canonical or small-order R, a small-order key).
    BadSignature,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::KeyNotOnCurve => "Ed25519 public key: not a point on the curve",
            Error::BadSignature => "Ed25519 signature does not verify",
        })
    }
}

impl std::error::Error for Error {}

/// An Ed25519 signature: R (32 bytes) then s (32 bytes).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature([u8; 64]);

impl Signature {
    pub fn from_bytes(bytes: &[u8; 64]) -> Signature {
        Signature(*bytes)
    }

    pub fn to_bytes(&self) -> [u8; 64] {
        self.0
    }

    fn r_bytes(&self) -> &[u8; 32] {
        self.0.first_chunk().expect("64 bytes hold 32")
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature(")?;
        hex(f, &self.0)?;
        write!(f, ")")
    }
}

/// An Ed25519 public key: 32 bytes known to decode to a curve point.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VerifyingKey([u8; 32]);

impl VerifyingKey {
    /// The key `bytes` encode; `Error::KeyNotOnCurve` when they are not a
    /// point. As in dalek, a y of p or more (taken mod p) and x = 0 with
    /// the sign bit set decode; small-order keys decode too, and
    /// `verify_strict` refuses them.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<VerifyingKey, Error> {
        if field::decodes(bytes) {
            Ok(VerifyingKey(*bytes))
        } else {
            Err(Error::KeyNotOnCurve)
        }
    }

    pub fn to_bytes(&self) -> [u8; 32] {
        self.0
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Whether this key has small order (dalek's `is_weak`): it verifies
    /// signatures that no secret key made.
    pub fn is_weak(&self) -> bool {
        small_order(&self.0)
    }

    /// `signature` over `message` under this key, by ed25519-dalek's
    /// `verify_strict` rules (see the crate documentation). The bytes of R
    /// and of the key are hashed as they came, non-canonical or not, as
    /// both libraries do.
    pub fn verify_strict(&self, message: &[u8], signature: &Signature) -> Result<(), Error> {
        if small_order(signature.r_bytes()) || small_order(&self.0) {
            return Err(Error::BadSignature);
        }
        rs::UnparsedPublicKey::new(&rs::ED25519, &self.0)
            .verify(message, &signature.0)
            .map_err(|_| Error::BadSignature)
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifyingKey(")?;
        hex(f, &self.0)?;
        write!(f, ")")
    }
}

/// `VerifyingKey::from_bytes(key)` then `verify_strict`, with the same
/// outcome (`KeyNotOnCurve` for a key that does not decode), but the key's
/// decoding checked only when the signature fails: ring decodes the key
/// by the same rule while verifying, so a signature that verifies proves
/// the key decodes. For a key that arrives with every message (an ARPX
/// advertisement's origin key), where the check would add a third to each
/// verification.
pub fn verify_strict(key: &[u8; 32], message: &[u8], signature: &Signature) -> Result<(), Error> {
    match VerifyingKey(*key).verify_strict(message, signature) {
        Ok(()) => Ok(()),
        Err(_) if !field::decodes(key) => Err(Error::KeyNotOnCurve),
        Err(e) => Err(e),
    }
}

/// An Ed25519 secret key: the 32-byte seed of RFC 8032, with ring's key
/// pair (the expanded secret scalar and prefix, and the public key)
/// computed once. Both are overwritten with zeros when it is dropped.
pub struct SigningKey {
    seed: [u8; 32],
    /// Never dropped, only zeroed: ring's key pair is plain bytes and has
    /// no way to wipe itself; `Drop` below overwrites its memory and the
    /// value is not used again.
    pair: ManuallyDrop<rs::Ed25519KeyPair>,
    public: VerifyingKey,
}

impl SigningKey {
    /// The key whose RFC 8032 seed is `seed` (any 32 bytes are a key).
    pub fn from_bytes(seed: &[u8; 32]) -> SigningKey {
        let pair = rs::Ed25519KeyPair::from_seed_unchecked(seed)
            .expect("ring takes any 32-byte Ed25519 seed");
        let mut public = [0u8; 32];
        public.copy_from_slice(pair.public_key().as_ref());
        SigningKey {
            seed: *seed,
            pair: ManuallyDrop::new(pair),
            public: VerifyingKey(public),
        }
    }

    /// The seed (secret).
    pub fn to_bytes(&self) -> [u8; 32] {
        self.seed
    }

    /// The seed (secret).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.seed
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.public
    }

    pub fn sign(&self, message: &[u8]) -> Signature {
        let mut sig = [0u8; 64];
        sig.copy_from_slice(self.pair.sign(message).as_ref());
        Signature(sig)
    }
}

impl Clone for SigningKey {
    fn clone(&self) -> SigningKey {
        SigningKey::from_bytes(&self.seed)
    }
}

impl PartialEq for SigningKey {
    fn eq(&self, other: &SigningKey) -> bool {
        // Not constant time; keys are compared in tests and config reloads,
        // never against attacker-chosen guesses.
        self.seed == other.seed
    }
}

impl Eq for SigningKey {}

impl fmt::Debug for SigningKey {
    /// The public half only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("verifying_key", &self.public)
            .finish_non_exhaustive()
    }
}

impl Drop for SigningKey {
    fn drop(&mut self) {
        wipe(&mut self.seed);
        // SAFETY: the pointer covers exactly the key pair's own bytes
        // (fields and padding alike, as plain memory), which this key owns;
        // the pair sits in a ManuallyDrop and is neither read nor dropped
        // after this.
        let pair = unsafe {
            std::slice::from_raw_parts_mut(
                (&mut *self.pair as *mut rs::Ed25519KeyPair).cast::<u8>(),
                std::mem::size_of::<rs::Ed25519KeyPair>(),
            )
        };
        wipe(pair);
    }
}

/// Zeros `bytes` with volatile writes, which the optimiser may not drop as
/// stores to memory about to be freed.
fn wipe(bytes: &mut [u8]) {
    for b in bytes.iter_mut() {
        // SAFETY: `b` is a valid, aligned, exclusive reference.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// y coordinates (little-endian, sign bit clear) of the eight points of
/// order dividing 8, the only points `[8]P = 0` holds for: 0 (order 4),
/// 1 (the identity), p - 1 (order 2) and the y of the four points of order
/// 8 and its negation. Derived from curve25519-dalek's `EIGHT_TORSION`
/// (`tests/differential.rs` checks the list against it).
const SMALL_ORDER_Y: [[u8; 32]; 5] = [[0; 32], le(1), le_p_minus(1), ORDER_8_Y, ORDER_8_MINUS_Y];

const ORDER_8_Y: [u8; 32] = [
    0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
    0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05,
];
const ORDER_8_MINUS_Y: [u8; 32] = [
    0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
    0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a,
];

/// Whether `encoding` decodes to a point of small order. A decoder takes
/// y mod p, so besides the canonical y values above the 255-bit values p
/// and p + 1 (y = 0 and y = 1 again) count; the two order-8 values and
/// p - 1 are above 18, so no other non-canonical form reaches them. The
/// sign bit picks x and every x of a small-order y is small-order too.
pub fn small_order(encoding: &[u8; 32]) -> bool {
    let mut y = *encoding;
    y[31] &= 0x7f;
    SMALL_ORDER_Y.contains(&y) || y == le_p_minus(0) || y == le_p_plus_one()
}

/// `n` as a little-endian 32-byte integer.
const fn le(n: u8) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[0] = n;
    b
}

/// p - k for small k: p = 2^255 - 19 is ed ff .. ff 7f little-endian.
const fn le_p_minus(k: u8) -> [u8; 32] {
    let mut b = [0xff; 32];
    b[0] = 0xed - k;
    b[31] = 0x7f;
    b
}

const fn le_p_plus_one() -> [u8; 32] {
    let mut b = le_p_minus(0);
    b[0] += 1;
    b
}

fn hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_public_key_only() {
        let k = SigningKey::from_bytes(&[0xab; 32]);
        let text = format!("{k:?}");
        assert!(!text.contains("abab"), "{text}");
        assert!(text.contains(&format!("{:?}", k.verifying_key())), "{text}");
    }

    #[test]
    fn a_clone_signs_alike_and_outlives_the_original() {
        let k = SigningKey::from_bytes(&[5; 32]);
        let c = k.clone();
        let sig = k.sign(b"m");
        drop(k);
        assert_eq!(c.sign(b"m"), sig);
        assert_eq!(c.verifying_key().verify_strict(b"m", &sig), Ok(()));
        assert_eq!(
            c.verifying_key().verify_strict(b"n", &sig),
            Err(Error::BadSignature)
        );
    }
}
