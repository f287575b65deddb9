//! Key material: tenant verification keys from `jwt_key` options, the
//! router's own issuer key file, key ids, and the OS random source.
//!
//! The issuer key file is PKCS#8 v1 PEM (`-----BEGIN PRIVATE KEY-----`),
//! the form `openssl genpkey -algorithm ed25519` and rcgen write, so the
//! same file can serve as the router identity for TLS later. The DER of an
//! Ed25519 PKCS#8 v1 key is a fixed 16-byte prefix plus the 32-byte seed,
//! which lets us read and write it without an ASN.1 library.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use super::b64::{self, Alphabet, B64Error};

/// DER prefix of `PrivateKeyInfo { v1, id-Ed25519, OCTET STRING(OCTET STRING(seed)) }`.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";
const MAX_KEY_FILE: u64 = 4096;

/// Fills `buf` from the kernel CSPRNG (`getrandom(2)`, blocking until the
/// pool is initialised, which on a router matters right after boot).
pub fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        done += n as usize;
    }
    Ok(())
}

/// Why a `jwt_key` value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// Only `ed25519:` keys exist.
    UnknownType,
    Base64(B64Error),
    /// Not 32 bytes.
    Length(usize),
    /// Not a valid curve point.
    NotOnCurve,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::UnknownType => f.write_str("key must start with 'ed25519:'"),
            KeyError::Base64(e) => write!(f, "key is not base64: {e}"),
            KeyError::Length(n) => write!(f, "key is {n} bytes, expected 32"),
            KeyError::NotOnCurve => f.write_str("key is not a valid Ed25519 public key"),
        }
    }
}

impl std::error::Error for KeyError {}

/// Parses `ed25519:BASE64` (raw 32-byte public key, std or URL-safe
/// alphabet, padding optional).
pub fn parse_public_key(value: &str) -> Result<VerifyingKey, KeyError> {
    let b = value
        .trim()
        .strip_prefix("ed25519:")
        .ok_or(KeyError::UnknownType)?;
    let raw = b64::decode(b.as_bytes(), Alphabet::Any, 32).map_err(|e| match e {
        B64Error::TooLong { .. } => KeyError::Length(b.len() * 3 / 4),
        e => KeyError::Base64(e),
    })?;
    let raw: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| KeyError::Length(raw.len()))?;
    VerifyingKey::from_bytes(&raw).map_err(|_| KeyError::NotOnCurve)
}

/// Formats a public key the way `jwt_key` options take it.
pub fn format_public_key(key: &VerifyingKey) -> String {
    format!("ed25519:{}", b64::encode_std(key.as_bytes()))
}

/// RFC 7638 JWK thumbprint of an Ed25519 key (RFC 8037 §2): the `kid` a
/// token may carry to name the key that signed it.
pub fn key_id(key: &VerifyingKey) -> String {
    let jwk = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        b64::encode_url(key.as_bytes())
    );
    b64::encode_url(&Sha256::digest(jwk.as_bytes()))
}

/// Why the issuer key file could not be used.
#[derive(Debug)]
pub enum KeyFileError {
    Io(PathBuf, io::Error),
    /// The file exists but is not an Ed25519 PKCS#8 PEM or raw 32-byte seed.
    Format(PathBuf),
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFileError::Io(p, e) => write!(f, "key file {}: {e}", p.display()),
            KeyFileError::Format(p) => {
                write!(
                    f,
                    "key file {}: not an Ed25519 PKCS#8 PEM private key",
                    p.display()
                )
            }
        }
    }
}

impl std::error::Error for KeyFileError {}

fn parse_key_file(bytes: &[u8]) -> Option<SigningKey> {
    if bytes.len() == 32 {
        let seed: [u8; 32] = bytes.try_into().ok()?;
        return Some(SigningKey::from_bytes(&seed));
    }
    let text = std::str::from_utf8(bytes).ok()?.trim();
    let body = text.strip_prefix(PEM_BEGIN)?.strip_suffix(PEM_END)?;
    let b64: String = body.split_ascii_whitespace().collect();
    let der = b64::decode(b64.as_bytes(), Alphabet::Any, 48).ok()?;
    let seed = der.strip_prefix(&PKCS8_ED25519_PREFIX[..])?;
    let seed: [u8; 32] = seed.try_into().ok()?;
    Some(SigningKey::from_bytes(&seed))
}

fn pem_of(key: &SigningKey) -> String {
    let mut der = PKCS8_ED25519_PREFIX.to_vec();
    der.extend_from_slice(key.as_bytes());
    format!("{PEM_BEGIN}\n{}\n{PEM_END}\n", b64::encode_std(&der))
}

/// Loads the Ed25519 key at `path`, creating it (mode 0600, never
/// overwriting) when it does not exist yet.
pub fn load_or_create_key(path: &Path) -> Result<SigningKey, KeyFileError> {
    let io_err = |e| KeyFileError::Io(path.to_path_buf(), e);
    match std::fs::File::open(path) {
        Ok(f) => {
            let mut bytes = Vec::new();
            f.take(MAX_KEY_FILE)
                .read_to_end(&mut bytes)
                .map_err(io_err)?;
            parse_key_file(&bytes).ok_or_else(|| KeyFileError::Format(path.to_path_buf()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            fill_random(&mut seed).map_err(io_err)?;
            let key = SigningKey::from_bytes(&seed);
            // create_new: if another process created it meanwhile, we fail
            // here rather than replace a key that may already be pinned.
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(io_err)?;
            f.write_all(pem_of(&key).as_bytes()).map_err(io_err)?;
            f.sync_all().map_err(io_err)?;
            Ok(key)
        }
        Err(e) => Err(io_err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn parses_public_keys_in_either_alphabet() {
        let k = SigningKey::from_bytes(&[1u8; 32]).verifying_key();
        let s = format_public_key(&k);
        assert_eq!(parse_public_key(&s).unwrap(), k);
        let url = format!("ed25519:{}", b64::encode_url(k.as_bytes()));
        assert_eq!(parse_public_key(&url).unwrap(), k);
        assert_eq!(parse_public_key("rsa:AAAA"), Err(KeyError::UnknownType));
        assert_eq!(parse_public_key("ed25519:AAAA"), Err(KeyError::Length(3)));
        assert!(matches!(
            parse_public_key("ed25519:!!!!"),
            Err(KeyError::Base64(_))
        ));
    }

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

    #[test]
    fn creates_key_file_once_with_0600_and_reads_it_back() {
        let dir = std::env::temp_dir().join(format!("agw-key-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("issuer.key");
        let _ = std::fs::remove_file(&path);
        let a = load_or_create_key(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let b = load_or_create_key(&path).unwrap();
        assert_eq!(a.to_bytes(), b.to_bytes());
        std::fs::write(&path, b"not a key").unwrap();
        assert!(matches!(
            load_or_create_key(&path),
            Err(KeyFileError::Format(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_openssl_style_pem() {
        // RFC 8410 §10.3 example private key.
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n";
        let k = parse_key_file(pem.as_bytes()).unwrap();
        assert_eq!(k.as_bytes()[0], 0xd4);
        assert_eq!(
            parse_key_file(pem_of(&k).as_bytes()).unwrap().to_bytes(),
            k.to_bytes()
        );
    }
}
