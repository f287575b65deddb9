//! The router identity key and the text forms of Ed25519 public keys.
//!
//! The key file is PKCS#8 v1 PEM (`-----BEGIN PRIVATE KEY-----`), the form
//! `openssl genpkey -algorithm ed25519` and rcgen write. The DER of an
//! Ed25519 PKCS#8 v1 key is a fixed 16-byte prefix plus the 32-byte seed,
//! which lets us read and write it without an ASN.1 library.
//!
//! A key is created once and never replaced: a peer may already have
//! pinned its fingerprint, so an unreadable or malformed existing file is
//! an error naming the path, never a reason to write a new key.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use edkey::Sha256;
use edkey::{SigningKey, VerifyingKey};

use crate::b64::{self, Alphabet, B64Error};
use crate::pem;

/// DER prefix of `PrivateKeyInfo { v1, id-Ed25519, OCTET STRING(OCTET STRING(seed)) }`.
const PKCS8_ED25519_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const PEM_LABEL: &str = "PRIVATE KEY";
/// A key file is well under this; more is not a key file.
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

/// Why an `ed25519:BASE64` public key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicKeyError {
    /// Only `ed25519:` keys exist.
    UnknownType,
    Base64(B64Error),
    /// Not 32 bytes.
    Length(usize),
    /// Not a valid curve point.
    NotOnCurve,
}

impl fmt::Display for PublicKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublicKeyError::UnknownType => f.write_str("key must start with 'ed25519:'"),
            PublicKeyError::Base64(e) => write!(f, "key is not base64: {e}"),
            PublicKeyError::Length(n) => write!(f, "key is {n} bytes, expected 32"),
            PublicKeyError::NotOnCurve => f.write_str("key is not a valid Ed25519 public key"),
        }
    }
}

impl std::error::Error for PublicKeyError {}

/// Parses `ed25519:BASE64` (raw 32-byte public key, std or URL-safe
/// alphabet, padding optional).
pub fn parse_public_key(value: &str) -> Result<VerifyingKey, PublicKeyError> {
    let b = value
        .trim()
        .strip_prefix("ed25519:")
        .ok_or(PublicKeyError::UnknownType)?;
    let raw = b64::decode(b.as_bytes(), Alphabet::Any, 32).map_err(|e| match e {
        B64Error::TooLong { .. } => PublicKeyError::Length(b.len() * 3 / 4),
        e => PublicKeyError::Base64(e),
    })?;
    let raw: [u8; 32] = raw
        .as_slice()
        .try_into()
        .map_err(|_| PublicKeyError::Length(raw.len()))?;
    VerifyingKey::from_bytes(&raw).map_err(|_| PublicKeyError::NotOnCurve)
}

/// Formats a public key as `ed25519:BASE64` (what `jwt_key` options and
/// `agentctl pki issue-router --pubkey` take).
pub fn format_public_key(key: &VerifyingKey) -> String {
    format!("ed25519:{}", b64::encode_std(key.as_bytes()))
}

/// `sha256:` + SHA-256 of a raw 32-byte Ed25519 public key: what a peer
/// section's `key_fingerprint` pins and what `agentctl pki show` prints.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a raw Ed25519 public key.
    pub fn of_raw(public_key: &[u8; 32]) -> Fingerprint {
        Fingerprint(Sha256::digest(public_key))
    }

    pub fn of(key: &VerifyingKey) -> Fingerprint {
        Fingerprint::of_raw(key.as_bytes())
    }
}

/// The text form of [`Fingerprint::of`]: `sha256:` + 64 lowercase hex digits.
pub fn fingerprint(key: &VerifyingKey) -> String {
    Fingerprint::of(key).to_string()
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Why a pinned fingerprint value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FingerprintError {
    /// Only `sha256:` fingerprints exist.
    UnknownType,
    /// Not 64 hex digits after the prefix.
    Length(usize),
    /// A character that is not a hex digit (offset after the prefix).
    NotHex { at: usize },
}

impl fmt::Display for FingerprintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FingerprintError::UnknownType => f.write_str("fingerprint must start with 'sha256:'"),
            FingerprintError::Length(n) => {
                write!(f, "fingerprint has {n} hex digits, expected 64")
            }
            FingerprintError::NotHex { at } => {
                write!(f, "fingerprint has a non-hex character at offset {at}")
            }
        }
    }
}

impl std::error::Error for FingerprintError {}

impl FromStr for Fingerprint {
    type Err = FingerprintError;

    /// `sha256:` + 64 hex digits (either case: operators paste from
    /// tools that print upper case; the text form is always lower case).
    fn from_str(value: &str) -> Result<Fingerprint, FingerprintError> {
        let hex = value
            .trim()
            .strip_prefix("sha256:")
            .ok_or(FingerprintError::UnknownType)?
            .as_bytes();
        if let Some(at) = hex.iter().position(|c| !c.is_ascii_hexdigit()) {
            return Err(FingerprintError::NotHex { at });
        }
        if hex.len() != 64 {
            return Err(FingerprintError::Length(hex.len()));
        }
        let mut out = [0u8; 32];
        for (o, pair) in out.iter_mut().zip(hex.chunks(2)) {
            let digit = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            *o = digit(pair[0]) << 4 | digit(pair[1]);
        }
        Ok(Fingerprint(out))
    }
}

/// Why a key file could not be used.
#[derive(Debug)]
pub enum KeyFileError {
    Io(PathBuf, io::Error),
    /// The file exists but is not an Ed25519 PKCS#8 PEM (or raw 32-byte
    /// seed) private key.
    Format(PathBuf),
    /// [`create_key_file`]: the file is already there (it is never replaced).
    Exists(PathBuf),
}

impl KeyFileError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            KeyFileError::Io(p, _) | KeyFileError::Format(p) | KeyFileError::Exists(p) => p,
        }
    }
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
            KeyFileError::Exists(p) => {
                write!(
                    f,
                    "key file {}: already exists (never overwritten)",
                    p.display()
                )
            }
        }
    }
}

impl std::error::Error for KeyFileError {}

/// Decodes a key file: PKCS#8 v1 PEM, or (older agent-gw issuer keys) the
/// raw 32-byte seed.
pub fn parse_key(bytes: &[u8]) -> Option<SigningKey> {
    if bytes.len() == 32 {
        let seed: [u8; 32] = bytes.try_into().ok()?;
        return Some(SigningKey::from_bytes(&seed));
    }
    let der = pem::decode_one(bytes, PEM_LABEL, 48).ok()?;
    let seed = der.strip_prefix(&PKCS8_ED25519_PREFIX[..])?;
    let seed: [u8; 32] = seed.try_into().ok()?;
    Some(SigningKey::from_bytes(&seed))
}

/// The PKCS#8 v1 DER of `key` (what rustls and ring load). Holds the
/// secret: the caller keeps it no longer than needed.
pub fn pkcs8_der(key: &SigningKey) -> Vec<u8> {
    let mut der = PKCS8_ED25519_PREFIX.to_vec();
    der.extend_from_slice(key.as_bytes());
    der
}

/// The PEM text of [`pkcs8_der`], as the key file holds it.
pub fn key_pem(key: &SigningKey) -> String {
    pem::encode(PEM_LABEL, &pkcs8_der(key))
}

/// A new key from the kernel CSPRNG.
pub fn generate_key() -> io::Result<SigningKey> {
    let mut seed = [0u8; 32];
    fill_random(&mut seed)?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Reads the key at `path`; creates nothing.
pub fn load_key(path: &Path) -> Result<SigningKey, KeyFileError> {
    let f = std::fs::File::open(path).map_err(|e| KeyFileError::Io(path.to_path_buf(), e))?;
    let mut bytes = Vec::new();
    f.take(MAX_KEY_FILE)
        .read_to_end(&mut bytes)
        .map_err(|e| KeyFileError::Io(path.to_path_buf(), e))?;
    parse_key(&bytes).ok_or_else(|| KeyFileError::Format(path.to_path_buf()))
}

/// Loads the Ed25519 key at `path`, creating it (mode 0600, parent
/// directory 0700 if missing, never overwriting) when it does not exist.
pub fn load_or_create_key(path: &Path) -> Result<SigningKey, KeyFileError> {
    match load_key(path) {
        Err(KeyFileError::Io(_, e)) if e.kind() == io::ErrorKind::NotFound => {
            let key = generate_key().map_err(|e| KeyFileError::Io(path.to_path_buf(), e))?;
            match create_key_file(path, &key) {
                Ok(()) => Ok(key),
                // Another process created it meanwhile: its key wins.
                Err(KeyFileError::Exists(_)) => load_key(path),
                Err(e) => Err(e),
            }
        }
        other => other,
    }
}

/// Writes `key` to a new file at `path` (mode 0600; parent directory
/// created 0700 if missing). An existing file is never replaced:
/// [`KeyFileError::Exists`].
///
/// The key is written to a temporary file in the same directory and
/// hard-linked into place, so `path` appears complete or not at all (a
/// crash mid-write cannot leave a truncated key that would then block
/// every start). Where the file system has no hard links the file is
/// created with `O_EXCL` directly.
pub fn create_key_file(path: &Path, key: &SigningKey) -> Result<(), KeyFileError> {
    let io_err = |e| KeyFileError::Io(path.to_path_buf(), e);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io_err)?;
    }
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(KeyFileError::Exists(path.to_path_buf()));
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // A name no other writer uses (agentd and agent-gw may both create
    // the identity key at boot): whoever links first wins, the other
    // reads that key.
    let mut nonce = [0u8; 8];
    fill_random(&mut nonce).map_err(io_err)?;
    let nonce = u64::from_ne_bytes(nonce);
    let tmp = dir.join(format!(".{name}.new.{}.{nonce:016x}", std::process::id()));
    write_new(&tmp, key).map_err(io_err)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(KeyFileError::Exists(path.to_path_buf()))
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EOPNOTSUPP)) => {
            write_new(path, key).map_err(|e| {
                if e.kind() == io::ErrorKind::AlreadyExists {
                    KeyFileError::Exists(path.to_path_buf())
                } else {
                    io_err(e)
                }
            })?;
        }
        Err(e) => return Err(io_err(e)),
    }
    // The new directory entry survives a power cut too.
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_new(path: &Path, key: &SigningKey) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    let written = f
        .write_all(key_pem(key).as_bytes())
        .and_then(|()| f.sync_all());
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_public_keys_in_either_alphabet() {
        let k = SigningKey::from_bytes(&[1u8; 32]).verifying_key();
        let s = format_public_key(&k);
        assert_eq!(parse_public_key(&s).unwrap(), k);
        let url = format!("ed25519:{}", b64::encode_url(k.as_bytes()));
        assert_eq!(parse_public_key(&url).unwrap(), k);
        assert_eq!(
            parse_public_key("rsa:AAAA"),
            Err(PublicKeyError::UnknownType)
        );
        assert_eq!(
            parse_public_key("ed25519:AAAA"),
            Err(PublicKeyError::Length(3))
        );
        assert!(matches!(
            parse_public_key("ed25519:!!!!"),
            Err(PublicKeyError::Base64(_))
        ));
    }

    #[test]
    fn fingerprint_is_sha256_of_the_raw_key_and_round_trips() {
        let k = SigningKey::from_bytes(&[7u8; 32]).verifying_key();
        let text = fingerprint(&k);
        let digest: [u8; 32] = Sha256::digest(k.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(text, format!("sha256:{hex}"));
        assert_eq!(text.parse::<Fingerprint>(), Ok(Fingerprint::of(&k)));
        assert_eq!(
            text.to_uppercase().replace("SHA256:", "sha256:").parse(),
            Ok(Fingerprint::of(&k))
        );
    }

    #[test]
    fn fingerprint_parser_refuses_other_forms() {
        assert_eq!(
            "md5:00".parse::<Fingerprint>(),
            Err(FingerprintError::UnknownType)
        );
        assert_eq!(
            "sha256:abcd".parse::<Fingerprint>(),
            Err(FingerprintError::Length(4))
        );
        let colons = format!("sha256:{}", "ab:".repeat(32));
        assert_eq!(
            colons.parse::<Fingerprint>(),
            Err(FingerprintError::NotHex { at: 2 })
        );
    }

    #[test]
    fn reads_openssl_style_pem() {
        // RFC 8410 §10.3 example private key.
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINTuctv5E1hK1bbY8fdp+K06/nwoy/HU++CXqI9EdVhC\n-----END PRIVATE KEY-----\n";
        let k = parse_key(pem.as_bytes()).unwrap();
        assert_eq!(k.as_bytes()[0], 0xd4);
        assert_eq!(
            parse_key(key_pem(&k).as_bytes()).unwrap().to_bytes(),
            k.to_bytes()
        );
    }

    #[test]
    fn refuses_other_key_types_and_trailing_garbage() {
        let k = SigningKey::from_bytes(&[3u8; 32]);
        let mut der = pkcs8_der(&k);
        der[11] = 0x71; // id-Ed448 (1.3.101.113)
        assert!(parse_key(pem::encode(PEM_LABEL, &der).as_bytes()).is_none());
        let cert_label = pem::encode("CERTIFICATE", &pkcs8_der(&k));
        assert!(parse_key(cert_label.as_bytes()).is_none());
        assert!(parse_key(b"not a key").is_none());
    }
}
