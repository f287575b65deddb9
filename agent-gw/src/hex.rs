//! Lower-case hex, as task ids, task tokens and token ids travel.

/// Lower-case hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Parses exactly `N` bytes of hex (either case); `None` otherwise.
pub fn decode<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != N * 2 {
        return None;
    }
    let nib = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = (nib(pair[0])? << 4) | nib(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_only_exact_hex_decodes() {
        let bytes = [0x00, 0x7f, 0x80, 0xff, 0x5a];
        assert_eq!(encode(&bytes), "007f80ff5a");
        assert_eq!(decode::<5>(b"007F80fF5a"), Some(bytes));
        assert_eq!(decode::<5>(b"007f80ff5"), None, "one digit short");
        assert_eq!(decode::<5>(b"007f80ff5a00"), None, "one byte long");
        assert_eq!(decode::<5>(b"007f80ff5g"), None, "not a hex digit");
    }
}
