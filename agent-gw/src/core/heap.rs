//! The gateway's allocator: mimalloc for small blocks, libc's malloc for
//! the rest.
//!
//! Every call allocates headers, frames and small buffers, and musl's
//! malloc (OpenWrt's) made that a quarter of the gateway's CPU, so those
//! come from mimalloc. But mimalloc gives memory back a page at a time,
//! and a page holds one size class: a 64 KiB page only 16 blocks of
//! 4 KiB, a 512 KiB "medium" page a few of 16–128 KiB. The blocks that
//! outlive a load (a grown stream table, a kept connection's buffers) sit
//! among the burst's short-lived ones, and each survivor holds its whole
//! page after the burst. After the peer benchmark's load that left
//! gateways 1.1–2.2 MiB above idle however often mimalloc collected.
//! Blocks above 4 KiB are few per call (a handful per call leg, counted
//! with uprobes on libc's malloc), so they go to libc's malloc, which
//! serves large ones from their own mappings and trims or reuses the
//! rest: the same load then left 0.4–0.8 MiB, with CPU per call unchanged
//! within the bench's noise (docs/footprint.md has the figures).
//!
//! The size decides the allocator, and `GlobalAlloc` hands `dealloc` and
//! `realloc` the size the block was made with, so a block is always freed
//! by the allocator that made it; a `realloc` across the line moves the
//! block.

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest block mimalloc serves. With the line at 16 KiB (mimalloc's
/// own small-object limit) gateways still kept 0.9–1.7 MiB after a load;
/// at 1 KiB they kept what they keep at 4 KiB, with half again as many
/// blocks per call on libc's malloc.
pub const SMALL_MAX: usize = 4 * 1024;

#[derive(Debug)]
pub struct GatewayHeap;

#[inline]
fn small(size: usize) -> bool {
    size <= SMALL_MAX
}

// SAFETY: the block's size picks the allocator in every method, and
// `GlobalAlloc` passes `dealloc`/`realloc` the layout the block was made
// with, so each block is resized and freed by the allocator that made it;
// a resize across the line allocates in the other, copies and frees.
unsafe impl GlobalAlloc for GatewayHeap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if small(layout.size()) {
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if small(layout.size()) {
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if small(layout.size()) {
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (small(layout.size()), small(new_size)) {
            (true, true) => unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) },
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // SAFETY (caller): `new_size` with the old alignment is a
                // valid layout.
                let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let moved = unsafe { self.alloc(new) };
                if !moved.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                moved
            }
        }
    }
}

/// Gives back what both allocators keep: mimalloc's empty pages, and
/// libc's free heap.
pub fn release() {
    super::relief::mimalloc_release();
    agentd::heap::trim();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks on both sides of the line, grown and shrunk across it, keep
    /// their bytes and are freed by the allocator that made them (a wrong
    /// free would abort the test process in either allocator).
    #[test]
    fn blocks_keep_their_bytes_across_the_line() {
        let heap = GatewayHeap;
        for (from, to) in [
            (100, 200),
            (100, SMALL_MAX + 1),
            (SMALL_MAX, SMALL_MAX + 1),
            (SMALL_MAX + 1, SMALL_MAX),
            (64 * 1024, 100),
            (64 * 1024, 256 * 1024),
        ] {
            for align in [1, 16, 4096] {
                let layout = Layout::from_size_align(from, align).unwrap();
                unsafe {
                    let p = heap.alloc(layout);
                    assert!(!p.is_null());
                    for i in 0..from {
                        *p.add(i) = (i % 251) as u8;
                    }
                    let q = heap.realloc(p, layout, to);
                    assert!(!q.is_null());
                    assert_eq!(q as usize % align, 0, "{from} -> {to} at {align}");
                    for i in 0..from.min(to) {
                        assert_eq!(*q.add(i), (i % 251) as u8, "{from} -> {to} byte {i}");
                    }
                    heap.dealloc(q, Layout::from_size_align(to, align).unwrap());
                }
            }
        }
        let zeroed = Layout::from_size_align(SMALL_MAX * 2, 8).unwrap();
        unsafe {
            let p = heap.alloc_zeroed(zeroed);
            assert!((0..zeroed.size()).all(|i| *p.add(i) == 0));
            heap.dealloc(p, zeroed);
        }
    }
}
