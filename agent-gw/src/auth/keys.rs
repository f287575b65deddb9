//! Key material: tenant verification keys from `jwt_key` options, the
//! router's own issuer key file, key ids, and the OS random source.
//!
//! The key file format (PKCS#8 v1 PEM, created 0600 once, never replaced)
//! and the `ed25519:` text form live in router-pki, shared with agentd's
//! router identity: by default the issuer key *is* the identity key
//! (`agentd.identity`). What is JWT-specific — the RFC 7638 key id — is
//! here.

use edkey::Sha256;
use edkey::VerifyingKey;

use super::b64;

pub use router_pki::identity::{
    fill_random, format_public_key, load_or_create_key, parse_public_key,
};

/// RFC 7638 JWK thumbprint of an Ed25519 key (RFC 8037 §2): the `kid` a
/// token may carry to name the key that signed it.
pub fn key_id(key: &VerifyingKey) -> String {
    let jwk = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        b64::encode_url(key.as_bytes())
    );
    b64::encode_url(&Sha256::digest(jwk.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use b64::Alphabet;

    #[test]
    fn key_id_matches_rfc8037_appendix_a3() {
        // RFC 8037 A.2/A.3: public key x and its thumbprint.
        let x = b64::decode(
            b"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
            Alphabet::UrlNoPad,
            32,
        )
        .unwrap();
        let k = VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap();
        assert_eq!(key_id(&k), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    }
}
