//! Who a router-to-router TLS peer is: the trust rule, in both directions.
//!
//! For a configured peer P:
//! - P has a pin (`key_fingerprint`) → the presented end-entity key must
//!   have that fingerprint; the chain is not looked at (a pin is the
//!   explicit, stricter statement: chaining to the CA does not override a
//!   mismatching pin).
//! - P has no pin → the chain must verify to the domain CA (webpki, at
//!   the handshake's time) and the end-entity certificate must be valid
//!   for the dNSName P.router_id.
//!
//! Outbound (we dial P) the expected peer is known. Inbound the identity
//! is the one configured peer the certificate satisfies; none (or more
//! than one) fails the handshake. End-entity keys are Ed25519 only: the
//! fingerprint and [`PeerIdentity::public_key`] are over the raw key.
//!
//! [`config`] turns this into rustls client/server configs (TLS 1.3
//! only, mutual authentication, no resumption).

pub mod config;
pub mod public;

use std::fmt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls_pki_types::{CertificateDer, ServerName, TrustAnchor, UnixTime};
use webpki::{EndEntityCert, KeyUsage};

use crate::identity::Fingerprint;
use crate::x509::{self, CertReadError, PublicKey, Summary};

pub use config::{
    client_config, client_config_unlisted, peer_identity, peer_identity_unlisted, preferred_suite,
    server_config, server_name, TlsError,
};

/// ALPN of ARPX sessions.
pub const ALPN_ARPX: &[u8] = b"arpx/1";
/// ALPN of the peer data plane.
pub const ALPN_H2: &[u8] = b"h2";
/// A relay client's tunnel on the relay's data-plane listener: the same
/// port and trust as `h2`, with the HTTP/2 roles reversed (DESIGN §7).
pub const ALPN_RELAY: &[u8] = b"agentd-relay/1";

/// Signature algorithms accepted in a certificate chain: Ed25519, as
/// every key of a domain is (issue 7: the domain CA is an Ed25519 CA).
/// Leaving RSA/ECDSA out keeps their verification code off the router.
static CHAIN_ALGS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] =
    &[webpki::ring::ED25519];

/// Certificate files are small; more than this is not ours.
const MAX_CERT_FILE: u64 = 64 * 1024;
/// A chain longer than this (end-entity + intermediates) is refused.
pub const MAX_CHAIN: usize = 4;

/// Why a certificate file could not be used.
#[derive(Debug)]
pub enum CertFileError {
    Io(std::path::PathBuf, std::io::Error),
    Pem(std::path::PathBuf, crate::pem::PemError),
    Read(std::path::PathBuf, CertReadError),
    /// Readable, but not what the option needs (not a CA, wrong key, ...).
    Unsuitable(std::path::PathBuf, String),
}

impl fmt::Display for CertFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertFileError::Io(p, e) => write!(f, "certificate file {}: {e}", p.display()),
            CertFileError::Pem(p, e) => write!(f, "certificate file {}: {e}", p.display()),
            CertFileError::Read(p, e) => write!(f, "certificate file {}: {e}", p.display()),
            CertFileError::Unsuitable(p, why) => {
                write!(f, "certificate file {}: {why}", p.display())
            }
        }
    }
}

impl std::error::Error for CertFileError {}

/// The DER certificates of a PEM file, in file order (at most [`MAX_CHAIN`]).
pub fn load_cert_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertFileError> {
    use std::io::Read;
    let io = |e| CertFileError::Io(path.to_path_buf(), e);
    let mut text = Vec::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_CERT_FILE)
        .read_to_end(&mut text)
        .map_err(io)?;
    let ders = crate::pem::decode_all(&text, "CERTIFICATE", MAX_CHAIN, x509::MAX_CERT_DER)
        .map_err(|e| CertFileError::Pem(path.to_path_buf(), e))?;
    Ok(ders.into_iter().map(CertificateDer::from).collect())
}

/// The domain CA: the trust anchor of unpinned peers.
#[derive(Debug, Clone)]
pub struct DomainCa {
    /// The name errors use: the configured domain, else the CA's CN.
    name: String,
    der: CertificateDer<'static>,
    anchor: TrustAnchor<'static>,
    summary: Summary,
}

impl DomainCa {
    /// A CA from its DER certificate; `domain` names it in errors (the
    /// CA's CN when `None`).
    pub fn from_der(der: Vec<u8>, domain: Option<&str>) -> Result<DomainCa, String> {
        let summary = x509::read(&der).map_err(|e| e.to_string())?;
        if !summary.is_ca {
            return Err("not a CA certificate (no basicConstraints CA)".into());
        }
        if let PublicKey::Other(oid) = &summary.key {
            return Err(format!(
                "the CA key is not Ed25519 (algorithm {oid}); a domain CA is an Ed25519 CA"
            ));
        }
        let der = CertificateDer::from(der);
        let anchor = webpki::anchor_from_trusted_cert(&der)
            .map_err(|e| format!("not usable as a trust anchor: {e}"))?
            .to_owned();
        let name = domain
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .or_else(|| summary.subject.common_name())
            .unwrap_or_else(|| summary.subject.to_string());
        Ok(DomainCa {
            name,
            der,
            anchor,
            summary,
        })
    }

    /// Loads `agentd.domain_ca` (the first certificate of the file).
    pub fn load(path: &Path, domain: Option<&str>) -> Result<DomainCa, CertFileError> {
        let first = load_cert_file(path)?.swap_remove(0);
        DomainCa::from_der(first.to_vec(), domain)
            .map_err(|why| CertFileError::Unsuitable(path.to_path_buf(), why))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn der(&self) -> &CertificateDer<'static> {
        &self.der
    }

    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Verifies that `ee` (with `intermediates`) chains to this CA at
    /// `now`, for `usage`.
    fn verify<'a>(
        &self,
        ee: &'a EndEntityCert<'a>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
        usage: KeyUsage,
    ) -> Result<(), webpki::Error> {
        ee.verify_for_usage(
            CHAIN_ALGS,
            std::slice::from_ref(&self.anchor),
            intermediates,
            now,
            usage,
            None,
            None,
        )
        .map(|_| ())
    }

    /// Whether a certificate (e.g. this router's own) chains to this CA
    /// and is valid for `router_id` at `now`; the error says why not.
    pub fn check(
        &self,
        chain: &[CertificateDer<'_>],
        router_id: &str,
        now: SystemTime,
    ) -> Result<(), TrustError> {
        let (ee, rest) = chain.split_first().ok_or(TrustError::NoCertificate)?;
        let parsed =
            EndEntityCert::try_from(ee).map_err(|e| TrustError::Unreadable(format!("{e}")))?;
        self.verify(&parsed, rest, unix_time(now), KeyUsage::client_auth())
            .map_err(|e| TrustError::NotChained {
                router_id: None,
                domain: self.name.clone(),
                reason: webpki_reason(&e),
            })?;
        valid_for(&parsed, router_id).map_err(|()| TrustError::NameMismatch {
            router_id: router_id.to_string(),
        })
    }
}

impl DomainCa {
    /// The Ed25519 key of a router certificate (DER) that this CA issued
    /// for `router_id` and that is valid at `now`: how a router that never
    /// met `router_id` authenticates its origin key from a certificate
    /// attached to its routes (DESIGN §3 "Origin keys are authenticated").
    pub fn origin_key(
        &self,
        cert: &[u8],
        router_id: &str,
        now: SystemTime,
    ) -> Result<[u8; 32], TrustError> {
        let summary = x509::read(cert).map_err(|e| TrustError::Unreadable(e.to_string()))?;
        let key = match summary.key {
            PublicKey::Ed25519(k) => k,
            PublicKey::Other(oid) => return Err(TrustError::NotEd25519(oid)),
        };
        self.check(&[CertificateDer::from(cert)], router_id, now)?;
        Ok(key)
    }
}

/// Verifies a just-issued router certificate against its CA (used by
/// [`crate::cert::issue_router`] before anything is written).
pub(crate) fn verify_issued(
    ca: &[u8],
    ee: &[u8],
    router_id: &str,
    at: SystemTime,
) -> Result<(), TrustError> {
    let ca = DomainCa::from_der(ca.to_vec(), None).map_err(TrustError::Unreadable)?;
    ca.check(&[CertificateDer::from(ee)], router_id, at)?;
    let ee = CertificateDer::from(ee);
    let parsed = EndEntityCert::try_from(&ee).map_err(|e| TrustError::Unreadable(e.to_string()))?;
    ca.verify(&parsed, &[], unix_time(at), KeyUsage::server_auth())
        .map_err(|e| TrustError::NotChained {
            router_id: None,
            domain: ca.name.clone(),
            reason: webpki_reason(&e),
        })
}

pub(crate) fn unix_time(t: SystemTime) -> UnixTime {
    UnixTime::since_unix_epoch(t.duration_since(UNIX_EPOCH).unwrap_or_default())
}

fn valid_for(ee: &EndEntityCert<'_>, router_id: &str) -> Result<(), ()> {
    let name = ServerName::try_from(router_id).map_err(|_| ())?;
    ee.verify_is_valid_for_subject_name(&name).map_err(|_| ())
}

/// webpki's reason in words.
fn webpki_reason(e: &webpki::Error) -> String {
    match e {
        webpki::Error::UnknownIssuer => "issued by another CA".into(),
        webpki::Error::CertExpired { .. } => "certificate expired".into(),
        webpki::Error::CertNotValidYet { .. } => "certificate not valid yet".into(),
        webpki::Error::RequiredEkuNotFoundContext(_) => {
            "certificate not allowed for this use (extended key usage)".into()
        }
        webpki::Error::InvalidSignatureForPublicKey => "bad signature".into(),
        other => format!("{other:?}"),
    }
}

/// One configured peer as the trust rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerTrust {
    pub router_id: String,
    /// `key_fingerprint`; `None` relies on the domain CA.
    pub pin: Option<Fingerprint>,
}

/// Routers trusted without a peer section of their own: the relay
/// roles (DESIGN §7). A relay learns of its clients only when they
/// connect, and a client knows its relays only by address. Such a
/// router's id is the one its certificate names (CN and dNSName), and it
/// can never stand in for a configured peer: a name that a `peer` section
/// holds is judged by that section's rule alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unlisted {
    /// Any router our domain CA certified.
    pub domain: bool,
    /// Routers holding one of these keys (outside our domain: their
    /// self-signed certificate names them).
    pub pins: Vec<Fingerprint>,
}

impl Unlisted {
    fn any(&self) -> bool {
        self.domain || !self.pins.is_empty()
    }
}

/// Everything the trust rule needs: the domain CA (if any), the
/// configured peers and who else is trusted ([`Unlisted`]). Rebuilt
/// (with new configs) when the peers change.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    ca: Option<DomainCa>,
    peers: Vec<PeerTrust>,
    unlisted: Unlisted,
}

/// The verified identity of a TLS peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerIdentity {
    /// The configured peer it is (compare with the ARPX `Open`).
    pub router_id: String,
    pub fingerprint: Fingerprint,
    /// The raw Ed25519 key of the end-entity certificate.
    pub public_key: [u8; 32],
    /// Accepted by its pin (else by the domain CA).
    pub pinned: bool,
}

/// Why a peer's certificate was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustError {
    /// The peer sent no certificate.
    NoCertificate,
    /// The certificate could not be read.
    Unreadable(String),
    /// The end-entity key is not Ed25519 (dotted OID of its algorithm).
    NotEd25519(String),
    /// We dialed a router_id that is no configured peer.
    NotConfigured(String),
    /// `router_id`'s pin does not match the presented key.
    PinMismatch {
        router_id: String,
        presented: Fingerprint,
        pinned: Fingerprint,
    },
    /// `router_id` has no pin and there is no domain CA to rely on.
    NoDomainCa { router_id: String },
    /// The chain does not verify to the domain CA.
    NotChained {
        router_id: Option<String>,
        domain: String,
        reason: String,
    },
    /// The certificate chains but is not valid for the dNSName router_id.
    NameMismatch { router_id: String },
    /// Inbound: no configured peer accepts the certificate.
    UnknownPeer {
        fingerprint: Fingerprint,
        names: Vec<String>,
    },
    /// Inbound: more than one configured peer accepts it.
    Ambiguous(Vec<String>),
}

impl fmt::Display for TrustError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrustError::NoCertificate => f.write_str("the peer presented no certificate"),
            TrustError::Unreadable(e) => write!(f, "unreadable peer certificate: {e}"),
            TrustError::NotEd25519(oid) => {
                write!(f, "peer certificate key is not Ed25519 (algorithm {oid})")
            }
            TrustError::NotConfigured(id) => write!(f, "{id} is not a configured peer"),
            TrustError::PinMismatch {
                router_id,
                presented,
                pinned,
            } => write!(
                f,
                "peer {router_id}: certificate key {presented} is not the pinned {pinned}"
            ),
            TrustError::NoDomainCa { router_id } => write!(
                f,
                "peer {router_id}: no key_fingerprint pinned and no domain CA configured"
            ),
            TrustError::NotChained {
                router_id,
                domain,
                reason,
            } => {
                if let Some(id) = router_id {
                    write!(f, "peer {id}: ")?;
                }
                write!(
                    f,
                    "certificate does not chain to the domain CA {domain} ({reason})"
                )
            }
            TrustError::NameMismatch { router_id } => {
                write!(
                    f,
                    "peer {router_id}: certificate is not valid for {router_id}"
                )
            }
            TrustError::UnknownPeer { fingerprint, names } => write!(
                f,
                "certificate (key {fingerprint}, names {}) matches no configured peer",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
            TrustError::Ambiguous(ids) => write!(
                f,
                "certificate is accepted by more than one configured peer ({})",
                ids.join(", ")
            ),
        }
    }
}

impl std::error::Error for TrustError {}

impl TrustError {
    /// The `TrustError` behind an error a TLS handshake returned (through
    /// `io::Error` → `rustls::Error` → `OtherError`), if there is one:
    /// what our verifier refused, as opposed to an alert from the peer.
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a TrustError> {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
        for _ in 0..8 {
            let e = cur?;
            if let Some(t) = e.downcast_ref::<TrustError>() {
                return Some(t);
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                cur = io
                    .get_ref()
                    .map(|i| i as &(dyn std::error::Error + 'static));
                continue;
            }
            if let Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o))) =
                e.downcast_ref::<rustls::Error>()
            {
                cur = Some(&*o.0);
                continue;
            }
            cur = e.source();
        }
        None
    }
}

/// Which end the peer is, for the EKU check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerRole {
    /// We dialed it.
    Server,
    /// It dialed us.
    Client,
}

impl Trust {
    pub fn new(ca: Option<DomainCa>, peers: Vec<PeerTrust>) -> Trust {
        Trust {
            ca,
            peers,
            unlisted: Unlisted::default(),
        }
    }

    /// This rule, also trusting `unlisted` routers.
    pub fn with_unlisted(mut self, unlisted: Unlisted) -> Trust {
        self.unlisted = unlisted;
        self
    }

    pub fn unlisted(&self) -> &Unlisted {
        &self.unlisted
    }

    pub fn ca(&self) -> Option<&DomainCa> {
        self.ca.as_ref()
    }

    pub fn peers(&self) -> &[PeerTrust] {
        &self.peers
    }

    pub fn peer(&self, router_id: &str) -> Option<&PeerTrust> {
        self.peers.iter().find(|p| p.router_id == router_id)
    }

    /// Applies the trust rule to a presented chain: to the peer we dialed
    /// (`expected`), or inbound (`None`) to find which peer it is.
    pub fn identify(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
        expected: Option<&str>,
    ) -> Result<PeerIdentity, TrustError> {
        let (summary, key, ee) = read_end_entity(end_entity)?;
        let cert = Presented {
            ee: &ee,
            intermediates,
            now,
            fingerprint: Fingerprint::of_raw(&key),
        };
        let accepted = |p: &PeerTrust| PeerIdentity {
            router_id: p.router_id.clone(),
            fingerprint: cert.fingerprint,
            public_key: key,
            pinned: p.pin.is_some(),
        };
        if let Some(id) = expected {
            let peer = self
                .peer(id)
                .ok_or_else(|| TrustError::NotConfigured(id.to_string()))?;
            return self
                .check(peer, &cert, PeerRole::Server)
                .map(|()| accepted(peer));
        }
        let chained = self.ca.as_ref().is_some_and(|ca| {
            ca.verify(&ee, intermediates, now, KeyUsage::client_auth())
                .is_ok()
        });
        let matches: Vec<&PeerTrust> = self
            .peers
            .iter()
            .filter(|p| match p.pin {
                Some(pin) => pin == cert.fingerprint,
                None => chained && valid_for(&ee, &p.router_id).is_ok(),
            })
            .collect();
        match matches.as_slice() {
            [one] => Ok(accepted(one)),
            [] if self.unlisted.any() => {
                self.identify_unlisted(&summary, &cert, key, PeerRole::Client)
            }
            [] => {
                // Explain with the peer the certificate claims to be.
                let mut names = summary.dns_names.clone();
                names.extend(summary.subject.common_name());
                let claimed = names.iter().find_map(|n| self.peer(n));
                let unknown = |names| TrustError::UnknownPeer {
                    fingerprint: cert.fingerprint,
                    names,
                };
                match claimed.map(|p| self.check(p, &cert, PeerRole::Client)) {
                    Some(Err(e)) => Err(e),
                    Some(Ok(())) | None => Err(unknown(names)),
                }
            }
            many => Err(TrustError::Ambiguous(
                many.iter().map(|p| p.router_id.clone()).collect(),
            )),
        }
    }

    /// Applies the rule for [`Unlisted`] routers to a presented chain of
    /// a relay we dialled by address (its router id is unknown until its
    /// certificate names it).
    pub fn identify_unlisted_server(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<PeerIdentity, TrustError> {
        let (summary, key, ee) = read_end_entity(end_entity)?;
        let cert = Presented {
            ee: &ee,
            intermediates,
            now,
            fingerprint: Fingerprint::of_raw(&key),
        };
        self.identify_unlisted(&summary, &cert, key, PeerRole::Server)
    }

    /// The [`Unlisted`] rule: a pinned key, else a chain to our domain CA;
    /// the router id is the first name of the certificate that is a
    /// router id (and, for the CA, that the certificate is valid for).
    fn identify_unlisted(
        &self,
        summary: &Summary,
        cert: &Presented<'_>,
        key: [u8; 32],
        role: PeerRole,
    ) -> Result<PeerIdentity, TrustError> {
        let mut names: Vec<String> = summary.dns_names.clone();
        names.extend(summary.subject.common_name());
        let router_ids = || {
            names
                .iter()
                .filter(|n| crate::cert::check_router_id(n).is_ok())
        };
        let unknown = || TrustError::UnknownPeer {
            fingerprint: cert.fingerprint,
            names: names.clone(),
        };
        let (router_id, pinned) = if self.unlisted.pins.contains(&cert.fingerprint) {
            (router_ids().next().ok_or_else(unknown)?.clone(), true)
        } else {
            let ca = match &self.ca {
                Some(ca) if self.unlisted.domain => ca,
                _ => return Err(unknown()),
            };
            let usage = match role {
                PeerRole::Server => KeyUsage::server_auth(),
                PeerRole::Client => KeyUsage::client_auth(),
            };
            ca.verify(cert.ee, cert.intermediates, cert.now, usage)
                .map_err(|e| TrustError::NotChained {
                    router_id: None,
                    domain: ca.name.clone(),
                    reason: webpki_reason(&e),
                })?;
            let id = router_ids()
                .find(|n| valid_for(cert.ee, n).is_ok())
                .ok_or_else(unknown)?;
            (id.clone(), false)
        };
        // A configured peer's name is its section's to judge, and that
        // rule already refused this certificate.
        if let Some(p) = self.peer(&router_id) {
            return Err(match self.check(p, cert, role) {
                Err(e) => e,
                Ok(()) => TrustError::Ambiguous(vec![router_id]),
            });
        }
        Ok(PeerIdentity {
            router_id,
            fingerprint: cert.fingerprint,
            public_key: key,
            pinned,
        })
    }

    fn check(
        &self,
        peer: &PeerTrust,
        cert: &Presented<'_>,
        role: PeerRole,
    ) -> Result<(), TrustError> {
        if let Some(pin) = peer.pin {
            return if pin == cert.fingerprint {
                Ok(())
            } else {
                Err(TrustError::PinMismatch {
                    router_id: peer.router_id.clone(),
                    presented: cert.fingerprint,
                    pinned: pin,
                })
            };
        }
        let ca = self.ca.as_ref().ok_or_else(|| TrustError::NoDomainCa {
            router_id: peer.router_id.clone(),
        })?;
        let usage = match role {
            PeerRole::Server => KeyUsage::server_auth(),
            PeerRole::Client => KeyUsage::client_auth(),
        };
        ca.verify(cert.ee, cert.intermediates, cert.now, usage)
            .map_err(|e| TrustError::NotChained {
                router_id: Some(peer.router_id.clone()),
                domain: ca.name.clone(),
                reason: webpki_reason(&e),
            })?;
        valid_for(cert.ee, &peer.router_id).map_err(|()| TrustError::NameMismatch {
            router_id: peer.router_id.clone(),
        })
    }
}

/// What a presented end-entity certificate says: its summary, its
/// Ed25519 key, and webpki's view of it for chain checks.
fn read_end_entity<'a>(
    end_entity: &'a CertificateDer<'a>,
) -> Result<(Summary, [u8; 32], EndEntityCert<'a>), TrustError> {
    let summary = x509::read(end_entity).map_err(|e| TrustError::Unreadable(e.to_string()))?;
    let key = match summary.key {
        PublicKey::Ed25519(k) => k,
        PublicKey::Other(ref oid) => return Err(TrustError::NotEd25519(oid.clone())),
    };
    let ee = EndEntityCert::try_from(end_entity)
        .map_err(|e| TrustError::Unreadable(format!("{e:?}")))?;
    Ok((summary, key, ee))
}

/// A presented chain being judged.
struct Presented<'a> {
    ee: &'a EndEntityCert<'a>,
    intermediates: &'a [CertificateDer<'a>],
    now: UnixTime,
    fingerprint: Fingerprint,
}
