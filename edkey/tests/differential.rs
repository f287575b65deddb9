//! edkey against ed25519-dalek, the implementation it replaces: the same
//! keys decode, the same signatures come out byte for byte, and
//! `verify_strict` gives the same answer for honest signatures and for the
//! forgeries strict verification exists to refuse (small-order R and key,
//! s + L, non-canonical encodings, flipped bits, random bytes).

use curve25519_dalek::constants::EIGHT_TORSION;
use curve25519_dalek::edwards::{CompressedEdwardsY, EdwardsPoint};
use curve25519_dalek::scalar::Scalar;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for chunk in out.chunks_mut(8) {
            let n = chunk.len();
            chunk.copy_from_slice(&self.next().to_le_bytes()[..n]);
        }
        out
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// p = 2^255 - 19 plus `k` (k <= 18 keeps it under 2^255), little-endian.
fn p_plus(k: u8) -> [u8; 32] {
    let mut b = [0xff; 32];
    b[0] = 0xed + k;
    b[31] = 0x7f;
    b
}

/// a + b as 256-bit little-endian integers (no overflow in our uses).
fn add_le(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut carry = 0u16;
    for i in 0..32 {
        let t = u16::from(a[i]) + u16::from(b[i]) + carry;
        out[i] = t as u8;
        carry = t >> 8;
    }
    assert_eq!(carry, 0);
    out
}

/// The group order L, from dalek's scalar arithmetic: (0 - 1) + 1.
fn order_l() -> [u8; 32] {
    let mut one = [0u8; 32];
    one[0] = 1;
    add_le(&(Scalar::ZERO - Scalar::ONE).to_bytes(), &one)
}

fn dalek_point(b: &[u8; 32]) -> Option<EdwardsPoint> {
    CompressedEdwardsY(*b).decompress()
}

/// The encodings a decoder reads as the same y as `b`: b itself and, for
/// y < 19, y + p; each with both sign bits.
fn forms(b: &[u8; 32]) -> Vec<[u8; 32]> {
    let mut y = *b;
    y[31] &= 0x7f;
    let mut out = vec![y];
    if y[1..].iter().all(|&x| x == 0) && y[0] < 19 {
        out.push(p_plus(y[0]));
    }
    let signed: Vec<_> = out
        .iter()
        .map(|e| {
            let mut s = *e;
            s[31] |= 0x80;
            s
        })
        .collect();
    out.extend(signed);
    out
}

/// `from_bytes`, and `small_order` wherever the key decodes, agree.
fn check_key(b: &[u8; 32]) {
    let ours = edkey::VerifyingKey::from_bytes(b);
    let theirs = ed25519_dalek::VerifyingKey::from_bytes(b);
    assert_eq!(ours.is_ok(), theirs.is_ok(), "from_bytes({b:02x?})");
    if let Some(p) = dalek_point(b) {
        assert_eq!(
            edkey::small_order(b),
            p.is_small_order(),
            "small_order({b:02x?})"
        );
        assert_eq!(ours.unwrap().is_weak(), theirs.unwrap().is_weak());
    }
}

#[test]
fn the_small_order_blocklist_is_exactly_dalek_is_small_order() {
    let mut seen = 0;
    for t in EIGHT_TORSION {
        assert!(t.is_small_order());
        for e in forms(&t.compress().to_bytes()) {
            let p = dalek_point(&e).expect("every form of a torsion point decodes");
            assert!(p.is_small_order());
            assert!(edkey::small_order(&e), "{e:02x?} is small order");
            check_key(&e);
            seen += 1;
        }
    }
    // 8 points, both signs, and y = 0 and 1 once more as p and p + 1.
    assert!(seen >= 20, "{seen}");
    // Every small y and its form y + p, both signs.
    for k in 0..19u8 {
        let mut y = [0u8; 32];
        y[0] = k;
        for e in forms(&y) {
            check_key(&e);
        }
    }
    // Random curve points, and those points plus each torsion point (mixed
    // order: not small), never match.
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..300 {
        let s = Scalar::from_bytes_mod_order(rng.bytes());
        let p = EdwardsPoint::mul_base(&s);
        for q in std::iter::once(p).chain(EIGHT_TORSION.iter().map(|t| p + t)) {
            let e = q.compress().to_bytes();
            assert!(!edkey::small_order(&e));
            check_key(&e);
        }
    }
}

#[test]
fn keys_decode_exactly_where_dalek_decodes_them() {
    let mut rng = Rng(0x5eed_0002);
    let mut decoded = 0;
    for _ in 0..20_000 {
        let b: [u8; 32] = rng.bytes();
        check_key(&b);
        decoded += usize::from(dalek_point(&b).is_some());
    }
    // About half of all y values are on the curve; both outcomes were seen.
    assert!((8_000..12_000).contains(&decoded), "{decoded}");
    // The top of the range: y from p - 20 to 2^255 - 1, both signs.
    for k in 0..=18u8 {
        for e in forms(&p_plus(k)) {
            check_key(&e);
        }
        let mut below = p_plus(0);
        below[0] -= k + 1;
        for e in forms(&below) {
            check_key(&e);
        }
    }
    // x = 0 with the sign bit set: dalek takes it, so must we.
    let mut one_signed = [0u8; 32];
    one_signed[0] = 1;
    one_signed[31] = 0x80;
    assert!(edkey::VerifyingKey::from_bytes(&one_signed).is_ok());
}

/// Both verdicts on (key, message, signature); returns ours.
fn check_verify(key: &[u8; 32], msg: &[u8], sig: &[u8; 64]) -> bool {
    let ours = edkey::VerifyingKey::from_bytes(key).map(|k| {
        k.verify_strict(msg, &edkey::Signature::from_bytes(sig))
            .is_ok()
    });
    let theirs = ed25519_dalek::VerifyingKey::from_bytes(key).map(|k| {
        k.verify_strict(msg, &ed25519_dalek::Signature::from_bytes(sig))
            .is_ok()
    });
    assert_eq!(
        ours.ok(),
        theirs.ok(),
        "key {key:02x?} sig {sig:02x?} msg {msg:02x?}"
    );
    // The one-call form: the same verdict, and the key error for a key
    // that does not decode.
    let one_go = edkey::verify_strict(key, msg, &edkey::Signature::from_bytes(sig));
    match ours {
        Err(_) => assert_eq!(one_go, Err(edkey::Error::KeyNotOnCurve)),
        Ok(true) => assert_eq!(one_go, Ok(())),
        Ok(false) => assert_eq!(one_go, Err(edkey::Error::BadSignature)),
    }
    ours.unwrap_or(false)
}

#[test]
fn signatures_are_dalek_s_byte_for_byte_and_verify_alike() {
    let mut rng = Rng(0x5eed_0003);
    for i in 0..400 {
        let seed: [u8; 32] = rng.bytes();
        let msg: Vec<u8> = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
        let ours = edkey::SigningKey::from_bytes(&seed);
        let theirs = ed25519_dalek::SigningKey::from_bytes(&seed);
        assert_eq!(
            ours.verifying_key().to_bytes(),
            theirs.verifying_key().to_bytes()
        );
        let sig = ours.sign(&msg).to_bytes();
        use ed25519_dalek::Signer;
        assert_eq!(sig, theirs.sign(&msg).to_bytes(), "seed {i}");
        let key = ours.verifying_key().to_bytes();
        assert!(check_verify(&key, &msg, &sig));

        // One bit flipped in R, s, the key or the message.
        let mut bad = sig;
        bad[rng.below(64)] ^= 1 << rng.below(8);
        assert!(!check_verify(&key, &msg, &bad));
        let mut bad_key = key;
        bad_key[rng.below(32)] ^= 1 << rng.below(8);
        assert!(!check_verify(&bad_key, &msg, &sig));
        if !msg.is_empty() {
            let mut m = msg.clone();
            let at = rng.below(m.len());
            m[at] ^= 1 << rng.below(8);
            assert!(!check_verify(&key, &m, &sig));
        }
        // s + L: the same scalar, not reduced.
        let mut unreduced = sig;
        let s: [u8; 32] = sig[32..].try_into().unwrap();
        unreduced[32..].copy_from_slice(&add_le(&s, &order_l()));
        assert!(!check_verify(&key, &msg, &unreduced));
        // Random key, random signature.
        assert!(!check_verify(&rng.bytes(), &msg, &rng.bytes()));
    }
}

#[test]
fn small_order_forgeries_that_plain_verification_accepts_are_refused() {
    let mut rng = Rng(0x5eed_0004);
    let msg = b"forged";
    for t in EIGHT_TORSION {
        for a in forms(&t.compress().to_bytes()) {
            // Under the identity (and, for some messages, any small-order
            // key) R = [r]B, s = r verifies without a secret key: [k]A
            // vanishes. Plain ring verification takes it when [k]A = 0.
            let r = Scalar::from_bytes_mod_order(rng.bytes());
            let mut sig = [0u8; 64];
            sig[..32].copy_from_slice(&EdwardsPoint::mul_base(&r).compress().to_bytes());
            sig[32..].copy_from_slice(&r.to_bytes());
            assert!(!check_verify(&a, msg, &sig));
            if t == EdwardsPoint::default() && a[31] & 0x80 == 0 && a[0] == 1 {
                let plain = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &a);
                assert!(
                    plain.verify(msg, &sig).is_ok(),
                    "ring alone accepts the identity key"
                );
            }
            // Small-order R and s = 0 under a small-order key.
            for r in EIGHT_TORSION {
                let mut sig = [0u8; 64];
                sig[..32].copy_from_slice(&r.compress().to_bytes());
                assert!(!check_verify(&a, msg, &sig));
            }
        }
    }
    // A small-order R under an honest key: R' = R + T with s unchanged
    // cannot verify either, and R = T itself with any s is refused.
    let key = edkey::SigningKey::from_bytes(&[7; 32]);
    let sig = key.sign(msg).to_bytes();
    for t in EIGHT_TORSION {
        for r in forms(&t.compress().to_bytes()) {
            let mut forged = sig;
            forged[..32].copy_from_slice(&r);
            assert!(!check_verify(&key.verifying_key().to_bytes(), msg, &forged));
        }
    }
    // Non-canonical R forms (y + p for small y) and keys.
    for k in 0..19u8 {
        let mut forged = sig;
        forged[..32].copy_from_slice(&p_plus(k));
        assert!(!check_verify(&key.verifying_key().to_bytes(), msg, &forged));
        assert!(!check_verify(&p_plus(k), msg, &sig));
    }
}
