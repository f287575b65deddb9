//! Arbitrary bytes as what router-pki reads from files and peers: PEM
//! blocks, key files, certificates (our DER reader, then the trust rule
//! with webpki behind it), fingerprints and `ed25519:` keys. Typed errors,
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use router_pki::tls::{PeerTrust, Trust};
use router_pki::{identity, pem, x509, Fingerprint};
use rustls_pki_types::{CertificateDer, UnixTime};

fuzz_target!(|data: &[u8]| {
    let _ = pem::decode_all(data, "CERTIFICATE", 4, x509::MAX_CERT_DER);
    let _ = identity::parse_key(data);
    if let Ok(s) = x509::read(data) {
        // Rendering a hostile name must not panic either.
        let _ = (s.subject.to_string(), s.issuer.to_string(), s.key.fingerprint());
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = text.parse::<Fingerprint>();
        let _ = identity::parse_public_key(text);
    }
    let trust = Trust::new(
        None,
        vec![
            PeerTrust { router_id: "router-a".into(), pin: Some(Fingerprint([7; 32])) },
            PeerTrust { router_id: "router-b".into(), pin: None },
        ],
    );
    let cert = CertificateDer::from(data);
    let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000));
    let _ = trust.identify(&cert, &[], now, None);
    let _ = trust.identify(&cert, &[], now, Some("router-b"));
});
