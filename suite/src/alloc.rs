//! One allocator per program, in one binary.
//!
//! The gateway's data path allocates headers, frames and buffers on every
//! call, and musl's malloc (OpenWrt's) made that a quarter of its CPU, so
//! agent-gw runs on mimalloc for its small blocks and libc's malloc for
//! its large ones (`agent_gw::core::heap`; agent-gw/Cargo.toml has the
//! figures). agentd
//! and agentctl allocate little per second but hold many small records for
//! long: there mimalloc cost ~10 % more bytes per route and ~390 KiB more
//! idle than libc's malloc (docs/footprint.md), so they keep libc's.
//!
//! The choice is made once, at the first allocation, from
//! `/proc/self/cmdline` (read with raw `open`/`read`, which allocate
//! nothing), and never changes: every block is freed by the allocator that
//! made it. Before `main` runs only one thread exists, so the choice cannot
//! race; were it ever made twice it would come out the same.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use agent_gw::core::heap::GatewayHeap;

const UNDECIDED: u8 = 0;
const LIBC: u8 = 1;
const GATEWAY: u8 = 2;

pub struct SuiteAlloc;

static CHOICE: AtomicU8 = AtomicU8::new(UNDECIDED);

/// Whether this process is the gateway: its name (`argv[0]`'s last
/// component), or — called as `agentd-suite PROGRAM` — its first argument.
/// The same rule as `applet` in main.rs, on raw bytes.
pub fn is_gateway(cmdline: &[u8]) -> bool {
    let mut args = cmdline.split(|&b| b == 0);
    let program = args.next().unwrap_or_default();
    let name = program.rsplit(|&b| b == b'/').next().unwrap_or_default();
    if crate::APPLETS.iter().any(|a| a.as_bytes() == name) {
        return name == b"agent-gw";
    }
    args.next() == Some(b"agent-gw")
}

#[cold]
fn decide() -> u8 {
    let mut buf = [0u8; 512];
    let got = read_cmdline(&mut buf);
    let choice = if is_gateway(&buf[..got]) {
        GATEWAY
    } else {
        LIBC
    };
    CHOICE.store(choice, Ordering::Relaxed);
    choice
}

/// Up to `buf.len()` bytes of this process's command line (NUL-separated
/// arguments); 0 when /proc is not there, which makes every program use
/// libc's malloc (correct, only slower for the gateway).
fn read_cmdline(buf: &mut [u8]) -> usize {
    // SAFETY: a NUL-terminated path; the descriptor is ours and closed.
    unsafe {
        let fd = libc::open(
            c"/proc/self/cmdline".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
        }
        let mut filled = 0;
        while filled < buf.len() {
            let n = libc::read(fd, buf[filled..].as_mut_ptr().cast(), buf.len() - filled);
            if n <= 0 {
                break;
            }
            filled += n as usize;
        }
        libc::close(fd);
        filled
    }
}

#[inline]
fn choice() -> u8 {
    match CHOICE.load(Ordering::Relaxed) {
        UNDECIDED => decide(),
        c => c,
    }
}

// SAFETY: each call goes to the allocator `choice()` names, which is fixed
// before the first allocation, so a block is always resized and freed by
// the allocator that made it; both honour `GlobalAlloc`'s contract.
unsafe impl GlobalAlloc for SuiteAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if choice() == GATEWAY {
            unsafe { GatewayHeap.alloc(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if choice() == GATEWAY {
            unsafe { GatewayHeap.alloc_zeroed(layout) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if choice() == GATEWAY {
            unsafe { GatewayHeap.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if choice() == GATEWAY {
            unsafe { GatewayHeap.realloc(ptr, layout, new_size) }
        } else {
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

/// Gives memory the allocator keeps for reuse back to the system; the
/// gateway calls it once it has gone quiet after a load.
pub fn release() {
    if choice() == GATEWAY {
        agent_gw::core::heap::release();
    } else {
        agentd::heap::trim();
    }
}

#[cfg(test)]
mod tests {
    use super::is_gateway;

    #[test]
    fn the_gateway_is_known_by_its_name_or_first_argument() {
        assert!(is_gateway(b"/usr/sbin/agent-gw\0--config\0x\0"));
        assert!(is_gateway(b"agent-gw\0"));
        assert!(is_gateway(b"/tmp/agentd-suite\0agent-gw\0-f\0"));
        assert!(is_gateway(b"./renamed\0agent-gw\0"));
        assert!(!is_gateway(b"/usr/sbin/agentd\0-f\0"));
        assert!(!is_gateway(b"agentctl\0status\0"));
        assert!(!is_gateway(b"agentd-suite\0agentd\0"));
        // The first argument counts only after the suite's own name, as in
        // `applet`: a program called through a path is never the gateway.
        assert!(!is_gateway(b"/usr/sbin/agentd\0agent-gw\0"));
        assert!(!is_gateway(b"agentd-suite\0/x/agent-gw\0"));
        assert!(!is_gateway(b""));
    }
}
