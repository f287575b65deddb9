//! The floor of issue 25's "bytes per route": what the design's two route
//! tables alone hold per route, with nothing else of either daemon.
//!
//! DESIGN keeps every route twice: agentd's RIB (a `RouteTable`) and the
//! gateway's FIB replica (a `FibReplica`, fed by agentd's FIB stream, so
//! that the gateway decides without an IPC round trip and serves on when
//! agentd is gone). `scripts/bench_footprint.py` measures the daemons
//! whole; this counts only those two tables, as `hop2` measured only the
//! transport under the peer path. Routes are shaped like the footprint
//! benchmark's registrations (each its own origin and id, one endpoint,
//! one tenant, 50 capabilities); the replica gets each one as the
//! gateway does, decoded from a FIB delta of its own.
//!
//! A global allocator counts live bytes and blocks. Two figures per
//! table: the bytes asked for, and the same blocks as glibc's malloc
//! lays them out (8 bytes of header, 16-byte steps, 32 at least), which
//! is what a router pays for them. Route counts are powers of two, so
//! the table's vectors are full and none of their growth reserve (which
//! the kernel backs only once touched) is counted: a lower bound.
//!
//! `cargo bench -p agentd --bench route_tables` prints one JSON object
//! and writes it to `target/bench/route_tables.json`; `make bench` runs
//! it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

use agentd::fib::replica::FibReplica;
use agentd::fib::{FibChange, FibEvent};
use agentd::policy::{Action, Policy};
use agentd::route::{Access, Attributes, Lease, OriginProof, Route, RouteId, RouteSource};
use agentd::score::Weights;
use agentd::table::RouteTable;
use agentd::time::Millis;

struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static CHUNKS: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

/// What glibc's malloc takes for a block of `size` bytes (x86_64): the
/// size plus its 8-byte header, rounded up to 16, at least 32.
fn chunk(size: usize) -> isize {
    ((size + 8 + 15) & !15).max(32) as isize
}

// SAFETY: forwards every call to the system allocator unchanged; the
// counters are only statistics. `realloc` is the trait's default
// (allocate, copy, free), which these two methods count.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        BYTES.fetch_add(layout.size() as isize, Relaxed);
        CHUNKS.fetch_add(chunk(layout.size()), Relaxed);
        BLOCKS.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        BYTES.fetch_sub(layout.size() as isize, Relaxed);
        CHUNKS.fetch_sub(chunk(layout.size()), Relaxed);
        BLOCKS.fetch_sub(1, Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[derive(Clone, Copy)]
struct Live {
    bytes: isize,
    chunks: isize,
    blocks: isize,
}

fn live() -> Live {
    Live {
        bytes: BYTES.load(Relaxed),
        chunks: CHUNKS.load(Relaxed),
        blocks: BLOCKS.load(Relaxed),
    }
}

/// Per route, what was allocated since `before` and is still live.
#[derive(Clone, Copy)]
struct PerRoute {
    bytes: f64,
    malloc: f64,
    blocks: f64,
}

fn per_route(before: Live, n: usize) -> PerRoute {
    let now = live();
    let n = n as f64;
    PerRoute {
        bytes: (now.bytes - before.bytes) as f64 / n,
        malloc: (now.chunks - before.chunks) as f64 / n,
        blocks: (now.blocks - before.blocks) as f64 / n,
    }
}

const LEASE_END: Millis = Millis(3_600_000);

/// Route `i` as a LAN registration makes it (`scripts/bench_footprint.py`'s
/// shape: its own origin, a local id `r-` + 16 hex digits, 50 capability
/// names, one endpoint and tenant), every string freshly allocated, as
/// decoded from the request.
fn route(i: usize) -> Route {
    let id = format!("r-{:016x}", (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    Route {
        id: RouteId::new(&id).expect("a valid route id"),
        capability: format!("fp.c{}", i % 50).as_str().into(),
        version: 1,
        origin: format!("agent://fp/a{i}").as_str().into(),
        endpoint: String::from("http://127.0.0.1:9").as_str().into(),
        tenant: String::from("fp").as_str().into(),
        region: String::new().as_str().into(),
        attrs: Attributes::default(),
        access: Access::default().into(),
        contract: None,
        source: RouteSource::Local,
        path: Box::default(),
        next_hop: None,
        lease: Lease::Until(LEASE_END),
        healthy: true,
        allow_loopback: true,
        owner: None,
        proof: OriginProof::Static,
        disputed: false,
    }
}

/// agentd's RIB holding `n` routes.
fn rib(n: usize) -> PerRoute {
    let before = live();
    let mut table = RouteTable::new(n);
    for i in 0..n {
        table.upsert(route(i)).expect("room for every route");
    }
    let held = per_route(before, n);
    assert_eq!(table.len(), n);
    drop(table);
    held
}

/// The gateway's replica holding `n` routes, each from a FIB delta as the
/// gateway decodes it off agentd's stream.
fn replica(n: usize) -> PerRoute {
    let policy = Policy::new(Vec::new(), Action::Allow, Weights::default()).expect("a policy");
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let delta = FibEvent::Delta {
                base: i as u64 + 1,
                generation: i as u64 + 2,
                changes: vec![FibChange::Upsert(Box::new(route(i)))],
            };
            postcard::to_allocvec(&delta).expect("encodes")
        })
        .collect();
    let before = live();
    let mut fib = FibReplica::new(n);
    let now = Millis(1);
    fib.apply(FibEvent::SnapshotBegin { generation: 1 }, now)
        .expect("begin");
    fib.apply(
        FibEvent::SnapshotEnd {
            generation: 1,
            policy: Box::new(policy),
            peers_down: Vec::new(),
            links: Vec::new(),
            agent_addrs: Vec::new(),
        },
        now,
    )
    .expect("end");
    let base = per_route(before, n);
    for frame in &frames {
        let event: FibEvent = postcard::from_bytes(frame).expect("decodes");
        fib.apply(event, now).expect("applies");
    }
    let all = per_route(before, n);
    assert_eq!(fib.table().len(), n);
    drop(fib);
    // Without the empty replica's own policy and state.
    PerRoute {
        bytes: all.bytes - base.bytes,
        malloc: all.malloc - base.malloc,
        blocks: all.blocks - base.blocks,
    }
}

fn json(p: PerRoute) -> String {
    format!(
        "{{\"bytes\": {:.0}, \"malloc\": {:.0}, \"blocks\": {:.2}}}",
        p.bytes, p.malloc, p.blocks
    )
}

fn main() {
    let mut rows = Vec::new();
    for n in [1024, 8192, 16_384, 65_536] {
        let (r, f) = (rib(n), replica(n));
        let both = r.malloc + f.malloc;
        eprintln!(
            "{n:>6} routes: RIB {:.0} B ({:.0} with malloc's headers, {:.2} blocks), \
             replica {:.0} B ({:.0}, {:.2} blocks); both {both:.0} B per route",
            r.bytes, r.malloc, r.blocks, f.bytes, f.malloc, f.blocks
        );
        rows.push(format!(
            "{{\"routes\": {n}, \"rib\": {}, \"replica\": {}, \"both_malloc\": {both:.0}}}",
            json(r),
            json(f)
        ));
    }
    let out = format!(
        "{{\"what\": \"heap bytes per route of agentd's RIB and agent-gw's FIB replica alone\", \
         \"goal_both_daemons_bytes\": 600, \"rows\": [{}]}}",
        rows.join(", ")
    );
    println!("{out}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join("route_tables.json"), format!("{out}\n"));
    }
}
