//! When to probe which endpoint, sans-IO: time is an argument.
//!
//! Every known endpoint is probed once per `interval` — however many
//! routes use it, since the scheduler only knows endpoints — and probe
//! starts are paced by one global spacing:
//!
//! ```text
//! gap = max(1 s / max_per_s, interval / endpoints)
//! ```
//!
//! The first term is the rate cap: no window of one second ever holds more
//! than `max_per_s` starts. The second spreads the endpoints evenly over
//! the interval, so a hundred endpoints registered at once are not probed
//! in one burst every interval. When the cap is the tighter bound
//! (`endpoints > max_per_s × interval`), each endpoint is simply probed
//! less often than every interval, in due order (oldest first); nobody is
//! starved. At most `max_in_flight` probes run at once, whatever their
//! timeout.
//!
//! The driver calls [`ProbeScheduler::poll`] when
//! [`ProbeScheduler::next_wakeup`] says, runs the probe it is handed and
//! reports back with [`ProbeScheduler::complete`]; the next probe of that
//! endpoint is due one interval after the previous one started.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use crate::time::Millis;

/// How probes are paced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pacing {
    /// Each endpoint is probed this often (at most), milliseconds; ≥ 1.
    pub interval_ms: u64,
    /// Most probe starts per second over all endpoints; ≥ 1.
    pub max_per_s: u32,
    /// Most probes running at once; ≥ 1.
    pub max_in_flight: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Queued; due at this time.
    Waiting(Millis),
    /// Handed out at this time, result pending.
    InFlight(Millis),
    /// Removed while its probe ran: the slot is freed on completion.
    Orphan,
}

#[derive(Debug)]
struct Entry {
    /// Matches exactly one live queue element (older ones are stale).
    seq: u64,
    phase: Phase,
}

/// The probe queue of every known endpoint.
#[derive(Debug)]
pub struct ProbeScheduler<K> {
    pacing: Pacing,
    entries: HashMap<K, Entry>,
    /// (due, seq, key); elements whose seq no longer matches are stale.
    queue: BinaryHeap<Reverse<(Millis, u64, K)>>,
    seq: u64,
    /// Endpoints not orphaned.
    live: usize,
    in_flight: usize,
    /// No probe starts before this (microseconds on the `Millis` clock).
    next_start_us: u64,
    started: u64,
}

impl<K: Eq + Hash + Ord + Clone> ProbeScheduler<K> {
    pub fn new(pacing: Pacing) -> ProbeScheduler<K> {
        let mut s = ProbeScheduler {
            pacing,
            entries: HashMap::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            live: 0,
            in_flight: 0,
            next_start_us: 0,
            started: 0,
        };
        s.set_pacing(pacing);
        s
    }

    pub fn pacing(&self) -> Pacing {
        self.pacing
    }

    /// New pacing (reload); queued due times stay, the new spacing
    /// applies from the next start.
    pub fn set_pacing(&mut self, pacing: Pacing) {
        self.pacing = Pacing {
            interval_ms: pacing.interval_ms.max(1),
            max_per_s: pacing.max_per_s.max(1),
            max_in_flight: pacing.max_in_flight.max(1),
        };
    }

    /// Endpoints known (not counting removed ones whose probe still runs).
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Probes handed out since creation.
    pub fn started(&self) -> u64 {
        self.started
    }

    /// Learns an endpoint; its first probe is due at once (paced like the
    /// rest). Known endpoints keep their schedule.
    pub fn add(&mut self, key: K, now: Millis) {
        match self.entries.get_mut(&key) {
            Some(e) if e.phase == Phase::Orphan => {
                // Re-added while its old probe runs: that probe counts.
                e.phase = Phase::InFlight(now);
                self.live += 1;
            }
            Some(_) => {}
            None => {
                self.live += 1;
                self.seq += 1;
                self.entries.insert(
                    key.clone(),
                    Entry {
                        seq: self.seq,
                        phase: Phase::Waiting(now),
                    },
                );
                self.queue.push(Reverse((now, self.seq, key)));
            }
        }
    }

    /// Forgets an endpoint. A probe of it that is running keeps its
    /// in-flight slot until it completes.
    pub fn remove(&mut self, key: &K) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        match e.phase {
            Phase::Orphan => return,
            Phase::InFlight(_) => e.phase = Phase::Orphan,
            Phase::Waiting(_) => {
                self.entries.remove(key);
            }
        }
        self.live -= 1;
        self.compact();
    }

    /// The spacing of probe starts, microseconds.
    fn gap_us(&self) -> u64 {
        let cap = 1_000_000u64.div_ceil(u64::from(self.pacing.max_per_s));
        let spread = self.pacing.interval_ms.saturating_mul(1000) / self.live.max(1) as u64;
        cap.max(spread)
    }

    /// The endpoint to probe now, if one is due and pacing allows.
    pub fn poll(&mut self, now: Millis) -> Option<K> {
        if self.in_flight >= self.pacing.max_in_flight {
            return None;
        }
        let now_us = now.0.saturating_mul(1000);
        if now_us < self.next_start_us {
            return None;
        }
        let (due, key) = self.head()?;
        if due > now {
            return None;
        }
        self.queue.pop();
        if let Some(e) = self.entries.get_mut(&key) {
            e.phase = Phase::InFlight(now);
        }
        self.in_flight += 1;
        self.started += 1;
        // From `now`, not from the previous slot: a driver that wakes late
        // never catches up with a burst.
        self.next_start_us = now_us.saturating_add(self.gap_us());
        Some(key)
    }

    /// When `poll` may next hand out a probe; `None` while nothing is
    /// queued or every in-flight slot is taken (a completion comes first).
    pub fn next_wakeup(&mut self) -> Option<Millis> {
        if self.in_flight >= self.pacing.max_in_flight {
            return None;
        }
        let (due, _) = self.head()?;
        Some(due.max(Millis(self.next_start_us.div_ceil(1000))))
    }

    /// The result of the probe of `key` handed out earlier arrived; its
    /// next probe is due one interval after this one started. False when
    /// no probe of `key` was running (a stale or unknown result).
    pub fn complete(&mut self, key: &K) -> bool {
        let Some(e) = self.entries.get_mut(key) else {
            return false;
        };
        match e.phase {
            Phase::Waiting(_) => false,
            Phase::Orphan => {
                self.entries.remove(key);
                self.in_flight -= 1;
                true
            }
            Phase::InFlight(started) => {
                // Already past when the probe outlived the interval: then
                // it is due at once (paced like every other start).
                let due = started.saturating_add_ms(self.pacing.interval_ms);
                e.phase = Phase::Waiting(due);
                self.in_flight -= 1;
                self.enqueue(key.clone(), due);
                true
            }
        }
    }

    fn enqueue(&mut self, key: K, due: Millis) {
        self.seq += 1;
        if let Some(e) = self.entries.get_mut(&key) {
            e.seq = self.seq;
        }
        self.queue.push(Reverse((due, self.seq, key)));
    }

    /// The earliest live queue element, dropping stale ones on the way.
    fn head(&mut self) -> Option<(Millis, K)> {
        while let Some(Reverse((due, seq, key))) = self.queue.peek() {
            let live = self
                .entries
                .get(key)
                .is_some_and(|e| e.seq == *seq && matches!(e.phase, Phase::Waiting(_)));
            if live {
                return Some((*due, key.clone()));
            }
            self.queue.pop();
        }
        None
    }

    /// Rebuilds the queue when stale elements dominate it (many removals).
    fn compact(&mut self) {
        if self.queue.len() <= 2 * self.entries.len() + 64 {
            return;
        }
        let entries = &self.entries;
        self.queue.retain(|Reverse((_, seq, key))| {
            entries
                .get(key)
                .is_some_and(|e| e.seq == *seq && matches!(e.phase, Phase::Waiting(_)))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacing(interval_ms: u64, max_per_s: u32) -> Pacing {
        Pacing {
            interval_ms,
            max_per_s,
            max_in_flight: 64,
        }
    }

    /// Runs the scheduler on simulated time for `until_ms`: wakes exactly
    /// when asked, answers every probe `latency_ms` after it started.
    /// Returns the start times of probes, per key.
    fn simulate(s: &mut ProbeScheduler<u32>, until_ms: u64, latency_ms: u64) -> Vec<(Millis, u32)> {
        let mut started = Vec::new();
        let mut running: Vec<(Millis, u32)> = Vec::new();
        let mut now = Millis(0);
        while now.0 <= until_ms {
            running.sort();
            while let Some(&(done, k)) = running.first() {
                if done > now {
                    break;
                }
                running.remove(0);
                assert!(s.complete(&k));
            }
            while let Some(k) = s.poll(now) {
                started.push((now, k));
                running.push((now.saturating_add_ms(latency_ms), k));
            }
            let wake = s.next_wakeup();
            let done = running.iter().map(|r| r.0).min();
            let next = match (wake, done) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).expect("something is pending"),
            };
            assert!(next >= now, "wakeup in the past");
            now = next.max(Millis(now.0 + u64::from(next == now)));
        }
        started
    }

    fn most_in_any_window(starts: &[(Millis, u32)], window_ms: u64) -> usize {
        let t: Vec<u64> = starts.iter().map(|(m, _)| m.0).collect();
        let mut best = 0;
        let mut lo = 0;
        for hi in 0..t.len() {
            while t[hi] - t[lo] >= window_ms {
                lo += 1;
            }
            best = best.max(hi - lo + 1);
        }
        best
    }

    #[test]
    fn one_endpoint_is_probed_once_per_interval() {
        let mut s = ProbeScheduler::new(pacing(5_000, 50));
        s.add(7u32, Millis(0));
        let starts = simulate(&mut s, 60_000, 3);
        let times: Vec<u64> = starts.iter().map(|(t, _)| t.0).collect();
        assert_eq!(times, (0..=12).map(|i| i * 5_000).collect::<Vec<_>>());
    }

    #[test]
    fn ten_thousand_endpoints_never_exceed_the_cap() {
        let mut s = ProbeScheduler::new(pacing(5_000, 50));
        for k in 0..10_000u32 {
            s.add(k, Millis(0));
        }
        let starts = simulate(&mut s, 30_000, 40);
        assert!(most_in_any_window(&starts, 1_000) <= 50);
        // And the cap is used, not undercut: 50/s for 30 s (+ the start).
        assert!(starts.len() >= 30 * 50, "{}", starts.len());
        // Oldest first: nobody is probed twice before everyone once.
        let mut seen = std::collections::HashSet::new();
        assert!(starts.iter().all(|(_, k)| seen.insert(*k)));
    }

    #[test]
    fn few_endpoints_are_spread_over_the_interval_not_burst() {
        let mut s = ProbeScheduler::new(pacing(5_000, 50));
        for k in 0..10u32 {
            s.add(k, Millis(0));
        }
        let starts = simulate(&mut s, 20_000, 2);
        for w in starts.windows(2) {
            assert!(w[1].0 .0 - w[0].0 .0 >= 500, "{w:?}");
        }
        // Each endpoint still every interval (10 per 5 s).
        assert!(most_in_any_window(&starts, 5_000) <= 10);
        assert!(starts.len() >= 40);
    }

    #[test]
    fn slow_probes_are_bounded_by_the_in_flight_cap() {
        let mut s = ProbeScheduler::new(Pacing {
            interval_ms: 1_000,
            max_per_s: 10_000,
            max_in_flight: 4,
        });
        for k in 0..100u32 {
            s.add(k, Millis(0));
        }
        let handed = (0..100)
            .filter(|i| s.poll(Millis(10_000 + i * 100)).is_some())
            .count();
        assert_eq!(handed, 4);
        assert_eq!(s.in_flight(), 4);
        assert_eq!(s.next_wakeup(), None, "full: wait for a completion");
    }

    #[test]
    fn a_late_driver_does_not_get_a_burst() {
        let mut s = ProbeScheduler::new(pacing(1_000, 10));
        for k in 0..100u32 {
            s.add(k, Millis(0));
        }
        assert!(s.poll(Millis(0)).is_some());
        // The driver sleeps ten seconds; afterwards it still gets one.
        assert!(s.poll(Millis(10_000)).is_some());
        assert!(s.poll(Millis(10_000)).is_none());
        assert_eq!(s.next_wakeup(), Some(Millis(10_100)));
    }

    #[test]
    fn removed_endpoints_are_not_probed_and_free_their_slot_on_completion() {
        let mut s = ProbeScheduler::new(Pacing {
            interval_ms: 1_000,
            max_per_s: 1_000,
            max_in_flight: 1,
        });
        s.add(1u32, Millis(0));
        s.add(2u32, Millis(0));
        let first = s.poll(Millis(0)).unwrap();
        s.remove(&first);
        assert_eq!(s.len(), 1);
        assert_eq!(s.poll(Millis(5)), None, "slot still held by the orphan");
        assert!(s.complete(&first));
        let second = s.poll(Millis(1_000)).unwrap();
        assert_ne!(first, second);
        s.remove(&second);
        assert!(s.complete(&second));
        assert!(s.is_empty());
        assert_eq!(s.next_wakeup(), None);
        assert!(!s.complete(&second), "unknown result ignored");
    }

    #[test]
    fn many_adds_and_removes_keep_the_queue_small() {
        let mut s = ProbeScheduler::new(pacing(1_000, 50));
        for round in 0..100u32 {
            for k in 0..100u32 {
                s.add(round * 1000 + k, Millis(0));
            }
            for k in 0..100u32 {
                s.remove(&(round * 1000 + k));
            }
        }
        assert!(s.is_empty());
        assert!(s.queue.len() <= 64 + 100, "{}", s.queue.len());
    }

    #[test]
    fn new_pacing_keeps_the_schedule() {
        let mut s = ProbeScheduler::new(pacing(1_000, 50));
        s.add(1u32, Millis(0));
        s.add(2u32, Millis(0));
        let k = s.poll(Millis(0)).unwrap();
        s.set_pacing(pacing(2_000, 5));
        assert_eq!(s.len(), 2);
        assert_eq!(s.in_flight(), 1);
        assert!(s.complete(&k));
        // The other one is still due at the slot the old spacing set
        // (1 s / 2 endpoints); the new spacing applies from the next start.
        assert_eq!(s.next_wakeup(), Some(Millis(500)));
        assert_eq!(s.poll(Millis(500)), Some(3 - k));
        assert_eq!(
            s.next_wakeup(),
            Some(Millis(2_000)),
            "k, one new interval on"
        );
    }
}
