//! The trust rule without sockets: `Trust::identify` on presented chains
//! at chosen times (what the handshake verifiers call).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use edkey::SigningKey;
use router_pki::cert::{self, Validity};
use router_pki::tls::{DomainCa, PeerTrust, Trust, TrustError, Unlisted};
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

fn domain_routers() -> Unlisted {
    Unlisted {
        domain: true,
        pins: Vec::new(),
    }
}

#[test]
fn unlisted_routers_of_our_domain_are_trusted_under_the_name_their_certificate_gives() {
    let lab = Lab::new();
    let x = lab.router("router-x", 4, 10);
    let now = at(lab.start + Duration::from_secs(DAY));
    // By default a router without a peer section is unknown.
    let listed_only = lab.trust(vec![peer("router-b", None)]);
    assert!(matches!(
        listed_only.identify(&x, &[], now, None),
        Err(TrustError::UnknownPeer { .. })
    ));
    let trust = lab
        .trust(vec![peer("router-b", None)])
        .with_unlisted(domain_routers());
    let id = trust.identify(&x, &[], now, None).unwrap();
    assert_eq!((id.router_id.as_str(), id.pinned), ("router-x", false));
    // The same rule for a relay dialled by address.
    let id = trust.identify_unlisted_server(&x, &[], now).unwrap();
    assert_eq!(id.router_id, "router-x");
    // Configured peers are judged as before.
    let b = lab.router("router-b", 2, 10);
    assert_eq!(
        trust.identify(&b, &[], now, None).unwrap().router_id,
        "router-b"
    );
    // An expired certificate does not chain for unlisted routers either.
    let late = at(lab.start + Duration::from_secs(11 * DAY));
    assert!(matches!(
        trust.identify(&x, &[], late, None),
        Err(TrustError::NotChained { .. })
    ));
}

#[test]
fn another_domains_router_is_not_an_unlisted_router_of_ours() {
    let lab = Lab::new();
    let other_key = SigningKey::from_bytes(&[9; 32]);
    let start = lab.start;
    let other_ca =
        cert::init_domain("other.example", &other_key, Validity::days_from(start, 100)).unwrap();
    let y_key = SigningKey::from_bytes(&[5; 32]).verifying_key();
    let y = CertificateDer::from(
        cert::issue_router(
            &other_key,
            &other_ca,
            "router-y",
            None,
            &y_key,
            Validity::days_from(start, 10),
        )
        .unwrap(),
    );
    let trust = lab.trust(Vec::new()).with_unlisted(domain_routers());
    let now = at(start + Duration::from_secs(DAY));
    assert!(matches!(
        trust.identify(&y, &[], now, None),
        Err(TrustError::NotChained { .. })
    ));
    assert!(trust.identify_unlisted_server(&y, &[], now).is_err());
    // A self-signed certificate is no router of the domain either.
    let z = CertificateDer::from(
        cert::self_signed(&SigningKey::from_bytes(&[6; 32]), "router-z").unwrap(),
    );
    assert!(trust.identify(&z, &[], now, None).is_err());
}

#[test]
fn an_unlisted_pin_trusts_that_key_alone_under_its_certificates_name() {
    let lab = Lab::new();
    let key = SigningKey::from_bytes(&[7; 32]);
    let fp = Fingerprint::of(&key.verifying_key());
    let cert = CertificateDer::from(cert::self_signed(&key, "router-p").unwrap());
    let trust = Trust::new(None, Vec::new()).with_unlisted(Unlisted {
        domain: false,
        pins: vec![fp],
    });
    let now = at(lab.start);
    let id = trust.identify(&cert, &[], now, None).unwrap();
    assert_eq!(
        (id.router_id.as_str(), id.pinned, id.fingerprint),
        ("router-p", true, fp)
    );
    let other = CertificateDer::from(
        cert::self_signed(&SigningKey::from_bytes(&[8; 32]), "router-p").unwrap(),
    );
    assert!(matches!(
        trust.identify(&other, &[], now, None),
        Err(TrustError::UnknownPeer { .. })
    ));
    // Without a CA the domain rule trusts nobody.
    let no_ca = Trust::new(None, Vec::new()).with_unlisted(domain_routers());
    assert!(no_ca.identify(&cert, &[], now, None).is_err());
}

#[test]
fn an_unlisted_router_cannot_stand_in_for_a_configured_peer() {
    let lab = Lab::new();
    // router-b's section pins key 2; a CA certificate for router-b with
    // key 4 is refused by that pin, not taken as an unlisted router-b.
    let pinned = Fingerprint::of(&SigningKey::from_bytes(&[2; 32]).verifying_key());
    let trust = lab
        .trust(vec![peer("router-b", Some(pinned))])
        .with_unlisted(domain_routers());
    let impostor = lab.router("router-b", 4, 10);
    let now = at(lab.start + Duration::from_secs(DAY));
    assert!(matches!(
        trust.identify(&impostor, &[], now, None),
        Err(TrustError::PinMismatch { .. })
    ));
    assert!(matches!(
        trust.identify_unlisted_server(&impostor, &[], now),
        Err(TrustError::PinMismatch { .. })
    ));
    // The pinned key itself is the configured peer, as always.
    let b = lab.router("router-b", 2, 10);
    let id = trust.identify(&b, &[], now, None).unwrap();
    assert!(id.pinned);
}
