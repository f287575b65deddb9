//! Our certificates against independent readers and writers: rcgen (which
//! made them before our DER writer; a dev-dependency now) must write the
//! same bytes for the same key, serial and validity — Ed25519 signatures
//! are deterministic, so nothing differs, signature included — openssl
//! (where installed) must read and verify them, and webpki must chain
//! them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyUsagePurpose, SanType, SerialNumber,
};
use rustls_pki_types::CertificateDer;

use super::*;

/// One of our keys as rcgen's signer.
struct RcgenKey<'a>(&'a SigningKey, [u8; 32]);

impl<'a> RcgenKey<'a> {
    fn new(key: &'a SigningKey) -> Self {
        RcgenKey(key, key.verifying_key().to_bytes())
    }
}

impl rcgen::PublicKeyData for RcgenKey<'_> {
    fn der_bytes(&self) -> &[u8] {
        &self.1
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ED25519
    }
}

impl rcgen::SigningKey for RcgenKey<'_> {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        Ok(self.0.sign(msg).to_bytes().to_vec())
    }
}

struct RcgenPublic([u8; 32]);

impl rcgen::PublicKeyData for RcgenPublic {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ED25519
    }
}

fn rcgen_params(v: Option<Validity>, serial: &[u8]) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    if let Some(v) = v {
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        params.not_before = epoch + Duration::from_secs(v.not_before);
        params.not_after = epoch + Duration::from_secs(v.not_after);
    }
    params.serial_number = Some(SerialNumber::from_slice(serial));
    params
}

fn ca_name(domain: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "agentd domain CA");
    dn.push(DnType::CommonName, domain);
    dn
}

/// What `init_domain` made with rcgen.
fn rcgen_domain_ca(domain: &str, key: &SigningKey, v: Validity, serial: &[u8]) -> Vec<u8> {
    let mut params = rcgen_params(Some(v), serial);
    params.distinguished_name = ca_name(domain);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&RcgenKey::new(key)).unwrap();
    cert.der().to_vec()
}

fn rcgen_router_params(
    router_id: &str,
    names: &[&str],
    v: Option<Validity>,
    serial: &[u8],
) -> CertificateParams {
    let mut params = rcgen_params(v, serial);
    params
        .distinguished_name
        .push(DnType::CommonName, router_id);
    params.subject_alt_names = names
        .iter()
        .map(|n| SanType::DnsName((*n).try_into().unwrap()))
        .collect();
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params
}

/// What `issue_router` made with rcgen, for a CA named `issuer`.
fn rcgen_router(
    issuer: DistinguishedName,
    ca_key: &SigningKey,
    router_id: &str,
    names: &[&str],
    router_key: &VerifyingKey,
    v: Validity,
    serial: &[u8],
) -> Vec<u8> {
    let mut issuer_params = CertificateParams::default();
    issuer_params.distinguished_name = issuer;
    issuer_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let issuer = Issuer::from_params(&issuer_params, RcgenKey::new(ca_key));
    let mut params = rcgen_router_params(router_id, names, Some(v), serial);
    params.use_authority_key_identifier_extension = true;
    let cert = params
        .signed_by(&RcgenPublic(router_key.to_bytes()), &issuer)
        .unwrap();
    cert.der().to_vec()
}

const SERIAL: [u8; 16] = [0x3a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff];

fn validities() -> Vec<Validity> {
    let v = |not_before, not_after| Validity {
        not_before,
        not_after,
    };
    vec![
        Validity::days_from(SystemTime::now(), CA_DAYS),
        // The last UTCTime second, then GeneralizedTime.
        v(0, 2_524_607_999),
        v(1_709_164_800, 2_524_608_000),
        // rcgen's (and self_signed's) default span.
        SELF_SIGNED_VALIDITY,
    ]
}

#[test]
fn domain_ca_is_byte_for_byte_what_rcgen_wrote() {
    for (seed, domain) in [(5, "lab.example"), (7, "x"), (9, &*"long-name".repeat(7))] {
        let key = SigningKey::from_bytes(&[seed; 32]);
        for v in validities() {
            assert_eq!(
                domain_ca(domain, &key, v, &SERIAL).unwrap(),
                rcgen_domain_ca(domain, &key, v, &SERIAL),
                "{domain} {v:?}"
            );
        }
    }
}

#[test]
fn router_certificate_is_byte_for_byte_what_rcgen_wrote() {
    let ca_key = SigningKey::from_bytes(&[5; 32]);
    let ca_v = Validity::days_from(SystemTime::now(), CA_DAYS);
    let ca = domain_ca("lab.example", &ca_key, ca_v, &SERIAL).unwrap();
    let router = SigningKey::from_bytes(&[6; 32]).verifying_key();
    let router_v = Validity::days_from(SystemTime::now(), ROUTER_DAYS);
    let serial = serial_from([0xee; 16]);
    for (domain, names) in [
        (None, &["router-b"][..]),
        (Some(""), &["router-b"][..]),
        (
            Some("lab.example"),
            &["router-b", "router-b.lab.example"][..],
        ),
    ] {
        let ours = issue(&ca_key, &ca, "router-b", domain, &router, router_v, || {
            Ok(serial)
        })
        .unwrap();
        let theirs = rcgen_router(
            ca_name("lab.example"),
            &ca_key,
            "router-b",
            names,
            &router,
            router_v,
            &serial,
        );
        assert_eq!(ours, theirs, "{domain:?}");
    }
    // Longer than the CA: cut to the CA's end, as before.
    let long = Validity {
        not_after: ca_v.not_after + 86400,
        ..router_v
    };
    let ours = issue(&ca_key, &ca, "router-b", None, &router, long, || Ok(serial)).unwrap();
    let cut = Validity {
        not_after: ca_v.not_after,
        ..router_v
    };
    let theirs = rcgen_router(
        ca_name("lab.example"),
        &ca_key,
        "router-b",
        &["router-b"],
        &router,
        cut,
        &serial,
    );
    assert_eq!(ours, theirs);
}

#[test]
fn self_signed_is_byte_for_byte_what_rcgen_wrote() {
    for (seed, router_id) in [(8, "router-a"), (0, "r"), (255, "router-with-a-long-id")] {
        let key = SigningKey::from_bytes(&[seed; 32]);
        let fp = Fingerprint::of(&key.verifying_key()).0;
        let mut serial = fp[..16].to_vec();
        serial[0] = (serial[0] & 0x7f) | 0x01;
        // rcgen's default validity (None): 1975-01-01 to 4096-01-01.
        let params = rcgen_router_params(router_id, &[router_id], None, &serial);
        let theirs = params.self_signed(&RcgenKey::new(&key)).unwrap();
        assert_eq!(self_signed(&key, router_id).unwrap(), theirs.der().to_vec());
    }
    let s =
        x509::read(&self_signed(&SigningKey::from_bytes(&[8; 32]), "router-a").unwrap()).unwrap();
    assert_eq!((s.not_before, s.not_after), (157_766_400, 67_090_118_400));
}

#[test]
fn issuer_is_the_ca_subject_whatever_its_string_types() {
    // A CA subject the rcgen-based issuer refused to rebuild (a
    // BMPString) next to a PrintableString: now copied as it is.
    let ca_key = SigningKey::from_bytes(&[5; 32]);
    let mut params = rcgen_params(Some(Validity::days_from(SystemTime::now(), 30)), &SERIAL);
    params.distinguished_name.push(
        DnType::CountryName,
        DnValue::PrintableString("DE".try_into().unwrap()),
    );
    params.distinguished_name.push(
        DnType::CommonName,
        DnValue::BmpString("lab.example".try_into().unwrap()),
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = params
        .self_signed(&RcgenKey::new(&ca_key))
        .unwrap()
        .der()
        .to_vec();
    let router = SigningKey::from_bytes(&[6; 32]).verifying_key();
    let v = Validity::days_from(SystemTime::now(), 10);
    // issue_router itself checks the chain with webpki.
    let leaf = issue_router(&ca_key, &ca, "router-b", None, &router, v).unwrap();
    let ca_subject = x509::read(&ca).unwrap().subject_der;
    assert_eq!(ca_subject[..2], [0x30, ca_subject.len() as u8 - 2]);
    assert!(leaf.windows(ca_subject.len()).any(|w| w == ca_subject));
    assert_eq!(
        x509::read(&leaf).unwrap().issuer,
        x509::read(&ca).unwrap().subject
    );
}

#[test]
fn webpki_chains_a_router_certificate_for_its_names_only() {
    let ca_key = SigningKey::from_bytes(&[5; 32]);
    let v = Validity::days_from(SystemTime::now(), 30);
    let ca = init_domain("lab.example", &ca_key, v).unwrap();
    let router = SigningKey::from_bytes(&[6; 32]).verifying_key();
    let leaf = issue_router(&ca_key, &ca, "router-b", Some("lab.example"), &router, v).unwrap();
    let domain = crate::tls::DomainCa::from_der(ca, Some("lab.example")).unwrap();
    let chain = [CertificateDer::from(leaf)];
    let now = SystemTime::now();
    assert_eq!(domain.check(&chain, "router-b", now), Ok(()));
    assert!(matches!(
        domain.check(&chain, "router-c", now),
        Err(crate::tls::TrustError::NameMismatch { .. })
    ));
    // Outside its validity it does not chain.
    let later = UNIX_EPOCH + Duration::from_secs(v.not_after + 1);
    assert!(domain.check(&chain, "router-b", later).is_err());
}

/// A directory of this test's own, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("router-pki-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, der: &[u8]) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, cert_pem(der)).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// openssl's stdout for `args`, or None when openssl is not installed.
fn openssl(args: &[&str], files: &[&Path]) -> Option<String> {
    let out = match Command::new("openssl").args(args).args(files).output() {
        Ok(out) => out,
        Err(e) => {
            eprintln!("openssl not run ({e}): skipping its checks");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "openssl {args:?} {files:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn text(path: &Path) -> Option<String> {
    openssl(&["x509", "-noout", "-text", "-in"], &[path])
}

#[test]
fn openssl_reads_all_three_kinds_and_verifies_the_chain() {
    let dir = TempDir::new("openssl");
    let ca_key = SigningKey::from_bytes(&[5; 32]);
    let v = Validity::days_from(SystemTime::now(), 30);
    let ca = init_domain("lab.example", &ca_key, v).unwrap();
    let router = SigningKey::from_bytes(&[6; 32]);
    let leaf = issue_router(
        &ca_key,
        &ca,
        "router-b",
        Some("lab.example"),
        &router.verifying_key(),
        v,
    )
    .unwrap();
    let own = self_signed(&router, "router-a").unwrap();
    let (ca_path, leaf_path, own_path) = (
        dir.write("ca.pem", &ca),
        dir.write("leaf.pem", &leaf),
        dir.write("own.pem", &own),
    );

    let Some(ca_text) = text(&ca_path) else {
        return;
    };
    for want in [
        "Version: 3 (0x2)",
        "Signature Algorithm: ED25519",
        "Issuer: O = agentd domain CA, CN = lab.example",
        "Subject: O = agentd domain CA, CN = lab.example",
        "X509v3 Key Usage: critical\n                Certificate Sign, CRL Sign",
        "X509v3 Basic Constraints: critical\n                CA:TRUE, pathlen:0",
        "X509v3 Subject Key Identifier",
    ] {
        assert!(ca_text.contains(want), "{want:?} not in\n{ca_text}");
    }
    let leaf_text = text(&leaf_path).unwrap();
    for want in [
        "Issuer: O = agentd domain CA, CN = lab.example",
        "Subject: CN = router-b",
        "X509v3 Authority Key Identifier",
        "DNS:router-b, DNS:router-b.lab.example",
        "X509v3 Key Usage: critical\n                Digital Signature",
        "TLS Web Server Authentication, TLS Web Client Authentication",
        "X509v3 Basic Constraints: critical\n                CA:FALSE",
    ] {
        assert!(leaf_text.contains(want), "{want:?} not in\n{leaf_text}");
    }
    let own_text = text(&own_path).unwrap();
    for want in [
        "Issuer: CN = router-a",
        "Not Before: Jan  1 00:00:00 1975 GMT",
        "Not After : Jan  1 00:00:00 4096 GMT",
        "DNS:router-a",
    ] {
        assert!(own_text.contains(want), "{want:?} not in\n{own_text}");
    }
    // Both key identifiers are the CA's key id: openssl checks them (and
    // the signature) in strict mode.
    let ca_arg = ca_path.to_string_lossy().into_owned();
    let verified = openssl(
        &[
            "verify",
            "-x509_strict",
            "-purpose",
            "sslserver",
            "-CAfile",
            &ca_arg,
        ],
        &[&leaf_path],
    )
    .unwrap();
    assert!(verified.contains(": OK"), "{verified}");
    let verified = openssl(
        &[
            "verify",
            "-x509_strict",
            "-purpose",
            "sslclient",
            "-CAfile",
            &ca_arg,
        ],
        &[&leaf_path],
    )
    .unwrap();
    assert!(verified.contains(": OK"), "{verified}");
}
