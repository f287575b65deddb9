//! Router identity and router-to-router trust, shared by agentd (ARPX
//! sessions) and agent-gw (the peer data plane); nothing in it is
//! specific to either.
//!
//! | module | what |
//! | --- | --- |
//! | [`identity`] | the Ed25519 identity key file (PKCS#8 v1 PEM, 0600, created once, never replaced), `ed25519:B64` public keys, `sha256:` [`Fingerprint`]s |
//! | [`pem`], [`der`], [`x509`] | bounded readers: PEM blocks, DER, a certificate's subject/issuer/validity/SANs/key; [`der::write`], the writer `cert` uses |
//! | `cert` (feature `tls`) | [`cert::init_domain`] (domain CA), [`cert::issue_router`], [`cert::self_signed`] |
//! | `tls` (feature `tls`) | the trust rule ([`tls::Trust`]: pin, else domain CA + dNSName router_id), rustls [`tls::server_config`] / [`tls::client_config`] (TLS 1.3, ring, mutual auth), [`tls::peer_identity`] of a finished handshake |
//! | `router` (feature `tls`) | [`RouterIdentity::load`]: the key plus the certificate presented (`router_cert` or self-signed) |
//!
//! A daemon starts with [`RouterIdentity::load`], builds a [`tls::Trust`]
//! from `agentd.domain_ca` ([`tls::DomainCa::load`]) and its peer
//! sections, and makes one server config plus one client config per
//! peer; after a handshake [`tls::peer_identity`] says which configured
//! peer connected. A refused handshake's error carries the
//! [`tls::TrustError`] ([`tls::TrustError::find`]).
//!
//! The rules are those of the suite's issue 7 decisions: fingerprint =
//! `sha256:` + hex SHA-256 of the raw 32-byte key; a router certificate
//! names the router in a dNSName SAN (`router_id`, plus
//! `router_id.domain`), CN = router_id.

pub mod b64;
pub mod der;
pub mod identity;
pub mod pem;
pub mod x509;

#[cfg(feature = "tls")]
pub mod cert;
#[cfg(feature = "tls")]
mod router;
#[cfg(feature = "tls")]
pub mod tls;

/// The key types of the API, so users need no ed25519-dalek of their own.
pub use edkey::{SigningKey, VerifyingKey};
pub use identity::{fingerprint, load_or_create_key, Fingerprint, KeyFileError};
#[cfg(feature = "tls")]
pub use router::{IdentityError, RouterIdentity};
