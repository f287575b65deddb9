//! Heap bytes an instance holds per path learned from a peer (the
//! Adj-RIB-In, its indexes and, at a reflector, what each other peer was
//! sent), counted by a global allocator that tracks live bytes and
//! blocks. Prints one JSON object, also written to
//! `target/bench/arpx_paths.json`; `make bench` runs it.
//!
//! `cargo bench -p arpx --bench paths_held`
//!
//! Requested bytes, so the allocator's own overhead per block (8–16
//! bytes with glibc and musl) comes on top: the block counts say how
//! much.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use arpx::frame::{batch_updates, DEFAULT_MAX_FRAME};
use arpx::instance::{ConnId, Input, Instance, Output};
use arpx::message::Message;
use arpx::testing::{receiver, signed};

struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; the
// counters are only statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as isize, Relaxed);
        BLOCKS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(layout.size() as isize, Relaxed);
        BLOCKS.fetch_sub(1, Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> (isize, isize) {
    (BYTES.load(Relaxed), BLOCKS.load(Relaxed))
}

fn feed(inst: &mut Instance, input: Input, out: &mut Vec<Output>) {
    inst.handle(0, input, out);
    out.clear();
}

/// router-b learns `n` routes of router-a over one session; as a
/// reflector it also passes them to router-c. Returns (bytes, blocks)
/// held per path once the snapshot is in.
fn held_per_path(n: usize, reflect: bool) -> (f64, f64) {
    let ads = (0..n)
        .map(|i| signed(&format!("route-{i:06}"), &["router-a"], 1))
        .collect();
    let msgs = batch_updates(ads, 1, DEFAULT_MAX_FRAME).0;
    let mut inst = receiver(reflect, 1_000_000);
    let mut out = Vec::new();
    out.shrink_to_fit();
    let (bytes, blocks) = live();
    for msg in msgs
        .iter()
        .cloned()
        .chain([Message::SnapshotEnd { version: 1 }])
    {
        let input = Input::Frame {
            conn: ConnId(1),
            msg,
        };
        feed(&mut inst, input, &mut out);
    }
    out.shrink_to_fit();
    assert_eq!(inst.paths_of("router-a").count(), n);
    if reflect {
        assert_eq!(inst.exported_to("router-c").count(), n);
    }
    let (bytes2, blocks2) = live();
    drop(inst);
    let per = |d: isize| d as f64 / n as f64;
    (per(bytes2 - bytes), per(blocks2 - blocks))
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not ours.
    let mut rows = Vec::new();
    for reflect in [false, true] {
        for n in [1_000, 10_000] {
            let (bytes, blocks) = held_per_path(n, reflect);
            rows.push(format!(
                "{{\"paths\":{n},\"reflected\":{reflect},\"bytes_per_path\":{bytes:.0},\
                 \"blocks_per_path\":{blocks:.2}}}"
            ));
        }
    }
    let json = format!(
        "{{\"bench\":\"arpx_paths_held\",\"rows\":[{}]}}",
        rows.join(",")
    );
    println!("{json}");
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("bench");
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("arpx_paths.json"), format!("{json}\n")));
    if let Err(e) = written {
        eprintln!("paths_held: cannot write {}: {e}", dir.display());
    }
}
