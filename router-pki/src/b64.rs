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

/// Marks a byte outside the alphabet in the lookup tables.
const INVALID: u8 = 0xff;

/// Sextet of every byte for `alphabet` (`INVALID` outside it): one table
/// lookup per character instead of a chain of range tests, because the
/// peer data plane decodes a forwarding assertion on every call.
const fn table(any: bool) -> [u8; 256] {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 64 {
        t[URL[i] as usize] = i as u8;
        if any {
            t[STD[i] as usize] = i as u8;
        }
        i += 1;
    }
    t
}

const URL_TABLE: [u8; 256] = table(false);
const ANY_TABLE: [u8; 256] = table(true);

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
    let table = match alphabet {
        Alphabet::UrlNoPad => &URL_TABLE,
        Alphabet::Any => &ANY_TABLE,
    };
    let sextets = |at: usize, chunk: &[u8]| -> Result<u32, B64Error> {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = table[usize::from(c)];
            if v == INVALID {
                return Err(B64Error::BadChar { at: at + i });
            }
            n = (n << 6) | u32::from(v);
        }
        Ok(n)
    };
    let mut out = Vec::with_capacity(out_len);
    let whole = body.len() - rem;
    for (k, chunk) in body[..whole].chunks_exact(4).enumerate() {
        let n = sextets(k * 4, chunk)?;
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
    }
    if rem > 0 {
        // 2 characters carry 1 byte (4 spare bits), 3 carry 2 (2 spare).
        let n = sextets(whole, &body[whole..])?;
        let spare = if rem == 2 { 4 } else { 2 };
        // Canonical encodings leave the unused low bits zero; anything
        // else is a second spelling of the same bytes, which a signature
        // check must not be asked to tolerate.
        if n & ((1 << spare) - 1) != 0 {
            return Err(B64Error::BadPadding);
        }
        let n = n >> spare;
        if rem == 2 {
            out.push(n as u8);
        } else {
            out.extend_from_slice(&[(n >> 8) as u8, n as u8]);
        }
    }
    Ok(out)
}

const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn encode_with(input: &[u8], table: &[u8; 64], pad: bool, out: &mut String) {
    let at = |n: u32, shift: u32| char::from(table[((n >> shift) & 63) as usize]);
    let mut chunks = input.chunks_exact(3);
    for c in &mut chunks {
        let n = (u32::from(c[0]) << 16) | (u32::from(c[1]) << 8) | u32::from(c[2]);
        out.extend([at(n, 18), at(n, 12), at(n, 6), at(n, 0)]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend([at(n, 18), at(n, 12)]);
            if pad {
                out.push_str("==");
            }
        }
        [a, b] => {
            let n = (u32::from(a) << 16) | (u32::from(b) << 8);
            out.extend([at(n, 18), at(n, 12), at(n, 6)]);
            if pad {
                out.push('=');
            }
        }
        _ => {}
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

    /// The table decoder against the definition, one sextet at a time:
    /// every string over a small alphabet (valid characters, both
    /// alphabets' extras, padding, a foreign byte) up to 5 characters
    /// decodes to the same bytes or the same typed error.
    #[test]
    fn table_decoder_agrees_with_the_bitwise_definition() {
        fn reference(input: &[u8], alphabet: Alphabet) -> Result<Vec<u8>, B64Error> {
            let mut body = input;
            if alphabet == Alphabet::Any {
                let pad = input.iter().rev().take_while(|&&c| c == b'=').count();
                if pad > 2 || (pad > 0 && !input.len().is_multiple_of(4)) {
                    return Err(B64Error::BadPadding);
                }
                body = &input[..input.len() - pad];
            }
            if body.len() % 4 == 1 {
                return Err(B64Error::BadLength);
            }
            let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0u32);
            for (at, &c) in body.iter().enumerate() {
                let v = match c {
                    b'A'..=b'Z' => c - b'A',
                    b'a'..=b'z' => c - b'a' + 26,
                    b'0'..=b'9' => c - b'0' + 52,
                    b'-' => 62,
                    b'_' => 63,
                    b'+' if alphabet == Alphabet::Any => 62,
                    b'/' if alphabet == Alphabet::Any => 63,
                    _ => return Err(B64Error::BadChar { at }),
                };
                acc = (acc << 6) | u32::from(v);
                bits += 6;
                if bits >= 8 {
                    bits -= 8;
                    out.push((acc >> bits) as u8);
                    acc &= (1 << bits) - 1;
                }
            }
            if acc != 0 {
                return Err(B64Error::BadPadding);
            }
            Ok(out)
        }
        let chars = b"AQgw_-+/=.z9";
        let mut inputs: Vec<Vec<u8>> = vec![Vec::new()];
        let mut checked = 0;
        for _ in 0..5 {
            let mut next = Vec::new();
            for s in &inputs {
                for &c in chars {
                    let mut t = s.clone();
                    t.push(c);
                    for alphabet in [Alphabet::UrlNoPad, Alphabet::Any] {
                        assert_eq!(
                            decode(&t, alphabet, 64),
                            reference(&t, alphabet),
                            "{:?} {alphabet:?}",
                            String::from_utf8_lossy(&t)
                        );
                        checked += 1;
                    }
                    next.push(t);
                }
            }
            inputs = next;
        }
        assert!(checked > 500_000);
    }
}
