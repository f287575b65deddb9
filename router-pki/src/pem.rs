//! PEM (RFC 7468) blocks: the key file's `PRIVATE KEY`, certificate
//! files' `CERTIFICATE`s.
//!
//! Bounded and strict inside a block (standard base64 only, the decoded
//! size checked before decoding); lines outside blocks are ignored, as
//! openssl's "Bag Attributes" or an operator's comments are.

use std::fmt;

use crate::b64::{self, Alphabet, B64Error};

/// Why PEM text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemError {
    /// No `-----BEGIN <label>-----` block.
    Missing(&'static str),
    /// A block without its `-----END <label>-----` line.
    Unterminated(&'static str),
    /// More blocks than the caller takes.
    TooMany { label: &'static str, max: usize },
    /// The block's body is not base64 (or decodes to more than allowed).
    Base64 {
        label: &'static str,
        error: B64Error,
    },
}

impl fmt::Display for PemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PemError::Missing(l) => write!(f, "no PEM block '{l}'"),
            PemError::Unterminated(l) => write!(f, "PEM block '{l}' has no END line"),
            PemError::TooMany { label, max } => {
                write!(f, "more than {max} PEM block(s) '{label}'")
            }
            PemError::Base64 { label, error } => write!(f, "PEM block '{label}': {error}"),
        }
    }
}

impl std::error::Error for PemError {}

/// Every `label` block of `text`, in order: at most `max_count` of them,
/// each at most `max_der` bytes once decoded.
pub fn decode_all(
    text: &[u8],
    label: &'static str,
    max_count: usize,
    max_der: usize,
) -> Result<Vec<Vec<u8>>, PemError> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let mut out = Vec::new();
    let mut body: Option<Vec<u8>> = None;
    for line in text.split(|&c| c == b'\n') {
        let line = line.trim_ascii();
        match body.as_mut() {
            None if line == begin.as_bytes() => {
                if out.len() == max_count {
                    return Err(PemError::TooMany {
                        label,
                        max: max_count,
                    });
                }
                body = Some(Vec::new());
            }
            None => {}
            Some(b) if line == end.as_bytes() => {
                let der = b64::decode(b, Alphabet::Any, max_der)
                    .map_err(|error| PemError::Base64 { label, error })?;
                out.push(der);
                body = None;
            }
            Some(b) => {
                // Bounded by the decoded size: a body this long is refused
                // as TooLong at the END line anyway.
                if b.len() <= max_der / 3 * 4 + 4 {
                    b.extend_from_slice(line);
                } else {
                    return Err(PemError::Base64 {
                        label,
                        error: B64Error::TooLong { max: max_der },
                    });
                }
            }
        }
    }
    if body.is_some() {
        return Err(PemError::Unterminated(label));
    }
    if out.is_empty() {
        return Err(PemError::Missing(label));
    }
    Ok(out)
}

/// The one `label` block of `text` (a second one is refused: which of
/// two keys was meant is not ours to guess).
pub fn decode_one(text: &[u8], label: &'static str, max_der: usize) -> Result<Vec<u8>, PemError> {
    let mut all = decode_all(text, label, 1, max_der)?;
    Ok(all.remove(0))
}

/// `der` as a PEM block with 64-column lines.
pub fn encode(label: &str, der: &[u8]) -> String {
    let body = b64::encode_std(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_wraps_at_64_columns() {
        let der: Vec<u8> = (0..200u8).collect();
        let text = encode("CERTIFICATE", &der);
        assert!(text
            .lines()
            .all(|l| l.len() <= 64 || l.starts_with("-----")));
        assert_eq!(decode_one(text.as_bytes(), "CERTIFICATE", 256), Ok(der));
    }

    #[test]
    fn reads_every_block_in_order_and_skips_text_around_them() {
        let text = format!(
            "subject=CN=x\r\n{}junk\n{}",
            encode("CERTIFICATE", b"one"),
            encode("CERTIFICATE", b"two").replace('\n', "\r\n")
        );
        let all = decode_all(text.as_bytes(), "CERTIFICATE", 4, 64).unwrap();
        assert_eq!(all, vec![b"one".to_vec(), b"two".to_vec()]);
    }

    #[test]
    fn refuses_missing_unterminated_extra_and_oversized_blocks() {
        assert_eq!(
            decode_one(b"nothing", "PRIVATE KEY", 48),
            Err(PemError::Missing("PRIVATE KEY"))
        );
        let open = "-----BEGIN PRIVATE KEY-----\nAAAA\n";
        assert_eq!(
            decode_one(open.as_bytes(), "PRIVATE KEY", 48),
            Err(PemError::Unterminated("PRIVATE KEY"))
        );
        let two = format!(
            "{}{}",
            encode("PRIVATE KEY", b"a"),
            encode("PRIVATE KEY", b"b")
        );
        assert!(matches!(
            decode_one(two.as_bytes(), "PRIVATE KEY", 48),
            Err(PemError::TooMany { max: 1, .. })
        ));
        let big = encode("CERTIFICATE", &[0u8; 100]);
        assert!(matches!(
            decode_one(big.as_bytes(), "CERTIFICATE", 50),
            Err(PemError::Base64 {
                error: B64Error::TooLong { .. },
                ..
            })
        ));
    }
}
