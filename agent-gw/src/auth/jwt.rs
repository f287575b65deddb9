//! Compact JWS decoding (RFC 7515) for EdDSA tokens (RFC 8037), and the
//! signing side used by the trusted-LAN bootstrap and by tests.
//!
//! Decoding only splits, bounds and parses; it proves nothing. The
//! [`Verifier`](super::Verifier) checks the signature over
//! [`Decoded::signing_input`] before any claim is believed.

use edkey::{Signature, SigningKey};
use serde::{Deserialize, Serialize};

use super::b64::{self, Alphabet, B64Error};

/// Largest bearer token accepted, in bytes. A real EdDSA token with the
/// claims we read is ~400 bytes; the bound keeps hostile headers cheap.
pub const MAX_TOKEN_LEN: usize = 4096;
const MAX_HEADER_JSON: usize = 512;
const MAX_CLAIMS_JSON: usize = 3072;

/// Which part of a token a decode error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Claims,
    Signature,
}

/// Why a token could not even be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    TooLong {
        len: usize,
        max: usize,
    },
    /// Not exactly three dot-separated segments.
    Segments,
    Base64(Part, B64Error),
    Json(Part),
    /// The signature segment is not 64 bytes.
    SignatureLength(usize),
    /// A `crit` header names extensions we do not implement (RFC 7515 §4.1.11).
    CriticalHeader,
    MissingClaim(&'static str),
    /// `exp` precedes `iat`.
    ExpiresBeforeIssued,
    /// `sub` is not `agent://tenant/name` (or a bare name) of a valid form.
    BadSubject,
    /// The `src` claim is not an IP address.
    BadSource,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::TooLong { len, max } => write!(f, "token is {len} bytes, limit {max}"),
            Malformed::Segments => f.write_str("token is not three dot-separated segments"),
            Malformed::Base64(p, e) => write!(f, "token {p:?} segment: {e}"),
            Malformed::Json(p) => write!(f, "token {p:?} segment is not the expected JSON object"),
            Malformed::SignatureLength(n) => write!(f, "signature is {n} bytes, expected 64"),
            Malformed::CriticalHeader => f.write_str("token has critical header extensions"),
            Malformed::MissingClaim(c) => write!(f, "token lacks the {c} claim"),
            Malformed::ExpiresBeforeIssued => f.write_str("token exp precedes iat"),
            Malformed::BadSubject => f.write_str("token sub is not a valid agent uri"),
            Malformed::BadSource => f.write_str("token src is not an IP address"),
        }
    }
}

/// The `alg` of a refused token, coarse enough to log without echoing input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    None,
    Hmac,
    Rsa,
    Ecdsa,
    Other,
}

impl Alg {
    fn classify(alg: &str) -> Alg {
        match alg {
            a if a.eq_ignore_ascii_case("none") => Alg::None,
            a if a.starts_with("HS") => Alg::Hmac,
            a if a.starts_with("RS") || a.starts_with("PS") => Alg::Rsa,
            a if a.starts_with("ES") => Alg::Ecdsa,
            _ => Alg::Other,
        }
    }
}

/// A decode failure: malformed, or a well-formed token of the wrong kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    Malformed(Malformed),
    BadAlgorithm(Alg),
}

impl From<Malformed> for DecodeError {
    fn from(m: Malformed) -> Self {
        DecodeError::Malformed(m)
    }
}

#[derive(Deserialize)]
struct RawHeader {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

/// `aud` is a string or an array of strings (RFC 7519 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    pub fn contains(&self, aud: &str) -> bool {
        match self {
            Audience::One(a) => a == aud,
            Audience::Many(v) => v.iter().any(|a| a == aud),
        }
    }
}

/// The claims agent-gw reads. Unknown claims are ignored; a duplicated
/// known claim is a decode error (serde refuses duplicate fields), so a
/// second `sub` can never shadow the signed one in some other parser.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Claims {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Space-separated scopes (RFC 8693 §4.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<Audience>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// Source address a trusted-LAN bootstrap token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<String>,
}

/// A parsed but unverified token.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub kid: Option<String>,
    pub claims: Claims,
    pub signature: Signature,
    /// `base64url(header) "." base64url(claims)`: what the signature covers.
    pub signing_input: &'a [u8],
}

/// Splits and parses a compact JWS, accepting only `alg: EdDSA`.
pub fn decode(token: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(Malformed::TooLong {
            len: token.len(),
            max: MAX_TOKEN_LEN,
        }
        .into());
    }
    let mut parts = token.split(|&b| b == b'.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Malformed::Segments.into());
    };
    let header_json = b64::decode(h, Alphabet::UrlNoPad, MAX_HEADER_JSON)
        .map_err(|e| Malformed::Base64(Part::Header, e))?;
    let header: RawHeader =
        serde_json::from_slice(&header_json).map_err(|_| Malformed::Json(Part::Header))?;
    // The algorithm is decided by us, never by the token (RFC 8725 §3.1):
    // only Ed25519 is accepted, before anything else is looked at.
    if header.alg != "EdDSA" {
        return Err(DecodeError::BadAlgorithm(Alg::classify(&header.alg)));
    }
    if header.crit.is_some() {
        return Err(Malformed::CriticalHeader.into());
    }
    let claims_json = b64::decode(c, Alphabet::UrlNoPad, MAX_CLAIMS_JSON)
        .map_err(|e| Malformed::Base64(Part::Claims, e))?;
    let claims: Claims =
        serde_json::from_slice(&claims_json).map_err(|_| Malformed::Json(Part::Claims))?;
    let sig = b64::decode(s, Alphabet::UrlNoPad, 64)
        .map_err(|e| Malformed::Base64(Part::Signature, e))?;
    let sig: [u8; 64] = sig
        .as_slice()
        .try_into()
        .map_err(|_| Malformed::SignatureLength(sig.len()))?;
    Ok(Decoded {
        kid: header.kid,
        claims,
        signature: Signature::from_bytes(&sig),
        signing_input: &token[..h.len() + 1 + c.len()],
    })
}

/// Signs `claims` as a compact EdDSA JWS. Used by the bootstrap endpoint
/// (router issuer key) and by tests that mint tokens with tenant keys.
pub fn mint(key: &SigningKey, kid: Option<&str>, claims: &Claims) -> String {
    let header = match kid {
        Some(kid) => serde_json::json!({"alg": "EdDSA", "typ": "JWT", "kid": kid}),
        None => serde_json::json!({"alg": "EdDSA", "typ": "JWT"}),
    };
    let mut out = b64::encode_url(header.to_string().as_bytes());
    out.push('.');
    // Serialising a struct of strings and integers cannot fail.
    out.push_str(&b64::encode_url(
        &serde_json::to_vec(claims).unwrap_or_default(),
    ));
    let sig = key.sign(out.as_bytes());
    out.push('.');
    out.push_str(&b64::encode_url(&sig.to_bytes()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    fn claims() -> Claims {
        Claims {
            iss: Some("t".into()),
            sub: Some("agent://lab/a".into()),
            tenant: Some("lab".into()),
            scope: Some("agent.invoke".into()),
            aud: Some(Audience::One("agentd".into())),
            iat: Some(100),
            exp: Some(200),
            nbf: None,
            jti: None,
            src: None,
        }
    }

    #[test]
    fn decodes_what_it_mints() {
        let t = mint(&key(), Some("k1"), &claims());
        let d = decode(t.as_bytes()).unwrap();
        assert_eq!(d.kid.as_deref(), Some("k1"));
        assert_eq!(d.claims, claims());
        assert!(t.as_bytes().starts_with(d.signing_input));
        assert_eq!(d.signing_input.iter().filter(|&&b| b == b'.').count(), 1);
    }

    fn forge(header: &str, claims: &str, sig: &[u8]) -> String {
        format!(
            "{}.{}.{}",
            b64::encode_url(header.as_bytes()),
            b64::encode_url(claims.as_bytes()),
            b64::encode_url(sig)
        )
    }

    #[test]
    fn refuses_alg_none_and_hmac_before_reading_claims() {
        let t = forge(r#"{"alg":"none"}"#, "garbage", b"");
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            DecodeError::BadAlgorithm(Alg::None)
        );
        let t = forge(r#"{"alg":"HS256","typ":"JWT"}"#, "{}", &[0; 32]);
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            DecodeError::BadAlgorithm(Alg::Hmac)
        );
        let t = forge(r#"{"alg":"ES256"}"#, "{}", &[0; 64]);
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            DecodeError::BadAlgorithm(Alg::Ecdsa)
        );
    }

    #[test]
    fn refuses_duplicate_claims_and_crit_headers() {
        let t = forge(r#"{"alg":"EdDSA"}"#, r#"{"sub":"a","sub":"b"}"#, &[0; 64]);
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            Malformed::Json(Part::Claims).into()
        );
        let t = forge(r#"{"alg":"EdDSA","crit":["x"]}"#, "{}", &[0; 64]);
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            Malformed::CriticalHeader.into()
        );
    }

    #[test]
    fn refuses_wrong_shapes_and_sizes() {
        assert_eq!(decode(b"a.b").unwrap_err(), Malformed::Segments.into());
        assert_eq!(decode(b"a.b.c.d").unwrap_err(), Malformed::Segments.into());
        let long = vec![b'a'; MAX_TOKEN_LEN + 1];
        assert_eq!(
            decode(&long).unwrap_err(),
            Malformed::TooLong {
                len: MAX_TOKEN_LEN + 1,
                max: MAX_TOKEN_LEN
            }
            .into()
        );
        let t = forge(r#"{"alg":"EdDSA"}"#, "{}", &[0; 63]);
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            Malformed::SignatureLength(63).into()
        );
        let t = forge(r#"{"alg":"EdDSA"}"#, r#"{"exp":1.5}"#, &[0; 64]);
        assert_eq!(
            decode(t.as_bytes()).unwrap_err(),
            Malformed::Json(Part::Claims).into()
        );
    }
}
