//! The trust rule without sockets: `Trust::identify` on presented chains
//! at chosen times (what the handshake verifiers call).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ed25519_dalek::SigningKey;
use router_pki::cert::{self, Validity};
use router_pki::tls::{DomainCa, PeerTrust, Trust, TrustError};
use router_pki::Fingerprint;
use rustls_pki_types::{CertificateDer, UnixTime};

const DAY: u64 = 86400;

fn at(t: SystemTime) -> UnixTime {
    UnixTime::since_unix_epoch(t.duration_since(UNIX_EPOCH).unwrap())
}

fn peer(router_id: &str, pin: Option<Fingerprint>) -> PeerTrust {
    PeerTrust {
        router_id: router_id.into(),
        pin,
    }
}

struct Lab {
    key: SigningKey,
    der: Vec<u8>,
    start: SystemTime,
}

impl Lab {
    fn new() -> Lab {
        let key = SigningKey::from_bytes(&[1; 32]);
        let start = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        let der = cert::init_domain("lab.example", &key, Validity::days_from(start, 100)).unwrap();
        Lab { key, der, start }
    }

    fn trust(&self, peers: Vec<PeerTrust>) -> Trust {
        Trust::new(
            Some(DomainCa::from_der(self.der.clone(), None).unwrap()),
            peers,
        )
    }

    /// A router certificate valid `days` days from `start`.
    fn router(&self, router_id: &str, seed: u8, days: u32) -> CertificateDer<'static> {
        let key = SigningKey::from_bytes(&[seed; 32]).verifying_key();
        let v = Validity::days_from(self.start, days);
        CertificateDer::from(
            cert::issue_router(&self.key, &self.der, router_id, None, &key, v).unwrap(),
        )
    }
}

#[test]
fn an_expired_or_not_yet_valid_certificate_does_not_chain() {
    let lab = Lab::new();
    let trust = lab.trust(vec![peer("router-b", None)]);
    let b = lab.router("router-b", 2, 10);
    let inside = at(lab.start + Duration::from_secs(DAY));
    assert_eq!(
        trust
            .identify(&b, &[], inside, Some("router-b"))
            .unwrap()
            .router_id,
        "router-b"
    );
    let after = at(lab.start + Duration::from_secs(11 * DAY));
    let err = trust
        .identify(&b, &[], after, Some("router-b"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "peer router-b: certificate does not chain to the domain CA lab.example (certificate expired)"
    );
    let before = at(lab.start - Duration::from_secs(DAY));
    let err = trust.identify(&b, &[], before, None).unwrap_err();
    assert!(err.to_string().contains("not valid yet"), "{err}");
}

#[test]
fn a_pin_ignores_the_chain_and_its_validity() {
    let lab = Lab::new();
    let b = lab.router("router-b", 2, 10);
    let fp = Fingerprint::of(&SigningKey::from_bytes(&[2; 32]).verifying_key());
    // No CA at all, long after the certificate expired: the pin decides.
    let trust = Trust::new(None, vec![peer("router-b", Some(fp))]);
    let late = at(lab.start + Duration::from_secs(1000 * DAY));
    let id = trust.identify(&b, &[], late, None).unwrap();
    assert!(id.pinned && id.fingerprint == fp);
}

#[test]
fn inbound_certificate_accepted_by_two_peers_is_ambiguous() {
    let lab = Lab::new();
    let key = SigningKey::from_bytes(&[3; 32]);
    let shared = Fingerprint::of(&key.verifying_key());
    let trust = lab.trust(vec![
        peer("router-b", Some(shared)),
        peer("router-c", Some(shared)),
    ]);
    let cert = CertificateDer::from(cert::self_signed(&key, "router-b").unwrap());
    let now = at(lab.start);
    assert_eq!(
        trust.identify(&cert, &[], now, None),
        Err(TrustError::Ambiguous(vec![
            "router-b".into(),
            "router-c".into()
        ]))
    );
    // Dialing one of them is not ambiguous.
    assert!(trust.identify(&cert, &[], now, Some("router-c")).is_ok());
}

#[test]
fn dialing_an_unconfigured_peer_and_non_ed25519_keys_are_refused() {
    let lab = Lab::new();
    let trust = lab.trust(vec![peer("router-b", None)]);
    let now = at(lab.start + Duration::from_secs(DAY));
    let b = lab.router("router-b", 2, 10);
    assert_eq!(
        trust.identify(&b, &[], now, Some("router-z")),
        Err(TrustError::NotConfigured("router-z".into()))
    );
    let ecdsa = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let other = rcgen::CertificateParams::new(vec!["router-b".to_string()])
        .unwrap()
        .self_signed(&ecdsa)
        .unwrap();
    let err = trust
        .identify(other.der(), &[], now, Some("router-b"))
        .unwrap_err();
    assert!(matches!(err, TrustError::NotEd25519(_)), "{err}");
    assert!(matches!(
        trust.identify(&CertificateDer::from(&b"garbage"[..]), &[], now, None),
        Err(TrustError::Unreadable(_))
    ));
}
