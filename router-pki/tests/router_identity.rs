//! `RouterIdentity::load`: the key plus the certificate presented.

use std::time::SystemTime;

use router_pki::cert::{self, Validity};
use router_pki::tls::DomainCa;
use router_pki::{IdentityError, RouterIdentity};

mod common;
use common::TempDir;

#[test]
fn without_router_cert_the_key_is_created_and_a_self_signed_cert_presented() {
    let dir = TempDir::new("id-self");
    let key_path = dir.0.join("identity.key");
    let id = RouterIdentity::load(&key_path, None, "router-a").unwrap();
    assert!(id.is_self_signed());
    assert!(key_path.exists());
    let again = RouterIdentity::load(&key_path, None, "router-a").unwrap();
    assert_eq!(id.fingerprint(), again.fingerprint());
    assert_eq!(id.certificate_chain(), again.certificate_chain());
    let s = router_pki::x509::read(&id.certificate_chain()[0]).unwrap();
    assert_eq!(s.dns_names, ["router-a"]);
}

#[test]
fn router_cert_must_be_for_this_key_and_router_id() {
    let dir = TempDir::new("id-cert");
    let ca_key = router_pki::identity::generate_key().unwrap();
    let v = Validity::days_from(SystemTime::now(), 5);
    let ca = cert::init_domain("lab.example", &ca_key, v).unwrap();
    let key_path = dir.0.join("identity.key");
    let key = router_pki::load_or_create_key(&key_path).unwrap();
    let issue = |id: &str, k: &edkey::VerifyingKey| {
        let der = cert::issue_router(&ca_key, &ca, id, Some("lab.example"), k, v).unwrap();
        let p = dir
            .0
            .join(format!("{id}-{}.pem", &router_pki::fingerprint(k)[7..15]));
        std::fs::write(&p, cert::cert_pem(&der)).unwrap();
        p
    };
    let good = issue("router-a", &key.verifying_key());
    let id = RouterIdentity::load(&key_path, Some(&good), "router-a").unwrap();
    assert!(!id.is_self_signed());
    let domain = DomainCa::from_der(ca.clone(), Some("lab.example")).unwrap();
    domain
        .check(id.certificate_chain(), "router-a", SystemTime::now())
        .unwrap();

    let other = router_pki::identity::generate_key()
        .unwrap()
        .verifying_key();
    let foreign = issue("router-a", &other);
    let err = RouterIdentity::load(&key_path, Some(&foreign), "router-a").unwrap_err();
    assert!(
        matches!(err, IdentityError::CertKeyMismatch { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains(&router_pki::fingerprint(&other)),
        "{err}"
    );

    let err = RouterIdentity::load(&key_path, Some(&good), "router-b").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "router_cert {}: certificate is not for router_id router-b (no such dNSName)",
            good.display()
        )
    );
    let missing = dir.0.join("missing.pem");
    let err = RouterIdentity::load(&key_path, Some(&missing), "router-a").unwrap_err();
    assert!(err.to_string().contains("missing.pem"), "{err}");
}
