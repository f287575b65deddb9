//! Postcard encodings in one allocation of their exact size.
//!
//! `postcard::to_allocvec` grows its vector by doubling: eight or nine
//! allocations for an advertisement, and a result with up to twice the
//! capacity it needs. ARPX encodes on every route change (the stored
//! advertisement, the signed bytes, the frame to each peer) and keeps
//! some encodings for as long as the route lives (our routes, every
//! learned path). Sized first, each is one allocation with no slack:
//! less work, no room held beside a kept encoding, and none of the freed
//! growth steps that a daemon's long-lived records are then carved from
//! (glibc's heap was left fragmented by them: docs/footprint.md).

use serde::Serialize;

/// The length of `value`'s postcard encoding.
pub fn size<T: Serialize + ?Sized>(value: &T) -> usize {
    // Our messages hold only strings, integers and byte arrays: sizing
    // and serialising them into a Vec cannot fail.
    postcard::experimental::serialized_size(value).unwrap_or(0)
}

/// `prefix` followed by `value`'s postcard encoding.
pub fn encode_after<T: Serialize + ?Sized>(prefix: &[u8], value: &T) -> Vec<u8> {
    encode_sized(prefix, value, size(value))
}

/// [`encode_after`] of a value whose encoding is `len` bytes ([`size`]),
/// for a caller that sized it already.
pub fn encode_sized<T: Serialize + ?Sized>(prefix: &[u8], value: &T, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + len);
    out.extend_from_slice(prefix);
    postcard::to_extend(value, out).unwrap_or_default()
}

/// `value`'s postcard encoding.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    encode_after(&[], value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_encoding_is_postcards_in_a_vector_of_its_size() {
        let value = (7u64, "route-1".to_string(), vec![[1u8; 32]; 3], Some(-5i32));
        let plain = postcard::to_allocvec(&value).unwrap();
        let exact = encode(&value);
        assert_eq!(exact, plain);
        assert_eq!(exact.capacity(), exact.len());
        let after = encode_after(b"label", &value);
        assert_eq!(after[..5], *b"label");
        assert_eq!(after[5..], plain[..]);
        assert_eq!(after.capacity(), after.len());
    }
}
