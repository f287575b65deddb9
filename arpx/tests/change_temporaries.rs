//! A change of one of our routes, exported to every peer, leaves no
//! large temporary behind it: no block over [`LARGE`] bytes is allocated
//! and freed again while the instance handles it.
//!
//! Why it matters: each registration on a router with peers is such a
//! change. Freed blocks of that size in the middle of the heap are where
//! the routes' small long-lived records land next, so a few temporaries
//! per change left glibc's heap of agentd three times the size of what
//! it held after 1 000 registrations (docs/footprint.md, "agentd's heap
//! after a burst of registrations"): vectors of four advertisements
//! (1 728 bytes) for one route, and frames grown by doubling.
//!
//! One test in this binary: the global allocator below watches the
//! whole process while it is armed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

use arpx::instance::{Input, Instance, Output};
use arpx::message::Message;
use arpx::testing::{config, local, open_session, peer};

/// Blocks above this size are "large": beyond glibc's per-thread cache
/// (1 032 bytes), where freed blocks are split and merged in the heap.
const LARGE: usize = 1024;

static ARMED: AtomicBool = AtomicBool::new(false);
/// Large blocks allocated while armed and still live (their addresses).
static LIVE: [AtomicUsize; 256] = [const { AtomicUsize::new(0) }; 256];
/// Large blocks allocated and freed while armed.
static TEMPORARIES: AtomicUsize = AtomicUsize::new(0);
/// Large blocks allocated while armed that found no free slot.
static UNTRACKED: AtomicUsize = AtomicUsize::new(0);

struct Watching;

fn remember(ptr: *mut u8) {
    let addr = ptr as usize;
    if LIVE
        .iter()
        .any(|s| s.compare_exchange(0, addr, SeqCst, SeqCst).is_ok())
    {
        return;
    }
    UNTRACKED.fetch_add(1, SeqCst);
}

/// Whether `ptr` was a large block allocated while armed (forgotten now).
fn forget(ptr: *mut u8) -> bool {
    let addr = ptr as usize;
    LIVE.iter()
        .any(|s| s.compare_exchange(addr, 0, SeqCst, SeqCst).is_ok())
}

// SAFETY: forwards every call to the system allocator unchanged; the
// bookkeeping only reads sizes and addresses.
unsafe impl GlobalAlloc for Watching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        let ptr = unsafe { System.alloc(layout) };
        if ARMED.load(SeqCst) && layout.size() > LARGE && !ptr.is_null() {
            remember(ptr);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ARMED.load(SeqCst) && layout.size() > LARGE && forget(ptr) {
            TEMPORARIES.fetch_add(1, SeqCst);
        }
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A block that grows in place of the old one is not a temporary:
        // the old one is gone with it. A large one keeps being watched.
        let watched = ARMED.load(SeqCst) && layout.size() > LARGE && forget(ptr);
        // SAFETY: the caller's contract is System's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if ARMED.load(SeqCst) && (watched || new_size > LARGE) && !new.is_null() {
            if new_size > LARGE {
                remember(new);
            } else {
                // Shrunk below the line: freed as a large block.
                TEMPORARIES.fetch_add(1, SeqCst);
            }
        }
        new
    }
}

#[global_allocator]
static ALLOC: Watching = Watching;

#[test]
fn a_route_change_exported_to_two_peers_frees_no_large_block_it_made() {
    let mut cfg = config(2);
    // Advertisements carry our certificate in a domain (434 bytes of DER
    // on the routers of the cgroup benchmark).
    cfg.cert = vec![0x30; 434];
    let mut inst = Instance::new(cfg);
    let mut out = Vec::new();
    inst.handle(0, Input::ConfigurePeers(vec![peer(1), peer(3)]), &mut out);
    open_session(&mut inst, 1, 1, true, &mut out);
    open_session(&mut inst, 3, 3, true, &mut out);
    out.clear();
    for i in 0..300 {
        let mut route = local(&format!("r-{i:016x}-3ac2fe3723f277bb"));
        route.origin_agent = format!("agent://lab/agent-{i:04}");
        out.clear();
        out.shrink_to_fit();
        ARMED.store(true, SeqCst);
        inst.handle(1 + i, Input::UpsertLocal(route), &mut out);
        ARMED.store(false, SeqCst);
        // It went to both peers, in one update each.
        let sent: Vec<u64> = out
            .iter()
            .filter_map(|o| match o {
                Output::Send {
                    conn,
                    msg: Message::Update(u),
                } if u.routes.len() == 1 => Some(conn.0),
                _ => None,
            })
            .collect();
        assert_eq!(sent.len(), 2, "change {i}: {out:?} {:?}", inst.counters());
        // What stays (the stored route, the tables' growth) is not a
        // temporary; forget it before the next change.
        for s in &LIVE {
            s.store(0, SeqCst);
        }
    }
    assert_eq!(UNTRACKED.load(SeqCst), 0);
    assert_eq!(
        TEMPORARIES.load(SeqCst),
        0,
        "blocks over {LARGE} bytes allocated and freed while handling a change"
    );
}
