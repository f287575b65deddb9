//! Health checks of local and static endpoints, sans-IO.
//!
//! What is probed is an *endpoint* ([`target::ProbeTarget`]: probe kind,
//! host and port), never a route: any number of routes on one endpoint
//! cost one probe per interval, and its verdict fans out to all of them
//! ([`monitor::Monitor`]). A global rate cap paces probe starts evenly
//! ([`schedule::ProbeScheduler`]), so neither many routes nor many
//! endpoints turn agentd into a traffic source.
//!
//! This module counts verdicts. The daemon's driver runs the probes
//! (`GET /healthz` or a TCP connect) and feeds each result here. An
//! endpoint goes down after `failures` consecutive failed probes and comes
//! back after `recoveries` consecutive good ones (DESIGN §4, default 3/2),
//! so a single lost probe neither removes a working endpoint nor
//! reinstates a flapping one. A transition is what the driver applies to
//! the table with [`crate::table::RouteTable::set_health`] for every route
//! on the endpoint; health never removes a route.

pub mod monitor;
mod route_set;
pub mod schedule;
pub mod target;

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    failures: u32,
    recoveries: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThresholdError;

impl fmt::Display for ThresholdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("health failure and recovery thresholds must be at least 1")
    }
}

impl std::error::Error for ThresholdError {}

impl Default for Thresholds {
    /// The schema defaults of `agentd.health_fail_threshold` and
    /// `health_recover_threshold`.
    fn default() -> Self {
        let a = &uci_schema::Config::defaults().agentd;
        let n = |v: u64| u32::try_from(v).unwrap_or(u32::MAX).max(1);
        Thresholds {
            failures: n(a.health_fail_threshold),
            recoveries: n(a.health_recover_threshold),
        }
    }
}

impl Thresholds {
    pub fn new(failures: u32, recoveries: u32) -> Result<Thresholds, ThresholdError> {
        if failures == 0 || recoveries == 0 {
            return Err(ThresholdError);
        }
        Ok(Thresholds {
            failures,
            recoveries,
        })
    }
}

/// A change of verdict the table must learn about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    Down,
    Up,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    healthy: bool,
    /// Consecutive probe results that disagree with `healthy`.
    streak: u32,
}

/// Probe verdicts per key (an endpoint). A key never probed counts as
/// healthy: a fresh registration is usable at once and only evidence takes
/// it out.
#[derive(Debug)]
pub struct HealthTracker<K> {
    thresholds: Thresholds,
    states: HashMap<K, State>,
}

impl<K: Eq + Hash + Clone> Default for HealthTracker<K> {
    fn default() -> Self {
        HealthTracker::new(Thresholds::default())
    }
}

impl<K: Eq + Hash + Clone> HealthTracker<K> {
    pub fn new(thresholds: Thresholds) -> HealthTracker<K> {
        HealthTracker {
            thresholds,
            states: HashMap::new(),
        }
    }

    pub fn thresholds(&self) -> Thresholds {
        self.thresholds
    }

    /// Starts `key` as down without probe evidence (its routes already are
    /// unhealthy): it then needs `recoveries` good probes, like any down
    /// endpoint, and is never stuck down because no transition is due.
    pub fn assume_down(&mut self, key: &K) {
        self.states.insert(
            key.clone(),
            State {
                healthy: false,
                streak: 0,
            },
        );
    }

    /// Records one probe result; returns the transition it caused, if any.
    pub fn observe(&mut self, key: &K, ok: bool) -> Option<Transition> {
        let st = match self.states.get_mut(key) {
            Some(st) => st,
            None if ok => return None,
            None => self.states.entry(key.clone()).or_insert(State {
                healthy: true,
                streak: 0,
            }),
        };
        if ok == st.healthy {
            if ok {
                // Healthy with no failure streak is the default state.
                self.states.remove(key);
            } else {
                st.streak = 0;
            }
            return None;
        }
        st.streak += 1;
        let needed = if st.healthy {
            self.thresholds.failures
        } else {
            self.thresholds.recoveries
        };
        if st.streak < needed {
            return None;
        }
        st.healthy = ok;
        st.streak = 0;
        if ok {
            // Back to the default state: no need to remember it.
            self.states.remove(key);
            Some(Transition::Up)
        } else {
            Some(Transition::Down)
        }
    }

    pub fn is_healthy(&self, key: &K) -> bool {
        self.states.get(key).is_none_or(|s| s.healthy)
    }

    /// Drops the state of a key nothing refers to any more.
    pub fn forget(&mut self, key: &K) {
        self.states.remove(key);
    }

    /// Keys with state (down, or up with a failure streak).
    pub fn tracked(&self) -> usize {
        self.states.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> &'static str {
        "192.0.2.10:8080"
    }

    #[test]
    fn goes_down_after_three_consecutive_failures() {
        let mut h: HealthTracker<&str> = HealthTracker::default();
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), false), Some(Transition::Down));
        assert!(!h.is_healthy(&id()));
        assert_eq!(h.observe(&id(), false), None);
    }

    #[test]
    fn a_success_resets_the_failure_streak() {
        let mut h: HealthTracker<&str> = HealthTracker::default();
        h.observe(&id(), false);
        h.observe(&id(), false);
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), false), None);
        assert!(h.is_healthy(&id()));
        assert_eq!(h.observe(&id(), false), Some(Transition::Down));
    }

    #[test]
    fn recovers_after_two_consecutive_successes() {
        let mut h: HealthTracker<&str> = HealthTracker::new(Thresholds::new(1, 2).unwrap());
        assert_eq!(h.observe(&id(), false), Some(Transition::Down));
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), false), None);
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), true), Some(Transition::Up));
        assert!(h.is_healthy(&id()));
        assert_eq!(h.tracked(), 0);
    }

    #[test]
    fn healthy_routes_cost_no_state_and_forget_drops_it() {
        let mut h: HealthTracker<&str> = HealthTracker::default();
        for _ in 0..10 {
            assert_eq!(h.observe(&id(), true), None);
        }
        assert_eq!(h.tracked(), 0);
        h.observe(&id(), false);
        assert_eq!(h.tracked(), 1);
        h.forget(&id());
        assert_eq!(h.tracked(), 0);
    }

    #[test]
    fn an_endpoint_assumed_down_recovers_after_the_recovery_threshold() {
        let mut h: HealthTracker<&str> = HealthTracker::default();
        h.assume_down(&id());
        assert!(!h.is_healthy(&id()));
        assert_eq!(h.observe(&id(), true), None);
        assert_eq!(h.observe(&id(), true), Some(Transition::Up));
    }

    #[test]
    fn zero_thresholds_are_refused() {
        assert_eq!(Thresholds::new(0, 2), Err(ThresholdError));
        assert_eq!(Thresholds::new(3, 0), Err(ThresholdError));
    }
}
