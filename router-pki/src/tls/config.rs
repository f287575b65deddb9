//! rustls configs for router-to-router links: TLS 1.3 only, the ring
//! provider, mutual authentication by [`Trust`], Ed25519 handshake
//! signatures, no session resumption (a resumed session would skip the
//! certificate check, and a changed pin must apply to the next
//! connection), one ALPN list.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, CipherSuite, ClientConfig, CommonState, DigitallySignedStruct,
    DistinguishedName, OtherError, ServerConfig, SignatureScheme, SupportedCipherSuite,
};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::{PeerIdentity, Trust, TrustError};
use crate::router::RouterIdentity;

/// Handshake (CertificateVerify) signatures: Ed25519 only, since every
/// router key is Ed25519.
static HANDSHAKE_ALGS: WebPkiSupportedAlgorithms = WebPkiSupportedAlgorithms {
    all: &[webpki::ring::ED25519],
    mapping: &[(SignatureScheme::ED25519, &[webpki::ring::ED25519])],
};

/// Why a TLS config could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsError {
    /// `client_config` for a router_id that is no configured peer.
    NotConfigured(String),
    /// rustls refused the key or the protocol selection.
    Rustls(String),
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::NotConfigured(id) => write!(f, "{id} is not a configured peer"),
            TlsError::Rustls(e) => write!(f, "TLS configuration: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> Self {
        TlsError::Rustls(e.to_string())
    }
}

/// The ring provider cut to what router links use: TLS 1.3 suites in
/// [`suites`] order, X25519 (both ends are ours), Ed25519 signatures and
/// keys. What is not named here is not linked (no RSA/ECDSA code in the
/// binaries).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::ring::{default_provider, kx_group};
    Arc::new(CryptoProvider {
        cipher_suites: suites(aes_in_hardware()),
        kx_groups: vec![kx_group::X25519],
        signature_verification_algorithms: HANDSHAKE_ALGS,
        secure_random: default_provider().secure_random,
        key_provider: &Ed25519Keys,
    })
}

/// The suites a router offers, best first. AES-128-GCM leads where the
/// CPU has AES and carry-less multiply instructions: there ring runs it
/// several times faster than ChaCha20-Poly1305 (with ChaCha20 first, TLS
/// took 2.5x the CPU of the peer data plane's 64 KiB calls on an x86-64
/// with AES-NI). ChaCha20 leads everywhere else: MIPS and most 32-bit ARM
/// routers have no AES instructions, and ChaCha20 in software beats AES
/// in software. The server follows the client's order (rustls' default),
/// so the dialling router's CPU picks the suite of its connection.
fn suites(aes_in_hardware: bool) -> Vec<SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_CHACHA20_POLY1305_SHA256,
    };
    if aes_in_hardware {
        vec![TLS13_AES_128_GCM_SHA256, TLS13_CHACHA20_POLY1305_SHA256]
    } else {
        vec![TLS13_CHACHA20_POLY1305_SHA256, TLS13_AES_128_GCM_SHA256]
    }
}

/// The suite this router's links negotiate when it dials (logs, tests).
pub fn preferred_suite() -> CipherSuite {
    suites(aes_in_hardware())[0].suite()
}

#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
fn aes_in_hardware() -> bool {
    std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq")
}

#[cfg(target_arch = "aarch64")]
fn aes_in_hardware() -> bool {
    std::arch::is_aarch64_feature_detected!("aes")
        && std::arch::is_aarch64_feature_detected!("pmull")
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "x86", target_arch = "aarch64")))]
fn aes_in_hardware() -> bool {
    false
}

/// Loads PKCS#8 Ed25519 keys only (every router key is one).
#[derive(Debug)]
struct Ed25519Keys;

impl rustls::crypto::KeyProvider for Ed25519Keys {
    fn load_private_key(
        &self,
        key: rustls_pki_types::PrivateKeyDer<'static>,
    ) -> Result<Arc<dyn rustls::sign::SigningKey>, rustls::Error> {
        match key {
            rustls_pki_types::PrivateKeyDer::Pkcs8(k) => {
                rustls::crypto::ring::sign::any_eddsa_type(&k)
            }
            _ => Err(rustls::Error::General(
                "only PKCS#8 Ed25519 keys are supported".into(),
            )),
        }
    }
}

/// Our verifier for both directions, by whom it is to find.
#[derive(Debug)]
struct PeerVerifier {
    trust: Arc<Trust>,
    whom: Whom,
}

#[derive(Debug)]
enum Whom {
    /// Inbound (server side): whichever configured or unlisted router
    /// the certificate proves.
    Inbound,
    /// The configured peer we dialled.
    Peer(String),
    /// A relay we dialled by address ([`client_config_unlisted`]).
    UnlistedServer,
}

/// Never reached (the configs offer TLS 1.3 only); refused if it were.
fn tls12_refused() -> rustls::Error {
    rustls::Error::General("TLS 1.2 is not supported".into())
}

/// The CertificateVerify check of both directions (Ed25519 only).
fn tls13_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls13_signature(message, cert, dss, &HANDSHAKE_ALGS)
}

fn refuse(e: TrustError) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(e))))
}

impl PeerVerifier {
    fn verify(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let verified = match &self.whom {
            Whom::Inbound => self.trust.identify(end_entity, intermediates, now, None),
            Whom::Peer(id) => self
                .trust
                .identify(end_entity, intermediates, now, Some(id)),
            Whom::UnlistedServer => {
                self.trust
                    .identify_unlisted_server(end_entity, intermediates, now)
            }
        };
        verified.map(|_| ()).map_err(refuse)
    }
}

impl ServerCertVerifier for PeerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The name we check is the configured peer's router_id, not
        // whatever the caller put in SNI.
        self.verify(end_entity, intermediates, now)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(tls12_refused())
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        HANDSHAKE_ALGS.supported_schemes()
    }
}

impl ClientCertVerifier for PeerVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verify(end_entity, intermediates, now)
            .map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(tls12_refused())
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        tls13_signature(m, c, d)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        HANDSHAKE_ALGS.supported_schemes()
    }
}

/// The listener's config: presents `identity`, requires a client
/// certificate that [`Trust`] accepts inbound, offers `alpn` (a client
/// offering none of them is refused by rustls).
pub fn server_config(
    identity: &RouterIdentity,
    trust: Arc<Trust>,
    alpn: &[&[u8]],
) -> Result<Arc<ServerConfig>, TlsError> {
    let verifier = Arc::new(PeerVerifier {
        trust,
        whom: Whom::Inbound,
    });
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(identity.cert_resolver());
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    cfg.send_tls13_tickets = 0;
    Ok(Arc::new(cfg))
}

/// The dialer's config for one peer: presents `identity`, accepts only a
/// server that [`Trust`] accepts as `expected_router_id`.
pub fn client_config(
    identity: &RouterIdentity,
    trust: Arc<Trust>,
    expected_router_id: &str,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsError> {
    if trust.peer(expected_router_id).is_none() {
        return Err(TlsError::NotConfigured(expected_router_id.to_string()));
    }
    let verifier = Arc::new(PeerVerifier {
        trust,
        whom: Whom::Peer(expected_router_id.to_string()),
    });
    client_with(identity, verifier, alpn)
}

/// TLS 1.3 only, our identity as client certificate, `verifier` for the
/// server, no resumption (each session is judged by the rule of now).
fn client_with(
    identity: &RouterIdentity,
    verifier: Arc<PeerVerifier>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsError> {
    let mut cfg = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(identity.cert_resolver());
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    cfg.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(cfg))
}

/// A client config to dial a router known only by address (a relay):
/// it is accepted by the [`super::Unlisted`] rule of `trust`, and
/// [`peer_identity_unlisted`] says who it is once the handshake is done.
pub fn client_config_unlisted(
    identity: &RouterIdentity,
    trust: Arc<Trust>,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, TlsError> {
    let verifier = Arc::new(PeerVerifier {
        trust,
        whom: Whom::UnlistedServer,
    });
    client_with(identity, verifier, alpn)
}

/// Who the router we dialled by address ([`client_config_unlisted`]) is.
pub fn peer_identity_unlisted(
    conn: &CommonState,
    trust: &Trust,
    now: UnixTime,
) -> Result<PeerIdentity, TrustError> {
    let chain = conn.peer_certificates().ok_or(TrustError::NoCertificate)?;
    let (ee, intermediates) = chain.split_first().ok_or(TrustError::NoCertificate)?;
    trust.identify_unlisted_server(ee, intermediates, now)
}

/// The SNI to dial `router_id` with (the verifier checks the configured
/// peer, whatever the name; this keeps SNI meaningful for logs).
pub fn server_name(router_id: &str) -> Result<ServerName<'static>, TrustError> {
    ServerName::try_from(router_id.to_string())
        .map_err(|_| TrustError::NotConfigured(router_id.to_string()))
}

/// The verified identity of a finished handshake's peer: which configured
/// peer it is and its key. `expected` is the peer we dialed (`None` for
/// an accepted connection). The handshake has already applied the same
/// rule; this tells the caller the result.
pub fn peer_identity(
    conn: &CommonState,
    trust: &Trust,
    expected: Option<&str>,
    now: UnixTime,
) -> Result<PeerIdentity, TrustError> {
    let chain = conn.peer_certificates().ok_or(TrustError::NoCertificate)?;
    let (ee, intermediates) = chain.split_first().ok_or(TrustError::NoCertificate)?;
    trust.identify(ee, intermediates, now, expected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aes_leads_only_where_the_cpu_has_it_and_both_suites_are_always_offered() {
        let names = |aes| -> Vec<CipherSuite> { suites(aes).iter().map(|s| s.suite()).collect() };
        assert_eq!(
            names(true),
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            ]
        );
        assert_eq!(
            names(false),
            [
                CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                CipherSuite::TLS13_AES_128_GCM_SHA256
            ]
        );
    }
}
