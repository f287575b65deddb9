//! Giving memory back to the system after the route table shrank.
//!
//! A transient flood of paths (a neighbour's 10,000-route snapshot that
//! is withdrawn again) grows the table, the ARPX instance's maps and the
//! heap. The table compacts itself (`RouteTable::compact_if_sparse`);
//! what the allocator keeps is its business: musl's mallocng (OpenWrt)
//! returns freed pages by itself, glibc keeps them in its arenas until
//! `malloc_trim`. So after the table has halved from its peak (and held
//! at least [`TRIM_MIN_ROUTES`]), the loop asks its driver to trim, once
//! per halving: hysteresis, so churn around one size never trims.

/// Peaks below this are not worth a trim.
pub const TRIM_MIN_ROUTES: usize = 1024;

/// A lease file at least this large is trimmed after it is written. Its
/// pieces are the table's encoding (~120 bytes a route), freed when the
/// write ends; glibc keeps that free heap resident, which at 10 000
/// routes read as 1.2 MiB of agentd's memory (`bench_footprint.py`,
/// 13 008 KiB after a trim against 14 220 before), and at 1 000 routes
/// (a ~120 KiB file) as 116 KiB of agentd's 2 040 in `bench_cgroup.py`'s
/// scenario, where the limit is decided by about that much. At most one
/// save a second (`PERSIST_DELAY`), each trim a walk of the free lists
/// off the loop; below this size (~500 routes) the pages are not worth
/// it.
pub const TRIM_AFTER_SAVE_BYTES: usize = 64 * 1024;

/// When to trim, from the table's size after each input.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TrimPolicy {
    /// The most routes held since the last trim.
    peak: usize,
}

impl TrimPolicy {
    /// The table holds `len` routes now. `true`: trim now.
    pub fn observe(&mut self, len: usize) -> bool {
        if len >= self.peak {
            self.peak = len;
            return false;
        }
        if self.peak < TRIM_MIN_ROUTES || len.saturating_mul(2) > self.peak {
            return false;
        }
        self.peak = len;
        true
    }
}

pub use crate::heap::trim;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_halving_from_a_large_enough_peak() {
        let mut p = TrimPolicy::default();
        assert!(!p.observe(500));
        assert!(!p.observe(10_000));
        // Down, but not yet to half.
        assert!(!p.observe(6_000));
        assert!(p.observe(4_000));
        // The peak is now 4,000: churn around it does not trim again.
        for len in [3_500, 4_000, 2_500, 3_900] {
            assert!(!p.observe(len), "{len}");
        }
        assert!(p.observe(1_000));
        // Below the minimum peak, never.
        assert!(!p.observe(0));
        let mut small = TrimPolicy::default();
        assert!(!small.observe(1_000));
        assert!(!small.observe(0));
    }
}
