//! What a forwarding assertion costs on each end of a hop: the Ed25519
//! primitives (sign; `verify_strict`, which the receiver uses; decoding
//! a key), the whole sender side (claims → batch signature → header) and
//! the receiver side (decode → checks → root verification or cache hit →
//! nonce) for batches of 1 and 16 calls.
//!
//! Run: `cargo bench -p agent-gw --bench peer_assertion`.

use std::hint::black_box;

use agent_gw::peer::assertion::{
    sign_batch, verify, Assertion, Claims, Expect, ReplayCache, RootCache,
};
use agent_gw::peer::replay::nonce;
use divan::Bencher;
use edkey::SigningKey;

const NOW: u64 = 1_800_000_000_000;

fn main() {
    divan::main();
}

fn key() -> SigningKey {
    SigningKey::from_bytes(&[3; 32])
}

fn claims(seq: u64) -> Claims {
    Claims {
        source: "router-b".into(),
        target: "router-a".into(),
        origin: "router-b".into(),
        caller: "agent://lab/caller".into(),
        tenant: "lab".into(),
        capability: "bench.echo".into(),
        body_sha256: [7; 32],
        nonce: nonce(1, seq),
        expires_ms: NOW + 30_000,
    }
}

#[divan::bench]
fn ed25519_sign(b: Bencher) {
    let k = key();
    let msg = [5u8; 120];
    b.bench(|| k.sign(black_box(&msg)));
}

#[divan::bench]
fn ed25519_verify(b: Bencher) {
    let k = key();
    let vk = k.verifying_key();
    let msg = [5u8; 120];
    let sig = k.sign(&msg);
    b.bench(|| vk.verify_strict(black_box(&msg), &sig).is_ok());
}

/// Decoding a public key: once per ARPX advertisement (its origin key).
#[divan::bench]
fn ed25519_key_from_bytes(b: Bencher) {
    let vk = key().verifying_key().to_bytes();
    b.bench(|| edkey::VerifyingKey::from_bytes(black_box(&vk)).is_ok());
}

/// Sender, per call: sign a batch of `n` and encode every header.
#[divan::bench(args = [1, 16])]
fn send_per_batch(b: Bencher, n: u64) {
    let k = key();
    b.bench(|| {
        let batch = (0..n).map(claims).collect();
        sign_batch(&k, "router-b", "router-a", NOW + 30_000, batch)
            .iter()
            .map(Assertion::encode)
            .count()
    });
}

/// Receiver: decode and check a batch of `n` headers (one root
/// verification, `n` proofs and nonces).
#[divan::bench(args = [1, 16])]
fn receive_per_batch(b: Bencher, n: u64) {
    let k = key();
    let vk = k.verifying_key();
    let mut seq = 0u64;
    b.with_inputs(|| {
        seq += n;
        let batch = (seq..seq + n).map(claims).collect();
        sign_batch(&k, "router-b", "router-a", NOW + 30_000, batch)
            .iter()
            .map(Assertion::encode)
            .collect::<Vec<_>>()
    })
    .bench_local_values(|heads| {
        let (mut roots, mut replay) = (RootCache::new(64), ReplayCache::new(64));
        for h in &heads {
            let a = Assertion::decode(h).unwrap();
            let e = Expect {
                peer: "router-b",
                peer_key: &vk,
                us: "router-a",
                capability: "bench.echo",
                body_sha256: Some([7; 32]),
                now_ms: NOW,
                ttl_ms: 30_000,
                skew_ms: 30_000,
            };
            verify(&a, &e, &mut roots, &mut replay).unwrap();
        }
    });
}
