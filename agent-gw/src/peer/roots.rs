//! Batch roots whose signature this receiver already verified: the
//! first call of a batch pays the Ed25519 verification, the others of
//! the same batch only their inclusion proof (a few SHA-256).
//!
//! An entry says only "this router's key signed this root message", so
//! it may be forgotten at any time (the next call of the batch verifies
//! again): the cache is bounded, and when full the oldest entry makes
//! room — roots are inserted in the order they are first seen, which is
//! also about the order they expire in, so that is O(1) per insert.
//! Replay protection is not here — every call's nonce is still checked
//! against the [`ReplayCache`](crate::peer::replay::ReplayCache).

use std::collections::{HashMap, VecDeque};

use edkey::Sha256;

/// Default bound: a batch lives for its assertions' lifetime (30 s by
/// default), and a busy sender signs at most one per event-loop turn.
pub const DEFAULT_CAPACITY: usize = 1024;

#[derive(Debug)]
pub struct RootCache {
    /// Digest of (signer key, signed root message) → until when (Unix
    /// ms, skew included) it is kept.
    entries: HashMap<[u8; 32], u64>,
    /// Insertion order, for eviction.
    order: VecDeque<([u8; 32], u64)>,
    capacity: usize,
    /// Signature verifications made (cache misses, refused ones
    /// included), for "calls per verification".
    checked: u64,
}

/// The cache key of `message` signed by `key`.
pub fn key_of(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(key);
    h.update(message);
    h.finalize()
}

impl RootCache {
    pub fn new(capacity: usize) -> RootCache {
        RootCache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            checked: 0,
        }
    }

    /// Whether `k` was verified and is still live at `now_ms`.
    pub fn contains(&self, k: &[u8; 32], now_ms: u64) -> bool {
        self.entries.get(k).is_some_and(|&until| until > now_ms)
    }

    /// Remembers a verified root until `until_ms`.
    pub fn insert(&mut self, k: [u8; 32], until_ms: u64, now_ms: u64) {
        if until_ms <= now_ms || self.entries.contains_key(&k) {
            return;
        }
        while let Some(&(old, until)) = self.order.front() {
            if until > now_ms && self.order.len() < self.capacity {
                break;
            }
            self.order.pop_front();
            self.entries.remove(&old);
        }
        self.entries.insert(k, until_ms);
        self.order.push_back((k, until_ms));
    }

    /// Counts one signature verification (made because the root was
    /// not here).
    pub fn note_check(&mut self) {
        self.checked = self.checked.saturating_add(1);
    }

    /// Signatures verified since start.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_until_their_expiry_and_the_cache_stays_bounded() {
        let mut c = RootCache::new(2);
        let (a, b, d) = ([1; 32], [2; 32], [3; 32]);
        c.insert(a, 100, 0);
        c.insert(b, 200, 0);
        assert!(c.contains(&a, 99) && !c.contains(&a, 100));
        // Full of live entries: the oldest makes room.
        c.insert(d, 300, 50);
        assert_eq!(c.len(), 2);
        assert!(!c.contains(&a, 50) && c.contains(&b, 50) && c.contains(&d, 50));
        // Expired entries go first.
        c.insert([5; 32], 400, 250);
        assert!(!c.contains(&b, 250) && c.contains(&d, 250) && c.contains(&[5; 32], 250));
        // Already expired: not kept.
        c.insert([4; 32], 10, 50);
        assert!(!c.contains(&[4; 32], 5));
        for i in 0..100u8 {
            c.insert([i; 32], 1000, 260);
        }
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn the_key_binds_the_signer_and_the_message() {
        assert_ne!(key_of(&[1; 32], b"m"), key_of(&[2; 32], b"m"));
        assert_ne!(key_of(&[1; 32], b"m"), key_of(&[1; 32], b"n"));
    }
}
