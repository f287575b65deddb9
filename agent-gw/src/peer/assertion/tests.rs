use super::*;

const NOW: u64 = 1_800_000_000_000;
const TTL: u64 = 30_000;
const SKEW: u64 = 30_000;

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
        body_sha256: [7; 32],
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
