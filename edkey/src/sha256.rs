//! SHA-256 on ring's implementation, which the TLS stack links anyway, so
//! the router binary carries no second one (the `sha2` crate it replaces).
//! The API is the part of `sha2::Sha256` the suite used: `new`, `update`
//! with anything byte-like, `finalize`, and the one-shot `digest`.

use ring::digest;

/// An incremental SHA-256.
#[derive(Clone)]
pub struct Sha256(digest::Context);

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256(digest::Context::new(&digest::SHA256))
    }

    pub fn update(&mut self, data: impl AsRef<[u8]>) {
        self.0.update(data.as_ref());
    }

    pub fn finalize(self) -> [u8; 32] {
        to_array(self.0.finish())
    }

    /// SHA-256 of `data` in one go.
    pub fn digest(data: impl AsRef<[u8]>) -> [u8; 32] {
        to_array(digest::digest(&digest::SHA256, data.as_ref()))
    }
}

impl Default for Sha256 {
    fn default() -> Sha256 {
        Sha256::new()
    }
}

impl std::fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sha256")
    }
}

fn to_array(d: digest::Digest) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::Sha256;

    #[test]
    fn known_answers_one_shot_and_in_pieces() {
        // FIPS 180-2, appendix B.1: SHA-256("abc").
        let abc = [
            0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae,
            0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61,
            0xf2, 0x00, 0x15, 0xad,
        ];
        assert_eq!(Sha256::digest(b"abc"), abc);
        let mut h = Sha256::new();
        h.update(b"a");
        h.update([b'b']);
        h.update(String::from("c"));
        assert_eq!(h.finalize(), abc);
    }
}
