//! When to dial a peer (or a relay) again: exponential backoff with full jitter,
//! sans-IO (time and randomness are arguments, so tests replay it).
//!
//! After a failed dial (TCP refused, TLS handshake refused, a session
//! that closed before it was up for long) the next attempt waits a
//! uniformly random time in `0..=ceiling`, and the ceiling doubles from
//! `initial_ms` up to `max_ms`. Full jitter spreads the routers of a mesh
//! that lost the same peer, so they do not reconnect in lockstep. A
//! session that stayed up for `stable_ms` proves the peer healthy: the
//! next loss starts over at `initial_ms`, so a single flap reconnects in
//! a fraction of a second.

/// The schedule of one peer's dialer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// Ceiling of the first retry.
    pub initial_ms: u64,
    /// Highest ceiling.
    pub max_ms: u64,
    /// A session up this long resets the schedule.
    pub stable_ms: u64,
}

impl BackoffConfig {
    /// 250 ms doubling to 30 s; a session up for 30 s resets it.
    pub const DEFAULT: BackoffConfig = BackoffConfig {
        initial_ms: 250,
        max_ms: 30_000,
        stable_ms: 30_000,
    };
}

/// Backoff state of one peer.
#[derive(Debug, Clone)]
pub struct Backoff {
    cfg: BackoffConfig,
    /// Failures since the last reset.
    failures: u32,
    /// When the current session came up, if one is up.
    up_since: Option<u64>,
}

impl Backoff {
    pub fn new(cfg: BackoffConfig) -> Backoff {
        Backoff {
            cfg,
            failures: 0,
            up_since: None,
        }
    }

    /// The current ceiling: `initial_ms * 2^failures`, capped at `max_ms`.
    pub fn ceiling_ms(&self) -> u64 {
        let factor = 1u64.checked_shl(self.failures.min(63)).unwrap_or(u64::MAX);
        self.cfg
            .initial_ms
            .saturating_mul(factor)
            .min(self.cfg.max_ms)
    }

    /// A dial failed (or a session ended): the delay before the next
    /// attempt, drawn from `rng`; the ceiling grows for the one after.
    pub fn failed(&mut self, rng: &mut Rng) -> u64 {
        let delay = rng.below_inclusive(self.ceiling_ms());
        self.failures = self.failures.saturating_add(1);
        delay
    }

    /// A session reached Established.
    pub fn session_up(&mut self, now_ms: u64) {
        self.up_since = Some(now_ms);
    }

    /// The session ended: if it had been up for `stable_ms` the schedule
    /// starts over. Returns the delay before the next dial.
    pub fn session_down(&mut self, now_ms: u64, rng: &mut Rng) -> u64 {
        if let Some(since) = self.up_since.take() {
            if now_ms.saturating_sub(since) >= self.cfg.stable_ms {
                self.failures = 0;
            }
        }
        self.failed(rng)
    }

    /// Failures since the last reset (for `agentctl peers`).
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// A small deterministic generator (SplitMix64) for jitter. Not for
/// secrets: it only spreads reconnect times.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn seeded(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max` (the modulo bias is irrelevant for jitter
    /// ranges far below 2^64).
    pub fn below_inclusive(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(n) => self.next_u64() % n,
            None => self.next_u64(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CFG: BackoffConfig = BackoffConfig::DEFAULT;

    #[test]
    fn ceilings_double_from_250_ms_to_30_s_and_stay_there() {
        let mut b = Backoff::new(CFG);
        let mut rng = Rng::seeded(7);
        let mut ceilings = Vec::new();
        for _ in 0..12 {
            ceilings.push(b.ceiling_ms());
            b.failed(&mut rng);
        }
        assert_eq!(
            ceilings,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000, 30000]
        );
    }

    #[test]
    fn every_delay_is_within_its_ceiling_and_jitter_spreads_them() {
        let mut rng = Rng::seeded(42);
        let mut delays = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let mut b = Backoff::new(CFG);
            for _ in 0..20 {
                let ceiling = b.ceiling_ms();
                let d = b.failed(&mut rng);
                assert!(d <= ceiling, "{d} > {ceiling}");
                delays.insert(d);
            }
        }
        // Full jitter: many distinct values, some well below the ceiling.
        assert!(delays.len() > 1000, "{}", delays.len());
        assert!(delays.iter().any(|d| *d < 100));
    }

    #[test]
    fn same_seed_same_schedule() {
        let run = |seed| {
            let mut b = Backoff::new(CFG);
            let mut rng = Rng::seeded(seed);
            (0..10).map(|_| b.failed(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn a_session_up_for_the_stable_time_resets_the_schedule() {
        let mut b = Backoff::new(CFG);
        let mut rng = Rng::seeded(3);
        for _ in 0..6 {
            b.failed(&mut rng);
        }
        assert_eq!(b.ceiling_ms(), 16000);
        b.session_up(1_000);
        let d = b.session_down(1_000 + CFG.stable_ms, &mut rng);
        assert!(d <= CFG.initial_ms, "{d}");
        assert_eq!(b.failures(), 1);
        assert_eq!(b.ceiling_ms(), 500);
    }

    #[test]
    fn a_short_session_keeps_backing_off() {
        let mut b = Backoff::new(CFG);
        let mut rng = Rng::seeded(3);
        for _ in 0..6 {
            b.failed(&mut rng);
        }
        b.session_up(1_000);
        b.session_down(1_000 + CFG.stable_ms - 1, &mut rng);
        assert_eq!(b.failures(), 7);
        assert_eq!(b.ceiling_ms(), 30000);
        // A down without an up (dial failed) grows it too.
        b.session_down(50_000, &mut rng);
        assert_eq!(b.failures(), 8);
    }

    #[test]
    fn huge_failure_counts_saturate() {
        let mut b = Backoff::new(BackoffConfig {
            initial_ms: u64::MAX / 2,
            max_ms: u64::MAX,
            stable_ms: 1,
        });
        let mut rng = Rng::seeded(0);
        for _ in 0..100 {
            b.failed(&mut rng);
        }
        assert_eq!(b.ceiling_ms(), u64::MAX);
        b.failed(&mut rng);
        assert_eq!(b.failures(), 101);
    }
}
