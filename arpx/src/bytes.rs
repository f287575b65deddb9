//! Fixed-size byte strings (keys, digests, signatures) that postcard
//! carries as raw bytes and JSON (the conformance goldens, logs) as hex.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bytes<const N: usize>(pub [u8; N]);

impl<const N: usize> Default for Bytes<N> {
    fn default() -> Self {
        Bytes([0; N])
    }
}

impl<const N: usize> Bytes<N> {
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(2 * N);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s
    }

    pub fn from_hex(s: &str) -> Option<Bytes<N>> {
        let s = s.as_bytes();
        if s.len() != 2 * N {
            return None;
        }
        let mut out = [0u8; N];
        for (o, pair) in out.iter_mut().zip(s.chunks_exact(2)) {
            *o = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Some(Bytes(out))
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl<const N: usize> fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl<const N: usize> Serialize for Bytes<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            s.serialize_bytes(&self.0)
        }
    }
}

impl<'de, const N: usize> Deserialize<'de> for Bytes<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const N: usize>;
        impl<'de, const N: usize> Visitor<'de> for V<N> {
            type Value = Bytes<N>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{N} bytes")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Bytes<N>, E> {
                <[u8; N]>::try_from(v)
                    .map(Bytes)
                    .map_err(|_| E::invalid_length(v.len(), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Bytes<N>, E> {
                Bytes::from_hex(v).ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes<N>, A::Error> {
                let mut out = [0u8; N];
                for (i, o) in out.iter_mut().enumerate() {
                    *o = seq
                        .next_element()?
                        .ok_or_else(|| de::Error::invalid_length(i, &self))?;
                }
                Ok(Bytes(out))
            }
        }
        if d.is_human_readable() {
            d.deserialize_str(V::<N>)
        } else {
            d.deserialize_bytes(V::<N>)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postcard_carries_raw_bytes_and_json_carries_hex() {
        let b = Bytes([0xab; 4]);
        let wire = postcard::to_allocvec(&b).unwrap();
        assert_eq!(wire, [4, 0xab, 0xab, 0xab, 0xab]);
        assert_eq!(postcard::from_bytes::<Bytes<4>>(&wire).unwrap(), b);
        assert!(postcard::from_bytes::<Bytes<4>>(&[3, 1, 2, 3]).is_err());
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(json, "\"abababab\"");
        assert_eq!(serde_json::from_str::<Bytes<4>>(&json).unwrap(), b);
        assert!(serde_json::from_str::<Bytes<4>>("\"abab\"").is_err());
        assert!(serde_json::from_str::<Bytes<4>>("\"zzabzzab\"").is_err());
    }
}
