//! The per-peer index: next-hop router → the slots of the paths it
//! advertised.
//!
//! A session event (peer down, peer up, graceful expiry, a typed close)
//! concerns exactly one peer's paths, so it must touch only those, not the
//! whole slab. Each next hop (by its interned symbol) has an unordered slot
//! list; a slot's position in it is kept in the padding of its hot record
//! (`Hot::hop_pos`), so removal is a swap-remove in O(1) and the index costs
//! one `u32` per peer path plus one small list per peer. Local and static
//! routes (no next hop) are not in it at all.

use hashbrown::HashMap;

use super::hot::Hot;
use super::interner::NONE;

#[derive(Debug, Default)]
pub(crate) struct HopIndex {
    by_hop: HashMap<u32, Vec<u32>>,
}

impl HopIndex {
    /// Adds `slot` (whose hot record has next hop `sym`) and records its
    /// position in the record.
    pub(crate) fn insert(&mut self, hot: &mut [Hot], slot: u32) {
        let sym = hot[slot as usize].next_hop;
        if sym == NONE {
            return;
        }
        let list = self.by_hop.entry(sym).or_default();
        hot[slot as usize].hop_pos = list.len() as u32;
        list.push(slot);
    }

    /// Removes `slot` from its next hop's list (the hot record still holds
    /// the symbol and position it was inserted with).
    pub(crate) fn remove(&mut self, hot: &mut [Hot], slot: u32) {
        let h = hot[slot as usize];
        if h.next_hop == NONE {
            return;
        }
        let Some(list) = self.by_hop.get_mut(&h.next_hop) else {
            return;
        };
        let pos = h.hop_pos as usize;
        if list.get(pos) != Some(&slot) {
            debug_assert!(false, "hop index out of step for slot {slot}");
            return;
        }
        list.swap_remove(pos);
        if let Some(&moved) = list.get(pos) {
            hot[moved as usize].hop_pos = pos as u32;
        }
        if list.is_empty() {
            self.by_hop.remove(&h.next_hop);
        }
    }

    /// The slots whose next hop is `sym` (any order).
    pub(crate) fn slots(&self, sym: u32) -> &[u32] {
        self.by_hop.get(&sym).map_or(&[], Vec::as_slice)
    }

    /// Next hops with at least one path.
    pub(crate) fn hops(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_hop.keys().copied()
    }

    /// Fits every next hop's list and the map to what they hold.
    pub(crate) fn shrink(&mut self) {
        for v in self.by_hop.values_mut() {
            v.shrink_to_fit();
        }
        self.by_hop.shrink_to_fit();
    }

    pub(crate) fn allocated_bytes(&self) -> usize {
        self.by_hop.allocation_size()
            + self
                .by_hop
                .values()
                .map(|v| v.capacity() * 4)
                .sum::<usize>()
    }
}
