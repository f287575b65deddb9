//! Bounded base64 for PEM bodies, JWT segments and configured keys.
//!
//! JWT segments are base64url without padding (RFC 7515 §2); configured
//! `ed25519:…` keys are whatever an operator pasted, so the
//! decoder accepts both the standard and the URL-safe alphabet, padded or
//! not, but never mixes in whitespace or trailing garbage. Written by hand
//! so every failure is a typed error and the output size is checked before
//! any byte is written.

/// Why a base64 string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum B64Error {
    /// The decoded form would not fit the caller's bound.
    TooLong { max: usize },
    /// A character outside the accepted alphabet (offset into the input).
    BadChar { at: usize },
    /// A length no base64 encoding can have (one leftover character).
    BadLength,
    /// Padding in the middle, too much of it, or non-zero trailing bits.
    BadPadding,
}

impl std::fmt::Display for B64Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            B64Error::TooLong { max } => write!(f, "decodes to more than {max} bytes"),
            B64Error::BadChar { at } => write!(f, "invalid base64 character at offset {at}"),
            B64Error::BadLength => f.write_str("invalid base64 length"),
            B64Error::BadPadding => f.write_str("invalid base64 padding"),
        }
    }
}

impl std::error::Error for B64Error {}

/// Which alphabet(s) the decoder accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alphabet {
    /// `-` and `_`, no padding: JWT segments.
    UrlNoPad,
    /// Either alphabet, padding optional: operator-supplied keys.
    Any,
}

fn sextet(c: u8, alphabet: Alphabet) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        b'+' if alphabet == Alphabet::Any => Some(62),
        b'/' if alphabet == Alphabet::Any => Some(63),
        _ => None,
    }
}

/// Decodes `input`, refusing output longer than `max` bytes.
pub fn decode(input: &[u8], alphabet: Alphabet, max: usize) -> Result<Vec<u8>, B64Error> {
    let mut body = input;
    if alphabet == Alphabet::Any {
        let pad = input.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !input.len().is_multiple_of(4)) {
            return Err(B64Error::BadPadding);
        }
        body = &input[..input.len() - pad];
    }
    let rem = body.len() % 4;
    if rem == 1 {
        return Err(B64Error::BadLength);
    }
    let out_len = body.len() / 4 * 3 + rem.saturating_sub(1);
    if out_len > max {
        return Err(B64Error::TooLong { max });
    }
    let mut out = Vec::with_capacity(out_len);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for (at, &c) in body.iter().enumerate() {
        let v = sextet(c, alphabet).ok_or(B64Error::BadChar { at })?;
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Canonical encodings leave the unused low bits zero; anything else is
    // a second spelling of the same bytes, which a signature check must not
    // be asked to tolerate.
    if acc != 0 {
        return Err(B64Error::BadPadding);
    }
    Ok(out)
}

const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn encode_with(input: &[u8], table: &[u8; 64], pad: bool, out: &mut String) {
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..4 {
            if i < chars {
                out.push(table[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
}

/// base64url without padding (JWT segments).
pub fn encode_url(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    encode_with(input, URL, false, &mut out);
    out
}

/// Standard padded base64 (key files, `jwt_key` values).
pub fn encode_std(input: &[u8]) -> String {
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    encode_with(input, STD, true, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_length_in_both_alphabets() {
        let data: Vec<u8> = (0..=255u8).collect();
        for n in 0..70 {
            let s = &data[n..n + n.min(40)];
            let url = encode_url(s);
            assert_eq!(decode(url.as_bytes(), Alphabet::UrlNoPad, 64).unwrap(), s);
            let std = encode_std(s);
            assert_eq!(decode(std.as_bytes(), Alphabet::Any, 64).unwrap(), s);
            assert_eq!(decode(url.as_bytes(), Alphabet::Any, 64).unwrap(), s);
        }
    }

    #[test]
    fn matches_rfc4648_vectors() {
        assert_eq!(encode_std(b"foobar"), "Zm9vYmFy");
        assert_eq!(encode_std(b"fo"), "Zm8=");
        assert_eq!(encode_url(b"\xfb\xff"), "-_8");
        assert_eq!(decode(b"Zm9vYg==", Alphabet::Any, 16).unwrap(), b"foob");
    }

    #[test]
    fn url_decoder_refuses_padding_and_std_alphabet() {
        assert_eq!(
            decode(b"Zm8=", Alphabet::UrlNoPad, 16),
            Err(B64Error::BadChar { at: 3 })
        );
        assert_eq!(
            decode(b"+/8", Alphabet::UrlNoPad, 16),
            Err(B64Error::BadChar { at: 0 })
        );
    }

    #[test]
    fn refuses_bad_lengths_padding_and_noncanonical_bits() {
        assert_eq!(
            decode(b"Zm9vY", Alphabet::UrlNoPad, 16),
            Err(B64Error::BadLength)
        );
        assert_eq!(
            decode(b"Zm9=Yg==", Alphabet::Any, 16),
            Err(B64Error::BadChar { at: 3 })
        );
        assert_eq!(
            decode(b"Zg===", Alphabet::Any, 16),
            Err(B64Error::BadPadding)
        );
        // "Zh" carries a non-zero trailing bit: a second spelling of "f".
        assert_eq!(
            decode(b"Zh", Alphabet::UrlNoPad, 16),
            Err(B64Error::BadPadding)
        );
    }

    #[test]
    fn refuses_output_beyond_the_bound_before_decoding() {
        assert_eq!(
            decode(b"Zm9vYmFy", Alphabet::UrlNoPad, 5),
            Err(B64Error::TooLong { max: 5 })
        );
    }
}
