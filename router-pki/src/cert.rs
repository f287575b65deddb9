//! Domain CA and router certificates (X.509, Ed25519 everywhere), made
//! with rcgen and signed by our own Ed25519 keys (the PKCS#8 v1 files of
//! [`crate::identity`]).
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

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyUsagePurpose, SanType, SerialNumber,
};

use crate::identity::{fill_random, Fingerprint};
use crate::pem;
use crate::x509::{self, CertReadError, PublicKey};

/// Default lifetime of a domain CA certificate (`--days`).
pub const CA_DAYS: u32 = 3650;
/// Default lifetime of a router certificate (`--days`).
pub const ROUTER_DAYS: u32 = 1095;
/// Certificates start one hour in the past, so a peer whose clock is a
/// little behind accepts a certificate issued just now.
const BACKDATE_S: u64 = 3600;

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
    /// The CA's subject cannot be written again exactly (multi-valued
    /// RDNs, repeated or unusual string types): a certificate naming it as
    /// issuer would not chain.
    IssuerName(String),
    /// rcgen refused the parameters.
    Generate(String),
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
            CertError::IssuerName(why) => write!(f, "the CA certificate's subject {why}"),
            CertError::Generate(e) => write!(f, "cannot generate the certificate: {e}"),
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

impl From<rcgen::Error> for CertError {
    fn from(e: rcgen::Error) -> Self {
        CertError::Generate(e.to_string())
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

    fn apply(&self, params: &mut CertificateParams) {
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        params.not_before = epoch + Duration::from_secs(self.not_before);
        params.not_after = epoch + Duration::from_secs(self.not_after);
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

/// Our Ed25519 key as rcgen's signer.
struct Ed25519Signer<'a> {
    key: &'a SigningKey,
    public: [u8; 32],
}

impl<'a> Ed25519Signer<'a> {
    fn new(key: &'a SigningKey) -> Self {
        Ed25519Signer {
            key,
            public: key.verifying_key().to_bytes(),
        }
    }
}

impl rcgen::PublicKeyData for Ed25519Signer<'_> {
    fn der_bytes(&self) -> &[u8] {
        &self.public
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ED25519
    }
}

impl rcgen::SigningKey for Ed25519Signer<'_> {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        Ok(self.key.sign(msg).to_bytes().to_vec())
    }
}

/// A subject's public key only (issue-router `--pubkey`).
struct Ed25519Public([u8; 32]);

impl rcgen::PublicKeyData for Ed25519Public {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ED25519
    }
}

fn random_serial() -> Result<SerialNumber, CertError> {
    let mut b = [0u8; 16];
    fill_random(&mut b).map_err(|_| CertError::Random)?;
    b[0] &= 0x7f; // a positive INTEGER
    b[0] |= 0x01; // and never a shorter one
    Ok(SerialNumber::from_slice(&b))
}

fn dns(name: &str) -> Result<SanType, CertError> {
    Ok(SanType::DnsName(name.try_into()?))
}

/// rcgen's defaults, less its placeholder CN ("rcgen self signed cert").
fn params_without_name() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
}

/// A domain CA certificate (DER) for `domain`, self-signed by `ca_key`.
pub fn init_domain(
    domain: &str,
    ca_key: &SigningKey,
    validity: Validity,
) -> Result<Vec<u8>, CertError> {
    check_domain(domain)?;
    let mut params = params_without_name();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "agentd domain CA");
    params.distinguished_name.push(DnType::CommonName, domain);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.serial_number = Some(random_serial()?);
    validity.apply(&mut params);
    Ok(params
        .self_signed(&Ed25519Signer::new(ca_key))?
        .der()
        .to_vec())
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
    check_router_id(router_id)?;
    let ca = x509::read(ca_cert).map_err(CertError::Read)?;
    if !ca.is_ca {
        return Err(CertError::NotCa);
    }
    let ca_fp = Fingerprint::of(&ca_key.verifying_key());
    if ca.key != PublicKey::Ed25519(ca_key.verifying_key().to_bytes()) {
        return Err(CertError::CaKeyMismatch {
            certificate: ca.key.fingerprint(),
            key: ca_fp,
        });
    }
    let mut names = vec![dns(router_id)?];
    if let Some(d) = domain.filter(|d| !d.is_empty()) {
        check_domain(d)?;
        names.push(dns(&format!("{router_id}.{d}"))?);
    }
    let mut issuer_params = CertificateParams::default();
    issuer_params.distinguished_name = issuer_name(&ca.subject)?;
    issuer_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let issuer = Issuer::from_params(&issuer_params, Ed25519Signer::new(ca_key));

    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, router_id);
    params.subject_alt_names = names;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(random_serial()?);
    // A router certificate outliving its CA would only fail later.
    let validity = Validity {
        not_after: validity.not_after.min(ca.not_after.max(0) as u64),
        ..validity
    };
    validity.apply(&mut params);
    let der = params
        .signed_by(&Ed25519Public(router_key.to_bytes()), &issuer)?
        .der()
        .to_vec();
    let at = UNIX_EPOCH + Duration::from_secs(validity.not_before.max(ca.not_before.max(0) as u64));
    crate::tls::verify_issued(ca_cert, &der, router_id, at)
        .map_err(|e| CertError::DoesNotChain(e.to_string()))?;
    Ok(der)
}

/// The CA's subject as rcgen writes it again, byte for byte; refused
/// where that is not possible (the issued certificate would not chain).
fn issuer_name(subject: &x509::Name) -> Result<DistinguishedName, CertError> {
    if subject.multi_valued {
        return Err(CertError::IssuerName("has a multi-valued RDN".into()));
    }
    let mut dn = DistinguishedName::new();
    for a in &subject.attrs {
        let ty = DnType::from_oid(&a.oid);
        if dn.get(&ty).is_some() {
            return Err(CertError::IssuerName(format!(
                "repeats attribute {}",
                crate::der::oid_text(&a.oid)
            )));
        }
        let text = || {
            String::from_utf8(a.value.clone())
                .map_err(|_| CertError::IssuerName("has a string that is not text".into()))
        };
        let value = match a.tag {
            0x0c => DnValue::Utf8String(text()?),
            0x13 => DnValue::PrintableString(text()?.try_into()?),
            0x16 => DnValue::Ia5String(text()?.try_into()?),
            0x14 => DnValue::TeletexString(text()?.try_into()?),
            other => {
                return Err(CertError::IssuerName(format!(
                    "uses string type 0x{other:02x}"
                )))
            }
        };
        dn.push(ty, value);
    }
    Ok(dn)
}

/// A self-signed certificate (DER) for `router_id` from its identity key:
/// what a router without `router_cert` presents (peers pin the key; the
/// validity is the widest X.509 allows, since a pin does not expire).
pub fn self_signed(key: &SigningKey, router_id: &str) -> Result<Vec<u8>, CertError> {
    check_router_id(router_id)?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, router_id);
    params.subject_alt_names = vec![dns(router_id)?];
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    // A fixed serial derived from the key: the same key gives the same
    // certificate on every start.
    let fp = Fingerprint::of(&key.verifying_key()).0;
    let mut serial = fp[..16].to_vec();
    serial[0] = (serial[0] & 0x7f) | 0x01;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(params.self_signed(&Ed25519Signer::new(key))?.der().to_vec())
}

/// PEM text of a DER certificate.
pub fn cert_pem(der: &[u8]) -> String {
    pem::encode("CERTIFICATE", der)
}

#[cfg(test)]
mod tests {
    use super::*;

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
