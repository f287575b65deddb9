//! The DER of our three kinds of certificate (RFC 5280), Ed25519 signed.
//!
//! Field order, extension order, criticality and string types are those
//! rcgen 0.14 wrote for the same parameters, so certificates made before
//! and after the switch to [`crate::der::write`] are alike (the tests
//! compare both byte for byte): UTF8String names, one attribute per RDN;
//! extensions authorityKeyIdentifier (issued only), subjectAltName,
//! keyUsage (critical), extKeyUsage (routers), subjectKeyIdentifier,
//! basicConstraints (critical); key identifiers are the first 20 bytes of
//! the SHA-256 of the key's SubjectPublicKeyInfo (RFC 7093 method 1).

use edkey::Sha256;
use edkey::SigningKey;

use crate::der::write::{self as w, WriteError};

// Object identifiers, content octets.
const ED25519: &[u8] = &[0x2b, 0x65, 0x70]; // 1.3.101.112
pub(super) const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03]; // 2.5.4.3
pub(super) const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a]; // 2.5.4.10
const SUBJECT_KEY_ID: &[u8] = &[0x55, 0x1d, 0x0e]; // 2.5.29.14
const KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x0f]; // 2.5.29.15
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11]; // 2.5.29.17
const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1d, 0x13]; // 2.5.29.19
const AUTHORITY_KEY_ID: &[u8] = &[0x55, 0x1d, 0x23]; // 2.5.29.35
const EXT_KEY_USAGE: &[u8] = &[0x55, 0x1d, 0x25]; // 2.5.29.37
const SERVER_AUTH: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 3, 1]; // 1.3.6.1.5.5.7.3.1
const CLIENT_AUTH: &[u8] = &[0x2b, 6, 1, 5, 5, 7, 3, 2]; // 1.3.6.1.5.5.7.3.2

/// GeneralName `[2] IMPLICIT IA5String`.
const DNS_NAME: u8 = 0x82;
/// AuthorityKeyIdentifier `keyIdentifier [0] IMPLICIT OCTET STRING`.
const KEY_IDENTIFIER: u8 = 0x80;

/// What the certificate is for; decides its extensions.
pub(super) enum Role<'a> {
    /// A domain CA: signs router certificates directly (path length 0).
    Ca,
    /// A router, both ends of a link; `authority` is the issuing CA's key
    /// identifier (none when self-signed).
    Router {
        dns_names: &'a [String],
        authority: Option<[u8; 20]>,
    },
}

/// The to-be-signed fields.
pub(super) struct Tbs<'a> {
    pub serial: &'a [u8],
    /// The issuer's Name, whole DER.
    pub issuer: &'a [u8],
    pub not_before: u64,
    pub not_after: u64,
    /// The subject's Name, whole DER.
    pub subject: &'a [u8],
    pub key: &'a [u8; 32],
    pub role: Role<'a>,
}

/// A Name of one UTF8String attribute per RDN, in the order given.
pub(super) fn name(attrs: &[(&[u8], &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    w::sequence(&mut out, |o| {
        for (oid, value) in attrs {
            w::set(o, |o| {
                w::sequence(o, |o| {
                    w::oid(o, oid);
                    w::utf8_string(o, value);
                });
            });
        }
    });
    out
}

/// RFC 8410: the algorithm without parameters.
fn algorithm(out: &mut Vec<u8>) {
    w::sequence(out, |o| w::oid(o, ED25519));
}

fn spki(out: &mut Vec<u8>, key: &[u8; 32]) {
    w::sequence(out, |o| {
        algorithm(o);
        w::bit_string(o, 0, key);
    });
}

/// RFC 7093 method 1, as rcgen derives key identifiers.
pub(super) fn key_id(key: &[u8; 32]) -> [u8; 20] {
    let mut der = Vec::with_capacity(44);
    spki(&mut der, key);
    let digest = Sha256::digest(&der);
    let mut id = [0u8; 20];
    id.copy_from_slice(&digest[..20]);
    id
}

/// An Extension whose extnValue `fill` writes.
fn extension(out: &mut Vec<u8>, oid: &[u8], critical: bool, fill: impl FnOnce(&mut Vec<u8>)) {
    w::sequence(out, |o| {
        w::oid(o, oid);
        if critical {
            w::boolean(o, true);
        }
        let mut value = Vec::new();
        fill(&mut value);
        w::octet_string(o, &value);
    });
}

/// The Extensions' elements.
fn extensions(tbs: &Tbs<'_>) -> Result<Vec<u8>, WriteError> {
    let mut out = Vec::new();
    let o = &mut out;
    if let Role::Router {
        dns_names,
        authority,
    } = &tbs.role
    {
        if let Some(id) = authority {
            extension(o, AUTHORITY_KEY_ID, false, |o| {
                w::sequence(o, |o| w::tlv(o, KEY_IDENTIFIER, id));
            });
        }
        // Non-critical: the subject is not empty (RFC 5280 §4.2.1.6).
        if !dns_names.is_empty() {
            let mut names = Vec::new();
            for n in dns_names.iter() {
                w::ia5_string(&mut names, DNS_NAME, n)?;
            }
            extension(o, SUBJECT_ALT_NAME, false, |o| {
                w::tlv(o, crate::der::SEQUENCE, &names);
            });
        }
    }
    // keyUsage bits (RFC 5280 §4.2.1.3): digitalSignature is bit 0,
    // keyCertSign 5, cRLSign 6; trailing zero bits are not written.
    let (unused, bits) = match tbs.role {
        Role::Ca => (1, 0x06),
        Role::Router { .. } => (7, 0x80),
    };
    extension(o, KEY_USAGE, true, |o| w::bit_string(o, unused, &[bits]));
    if let Role::Router { .. } = tbs.role {
        extension(o, EXT_KEY_USAGE, false, |o| {
            w::sequence(o, |o| {
                w::oid(o, SERVER_AUTH);
                w::oid(o, CLIENT_AUTH);
            });
        });
    }
    extension(o, SUBJECT_KEY_ID, false, |o| {
        w::octet_string(o, &key_id(tbs.key));
    });
    // A router's is an empty SEQUENCE (cA FALSE by default): said
    // explicitly, so it can never be taken for a CA.
    extension(o, BASIC_CONSTRAINTS, true, |o| {
        w::sequence(o, |o| {
            if let Role::Ca = tbs.role {
                w::boolean(o, true);
                w::unsigned(o, &[0]); // pathLenConstraint
            }
        });
    });
    Ok(out)
}

/// The certificate: tbsCertificate, algorithm, signature by `signer`.
/// Refused only for a time after 9999 or a name that is not ASCII.
pub(super) fn signed(tbs: &Tbs<'_>, signer: &SigningKey) -> Result<Vec<u8>, WriteError> {
    let mut validity = Vec::new();
    w::time(&mut validity, tbs.not_before)?;
    w::time(&mut validity, tbs.not_after)?;
    let extensions = extensions(tbs)?;
    let mut body = Vec::new();
    w::sequence(&mut body, |o| {
        w::explicit(o, 0, |o| w::unsigned(o, &[2])); // v3
        w::unsigned(o, tbs.serial);
        algorithm(o);
        o.extend_from_slice(tbs.issuer);
        w::tlv(o, crate::der::SEQUENCE, &validity);
        o.extend_from_slice(tbs.subject);
        spki(o, tbs.key);
        w::explicit(o, 3, |o| w::tlv(o, crate::der::SEQUENCE, &extensions));
    });
    let signature = signer.sign(&body).to_bytes();
    let mut out = Vec::new();
    w::sequence(&mut out, |o| {
        o.extend_from_slice(&body);
        algorithm(o);
        w::bit_string(o, 0, &signature);
    });
    Ok(out)
}
