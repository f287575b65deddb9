//! Update processing: a peer's snapshot of 1k / 10k routes applied by an
//! instance (signature checks, rules, Adj-RIB-In, PathUp outputs), the
//! same with reflection to a second peer, and the renewal of unchanged
//! local routes (which must send nothing).
//!
//! `cargo bench -p arpx --bench updates`

use arpx::frame::{batch_updates, DEFAULT_MAX_FRAME};
use arpx::instance::{ConnId, Input, Instance, Output};
use arpx::message::Message;
use arpx::testing::{local, open, receiver, router, signed, tls_key};
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

fn routes(n: usize) -> Vec<Message> {
    let ads = (0..n)
        .map(|i| signed(&format!("route-{i}"), &["router-a"], 1))
        .collect();
    batch_updates(ads, 1, DEFAULT_MAX_FRAME).0
}

fn feed(inst: &mut Instance, input: Input, out: &mut Vec<Output>) {
    inst.handle(0, input, out);
}

/// router-b with peers router-a (sending) and, when `reflect`, router-c
/// (established, receiving reflections); router-a's snapshot has begun.
/// Every route of the snapshot has one origin router (router-a): hold
/// them all, not the default 2 500 per origin and neighbour.
fn instance(reflect: bool) -> Instance {
    receiver(reflect, 100_000)
}

fn snapshot(bencher: Bencher, n: usize, reflect: bool) {
    let msgs = routes(n);
    bencher
        .counter(ItemsCount::new(n))
        .with_inputs(|| instance(reflect))
        .bench_local_values(|mut inst| {
            let mut out = Vec::new();
            for msg in msgs
                .iter()
                .cloned()
                .chain([Message::SnapshotEnd { version: 1 }])
            {
                feed(
                    &mut inst,
                    Input::Frame {
                        conn: ConnId(1),
                        msg,
                    },
                    &mut out,
                );
            }
            assert_eq!(inst.paths_of("router-a").count(), n);
            out.len()
        });
}

/// Paths/s of a peer snapshot applied (nothing exported: no reflection).
#[divan::bench(args = [1000, 10000], sample_count = 10)]
fn snapshot_in(bencher: Bencher, n: usize) {
    snapshot(bencher, n, false);
}

/// The same snapshot at a reflector, re-advertised to one other peer.
#[divan::bench(args = [1000, 10000], sample_count = 10)]
fn snapshot_reflected(bencher: Bencher, n: usize) {
    snapshot(bencher, n, true);
}

/// A reconnect within grace: the new session's snapshot repeats 10k
/// retained paths (verified when first learned: no signature checks).
#[divan::bench(sample_count = 10)]
fn resnapshot_retained_10k(bencher: Bencher) {
    let msgs = routes(10_000);
    bencher
        .counter(ItemsCount::new(10_000usize))
        .with_inputs(|| {
            let mut inst = instance(false);
            let mut out = Vec::new();
            for msg in msgs
                .iter()
                .cloned()
                .chain([Message::SnapshotEnd { version: 1 }])
            {
                feed(
                    &mut inst,
                    Input::Frame {
                        conn: ConnId(1),
                        msg,
                    },
                    &mut out,
                );
            }
            let lost = Input::Disconnected {
                conn: ConnId(1),
                error: "eof".into(),
            };
            feed(&mut inst, lost, &mut out);
            let conn = ConnId(2);
            let connected = Input::Connected {
                conn,
                peer: router(1),
                peer_key: tls_key(1),
                outbound: true,
            };
            feed(&mut inst, connected, &mut out);
            for msg in [open(1), Message::SnapshotBegin { version: 2 }] {
                feed(&mut inst, Input::Frame { conn, msg }, &mut out);
            }
            inst
        })
        .bench_local_values(|mut inst| {
            let mut out = Vec::new();
            for msg in msgs
                .iter()
                .cloned()
                .chain([Message::SnapshotEnd { version: 2 }])
            {
                feed(
                    &mut inst,
                    Input::Frame {
                        conn: ConnId(2),
                        msg,
                    },
                    &mut out,
                );
            }
            assert!(matches!(
                out.last(),
                Some(Output::PeerEligible { up: true, .. })
            ));
            inst
        });
}

/// Renewing 1k unchanged local routes: no output at all.
#[divan::bench(sample_count = 10)]
fn renew_local_1k(bencher: Bencher) {
    bencher
        .counter(ItemsCount::new(1000usize))
        .with_inputs(|| {
            let mut inst = instance(true);
            let mut out = Vec::new();
            for i in 0..1000 {
                feed(
                    &mut inst,
                    Input::UpsertLocal(local(&format!("l-{i}"))),
                    &mut out,
                );
            }
            inst
        })
        .bench_local_values(|mut inst| {
            let mut out = Vec::new();
            for i in 0..1000 {
                feed(
                    &mut inst,
                    Input::UpsertLocal(local(&format!("l-{i}"))),
                    &mut out,
                );
            }
            assert!(out.is_empty());
            inst
        });
}

/// One origin signature check, for attributing the snapshot cost.
#[divan::bench]
fn verify_one(bencher: Bencher) {
    let ad = signed("route-1", &["router-a"], 1);
    bencher.bench_local(|| arpx::sign::verify(divan::black_box(&ad)));
}
