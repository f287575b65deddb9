//! The driver's timers: one deadline per key, and the earliest of them
//! is the one sleep the event loop waits on (no polling tick).
//!
//! Keys are the instance's [`arpx::instance::Timer`]s (heartbeat, hold,
//! open wait, graceful retention) and the driver's own dial timers. A
//! `set` replaces the key's earlier deadline; firing removes it, so a
//! timer fires once per arming. Time is the monotonic clock in ms (the
//! instance's `now_ms`).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Deadlines by key, ordered by time.
#[derive(Debug)]
pub struct Timers<K> {
    by_key: HashMap<K, (u64, u64)>,
    /// (deadline, arming number) → key; the arming number keeps equal
    /// deadlines apart and fires them in the order they were set.
    by_time: BTreeMap<(u64, u64), K>,
    armed: u64,
}

impl<K: Clone + Eq + Hash> Default for Timers<K> {
    fn default() -> Self {
        Timers {
            by_key: HashMap::new(),
            by_time: BTreeMap::new(),
            armed: 0,
        }
    }
}

impl<K: Clone + Eq + Hash> Timers<K> {
    pub fn new() -> Timers<K> {
        Timers::default()
    }

    /// (Re)arms `key` to fire at `at_ms`.
    pub fn set(&mut self, key: K, at_ms: u64) {
        self.cancel(&key);
        self.armed += 1;
        let slot = (at_ms, self.armed);
        self.by_time.insert(slot, key.clone());
        self.by_key.insert(key, slot);
    }

    pub fn cancel(&mut self, key: &K) {
        if let Some(slot) = self.by_key.remove(key) {
            self.by_time.remove(&slot);
        }
    }

    /// Drops every timer whose key matches (a connection or peer that is
    /// gone).
    pub fn cancel_where(&mut self, mut gone: impl FnMut(&K) -> bool) {
        let keys: Vec<K> = self.by_key.keys().filter(|k| gone(k)).cloned().collect();
        for k in keys {
            self.cancel(&k);
        }
    }

    pub fn deadline(&self, key: &K) -> Option<u64> {
        self.by_key.get(key).map(|(at, _)| *at)
    }

    /// The earliest deadline: what the event loop sleeps until.
    pub fn next(&self) -> Option<u64> {
        self.by_time.keys().next().map(|(at, _)| *at)
    }

    /// Removes and returns the next timer due at `now_ms`, earliest first.
    pub fn pop_due(&mut self, now_ms: u64) -> Option<K> {
        let (&slot, _) = self.by_time.iter().next()?;
        if slot.0 > now_ms {
            return None;
        }
        let key = self.by_time.remove(&slot)?;
        self.by_key.remove(&key);
        Some(key)
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_in_deadline_order_once_per_arming() {
        let mut t = Timers::new();
        t.set("hold", 300);
        t.set("heartbeat", 100);
        t.set("dial", 100);
        assert_eq!(t.next(), Some(100));
        assert_eq!(t.pop_due(99), None);
        assert_eq!(t.pop_due(100), Some("heartbeat"));
        assert_eq!(t.pop_due(100), Some("dial"));
        assert_eq!(t.pop_due(100), None);
        assert_eq!(t.next(), Some(300));
        assert_eq!(t.pop_due(1000), Some("hold"));
        assert_eq!(t.pop_due(1000), None);
        assert!(t.is_empty());
        assert_eq!(t.next(), None);
    }

    #[test]
    fn rearming_replaces_and_cancel_removes() {
        let mut t = Timers::new();
        t.set("hold", 300);
        t.set("hold", 50);
        assert_eq!(t.len(), 1);
        assert_eq!(t.deadline(&"hold"), Some(50));
        t.set("hold", 500);
        assert_eq!(t.pop_due(100), None, "the earlier setting is gone");
        t.cancel(&"hold");
        assert_eq!(t.next(), None);
        t.cancel(&"absent");
    }

    #[test]
    fn cancel_where_drops_a_connections_timers_only() {
        let mut t = Timers::new();
        t.set((1, "hold"), 10);
        t.set((1, "heartbeat"), 20);
        t.set((2, "hold"), 30);
        t.cancel_where(|k| k.0 == 1);
        assert_eq!(t.len(), 1);
        assert_eq!(t.pop_due(100), Some((2, "hold")));
    }
}
