//! What a daemon needs at start: its identity key and the certificate it
//! presents, as one value the TLS configs take.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use edkey::{SigningKey, VerifyingKey};
use rustls::sign::{CertifiedKey, SingleCertAndKey};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::cert::{self, CertError};
use crate::identity::{self, Fingerprint, KeyFileError};
use crate::tls::{load_cert_file, CertFileError};
use crate::x509::{self, PublicKey};

/// Why the router identity could not be loaded.
#[derive(Debug)]
pub enum IdentityError {
    Key(KeyFileError),
    Cert(CertFileError),
    /// `router_cert` is not for the identity key.
    CertKeyMismatch {
        path: PathBuf,
        certificate: Option<Fingerprint>,
        key: Fingerprint,
    },
    /// `router_cert` does not name `router_id` in a dNSName SAN.
    CertName {
        path: PathBuf,
        router_id: String,
    },
    /// The self-signed certificate could not be made (bad router_id).
    SelfSigned(CertError),
    /// rustls refused the key.
    Tls(String),
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::Key(e) => e.fmt(f),
            IdentityError::Cert(e) => e.fmt(f),
            IdentityError::CertKeyMismatch {
                path,
                certificate,
                key,
            } => {
                let cert =
                    certificate.map_or_else(|| "a non-Ed25519 key".into(), |c| c.to_string());
                write!(
                    f,
                    "router_cert {}: certificate is for {cert}, not this router's identity key {key}",
                    path.display()
                )
            }
            IdentityError::CertName { path, router_id } => write!(
                f,
                "router_cert {}: certificate is not for router_id {router_id} (no such dNSName)",
                path.display()
            ),
            IdentityError::SelfSigned(e) => write!(f, "self-signed certificate: {e}"),
            IdentityError::Tls(e) => write!(f, "identity key: {e}"),
        }
    }
}

impl std::error::Error for IdentityError {}

/// The router's key and the certificate chain it presents.
#[derive(Debug, Clone)]
pub struct RouterIdentity {
    router_id: String,
    key: SigningKey,
    /// `router_cert`, or `None` when presenting the self-signed one.
    cert_path: Option<PathBuf>,
    certified: Arc<CertifiedKey>,
}

impl RouterIdentity {
    /// Loads (creating on first start) the identity key at
    /// `identity_path`, then loads `router_cert` (checking it is for this
    /// key and names `router_id`) or, with `None`, makes the self-signed
    /// certificate peers pin.
    pub fn load(
        identity_path: &Path,
        router_cert: Option<&Path>,
        router_id: &str,
    ) -> Result<RouterIdentity, IdentityError> {
        let key = identity::load_or_create_key(identity_path).map_err(IdentityError::Key)?;
        RouterIdentity::new(key, router_cert, router_id)
    }

    /// As [`RouterIdentity::load`], with the key already in hand.
    pub fn new(
        key: SigningKey,
        router_cert: Option<&Path>,
        router_id: &str,
    ) -> Result<RouterIdentity, IdentityError> {
        let chain = match router_cert {
            Some(path) => {
                let chain = load_cert_file(path).map_err(IdentityError::Cert)?;
                check_router_cert(path, &chain[0], &key, router_id)?;
                chain
            }
            None => vec![CertificateDer::from(
                cert::self_signed(&key, router_id).map_err(IdentityError::SelfSigned)?,
            )],
        };
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity::pkcs8_der(&key)));
        let certified = CertifiedKey::from_der(chain, der, &crate::tls::config::provider())
            .map_err(|e| IdentityError::Tls(e.to_string()))?;
        Ok(RouterIdentity {
            router_id: router_id.to_string(),
            key,
            cert_path: router_cert.map(Path::to_path_buf),
            certified: Arc::new(certified),
        })
    }

    pub fn router_id(&self) -> &str {
        &self.router_id
    }

    pub fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.key.verifying_key())
    }

    /// The chain presented (end-entity first).
    pub fn certificate_chain(&self) -> &[CertificateDer<'static>] {
        &self.certified.cert
    }

    /// Whether the presented certificate is the in-memory self-signed one.
    pub fn is_self_signed(&self) -> bool {
        self.cert_path.is_none()
    }

    pub(crate) fn cert_resolver(&self) -> Arc<SingleCertAndKey> {
        Arc::new(SingleCertAndKey::from(self.certified.clone()))
    }
}

fn check_router_cert(
    path: &Path,
    ee: &CertificateDer<'_>,
    key: &SigningKey,
    router_id: &str,
) -> Result<(), IdentityError> {
    let s = x509::read(ee)
        .map_err(|e| IdentityError::Cert(CertFileError::Read(path.to_path_buf(), e)))?;
    if s.key != PublicKey::Ed25519(key.verifying_key().to_bytes()) {
        return Err(IdentityError::CertKeyMismatch {
            path: path.to_path_buf(),
            certificate: s.key.fingerprint(),
            key: Fingerprint::of(&key.verifying_key()),
        });
    }
    if !s
        .dns_names
        .iter()
        .any(|n| n.eq_ignore_ascii_case(router_id))
    {
        return Err(IdentityError::CertName {
            path: path.to_path_buf(),
            router_id: router_id.to_string(),
        });
    }
    Ok(())
}
