//! Domain CA and router certificates (X.509, Ed25519 everywhere), written
//! with our own DER writer ([`crate::der::write`], the structure in
//! `build`) and signed by our own Ed25519 keys (the PKCS#8 v1 files of
//! [`crate::identity`]). rcgen made them until it proved to be 26 KiB of
//! the router binary for three fixed shapes; the output is unchanged.
//!
//! - A domain CA is self-signed: CN = the domain, basicConstraints CA
//!   (path length 0: it signs routers directly), keyUsage certSign.
//! - A router certificate: CN = router_id, subjectAltName dNSName
//!   router_id (and `router_id.domain` when a domain is given), EKU
//!   serverAuth + clientAuth (a router is both ends of a link).
//! - A router without a CA-issued certificate presents a self-signed one
//!   made in memory from its identity key ([`self_signed`]); peers pin
//!   its key.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use edkey::{SigningKey, VerifyingKey};

use crate::der::write::WriteError;
use crate::identity::{fill_random, Fingerprint};
use crate::pem;
use crate::x509::{self, CertReadError, PublicKey};

mod build;
#[cfg(test)]
mod compat_tests;

use build::{Role, Tbs, COMMON_NAME, ORGANIZATION};

/// Default lifetime of a domain CA certificate (`--days`).
pub const CA_DAYS: u32 = 3650;
/// Default lifetime of a router certificate (`--days`).
pub const ROUTER_DAYS: u32 = 1095;
/// Certificates start one hour in the past, so a peer whose clock is a
/// little behind accepts a certificate issued just now.
const BACKDATE_S: u64 = 3600;
/// The validity of [`self_signed`]: 1975-01-01 to 4096-01-01, what rcgen
/// wrote by default (a pin does not expire, and the same key must keep
/// giving the same certificate).
const SELF_SIGNED_VALIDITY: Validity = Validity {
    not_before: 157_766_400,
    not_after: 67_090_118_400,
};

/// Why a certificate could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertError {
    /// A router_id or domain that cannot be a certificate dNSName.
    BadName {
        what: &'static str,
        value: String,
        reason: &'static str,
    },
    /// The CA certificate could not be read.
    Read(CertReadError),
    /// The "CA" certificate has no basicConstraints CA.
    NotCa,
    /// The CA key file does not hold the key of the CA certificate.
    CaKeyMismatch {
        certificate: Option<Fingerprint>,
        key: Fingerprint,
    },
    /// A value X.509 cannot carry (a validity after the year 9999).
    Encode(WriteError),
    /// The issued certificate does not verify against the CA (a bug or an
    /// unusual CA certificate; nothing is written).
    DoesNotChain(String),
    /// No randomness for the serial number.
    Random,
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertError::BadName {
                what,
                value,
                reason,
            } => write!(f, "{what} {value:?} cannot be a certificate name: {reason}"),
            CertError::Read(e) => write!(f, "CA {e}"),
            CertError::NotCa => {
                f.write_str("the CA certificate is not a CA (no basicConstraints CA)")
            }
            CertError::CaKeyMismatch { certificate, key } => match certificate {
                Some(c) => write!(
                    f,
                    "the CA key ({key}) is not the key of the CA certificate ({c})"
                ),
                None => write!(
                    f,
                    "the CA certificate's key is not Ed25519, so it is not the CA key ({key})"
                ),
            },
            CertError::Encode(e) => write!(f, "cannot write the certificate: {e}"),
            CertError::DoesNotChain(e) => {
                write!(
                    f,
                    "the issued certificate does not verify against the CA: {e}"
                )
            }
            CertError::Random => f.write_str("no randomness for the serial number"),
        }
    }
}

impl std::error::Error for CertError {}

impl From<WriteError> for CertError {
    fn from(e: WriteError) -> Self {
        CertError::Encode(e)
    }
}

/// A certificate's validity period, Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: u64,
    pub not_after: u64,
}

impl Validity {
    /// From an hour before `now` to `days` days after it.
    pub fn days_from(now: SystemTime, days: u32) -> Validity {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        Validity {
            not_before: now.saturating_sub(BACKDATE_S),
            not_after: now + u64::from(days) * 86400,
        }
    }
}

/// Checks that `value` is a DNS label a certificate can carry and webpki
/// can match (letters, digits, `-`; not all digits).
pub fn check_router_id(value: &str) -> Result<(), CertError> {
    check_label(value).map_err(|reason| CertError::BadName {
        what: "router_id",
        value: value.to_string(),
        reason,
    })
}

/// Checks a domain name (dot-separated labels, at most 253 characters).
pub fn check_domain(value: &str) -> Result<(), CertError> {
    let bad = |reason| CertError::BadName {
        what: "domain",
        value: value.to_string(),
        reason,
    };
    if value.len() > 253 {
        return Err(bad("longer than 253 characters"));
    }
    value.split('.').try_for_each(check_label).map_err(bad)?;
    if value
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|c| c.is_ascii_digit()))
    {
        return Err(bad("its last label is all digits"));
    }
    Ok(())
}

fn check_label(l: &str) -> Result<(), &'static str> {
    if l.is_empty() || l.len() > 63 {
        return Err("a label must be 1 to 63 characters");
    }
    if !l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-') {
        return Err("only letters, digits and '-' are allowed");
    }
    if l.starts_with('-') || l.ends_with('-') {
        return Err("a label cannot start or end with '-'");
    }
    if l.bytes().all(|c| c.is_ascii_digit()) {
        return Err("an all-digit name is not a DNS name");
    }
    Ok(())
}

/// 16 random bytes, positive and never shorter as an INTEGER.
fn random_serial() -> Result<[u8; 16], CertError> {
    let mut b = [0u8; 16];
    fill_random(&mut b).map_err(|_| CertError::Random)?;
    Ok(serial_from(b))
}

fn serial_from(mut b: [u8; 16]) -> [u8; 16] {
    b[0] &= 0x7f; // a positive INTEGER
    b[0] |= 0x01; // and never a shorter one
    b
}

/// A domain CA certificate (DER) for `domain`, self-signed by `ca_key`.
pub fn init_domain(
    domain: &str,
    ca_key: &SigningKey,
    validity: Validity,
) -> Result<Vec<u8>, CertError> {
    check_domain(domain)?;
    domain_ca(domain, ca_key, validity, &random_serial()?)
}

fn domain_ca(
    domain: &str,
    ca_key: &SigningKey,
    validity: Validity,
    serial: &[u8; 16],
) -> Result<Vec<u8>, CertError> {
    let name = build::name(&[(ORGANIZATION, "agentd domain CA"), (COMMON_NAME, domain)]);
    let tbs = Tbs {
        serial,
        issuer: &name,
        not_before: validity.not_before,
        not_after: validity.not_after,
        subject: &name,
        key: &ca_key.verifying_key().to_bytes(),
        role: Role::Ca,
    };
    Ok(build::signed(&tbs, ca_key)?)
}

/// A router certificate (DER) for `router_id` and its identity key,
/// signed by the domain CA. The result is verified against the CA before
/// it is returned.
pub fn issue_router(
    ca_key: &SigningKey,
    ca_cert: &[u8],
    router_id: &str,
    domain: Option<&str>,
    router_key: &VerifyingKey,
    validity: Validity,
) -> Result<Vec<u8>, CertError> {
    issue(
        ca_key,
        ca_cert,
        router_id,
        domain,
        router_key,
        validity,
        random_serial,
    )
}

/// [`issue_router`] with the serial from `serial` (the tests' is fixed).
fn issue(
    ca_key: &SigningKey,
    ca_cert: &[u8],
    router_id: &str,
    domain: Option<&str>,
    router_key: &VerifyingKey,
    validity: Validity,
    serial: impl FnOnce() -> Result<[u8; 16], CertError>,
) -> Result<Vec<u8>, CertError> {
    check_router_id(router_id)?;
    let ca = x509::read(ca_cert).map_err(CertError::Read)?;
    if !ca.is_ca {
        return Err(CertError::NotCa);
    }
    let ca_public = ca_key.verifying_key().to_bytes();
    if ca.key != PublicKey::Ed25519(ca_public) {
        return Err(CertError::CaKeyMismatch {
            certificate: ca.key.fingerprint(),
            key: Fingerprint::of(&ca_key.verifying_key()),
        });
    }
    let mut names = vec![router_id.to_string()];
    if let Some(d) = domain.filter(|d| !d.is_empty()) {
        check_domain(d)?;
        names.push(format!("{router_id}.{d}"));
    }
    // A router certificate outliving its CA would only fail later.
    let validity = Validity {
        not_after: validity.not_after.min(ca.not_after.max(0) as u64),
        ..validity
    };
    let serial = serial()?;
    let subject = build::name(&[(COMMON_NAME, router_id)]);
    let tbs = Tbs {
        serial: &serial,
        // The CA's subject as it is, so the names match byte for byte
        // whatever wrote the CA certificate.
        issuer: &ca.subject_der,
        not_before: validity.not_before,
        not_after: validity.not_after,
        subject: &subject,
        key: &router_key.to_bytes(),
        role: Role::Router {
            dns_names: &names,
            authority: Some(build::key_id(&ca_public)),
        },
    };
    let der = build::signed(&tbs, ca_key)?;
    let at = UNIX_EPOCH + Duration::from_secs(validity.not_before.max(ca.not_before.max(0) as u64));
    crate::tls::verify_issued(ca_cert, &der, router_id, at)
        .map_err(|e| CertError::DoesNotChain(e.to_string()))?;
    Ok(der)
}

/// A self-signed certificate (DER) for `router_id` from its identity key:
/// what a router without `router_cert` presents (peers pin the key; the
/// validity is fixed, 1975 to 4096, since a pin does not expire and the
/// same key must give the same certificate).
pub fn self_signed(key: &SigningKey, router_id: &str) -> Result<Vec<u8>, CertError> {
    check_router_id(router_id)?;
    let public = key.verifying_key().to_bytes();
    // A fixed serial derived from the key: the same key gives the same
    // certificate on every start.
    let mut serial = [0u8; 16];
    serial.copy_from_slice(&Fingerprint::of_raw(&public).0[..16]);
    let name = build::name(&[(COMMON_NAME, router_id)]);
    let names = [router_id.to_string()];
    let tbs = Tbs {
        serial: &serial_from(serial),
        issuer: &name,
        not_before: SELF_SIGNED_VALIDITY.not_before,
        not_after: SELF_SIGNED_VALIDITY.not_after,
        subject: &name,
        key: &public,
        role: Role::Router {
            dns_names: &names,
            authority: None,
        },
    };
    Ok(build::signed(&tbs, key)?)
}

/// PEM text of a DER certificate.
pub fn cert_pem(der: &[u8]) -> String {
    pem::encode("CERTIFICATE", der)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa};

    /// rcgen's defaults, less its placeholder CN ("rcgen self signed cert").
    fn params_without_name() -> CertificateParams {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
    }

    #[test]
    fn names_are_checked_before_anything_is_signed() {
        assert!(check_router_id("router-b").is_ok());
        for bad in ["", "-r", "r-", "a.b", "ünï", "123", &"x".repeat(64)] {
            assert!(check_router_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_domain("lab.example").is_ok());
        assert!(check_domain("lab..example").is_err());
        assert!(check_domain("10.0.0.1").is_err());
    }

    #[test]
    fn domain_ca_is_a_self_issued_ed25519_ca() {
        let key = SigningKey::from_bytes(&[5; 32]);
        let v = Validity::days_from(SystemTime::now(), 10);
        let der = init_domain("lab.example", &key, v).unwrap();
        let s = x509::read(&der).unwrap();
        assert!(s.is_ca && s.self_issued());
        assert_eq!(s.subject.common_name().as_deref(), Some("lab.example"));
        assert_eq!(s.key, PublicKey::Ed25519(key.verifying_key().to_bytes()));
        assert_eq!(s.not_after - s.not_before, 10 * 86400 + 3600);
    }

    #[test]
    fn router_cert_names_the_router_and_its_key() {
        let ca_key = SigningKey::from_bytes(&[5; 32]);
        let v = Validity::days_from(SystemTime::now(), 10);
        let ca = init_domain("lab.example", &ca_key, v).unwrap();
        let router = SigningKey::from_bytes(&[6; 32]).verifying_key();
        let der = issue_router(&ca_key, &ca, "router-b", Some("lab.example"), &router, v).unwrap();
        let s = x509::read(&der).unwrap();
        assert_eq!(s.dns_names, ["router-b", "router-b.lab.example"]);
        assert_eq!(s.subject.common_name().as_deref(), Some("router-b"));
        assert_eq!(s.issuer, x509::read(&ca).unwrap().subject);
        assert!(!s.is_ca);
        assert_eq!(s.key, PublicKey::Ed25519(router.to_bytes()));
    }

    #[test]
    fn issuing_refuses_a_ca_key_that_is_not_the_certificates() {
        let ca_key = SigningKey::from_bytes(&[5; 32]);
        let v = Validity::days_from(SystemTime::now(), 10);
        let ca = init_domain("lab.example", &ca_key, v).unwrap();
        let other = SigningKey::from_bytes(&[9; 32]);
        let router = SigningKey::from_bytes(&[6; 32]).verifying_key();
        assert!(matches!(
            issue_router(&other, &ca, "router-b", None, &router, v),
            Err(CertError::CaKeyMismatch { .. })
        ));
        // A router certificate is no CA.
        let leaf = self_signed(&other, "router-c").unwrap();
        assert_eq!(
            issue_router(&other, &leaf, "router-b", None, &router, v),
            Err(CertError::NotCa)
        );
    }

    #[test]
    fn a_ca_with_another_key_type_is_no_domain_ca() {
        let kp = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = params_without_name();
        params
            .distinguished_name
            .push(DnType::CommonName, "ecdsa.example");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let der = params.self_signed(&kp).unwrap().der().to_vec();
        let err = crate::tls::DomainCa::from_der(der.clone(), None).unwrap_err();
        assert!(err.contains("not Ed25519"), "{err}");
        // Nor can it issue: its key is not an Ed25519 CA key.
        let router = SigningKey::from_bytes(&[6; 32]).verifying_key();
        let v = Validity::days_from(SystemTime::now(), 1);
        let ours = SigningKey::from_bytes(&[5; 32]);
        assert!(matches!(
            issue_router(&ours, &der, "router-b", None, &router, v),
            Err(CertError::CaKeyMismatch {
                certificate: None,
                ..
            })
        ));
    }

    #[test]
    fn self_signed_is_stable_for_one_key() {
        let key = SigningKey::from_bytes(&[8; 32]);
        assert_eq!(
            self_signed(&key, "router-a").unwrap(),
            self_signed(&key, "router-a").unwrap()
        );
        let s = x509::read(&self_signed(&key, "router-a").unwrap()).unwrap();
        assert_eq!(s.dns_names, ["router-a"]);
        assert!(s.self_issued() && !s.is_ca);
    }
}
