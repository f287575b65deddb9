//! The route_id index: an open-addressing table of `u32` cells.
//!
//! hashbrown spends 5 bytes per bucket and runs between 44% and 87% full,
//! which made it the largest part of the index overhead (issue goal: at
//! most 16 index bytes per route). Here a cell is 4 bytes: the slab slot in
//! the low 24 bits and an 8-bit fingerprint of the id's hash in the high 8,
//! so a probe rejects most non-matching cells without touching the slab.
//! The table fills to 90% and grows by 1.5×, keeping it at least 60% full.
//!
//! Linear probing, deletion by backward shift (no tombstones). Hashes are
//! stored nowhere: moving or rehashing a cell asks the caller for the hash
//! of the route in that slot. Only register, renew and removal use this
//! index, so that extra hashing is off the selection path.

/// Slots must stay below this so a cell never equals `EMPTY`.
pub(crate) const SLOT_LIMIT: u32 = (1 << 24) - 1;
const SLOT_MASK: u32 = (1 << 24) - 1;
const EMPTY: u32 = u32::MAX;

#[derive(Debug, Default)]
pub(crate) struct IdIndex {
    cells: Box<[u32]>,
    len: usize,
}

fn fingerprint(hash: u64) -> u32 {
    ((hash & 0xff) as u32) << 24
}

/// Maps a hash onto `0..cap` by its high bits (cap need not be a power of 2).
fn home(hash: u64, cap: usize) -> usize {
    ((u128::from(hash) * cap as u128) >> 64) as usize
}

impl IdIndex {
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.cells.len() * 4
    }

    /// The slot whose route has `hash` and satisfies `eq`.
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let cap = self.cells.len();
        if cap == 0 {
            return None;
        }
        let fp = fingerprint(hash);
        let mut i = home(hash, cap);
        loop {
            let c = self.cells[i];
            if c == EMPTY {
                return None;
            }
            if c & !SLOT_MASK == fp && eq(c & SLOT_MASK) {
                return Some(c & SLOT_MASK);
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
    }

    /// Adds `slot` (not present, below `SLOT_LIMIT`) under `hash`;
    /// `rehash(s)` gives the hash of every slot already indexed.
    pub(crate) fn insert(&mut self, hash: u64, slot: u32, rehash: impl Fn(u32) -> u64) {
        debug_assert!(slot < SLOT_LIMIT);
        if (self.len + 1) * 10 > self.cells.len() * 9 {
            self.grow(&rehash);
        }
        self.place(hash, slot);
        self.len += 1;
    }

    fn place(&mut self, hash: u64, slot: u32) {
        let cap = self.cells.len();
        let mut i = home(hash, cap);
        while self.cells[i] != EMPTY {
            i += 1;
            if i == cap {
                i = 0;
            }
        }
        self.cells[i] = fingerprint(hash) | slot;
    }

    fn grow(&mut self, rehash: &impl Fn(u32) -> u64) {
        let cap = (self.cells.len() * 3 / 2).max(8);
        let old = std::mem::replace(&mut self.cells, vec![EMPTY; cap].into_boxed_slice());
        for c in old.iter().copied().filter(|&c| c != EMPTY) {
            let s = c & SLOT_MASK;
            self.place(rehash(s), s);
        }
    }

    /// Removes `slot`, indexed under `hash`; false when it is not there.
    pub(crate) fn remove(&mut self, hash: u64, slot: u32, rehash: impl Fn(u32) -> u64) -> bool {
        let cap = self.cells.len();
        if cap == 0 {
            return false;
        }
        let want = fingerprint(hash) | slot;
        let mut hole = home(hash, cap);
        loop {
            match self.cells[hole] {
                EMPTY => return false,
                c if c == want => break,
                _ => hole = (hole + 1) % cap,
            }
        }
        // Backward shift: pull later cells of the run into the hole unless
        // that would put them before their home position.
        let mut k = hole;
        loop {
            k = (k + 1) % cap;
            let c = self.cells[k];
            if c == EMPTY {
                break;
            }
            let h = home(rehash(c & SLOT_MASK), cap);
            let dist_home = (k + cap - h) % cap;
            let dist_hole = (k + cap - hole) % cap;
            if dist_home >= dist_hole {
                self.cells[hole] = c;
                hole = k;
            }
        }
        self.cells[hole] = EMPTY;
        self.len -= 1;
        true
    }

    /// Every indexed slot (invariant checks, rebuilding the index).
    pub(crate) fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.cells
            .iter()
            .filter(|&&c| c != EMPTY)
            .map(|&c| c & SLOT_MASK)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deliberately poor hash so runs are long and wrap around.
    fn h(slot: u32) -> u64 {
        u64::from(slot % 7).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(slot % 3)
    }

    #[test]
    fn insert_find_remove_agree_with_a_set() {
        let mut idx = IdIndex::default();
        let mut present = std::collections::BTreeSet::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = (x % 300) as u32;
            if present.contains(&s) {
                assert!(idx.remove(h(s), s, h));
                present.remove(&s);
            } else {
                idx.insert(h(s), s, h);
                present.insert(s);
            }
            let probe = ((x >> 20) % 300) as u32;
            let found = idx.find(h(probe), |c| c == probe);
            assert_eq!(found.is_some(), present.contains(&probe), "slot {probe}");
        }
        assert_eq!(idx.len(), present.len());
        let mut all: Vec<u32> = idx.slots().collect();
        all.sort_unstable();
        assert_eq!(all, present.iter().copied().collect::<Vec<_>>());
        for &s in &present {
            assert_eq!(idx.find(h(s), |c| c == s), Some(s));
        }
        assert!(!idx.remove(h(1000), 1000, h));
    }

    #[test]
    fn stays_at_least_sixty_percent_full_when_growing() {
        let mut idx = IdIndex::default();
        let hash = |s: u32| u64::from(s).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for s in 0..50_000u32 {
            idx.insert(hash(s), s, hash);
            if s >= 16 {
                assert!(
                    idx.allocated_bytes() * 6 <= (s as usize + 1) * 4 * 10,
                    "{s}"
                );
            }
        }
    }
}
