//! Just enough arithmetic in GF(2^255 - 19) to answer one question: does a
//! 32-byte string decode to a point of edwards25519? ring answers it only
//! inside `verify`, where a key it cannot decode and a signature that does
//! not match are the same error, and callers (config parsing, ARPX's
//! `BadKey`) need to tell them apart.
//!
//! Elements are five 51-bit limbs (value = sum of limb[i] * 2^(51 i)),
//! multiplied through u128. Nothing here is constant time: it only ever
//! sees public keys.

/// 2^51 - 1.
const MASK: u64 = (1 << 51) - 1;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Fe([u64; 5]);

impl Fe {
    #[cfg(test)]
    pub(crate) const ZERO: Fe = Fe([0; 5]);
    pub(crate) const ONE: Fe = Fe([1, 0, 0, 0, 0]);

    /// The curve constant d = -121665 / 121666 (checked by
    /// `tests::d_is_minus_121665_over_121666`).
    pub(crate) const D: Fe = Fe([
        929_955_233_495_203,
        466_365_720_129_213,
        1_662_059_464_998_953,
        2_033_849_074_728_123,
        1_442_794_654_840_575,
    ]);

    /// The low 255 bits of `b`, little-endian, as a decoder reads a
    /// y coordinate: the top bit (x's sign) is dropped, and a value of p
    /// or more is kept as it is (arithmetic reduces it mod p).
    pub(crate) fn from_bytes(b: &[u8; 32]) -> Fe {
        let w = |i: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_le_bytes(word)
        };
        let (w0, w1, w2, w3) = (w(0), w(1), w(2), w(3));
        Fe([
            w0 & MASK,
            ((w0 >> 51) | (w1 << 13)) & MASK,
            ((w1 >> 38) | (w2 << 26)) & MASK,
            ((w2 >> 25) | (w3 << 39)) & MASK,
            (w3 >> 12) & MASK,
        ])
    }

    /// The canonical (fully reduced, < p) little-endian encoding.
    pub(crate) fn to_bytes(self) -> [u8; 32] {
        // Twice: the first carry out of limb 4 may carry again.
        let mut l = self.carried().carried().0;
        // l < 2^255 + small now; subtract p once if l >= p: q is 1 exactly
        // when l + 19 carries out of bit 255.
        let mut q = (l[0] + 19) >> 51;
        for limb in &l[1..] {
            q = (limb + q) >> 51;
        }
        l[0] += 19 * q;
        for i in 0..4 {
            l[i + 1] += l[i] >> 51;
            l[i] &= MASK;
        }
        l[4] &= MASK;
        let mut out = [0u8; 32];
        let words = [
            l[0] | (l[1] << 51),
            (l[1] >> 13) | (l[2] << 38),
            (l[2] >> 26) | (l[3] << 25),
            (l[3] >> 39) | (l[4] << 12),
        ];
        for (chunk, word) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    pub(crate) fn is_zero(self) -> bool {
        self.to_bytes() == [0; 32]
    }

    /// Limbs brought back under 2^51 (plus a little in limb 0): the carry
    /// out of limb 4 is worth 2^255 = 19 mod p.
    fn carried(self) -> Fe {
        let mut l = self.0;
        for i in 0..4 {
            l[i + 1] += l[i] >> 51;
            l[i] &= MASK;
        }
        l[0] += 19 * (l[4] >> 51);
        l[4] &= MASK;
        Fe(l)
    }

    pub(crate) fn add(self, o: Fe) -> Fe {
        let mut l = self.0;
        for (a, b) in l.iter_mut().zip(o.0) {
            *a += b;
        }
        Fe(l).carried()
    }

    /// `self - o`, computed as `self + 2p - o` so no limb goes negative
    /// (both operands carried, so every limb of `o` is under 2^52).
    pub(crate) fn sub(self, o: Fe) -> Fe {
        const TWO_P: [u64; 5] = [2 * (MASK - 18), 2 * MASK, 2 * MASK, 2 * MASK, 2 * MASK];
        let (a, b) = (self.carried().0, o.carried().0);
        let mut l = [0u64; 5];
        for i in 0..5 {
            l[i] = a[i] + TWO_P[i] - b[i];
        }
        Fe(l).carried()
    }

    pub(crate) fn mul(self, o: Fe) -> Fe {
        let a = self.0.map(u128::from);
        let b = o.0.map(u128::from);
        // Limb products of weight 2^255 or more come back times 19.
        let b19 = b.map(|x| 19 * x);
        let r = [
            a[0] * b[0] + a[1] * b19[4] + a[2] * b19[3] + a[3] * b19[2] + a[4] * b19[1],
            a[0] * b[1] + a[1] * b[0] + a[2] * b19[4] + a[3] * b19[3] + a[4] * b19[2],
            a[0] * b[2] + a[1] * b[1] + a[2] * b[0] + a[3] * b19[4] + a[4] * b19[3],
            a[0] * b[3] + a[1] * b[2] + a[2] * b[1] + a[3] * b[0] + a[4] * b19[4],
            a[0] * b[4] + a[1] * b[3] + a[2] * b[2] + a[3] * b[1] + a[4] * b[0],
        ];
        let mut out = [0u64; 5];
        let mut carry: u128 = 0;
        for i in 0..5 {
            let t = r[i] + carry;
            out[i] = (t as u64) & MASK;
            carry = t >> 51;
        }
        // carry < 2^65 here; times 19 it still fits a u128, and folding it
        // in twice leaves every limb under 2^52.
        let t = u128::from(out[0]) + 19 * carry;
        out[0] = (t as u64) & MASK;
        out[1] += (t >> 51) as u64;
        Fe(out)
    }

    pub(crate) fn square(self) -> Fe {
        self.mul(self)
    }

    /// `self^(2^n)`.
    fn square_n(self, n: u32) -> Fe {
        (0..n).fold(self, |x, _| x.square())
    }

    /// Euler's criterion: `self^((p - 1) / 2)`, which is 1 for a non-zero
    /// square, p - 1 for a non-square and 0 for 0. The exponent is
    /// 2^254 - 10 = 4 (2^252 - 3) + 2, and 2^252 - 3 = 4 (2^250 - 1) + 1;
    /// `e(k)` below stands for `self^(2^k - 1)`, built up by
    /// e(m + n) = e(m)^(2^n) * e(n).
    pub(crate) fn legendre(self) -> Fe {
        let e1 = self;
        let e2 = e1.square().mul(e1);
        let e4 = e2.square_n(2).mul(e2);
        let e5 = e4.square().mul(e1);
        let e10 = e5.square_n(5).mul(e5);
        let e20 = e10.square_n(10).mul(e10);
        let e40 = e20.square_n(20).mul(e20);
        let e50 = e40.square_n(10).mul(e10);
        let e100 = e50.square_n(50).mul(e50);
        let e200 = e100.square_n(100).mul(e100);
        let e250 = e200.square_n(50).mul(e50);
        let p58 = e250.square_n(2).mul(e1); // self^(2^252 - 3)
        p58.square_n(2).mul(self.square())
    }
}

/// Whether `b` is the encoding of a point of edwards25519, by the rule
/// curve25519-dalek's `CompressedEdwardsY::decompress` (and ring's decoder)
/// applies: y is the low 255 bits taken mod p (so y = p + k for small k is
/// the same y as k), and a point exists when x^2 = (y^2 - 1) / (d y^2 + 1)
/// has a solution. The sign bit never makes a y invalid: for x = 0 both
/// decoders accept either sign. d y^2 + 1 is never 0 (d is not a square
/// mod p, -1 is), so the quotient is a square exactly when u v is.
pub(crate) fn decodes(b: &[u8; 32]) -> bool {
    let y = Fe::from_bytes(b);
    let yy = y.square();
    let u = yy.sub(Fe::ONE);
    let v = Fe::D.mul(yy).add(Fe::ONE);
    let l = u.mul(v).legendre();
    l.is_zero() || l.to_bytes() == Fe::ONE.to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(n: u64) -> Fe {
        Fe([n, 0, 0, 0, 0])
    }

    #[test]
    fn d_is_minus_121665_over_121666() {
        let lhs = Fe::D.mul(small(121_666)).add(small(121_665));
        assert!(lhs.is_zero(), "{:?}", lhs.to_bytes());
    }

    #[test]
    fn bytes_round_trip_and_reduce_mod_p() {
        let mut b = [0u8; 32];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(37).wrapping_add(5);
        }
        b[31] &= 0x3f;
        assert_eq!(Fe::from_bytes(&b).to_bytes(), b);
        // p + 3 (p = 2^255 - 19: ed ff .. ff 7f) reads as 3.
        let mut p3 = [0xff; 32];
        p3[0] = 0xed + 3;
        p3[31] = 0x7f;
        assert_eq!(Fe::from_bytes(&p3).to_bytes(), small(3).to_bytes());
        // The top bit is x's sign, not part of y.
        let mut signed = [0u8; 32];
        signed[0] = 9;
        signed[31] = 0x80;
        assert_eq!(Fe::from_bytes(&signed).to_bytes(), small(9).to_bytes());
    }

    #[test]
    fn arithmetic_agrees_with_small_integers_and_wraps_at_p() {
        let a = small(1 << 40);
        assert_eq!(a.mul(a).to_bytes(), Fe([0, 1 << 29, 0, 0, 0]).to_bytes());
        // 0 - 1 = p - 1, and (p - 1)^2 = 1.
        let minus_one = Fe::ZERO.sub(Fe::ONE);
        let mut pm1 = [0xff; 32];
        pm1[0] = 0xec;
        pm1[31] = 0x7f;
        assert_eq!(minus_one.to_bytes(), pm1);
        assert_eq!(minus_one.square().to_bytes(), Fe::ONE.to_bytes());
        assert_eq!(minus_one.add(Fe::ONE).to_bytes(), [0; 32]);
    }

    #[test]
    fn euler_criterion_tells_squares_from_non_squares() {
        assert!(Fe::ZERO.legendre().is_zero());
        for n in [1u64, 4, 9, 1 << 40] {
            let sq = small(n).square();
            assert_eq!(sq.legendre().to_bytes(), Fe::ONE.to_bytes(), "{n}^2");
        }
        // 2 is not a square mod p (p = 5 mod 8); -1 is (p = 1 mod 4).
        let minus_one = Fe::ZERO.sub(Fe::ONE).to_bytes();
        assert_eq!(small(2).legendre().to_bytes(), minus_one);
        assert_eq!(
            Fe::ZERO.sub(Fe::ONE).legendre().to_bytes(),
            Fe::ONE.to_bytes()
        );
    }
}
