//! Replay protection for forwarding assertions: a bounded cache of the
//! nonces of live assertions, kept as sliding windows.
//!
//! A nonce is `epoch (8 bytes) ‖ sequence (8 bytes, big endian)`. A
//! gateway draws its epoch at random when it starts and numbers the
//! assertions it sends to each router 1, 2, 3…, so the receiver keeps, per
//! (signer, epoch), the highest sequence seen and a bitmap of the
//! [`WINDOW`] before it — the anti-replay window of IPsec (RFC 4303
//! §3.4.3) — instead of one entry per call: one sending gateway costs one
//! entry whatever its rate, where a set of nonces held for an assertion's
//! lifetime (60 s with the default ttl and skew) would cap a receiver at
//! `capacity / 60` calls per second.
//!
//! Nothing live is ever forgotten: a sequence below the window is refused
//! (`assertion_out_of_window`), not accepted unchecked, and a window lives
//! until the last assertion it accepted has expired (plus skew). Each
//! sender holds at most `capacity` windows of its own; when its share is
//! full, a nonce of that sender that needs a new one is refused
//! (`assertion_cache_full`) and no other sender is touched. A sender that
//! draws random nonces spends one window per assertion, which is just the
//! old bound, on itself alone. Senders are linked routers (the mTLS link
//! authenticates the signer), so the whole is bounded by the link set.
//! Sans-IO: time is an argument.

use std::collections::{BTreeSet, HashMap};

use crate::peer::assertion::AssertionError;

/// Sequences tracked below the highest one: how far assertions of one
/// sender may be reordered (concurrent h2 streams finish out of order;
/// a connection carries at most 256 at once).
pub const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

type Key = (Box<str>, u64);

#[derive(Debug)]
struct Window {
    /// Highest sequence accepted.
    top: u64,
    /// Bit `i` set: sequence `top - i` was accepted (bit 0 is `top`).
    seen: [u64; WORDS],
    /// When every assertion this window accepted is void.
    until: u64,
}

impl Window {
    fn new(seq: u64, until: u64) -> Window {
        let mut seen = [0u64; WORDS];
        seen[0] = 1;
        Window {
            top: seq,
            seen,
            until,
        }
    }

    /// Records `seq`, or says why not.
    fn accept(&mut self, seq: u64) -> Result<(), AssertionError> {
        if seq > self.top {
            self.shift(seq - self.top);
            self.top = seq;
            self.seen[0] |= 1;
            return Ok(());
        }
        let back = self.top - seq;
        if back >= WINDOW {
            return Err(AssertionError::OutOfWindow);
        }
        let (word, bit) = ((back / 64) as usize, back % 64);
        if self.seen[word] & (1 << bit) != 0 {
            return Err(AssertionError::Replayed);
        }
        self.seen[word] |= 1 << bit;
        Ok(())
    }

    /// Moves every mark `by` places older (bit i → bit i + by).
    fn shift(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WORDS];
            return;
        }
        let words = (by / 64) as usize;
        let bits = (by % 64) as u32;
        for i in (0..WORDS).rev() {
            let hi = i.checked_sub(words).map_or(0, |j| self.seen[j]);
            let lo = i.checked_sub(words + 1).map_or(0, |j| self.seen[j]);
            self.seen[i] = if bits == 0 {
                hi
            } else {
                (hi << bits) | (lo >> (64 - bits))
            };
        }
    }
}

/// The windows of live senders, bounded.
#[derive(Debug)]
pub struct ReplayCache {
    /// Windows one sender may hold.
    capacity: usize,
    windows: HashMap<Key, Window>,
    /// Windows held per sender.
    held: HashMap<Box<str>, usize>,
    by_expiry: BTreeSet<(u64, Key)>,
}

impl ReplayCache {
    /// `gateway.replay_cache` windows at most.
    pub fn new(capacity: usize) -> ReplayCache {
        ReplayCache {
            capacity: capacity.max(1),
            windows: HashMap::new(),
            held: HashMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }

    /// Windows held (live senders, or random-nonce assertions).
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Records `nonce` of an assertion signed by `source` that is void
    /// after `until_ms`; refuses a nonce seen while live, one below its
    /// window, and one needing a new window when the cache is full.
    pub fn insert(
        &mut self,
        source: &str,
        nonce: [u8; 16],
        until_ms: u64,
        now_ms: u64,
    ) -> Result<(), AssertionError> {
        self.forget_expired(now_ms);
        let (epoch, seq) = split(nonce);
        let key: Key = (source.into(), epoch);
        let full = self.held.get(source).is_some_and(|n| *n >= self.capacity);
        match self.windows.get_mut(&key) {
            Some(w) => {
                w.accept(seq)?;
                if until_ms > w.until {
                    self.by_expiry.remove(&(w.until, key.clone()));
                    w.until = until_ms;
                    self.by_expiry.insert((until_ms, key));
                }
                Ok(())
            }
            None if full => Err(AssertionError::CacheFull),
            None => {
                *self.held.entry(key.0.clone()).or_default() += 1;
                self.by_expiry.insert((until_ms, key.clone()));
                self.windows.insert(key, Window::new(seq, until_ms));
                Ok(())
            }
        }
    }

    fn forget_expired(&mut self, now_ms: u64) {
        while let Some((until, _)) = self.by_expiry.first() {
            if *until > now_ms {
                break;
            }
            if let Some((_, key)) = self.by_expiry.pop_first() {
                self.windows.remove(&key);
                if let Some(n) = self.held.get_mut(&key.0) {
                    *n -= 1;
                    if *n == 0 {
                        self.held.remove(&key.0);
                    }
                }
            }
        }
    }
}

/// `(epoch, sequence)` of a nonce.
pub fn split(nonce: [u8; 16]) -> (u64, u64) {
    let mut e = [0u8; 8];
    let mut s = [0u8; 8];
    e.copy_from_slice(&nonce[..8]);
    s.copy_from_slice(&nonce[8..]);
    (u64::from_be_bytes(e), u64::from_be_bytes(s))
}

/// The nonce of sequence `seq` in `epoch`.
pub fn nonce(epoch: u64, seq: u64) -> [u8; 16] {
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&epoch.to_be_bytes());
    n[8..].copy_from_slice(&seq.to_be_bytes());
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;

    #[test]
    fn one_sender_costs_one_window_at_any_rate() {
        let mut c = ReplayCache::new(1);
        for seq in 1..=100_000 {
            c.insert("router-c", nonce(7, seq), NOW + 60_000, NOW)
                .unwrap();
        }
        assert_eq!(c.len(), 1);
        assert_eq!(
            c.insert("router-c", nonce(7, 99_999), NOW + 60_000, NOW),
            Err(AssertionError::Replayed)
        );
    }

    #[test]
    fn reordering_within_the_window_is_accepted_once_and_older_is_refused() {
        let mut c = ReplayCache::new(8);
        let n = |s| nonce(1, s);
        c.insert("b", n(2000), NOW + 10, NOW).unwrap();
        // Everything in the window behind the top, once each.
        for s in (2000 - WINDOW + 1..2000).rev() {
            c.insert("b", n(s), NOW + 10, NOW).unwrap();
        }
        for s in [1999, 1500, 2000 - WINDOW + 1] {
            assert_eq!(
                c.insert("b", n(s), NOW + 10, NOW),
                Err(AssertionError::Replayed),
                "{s}"
            );
        }
        assert_eq!(
            c.insert("b", n(2000 - WINDOW), NOW + 10, NOW),
            Err(AssertionError::OutOfWindow),
            "below the window: refused, never taken on trust"
        );
        // The window moves with the top, keeping what it saw.
        c.insert("b", n(2100), NOW + 10, NOW).unwrap();
        assert_eq!(
            c.insert("b", n(2000), NOW + 10, NOW),
            Err(AssertionError::Replayed)
        );
        c.insert("b", n(2050), NOW + 10, NOW).unwrap();
        assert_eq!(
            c.insert("b", n(2100 - WINDOW), NOW + 10, NOW),
            Err(AssertionError::OutOfWindow)
        );
        // A jump beyond the window clears it.
        c.insert("b", n(10_000), NOW + 10, NOW).unwrap();
        c.insert("b", n(10_000 - WINDOW + 1), NOW + 10, NOW)
            .unwrap();
        assert_eq!(
            c.insert("b", n(2100), NOW + 10, NOW),
            Err(AssertionError::OutOfWindow)
        );
    }

    #[test]
    fn shifting_by_every_amount_keeps_exactly_the_marks_in_range() {
        for by in [1, 7, 63, 64, 65, 127, 128, 500, 1023, 1024, 5000] {
            let mut w = Window::new(100_000, 0);
            for back in [1u64, 2, 63, 64, 65, 300, 1000, 1023] {
                w.accept(100_000 - back).unwrap();
            }
            let before: Vec<u64> = (0..WINDOW)
                .filter(|b| w.seen[(b / 64) as usize] & (1 << (b % 64)) != 0)
                .collect();
            w.accept(100_000 + by).unwrap();
            let after: Vec<u64> = (0..WINDOW)
                .filter(|b| w.seen[(b / 64) as usize] & (1 << (b % 64)) != 0)
                .collect();
            let want: Vec<u64> = std::iter::once(0)
                .chain(before.iter().map(|b| b + by).filter(|b| *b < WINDOW))
                .collect();
            assert_eq!(after, want, "shift by {by}");
        }
    }

    #[test]
    fn senders_and_epochs_are_apart_and_a_full_share_refuses_new_ones() {
        let mut c = ReplayCache::new(1);
        c.insert("b", nonce(1, 5), NOW + 10, NOW).unwrap();
        // Another signer with the same nonce is another window, in its
        // own share.
        c.insert("c", nonce(1, 5), NOW + 20, NOW).unwrap();
        assert_eq!(
            c.insert("b", nonce(2, 1), NOW + 30, NOW),
            Err(AssertionError::CacheFull),
            "a restarted sender needs a window its full share does not have"
        );
        // Known windows keep working when full.
        c.insert("b", nonce(1, 6), NOW + 10, NOW).unwrap();
        // The first window lives until its last assertion expired.
        c.insert("b", nonce(1, 7), NOW + 15, NOW + 1).unwrap();
        assert_eq!(
            c.insert("b", nonce(2, 1), NOW + 30, NOW + 10),
            Err(AssertionError::CacheFull)
        );
        c.insert("b", nonce(2, 1), NOW + 30, NOW + 15).unwrap();
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_neighbour_that_fills_its_windows_never_exhausts_another() {
        let mut c = ReplayCache::new(16);
        // router-x draws random epochs: one window per assertion.
        let refused = (0..64u64)
            .filter(|i| {
                c.insert("router-x", nonce(1000 + i, 1), NOW + 60, NOW)
                    .is_err()
            })
            .count();
        assert_eq!(refused, 64 - 16, "router-x is held to its own share");
        // Every honest neighbour still gets its windows, restarts included.
        for (n, router) in ["router-a", "router-b", "router-c"].iter().enumerate() {
            for epoch in 0..16u64 {
                c.insert(router, nonce(epoch + 1, n as u64 + 1), NOW + 60, NOW)
                    .unwrap();
            }
        }
        assert_eq!(c.len(), 4 * 16);
        // Expired windows give the share back.
        c.insert("router-x", nonce(7, 1), NOW + 120, NOW + 61)
            .unwrap();
    }
}
