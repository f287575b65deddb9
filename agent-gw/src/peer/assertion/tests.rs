use super::*;

const NOW: u64 = 1_800_000_000_000;
const TTL: u64 = 30_000;
const SKEW: u64 = 30_000;

/// The per-call checks with nothing verified before (a fresh root
/// cache): what every assertion of a batch of one goes through.
fn verify<'a>(
    a: &'a Assertion,
    e: &Expect<'_>,
    cache: &mut ReplayCache,
) -> Result<&'a Claims, AssertionError> {
    super::verify(a, e, &mut RootCache::new(8), cache)
}

fn key(n: u8) -> SigningKey {
    SigningKey::from_bytes(&[n; 32])
}

fn claims(nonce: u8) -> Claims {
    Claims {
        source: "router-c".into(),
        target: "router-b".into(),
        origin: "router-c".into(),
        caller: "agent://lab/caller".into(),
        tenant: "lab".into(),
        capability: "demo.echo".into(),
        body_sha256: [7; 32],
        nonce: [nonce; 16],
        expires_ms: NOW + TTL,
    }
}

fn expect<'a>(peer_key: &'a VerifyingKey, now_ms: u64) -> Expect<'a> {
    Expect {
        peer: "router-c",
        peer_key,
        us: "router-b",
        capability: "demo.echo",
        body_sha256: Some([7; 32]),
        now_ms,
        ttl_ms: TTL,
        skew_ms: SKEW,
    }
}

/// Signs, encodes and decodes (the header round trip every check sees).
fn wire(c: Claims, k: &SigningKey) -> Assertion {
    Assertion::decode(&Assertion::sign(c, k).encode()).expect("own assertion decodes")
}

#[test]
fn a_signed_assertion_round_trips_the_header_and_verifies_once() {
    let k = key(3);
    let vk = k.verifying_key();
    let mut cache = ReplayCache::new(8);
    let a = wire(claims(1), &k);
    let got = verify(&a, &expect(&vk, NOW), &mut cache).unwrap();
    assert_eq!(got.caller, "agent://lab/caller");
    assert_eq!(got.tenant, "lab");
    assert_eq!(cache.len(), 1);
    assert_eq!(
        verify(&a, &expect(&vk, NOW + 1), &mut cache),
        Err(AssertionError::Replayed)
    );
}

#[test]
fn signer_target_signature_capability_and_digest_are_each_checked() {
    let k = key(3);
    let vk = k.verifying_key();
    let mut cache = ReplayCache::new(8);
    let mut c = claims(1);
    c.source = "router-x".into();
    let e = verify(&wire(c, &k), &expect(&vk, NOW), &mut cache).unwrap_err();
    assert_eq!(e.code(), "assertion_wrong_signer");
    assert_eq!(
        e.to_string(),
        "forwarding assertion signed as router-x arrived from router-c"
    );

    let mut c = claims(2);
    c.target = "router-a".into();
    assert_eq!(
        verify(&wire(c, &k), &expect(&vk, NOW), &mut cache)
            .unwrap_err()
            .code(),
        "assertion_wrong_target"
    );

    // Signed by another key than the peer's.
    assert_eq!(
        verify(&wire(claims(3), &key(4)), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::BadSignature)
    );

    // Tampered after signing: the tenant changed on the way.
    let mut a = Assertion::sign(claims(4), &k);
    a.claims.tenant = "ops".into();
    assert_eq!(
        verify(&wire_again(&a), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::BadSignature)
    );

    let mut c = claims(5);
    c.capability = "admin.reset".into();
    assert_eq!(
        verify(&wire(c, &k), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::WrongCapability)
    );
    let mut c = claims(6);
    c.body_sha256 = [8; 32];
    assert_eq!(
        verify(&wire(c, &k), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::DigestMismatch)
    );
    assert!(cache.is_empty(), "refused assertions record no nonce");
    // A body passed through unread is checked as it streams: the
    // assertion holds, and its claim is what the stream is held to.
    let mut c = claims(7);
    c.body_sha256 = [8; 32];
    let deferred = Expect {
        body_sha256: None,
        ..expect(&vk, NOW)
    };
    let a = wire(c, &k);
    let got = verify(&a, &deferred, &mut cache).unwrap();
    assert_eq!(got.body_sha256, [8; 32]);
}

fn wire_again(a: &Assertion) -> Assertion {
    Assertion::decode(&a.encode()).unwrap()
}

#[test]
fn expiry_and_lifetime_allow_the_clock_skew_and_no_more() {
    let k = key(3);
    let vk = k.verifying_key();
    let mut cache = ReplayCache::new(8);
    let exp = NOW + TTL;
    // Live up to (not at) expiry + skew.
    assert!(verify(
        &wire(claims(1), &k),
        &expect(&vk, exp + SKEW - 1),
        &mut cache
    )
    .is_ok());
    assert_eq!(
        verify(&wire(claims(2), &k), &expect(&vk, exp + SKEW), &mut cache),
        Err(AssertionError::Expired)
    );
    // A lifetime beyond ttl + skew from now is refused.
    let mut c = claims(3);
    c.expires_ms = NOW + TTL + SKEW + 1;
    assert_eq!(
        verify(&wire(c, &k), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::TooLong)
    );
    let mut c = claims(4);
    c.expires_ms = NOW + TTL + SKEW;
    assert!(verify(&wire(c, &k), &expect(&vk, NOW), &mut cache).is_ok());
}

#[test]
fn a_full_cache_refuses_new_nonces_and_never_forgets_a_live_one() {
    let mut cache = ReplayCache::new(2);
    cache.insert("router-c", [1; 16], NOW + 10, NOW).unwrap();
    cache.insert("router-c", [2; 16], NOW + 20, NOW).unwrap();
    assert_eq!(
        cache.insert("router-c", [3; 16], NOW + 30, NOW),
        Err(AssertionError::CacheFull)
    );
    // Still full of live nonces: both are still refused as replays.
    assert_eq!(
        cache.insert("router-c", [1; 16], NOW + 10, NOW + 5),
        Err(AssertionError::Replayed)
    );
    assert_eq!(
        cache.insert("router-c", [2; 16], NOW + 20, NOW + 5),
        Err(AssertionError::Replayed)
    );
    // Once the first expires (its assertion is refused as expired from
    // then on), its slot frees, and only its.
    cache
        .insert("router-c", [3; 16], NOW + 30, NOW + 10)
        .unwrap();
    assert_eq!(cache.len(), 2);
    assert_eq!(
        cache.insert("router-c", [2; 16], NOW + 20, NOW + 10),
        Err(AssertionError::Replayed)
    );
    assert_eq!(
        cache.insert("router-c", [4; 16], NOW + 40, NOW + 19),
        Err(AssertionError::CacheFull)
    );
}

#[test]
fn a_replay_within_its_lifetime_is_refused_whatever_else_arrives() {
    let k = key(3);
    let vk = k.verifying_key();
    let mut cache = ReplayCache::new(1000);
    let first = wire(claims(9), &k);
    verify(&first, &expect(&vk, NOW), &mut cache).unwrap();
    for n in 10..100u8 {
        verify(
            &wire(claims(n), &k),
            &expect(&vk, NOW + u64::from(n)),
            &mut cache,
        )
        .unwrap();
    }
    assert_eq!(
        verify(&first, &expect(&vk, NOW + TTL), &mut cache),
        Err(AssertionError::Replayed)
    );
}

#[test]
fn malformed_headers_are_typed_refusals() {
    assert_eq!(
        Assertion::decode(&"A".repeat(MAX_HEADER_LEN + 1)),
        Err(AssertionError::Malformed("header too long"))
    );
    assert_eq!(
        Assertion::decode("not base64!"),
        Err(AssertionError::Malformed("not base64url"))
    );
    assert_eq!(
        Assertion::decode("AAAA"),
        Err(AssertionError::Malformed("not an assertion"))
    );
    let mut raw = postcard::to_allocvec(&Assertion::sign(claims(1), &key(3))).unwrap();
    raw.push(0);
    assert_eq!(
        Assertion::decode(&b64::encode_url(&raw)),
        Err(AssertionError::Malformed("trailing bytes"))
    );
}

fn batch(k: &SigningKey, nonces: std::ops::Range<u8>) -> Vec<Assertion> {
    let cs = nonces.map(claims).collect();
    sign_batch(k, "router-c", "router-b", NOW + TTL, cs)
        .iter()
        .map(wire_again)
        .collect()
}

#[test]
fn a_batch_verifies_its_root_once_and_every_call_alone() {
    let k = key(3);
    let vk = k.verifying_key();
    let (mut roots, mut cache) = (RootCache::new(8), ReplayCache::new(64));
    let b = batch(&k, 1..8);
    assert!(b
        .iter()
        .all(|a| a.proof.size == 7 && a.signature == b[0].signature));
    for a in &b {
        super::verify(a, &expect(&vk, NOW), &mut roots, &mut cache).unwrap();
    }
    assert_eq!(roots.len(), 1, "one verified root for the batch");
    // A cached root skips no per-call check: each nonce once.
    assert_eq!(
        super::verify(&b[3], &expect(&vk, NOW + 1), &mut roots, &mut cache),
        Err(AssertionError::Replayed)
    );
    // Nor the claims: a leaf changed on the way leads to another root.
    let mut t = batch(&k, 20..24);
    super::verify(&t[0], &expect(&vk, NOW), &mut roots, &mut cache).unwrap();
    t[1].claims.tenant = "ops".into();
    assert_eq!(
        super::verify(&t[1], &expect(&vk, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadSignature)
    );
}

#[test]
fn wrong_proofs_foreign_roots_and_unsigned_roots_are_refused() {
    let k = key(3);
    let vk = k.verifying_key();
    let mut cache = ReplayCache::new(64);
    let mut roots = RootCache::new(8);
    let b = batch(&k, 1..6);
    super::verify(&b[0], &expect(&vk, NOW), &mut roots, &mut cache).unwrap();

    // A sibling hash changed: the proof leads to a root nobody signed.
    let mut a = b[1].clone();
    a.proof.path[0][0] ^= 1;
    assert_eq!(
        super::verify(&a, &expect(&vk, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadSignature)
    );
    // Another position, or another size (the size is signed with the root).
    let mut a = b[2].clone();
    a.proof.index = 3;
    assert_eq!(
        super::verify(&a, &expect(&vk, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadSignature)
    );
    let mut a = b[0].clone();
    a.proof.size = 6;
    assert_eq!(
        super::verify(&a, &expect(&vk, NOW), &mut roots, &mut cache)
            .unwrap_err()
            .code(),
        "assertion_bad_signature"
    );
    // A proof one hash short fits no tree of that size.
    let mut a = b[3].clone();
    a.proof.path.pop();
    assert_eq!(
        super::verify(&a, &expect(&vk, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadProof)
    );
    // A proof of another batch (same shape), with this batch's signature.
    let other = batch(&k, 40..45);
    let mut a = b[4].clone();
    a.proof = other[4].proof.clone();
    assert_eq!(
        super::verify(&a, &expect(&vk, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadSignature)
    );
    // A root signed by another key: refused, and a root this key's
    // signature verified is no shortcut for another key's.
    let forged = batch(&key(4), 50..53);
    assert_eq!(
        super::verify(&forged[0], &expect(&vk, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadSignature)
    );
    let vk4 = key(4).verifying_key();
    let mut a = b[1].clone();
    a.signature = forged[0].signature;
    assert_eq!(
        super::verify(&a, &expect(&vk4, NOW), &mut roots, &mut cache),
        Err(AssertionError::BadSignature)
    );
    assert_eq!(roots.len(), 1, "refusals cache nothing");
    // The untouched rest of the batch still verifies.
    for a in &b[1..] {
        super::verify(a, &expect(&vk, NOW), &mut roots, &mut cache).unwrap();
    }
}

#[test]
fn batch_positions_and_proofs_are_bounded_by_the_decoder() {
    let mut a = Assertion::sign(claims(1), &key(3));
    for (index, size, depth, why) in [
        (0, 0, 0, "batch position"),
        (2, 2, 1, "batch position"),
        (0, merkle::MAX_BATCH as u32 + 1, 0, "batch position"),
        (0, 2, merkle::MAX_DEPTH + 1, "batch proof too long"),
    ] {
        a.proof = Proof {
            index,
            size,
            path: vec![[0; 32]; depth],
        };
        let raw = postcard::to_allocvec(&a).unwrap();
        assert_eq!(
            Assertion::decode(&b64::encode_url(&raw)),
            Err(AssertionError::Malformed(why)),
            "index {index} size {size} depth {depth}"
        );
    }
    // The largest batch's proof fits the header.
    let big = sign_batch(
        &key(3),
        "router-c",
        "router-b",
        NOW + TTL,
        (0..merkle::MAX_BATCH).map(|n| claims(n as u8)).collect(),
    );
    let enc = big[5].encode();
    assert!(enc.len() <= MAX_HEADER_LEN, "{} bytes", enc.len());
    assert_eq!(Assertion::decode(&enc).as_ref(), Ok(&big[5]));
}

/// A canonical S is required: the signature plus the group order, which
/// the same equation would accept, is refused.
#[test]
fn a_signature_with_s_beyond_the_group_order_is_refused() {
    // The order of the prime-order subgroup, little-endian.
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let k = key(3);
    let vk = k.verifying_key();
    let mut a = Assertion::sign(claims(1), &k);
    let mut carry = 0u16;
    for (s, l) in a.signature.1.iter_mut().zip(L) {
        let sum = u16::from(*s) + u16::from(l) + carry;
        *s = sum as u8;
        carry = sum >> 8;
    }
    // S < L < 2^253, so S + L still fits the 32 bytes.
    assert_eq!(carry, 0);
    let mut cache = ReplayCache::new(8);
    assert_eq!(
        verify(&wire_again(&a), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::BadSignature)
    );
    assert_eq!(cache.len(), 0, "a refused assertion records no nonce");
    // The untouched signature verifies.
    let good = Assertion::sign(claims(1), &k);
    verify(&wire_again(&good), &expect(&vk, NOW), &mut cache).unwrap();
}

/// Verification is strict (`verify_strict`): a signature whose R is the
/// identity point satisfies the cofactorless equation for anyone who
/// knows the key's secret scalar (S = H(R, A, M)·a), and plain `verify`
/// accepts it; other RFC 8032 verifiers refuse it, so an assertion the
/// receiving domain keeps as evidence must not rest on it.
#[test]
fn a_signature_with_a_small_order_r_is_refused_though_plain_verify_accepts_it() {
    use curve25519_dalek::scalar::Scalar;
    use ed25519_dalek::Verifier;
    use sha2::{Digest, Sha512};
    let k = key(3);
    // The same key in dalek, for its secret scalar and its plain `verify`.
    let dalek_key = ed25519_dalek::SigningKey::from_bytes(&k.to_bytes());
    let vk = k.verifying_key();
    let mut a = Assertion::sign(claims(1), &k);
    let root = merkle::root_of(a.claims.leaf(), 0, 1, &[]).unwrap();
    let message = root_message(&a.claims, 1, root);
    // The identity point (y = 1), of order 1.
    let mut r = [0u8; 32];
    r[0] = 1;
    let h: [u8; 64] = Sha512::new()
        .chain_update(r)
        .chain_update(vk.as_bytes())
        .chain_update(&message)
        .finalize()
        .into();
    let s = Scalar::from_bytes_mod_order_wide(&h) * dalek_key.to_scalar();
    let forged = ed25519_dalek::Signature::from_components(r, s.to_bytes());
    assert!(
        dalek_key.verifying_key().verify(&message, &forged).is_ok(),
        "the forged signature satisfies the cofactorless equation"
    );
    a.signature = halves(forged.to_bytes());
    let mut cache = ReplayCache::new(8);
    assert_eq!(
        verify(&wire_again(&a), &expect(&vk, NOW), &mut cache),
        Err(AssertionError::BadSignature)
    );
    assert_eq!(cache.len(), 0, "a refused assertion records no nonce");
}
