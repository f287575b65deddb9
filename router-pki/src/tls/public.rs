//! The public HTTPS listener's TLS: a server certificate for callers that
//! are not routers (MCP and A2A clients, agents off the LAN). Callers
//! authenticate with bearer tokens or — where the operator names a client
//! CA — with a certificate it issued, which is then asked for but not
//! required (a caller without one still shows a token).
//!
//! Same ring provider as router links (TLS 1.3, X25519, no resumption:
//! nothing here needs a second protocol surface). The certificate is the
//! operator's (a PEM chain and key, e.g. the one uhttpd or an ACME client
//! keeps; Ed25519 or ECDSA — RSA signing code is not linked) or else the
//! router's own: its domain-CA certificate or the self-signed one peers
//! pin, which a client can pin the same way.

use std::path::Path;
use std::sync::Arc;

use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::config::provider;
use super::MAX_CHAIN;
use crate::router::RouterIdentity;

/// Largest certificate or key file read (a chain of a few certificates).
pub const MAX_PEM_FILE: u64 = 64 * 1024;

/// Why the public listener's certificate cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicTlsError(pub String);

impl std::fmt::Display for PublicTlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PublicTlsError {}

/// What the public listener presents.
#[derive(Debug)]
pub enum PublicCert<'a> {
    /// The router identity's certificate.
    Router(&'a RouterIdentity),
    /// An operator's PEM certificate chain and private key.
    Files { cert: &'a Path, key: &'a Path },
}

/// The public listener's config, offering `alpn` in that order; with
/// `client_ca` (a PEM file of CA certificates) it asks callers for a
/// certificate one of them issued (Ed25519, as every key here).
pub fn public_server_config(
    cert: PublicCert<'_>,
    alpn: &[&[u8]],
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, PublicTlsError> {
    let resolver: Arc<dyn ResolvesServerCert> = match cert {
        PublicCert::Router(identity) => identity.cert_resolver(),
        PublicCert::Files { cert, key } => Arc::new(rustls::sign::SingleCertAndKey::from(
            load_certified(cert, key)?,
        )),
    };
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| PublicTlsError(format!("TLS configuration: {e}")))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => builder.with_client_cert_verifier(client_verifier(path)?),
    };
    let mut cfg = builder.with_cert_resolver(resolver);
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    cfg.send_tls13_tickets = 0;
    Ok(Arc::new(cfg))
}

/// Accepts a client certificate that a CA of `path` issued, and a
/// client that shows none (it must then carry a token).
fn client_verifier(
    path: &Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, PublicTlsError> {
    let text = read_pem(path, "client CA")?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&text) {
        let c =
            c.map_err(|e| PublicTlsError(format!("client CA {}: not PEM: {e}", path.display())))?;
        if roots.len() == MAX_CHAIN {
            return Err(PublicTlsError(format!(
                "client CA {}: more than {MAX_CHAIN} certificates",
                path.display()
            )));
        }
        roots.add(c).map_err(|e| {
            PublicTlsError(format!(
                "client CA {}: not a usable CA certificate: {e}",
                path.display()
            ))
        })?;
    }
    if roots.is_empty() {
        return Err(PublicTlsError(format!(
            "client CA {}: no CERTIFICATE block",
            path.display()
        )));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| PublicTlsError(format!("client CA {}: {e}", path.display())))
}

fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, PublicTlsError> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| PublicTlsError(format!("{what} {}: {e}", path.display())))?;
    let mut buf = Vec::new();
    file.take(MAX_PEM_FILE + 1)
        .read_to_end(&mut buf)
        .map_err(|e| PublicTlsError(format!("{what} {}: {e}", path.display())))?;
    if buf.len() as u64 > MAX_PEM_FILE {
        return Err(PublicTlsError(format!(
            "{what} {}: larger than {MAX_PEM_FILE} bytes",
            path.display()
        )));
    }
    Ok(buf)
}

/// Loads a PEM chain and its key, checking they belong together.
pub fn load_certified(cert: &Path, key: &Path) -> Result<CertifiedKey, PublicTlsError> {
    let text = read_pem(cert, "certificate")?;
    let mut chain = Vec::new();
    for c in CertificateDer::pem_slice_iter(&text) {
        let c =
            c.map_err(|e| PublicTlsError(format!("certificate {}: not PEM: {e}", cert.display())))?;
        if chain.len() == MAX_CHAIN {
            return Err(PublicTlsError(format!(
                "certificate {}: more than {MAX_CHAIN} certificates",
                cert.display()
            )));
        }
        chain.push(c);
    }
    if chain.is_empty() {
        return Err(PublicTlsError(format!(
            "certificate {}: no CERTIFICATE block",
            cert.display()
        )));
    }
    let key_text = read_pem(key, "key")?;
    let der = PrivateKeyDer::from_pem_slice(&key_text).map_err(|e| {
        PublicTlsError(format!(
            "key {}: no PKCS#8, SEC1 or PKCS#1 private key: {e}",
            key.display()
        ))
    })?;
    let signer = match &der {
        PrivateKeyDer::Pkcs8(p8) => rustls::crypto::ring::sign::any_eddsa_type(p8)
            .or_else(|_| rustls::crypto::ring::sign::any_ecdsa_type(&der)),
        _ => rustls::crypto::ring::sign::any_ecdsa_type(&der),
    }
    .map_err(|_| {
        PublicTlsError(format!(
            "key {}: not an Ed25519 or ECDSA (P-256/P-384) key",
            key.display()
        ))
    })?;
    let certified = CertifiedKey::new(chain, signer);
    certified.keys_match().map_err(|e| {
        PublicTlsError(format!(
            "key {} does not belong to certificate {}: {e}",
            key.display(),
            cert.display()
        ))
    })?;
    Ok(certified)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("pki-public-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn pem(label: &str, der: &[u8]) -> String {
        let b64 = crate::b64::encode_std(der);
        let mut out = format!("-----BEGIN {label}-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).unwrap());
            out.push('\n');
        }
        out + &format!("-----END {label}-----\n")
    }

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn an_ecdsa_certificate_and_its_key_load() {
        let dir = temp_dir("ecdsa");
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["router.example".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let c = write(&dir, "c.pem", &pem("CERTIFICATE", cert.der()));
        let k = write(&dir, "k.pem", &pem("PRIVATE KEY", &key.serialize_der()));
        assert!(load_certified(&c, &k).is_ok());
        let cfg =
            public_server_config(PublicCert::Files { cert: &c, key: &k }, &[b"h2"], None).unwrap();
        assert_eq!(cfg.alpn_protocols, vec![b"h2".to_vec()]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_by_name() {
        let dir = temp_dir("mismatch");
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        let cert = rcgen::CertificateParams::new(vec!["router.example".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let c = write(&dir, "c.pem", &pem("CERTIFICATE", cert.der()));
        let k = write(&dir, "k.pem", &pem("PRIVATE KEY", &other.serialize_der()));
        let e = load_certified(&c, &k).unwrap_err();
        assert!(e.0.contains("does not belong to certificate"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn files_that_are_not_pem_or_too_large_are_refused_by_name() {
        let dir = temp_dir("bad");
        let junk = write(&dir, "junk.pem", "not a certificate");
        let e = load_certified(&junk, &junk).unwrap_err();
        assert!(e.0.contains("no CERTIFICATE block"), "{e}");
        let big = write(&dir, "big.pem", &"A".repeat(MAX_PEM_FILE as usize + 1));
        let e = load_certified(&big, &big).unwrap_err();
        assert!(e.0.contains("larger than"), "{e}");
        let e = load_certified(&dir.join("missing.pem"), &junk).unwrap_err();
        assert!(e.0.contains("missing.pem"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
